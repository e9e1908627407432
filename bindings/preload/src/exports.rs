//! The C entry points the library exports. Each decides through [`crate::calls`] and
//! otherwise calls the `PMPI_*` symbol with the same arguments, so MPI sees exactly what
//! the application passed.

#![allow(non_snake_case)]

use std::ffi::c_void;
use std::os::raw::{c_char, c_int};

use mpi::ffi;

use crate::abi::{self, MPI_Comm, MPI_Datatype, MPI_Op, MPI_Request, MPI_Status, SUCCESS};
use crate::classify::Call;
use crate::{
    allgather, allgatherv, alltoall, alltoallv, calls, collective, completion, gather, gatherv,
    profile, scatter, state,
};

/// Drops the cached answer for the communicator `*comm` before MPI frees it (MPI reuses
/// handles).
pub(crate) fn forget(comm: *const MPI_Comm) {
    if !comm.is_null() {
        // SAFETY: a non-null pointer to the application's handle.
        let c = unsafe { *comm };
        abi::own(Some(c), || state::forget_comm(c));
    }
}

/// The profile's bytes of a call (`count` elements of `dt`), or where `buf` is
/// `MPI_IN_PLACE` those of the other side (`other_count` of `other_type`).
pub(crate) fn block(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    other_count: c_int,
    other_type: MPI_Datatype,
) -> u64 {
    let (count, dt) = block_of(buf, count, dt, other_count, other_type);
    abi::bytes_of(count, dt)
}

/// The count and datatype of [`block`]'s block, for the profile's span.
#[inline(always)]
fn block_of(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    other_count: c_int,
    other_type: MPI_Datatype,
) -> (c_int, MPI_Datatype) {
    if buf == abi::in_place() {
        (other_count, other_type)
    } else {
        (count, dt)
    }
}

/// The ranks a count array of `comm` has an entry for (the remote group's, for an
/// intercommunicator's Alltoallv), and this rank's entry.
fn peers_and_rank(comm: MPI_Comm) -> (usize, usize) {
    let (mut inter, mut n, mut rank) = (0, 0, 0);
    // SAFETY: `comm` is the application's communicator; writes ints. An invalid one
    // leaves them 0 (the call itself then fails in MPI).
    unsafe {
        ffi::PMPI_Comm_test_inter(comm, &mut inter);
        if inter != 0 {
            ffi::PMPI_Comm_remote_size(comm, &mut n);
        } else {
            ffi::PMPI_Comm_size(comm, &mut n);
        }
        ffi::PMPI_Comm_rank(comm, &mut rank);
    }
    (n.max(0) as usize, rank.max(0) as usize)
}

/// The profile's bytes of a call whose block at this rank is this rank's entry of
/// `counts` of `dt` (a Reduce_scatter's).
///
/// # Safety
/// `counts` is null or holds an entry per rank of `comm`.
pub(crate) unsafe fn own_block(counts: *const c_int, comm: MPI_Comm, dt: MPI_Datatype) -> u64 {
    if counts.is_null() {
        return 0;
    }
    let (n, rank) = peers_and_rank(comm);
    if rank >= n {
        return 0;
    }
    // SAFETY: per the contract, `rank` < the ranks of `comm`.
    abi::bytes_of(unsafe { *counts.add(rank) }, dt)
}

/// The profile's bytes of a v-form call: `count` elements of `dt`, or where `buf` is
/// `MPI_IN_PLACE` this rank's entry of `counts` of `counts_type` (a Gatherv's,
/// Allgatherv's or Scatterv's).
///
/// # Safety
/// Where `buf` is `MPI_IN_PLACE`, `counts` is null or holds an entry per rank of `comm`.
pub(crate) unsafe fn block_v(
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    counts: *const c_int,
    counts_type: MPI_Datatype,
    comm: MPI_Comm,
) -> u64 {
    if buf == abi::in_place() {
        // SAFETY: per the contract.
        unsafe { own_block(counts, comm, counts_type) }
    } else {
        abi::bytes_of(count, dt)
    }
}

/// The profile's bytes of an Alltoallv: the mean of its send counts of `send_type` (the
/// receive ones where it is in place).
///
/// # Safety
/// `send_counts` (or `recv_counts`, in place) is null or holds an entry per peer of `comm`.
pub(crate) unsafe fn mean_block_v(
    send: *const c_void,
    send_counts: *const c_int,
    send_type: MPI_Datatype,
    recv_counts: *const c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
) -> u64 {
    let (counts, dt) = if send == abi::in_place() {
        (recv_counts, recv_type)
    } else {
        (send_counts, send_type)
    };
    let (n, _) = peers_and_rank(comm);
    if counts.is_null() || n == 0 {
        return 0;
    }
    // SAFETY: per the contract, `n` entries.
    mean_bytes(unsafe { std::slice::from_raw_parts(counts, n) }, dt)
}

/// The mean of `counts` elements of `dt`, in bytes.
fn mean_bytes(counts: &[c_int], dt: MPI_Datatype) -> u64 {
    let elements: u64 = counts.iter().map(|&c| c.max(0) as u64).sum();
    elements * abi::bytes_of(1, dt) / counts.len().max(1) as u64
}

