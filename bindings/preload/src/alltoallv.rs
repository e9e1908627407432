//! `MPI_Alltoallv` on topo-run's path.
//!
//! Each pair of ranks agrees on the bytes of the block between them (MPI requires the
//! signatures to match), so every rank takes the call whatever its counts, types and
//! displacements, and moves its own bytes as it likes: a side of a gap-free predefined
//! type is used in place (block r at `displs[r]` elements, `counts[r]` of them), any other
//! type is packed block by block (`PMPI_Pack`) before, or received packed and unpacked
//! (`PMPI_Unpack`) into its blocks after, outside the library's lock. In place
//! (`MPI_IN_PLACE` as the send buffer, any rank), the blocks to send are the receive
//! buffer's, with the receive counts and displacements.

use std::ffi::c_void;
use std::ops::Range;
use std::os::raw::c_int;

use crate::abi::{self, KeptType, MPI_Comm, MPI_Datatype, SUCCESS};
use crate::blocks::unpacked_size;
use crate::classify::{Call, HandOff};
use crate::state::{self, TypeCache};
use crate::varied::{Side, Unpacked, bytes_at, bytes_at_mut, pack_blocks};

/// `MPI_Alltoallv`: `Some(code)` when done on topo-run's path, `None` for MPI.
///
/// # Safety
/// The arguments are those of an `MPI_Alltoallv` call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn alltoallv(
    send: *const c_void,
    send_counts: *const c_int,
    send_displs: *const c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_counts: *const c_int,
    recv_displs: *const c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
) -> Option<c_int> {
    let finish = state::run(Call::Alltoallv, comm, |a, types: &mut TypeCache<'_>| {
        let size = a.size as usize;
        let in_place = send == abi::in_place();
        // SAFETY: per the contract, the arrays hold one int per rank.
        let rs =
            unsafe { Side::new(recv.cast_const(), recv_counts, recv_displs, recv_type, size) }?;
        let ss = if in_place {
            None
        } else {
            // SAFETY: as above.
            Some(unsafe { Side::new(send, send_counts, send_displs, send_type, size) }?)
        };
        // As for Allgather: MPI_IN_PLACE only as the send buffer, MPI_BOTTOM only with a
        // derived type; a side that carries nothing may pass any address (null too).
        let bad = |p: *const c_void, plain: bool, bytes: usize| {
            p == abi::in_place() || (plain && bytes > 0 && (p.is_null() || p == abi::bottom()))
        };
        let recv_plain = unpacked_size(types, recv_type);
        let send_plain = ss.as_ref().and_then(|s| unpacked_size(types, s.dt));
        if recv_plain.is_none() && !types.committed(recv_type) {
            return Err(HandOff::Arguments);
        }
        let rbytes = rs.block_bytes()?;
        let sbytes = ss.as_ref().map(Side::block_bytes).transpose()?;
        let total = |b: &[usize]| b.iter().sum::<usize>();
        if bad(recv.cast_const(), recv_plain.is_some(), total(&rbytes))
            || ss
                .as_ref()
                .zip(sbytes.as_ref())
                .is_some_and(|(s, b)| bad(s.buf, send_plain.is_some(), total(b)))
        {
            return Err(HandOff::Arguments);
        }
        // The receive side: in the application's buffer, or packed to unpack after.
        let crate::varied::Landing {
            base: recv_base,
            len: recv_len,
            at: recv_at,
            unpack: unpacked,
        } = rs.landing(&rbytes, recv_plain)?;
        // The blocks to send: the application's, or packed.
        let mut kept: Option<(Vec<u8>, Vec<Range<usize>>)> = None;
        let mut send_view: Option<(*const u8, usize, Vec<Range<usize>>)> = None;
        match (&ss, send_plain) {
            (Some(s), Some(elem)) => {
                let sb = sbytes.as_ref().expect("a send side");
                let (base, len, at) = s.in_place_ranges(sb, elem);
                // Buffers that overlap are erroneous, but handing the call to MPI on this
                // rank alone would split the ranks between two paths: copy.
                if crate::classify::overlaps_range(base as usize, len, recv_base as usize, recv_len)
                {
                    // SAFETY: the send buffer holds the blocks' `len` bytes from `base`.
                    let copy = unsafe { bytes_at(base, len) }.to_vec();
                    kept = Some((copy, at));
                } else {
                    send_view = Some((base, len, at));
                }
            }
            // SAFETY: the send buffer holds its blocks as its counts and type say.
            (Some(s), None) => {
                kept = Some(unsafe { pack_blocks(s, sbytes.as_ref().expect("a send side"), comm) }?)
            }
            // In place with a packed receive side: the blocks to send are packed from it.
            // SAFETY: the receive buffer holds its blocks as its counts and type say.
            (None, None) => kept = Some(unsafe { pack_blocks(&rs, &rbytes, comm) }?),
            (None, Some(_)) => {}
        }
        let mut finish = unpacked
            .map(|ext| {
                Ok::<_, HandOff>(Unpacked {
                    bytes: vec![0u8; recv_len],
                    ranges: recv_at.clone(),
                    recv: Side {
                        buf: recv.cast_const(),
                        counts: rs.counts.clone(),
                        displs: rs.displs.clone(),
                        dt: recv_type,
                    },
                    ext,
                    one: rs.elem_bytes()?,
                    dt: KeptType::new(recv_type, false).ok_or(HandOff::Arguments)?,
                    comm,
                })
            })
            .transpose()?;
        let recv_bytes: &mut [u8] = match &mut finish {
            Some(u) => &mut u.bytes,
            // SAFETY: the receive buffer holds its blocks, `recv_len` bytes from the lowest.
            None => unsafe { bytes_at_mut(recv_base.cast_mut(), recv_len) },
        };
        let send_arg: Option<(&[u8], &[Range<usize>])> = match (&kept, &send_view) {
            (Some((v, at)), _) => Some((&v[..], &at[..])),
            // SAFETY: the send buffer holds its blocks, `len` bytes from the lowest.
            (None, Some((p, len, at))) => Some((unsafe { bytes_at(*p, *len) }, &at[..])),
            (None, None) => None,
        };
        if !a.topo.raw_all_to_all_v(send_arg, recv_bytes, &recv_at) {
            return Err(HandOff::Inactive);
        }
        Ok(finish)
    })?;
    // Unpacked outside the library's lock.
    Some(finish.map_or(SUCCESS, |f| crate::packed::Finish::finish(Box::new(f))))
}
