//! Gatherv: every rank's block, of a length that only the rank itself and the root know,
//! lands at its place in the root's buffer. Two forms ([`RootedVAlg`], setting
//! `rooted-v`):
//!
//! - **through the leaders**, as [`crate::gather`]: first each rank's length climbs to
//!   the job's top group (`lengths_up`), one 8-byte number per rank, so that every
//!   leader knows the lengths of the ranks under its members; the root knows every
//!   length, and hands them to its place in the top group if that is another rank. Then
//!   the blocks climb as a Gather's, one after another in rank order. Where the top group
//!   is the node leaders', the lengths stay inside the nodes: between nodes, one message
//!   per node, as Gather's. In a job on several nodes a block of a Gather's direct size
//!   and more ([`crate::subtrees::GATHER_DIRECT_BLOCK`]) goes straight from its rank to the
//!   root instead, as a Gather's blocks of that size do: its rank and the root know its
//!   length, and its leaders learn it in the first step (`through_leaders`), so each
//!   block goes its own best way, and only the small ones wait for the leaders.
//! - **direct**: every rank sends its block straight to the root over the link that
//!   reaches it (the linear Gatherv of Open MPI and MPICH): one step, a message per rank
//!   into the root, all in flight at once in a job on several nodes; on one node the root
//!   receives them one after another over shared memory (plain queue transfers, which on
//!   1 x 2 took 0.19-0.21 us for a small block where transfers polled in flight took
//!   0.28-0.31), but for blocks of a Gather's written size and more
//!   ([`crate::subtrees::written`]), which their ranks write straight
//!   into the root's buffer while the root copies its own
//!   ([`Transport::write_into`](crate::transport::Transport::write_into)).
//!
//! Where the root's buffer holds the blocks one after another from its start (the usual
//! displacements), the leaders' form gathers straight into it; otherwise into scratch,
//! from which each block is copied to its place. Empty blocks are not sent.

use std::ops::Range;

use topo_hierarchy::Settings;
use topo_hierarchy::settings::RootedVAlg;

use crate::alltoall::{disjoint, exchange};
use crate::error::{Error, Result};
use crate::gather::gather_blocks;
use crate::subtrees::{
    Blocks, Subtrees, below_top, direct, lent_to_root, piece_for, recv_blocks, send_blocks, written,
};
use crate::transport::Fabric;
use crate::view::View;