/// topo-run's part of `MPI_Finalize` (C and Fortran): teardown and statistics.
pub(crate) fn teardown() {
    abi::own(None, state::finalize);
}

/// `MPI_Init`: MPI's, then topo-run's setup.
///
/// # Safety
/// As `MPI_Init`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int {
    // SAFETY: the application's own arguments, passed on.
    let rc = unsafe { ffi::PMPI_Init(argc, argv) };
    if rc == SUCCESS {
        abi::own(None, state::init);
    }
    rc
}

/// `MPI_Init_thread`: MPI's, then topo-run's setup (inactive at `MPI_THREAD_MULTIPLE`).
///
/// # Safety
/// As `MPI_Init_thread`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Init_thread(
    argc: *mut c_int,
    argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    // SAFETY: the application's own arguments, passed on.
    let rc = unsafe { ffi::PMPI_Init_thread(argc, argv, required, provided) };
    if rc == SUCCESS {
        abi::own(None, state::init);
    }
    rc
}

/// `MPI_Finalize`: topo-run's teardown (and statistics), then MPI's.
///
/// # Safety
/// As `MPI_Finalize`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Finalize() -> c_int {
    teardown();
    // SAFETY: no arguments.
    unsafe { ffi::PMPI_Finalize() }
}

/// `MPI_Comm_free`: forgets the communicator, then MPI frees it.
///
/// # Safety
/// As `MPI_Comm_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_free(comm: *mut MPI_Comm) -> c_int {
    forget(comm);
    // SAFETY: the application's own argument, passed on.
    unsafe { ffi::PMPI_Comm_free(comm) }
}

/// `MPI_Comm_disconnect`: as `MPI_Comm_free`.
///
/// # Safety
/// As `MPI_Comm_disconnect`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_disconnect(comm: *mut MPI_Comm) -> c_int {
    forget(comm);
    // SAFETY: the application's own argument, passed on.
    unsafe { ffi::PMPI_Comm_disconnect(comm) }
}

/// `MPI_Bcast`.
///
/// # Safety
/// As `MPI_Bcast`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Bcast(
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    let _profile = profile::span_of(Call::Bcast, comm, count, dt);
    collective::entry_rc(
        comm,
        // SAFETY: the application's arguments of this call.
        || unsafe { calls::bcast(buf, count, dt, root, comm) },
        // SAFETY: passed on unchanged.
        || unsafe {
            completion::handed(
                || ffi::PMPI_Bcast(buf, count, dt, root, comm),
                |req| ffi::PMPI_Ibcast(buf, count, dt, root, comm, req),
            )
        },
    )
}

/// `MPI_Reduce`.
///
/// # Safety
/// As `MPI_Reduce`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Reduce(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    let _profile = profile::span_of(Call::Reduce, comm, count, dt);
    collective::reduction(
        comm,
        op,
        // SAFETY: the application's arguments of this call.
        || unsafe { calls::reduce(send, recv, count, dt, op, root, comm) },
        // SAFETY: passed on unchanged.
        || unsafe {
            completion::handed(
                || ffi::PMPI_Reduce(send, recv, count, dt, op, root, comm),
                |req| ffi::PMPI_Ireduce(send, recv, count, dt, op, root, comm, req),
            )
        },
    )
}

/// `MPI_Allreduce`.
///
/// # Safety
/// As `MPI_Allreduce`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Allreduce(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    let _profile = profile::span_of(Call::Allreduce, comm, count, dt);
    collective::reduction(
        comm,
        op,
        // SAFETY: the application's arguments of this call.
        || unsafe { calls::allreduce(send, recv, count, dt, op, comm) },
        // SAFETY: passed on unchanged.
        || unsafe {
            completion::handed(
                || ffi::PMPI_Allreduce(send, recv, count, dt, op, comm),
                |req| ffi::PMPI_Iallreduce(send, recv, count, dt, op, comm, req),
            )
        },
    )
}

/// `MPI_Scan`.
///
/// # Safety
/// As `MPI_Scan`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Scan(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    let _profile = profile::span_of(Call::Scan, comm, count, dt);
    // SAFETY: the application's arguments of this call.
    unsafe { scan(send, recv, count, dt, op, comm, false) }
}

/// `MPI_Exscan`.
///
/// # Safety
/// As `MPI_Exscan`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Exscan(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    let _profile = profile::span_of(Call::Exscan, comm, count, dt);
    // SAFETY: the application's arguments of this call.
    unsafe { scan(send, recv, count, dt, op, comm, true) }
}

/// `MPI_Reduce_scatter_block`.
///
/// # Safety
/// As `MPI_Reduce_scatter_block`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Reduce_scatter_block(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    let _profile = profile::span_of(Call::ReduceScatterBlock, comm, count, dt);
    collective::reduction(
        comm,
        op,
        // SAFETY: the application's arguments of this call.
        || unsafe { calls::reduce_scatter_block(send, recv, count, dt, op, comm) },
        // SAFETY: passed on unchanged.
        || unsafe {
            completion::handed(
                || ffi::PMPI_Reduce_scatter_block(send, recv, count, dt, op, comm),
                |req| ffi::PMPI_Ireduce_scatter_block(send, recv, count, dt, op, comm, req),
            )
        },
    )
}

