//! `MPI_Allgatherv` on topo-run's path.
//!
//! Every rank knows every block's length (`recvcounts` times the size of `recvtype`, the
//! same signature on every rank), so every rank takes the call alike whatever its types
//! and displacements: a receive side of a gap-free predefined type is used in place (block
//! r at `displs[r]` elements), any other is received packed and unpacked into its blocks
//! after, outside the library's lock; a send buffer of another type is packed before. In
//! place (`MPI_IN_PLACE` as the send buffer), this rank's block is the one at its place in
//! the receive buffer.

use std::ffi::c_void;
use std::os::raw::c_int;

use crate::abi::{self, KeptType, MPI_Comm, MPI_Datatype, SUCCESS};
use crate::blocks::unpacked_size;
use crate::classify::{Call, HandOff, overlaps_range};
use crate::state::{self, TypeCache};
use crate::varied::{Side, Unpacked, bytes_at, bytes_at_mut, pack_blocks};

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
        let (size, me) = (a.size as usize, a.rank as usize);
        let in_place = send == abi::in_place();
        // SAFETY: per the contract, the arrays hold one int per rank.
        let rs = unsafe { Side::new(recv.cast_const(), recv_counts, displs, recv_type, size) }?;
        // As for Allgather: MPI_IN_PLACE only as the send buffer, MPI_BOTTOM only with a
        // derived type; a buffer that carries nothing may be any address (null too).
        let bad = |p: *const c_void, plain: bool, bytes: usize| {
            p == abi::in_place() || (plain && bytes > 0 && (p.is_null() || p == abi::bottom()))
        };
        let recv_plain = unpacked_size(types, recv_type);
        let rbytes = rs.block_bytes()?;
        let send_plain = (!in_place)
            .then(|| unpacked_size(types, send_type))
            .flatten()
            .filter(|&e| e as u64 * send_count.max(0) as u64 == rbytes[me] as u64);
        if bad(recv.cast_const(), recv_plain.is_some(), rbytes.iter().sum())
            || (!in_place && bad(send, send_plain.is_some(), rbytes[me]))
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
        } = rs.landing(&rbytes, recv_plain)?;
        // This rank's block, unless the collective reads it from the application.
        let own: Option<Vec<u8>> = if in_place {
            match recv_plain {
                Some(_) => None,
                // SAFETY: block `me` of the receive buffer holds this rank's elements.
                None => Some(unsafe { pack_blocks(&rs.only(me), &[rbytes[me]], comm) }?.0),
            }
        } else if send_plain.is_some() {
            let n = rbytes[me];
            // Buffers that overlap are erroneous, but handing the call to MPI on this rank
            // alone would split the ranks between two paths: copy.
            let overlap = overlaps_range(send as usize, n, recv_base as usize, recv_len);
            // SAFETY: the send buffer holds this rank's `n` bytes.
            overlap.then(|| unsafe { bytes_at(send.cast(), n) }.to_vec())
        } else {
            let side = Side {
                buf: send,
                counts: vec![send_count],
                displs: vec![0],
                dt: send_type,
            };
            // SAFETY: the send buffer holds `send_count` elements of its type.
            Some(unsafe { pack_blocks(&side, &[rbytes[me]], comm) }?.0)
        };
        let mut finish = unpacked
            .map(|ext| {
                Ok::<_, HandOff>(Unpacked {
                    bytes: vec![0u8; recv_len],
                    ranges: at.clone(),
                    ext,
                    one: rs.elem_bytes()?,
                    dt: KeptType::new(recv_type, false).ok_or(HandOff::Arguments)?,
                    recv: rs,
                    comm,
                })
            })
            .transpose()?;
        let recv_bytes: &mut [u8] = match &mut finish {
            Some(u) => &mut u.bytes,
            // SAFETY: the receive buffer holds its blocks, `recv_len` bytes from the lowest.
            None => unsafe { bytes_at_mut(recv_base.cast_mut(), recv_len) },
        };
        let mine: Option<&[u8]> = match (&own, in_place) {
            (Some(v), _) => Some(v),
            (None, true) => None,
            // SAFETY: the send buffer holds this rank's bytes.
            (None, false) => Some(unsafe { bytes_at(send.cast(), rbytes[me]) }),
        };
        if !a.topo.raw_all_gather_v(mine, recv_bytes, &at) {
            return Err(HandOff::Inactive);
        }
        Ok(finish)
    })?;
    // Unpacked outside the library's lock.
    Some(finish.map_or(SUCCESS, |f| crate::packed::Finish::finish(Box::new(f))))
}
