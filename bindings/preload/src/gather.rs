//! `MPI_Gather` on topo-run's path.
//!
//! As for Allgather (`allgather.rs`), the ranks may pass different datatypes whose type
//! signatures match, so whether a call takes topo-run's path rests on what every rank
//! sees alike: the communicator, the root, and the bytes of one block (the packed size of
//! the send buffer's elements; at a root in place, of one receive block). The receive
//! arguments mean nothing at the other ranks and are never looked at there. Each rank
//! uses a gap-free predefined type in place and packs anything else (`PMPI_Pack`) before;
//! the root unpacks (`PMPI_Unpack`) a receive type that is not used in place after,
//! outside the library's lock.

use std::ffi::c_void;
use std::os::raw::c_int;

use crate::abi::{self, KeptType, MPI_Comm, MPI_Datatype, MPI_Request};
use crate::blocks::{Held, Unpack, bad_buffer as bad, extent, unpacked_size};
use crate::classify::{Call, HandOff, overlaps_range};
use crate::packed::{pack, packed_size};
use crate::state::{self, Active, TypeCache};

/// A Gather's buffers on topo-run's path: this rank's block (`None` at the root in
/// place), where the blocks land (the root's only), the bytes of one block.
struct Prepared<'b> {
    send: Option<&'b [u8]>,
    recv: Option<&'b mut [u8]>,
    block: usize,
    finish: Held,
}

/// The arguments of an `MPI_Gather`, if topo-run can take the call.
///
/// # Safety
/// The arguments are those of a Gather call, the buffers valid for `'b`.
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
    root: c_int,
    comm: MPI_Comm,
    keep_type: bool,
) -> Result<Prepared<'b>, HandOff> {
    if root < 0 || root >= a.size {
        return Err(HandOff::Arguments);
    }
    let is_root = root == a.rank;
    let in_place = is_root && send == abi::in_place();
    // What every rank agrees on: the bytes of one block.
    let block = if in_place {
        packed_size(recv_count, recv_type)?
    } else {
        packed_size(send_count, send_type)?
    };
    let size = a.size as usize;
    let total = block.checked_mul(size).ok_or(HandOff::Arguments)?;
    // As for Allgather: MPI_IN_PLACE only as the root's send buffer, MPI_BOTTOM only with
    // a derived type.
    let send_unpacked = (!in_place)
        .then(|| unpacked_size(types, send_type))
        .flatten()
        .filter(|&s| s as u64 * send_count.max(0) as u64 == block as u64);
    if !in_place && bad(send, send_unpacked.is_some()) {
        return Err(HandOff::Arguments);
    }
    let mut recv_side: Option<(bool, isize)> = None;
    if is_root {
        let unpacked = unpacked_size(types, recv_type)
            .is_some_and(|s| s as u64 * recv_count.max(0) as u64 == block as u64);
        if bad(recv.cast_const(), unpacked) || (!unpacked && !types.committed(recv_type)) {
            return Err(HandOff::Arguments);
        }
        let stride = if unpacked {
            0
        } else {
            recv_count as isize * extent(recv_type)?
        };
        recv_side = Some((unpacked, stride));
    }
    let recv_unpacked = recv_side.is_some_and(|(u, _)| u);
    // This rank's block, unless the collective reads it from the application.
    let own: Option<Vec<u8>> = if in_place {
        if recv_unpacked {
            None
        } else {
            let stride = recv_side.map_or(0, |(_, s)| s);
            let at = recv.cast::<u8>().wrapping_offset(a.rank as isize * stride);
            // SAFETY: block `rank` of the root's receive buffer holds its own elements.
            Some(unsafe { pack(at.cast(), recv_count, recv_type, block, comm) }?)
        }
    } else if send_unpacked.is_some() {
        // Buffers that overlap are erroneous, but handing the call to MPI on this rank
        // alone would split the ranks between two paths: copy.
        let overlap = is_root && overlaps_range(send as usize, block, recv as usize, total);
        // SAFETY: the send buffer holds `block` bytes.
        overlap.then(|| unsafe { std::slice::from_raw_parts(send.cast::<u8>(), block) }.to_vec())
    } else {
        // SAFETY: the send buffer holds `send_count` elements of `send_type`.
        Some(unsafe { pack(send, send_count, send_type, block, comm) }?)
    };
    let unpack = match recv_side {
        Some((false, stride)) => Some(Unpack {
            bytes: vec![0u8; total],
            block,
            recv,
            count: recv_count,
            dt: KeptType::new(recv_type, keep_type).ok_or(HandOff::Arguments)?,
            stride,
            comm,
        }),
        _ => None,
    };
    let mut finish = Held { kept: own, unpack };
    // SAFETY: `own` and the packed bytes live as long as `finish`, which the caller keeps
    // until the collective completes; an unpacked send buffer holds `block` bytes, an
    // unpacked receive buffer `size` blocks.
    let send_bytes: Option<&'b [u8]> = match (&finish.kept, in_place) {
        (Some(v), _) => Some(unsafe { std::slice::from_raw_parts(v.as_ptr(), v.len()) }),
        (None, true) => None,
        (None, false) => Some(unsafe { std::slice::from_raw_parts(send.cast::<u8>(), block) }),
    };
    let recv_bytes: Option<&'b mut [u8]> = match (&mut finish.unpack, is_root) {
        // SAFETY: as above.
        (Some(u), _) => {
            Some(unsafe { std::slice::from_raw_parts_mut(u.bytes.as_mut_ptr(), total) })
        }
        // SAFETY: as above.
        (None, true) => Some(unsafe { std::slice::from_raw_parts_mut(recv.cast::<u8>(), total) }),
        (None, false) => None,
    };
    Ok(Prepared {
        send: send_bytes,
        recv: recv_bytes,
        block,
        finish,
    })
}