/// `MPI_Reduce_scatter`.
///
/// # Safety
/// As `MPI_Reduce_scatter`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Reduce_scatter(
    send: *const c_void,
    recv: *mut c_void,
    counts: *const c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    // SAFETY: the application's arguments of this call.
    let _profile = profile::span(Call::ReduceScatter, comm, || unsafe {
        own_block(counts, comm, dt)
    });
    collective::reduction(
        comm,
        op,
        // SAFETY: the application's arguments of this call.
        || unsafe { calls::reduce_scatter(send, recv, counts, dt, op, comm) },
        // SAFETY: passed on unchanged.
        || unsafe {
            completion::handed(
                || ffi::PMPI_Reduce_scatter(send, recv, counts, dt, op, comm),
                |req| ffi::PMPI_Ireduce_scatter(send, recv, counts, dt, op, comm, req),
            )
        },
    )
}

/// `MPI_Scan` (`exclusive` false) or `MPI_Exscan` (true).
///
/// # Safety
/// As those calls.
unsafe fn scan(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    exclusive: bool,
) -> c_int {
    collective::reduction(
        comm,
        op,
        // SAFETY: the application's arguments of this call.
        || unsafe { calls::scan(send, recv, count, dt, op, comm, exclusive) },
        // SAFETY: passed on unchanged.
        || unsafe {
            completion::handed(
                || match exclusive {
                    false => ffi::PMPI_Scan(send, recv, count, dt, op, comm),
                    true => ffi::PMPI_Exscan(send, recv, count, dt, op, comm),
                },
                |req| match exclusive {
                    false => ffi::PMPI_Iscan(send, recv, count, dt, op, comm, req),
                    true => ffi::PMPI_Iexscan(send, recv, count, dt, op, comm, req),
                },
            )
        },
    )
}

/// `MPI_Gather`.
///
/// # Safety
/// As `MPI_Gather`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn MPI_Gather(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_count: c_int,
    recv_type: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    let (count, dt) = block_of(send, send_count, send_type, recv_count, recv_type);
    let _profile = profile::span_of(Call::Gather, comm, count, dt);
    collective::entry_rc(
        comm,
        // SAFETY: the application's arguments of this call.
        || unsafe {
            gather::gather(
                send, send_count, send_type, recv, recv_count, recv_type, root, comm,
            )
        },
        // SAFETY: passed on unchanged.
        || unsafe {
            completion::handed(
                || {
                    ffi::PMPI_Gather(
                        send, send_count, send_type, recv, recv_count, recv_type, root, comm,
                    )
                },
                |req| {
                    ffi::PMPI_Igather(
                        send, send_count, send_type, recv, recv_count, recv_type, root, comm, req,
                    )
                },
            )
        },
    )
}

/// `MPI_Scatter`.
///
/// # Safety
/// As `MPI_Scatter`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn MPI_Scatter(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_count: c_int,
    recv_type: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    let (count, dt) = block_of(recv, recv_count, recv_type, send_count, send_type);
    let _profile = profile::span_of(Call::Scatter, comm, count, dt);
    collective::entry_rc(
        comm,
        // SAFETY: the application's arguments of this call.
        || unsafe {
            scatter::scatter(
                send, send_count, send_type, recv, recv_count, recv_type, root, comm,
            )
        },
        // SAFETY: passed on unchanged.
        || unsafe {
            completion::handed(
                || {
                    ffi::PMPI_Scatter(
                        send, send_count, send_type, recv, recv_count, recv_type, root, comm,
                    )
                },
                |req| {
                    ffi::PMPI_Iscatter(
                        send, send_count, send_type, recv, recv_count, recv_type, root, comm, req,
                    )
                },
            )
        },
    )
}

/// `MPI_Allgather`.
///
/// # Safety
/// As `MPI_Allgather`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn MPI_Allgather(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_count: c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let (count, dt) = block_of(send, send_count, send_type, recv_count, recv_type);
    let _profile = profile::span_of(Call::Allgather, comm, count, dt);
    collective::entry_rc(
        comm,
        // SAFETY: the application's arguments of this call.
        || unsafe {
            allgather::allgather(
                send, send_count, send_type, recv, recv_count, recv_type, comm,
            )
        },
        // SAFETY: passed on unchanged.
        || unsafe {
            completion::handed(
                || {
                    ffi::PMPI_Allgather(
                        send, send_count, send_type, recv, recv_count, recv_type, comm,
                    )
                },
                |req| {
                    ffi::PMPI_Iallgather(
                        send, send_count, send_type, recv, recv_count, recv_type, comm, req,
                    )
                },
            )
        },
    )
}

/// `MPI_Alltoall`.
///
/// # Safety
/// As `MPI_Alltoall`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn MPI_Alltoall(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_count: c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    let (count, dt) = block_of(send, send_count, send_type, recv_count, recv_type);
    let _profile = profile::span_of(Call::Alltoall, comm, count, dt);
    collective::entry_rc(
        comm,
        // SAFETY: the application's arguments of this call.
        || unsafe {
            alltoall::alltoall(
                send, send_count, send_type, recv, recv_count, recv_type, comm,
            )
        },
        // SAFETY: passed on unchanged.
        || unsafe {
            completion::handed(
                || {
                    ffi::PMPI_Alltoall(
                        send, send_count, send_type, recv, recv_count, recv_type, comm,
                    )
                },
                |req| {
                    ffi::PMPI_Ialltoall(
                        send, send_count, send_type, recv, recv_count, recv_type, comm, req,
                    )
                },
            )
        },
    )
}

