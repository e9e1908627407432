//! `MPI_Gatherv` and `MPI_Scatterv` on topo-run's path.
//!
//! Only the root knows every block's length (its counts times the size of its type); each
//! other rank knows its own. So whether a call takes topo-run's path rests on what every
//! rank sees alike, the communicator and the root, and on nothing a rank alone sees: a
//! rank whose block is empty takes the path as any other (the runtime's leaders learn the
//! lengths first, `topo_runtime::gatherv`). The root's side of a gap-free predefined type
//! is used in place (block r at `displs[r]` elements), any other is packed before
//! (Scatterv) or received packed and unpacked after (Gatherv), outside the library's lock;
//! so is a rank's own block. In place (`MPI_IN_PLACE` at the root), the root's block stays
//! where it is.

use std::ffi::c_void;
use std::os::raw::c_int;

use crate::abi::{self, KeptType, MPI_Comm, MPI_Datatype, SUCCESS};
use crate::blocks::{extent, unpacked_size};
use crate::classify::{Call, HandOff, overlaps_range};
use crate::state::{self, TypeCache};
use crate::varied::{Side, Unpacked, bytes_at, bytes_at_mut, laid_out, pack_blocks};

/// MPI_IN_PLACE only where the standard allows it (the caller's business), MPI_BOTTOM only
/// with a derived type; a buffer that carries nothing may be any address (null too).
fn bad(p: *const c_void, plain: bool, bytes: usize) -> bool {
    p == abi::in_place() || (plain && bytes > 0 && (p.is_null() || p == abi::bottom()))
}

/// A rank's own block to send, `count` elements of `dt` at `buf`: its bytes as they are
/// (`None`: read from the application, `n` bytes at `buf`), or packed, or copied where
/// they overlap `(base, len)` (erroneous, but handing the call to MPI on one rank alone
/// would split the ranks between two paths).
///
/// # Safety
/// `buf` holds `count` elements of `dt`.
unsafe fn own_block(
    types: &mut TypeCache<'_>,
    buf: *const c_void,
    count: c_int,
    dt: MPI_Datatype,
    away_from: (*const u8, usize),
    comm: MPI_Comm,
) -> Result<(Option<Vec<u8>>, usize), HandOff> {
    let side = Side::one(buf, count, dt)?;
    let n = side.block_bytes()?[0];
    let plain = unpacked_size(types, dt).is_some_and(|e| e * count as usize == n);
    if bad(buf, plain, n) || (!plain && !types.committed(dt)) {
        return Err(HandOff::Arguments);
    }
    if !plain {
        // SAFETY: per the contract.
        return Ok((Some(unsafe { pack_blocks(&side, &[n], comm) }?.0), n));
    }
    let (base, len) = away_from;
    let copy = overlaps_range(buf as usize, n, base as usize, len)
        // SAFETY: the buffer holds the block's `n` bytes.
        .then(|| unsafe { bytes_at(buf.cast(), n) }.to_vec());
    Ok((copy, n))
}

/// Where a rank's own block of a Scatterv lands, `count` elements of `dt` at `buf`: in the
/// buffer itself (a gap-free predefined type that does not overlap `(base, len)`), else in
/// bytes of the library's, unpacked after.
fn own_landing(
    types: &mut TypeCache<'_>,
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    away_from: (*const u8, usize),
    comm: MPI_Comm,
) -> Result<(Option<Unpacked>, usize), HandOff> {
    let side = Side::one(buf.cast_const(), count, dt)?;
    let n = side.block_bytes()?[0];
    let plain = unpacked_size(types, dt).is_some_and(|e| e * count as usize == n);
    if bad(buf.cast_const(), plain, n) || (!plain && !types.committed(dt)) {
        return Err(HandOff::Arguments);
    }
    let (base, len) = away_from;
    if plain && !overlaps_range(buf as usize, n, base as usize, len) {
        return Ok((None, n));
    }
    let unpacked = Unpacked {
        bytes: vec![0u8; n],
        ranges: std::iter::once(0..n).collect(),
        ext: extent(dt)?,
        one: side.elem_bytes()?,
        dt: KeptType::new(dt, false).ok_or(HandOff::Arguments)?,
        recv: side,
        comm,
    };
    Ok((Some(unpacked), n))
}

