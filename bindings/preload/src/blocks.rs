//! What the collectives of blocks (Allgather, Gather, Scatter, Alltoall) share on the
//! library's side: whether a datatype is used in place or packed, its extent, received
//! blocks still to be unpacked into the application's buffer, and the views of the bytes a
//! collective reads and writes.

use std::ffi::c_void;
use std::os::raw::c_int;

use mpi::ffi;

use crate::abi::{KeptType, MPI_Comm, MPI_Datatype, SUCCESS, TypeInfo};
use crate::classify::{HandOff, TypeClass};
use crate::packed::unpack;
use crate::state::TypeCache;

/// A type used as it is: predefined, without gaps (the value-index pairs have gaps).
pub(crate) fn unpacked_size(types: &mut TypeCache<'_>, dt: MPI_Datatype) -> Option<usize> {
    match types.datatype(dt) {
        TypeInfo::Plain { size, class, .. } if class != TypeClass::Pair => Some(size),
        _ => None,
    }
}

/// Whether buffer `p` of a collective of blocks is one topo-run does not take:
/// `MPI_IN_PLACE` where the caller asks (only where the standard allows it, the caller's
/// business), or MPI_BOTTOM (the null pointer under both ABIs) with a plain type. With a
/// derived type (of absolute addresses) MPI_BOTTOM is legal, on any subset of the ranks,
/// and packed like any buffer; with a predefined type it is erroneous, for MPI to report.
pub(crate) fn bad_buffer(p: *const c_void, plain: bool) -> bool {
    p == crate::abi::in_place() || (plain && (p.is_null() || p == crate::abi::bottom()))
}

/// The extent of `dt` (the stride between consecutive elements).
pub(crate) fn extent(dt: MPI_Datatype) -> Result<isize, HandOff> {
    let (mut lb, mut ext) = (0, 0);
    // SAFETY: `dt` is the application's handle; MPI writes two address-sized ints.
    let rc = unsafe { ffi::PMPI_Type_get_extent(dt, &mut lb, &mut ext) };
    if rc != SUCCESS {
        return Err(HandOff::Arguments);
    }
    // `MPI_Aint` is `isize` under Open MPI and `i64` under MPICH: the same width here.
    #[allow(clippy::unnecessary_cast)]
    Ok(ext as isize)
}

/// Blocks received packed, still to be unpacked into the application's buffer: block r
/// into `count` elements of `dt` at `recv + r * stride` (an Allgather's or a Gather's
/// result at the root, a Scatter's one block).
pub(crate) struct Unpack {
    pub(crate) bytes: Vec<u8>,
    pub(crate) block: usize,
    pub(crate) recv: *mut c_void,
    pub(crate) count: c_int,
    /// The application's datatype, or a duplicate of it.
    pub(crate) dt: KeptType,
    pub(crate) stride: isize,
    pub(crate) comm: MPI_Comm,
}

impl Unpack {
    /// Unpacks every rank's block to its place. Returns MPI's code (an error also goes to
    /// the communicator's error handler).
    pub(crate) fn finish(&self) -> c_int {
        for (r, block) in self.bytes.chunks_exact(self.block).enumerate() {
            let at = self
                .recv
                .cast::<u8>()
                .wrapping_offset(r as isize * self.stride);
            // SAFETY: block r of the receive buffer holds `count` elements of `dt` at
            // `r * count * extent` bytes from its start (the MPI layout of an Allgather's
            // receive buffer); `block` holds their packed bytes.
            let rc = unsafe { unpack(block, at.cast(), self.count, self.dt.handle(), self.comm) };
            if rc != SUCCESS {
                return rc;
            }
        }
        SUCCESS
    }
}

/// What a collective of blocks on topo-run's path holds until it completes: the bytes it
/// reads that are not the application's as they lie (a block copied or packed, a root's
/// blocks packed), and a packed receive side still to unpack.
pub(crate) struct Held {
    pub(crate) kept: Option<Vec<u8>>,
    pub(crate) unpack: Option<Unpack>,
}

impl crate::packed::Kept for Held {
    fn finish_now(self) -> c_int {
        self.unpack.as_ref().map_or(SUCCESS, Unpack::finish)
    }

    fn is_empty(&self) -> bool {
        self.kept.is_none() && self.unpack.is_none()
    }
}

/// The buffers of an Allgather or Alltoall on topo-run's path: the bytes to send and where
/// the blocks land, and what is left for completion.
pub(crate) struct Prepared<'b> {
    /// The bytes to send; `None` in place, where the collective reads them from `recv`.
    pub(crate) send: Option<&'b [u8]>,
    /// Where the `total` bytes of blocks land.
    pub(crate) recv: &'b mut [u8],
    pub(crate) finish: Held,
}

impl<'b> Prepared<'b> {
    /// The collective's views of `finish`'s own bytes, or else of the application's: the
    /// kept or packed bytes to send, else `send_len` bytes at `send` (none in place); the
    /// packed receive side, else `total` bytes at `recv`.
    ///
    /// # Safety
    /// Unless `finish` holds them, `send` holds `send_len` bytes and `recv` `total` bytes,
    /// valid for `'b`; a packed receive side holds `total` bytes. The heap buffers `finish`
    /// owns do not move when it does, and the caller keeps it until the collective
    /// completes.
    pub(crate) unsafe fn over(
        mut finish: Held,
        send: *const c_void,
        send_len: usize,
        in_place: bool,
        recv: *mut c_void,
        total: usize,
    ) -> Self {
        let send: Option<&'b [u8]> = match (&finish.kept, in_place) {
            // SAFETY: per the contract.
            (Some(v), _) => Some(unsafe { std::slice::from_raw_parts(v.as_ptr(), v.len()) }),
            (None, true) => None,
            // SAFETY: per the contract.
            (None, false) => Some(unsafe { std::slice::from_raw_parts(send.cast(), send_len) }),
        };
        let recv: &'b mut [u8] = match &mut finish.unpack {
            // SAFETY: per the contract.
            Some(u) => unsafe { std::slice::from_raw_parts_mut(u.bytes.as_mut_ptr(), total) },
            // SAFETY: per the contract.
            None => unsafe { std::slice::from_raw_parts_mut(recv.cast(), total) },
        };
        Prepared { send, recv, finish }
    }
}
