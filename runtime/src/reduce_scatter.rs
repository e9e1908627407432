//! Reduce_scatter_block, in three forms (only commutative operations come here), which
//! the settings choose by the size of one block ([`Settings::reduce_scatter_for`]):
//!
//! - **root**: the hierarchical Reduce to rank 0, then the hierarchical Scatter of the
//!   result's blocks from rank 0 (MPI's reduce-then-scatter, each half along the
//!   hierarchy: one message out of each node on the way up, one into it on the way down,
//!   whatever the placement).
//! - **leaders** (on a job with a top group; elsewhere root): the whole contribution is
//!   reduced up to each member of the top group (the node leaders, or those of a switch),
//!   which then run a ring reduce-scatter among themselves where each member's part is
//!   the blocks of the ranks under it; each then scatters those blocks down to its
//!   ranks. Every member of the top group sends and receives about the whole message
//!   once, where the Reduce through rank 0 funnels it through one rank and the Scatter
//!   sends it all out of one; but each node's leader combines the whole message for
//!   every rank of its node.
//! - **allreduce**: the hierarchical Allreduce of the whole contribution, of which each
//!   rank keeps its block (the context's blocking entry point runs the Allreduce's flat
//!   forms too, `Topo::raw_reduce_scatter_block`): the combining is spread over the
//!   ranks.
//!
//! The fourth form, **halving** (recursive halving over every rank in the hierarchy's
//! order), runs as its schedule from the context's entry point
//! (`Topo::raw_reduce_scatter_block`, [`crate::nonblocking::ireduce_scatter::build_halving`]),
//! which knows every rank's node; given it, this function takes the root form.
//!
//! (Reduce_scatter, whose blocks differ in length, runs as an Allreduce of which each
//! rank keeps its part: `Topo::raw_reduce_scatter`.)
//!
//! On a context of two ranks every form comes down to one exchange ([`pair`]): each rank
//! sends the other's block of its contribution and combines the block it gets onto its
//! own, the schedules' steps and the root form's second message left out. The context's
//! blocking entry points (`Topo::raw_reduce_scatter_block`, `Topo::raw_reduce_scatter`)
//! take it there whatever the settings say.

use topo_hierarchy::Settings;
use topo_hierarchy::settings::ReduceScatterAlg;

use std::ops::Range;

use crate::allreduce;
use crate::combine::Combine;
use crate::error::Result;
use crate::reduce::{self, Scratch};
use crate::scatter;
use crate::subtrees::{self, Blocks, Subtrees};
use crate::transport::{Fabric, Transport};
use crate::view::View;

/// Reduce_scatter(_block) on a context of two ranks: one exchange with the other rank,
/// which gets `theirs` of this rank's contribution (`send`, or in place `recv`'s), while
/// the block it sends for `mine` is combined onto this rank's own into the first
/// `mine.len()` bytes of `recv` (in place, the rest of `recv` keeps the contribution).
/// `tmp` is scratch of at least `mine.len()` bytes.
#[allow(clippy::too_many_arguments)]
pub fn pair(
    view: &View,
    fabric: &mut dyn Fabric,
    send: Option<&[u8]>,
    recv: &mut [u8],
    mine: Range<usize>,
    theirs: Range<usize>,
    op: &dyn Combine,
    tmp: &mut [u8],
) -> Result<()> {
    debug_assert_eq!(view.size, 2);
    let other = 1 - view.rank;
    let t = fabric.peer(other);
    let n = mine.len();
    match send {
        Some(c) => t.sendrecv_onto(other, &c[theirs], other, &mut recv[..n], &c[mine], tmp, op),
        None => {
            let tmp = &mut tmp[..n];
            t.sendrecv(other, &recv[theirs], other, tmp)?;
            // What went out may lie where the result goes: sent first, then overwritten.
            recv.copy_within(mine, 0);
            op.combine(&mut recv[..n], tmp);
            Ok(())
        }
    }
}

/// Reduces every rank's `size * block` bytes with `op` and leaves block r of the result
/// at rank r: in `recv` (`block` bytes) with `send` (`size * block` bytes), or in place
/// (`send` `None`) at the start of `recv`, which holds the contribution (`size * block`
/// bytes) and keeps the rest of it as it was (as Open MPI's does, and mpi4py's tests
/// check). `sub` is what the context learned for Gather and Scatter; `full` is scratch
/// for rank 0's whole result, kept between calls.
#[allow(clippy::too_many_arguments)]
pub fn reduce_scatter_block(
    view: &View,
    fabric: &mut dyn Fabric,
    sub: &Subtrees,
    s: &Settings,
    send: Option<&[u8]>,
    recv: &mut [u8],
    block: usize,
    op: &dyn Combine,
    scratch: &mut Scratch,
    full: &mut Vec<u8>,
) -> Result<()> {
    let total = block * view.size as usize;
    if block == 0 {
        return Ok(());
    }
    let alg = s.reduce_scatter_for(block);
    // (Whether the job has a top group: the same answer on every rank, where whether this
    // rank's view reaches it is not.)
    if alg == ReduceScatterAlg::Allreduce
        || (alg == ReduceScatterAlg::Leaders && view.top.is_some())
    {
        let contribution: &[u8] = match send {
            Some(sb) => sb,
            None => &recv[..total],
        };
        full.resize(total, 0);
        if alg == ReduceScatterAlg::Leaders {
            full.copy_from_slice(contribution);
            leaders(view, fabric, sub, s, block, op, scratch, full)?;
        } else {
            allreduce::allreduce(view, fabric, s, Some(contribution), full, op, scratch)?;
        }
        recv[..block].copy_from_slice(&full[Blocks::Same(block).at(view.rank)]);
        return Ok(());
    }
    if view.rank == 0 {
        let mine: &[u8] = match send {
            Some(sb) => sb,
            None => &recv[..total],
        };
        full.resize(total, 0);
        reduce::reduce(
            view,
            fabric,
            s,
            0,
            Some(mine),
            Some(&mut full[..]),
            op,
            scratch,
        )?;
        let mine = Some(&mut recv[..block]);
        scatter::scatter(view, fabric, sub, s, 0, Some(&full[..]), mine, block)
    } else {
        let mine: &[u8] = match send {
            Some(sb) => sb,
            None => &recv[..total],
        };
        reduce::reduce(view, fabric, s, 0, Some(mine), None, op, scratch)?;
        scatter::scatter(
            view,
            fabric,
            sub,
            s,
            0,
            None,
            Some(&mut recv[..block]),
            block,
        )
    }
}