/// `MPI_Gatherv`: `Some(code)` when done on topo-run's path, `None` for MPI.
///
/// # Safety
/// The arguments are those of an `MPI_Gatherv` call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn gatherv(
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_counts: *const c_int,
    displs: *const c_int,
    recv_type: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> Option<c_int> {
    let finish = state::run(Call::Gatherv, comm, |a, types: &mut TypeCache<'_>| {
        if root < 0 || root >= a.size {
            return Err(HandOff::Arguments);
        }
        let (size, me) = (a.size as usize, a.rank as usize);
        if root != a.rank {
            // SAFETY: the send buffer holds `send_count` elements of its type.
            let (own, n) =
                unsafe { own_block(types, send, send_count, send_type, (send.cast(), 0), comm) }?;
            // SAFETY: as above.
            let mine = own
                .as_deref()
                .unwrap_or(unsafe { bytes_at(send.cast(), n) });
            if !a.topo.raw_gather_v(root, Some(mine), None) {
                return Err(HandOff::Inactive);
            }
            return Ok(None);
        }
        let in_place = send == abi::in_place();
        // SAFETY: per the contract, the arrays hold one int per rank at the root.
        let rs = unsafe { Side::new(recv.cast_const(), recv_counts, displs, recv_type, size) }?;
        let rbytes = rs.block_bytes()?;
        let recv_plain = unpacked_size(types, recv_type);
        if bad(recv.cast_const(), recv_plain.is_some(), rbytes.iter().sum())
            || (recv_plain.is_none() && !types.committed(recv_type))
        {
            return Err(HandOff::Arguments);
        }
        let crate::varied::Landing {
            base,
            len,
            at,
            unpack: unpacked,
        } = rs.landing(&rbytes, recv_plain)?;
        // The root's own block, unless the collective reads it from the application.
        let (own, n): (Option<Vec<u8>>, usize) = if in_place {
            match recv_plain {
                Some(_) => (None, rbytes[me]),
                // SAFETY: block `me` of the receive buffer holds the root's elements.
                None => (
                    Some(unsafe { pack_blocks(&rs.only(me), &[rbytes[me]], comm) }?.0),
                    rbytes[me],
                ),
            }
        } else {
            // SAFETY: the send buffer holds `send_count` elements of its type.
            unsafe { own_block(types, send, send_count, send_type, (base, len), comm) }?
        };
        let mut finish = unpacked
            .map(|ext| {
                Ok::<_, HandOff>(Unpacked {
                    bytes: vec![0u8; len],
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
            // SAFETY: the receive buffer holds its blocks, `len` bytes from the lowest.
            None => unsafe { bytes_at_mut(base.cast_mut(), len) },
        };
        let mine: Option<&[u8]> = match (&own, in_place) {
            (Some(v), _) => Some(v),
            (None, true) => None,
            // SAFETY: the send buffer holds the root's `n` bytes.
            (None, false) => Some(unsafe { bytes_at(send.cast(), n) }),
        };
        if !a.topo.raw_gather_v(root, mine, Some((recv_bytes, &at))) {
            return Err(HandOff::Inactive);
        }
        Ok(finish)
    })?;
    // Unpacked outside the library's lock.
    Some(finish.map_or(SUCCESS, |f| crate::packed::Finish::finish(Box::new(f))))
}

/// `MPI_Scatterv`: `Some(code)` when done on topo-run's path, `None` for MPI.
///
/// # Safety
/// The arguments are those of an `MPI_Scatterv` call.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn scatterv(
    send: *const c_void,
    send_counts: *const c_int,
    displs: *const c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_count: c_int,
    recv_type: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> Option<c_int> {
    let finish = state::run(Call::Scatterv, comm, |a, types: &mut TypeCache<'_>| {
        if root < 0 || root >= a.size {
            return Err(HandOff::Arguments);
        }
        let (size, me) = (a.size as usize, a.rank as usize);
        if root != a.rank {
            let (mut finish, n) =
                own_landing(types, recv, recv_count, recv_type, (recv.cast(), 0), comm)?;
            let mine: &mut [u8] = match &mut finish {
                Some(u) => &mut u.bytes,
                // SAFETY: the receive buffer holds `recv_count` elements, `n` bytes.
                None => unsafe { bytes_at_mut(recv.cast(), n) },
            };
            if !a.topo.raw_scatter_v(root, None, Some(mine)) {
                return Err(HandOff::Inactive);
            }
            return Ok(finish);
        }
        let in_place = recv.cast_const() == abi::in_place();
        // SAFETY: per the contract, the arrays hold one int per rank at the root.
        let ss = unsafe { Side::new(send, send_counts, displs, send_type, size) }?;
        let sbytes = ss.block_bytes()?;
        let send_plain = unpacked_size(types, send_type);
        if bad(send, send_plain.is_some(), sbytes.iter().sum())
            || (send_plain.is_none() && !types.committed(send_type))
        {
            return Err(HandOff::Arguments);
        }
        // The root's blocks: in its buffer, or packed one after another.
        let (packed, base, len, at) = match send_plain {
            Some(elem) => {
                let (base, len, at) = ss.in_place_ranges(&sbytes, elem);
                (None, base, len, at)
            }
            None => {
                // SAFETY: block r of the send buffer holds `send_counts[r]` elements.
                let (bytes, _) = unsafe { pack_blocks(&ss, &sbytes, comm) }?;
                let at = laid_out(&sbytes);
                (Some(bytes), send.cast::<u8>(), 0, at)
            }
        };
        let (mut finish, n) = if in_place {
            (None, sbytes[me])
        } else {
            own_landing(types, recv, recv_count, recv_type, (base, len), comm)?
        };
        let all: &[u8] = match &packed {
            Some(b) => b,
            // SAFETY: the send buffer holds its blocks, `len` bytes from the lowest.
            None => unsafe { bytes_at(base, len) },
        };
        let mine: Option<&mut [u8]> = match (&mut finish, in_place) {
            (_, true) => None,
            (Some(u), false) => Some(&mut u.bytes),
            // SAFETY: the receive buffer holds the root's `n` bytes, apart from `all`.
            (None, false) => Some(unsafe { bytes_at_mut(recv.cast(), n) }),
        };
        if !a.topo.raw_scatter_v(root, Some((all, &at)), mine) {
            return Err(HandOff::Inactive);
        }
        Ok(finish)
    })?;
    // Unpacked outside the library's lock.
    Some(finish.map_or(SUCCESS, |f| crate::packed::Finish::finish(Box::new(f))))
}
