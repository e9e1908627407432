//! What the collectives of blocks of varied counts at displacements (Alltoallv,
//! Allgatherv, Gatherv, Scatterv) share on the library's side: a side's counts and displacements, where its
//! blocks lie when used in place, packing them block by block, and unpacking received
//! blocks after the collective, each in runs that `PMPI_Pack` can count.

use std::borrow::Cow;
use std::ffi::c_void;
use std::ops::Range;
use std::os::raw::c_int;

use crate::abi::{KeptType, MPI_Comm, MPI_Datatype, SUCCESS};
use crate::blocks::extent;
use crate::classify::HandOff;
use crate::packed::{pack, packed_size, unpack};

/// One side of a v-form collective (Alltoallv's either side, the root's side of Allgatherv,
/// Gatherv and Scatterv; or a rank's one block, [`Side::one`]): per rank, the element
/// count and the displacement (in extents of `dt`) of its block. The counts and
/// displacements are the application's arrays, borrowed for the call, or owned by a side
/// kept until a nonblocking call completes ([`Side::into_owned`]).
pub(crate) struct Side<'a> {
    pub(crate) buf: *const c_void,
    pub(crate) counts: Cow<'a, [c_int]>,
    pub(crate) displs: Cow<'a, [c_int]>,
    pub(crate) dt: MPI_Datatype,
}

