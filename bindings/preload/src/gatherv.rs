//! `MPI_Gatherv` and `MPI_Scatterv`, and their nonblocking forms, on topo-run's path.
//!
//! Only the root knows every block's length (its counts times the size of its type); each
//! other rank knows its own. So whether a call takes topo-run's path rests on what every
//! rank sees alike, the communicator and the root, and on nothing a rank alone sees: a
//! rank whose block is empty takes the path as any other (the runtime's leaders learn the
//! lengths first, `topo_runtime::gatherv`). The root's side of a gap-free predefined type
//! is used in place (block r at `displs[r]` elements), any other is packed before
//! (Scatterv) or received packed and unpacked after (Gatherv), outside the library's lock;
//! so is a rank's own block. In place (`MPI_IN_PLACE` at the root), the root's block stays
//! where it is. The nonblocking forms keep the library's bytes (and a duplicate of a
//! packed receive type) until the request completes.

use std::ffi::c_void;
use std::ops::Range;
use std::os::raw::c_int;

use crate::abi::{self, KeptType, MPI_Comm, MPI_Datatype, MPI_Request};
use crate::blocks::{extent, unpacked_size};
use crate::classify::{Call, HandOff, overlaps_range};
use crate::packed::Kept;
use crate::state::{self, Active, TypeCache};
use crate::varied::{
    HeldV, Side, Unpacked, bad_buffer as bad, bytes_at, bytes_at_mut, laid_out, pack_blocks,
};

/// The bytes of a rank's one block, and whether its type is used as it lies (a gap-free
/// predefined type).
fn block_len(types: &mut TypeCache<'_>, side: &Side<'_>) -> Result<(usize, bool), HandOff> {
    let plain = unpacked_size(types, side.dt);
    Ok((side.bytes(0, side.signature_bytes(plain)?), plain.is_some()))
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
    let side = Side::one(buf, &count, dt)?;
    let (n, plain) = block_len(types, &side)?;
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
/// bytes of the library's, unpacked after (with a duplicate of `dt` where `keep_type`: the
/// application may free its type before a nonblocking call completes).
fn own_landing(
    types: &mut TypeCache<'_>,
    buf: *mut c_void,
    count: c_int,
    dt: MPI_Datatype,
    away_from: (*const u8, usize),
    comm: MPI_Comm,
    keep_type: bool,
) -> Result<(Option<Unpacked>, usize), HandOff> {
    let side = Side::one(buf.cast_const(), &count, dt)?;
    let (n, plain) = block_len(types, &side)?;
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
        dt: KeptType::new(dt, keep_type).ok_or(HandOff::Arguments)?,
        recv: side.into_owned(),
        comm,
    };
    Ok((Some(unpacked), n))
}

/// A Gatherv's or Scatterv's buffers on topo-run's path: what this rank sends (a rank's
/// block for Gatherv, the root's blocks for Scatterv) and where it receives (the root's
/// blocks, a rank's block), the root's ranges of the blocks (`None` elsewhere), and what
/// the call keeps.
struct Prepared<'b> {
    send: Option<&'b [u8]>,
    recv: Option<&'b mut [u8]>,
    at: Option<Vec<Range<usize>>>,
    finish: HeldV,
}

