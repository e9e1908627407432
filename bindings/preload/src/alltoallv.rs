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

use crate::abi::{self, KeptType, MPI_Comm, MPI_Datatype, MPI_Request, SUCCESS};
use crate::blocks::unpacked_size;
use crate::classify::{Call, HandOff};
use crate::state::{self, Active, TypeCache};
use crate::varied::{Side, Unpacked, bad_buffer as bad, bytes_at, bytes_at_mut, pack_blocks};

/// An Alltoallv's buffers on topo-run's path: the blocks to send (the application's, or
/// kept: copied or packed) and their ranges, where the blocks land and their ranges, and
/// what is left for completion. The pointers point into the application's buffers or into
/// the heap buffers `held` owns (moving it moves none of them).
struct Prepared {
    send: Option<(*const u8, usize, Vec<Range<usize>>)>,
    recv: (*mut u8, usize),
    recv_at: Vec<Range<usize>>,
    held: Held,
}

/// Bytes to send and the range of each rank's block in them.
type Blocks<'b, 'r> = (&'b [u8], &'r [Range<usize>]);

impl Prepared {
    /// The bytes to send with their ranges, and where the blocks land.
    ///
    /// # Safety
    /// The application's buffers and `self.held` stay valid for `'b`.
    unsafe fn buffers<'b>(&self) -> (Option<Blocks<'b, '_>>, &'b mut [u8]) {
        // SAFETY: per the contract: the application's buffers hold `len` bytes from their
        // lowest block, `held`'s its own.
        let send = self
            .send
            .as_ref()
            .map(|(ptr, len, at)| (unsafe { bytes_at(*ptr, *len) }, &at[..]));
        // SAFETY: as above.
        (send, unsafe { bytes_at_mut(self.recv.0, self.recv.1) })
    }
}

/// What an Alltoallv on topo-run's path holds until it completes: the blocks it sends
/// that are not the application's as they lie, and a packed receive side to unpack.
struct Held {
    kept: Option<Vec<u8>>,
    unpack: Option<Unpacked>,
}

impl crate::packed::Kept for Held {
    fn finish_now(self) -> c_int {
        self.unpack.map_or(SUCCESS, crate::packed::Kept::finish_now)
    }

    fn is_empty(&self) -> bool {
        self.kept.is_none() && self.unpack.is_none()
    }
}