const CALL: &str = "MPI_Gatherv";

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
                RootedVAlg::Direct if s.nodes == 1 && written(block.len()) => {
                    fabric.peer(root).write_into(root, block)
                }
                RootedVAlg::Direct if s.nodes == 1 => fabric.peer(root).send(&[root], block),
                RootedVAlg::Direct => exchange(fabric, s.spin, None, &[(root, block)], &mut []),
                RootedVAlg::Leaders => {
                    let lens = lengths_up(view, fabric, sub, root, block.len(), None, CALL)?;
                    let small = through_leaders(true, s.nodes, root, &lens);
                    let own: &[u8] = if small[me] == block.len() {
                        block
                    } else {
                        exchange(fabric, s.spin, None, &[(root, block)], &mut [])?;
                        &[]
                    };
                    let ends = ends_of(&small);
                    let blocks = Blocks::Ends(&ends);
                    gather_blocks(view, fabric, sub, s, root, Some(own), None, blocks)
                }
            }
        }
        Some((buf, at)) => {
            let direct_form = view.size == 1 || s.rooted_v_alg() == RootedVAlg::Direct;
            let others = || (0..at.len()).filter(|&r| r != me && !at[r].is_empty());
            let usual = crate::alltoall::ascending(at);
            if direct_form && s.nodes == 1 && usual && !others().any(|r| written(at[r].len())) {
                // One node, small blocks only, in the usual layout (ranges that overlap
                // are named below): one after another, in rank order, with nothing to
                // collect first (this is a small call's whole time).
                if let Some(b) = send {
                    buf[at[me].clone()].copy_from_slice(b);
                }
                for r in others() {
                    fabric
                        .peer(r as u32)
                        .recv(r as u32, &mut buf[at[r].clone()])?;
                }
                return Ok(());
            }
            if direct_form {
                let mut parts = disjoint(buf, at).ok_or_else(overlap)?;
                let own = std::mem::take(&mut parts[me]);
                let (mut large, mut small): (Vec<(u32, &mut [u8])>, Vec<_>) = parts
                    .into_iter()
                    .enumerate()
                    .filter(|(r, p)| *r != me && !p.is_empty())
                    .map(|(r, p)| (r as u32, p))
                    .partition(|(_, p)| s.nodes == 1 && written(p.len()));
                if s.nodes == 1 {
                    // Every rank over shared memory: each large block written by its rank
                    // while the root receives the small ones, in rank order, and copies
                    // its own.
                    return lent_to_root(fabric, &mut large, |fabric| {
                        for (r, part) in small.iter_mut() {
                            fabric.peer(*r).recv(*r, part)?;
                        }
                        if let Some(b) = send {
                            own.copy_from_slice(b);
                        }
                        Ok(())
                    });
                }
                if let Some(b) = send {
                    own.copy_from_slice(b);
                }
                return exchange(fabric, s.spin, None, &[], &mut small);
            }
            let counts: Vec<usize> = at.iter().map(Range::len).collect();
            let lens = lengths_up(view, fabric, sub, root, counts[me], Some(&counts), CALL)?;
            let small = through_leaders(true, s.nodes, root, &lens);
            let straight = small != lens;
            if straight {
                // The large blocks first, straight into their places.
                let mut from: Vec<(u32, &mut [u8])> = disjoint(buf, at)
                    .ok_or_else(overlap)?
                    .into_iter()
                    .enumerate()
                    .filter(|&(r, ref p)| small[r] != lens[r] && !p.is_empty())
                    .map(|(r, p)| (r as u32, p))
                    .collect();
                exchange(fabric, s.spin, None, &[], &mut from)?;
            }
            let ends = ends_of(&small);
            let packed = !straight && laid_out(at, &ends);
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
                let through = |r: usize| r != me && small[r] == lens[r];
                for (r, place) in at.iter().enumerate().filter(|&(r, _)| through(r)) {
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

/// The lengths of the blocks that go through the leaders in the leaders' form of a
/// Gatherv (`gather`) or Scatterv, from every rank's (`lens`, as far as this rank knows
/// them): the others', of [`crate::subtrees::direct`]'s size and more in a job on several
/// nodes, go straight between the root and their rank, as a Gather's or Scatter's blocks
/// of that size do (the root's own never moves), and count 0 here. Every rank that knows a
/// length decides alike: only the rank and the root know both the length and the rule's
/// inputs, and the leaders learn the lengths under them in the first step.
pub(crate) fn through_leaders(gather: bool, nodes: u32, root: u32, lens: &[usize]) -> Vec<usize> {
    lens.iter()
        .enumerate()
        .map(|(r, &l)| {
            if r as u32 != root && direct(gather, nodes, l) {
                0
            } else {
                l
            }
        })
        .collect()
}

/// The first step of the leaders' form, for Gatherv and Scatterv alike: every rank's
/// length `len` climbs to the job's top group as a Gather's blocks do (one 8-byte number
/// per rank), so that every leader below the top learns the lengths under its members
/// (inside the node, where the top group is the node leaders'); the members of the top
/// group do not send theirs on: the root knows every length (`all`, its counts), and hands
/// them to its place in the top group where that is another rank. Returns the lengths by
/// rank that this rank knows then (its own, those under it, every one at the root and its
/// place in the top group), zero for the others. The root and its place check the lengths
/// they learned from the ranks under them against the counts.
pub(crate) fn lengths_up(
    view: &View,
    fabric: &mut dyn Fabric,
    sub: &Subtrees,
    root: u32,
    len: usize,
    all: Option<&[usize]>,
    call: &str,
) -> Result<Vec<usize>> {
    let size = view.size as usize;
    let me = view.rank as usize;
    let n = view.levels.len();
    let until = below_top(view);
    let entry = sub.entry();
    let mut buf = vec![0u8; 8 * size];
    buf[8 * me..8 * me + 8].copy_from_slice(&(len as u64).to_le_bytes());
    let blocks = Blocks::Same(8);
    for i in 0..entry.min(until) {
        let l = &view.levels[i];
        let t = fabric.level(i);
        for p in 1..l.members.len() {
            let ranks = sub.under(i, p).expect("a leader knows its members' ranks");
            recv_blocks(t, l.members[p], ranks, &mut buf, blocks, piece_for(view, i))?;
        }
    }
    if entry < until {
        let l = &view.levels[entry];
        let piece = piece_for(view, entry);
        send_blocks(
            fabric.level(entry),
            l.members[0],
            sub.mine(),
            &buf,
            blocks,
            piece,
        )?;
    }
    let mut lens = lengths_in(Some(&buf), me, len, size);
    let holder = (until < n).then(|| sub.over(until, root)).flatten();
    let holds_top = until < n && entry == until && Some(view.levels[until].me) == holder;
    let learned = lens.clone();
    if let Some(all) = all {
        lens.copy_from_slice(all);
        if sub.top() != root {
            let numbers: Vec<u8> = all.iter().flat_map(|&l| (l as u64).to_le_bytes()).collect();
            fabric.peer(sub.top()).send(&[sub.top()], &numbers)?;
        }
    } else if holds_top || entry == n {
        fabric.peer(root).recv(root, &mut buf)?;
        lens = lengths_in(Some(&buf), me, len, size);
    } else {
        return Ok(lens);
    }
    if let Some(&r) = sub
        .mine()
        .iter()
        .find(|&&r| learned[r as usize] != lens[r as usize])
    {
        return Err(Error::Mismatch {
            reason: format!(
                "{call}: rank {r} has {} bytes where the root's counts give it {}",
                learned[r as usize], lens[r as usize]
            ),
        });
    }
    Ok(lens)
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
        reason: format!("{CALL}: receive blocks that overlap"),
    }
}