/// The arguments of an `MPI_Gatherv` or `MPI_Igatherv`, if topo-run can take the call.
///
/// # Safety
/// The arguments are those of a Gatherv call, the buffers valid for `'b`.
#[allow(clippy::too_many_arguments)]
unsafe fn prepare_gatherv<'b>(
    a: &Active,
    types: &mut TypeCache<'_>,
    send: *const c_void,
    send_count: c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_counts: *const c_int,
    displs: *const c_int,
    recv_type: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    keep_type: bool,
) -> Result<Prepared<'b>, HandOff> {
    if root < 0 || root >= a.size {
        return Err(HandOff::Arguments);
    }
    let (size, me) = (a.size as usize, a.rank as usize);
    if root != a.rank {
        // SAFETY: the send buffer holds `send_count` elements of its type.
        let (own, n) =
            unsafe { own_block(types, send, send_count, send_type, (send.cast(), 0), comm) }?;
        let mine: &'b [u8] = match &own {
            // SAFETY: the copy lives in `finish`, kept until the collective completes.
            Some(v) => unsafe { bytes_at(v.as_ptr(), v.len()) },
            // SAFETY: as above.
            None => unsafe { bytes_at(send.cast(), n) },
        };
        return Ok(Prepared {
            send: Some(mine),
            recv: None,
            at: None,
            finish: HeldV {
                own,
                unpacked: None,
            },
        });
    }
    let in_place = send == abi::in_place();
    // SAFETY: per the contract, the arrays hold one int per rank at the root.
    let rs = unsafe { Side::new(recv.cast_const(), recv_counts, displs, recv_type, size) }?;
    let recv_plain = unpacked_size(types, recv_type);
    let one = rs.signature_bytes(recv_plain)?;
    if recv_plain.is_none() && !types.committed(recv_type) {
        return Err(HandOff::Arguments);
    }
    let crate::varied::Landing {
        base,
        len,
        at,
        unpack: unpacked,
    } = rs.landing(recv_plain, one)?;
    if bad(recv.cast_const(), recv_plain.is_some(), len) {
        return Err(HandOff::Arguments);
    }
    // The root's own block, unless the collective reads it from the application.
    let (own, n): (Option<Vec<u8>>, usize) = if in_place {
        let n = rs.bytes(me, one);
        match recv_plain {
            Some(_) => (None, n),
            // SAFETY: block `me` of the receive buffer holds the root's elements.
            None => (Some(unsafe { pack_blocks(&rs.only(me), &[n], comm) }?.0), n),
        }
    } else {
        // SAFETY: the send buffer holds `send_count` elements of its type.
        unsafe { own_block(types, send, send_count, send_type, (base, len), comm) }?
    };
    let mut unpacked = unpacked
        .map(|ext| {
            Ok::<_, HandOff>(Unpacked {
                bytes: vec![0u8; len],
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
        // SAFETY: the receive buffer holds its blocks, `len` bytes from the lowest.
        None => unsafe { bytes_at_mut(base.cast_mut(), len) },
    };
    let mine: Option<&'b [u8]> = match (&own, in_place) {
        // SAFETY: the copy lives in `finish`.
        (Some(v), _) => Some(unsafe { bytes_at(v.as_ptr(), v.len()) }),
        (None, true) => None,
        // SAFETY: the send buffer holds the root's `n` bytes.
        (None, false) => Some(unsafe { bytes_at(send.cast(), n) }),
    };
    Ok(Prepared {
        send: mine,
        recv: Some(recv_bytes),
        at: Some(at),
        finish: HeldV { own, unpacked },
    })
}

/// The arguments of an `MPI_Scatterv` or `MPI_Iscatterv`, if topo-run can take the call.
///
/// # Safety
/// The arguments are those of a Scatterv call, the buffers valid for `'b`.
#[allow(clippy::too_many_arguments)]
unsafe fn prepare_scatterv<'b>(
    a: &Active,
    types: &mut TypeCache<'_>,
    send: *const c_void,
    send_counts: *const c_int,
    displs: *const c_int,
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
    let size = a.size as usize;
    let landing = |types: &mut TypeCache<'_>, away_from| {
        let (mut unpacked, n) = own_landing(
            types, recv, recv_count, recv_type, away_from, comm, keep_type,
        )?;
        let mine: &'b mut [u8] = match &mut unpacked {
            // SAFETY: the bytes live in `finish`, kept until the collective completes.
            Some(u) => unsafe { bytes_at_mut(u.bytes.as_mut_ptr(), u.bytes.len()) },
            // SAFETY: the receive buffer holds `recv_count` elements, `n` bytes.
            None => unsafe { bytes_at_mut(recv.cast(), n) },
        };
        Ok::<_, HandOff>((unpacked, mine))
    };
    if root != a.rank {
        let (unpacked, mine) = landing(types, (recv.cast_const().cast(), 0))?;
        return Ok(Prepared {
            send: None,
            recv: Some(mine),
            at: None,
            finish: HeldV {
                own: None,
                unpacked,
            },
        });
    }
    let in_place = recv.cast_const() == abi::in_place();
    // SAFETY: per the contract, the arrays hold one int per rank at the root.
    let ss = unsafe { Side::new(send, send_counts, displs, send_type, size) }?;
    let send_plain = unpacked_size(types, send_type);
    if send == abi::in_place() || (send_plain.is_none() && !types.committed(send_type)) {
        return Err(HandOff::Arguments);
    }
    // The root's blocks: in its buffer, or packed one after another.
    let (packed, base, len, at) = match send_plain {
        Some(elem) => {
            let (base, len, at) = ss.in_place_ranges(elem);
            (None, base, len, at)
        }
        None => {
            let sbytes = ss.block_bytes(ss.elem_bytes()?);
            // SAFETY: block r of the send buffer holds `send_counts[r]` elements.
            let (bytes, _) = unsafe { pack_blocks(&ss, &sbytes, comm) }?;
            (Some(bytes), send.cast::<u8>(), 0, laid_out(&sbytes))
        }
    };
    if bad(send, send_plain.is_some(), len) {
        return Err(HandOff::Arguments);
    }
    let (unpacked, mine) = if in_place {
        (None, None)
    } else {
        let (u, m) = landing(types, (base, len))?;
        (u, Some(m))
    };
    let all: &'b [u8] = match &packed {
        // SAFETY: the packed bytes live in `finish`, kept until the collective completes.
        Some(b) => unsafe { bytes_at(b.as_ptr(), b.len()) },
        // SAFETY: the send buffer holds its blocks, `len` bytes from the lowest.
        None => unsafe { bytes_at(base, len) },
    };
    Ok(Prepared {
        send: Some(all),
        recv: mine,
        at: Some(at),
        finish: HeldV {
            own: packed,
            unpacked,
        },
    })
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
        // SAFETY: per the contract.
        let p = unsafe {
            prepare_gatherv(
                a,
                types,
                send,
                send_count,
                send_type,
                recv,
                recv_counts,
                displs,
                recv_type,
                root,
                comm,
                false,
            )
        }?;
        if !a
            .topo
            .raw_gather_v(root, p.send, p.recv.zip(p.at.as_deref()))
        {
            return Err(HandOff::Inactive);
        }
        Ok(p.finish)
    })?;
    // Unpacked outside the library's lock.
    Some(Kept::finish_now(finish))
}