/// `MPI_Gather`: `Some(code)` when done on topo-run's path, `None` for MPI.
///
/// # Safety
/// The arguments are those of an `MPI_Gather` call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gather(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_count: c_int,
    recv_type: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> Option<c_int> {
    let finish = state::run(Call::Gather, comm, |a, types| {
        // SAFETY: per the contract.
        let p = unsafe {
            prepare(
                a, types, send, send_count, send_type, recv, recv_count, recv_type, root, comm,
                false,
            )
        }?;
        if !a.topo.raw_gather(root, p.send, p.recv, p.block) {
            return Err(HandOff::Inactive);
        }
        Ok(p.finish)
    })?;
    // Unpacked outside the library's lock.
    Some(crate::packed::Kept::finish_now(finish))
}

/// `MPI_Igather`: whether the call was started on topo-run's path (the direct form, every
/// block straight between the root and its rank, the runtime's `nonblocking/igather.rs`).
///
/// # Safety
/// The arguments are those of an `MPI_Igather` call; MPI lets the collective use the buffers
/// until the request completes.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn igather(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_count: c_int,
    recv_type: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> bool {
    let start = |a: &mut Active, types: &mut TypeCache<'_>| {
        // SAFETY: per the contract; the buffers are the collective's until completion,
        // and `finish` keeps the library's own ones alive until then.
        let p = unsafe {
            prepare(
                a, types, send, send_count, send_type, recv, recv_count, recv_type, root, comm,
                true,
            )
        }?;
        let size = a.size as usize;
        let at: Vec<std::ops::Range<usize>> =
            (0..size).map(|r| r * p.block..(r + 1) * p.block).collect();
        let req = a
            .topo
            .raw_immediate_gather_v(root, p.send, p.recv.map(|r| (r, &at[..])), Some(p.block))
            .ok_or(HandOff::Inactive)?;
        Ok((req, crate::packed::Kept::boxed(p.finish)))
    };
    // SAFETY: `request` is the caller's.
    unsafe { crate::calls::nonblocking(Call::Igather, comm, request, start) }
}
