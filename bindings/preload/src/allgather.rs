//! `MPI_Allgather` on topo-run's path.
//!
//! MPI lets the ranks of one Allgather pass different datatypes as long as the type
//! signatures match (and a rank's send signature match its receive block's). Whether a
//! call takes topo-run's path therefore rests on what every rank sees alike: the
//! communicator and the bytes of one receive block (`recvcount` times the size of
//! `recvtype`, its signature's size). How each rank moves its bytes is its own affair: a
//! gap-free predefined type is used in place, anything else is packed (`PMPI_Pack`)
//! before and unpacked (`PMPI_Unpack`) after, outside the library's lock.

use std::ffi::c_void;
use std::os::raw::c_int;

use crate::abi::{self, KeptType, MPI_Comm, MPI_Datatype, MPI_Request};
use crate::blocks::{Held, Prepared, Unpack, bad_buffer as bad, extent, unpacked_size};
use crate::classify::{Call, HandOff};
use crate::packed::{pack, packed_size};
use crate::state::{self, Active, TypeCache};

/// The arguments of an `MPI_Allgather` or `MPI_Iallgather`, if topo-run can take the call.
/// With `keep_type`, a packed receive side keeps its own duplicate of the receive type
/// (nonblocking calls: the application may free its handle before completion).
///
/// # Safety
/// The arguments are those of an Allgather call, the buffers valid for `'b`.
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
    // `MPI_IN_PLACE` is legal only as the send buffer (checked apart).
    let recv_unpacked = unpacked_size(types, recv_type).is_some();
    if bad(recv.cast_const(), recv_unpacked)
        || (!in_place && bad(send, unpacked_size(types, send_type).is_some()))
    {
        return Err(HandOff::Arguments);
    }
    if !recv_unpacked && !types.committed(recv_type) {
        return Err(HandOff::Arguments);
    }
    // Everything that can fail is asked before anything is allocated for the collective.
    let stride = if recv_unpacked {
        0
    } else {
        recv_count as isize * extent(recv_type)?
    };
    // This rank's block, unless the collective reads it from the application: in place in
    // an unpacked receive buffer, or an unpacked send buffer clear of the receive buffer.
    let own: Option<Vec<u8>> = if in_place {
        if recv_unpacked {
            None
        } else {
            let at = a.rank as isize * stride;
            // SAFETY: block `rank` of the receive buffer holds this rank's elements.
            Some(unsafe {
                pack(
                    recv.cast::<u8>().wrapping_offset(at).cast(),
                    recv_count,
                    recv_type,
                    block,
                    comm,
                )
            }?)
        }
    } else {
        match unpacked_size(types, send_type) {
            Some(s) if s as u64 * send_count.max(0) as u64 == block as u64 => {
                // Buffers that overlap are erroneous, but handing the call to MPI on this
                // rank alone would split the ranks between two paths: copy.
                let (s, r) = (send as usize, recv as usize);
                let overlap = s < r.saturating_add(total) && r < s.saturating_add(block);
                // SAFETY: the send buffer holds `block` bytes.
                overlap.then(|| {
                    unsafe { std::slice::from_raw_parts(send.cast::<u8>(), block) }.to_vec()
                })
            }
            // SAFETY: the send buffer holds `send_count` elements of `send_type`.
            _ => Some(unsafe { pack(send, send_count, send_type, block, comm) }?),
        }
    };
    let unpack = if recv_unpacked {
        None
    } else {
        let dt = KeptType::new(recv_type, keep_type).ok_or(HandOff::Arguments)?;
        Some(Unpack {
            bytes: vec![0u8; total],
            block,
            recv,
            count: recv_count,
            dt,
            stride,
            comm,
        })
    };
    let finish = Held { kept: own, unpack };
    // SAFETY: an unpacked send buffer holds `block` bytes, an unpacked receive buffer
    // `size` blocks; the kept and packed bytes live in `finish`, which the caller keeps
    // until the collective completes.
    Ok(unsafe { Prepared::over(finish, send, block, in_place, recv, total) })
}

/// `MPI_Allgather`: `Some(code)` when done on topo-run's path, `None` for MPI.
///
/// # Safety
/// The arguments are those of an `MPI_Allgather` call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn allgather(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_count: c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
) -> Option<c_int> {
    let finish = state::run(Call::Allgather, comm, |a, types| {
        // SAFETY: per the contract.
        let p = unsafe {
            prepare(
                a, types, send, send_count, send_type, recv, recv_count, recv_type, comm, false,
            )
        }?;
        if !a.topo.raw_all_gather(p.send, p.recv) {
            return Err(HandOff::Inactive);
        }
        Ok(p.finish)
    })?;
    // Unpacked outside the library's lock.
    Some(crate::packed::Kept::finish_now(finish))
}

/// `MPI_Iallgather`: whether the call was started on topo-run's path (it is when the
/// blocking call would run the remapped recursive doubling; otherwise MPI's).
///
/// # Safety
/// The arguments are those of an `MPI_Iallgather` call; MPI lets the collective use the
/// buffers until the request completes.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn iallgather(
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
            .raw_immediate_all_gather(p.send, p.recv)
            .ok_or(HandOff::NoSchedule)?;
        Ok((req, crate::packed::Kept::boxed(p.finish)))
    };
    // SAFETY: `request` is the caller's.
    unsafe { crate::calls::nonblocking(Call::Iallgather, comm, request, start) }
}