/// `MPI_Igatherv` (and `MPI_Igather`, whose blocks are all alike: `same` is their length,
/// from the caller): whether the call was started on topo-run's path.
///
/// # Safety
/// The arguments are those of an `MPI_Igatherv` call; MPI lets the collective use the
/// buffers until the request completes.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn igatherv(
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
) -> bool {
    let start = |a: &mut Active, types: &mut TypeCache<'_>| {
        // SAFETY: per the contract; the buffers are the collective's until completion,
        // and `finish` keeps the library's own ones alive until then.
        let p = unsafe {
            prepare_gatherv(
                a,
                types,
                send,
                send_count,
                send_type,
                recv,
                recv_counts,
                displs,
                recv_type,
                root,
                comm,
                true,
            )
        }?;
        let recv = p.recv.zip(p.at.as_deref());
        let req = a
            .topo
            .raw_immediate_gather_v(root, p.send, recv, None)
            .ok_or(HandOff::Inactive)?;
        Ok((req, Kept::boxed(p.finish)))
    };
    // SAFETY: `request` is the caller's.
    unsafe { crate::calls::nonblocking(Call::Igatherv, comm, request, start) }
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
        // SAFETY: per the contract.
        let p = unsafe {
            prepare_scatterv(
                a,
                types,
                send,
                send_counts,
                displs,
                send_type,
                recv,
                recv_count,
                recv_type,
                root,
                comm,
                false,
            )
        }?;
        if !a
            .topo
            .raw_scatter_v(root, p.send.zip(p.at.as_deref()), p.recv)
        {
            return Err(HandOff::Inactive);
        }
        Ok(p.finish)
    })?;
    // Unpacked outside the library's lock.
    Some(Kept::finish_now(finish))
}

/// `MPI_Iscatterv`: whether the call was started on topo-run's path.
///
/// # Safety
/// The arguments are those of an `MPI_Iscatterv` call; MPI lets the collective use the
/// buffers until the request completes.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn iscatterv(
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
) -> bool {
    let start = |a: &mut Active, types: &mut TypeCache<'_>| {
        // SAFETY: per the contract; the buffers are the collective's until completion,
        // and `finish` keeps the library's own ones alive until then.
        let p = unsafe {
            prepare_scatterv(
                a,
                types,
                send,
                send_counts,
                displs,
                send_type,
                recv,
                recv_count,
                recv_type,
                root,
                comm,
                true,
            )
        }?;
        let send = p.send.zip(p.at.as_deref());
        let req = a
            .topo
            .raw_immediate_scatter_v(root, send, p.recv, None)
            .ok_or(HandOff::Inactive)?;
        Ok((req, Kept::boxed(p.finish)))
    };
    // SAFETY: `request` is the caller's.
    unsafe { crate::calls::nonblocking(Call::Iscatterv, comm, request, start) }
}