impl<'a> Side<'a> {
    /// The counts and displacements of `size` ranks, if the arrays are there and no count
    /// is negative.
    ///
    /// # Safety
    /// `counts` and `displs` point to `size` ints each, valid for `'a`, or are null.
    pub(crate) unsafe fn new(
        buf: *const c_void,
        counts: *const c_int,
        displs: *const c_int,
        dt: MPI_Datatype,
        size: usize,
    ) -> Result<Side<'a>, HandOff> {
        if counts.is_null() || displs.is_null() {
            return Err(HandOff::Arguments);
        }
        // SAFETY: per the contract.
        let (counts, displs) = unsafe {
            (
                std::slice::from_raw_parts(counts, size),
                std::slice::from_raw_parts(displs, size),
            )
        };
        if counts.iter().any(|&c| c < 0) {
            return Err(HandOff::Arguments);
        }
        Ok(Side {
            buf,
            counts: Cow::Borrowed(counts),
            displs: Cow::Borrowed(displs),
            dt,
        })
    }

    /// One block of `count` elements of `dt` at `buf` (a rank's own side of a Gatherv or
    /// Scatterv), if the count is not negative.
    pub(crate) fn one(
        buf: *const c_void,
        count: &'a c_int,
        dt: MPI_Datatype,
    ) -> Result<Side<'a>, HandOff> {
        if *count < 0 {
            return Err(HandOff::Arguments);
        }
        Ok(Side {
            buf,
            counts: Cow::Borrowed(std::slice::from_ref(count)),
            displs: Cow::Borrowed(&[0]),
            dt,
        })
    }

    /// The same side with its own copies of the counts and displacements.
    pub(crate) fn into_owned(self) -> Side<'static> {
        Side {
            buf: self.buf,
            counts: Cow::Owned(self.counts.into_owned()),
            displs: Cow::Owned(self.displs.into_owned()),
            dt: self.dt,
        }
    }

    /// The bytes of one element's type signature.
    pub(crate) fn elem_bytes(&self) -> Result<usize, HandOff> {
        match packed_size(1, self.dt) {
            Err(HandOff::ZeroCount) => Ok(0),
            r => r,
        }
    }

    /// The bytes of one element's signature: `plain`, a gap-free predefined type's size
    /// where the caller has it, else MPI's ([`Side::elem_bytes`]).
    pub(crate) fn signature_bytes(&self, plain: Option<usize>) -> Result<usize, HandOff> {
        plain.map_or_else(|| self.elem_bytes(), Ok)
    }

    /// The bytes of block r's elements, `one` each.
    pub(crate) fn bytes(&self, r: usize, one: usize) -> usize {
        self.counts[r] as usize * one
    }

    /// The bytes of each block's elements, `one` each.
    pub(crate) fn block_bytes(&self, one: usize) -> Vec<usize> {
        (0..self.counts.len()).map(|r| self.bytes(r, one)).collect()
    }

    /// Block r cut into runs of elements that `PMPI_Pack` can count in bytes (`INT_MAX` at
    /// most each): (address, elements, bytes) of each run.
    pub(crate) fn runs(
        &self,
        r: usize,
        ext: isize,
        one: usize,
    ) -> impl Iterator<Item = (*const c_void, c_int, usize)> {
        let per = (c_int::MAX as usize)
            .checked_div(one)
            .map_or(usize::MAX, |p| p.max(1));
        let (start, count) = (self.at(r, ext).cast::<u8>(), self.counts[r] as usize);
        (0..count).step_by(per).map(move |first| {
            let n = per.min(count - first);
            (
                start.wrapping_offset(first as isize * ext).cast(),
                n as c_int,
                n * one,
            )
        })
    }

    /// Where the blocks lie in the buffer itself (a gap-free predefined type of `elem`
    /// bytes, whose extent is its size): the address of the lowest block's first byte (the
    /// buffer's start, or before it for a negative displacement), the bytes from there to
    /// the end of the last block, and each block's range from there (an empty block's is
    /// empty).
    pub(crate) fn in_place_ranges(&self, elem: usize) -> (*const u8, usize, Vec<Range<usize>>) {
        let at = |r: usize| self.displs[r] as i64 * elem as i64;
        let size = self.counts.len();
        let used = (0..size).filter(|&r| self.counts[r] > 0);
        let low = used.map(at).min().unwrap_or(0).min(0);
        let mut len = 0;
        let ranges: Vec<Range<usize>> = (0..size)
            .map(|r| {
                let n = self.bytes(r, elem);
                if n == 0 {
                    return 0..0;
                }
                let start = (at(r) - low) as usize;
                len = len.max(start + n);
                start..start + n
            })
            .collect();
        (
            self.buf.cast::<u8>().wrapping_offset(low as isize),
            len,
            ranges,
        )
    }

    /// Where a receive side's blocks land: for a gap-free predefined type of `elem` bytes
    /// in the application's buffer ([`Side::in_place_ranges`]), else one after another
    /// in a buffer of the library's (`one` bytes of signature per element), to unpack after
    /// with the type's extent.
    pub(crate) fn landing(&self, elem: Option<usize>, one: usize) -> Result<Landing, HandOff> {
        Ok(match elem {
            Some(elem) => {
                let (base, len, at) = self.in_place_ranges(elem);
                Landing {
                    base,
                    len,
                    at,
                    unpack: None,
                }
            }
            None => {
                let at = laid_out(&self.block_bytes(one));
                let len = at.last().map_or(0, |r| r.end);
                Landing {
                    base: self.buf.cast(),
                    len,
                    at,
                    unpack: Some(extent(self.dt)?),
                }
            }
        })
    }

    /// The side of block `r` alone.
    pub(crate) fn only(&self, r: usize) -> Side<'static> {
        Side {
            buf: self.buf,
            counts: Cow::Owned(vec![self.counts[r]]),
            displs: Cow::Owned(vec![self.displs[r]]),
            dt: self.dt,
        }
    }

    /// The address of block r.
    pub(crate) fn at(&self, r: usize, ext: isize) -> *const c_void {
        self.buf
            .cast::<u8>()
            .wrapping_offset(self.displs[r] as isize * ext)
            .cast()
    }
}

/// Whether a v-form's buffer `p` is one topo-run does not take
/// ([`crate::blocks::bad_buffer`]); one that carries nothing (`bytes` 0) may be any
/// address, null too, but MPI_IN_PLACE.
pub(crate) fn bad_buffer(p: *const c_void, plain: bool, bytes: usize) -> bool {
    crate::blocks::bad_buffer(p, plain && bytes > 0)
}

/// Where a receive side's blocks land ([`Side::landing`]).
pub(crate) struct Landing {
    /// The lowest address of the blocks in the application's buffer (its start where
    /// they are unpacked after).
    pub(crate) base: *const u8,
    /// The bytes from `base` to the end of the last block (or of the packed blocks).
    pub(crate) len: usize,
    /// Each block's range from `base`, or in the packed blocks.
    pub(crate) at: Vec<Range<usize>>,
    /// The type's extent where the blocks arrive packed, to unpack after.
    pub(crate) unpack: Option<isize>,
}