/// `MPI_Alltoallv`.
///
/// # Safety
/// As `MPI_Alltoallv`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn MPI_Alltoallv(
    send: *const c_void,
    send_counts: *const c_int,
    send_displs: *const c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_counts: *const c_int,
    recv_displs: *const c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    // SAFETY: the application's arguments of this call.
    let _profile = profile::span(Call::Alltoallv, comm, || unsafe {
        mean_block_v(send, send_counts, send_type, recv_counts, recv_type, comm)
    });
    collective::entry_rc(
        comm,
        // SAFETY: the application's arguments of this call.
        || unsafe {
            alltoallv::alltoallv(
                send,
                send_counts,
                send_displs,
                send_type,
                recv,
                recv_counts,
                recv_displs,
                recv_type,
                comm,
            )
        },
        // SAFETY: passed on unchanged.
        || unsafe {
            completion::handed(
                || {
                    ffi::PMPI_Alltoallv(
                        send,
                        send_counts,
                        send_displs,
                        send_type,
                        recv,
                        recv_counts,
                        recv_displs,
                        recv_type,
                        comm,
                    )
                },
                |req| {
                    ffi::PMPI_Ialltoallv(
                        send,
                        send_counts,
                        send_displs,
                        send_type,
                        recv,
                        recv_counts,
                        recv_displs,
                        recv_type,
                        comm,
                        req,
                    )
                },
            )
        },
    )
}

/// `MPI_Gatherv`.
///
/// # Safety
/// As `MPI_Gatherv`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn MPI_Gatherv(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_counts: *const c_int,
    displs: *const c_int,
    recv_type: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    // SAFETY: the application's arguments of this call.
    let _profile = profile::span(Call::Gatherv, comm, || unsafe {
        block_v(send, send_count, send_type, recv_counts, recv_type, comm)
    });
    collective::entry_rc(
        comm,
        // SAFETY: the application's arguments of this call.
        || unsafe {
            gatherv::gatherv(
                send,
                send_count,
                send_type,
                recv,
                recv_counts,
                displs,
                recv_type,
                root,
                comm,
            )
        },
        // SAFETY: passed on unchanged.
        || unsafe {
            completion::handed(
                || {
                    ffi::PMPI_Gatherv(
                        send,
                        send_count,
                        send_type,
                        recv,
                        recv_counts,
                        displs,
                        recv_type,
                        root,
                        comm,
                    )
                },
                |req| {
                    ffi::PMPI_Igatherv(
                        send,
                        send_count,
                        send_type,
                        recv,
                        recv_counts,
                        displs,
                        recv_type,
                        root,
                        comm,
                        req,
                    )
                },
            )
        },
    )
}

/// `MPI_Scatterv`.
///
/// # Safety
/// As `MPI_Scatterv`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn MPI_Scatterv(
    send: *const c_void,
    send_counts: *const c_int,
    displs: *const c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_count: c_int,
    recv_type: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    // SAFETY: the application's arguments of this call.
    let _profile = profile::span(Call::Scatterv, comm, || unsafe {
        block_v(recv, recv_count, recv_type, send_counts, send_type, comm)
    });
    collective::entry_rc(
        comm,
        // SAFETY: the application's arguments of this call.
        || unsafe {
            gatherv::scatterv(
                send,
                send_counts,
                displs,
                send_type,
                recv,
                recv_count,
                recv_type,
                root,
                comm,
            )
        },
        // SAFETY: passed on unchanged.
        || unsafe {
            completion::handed(
                || {
                    ffi::PMPI_Scatterv(
                        send,
                        send_counts,
                        displs,
                        send_type,
                        recv,
                        recv_count,
                        recv_type,
                        root,
                        comm,
                    )
                },
                |req| {
                    ffi::PMPI_Iscatterv(
                        send,
                        send_counts,
                        displs,
                        send_type,
                        recv,
                        recv_count,
                        recv_type,
                        root,
                        comm,
                        req,
                    )
                },
            )
        },
    )
}

/// `MPI_Allgatherv`.
///
/// # Safety
/// As `MPI_Allgatherv`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn MPI_Allgatherv(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_counts: *const c_int,
    displs: *const c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    // SAFETY: the application's arguments of this call.
    let _profile = profile::span(Call::Allgatherv, comm, || unsafe {
        block_v(send, send_count, send_type, recv_counts, recv_type, comm)
    });
    collective::entry_rc(
        comm,
        // SAFETY: the application's arguments of this call.
        || unsafe {
            allgatherv::allgatherv(
                send,
                send_count,
                send_type,
                recv,
                recv_counts,
                displs,
                recv_type,
                comm,
            )
        },
        // SAFETY: passed on unchanged.
        || unsafe {
            completion::handed(
                || {
                    ffi::PMPI_Allgatherv(
                        send,
                        send_count,
                        send_type,
                        recv,
                        recv_counts,
                        displs,
                        recv_type,
                        comm,
                    )
                },
                |req| {
                    ffi::PMPI_Iallgatherv(
                        send,
                        send_count,
                        send_type,
                        recv,
                        recv_counts,
                        displs,
                        recv_type,
                        comm,
                        req,
                    )
                },
            )
        },
    )
}