/// The arguments of an `MPI_Alltoallv` or `MPI_Ialltoallv`, if topo-run can take the
/// call. With `keep_type`, a packed receive side keeps its own duplicate of the receive
/// type (nonblocking calls: the application may free its handle before completion).
///
/// # Safety
/// The arguments are those of an Alltoallv call.
#[allow(clippy::too_many_arguments)]
unsafe fn prepare(
    a: &Active,
    types: &mut TypeCache<'_>,
    send: *const c_void,
    send_counts: *const c_int,
    send_displs: *const c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_counts: *const c_int,
    recv_displs: *const c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
    keep_type: bool,
) -> Result<Prepared, HandOff> {
    let size = a.size as usize;
    let in_place = send == abi::in_place();
    // SAFETY: per the contract, the arrays hold one int per rank.
    let rs = unsafe { Side::new(recv.cast_const(), recv_counts, recv_displs, recv_type, size) }?;
    let ss = if in_place {
        None
    } else {
        // SAFETY: as above.
        Some(unsafe { Side::new(send, send_counts, send_displs, send_type, size) }?)
    };
    let recv_plain = unpacked_size(types, recv_type);
    let send_plain = ss.as_ref().and_then(|s| unpacked_size(types, s.dt));
    if recv_plain.is_none() && !types.committed(recv_type) {
        return Err(HandOff::Arguments);
    }
    let recv_one = rs.signature_bytes(recv_plain)?;
    // The receive side: in the application's buffer, or packed to unpack after.
    let crate::varied::Landing {
        base: recv_base,
        len: recv_len,
        at: recv_at,
        unpack: unpacked,
    } = rs.landing(recv_plain, recv_one)?;
    if bad(recv.cast_const(), recv_plain.is_some(), recv_len) {
        return Err(HandOff::Arguments);
    }
    // The blocks to send: the application's, or packed.
    let mut kept: Option<(Vec<u8>, Vec<Range<usize>>)> = None;
    let mut send_view: Option<(*const u8, usize, Vec<Range<usize>>)> = None;
    match (&ss, send_plain) {
        (Some(s), Some(elem)) => {
            let (base, len, at) = s.in_place_ranges(elem);
            if bad(s.buf, true, len) {
                return Err(HandOff::Arguments);
            }
            // Buffers that overlap are erroneous, but handing the call to MPI on this
            // rank alone would split the ranks between two paths: copy.
            if crate::classify::overlaps_range(base as usize, len, recv_base as usize, recv_len) {
                // SAFETY: the send buffer holds the blocks' `len` bytes from `base`.
                let copy = unsafe { bytes_at(base, len) }.to_vec();
                kept = Some((copy, at));
            } else {
                send_view = Some((base, len, at));
            }
        }
        (Some(s), None) => {
            let sbytes = s.block_bytes(s.elem_bytes()?);
            // SAFETY: the send buffer holds its blocks as its counts and type say.
            kept = Some(unsafe { pack_blocks(s, &sbytes, comm) }?)
        }
        // In place with a packed receive side: the blocks to send are packed from it.
        // SAFETY: the receive buffer holds its blocks as its counts and type say.
        (None, None) => kept = Some(unsafe { pack_blocks(&rs, &rs.block_bytes(recv_one), comm) }?),
        (None, Some(_)) => {}
    }
    let unpack = unpacked
        .map(|ext| {
            Ok::<_, HandOff>(Unpacked {
                bytes: vec![0u8; recv_len],
                ranges: recv_at.clone(),
                ext,
                one: recv_one,
                dt: KeptType::new(recv_type, keep_type).ok_or(HandOff::Arguments)?,
                recv: rs.into_owned(),
                comm,
            })
        })
        .transpose()?;
    let mut unpack = unpack;
    let recv_ptr = match &mut unpack {
        Some(u) => (u.bytes.as_mut_ptr(), recv_len),
        None => (recv_base.cast_mut(), recv_len),
    };
    let (kept, send) = match (kept, send_view) {
        (Some((v, at)), _) => {
            let p = (v.as_ptr(), v.len(), at);
            (Some(v), Some(p))
        }
        (None, view) => (None, view),
    };
    Ok(Prepared {
        send,
        recv: recv_ptr,
        recv_at,
        held: Held { kept, unpack },
    })
}

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
    let held = state::run(Call::Alltoallv, comm, |a, types: &mut TypeCache<'_>| {
        // SAFETY: per the contract.
        let p = unsafe {
            prepare(
                a,
                types,
                send,
                send_counts,
                send_displs,
                send_type,
                recv,
                recv_counts,
                recv_displs,
                recv_type,
                comm,
                false,
            )
        }?;
        // SAFETY: `p.held` lives until the collective has completed (below).
        let (send_arg, recv_bytes) = unsafe { p.buffers() };
        if !a.topo.raw_all_to_all_v(send_arg, recv_bytes, &p.recv_at) {
            return Err(HandOff::Inactive);
        }
        Ok(p.held)
    })?;
    // Unpacked outside the library's lock.
    Some(crate::packed::Kept::finish_now(held))
}

/// `MPI_Ialltoallv`: whether the call was started on topo-run's path.
///
/// # Safety
/// The arguments are those of an `MPI_Ialltoallv` call; MPI lets the collective use the
/// buffers until the request completes.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn ialltoallv(
    send: *const c_void,
    send_counts: *const c_int,
    send_displs: *const c_int,
    send_type: MPI_Datatype,
    recv: *mut c_void,
    recv_counts: *const c_int,
    recv_displs: *const c_int,
    recv_type: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> bool {
    let start = |a: &mut Active, types: &mut TypeCache<'_>| {
        // SAFETY: per the contract.
        let p = unsafe {
            prepare(
                a,
                types,
                send,
                send_counts,
                send_displs,
                send_type,
                recv,
                recv_counts,
                recv_displs,
                recv_type,
                comm,
                true,
            )
        }?;
        // SAFETY: the buffers are the collective's until completion (MPI's rule for the
        // application's, `finish` below keeps `p.held`).
        let (send_arg, recv_bytes) = unsafe { p.buffers() };
        let req = a
            .topo
            .raw_immediate_all_to_all_v(send_arg, recv_bytes, &p.recv_at)
            .ok_or(HandOff::Inactive)?;
        Ok((req, crate::packed::Kept::boxed(p.held)))
    };
    // SAFETY: `request` is the caller's.
    unsafe { crate::calls::nonblocking(Call::Ialltoallv, comm, request, start) }
}
