//! The C entry points the library exports. Each decides through [`crate::calls`] and
//! otherwise calls the `PMPI_*` symbol with the same arguments, so MPI sees exactly what
//! the application passed.

#![allow(non_snake_case)]

use std::ffi::c_void;
use std::os::raw::{c_char, c_int};

use mpi::ffi;

use crate::abi::{self, MPI_Comm, MPI_Datatype, MPI_Op, SUCCESS};
use crate::{calls, state};

/// Drops the cached answer for the communicator `*comm` before MPI frees it (MPI reuses
/// handles).
fn forget(comm: *const MPI_Comm) {
    if !comm.is_null() {
        // SAFETY: a non-null pointer to the application's handle.
        let c = unsafe { *comm };
        abi::entry(
            Some(c),
            || {
                state::forget_comm(c);
                false
            },
            || SUCCESS,
        );
    }
}

/// topo-run's part of `MPI_Finalize` (C and Fortran): teardown and statistics.
pub(crate) fn teardown() {
    abi::entry(
        None,
        || {
            state::finalize();
            true
        },
        || SUCCESS,
    );
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
        abi::entry(
            None,
            || {
                state::init();
                true
            },
            || SUCCESS,
        );
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
        abi::entry(
            None,
            || {
                state::init();
                true
            },
            || SUCCESS,
        );
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
    abi::entry(
        Some(comm),
        // SAFETY: the application's arguments of this call.
        || unsafe { calls::bcast(buf, count, dt, root, comm) },
        // SAFETY: passed on unchanged.
        || unsafe { ffi::PMPI_Bcast(buf, count, dt, root, comm) },
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
    abi::entry(
        Some(comm),
        // SAFETY: the application's arguments of this call.
        || unsafe { calls::reduce(send, recv, count, dt, op, root, comm) },
        // SAFETY: passed on unchanged.
        || unsafe { ffi::PMPI_Reduce(send, recv, count, dt, op, root, comm) },
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
    abi::entry(
        Some(comm),
        // SAFETY: the application's arguments of this call.
        || unsafe { calls::allreduce(send, recv, count, dt, op, comm) },
        // SAFETY: passed on unchanged.
        || unsafe { ffi::PMPI_Allreduce(send, recv, count, dt, op, comm) },
    )
}

/// `MPI_Barrier`.
///
/// # Safety
/// As `MPI_Barrier`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn MPI_Barrier(comm: MPI_Comm) -> c_int {
    abi::entry(
        Some(comm),
        || calls::barrier(comm),
        // SAFETY: passed on unchanged.
        || unsafe { ffi::PMPI_Barrier(comm) },
    )
}