/// `MPI_Barrier`.
///
/// # Safety
/// As `MPI_Barrier`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Barrier(comm: MPI_Comm) -> c_int {
    let _profile = profile::span_of(Call::Barrier, comm, 0, abi::datatype_null());
    collective::entry(
        comm,
        || calls::barrier(comm),
        // SAFETY: passed on unchanged.
        || unsafe {
            completion::handed(
                || ffi::PMPI_Barrier(comm),
                |req| ffi::PMPI_Ibarrier(comm, req),
            )
        },
    )
}

/// `MPI_Ibcast`.
///
/// # Safety
/// As `MPI_Ibcast`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Ibcast(
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let _profile = profile::span_of(Call::Ibcast, comm, count, dt);
    collective::entry(
        comm,
        // SAFETY: the application's arguments of this call.
        || unsafe { calls::ibcast(buf, count, dt, root, comm, request) },
        // SAFETY: passed on unchanged.
        || unsafe { ffi::PMPI_Ibcast(buf, count, dt, root, comm, request) },
    )
}

/// `MPI_Ireduce`.
///
/// # Safety
/// As `MPI_Ireduce`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn MPI_Ireduce(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let _profile = profile::span_of(Call::Ireduce, comm, count, dt);
    collective::reduction(
        comm,
        op,
        // SAFETY: the application's arguments of this call.
        || unsafe { calls::ireduce(send, recv, count, dt, op, root, comm, request) },
        // SAFETY: passed on unchanged.
        || unsafe { ffi::PMPI_Ireduce(send, recv, count, dt, op, root, comm, request) },
    )
}

/// `MPI_Ireduce_scatter_block`.
///
/// # Safety
/// As `MPI_Ireduce_scatter_block`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Ireduce_scatter_block(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let _profile = profile::span_of(Call::IreduceScatterBlock, comm, count, dt);
    collective::reduction(
        comm,
        op,
        // SAFETY: the application's arguments of this call.
        || unsafe { calls::ireduce_scatter_block(send, recv, count, dt, op, comm, request) },
        // SAFETY: passed on unchanged.
        || unsafe { ffi::PMPI_Ireduce_scatter_block(send, recv, count, dt, op, comm, request) },
    )
}

/// `MPI_Ireduce_scatter`.
///
/// # Safety
/// As `MPI_Ireduce_scatter`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Ireduce_scatter(
    send: *const c_void,
    recv: *mut c_void,
    counts: *const c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the application's arguments of this call.
    let _profile = profile::span(Call::IreduceScatter, comm, || unsafe {
        own_block(counts, comm, dt)
    });
    collective::reduction(
        comm,
        op,
        // SAFETY: the application's arguments of this call.
        || unsafe { calls::ireduce_scatter(send, recv, counts, dt, op, comm, request) },
        // SAFETY: passed on unchanged.
        || unsafe { ffi::PMPI_Ireduce_scatter(send, recv, counts, dt, op, comm, request) },
    )
}

/// `MPI_Iallreduce`.
///
/// # Safety
/// As `MPI_Iallreduce`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Iallreduce(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let _profile = profile::span_of(Call::Iallreduce, comm, count, dt);
    collective::reduction(
        comm,
        op,
        // SAFETY: the application's arguments of this call.
        || unsafe { calls::iallreduce(send, recv, count, dt, op, comm, request) },
        // SAFETY: passed on unchanged.
        || unsafe { ffi::PMPI_Iallreduce(send, recv, count, dt, op, comm, request) },
    )
}

/// `MPI_Iscan`.
///
/// # Safety
/// As `MPI_Iscan`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Iscan(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let _profile = profile::span_of(Call::Iscan, comm, count, dt);
    // SAFETY: the application's arguments of this call.
    unsafe { iscan(send, recv, count, dt, op, comm, request, false) }
}

/// `MPI_Iexscan`.
///
/// # Safety
/// As `MPI_Iexscan`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Iexscan(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let _profile = profile::span_of(Call::Iexscan, comm, count, dt);
    // SAFETY: the application's arguments of this call.
    unsafe { iscan(send, recv, count, dt, op, comm, request, true) }
}

/// `MPI_Iscan` (`exclusive` false) or `MPI_Iexscan` (true).
///
/// # Safety
/// As those calls.
#[allow(clippy::too_many_arguments)]
unsafe fn iscan(
    send: *const c_void,
    recv: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    exclusive: bool,
) -> c_int {
    collective::reduction(
        comm,
        op,
        // SAFETY: the application's arguments of this call.
        || unsafe { calls::iscan(send, recv, count, dt, op, comm, request, exclusive) },
        // SAFETY: passed on unchanged.
        || unsafe {
            match exclusive {
                false => ffi::PMPI_Iscan(send, recv, count, dt, op, comm, request),
                true => ffi::PMPI_Iexscan(send, recv, count, dt, op, comm, request),
            }
        },
    )
}

