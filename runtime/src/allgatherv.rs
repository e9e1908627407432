//! Allgatherv: every rank's block, of a length every rank knows, lands at its place on
//! every rank. The hierarchical Allgather's form with blocks of any lengths: the blocks
//! climb the hierarchy to the job's top group as a Gather's do (each leader receives the
//! blocks under each member in one message, [`Subtrees`]); the top group's members send
//! each other what they hold, all at once (two members exchange); then each broadcasts
//! the whole result down its part of the hierarchy ([`crate::bcast`]'s top-down part,
//! pipelined in its chunks). So every node receives the other nodes' blocks once and
//! sends its own out once. The blocks lie one after another in rank order; where the
//! receive buffer holds them so from its start (the usual displacements) the collective
//! works in it, otherwise in scratch, from which each block is copied to its place.
//!
//! On several nodes, from `nonblocking::iallgatherv::FLAT_FROM` bytes per rank on average
//! (earlier with many ranks per node: `nonblocking::iallgatherv::flat_for`), `Topo` runs the
//! flat exchanges instead (remapped recursive doubling, Bruck's or the ring, as their
//! schedules): the three steps here run one after another, each whole.

use std::ops::Range;

use topo_hierarchy::Settings;

use topo_hierarchy::settings::Collective;

use crate::alltoall::exchange;
use crate::bcast;
use crate::error::Result;
use crate::subtrees::{
    Blocks, Subtrees, below_top, pack, piece_for, recv_blocks, run_of, send_blocks, unpack,
};
use crate::transport::Fabric;
use crate::view::View;

/// Rank r's block lands at `recv[at[r]]` on every rank. `send` is this rank's block, or
/// `None` when it is in place (at `recv[at[rank]]`). `scratch` holds the blocks where
/// `at` does not lay them out one after another from 0. The caller has checked that the
/// ranges lie in `recv` and that `send` has this rank's length.
#[allow(clippy::too_many_arguments)]
pub fn allgatherv(
    view: &View,
    fabric: &mut dyn Fabric,
    sub: &Subtrees,
    s: &Settings,
    send: Option<&[u8]>,
    recv: &mut [u8],
    at: &[Range<usize>],
    scratch: &mut Vec<u8>,
) -> Result<()> {
    let me = view.rank as usize;
    if view.only_level().is_some_and(|l| l.intra) {
        // One group inside one node holds the whole job: every rank sends its block to
        // each other rank in rounds of shared-memory exchanges (as Alltoall does there).
        let copy;
        let mine: &[u8] = match send {
            Some(b) => b,
            None => {
                copy = recv[at[me].clone()].to_vec();
                &copy
            }
        };
        let Some(mut parts) = crate::alltoall::disjoint(recv, at) else {
            return Err(crate::error::Error::Mismatch {
                reason: "MPI_Allgatherv: receive blocks that overlap".into(),
            });
        };
        parts[me].copy_from_slice(mine);
        let sends = vec![mine; at.len()];
        return crate::alltoall::in_rounds(view, fabric, &sends, &mut parts);
    }
    let (starts, packed) = rank_order(at);
    let (ends, total) = (&starts[1..], starts[at.len()]);
    let own: Vec<u8>;
    let mine: Option<&[u8]> = match send {
        Some(b) => Some(b),
        // In place in a packed buffer, the block is where the collective wants it.
        None if packed => None,
        None => {
            own = recv[at[me].clone()].to_vec();
            Some(&own)
        }
    };
    let work: &mut [u8] = if packed {
        &mut recv[..total]
    } else {
        scratch.resize(total, 0);
        &mut scratch[..]
    };
    let blocks = Blocks::Ends(ends);
    if let Some(b) = mine {
        work[blocks.at(me as u32)].copy_from_slice(b);
    }
    if total > 0 && view.size > 1 {
        let from = up_and_across(view, fabric, sub, s.spin, work, blocks)?;
        for piece in work.chunks_mut(view.chunk_bytes(s, Collective::Allgather, total, 1)) {
            bcast::down(view, fabric, s, 0, total, from, piece)?;
        }
    }
    if !packed {
        for (r, place) in at.iter().enumerate() {
            recv[place.clone()].copy_from_slice(&scratch[blocks.at(r as u32)]);
        }
    }
    Ok(())
}

