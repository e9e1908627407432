//! `MPI_Alltoall` on topo-run's path.
//!
//! As for Allgather (`allgather.rs`), the ranks may pass different datatypes whose type
//! signatures match, so whether a call takes topo-run's path rests on what every rank
//! sees alike: the communicator and the bytes of one block (`recvcount` times the size of
//! `recvtype`). Each rank uses a gap-free predefined type in place and packs anything else
//! (`PMPI_Pack` of all `size` blocks, which lie one after another at `count * extent`
//! bytes) before; a packed receive side is unpacked (`PMPI_Unpack`) after, outside the
//! library's lock. In place (`MPI_IN_PLACE` as the send buffer, any rank), the blocks to
//! send are those of the receive buffer.

use std::ffi::c_void;
use std::os::raw::c_int;

use crate::abi::{self, KeptType, MPI_Comm, MPI_Datatype, MPI_Request};
use crate::blocks::{Held, Prepared, Unpack, bad_buffer as bad, extent, unpacked_size};
use crate::classify::{Call, HandOff, overlaps};
use crate::packed::{pack, packed_size};
use crate::state::{self, Active, TypeCache};

/// The arguments of an `MPI_Alltoall` or `MPI_Ialltoall`, if topo-run can take the call.
/// With `keep_type`, a packed receive side keeps its own duplicate of the receive type
/// (nonblocking calls: the application may free its handle before completion).
///
/// # Safety
/// The arguments are those of an Alltoall call, the buffers valid for `'b`.
#[allow(clippy::too_many_arguments)]
unsafe fn prepare<'b>(
    a: &Active,
    types: &mut TypeCache<'_>,
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_count: c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
    keep_type: bool,
) -> Result<Prepared<'b>, HandOff> {
    // What every rank agrees on: the bytes of one block.
    let block = packed_size(recv_count, recv_type)?;
    let size = a.size as usize;
    let total = block.checked_mul(size).ok_or(HandOff::Arguments)?;
    let in_place = send == abi::in_place();
    // As for Allgather: MPI_IN_PLACE only as the send buffer, MPI_BOTTOM only with a
    // derived type.
    let recv_unpacked = unpacked_size(types, recv_type).is_some();
    let send_unpacked = (!in_place)
        .then(|| unpacked_size(types, send_type))
        .flatten()
        .filter(|&s| s as u64 * send_count.max(0) as u64 == block as u64);
    if bad(recv.cast_const(), recv_unpacked) || (!in_place && bad(send, send_unpacked.is_some())) {
        return Err(HandOff::Arguments);
    }
    if !recv_unpacked && !types.committed(recv_type) {
        return Err(HandOff::Arguments);
    }
    // All `size` blocks of a packed side are packed (or unpacked) by one call, whose count
    // and byte count must fit in an int.
    let all = |count: c_int| -> Result<c_int, HandOff> {
        let n = (count as i64) * size as i64;
        if total > c_int::MAX as usize || n > c_int::MAX as i64 {
            return Err(HandOff::Large);
        }
        Ok(n as c_int)
    };
    let stride = if recv_unpacked {
        0
    } else {
        recv_count as isize * extent(recv_type)?
    };
    // The blocks to send, unless the collective reads them from the application.
    let kept: Option<Vec<u8>> = if in_place {
        if recv_unpacked {
            None
        } else {
            // SAFETY: the receive buffer holds `size` blocks of `recv_count` elements.
            Some(unsafe { pack(recv.cast_const(), all(recv_count)?, recv_type, total, comm) }?)
        }
    } else if send_unpacked.is_some() {
        // Buffers that overlap are erroneous, but handing the call to MPI on this rank
        // alone would split the ranks between two paths: copy.
        let overlap = overlaps(send as usize, recv as usize, total);
        // SAFETY: the send buffer holds `size` blocks of `block` bytes.
        overlap.then(|| unsafe { std::slice::from_raw_parts(send.cast::<u8>(), total) }.to_vec())
    } else {
        // SAFETY: the send buffer holds `size` blocks of `send_count` elements.
        Some(unsafe { pack(send, all(send_count)?, send_type, total, comm) }?)
    };
    let unpack = if recv_unpacked {
        None
    } else {
        Some(Unpack {
            bytes: vec![0u8; total],
            block,
            recv,
            count: recv_count,
            dt: KeptType::new(recv_type, keep_type).ok_or(HandOff::Arguments)?,
            stride,
            comm,
        })
    };
    let finish = Held { kept, unpack };
    // SAFETY: an unpacked send buffer holds `total` bytes, an unpacked receive buffer
    // `size` blocks; the kept and packed bytes live in `finish`, which the caller keeps
    // until the collective completes.
    Ok(unsafe { Prepared::over(finish, send, total, in_place, recv, total) })
}

/// `MPI_Alltoall`: `Some(code)` when done on topo-run's path, `None` for MPI.
///
/// # Safety
/// The arguments are those of an `MPI_Alltoall` call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn alltoall(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_count: c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
) -> Option<c_int> {
    let finish = state::run(Call::Alltoall, comm, |a, types| {
        // SAFETY: per the contract.
        let p = unsafe {
            prepare(
                a, types, send, send_count, send_type, recv, recv_count, recv_type, comm, false,
            )
        }?;
        if !a.topo.raw_all_to_all(p.send, p.recv) {
            return Err(HandOff::Inactive);
        }
        Ok(p.finish)
    })?;
    // Unpacked outside the library's lock.
    Some(crate::packed::Kept::finish_now(finish))
}

/// `MPI_Ialltoall`: whether the call was started on topo-run's path.
///
/// # Safety
/// The arguments are those of an `MPI_Ialltoall` call; MPI lets the collective use the
/// buffers until the request completes.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn ialltoall(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_count: c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> bool {
    let start = |a: &mut Active, types: &mut TypeCache<'_>| {
        // SAFETY: per the contract; the buffers are the collective's until completion,
        // and `finish` keeps the library's own ones alive until then.
        let p = unsafe {
            prepare(
                a, types, send, send_count, send_type, recv, recv_count, recv_type, comm, true,
            )
        }?;
        let req = a
            .topo
            .raw_immediate_all_to_all(p.send, p.recv)
            .ok_or(HandOff::Inactive)?;
        Ok((req, crate::packed::Kept::boxed(p.finish)))
    };
    // SAFETY: `request` is the caller's.
    unsafe { crate::calls::nonblocking(Call::Ialltoall, comm, request, start) }
}