/// `MPI_Ibarrier`.
///
/// # Safety
/// As `MPI_Ibarrier`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Ibarrier(comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
    let _profile = profile::span_of(Call::Ibarrier, comm, 0, abi::datatype_null());
    collective::entry(
        comm,
        // SAFETY: the application's arguments of this call.
        || unsafe { calls::ibarrier(comm, request) },
        // SAFETY: passed on unchanged.
        || unsafe { ffi::PMPI_Ibarrier(comm, request) },
    )
}

/// `MPI_Iallgather`.
///
/// # Safety
/// As `MPI_Iallgather`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn MPI_Iallgather(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_count: c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let (count, dt) = block_of(send, send_count, send_type, recv_count, recv_type);
    let _profile = profile::span_of(Call::Iallgather, comm, count, dt);
    collective::entry(
        comm,
        // SAFETY: the application's arguments of this call.
        || unsafe {
            allgather::iallgather(
                send, send_count, send_type, recv, recv_count, recv_type, comm, request,
            )
        },
        // SAFETY: passed on unchanged.
        || unsafe {
            ffi::PMPI_Iallgather(
                send, send_count, send_type, recv, recv_count, recv_type, comm, request,
            )
        },
    )
}

/// `MPI_Ialltoall`.
///
/// # Safety
/// As `MPI_Ialltoall`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn MPI_Ialltoall(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_count: c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let (count, dt) = block_of(send, send_count, send_type, recv_count, recv_type);
    let _profile = profile::span_of(Call::Ialltoall, comm, count, dt);
    collective::entry(
        comm,
        // SAFETY: the application's arguments of this call.
        || unsafe {
            alltoall::ialltoall(
                send, send_count, send_type, recv, recv_count, recv_type, comm, request,
            )
        },
        // SAFETY: passed on unchanged.
        || unsafe {
            ffi::PMPI_Ialltoall(
                send, send_count, send_type, recv, recv_count, recv_type, comm, request,
            )
        },
    )
}

/// `MPI_Igather`.
///
/// # Safety
/// As `MPI_Igather`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn MPI_Igather(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_count: c_int,
    recv_type: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let (count, dt) = block_of(send, send_count, send_type, recv_count, recv_type);
    let _profile = profile::span_of(Call::Igather, comm, count, dt);
    collective::entry(
        comm,
        // SAFETY: the application's arguments of this call.
        || unsafe {
            gather::igather(
                send, send_count, send_type, recv, recv_count, recv_type, root, comm, request,
            )
        },
        // SAFETY: passed on unchanged.
        || unsafe {
            ffi::PMPI_Igather(
                send, send_count, send_type, recv, recv_count, recv_type, root, comm, request,
            )
        },
    )
}

/// `MPI_Iscatter`.
///
/// # Safety
/// As `MPI_Iscatter`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn MPI_Iscatter(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_count: c_int,
    recv_type: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let (count, dt) = block_of(recv, recv_count, recv_type, send_count, send_type);
    let _profile = profile::span_of(Call::Iscatter, comm, count, dt);
    collective::entry(
        comm,
        // SAFETY: the application's arguments of this call.
        || unsafe {
            scatter::iscatter(
                send, send_count, send_type, recv, recv_count, recv_type, root, comm, request,
            )
        },
        // SAFETY: passed on unchanged.
        || unsafe {
            ffi::PMPI_Iscatter(
                send, send_count, send_type, recv, recv_count, recv_type, root, comm, request,
            )
        },
    )
}

/// `MPI_Igatherv`.
///
/// # Safety
/// As `MPI_Igatherv`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn MPI_Igatherv(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_counts: *const c_int,
    displs: *const c_int,
    recv_type: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the application's arguments of this call.
    let _profile = profile::span(Call::Igatherv, comm, || unsafe {
        block_v(send, send_count, send_type, recv_counts, recv_type, comm)
    });
    collective::entry(
        comm,
        // SAFETY: the application's arguments of this call.
        || unsafe {
            gatherv::igatherv(
                send,
                send_count,
                send_type,
                recv,
                recv_counts,
                displs,
                recv_type,
                root,
                comm,
                request,
            )
        },
        // SAFETY: passed on unchanged.
        || unsafe {
            ffi::PMPI_Igatherv(
                send,
                send_count,
                send_type,
                recv,
                recv_counts,
                displs,
                recv_type,
                root,
                comm,
                request,
            )
        },
    )
}

/// `MPI_Iscatterv`.
///
/// # Safety
/// As `MPI_Iscatterv`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn MPI_Iscatterv(
    send: *const c_void,
    send_counts: *const c_int,
    displs: *const c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_count: c_int,
    recv_type: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the application's arguments of this call.
    let _profile = profile::span(Call::Iscatterv, comm, || unsafe {
        block_v(recv, recv_count, recv_type, send_counts, send_type, comm)
    });
    collective::entry(
        comm,
        // SAFETY: the application's arguments of this call.
        || unsafe {
            gatherv::iscatterv(
                send,
                send_counts,
                displs,
                send_type,
                recv,
                recv_count,
                recv_type,
                root,
                comm,
                request,
            )
        },
        // SAFETY: passed on unchanged.
        || unsafe {
            ffi::PMPI_Iscatterv(
                send,
                send_counts,
                displs,
                send_type,
                recv,
                recv_count,
                recv_type,
                root,
                comm,
                request,
            )
        },
    )
}

