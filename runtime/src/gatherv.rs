//! Gatherv: every rank's block, of a length that only the rank itself and the root know,
//! lands at its place in the root's buffer. Two forms ([`RootedVAlg`], setting
//! `rooted-v`):
//!
//! - **through the leaders**, as [`crate::gather`]: first each rank's length climbs, a
//!   Gather of one 8-byte number per rank, so that every leader knows the lengths of the
//!   ranks under its members (and the root checks them against its counts); then the
//!   blocks climb as a Gather's, one after another in rank order. Between nodes, one
//!   message per node in each step.
//! - **direct**: every rank sends its block straight to the root over the link that
//!   reaches it, all at once (the linear Gatherv of Open MPI and MPICH): one step, a
//!   message per rank into the root.
//!
//! Where the root's buffer holds the blocks one after another from its start (the usual
//! displacements), the leaders' form gathers straight into it; otherwise into scratch,
//! from which each block is copied to its place. Empty blocks are not sent.

use std::ops::Range;

use topo_hierarchy::Settings;
use topo_hierarchy::settings::RootedVAlg;

use crate::alltoall::{disjoint, exchange};
use crate::error::{Error, Result};
use crate::gather::{gather_blocks, gather_kept};
use crate::subtrees::{Blocks, Subtrees};
use crate::transport::Fabric;
use crate::view::View;

/// The root's side of a Gatherv: its buffer and the place of each rank's block in it.
pub type Landing<'a> = (&'a mut [u8], &'a [Range<usize>]);

/// Gathers every rank's block into the root's buffer: rank r's lands at `recv.0[recv.1[r]]`.
/// `send` is this rank's block, or `None` at the root in place (its block at its place in
/// `recv` already). `recv` is `Some` at the root only. The caller has checked that the
/// root's ranges lie in its buffer without overlapping and that its `send` has its length.
#[allow(clippy::too_many_arguments)]
pub fn gatherv(
    view: &View,
    fabric: &mut dyn Fabric,
    sub: &Subtrees,
    s: &Settings,
    root: u32,
    send: Option<&[u8]>,
    recv: Option<Landing>,
    scratch: &mut Vec<u8>,
) -> Result<()> {
    let me = view.rank as usize;
    match recv {
        None => {
            let block = send.expect("a rank other than the root passes its block");
            if view.size == 1 {
                return Ok(());
            }
            match s.rooted_v_alg() {
                RootedVAlg::Direct if block.is_empty() => Ok(()),
                RootedVAlg::Direct => exchange(fabric, s.spin, None, &[(root, block)], &mut []),
                RootedVAlg::Leaders => {
                    let lens = lengths_up(view, fabric, sub, s, root, block.len())?;
                    let ends = ends_of(&lens);
                    gather_blocks(view, fabric, sub, s, root, send, None, Blocks::Ends(&ends))
                }
            }
        }
        Some((buf, at)) => {
            if view.size == 1 || s.rooted_v_alg() == RootedVAlg::Direct {
                let mut parts = disjoint(buf, at).ok_or_else(overlap)?;
                if let Some(b) = send {
                    parts[me].copy_from_slice(b);
                }
                let mut from: Vec<(u32, &mut [u8])> = parts
                    .into_iter()
                    .enumerate()
                    .filter(|(r, p)| *r != me && !p.is_empty())
                    .map(|(r, p)| (r as u32, p))
                    .collect();
                return exchange(fabric, s.spin, None, &[], &mut from);
            }
            let lens: Vec<usize> = at.iter().map(Range::len).collect();
            let learned = lengths_up(view, fabric, sub, s, root, lens[me])?;
            if let Some(r) = (0..lens.len()).find(|&r| learned[r] != lens[r]) {
                return Err(Error::Mismatch {
                    reason: format!(
                        "MPI_Gatherv: rank {r} sends {} bytes where the root's counts \
                         give it {}",
                        learned[r], lens[r]
                    ),
                });
            }
            let ends = ends_of(&lens);
            let packed = laid_out(at, &ends);
            let total = ends.last().copied().unwrap_or(0);
            let own: Vec<u8>;
            let mine: Option<&[u8]> = match send {
                Some(b) => Some(b),
                None if packed => None,
                None => {
                    own = buf[at[me].clone()].to_vec();
                    Some(&own)
                }
            };
            let blocks = Blocks::Ends(&ends);
            let work: &mut [u8] = if packed {
                &mut buf[..total]
            } else {
                scratch.resize(total, 0);
                &mut scratch[..]
            };
            gather_blocks(view, fabric, sub, s, root, mine, Some(work), blocks)?;
            if !packed {
                for (r, place) in at.iter().enumerate().filter(|&(r, _)| r != me) {
                    buf[place.clone()].copy_from_slice(&scratch[blocks.at(r as u32)]);
                }
                if let Some(b) = mine {
                    buf[at[me].clone()].copy_from_slice(b);
                }
            }
            Ok(())
        }
    }
}

/// The first step of the leaders' form: every rank's length `len` climbs as a Gather of
/// one 8-byte number per rank. Returns the lengths by rank that this rank knows then (its
/// own, those under it, all at the root), zero for the others.
pub(crate) fn lengths_up(
    view: &View,
    fabric: &mut dyn Fabric,
    sub: &Subtrees,
    s: &Settings,
    root: u32,
    len: usize,
) -> Result<Vec<usize>> {
    let size = view.size as usize;
    let me = view.rank as usize;
    let mine = (len as u64).to_le_bytes();
    let known = if me == root as usize {
        let mut all = vec![0u8; 8 * size];
        all[8 * me..8 * me + 8].copy_from_slice(&mine);
        gather_kept(
            view,
            fabric,
            sub,
            s,
            root,
            None,
            Some(&mut all),
            Blocks::Same(8),
        )?;
        Some(all)
    } else {
        gather_kept(
            view,
            fabric,
            sub,
            s,
            root,
            Some(&mine),
            None,
            Blocks::Same(8),
        )?
    };
    Ok(lengths_in(known.as_deref(), me, len, size))
}

/// The lengths by rank in `known` (8-byte numbers by rank), or only this rank's (`me`'s,
/// `len`) where it knows no other.
pub(crate) fn lengths_in(known: Option<&[u8]>, me: usize, len: usize, size: usize) -> Vec<usize> {
    match known {
        Some(all) => all
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")) as usize)
            .collect(),
        None => {
            let mut lens = vec![0; size];
            lens[me] = len;
            lens
        }
    }
}

/// The end of each rank's block in a buffer that holds the blocks of `lens` one after
/// another in rank order.
pub(crate) fn ends_of(lens: &[usize]) -> Vec<usize> {
    lens.iter()
        .scan(0, |end, &l| {
            *end += l;
            Some(*end)
        })
        .collect()
}

/// Whether `at` places the blocks one after another from the buffer's start (`ends`, of
/// their lengths); an empty block may name any place.
pub(crate) fn laid_out(at: &[Range<usize>], ends: &[usize]) -> bool {
    at.iter()
        .zip(ends)
        .all(|(r, &end)| r.is_empty() || r.end == end)
}

fn overlap() -> Error {
    Error::Mismatch {
        reason: "MPI_Gatherv: receive blocks that overlap".into(),
    }
}