/// The blocks at `at` laid out one after another in rank order: where each starts, with
/// the end of the last one appended (`at.len() + 1` offsets), and whether `at` lays them
/// out so from 0 already (an empty block may sit anywhere). The layout depends only on
/// the blocks' lengths, which every rank knows alike; `at` is each rank's own choice.
pub fn rank_order(at: &[Range<usize>]) -> (Vec<usize>, bool) {
    let mut starts = Vec::with_capacity(at.len() + 1);
    let mut total = 0;
    for r in at {
        starts.push(total);
        total += r.len();
    }
    starts.push(total);
    let packed = at
        .iter()
        .zip(&starts)
        .all(|(r, &start)| r.is_empty() || r.start == start);
    (starts, packed)
}

/// The way up and across: every rank's block (in `work`, laid out as `blocks`) climbs to
/// the member of the job's top group it is under, and the top group's members send each
/// other what they hold. Returns the level from which this rank takes part in the
/// broadcast down (its leader's level, or the top group's).
fn up_and_across(
    view: &View,
    fabric: &mut dyn Fabric,
    sub: &Subtrees,
    spin: u32,
    work: &mut [u8],
    blocks: Blocks,
) -> Result<usize> {
    let n = view.levels.len();
    let until = below_top(view);
    let entry = sub.entry();
    for i in 0..entry.min(until) {
        let l = &view.levels[i];
        let (t, piece) = (fabric.level(i), piece_for(view, i));
        for p in 1..l.members.len() {
            let ranks = sub.under(i, p).expect("a leader knows its members' ranks");
            recv_blocks(t, l.members[p], ranks, work, blocks, piece)?;
        }
    }
    if entry < until {
        let l = &view.levels[entry];
        let piece = piece_for(view, entry);
        send_blocks(
            fabric.level(entry),
            l.members[0],
            sub.mine(),
            work,
            blocks,
            piece,
        )?;
        return Ok(entry + 1);
    }
    if until == n {
        // No top group: this rank (rank 0) holds everything.
        return Ok(n);
    }
    let l = &view.levels[until];
    let k = l.members.len();
    let under = |q: usize| {
        sub.under(until, q)
            .expect("the top group knows its members")
    };
    let others: Vec<usize> = (1..k).map(|d| (l.me + d) % k).collect();
    // Where every member's blocks lie in `work`: one run each with block placement, so
    // they travel straight from and into place; else packed, and put in place after.
    let runs: Option<Vec<Range<usize>>> = (0..k).map(|q| run_of(under(q), blocks)).collect();
    match runs {
        Some(runs) => {
            let mut parts =
                crate::alltoall::disjoint(work, &runs).expect("the runs of different members");
            let out: &mut [u8] = std::mem::take(&mut parts[l.me]);
            let mut theirs: Vec<(u32, &mut [u8])> = others
                .iter()
                .map(|&q| (l.members[q], std::mem::take(&mut parts[q])))
                .collect();
            across(fabric, spin, until, &*out, &mut theirs)?;
        }
        None => {
            let out = pack(sub.mine(), work, blocks);
            let bytes = |q: usize| -> usize { under(q).iter().map(|&r| blocks.at(r).len()).sum() };
            let mut got: Vec<Vec<u8>> = others.iter().map(|&q| vec![0u8; bytes(q)]).collect();
            let mut theirs: Vec<(u32, &mut [u8])> = others
                .iter()
                .zip(got.iter_mut())
                .map(|(&q, b)| (l.members[q], &mut b[..]))
                .collect();
            across(fabric, spin, until, &out, &mut theirs)?;
            for (&q, b) in others.iter().zip(&got) {
                unpack(under(q), b, work, blocks);
            }
        }
    }
    Ok(until)
}

/// The top group's step: this member's blocks (`out`) to every other member, theirs from
/// each into `theirs`, all at once over `fabric.level(until)`; two members exchange (the
/// shared-memory exchange where they share a node). A set of no bytes is not sent (every
/// member knows every set's length).
fn across(
    fabric: &mut dyn Fabric,
    spin: u32,
    until: usize,
    out: &[u8],
    theirs: &mut [(u32, &mut [u8])],
) -> Result<()> {
    if let [(other, buf)] = theirs {
        return fabric.level(until).sendrecv(*other, out, *other, buf);
    }
    let sends: Vec<(u32, &[u8])> = if out.is_empty() {
        Vec::new()
    } else {
        theirs.iter().map(|(q, _)| (*q, out)).collect()
    };
    let mut recvs: Vec<(u32, &mut [u8])> = theirs
        .iter_mut()
        .filter(|(_, b)| !b.is_empty())
        .map(|(q, b)| (*q, &mut **b))
        .collect();
    exchange(fabric, spin, Some(until), &sends, &mut recvs)
}