/// `MPI_Iallgatherv`.
///
/// # Safety
/// As `MPI_Iallgatherv`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn MPI_Iallgatherv(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_counts: *const c_int,
    displs: *const c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the application's arguments of this call.
    let _profile = profile::span(Call::Iallgatherv, comm, || unsafe {
        block_v(send, send_count, send_type, recv_counts, recv_type, comm)
    });
    collective::entry(
        comm,
        // SAFETY: the application's arguments of this call.
        || unsafe {
            allgatherv::iallgatherv(
                send,
                send_count,
                send_type,
                recv,
                recv_counts,
                displs,
                recv_type,
                comm,
                request,
            )
        },
        // SAFETY: passed on unchanged.
        || unsafe {
            ffi::PMPI_Iallgatherv(
                send,
                send_count,
                send_type,
                recv,
                recv_counts,
                displs,
                recv_type,
                comm,
                request,
            )
        },
    )
}

/// `MPI_Ialltoallv`.
///
/// # Safety
/// As `MPI_Ialltoallv`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn MPI_Ialltoallv(
    send: *const c_void,
    send_counts: *const c_int,
    send_displs: *const c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_counts: *const c_int,
    recv_displs: *const c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: the application's arguments of this call.
    let _profile = profile::span(Call::Ialltoallv, comm, || unsafe {
        mean_block_v(send, send_counts, send_type, recv_counts, recv_type, comm)
    });
    collective::entry(
        comm,
        // SAFETY: the application's arguments of this call.
        || unsafe {
            alltoallv::ialltoallv(
                send,
                send_counts,
                send_displs,
                send_type,
                recv,
                recv_counts,
                recv_displs,
                recv_type,
                comm,
                request,
            )
        },
        // SAFETY: passed on unchanged.
        || unsafe {
            ffi::PMPI_Ialltoallv(
                send,
                send_counts,
                send_displs,
                send_type,
                recv,
                recv_counts,
                recv_displs,
                recv_type,
                comm,
                request,
            )
        },
    )
}

/// After MPI created `*newcomm` (with return code `rc`), gives it a context of its own if
/// it is congruent to world.
fn adopt(rc: c_int, comm: MPI_Comm, newcomm: *const MPI_Comm) -> c_int {
    if rc == SUCCESS && !newcomm.is_null() {
        // SAFETY: MPI wrote the new handle (maybe MPI_COMM_NULL) through this pointer.
        adopt_created(comm, unsafe { *newcomm });
    }
    rc
}

/// Gives `new`, just created from `comm` (C or Fortran), a context if it is congruent to
/// world.
pub(crate) fn adopt_created(comm: MPI_Comm, new: MPI_Comm) {
    abi::own(Some(comm), || state::adopt(comm, new));
}

/// `MPI_Comm_dup`: MPI's, then a context for the duplicate of a communicator congruent
/// to world.
///
/// # Safety
/// As `MPI_Comm_dup`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_dup(comm: MPI_Comm, newcomm: *mut MPI_Comm) -> c_int {
    // SAFETY: the application's own arguments, passed on.
    adopt(unsafe { ffi::PMPI_Comm_dup(comm, newcomm) }, comm, newcomm)
}

/// `MPI_Comm_dup_with_info`: as `MPI_Comm_dup`.
///
/// # Safety
/// As `MPI_Comm_dup_with_info`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_dup_with_info(
    comm: MPI_Comm,
    info: ffi::MPI_Info,
    newcomm: *mut MPI_Comm,
) -> c_int {
    // SAFETY: the application's own arguments, passed on.
    let rc = unsafe { ffi::PMPI_Comm_dup_with_info(comm, info, newcomm) };
    adopt(rc, comm, newcomm)
}

/// `MPI_Comm_split`: MPI's, then a context for the new communicator if it is congruent to
/// world (one color for all, keys in world's order).
///
/// # Safety
/// As `MPI_Comm_split`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_split(
    comm: MPI_Comm,
    color: c_int,
    key: c_int,
    newcomm: *mut MPI_Comm,
) -> c_int {
    // Through `comm`'s context, if it has one.
    let mut made = None;
    if !newcomm.is_null() {
        abi::own(Some(comm), || made = state::split(comm, color, key));
    }
    if let Some((rc, new)) = made {
        // SAFETY: the application's pointer for the new handle, checked non-null.
        unsafe { *newcomm = new };
        return rc;
    }
    // SAFETY: the application's own arguments, passed on.
    let rc = unsafe { ffi::PMPI_Comm_split(comm, color, key, newcomm) };
    adopt(rc, comm, newcomm)
}

/// `MPI_Comm_create`: MPI's, then a context for the new communicator if it is congruent
/// to world.
///
/// # Safety
/// As `MPI_Comm_create`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Comm_create(
    comm: MPI_Comm,
    group: ffi::MPI_Group,
    newcomm: *mut MPI_Comm,
) -> c_int {
    // SAFETY: the application's own arguments, passed on.
    let rc = unsafe { ffi::PMPI_Comm_create(comm, group, newcomm) };
    adopt(rc, comm, newcomm)
}

