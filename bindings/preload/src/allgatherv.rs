//! `MPI_Allgatherv` and `MPI_Iallgatherv` on topo-run's path.
//!
//! Every rank knows every block's length (`recvcounts` times the size of `recvtype`, the
//! same signature on every rank), so every rank takes the call alike whatever its types
//! and displacements: a receive side of a gap-free predefined type is used in place (block
//! r at `displs[r]` elements), any other is received packed and unpacked into its blocks
//! after, outside the library's lock; a send buffer of another type is packed before. In
//! place (`MPI_IN_PLACE` as the send buffer), this rank's block is the one at its place in
//! the receive buffer. The nonblocking form keeps the library's bytes (and a duplicate of
//! a receive type it unpacks into) until the request completes.

use std::ffi::c_void;
use std::os::raw::c_int;

use crate::abi::{self, KeptType, MPI_Comm, MPI_Datatype, MPI_Request};
use crate::blocks::unpacked_size;
use crate::classify::{Call, HandOff, overlaps_range};
use crate::packed::Kept;
use crate::state::{self, Active, TypeCache};
use crate::varied::{
    HeldV, Side, Unpacked, bad_buffer as bad, bytes_at, bytes_at_mut, pack_blocks,
};

/// An Allgatherv's buffers on topo-run's path: this rank's block (`None` in place), where
/// the blocks land and each one's range there, and what the call keeps.
struct Prepared<'b> {
    send: Option<&'b [u8]>,
    recv: &'b mut [u8],
    at: Vec<std::ops::Range<usize>>,
    finish: HeldV,
}

/// The arguments of an `MPI_Allgatherv` or `MPI_Iallgatherv`, if topo-run can take the
/// call.
///
/// # Safety
/// The arguments are those of an Allgatherv call, the buffers valid for `'b`.
#[allow(clippy::too_many_arguments)]
unsafe fn prepare<'b>(
    a: &Active,
    types: &mut TypeCache<'_>,
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_counts: *const c_int,
    displs: *const c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
    keep_type: bool,
) -> Result<Prepared<'b>, HandOff> {
    let (size, me) = (a.size as usize, a.rank as usize);
    let in_place = send == abi::in_place();
    // SAFETY: per the contract, the arrays hold one int per rank.
    let rs = unsafe { Side::new(recv.cast_const(), recv_counts, displs, recv_type, size) }?;
    let recv_plain = unpacked_size(types, recv_type);
    let one = rs.signature_bytes(recv_plain)?;
    let mine = rs.bytes(me, one);
    let send_plain = (!in_place)
        .then(|| unpacked_size(types, send_type))
        .flatten()
        .filter(|&e| e as u64 * send_count.max(0) as u64 == mine as u64);
    if (!in_place && bad(send, send_plain.is_some(), mine))
        || (recv_plain.is_none() && !types.committed(recv_type))
        || (!in_place && send_count < 0)
    {
        return Err(HandOff::Arguments);
    }
    let crate::varied::Landing {
        base: recv_base,
        len: recv_len,
        at,
        unpack: unpacked,
    } = rs.landing(recv_plain, one)?;
    if bad(recv.cast_const(), recv_plain.is_some(), recv_len) {
        return Err(HandOff::Arguments);
    }
    // This rank's block, unless the collective reads it from the application.
    let own: Option<Vec<u8>> = if in_place {
        match recv_plain {
            Some(_) => None,
            // SAFETY: block `me` of the receive buffer holds this rank's elements.
            None => Some(unsafe { pack_blocks(&rs.only(me), &[mine], comm) }?.0),
        }
    } else if send_plain.is_some() {
        // Buffers that overlap are erroneous, but handing the call to MPI on this rank
        // alone would split the ranks between two paths: copy.
        let overlap = overlaps_range(send as usize, mine, recv_base as usize, recv_len);
        // SAFETY: the send buffer holds this rank's `mine` bytes.
        overlap.then(|| unsafe { bytes_at(send.cast(), mine) }.to_vec())
    } else {
        let side = Side::one(send, &send_count, send_type)?;
        // SAFETY: the send buffer holds `send_count` elements of its type.
        Some(unsafe { pack_blocks(&side, &[mine], comm) }?.0)
    };
    let mut unpacked = unpacked
        .map(|ext| {
            Ok::<_, HandOff>(Unpacked {
                bytes: vec![0u8; recv_len],
                ranges: at.clone(),
                ext,
                one,
                dt: KeptType::new(recv_type, keep_type).ok_or(HandOff::Arguments)?,
                recv: rs.into_owned(),
                comm,
            })
        })
        .transpose()?;
    let recv_bytes: &'b mut [u8] = match &mut unpacked {
        // SAFETY: the bytes live in `finish`, kept until the collective completes.
        Some(u) => unsafe { bytes_at_mut(u.bytes.as_mut_ptr(), u.bytes.len()) },
        // SAFETY: the receive buffer holds its blocks, `recv_len` bytes from the lowest.
        None => unsafe { bytes_at_mut(recv_base.cast_mut(), recv_len) },
    };
    let mine: Option<&'b [u8]> = match (&own, in_place) {
        // SAFETY: the copy lives in `finish`.
        (Some(v), _) => Some(unsafe { bytes_at(v.as_ptr(), v.len()) }),
        (None, true) => None,
        // SAFETY: the send buffer holds this rank's bytes.
        (None, false) => Some(unsafe { bytes_at(send.cast(), mine) }),
    };
    Ok(Prepared {
        send: mine,
        recv: recv_bytes,
        at,
        finish: HeldV { own, unpacked },
    })
}

/// `MPI_Allgatherv`: `Some(code)` when done on topo-run's path, `None` for MPI.
///
/// # Safety
/// The arguments are those of an `MPI_Allgatherv` call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn allgatherv(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_counts: *const c_int,
    displs: *const c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
) -> Option<c_int> {
    let finish = state::run(Call::Allgatherv, comm, |a, types: &mut TypeCache<'_>| {
        // SAFETY: per the contract.
        let p = unsafe {
            prepare(
                a,
                types,
                send,
                send_count,
                send_type,
                recv,
                recv_counts,
                displs,
                recv_type,
                comm,
                false,
            )
        }?;
        if !a.topo.raw_all_gather_v(p.send, p.recv, &p.at) {
            return Err(HandOff::Inactive);
        }
        Ok(p.finish)
    })?;
    // Unpacked outside the library's lock.
    Some(Kept::finish_now(finish))
}

/// `MPI_Iallgatherv`: whether the call was started on topo-run's path.
///
/// # Safety
/// The arguments are those of an `MPI_Iallgatherv` call; MPI lets the collective use the
/// buffers until the request completes.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn iallgatherv(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_counts: *const c_int,
    displs: *const c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> bool {
    let start = |a: &mut Active, types: &mut TypeCache<'_>| {
        // SAFETY: per the contract; the buffers are the collective's until completion,
        // and `finish` keeps the library's own ones alive until then.
        let p = unsafe {
            prepare(
                a,
                types,
                send,
                send_count,
                send_type,
                recv,
                recv_counts,
                displs,
                recv_type,
                comm,
                true,
            )
        }?;
        let req = a
            .topo
            .raw_immediate_all_gather_v(p.send, p.recv, &p.at)
            .ok_or(HandOff::Inactive)?;
        Ok((req, Kept::boxed(p.finish)))
    };
    // SAFETY: `request` is the caller's.
    unsafe { crate::calls::nonblocking(Call::Iallgatherv, comm, request, start) }
}