/// The received blocks still to be unpacked into the application's buffer: block r's
/// bytes at `ranges[r]` of `bytes`, into `recv.counts[r]` elements at `recv.at(r)`.
pub(crate) struct Unpacked {
    pub(crate) bytes: Vec<u8>,
    pub(crate) ranges: Vec<Range<usize>>,
    pub(crate) recv: Side<'static>,
    pub(crate) ext: isize,
    /// The bytes of one received element.
    pub(crate) one: usize,
    pub(crate) dt: KeptType,
    pub(crate) comm: MPI_Comm,
}

impl crate::packed::Kept for Unpacked {
    fn is_empty(&self) -> bool {
        false
    }

    fn finish_now(self) -> c_int {
        for (r, range) in self.ranges.iter().enumerate() {
            let mut at = range.start;
            for (p, count, n) in self.recv.runs(r, self.ext, self.one) {
                // SAFETY: block r of the receive buffer holds `counts[r]` elements of the
                // type at its displacement (MPI's layout of an Alltoallv's receive buffer);
                // this run is `count` of them, whose signature carries its `n` bytes.
                let rc = unsafe {
                    unpack(
                        &self.bytes[at..at + n],
                        p.cast_mut(),
                        count,
                        self.dt.handle(),
                        self.comm,
                    )
                };
                if rc != SUCCESS {
                    return rc;
                }
                at += n;
            }
        }
        SUCCESS
    }
}

/// What a v-form collective (Allgatherv, Gatherv, Scatterv) keeps until it completes: the
/// library's copy of a rank's own block or of the root's packed blocks, and received
/// blocks still to be unpacked.
pub(crate) struct HeldV {
    /// Read by the collective through slices until it completes; dropped after.
    pub(crate) own: Option<Vec<u8>>,
    pub(crate) unpacked: Option<Unpacked>,
}

impl crate::packed::Kept for HeldV {
    fn finish_now(self) -> c_int {
        self.unpacked
            .map_or(SUCCESS, crate::packed::Kept::finish_now)
    }

    fn is_empty(&self) -> bool {
        self.own.is_none() && self.unpacked.is_none()
    }
}

/// Packs the blocks of `side` one after another; returns them and their ranges.
///
/// # Safety
/// Block r of `side` holds `counts[r]` elements of its type at its displacement.
pub(crate) unsafe fn pack_blocks(
    side: &Side,
    bytes: &[usize],
    comm: MPI_Comm,
) -> Result<(Vec<u8>, Vec<Range<usize>>), HandOff> {
    let (ext, one) = (extent(side.dt)?, side.elem_bytes()?);
    let (mut out, mut ranges) = (Vec::with_capacity(bytes.iter().sum()), Vec::new());
    for r in 0..bytes.len() {
        let start = out.len();
        for (p, count, n) in side.runs(r, ext, one) {
            // SAFETY: per the contract: the run is `count` of block r's elements.
            out.extend(unsafe { pack(p, count, side.dt, n, comm) }?);
        }
        ranges.push(start..out.len());
    }
    Ok((out, ranges))
}

/// Consecutive ranges of the given lengths from 0.
pub(crate) fn laid_out(bytes: &[usize]) -> Vec<Range<usize>> {
    let mut at = 0;
    bytes
        .iter()
        .map(|&n| {
            at += n;
            at - n..at
        })
        .collect()
}

/// `len` bytes at `p`; none where `len` is 0 (`p` may then be null: a side that carries
/// nothing may pass any address).
///
/// # Safety
/// Where `len` is not 0, `p` holds `len` bytes valid for `'b`.
pub(crate) unsafe fn bytes_at<'b>(p: *const u8, len: usize) -> &'b [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: per the contract.
    unsafe { std::slice::from_raw_parts(p, len) }
}

/// The mutable form of [`bytes_at`].
///
/// # Safety
/// Where `len` is not 0, `p` holds `len` bytes valid for `'b` that nothing else uses.
pub(crate) unsafe fn bytes_at_mut<'b>(p: *mut u8, len: usize) -> &'b mut [u8] {
    if len == 0 {
        return &mut [];
    }
    // SAFETY: per the contract.
    unsafe { std::slice::from_raw_parts_mut(p, len) }
}