/// `MPI_Wait`.
///
/// # Safety
/// As `MPI_Wait`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Wait(request: *mut MPI_Request, status: *mut MPI_Status) -> c_int {
    // SAFETY: passed on unchanged (also once nothing of ours is in flight any more).
    let native = move || unsafe { ffi::PMPI_Wait(request, status) };
    abi::entry_rc(
        None,
        || {
            completion::wait(
                || {
                    let mut flag = 0;
                    // SAFETY: the application's own arguments, passed on.
                    let rc = unsafe { ffi::PMPI_Test(request, &mut flag, status) };
                    (rc, flag != 0)
                },
                native,
            )
        },
        native,
    )
}

/// `MPI_Waitall`.
///
/// # Safety
/// As `MPI_Waitall`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Waitall(
    count: c_int,
    requests: *mut MPI_Request,
    statuses: *mut MPI_Status,
) -> c_int {
    // SAFETY: passed on unchanged (also once nothing of ours is in flight any more).
    let native = move || unsafe { ffi::PMPI_Waitall(count, requests, statuses) };
    abi::entry_rc(
        None,
        || {
            completion::wait(
                || {
                    let mut flag = 0;
                    // SAFETY: the application's own arguments, passed on.
                    let rc = unsafe { ffi::PMPI_Testall(count, requests, &mut flag, statuses) };
                    (rc, flag != 0)
                },
                native,
            )
        },
        native,
    )
}

/// `MPI_Waitany`.
///
/// # Safety
/// As `MPI_Waitany`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Waitany(
    count: c_int,
    requests: *mut MPI_Request,
    index: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: passed on unchanged (also once nothing of ours is in flight any more).
    let native = move || unsafe { ffi::PMPI_Waitany(count, requests, index, status) };
    abi::entry_rc(
        None,
        || {
            completion::wait(
                || {
                    let mut flag = 0;
                    // SAFETY: the application's own arguments, passed on.
                    let rc =
                        unsafe { ffi::PMPI_Testany(count, requests, index, &mut flag, status) };
                    (rc, flag != 0)
                },
                native,
            )
        },
        native,
    )
}

/// `MPI_Waitsome`.
///
/// # Safety
/// As `MPI_Waitsome`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Waitsome(
    incount: c_int,
    requests: *mut MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
) -> c_int {
    // SAFETY: passed on unchanged (also once nothing of ours is in flight any more).
    let native =
        move || unsafe { ffi::PMPI_Waitsome(incount, requests, outcount, indices, statuses) };
    abi::entry_rc(
        None,
        || {
            completion::wait(
                || {
                    // SAFETY: the application's own arguments, passed on; MPI_Testsome writes
                    // the count (MPI_UNDEFINED when no request is active, which also ends the
                    // wait).
                    unsafe {
                        let rc = ffi::PMPI_Testsome(incount, requests, outcount, indices, statuses);
                        (rc, *outcount != 0)
                    }
                },
                native,
            )
        },
        native,
    )
}

/// `MPI_Test`: advances topo-run's collectives in flight first.
///
/// # Safety
/// As `MPI_Test`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Test(
    request: *mut MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    completion::test();
    // SAFETY: the application's own arguments, passed on.
    unsafe { ffi::PMPI_Test(request, flag, status) }
}

/// `MPI_Testall`: advances topo-run's collectives in flight first.
///
/// # Safety
/// As `MPI_Testall`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Testall(
    count: c_int,
    requests: *mut MPI_Request,
    flag: *mut c_int,
    statuses: *mut MPI_Status,
) -> c_int {
    completion::test();
    // SAFETY: the application's own arguments, passed on.
    unsafe { ffi::PMPI_Testall(count, requests, flag, statuses) }
}

/// `MPI_Testany`: advances topo-run's collectives in flight first.
///
/// # Safety
/// As `MPI_Testany`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Testany(
    count: c_int,
    requests: *mut MPI_Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    completion::test();
    // SAFETY: the application's own arguments, passed on.
    unsafe { ffi::PMPI_Testany(count, requests, index, flag, status) }
}

/// `MPI_Testsome`: advances topo-run's collectives in flight first.
///
/// # Safety
/// As `MPI_Testsome`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Testsome(
    incount: c_int,
    requests: *mut MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
) -> c_int {
    completion::test();
    // SAFETY: the application's own arguments, passed on.
    unsafe { ffi::PMPI_Testsome(incount, requests, outcount, indices, statuses) }
}

/// `MPI_Request_get_status`: advances topo-run's collectives in flight first.
///
/// # Safety
/// As `MPI_Request_get_status`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Request_get_status(
    request: MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    completion::test();
    // SAFETY: the application's own arguments, passed on.
    unsafe { ffi::PMPI_Request_get_status(request, flag, status) }
}

/// `MPI_Request_free`: on the request of a collective of topo-run's still in flight, the
/// error Open MPI gives for its own (`MPI_ERR_REQUEST` through world's error handler; the
/// request stays valid), since the standard makes freeing an active collective's request
/// erroneous. A completed one is freed as usual.
///
/// # Safety
/// As `MPI_Request_free`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Request_free(request: *mut MPI_Request) -> c_int {
    abi::entry_rc(
        None,
        || {
            // SAFETY: a non-null pointer to the application's handle.
            let ours = !request.is_null() && state::is_pending(unsafe { *request });
            ours.then(|| abi::request_error(abi::world()))
        },
        // SAFETY: passed on unchanged.
        || unsafe { ffi::PMPI_Request_free(request) },
    )
}