/// The leaders' form on `all` (`size` blocks of `block` bytes: this rank's contribution),
/// which ends holding the result's blocks of the ranks under this one, this rank's
/// included, at their places (see the module's doc).
#[allow(clippy::too_many_arguments)]
fn leaders(
    view: &View,
    fabric: &mut dyn Fabric,
    sub: &Subtrees,
    s: &Settings,
    block: usize,
    op: &dyn Combine,
    scratch: &mut Scratch,
    all: &mut [u8],
) -> Result<()> {
    let total = all.len();
    let blocks = Blocks::Same(block);
    let until = subtrees::below_top(view);
    let entry = sub.entry();
    let (packed, tmp) = scratch.pair(total);
    // Up: the whole contribution reduced to the members of the top group (a rank that
    // still holds its sum after its levels below the top is one of them).
    let holds = reduce::up(view, fabric, s, 0, total, until, all, tmp, op)?;
    if let Some(l) = view.levels.get(until).filter(|_| holds) {
        let under: Vec<&[u32]> = (0..l.members.len())
            .map(|p| {
                sub.under(until, p)
                    .expect("the top group knows its members")
            })
            .collect();
        // Each member's part: the blocks of the ranks under it, in rank order, the
        // members' parts one after another.
        let mut parts: Vec<Range<usize>> = Vec::with_capacity(under.len());
        let mut at = 0;
        for ranks in &under {
            parts.push(at..at + ranks.len() * block);
            at += ranks.len() * block;
        }
        let in_order = under
            .iter()
            .flat_map(|r| r.iter())
            .copied()
            .eq(0..view.size);
        let buf: &mut [u8] = if in_order {
            all
        } else {
            for (ranks, part) in under.iter().zip(&parts) {
                for (j, &r) in ranks.iter().enumerate() {
                    let at = part.start + j * block;
                    packed[at..at + block].copy_from_slice(&all[blocks.at(r)]);
                }
            }
            packed
        };
        ring_reduce_scatter(fabric.level(until), &l.members, l.me, &parts, buf, tmp, op)?;
        if !in_order {
            let part = &parts[l.me];
            for (j, &r) in under[l.me].iter().enumerate() {
                let at = part.start + j * block;
                all[blocks.at(r)].copy_from_slice(&packed[at..at + block]);
            }
        }
    } else {
        // Below the top: the blocks under this rank, from its leader.
        let l = &view.levels[entry];
        let piece = subtrees::piece_for(view, entry);
        subtrees::recv_blocks(
            fabric.level(entry),
            l.members[0],
            sub.mine(),
            all,
            blocks,
            piece,
        )?;
    }
    // Down the levels this rank leads: each member's blocks.
    for i in (0..entry.min(until)).rev() {
        let l = &view.levels[i];
        let piece = subtrees::piece_for(view, i);
        let t = fabric.level(i);
        for p in 1..l.members.len() {
            let ranks = sub.under(i, p).expect("a leader knows its members' ranks");
            subtrees::send_blocks(t, l.members[p], ranks, all, blocks, piece)?;
        }
    }
    Ok(())
}

/// Ring reduce-scatter among `members` of `buf` cut into `parts` (one per member, any
/// lengths): after `k - 1` steps member `me` holds part `me` of the reduction of
/// everyone's `buf`. `tmp` is scratch of at least the longest part.
fn ring_reduce_scatter(
    t: &mut dyn Transport,
    members: &[u32],
    me: usize,
    parts: &[Range<usize>],
    buf: &mut [u8],
    tmp: &mut [u8],
    op: &dyn Combine,
) -> Result<()> {
    let k = members.len();
    let (right, left) = (members[(me + 1) % k], members[(me + k - 1) % k]);
    for step in 0..k - 1 {
        // Step s sends part `me - s - 1` and adds the left neighbour's part `me - s - 2`:
        // the last step completes part `me`.
        let sp = parts[(me + 2 * k - step - 1) % k].clone();
        let rp = parts[(me + 2 * k - step - 2) % k].clone();
        let rlen = rp.len();
        t.sendrecv(right, &buf[sp], left, &mut tmp[..rlen])?;
        op.combine(&mut buf[rp], &tmp[..rlen]);
    }
    Ok(())
}
