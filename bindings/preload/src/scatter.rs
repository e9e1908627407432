//! `MPI_Scatter` on topo-run's path.
//!
//! Gather's mirror (`gather.rs`): whether a call takes topo-run's path rests on the
//! communicator, the root and the bytes of one block (the packed size of the receive
//! buffer's elements; at a root in place, of one send block). The send arguments mean
//! nothing at the other ranks and are never looked at there. The root packs a send type
//! that is not used in place, block by block; a rank unpacks a receive type that is not
//! after the collective, outside the library's lock.

use std::ffi::c_void;
use std::os::raw::c_int;

use crate::abi::{self, KeptType, MPI_Comm, MPI_Datatype, MPI_Request};
use crate::blocks::{Held, Unpack, bad_buffer as bad, extent, unpacked_size};
use crate::classify::overlaps_range;
use crate::classify::{Call, HandOff};
use crate::packed::{pack, packed_size};
use crate::state::{self, Active, TypeCache};

/// A Scatter's buffers on topo-run's path: the root's blocks (its only), where this
/// rank's block lands (`None` at the root in place), the bytes of one block.
struct Prepared<'b> {
    send: Option<&'b [u8]>,
    recv: Option<&'b mut [u8]>,
    block: usize,
    finish: Held,
}

/// The arguments of an `MPI_Scatter`, if topo-run can take the call.
///
/// # Safety
/// The arguments are those of a Scatter call, the buffers valid for `'b`.
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
    let in_place = is_root && recv.cast_const() == abi::in_place();
    // What every rank agrees on: the bytes of one block.
    let block = if is_root {
        packed_size(send_count, send_type)?
    } else {
        packed_size(recv_count, recv_type)?
    };
    let size = a.size as usize;
    let total = block.checked_mul(size).ok_or(HandOff::Arguments)?;
    let recv_unpacked = !in_place
        && unpacked_size(types, recv_type)
            .is_some_and(|s| s as u64 * recv_count.max(0) as u64 == block as u64);
    if !in_place
        && (bad(recv.cast_const(), recv_unpacked)
            || (!recv_unpacked && !types.committed(recv_type)))
    {
        return Err(HandOff::Arguments);
    }
    // The root's blocks: its send buffer as it is, or packed block by block.
    let mut all: Option<Vec<u8>> = None;
    let mut send_in_place = false;
    if is_root {
        let unpacked = unpacked_size(types, send_type).is_some();
        if bad(send, unpacked) || (!unpacked && !types.committed(send_type)) {
            return Err(HandOff::Arguments);
        }
        if unpacked {
            // Buffers that overlap are erroneous (but for the root's own block in place);
            // copy rather than hand the call to MPI on this rank alone.
            let overlap =
                recv_unpacked && overlaps_range(send as usize, total, recv as usize, block);
            // SAFETY: the send buffer holds `size` blocks of `block` bytes.
            all = overlap
                .then(|| unsafe { std::slice::from_raw_parts(send.cast::<u8>(), total) }.to_vec());
            send_in_place = !overlap;
        } else {
            let stride = send_count as isize * extent(send_type)?;
            let mut packed = Vec::with_capacity(total);
            for r in 0..size {
                let at = send.cast::<u8>().wrapping_offset(r as isize * stride);
                // SAFETY: block r of the root's send buffer holds `send_count` elements of
                // `send_type` at `r * send_count * extent` bytes from its start.
                packed.extend(unsafe { pack(at.cast(), send_count, send_type, block, comm) }?);
            }
            all = Some(packed);
        }
    }
    let unpack = if in_place || recv_unpacked {
        None
    } else {
        Some(Unpack {
            bytes: vec![0u8; block],
            block,
            recv,
            count: recv_count,
            dt: KeptType::new(recv_type, keep_type).ok_or(HandOff::Arguments)?,
            stride: 0,
            comm,
        })
    };
    let mut finish = Held { kept: all, unpack };
    // SAFETY: the packed or copied blocks live as long as `finish`, which the caller keeps
    // until the collective completes; an unpacked send buffer holds `size` blocks, an
    // unpacked receive buffer one.
    let send_bytes: Option<&'b [u8]> = match &finish.kept {
        Some(v) => Some(unsafe { std::slice::from_raw_parts(v.as_ptr(), v.len()) }),
        None if send_in_place => {
            Some(unsafe { std::slice::from_raw_parts(send.cast::<u8>(), total) })
        }
        None => None,
    };
    let recv_bytes: Option<&'b mut [u8]> = match &mut finish.unpack {
        // SAFETY: as above.
        Some(u) => Some(unsafe { std::slice::from_raw_parts_mut(u.bytes.as_mut_ptr(), block) }),
        // SAFETY: as above.
        None if !in_place => {
            Some(unsafe { std::slice::from_raw_parts_mut(recv.cast::<u8>(), block) })
        }
        None => None,
    };
    Ok(Prepared {
        send: send_bytes,
        recv: recv_bytes,
        block,
        finish,
    })
}

/// `MPI_Scatter`: `Some(code)` when done on topo-run's path, `None` for MPI.
///
/// # Safety
/// The arguments are those of an `MPI_Scatter` call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn scatter(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_count: c_int,
    recv_type: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> Option<c_int> {
    let finish = state::run(Call::Scatter, comm, |a, types| {
        // SAFETY: per the contract.
        let p = unsafe {
            prepare(
                a, types, send, send_count, send_type, recv, recv_count, recv_type, root, comm,
                false,
            )
        }?;
        if !a.topo.raw_scatter(root, p.send, p.recv, p.block) {
            return Err(HandOff::Inactive);
        }
        Ok(p.finish)
    })?;
    // Unpacked outside the library's lock.
    Some(crate::packed::Kept::finish_now(finish))
}

/// `MPI_Iscatter`: whether the call was started on topo-run's path (the direct form, every
/// block straight between the root and its rank, the runtime's `nonblocking/iscatter.rs`).
///
/// # Safety
/// The arguments are those of an `MPI_Iscatter` call; MPI lets the collective use the buffers
/// until the request completes.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn iscatter(
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
            .raw_immediate_scatter_v(root, p.send.map(|s| (s, &at[..])), p.recv, Some(p.block))
            .ok_or(HandOff::Inactive)?;
        Ok((req, crate::packed::Kept::boxed(p.finish)))
    };
    // SAFETY: `request` is the caller's.
    unsafe { crate::calls::nonblocking(Call::Iscatter, comm, request, start) }
}
