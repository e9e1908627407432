//! Allgather, hierarchical (TopoMPI's first form): every rank's block travels bottom-up
//! through the plan's levels, each group's leader collecting its members' blocks tagged
//! with their ranks, up to the members of the job's top group (a node's leaders, say);
//! they exchange what they hold among themselves, by recursive doubling where their
//! number is a power of two or by a ring ([`TopAlg`]); then each broadcasts the whole
//! result down its part of the hierarchy. Every block crosses a node or switch boundary
//! once on the way up (inside its leader's message) and reaches each other top member
//! once: the least any Allgather sends between the top group's parts, in few messages.
//!
//! A set of blocks sent from a member to its leader, or between top members, starts with
//! its count (4 bytes) and its ranks (4 bytes each, little-endian): the receiver cannot know
//! which ranks the sender's subtree holds, since a rank's plan lists only its own groups.
//! Blocks of [`IN_PLACE_BLOCK`] bytes and more then travel straight from their places in the
//! sender's buffer into theirs in the receiver's, one message per run of consecutive
//! ranks (a whole node's, with block placement); smaller ones go packed behind the ranks,
//! in the same message.
//!
//! [`recursive_doubling`] is TopoMPI's second form: recursive doubling over the whole job
//! with the ranks remapped (`topo_hierarchy::remap`) so that its heavy last steps stay
//! inside nodes, each exchange over the link that reaches the partner directly.

use topo_hierarchy::Settings;
use topo_hierarchy::remap::RdPeers;
use topo_hierarchy::settings::{Collective, TopAlg};

use crate::bcast;
use crate::error::{Error, Result};
use crate::ring;
use crate::transport::Transport;

/// Blocks of at least this many bytes travel in place, a message per run of consecutive
/// ranks, rather than packed into one message (a copy on each side).
pub const IN_PLACE_BLOCK: usize = 8 << 10;
use crate::transport::Fabric;
use crate::view::View;

/// Gathers every rank's block into `recv` on every rank: rank r's block lands at
/// `recv[r * len..(r + 1) * len]`, `len = recv.len() / size`. `send` is this rank's block,
/// or `None` when it is in place already. `top` is the top group's exchange.
pub fn allgather(
    view: &View,
    fabric: &mut dyn Fabric,
    s: &Settings,
    top: TopAlg,
    send: Option<&[u8]>,
    recv: &mut [u8],
) -> Result<()> {
    let size = view.size as usize;
    let len = recv.len() / size;
    let at = |r: u32| r as usize * len..(r as usize + 1) * len;
    if let Some(b) = send {
        recv[at(view.rank)].copy_from_slice(b);
    }
    if len == 0 || size == 1 {
        return Ok(());
    }
    let n = view.levels.len();
    // The top group's members stop below it and exchange; everyone goes down from where
    // it stopped.
    let until = if n > 0 && view.is_top(n - 1) {
        n - 1
    } else {
        n
    };
    // Up: the ranks whose blocks this rank holds.
    let mut held = vec![view.rank];
    let mut from = until;
    let mut reached = true;
    for (i, l) in view.levels[..until].iter().enumerate() {
        let t = fabric.level(i);
        if l.me != 0 {
            send_set(t, l.members[0], &held, recv, len)?;
            from = i + 1;
            reached = false;
            break;
        }
        for &m in &l.members[1..] {
            held.extend(recv_set(t, m, recv, len, size)?);
        }
    }
    if reached && until < n {
        let l = &view.levels[until];
        exchange(
            fabric.level(until),
            &l.members,
            l.me,
            top,
            held,
            recv,
            len,
            size,
        )?;
    }
    // Down: the whole result, as a broadcast from rank 0 would go below the top group, in
    // the broadcast's chunks.
    let total = recv.len();
    for piece in recv.chunks_mut(view.chunk_bytes(s, Collective::Allgather, total, 1)) {
        bcast::down(view, fabric, s, 0, total, from, piece)?;
    }
    Ok(())
}

/// The top group's exchange: member `me` of `members` holds the blocks of the ranks in
/// `held` and ends with everyone's. Recursive doubling swaps everything gathered so far
/// with the member `2^k` away; the ring (also recursive doubling's form for a number of
/// members that is not a power of two) passes on what arrived last.
#[allow(clippy::too_many_arguments)]
fn exchange(
    t: &mut dyn Transport,
    members: &[u32],
    me: usize,
    top: TopAlg,
    mut held: Vec<u32>,
    recv: &mut [u8],
    len: usize,
    size: usize,
) -> Result<()> {
    let k = members.len();
    if top == TopAlg::RecursiveDoubling && k.is_power_of_two() {
        let mut bit = 1;
        while bit < k {
            let peer = members[me ^ bit];
            let got = swap(t, peer, &held, peer, recv, len, size)?;
            held.extend(got);
            bit <<= 1;
        }
    } else {
        let (right, left) = (members[(me + 1) % k], members[(me + k - 1) % k]);
        let mut passing = held;
        for _ in 1..k {
            passing = swap(t, right, &passing, left, recv, len, size)?;
        }
    }
    Ok(())
}

/// Sends the blocks of `ranks` to `to`.
fn send_set(t: &mut dyn Transport, to: u32, ranks: &[u32], recv: &[u8], len: usize) -> Result<()> {
    t.send(&[to], &(ranks.len() as u32).to_le_bytes())?;
    if len < IN_PLACE_BLOCK {
        return t.send(&[to], &pack(ranks, recv, len));
    }
    t.send(&[to], &rank_bytes(ranks))?;
    for run in runs(ranks, len) {
        t.send(&[to], &recv[run])?;
    }
    Ok(())
}

/// Receives a set of blocks from `from` into place; returns their ranks.
fn recv_set(
    t: &mut dyn Transport,
    from: u32,
    recv: &mut [u8],
    len: usize,
    size: usize,
) -> Result<Vec<u32>> {
    let mut count = [0u8; 4];
    t.recv(from, &mut count)?;
    let count = checked_count(from, count, size)?;
    // Packed blocks, or the ranks of blocks that follow in place.
    let mut first = vec![0u8; count * (4 + if len < IN_PLACE_BLOCK { len } else { 0 })];
    t.recv(from, &mut first)?;
    if len < IN_PLACE_BLOCK {
        return unpack(from, &first, recv, len, size);
    }
    let ranks = checked_ranks(from, &first, size)?;
    for run in runs(&ranks, len) {
        t.recv(from, &mut recv[run])?;
    }
    Ok(ranks)
}

/// Sends the blocks of `ranks` to `to` while receiving another set from `from` into
/// place; returns the ranks received.
fn swap(
    t: &mut dyn Transport,
    to: u32,
    ranks: &[u32],
    from: u32,
    recv: &mut [u8],
    len: usize,
    size: usize,
) -> Result<Vec<u32>> {
    let mut count = [0u8; 4];
    t.sendrecv(to, &(ranks.len() as u32).to_le_bytes(), from, &mut count)?;
    let count = checked_count(from, count, size)?;
    let in_place = len >= IN_PLACE_BLOCK;
    let out = if in_place {
        rank_bytes(ranks)
    } else {
        pack(ranks, recv, len)
    };
    let mut first = vec![0u8; count * (4 + if in_place { 0 } else { len })];
    t.sendrecv(to, &out, from, &mut first)?;
    if !in_place {
        return unpack(from, &first, recv, len, size);
    }
    let theirs = checked_ranks(from, &first, size)?;
    // Run by run, both ways at once, then the runs of the side with more alone: each
    // link carries as many messages as its sender has runs. (In a ring no rank is left
    // only sending unless another, down the ring, is left only receiving.)
    let (out, into) = (runs(ranks, len), runs(&theirs, len));
    let pairs = out.len().min(into.len());
    for (o, d) in out[..pairs].iter().zip(&into[..pairs]) {
        if o.start < d.end && d.start < o.end {
            return Err(bad(from, "blocks this rank sends as well".into()));
        }
        let (a, b) = ring::split(recv, o.clone(), d.clone());
        t.sendrecv(to, a, from, b)?;
    }
    for o in &out[pairs..] {
        t.send(&[to], &recv[o.clone()])?;
    }
    for d in &into[pairs..] {
        t.recv(from, &mut recv[d.clone()])?;
    }
    Ok(theirs)
}

/// The byte ranges of `recv` that the blocks of `ranks` occupy, one per run of consecutive
/// ranks, in rank order.
fn runs(ranks: &[u32], len: usize) -> Vec<std::ops::Range<usize>> {
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    for r in sorted {
        let at = r as usize * len;
        match out.last_mut() {
            Some(last) if last.end == at => last.end = at + len,
            _ => out.push(at..at + len),
        }
    }
    out
}

/// `ranks`, 4 bytes each, little-endian.
fn rank_bytes(ranks: &[u32]) -> Vec<u8> {
    ranks.iter().flat_map(|r| r.to_le_bytes()).collect()
}

/// The ranks of a message from `from`, each below `size`.
fn checked_ranks(from: u32, bytes: &[u8], size: usize) -> Result<Vec<u32>> {
    bytes
        .chunks_exact(4)
        .map(|r| {
            let r = u32::from_le_bytes(r.try_into().expect("4 bytes"));
            if r as usize >= size {
                return Err(bad(from, format!("a block of rank {r}")));
            }
            Ok(r)
        })
        .collect()
}

/// The ranks of `held` (little-endian), then their blocks of `recv`.
fn pack(held: &[u32], recv: &[u8], len: usize) -> Vec<u8> {
    let mut packed = rank_bytes(held);
    packed.reserve(held.len() * len);
    for &r in held {
        packed.extend_from_slice(&recv[r as usize * len..(r as usize + 1) * len]);
    }
    packed
}

/// A count of blocks from `from` that can be right: 1 to `size`.
fn checked_count(from: u32, count: [u8; 4], size: usize) -> Result<usize> {
    let count = u32::from_le_bytes(count) as usize;
    if count == 0 || count > size {
        return Err(bad(from, format!("{count} blocks")));
    }
    Ok(count)
}

/// Puts the blocks of a packed message from `from` at their places in `recv`; returns
/// their ranks.
fn unpack(from: u32, packed: &[u8], recv: &mut [u8], len: usize, size: usize) -> Result<Vec<u32>> {
    let count = packed.len() / (4 + len);
    let (ranks, blocks) = packed.split_at(count * 4);
    let ranks = checked_ranks(from, ranks, size)?;
    for (k, &r) in ranks.iter().enumerate() {
        recv[r as usize * len..(r as usize + 1) * len]
            .copy_from_slice(&blocks[k * len..(k + 1) * len]);
    }
    Ok(ranks)
}

/// Recursive doubling ("exch." form) over all `n = 2^L` ranks of the job, this rank being
/// `rank` with its remapped `peers`: first this rank's block goes to the rank at position
/// `rank` while the block of rank `peers.position` arrives; then at step `k` the partner
/// and this rank swap the `2^k` blocks each holds, which lie side by side in `recv` at the
/// aligned run of `2^k` positions around each one's position. `send` is this rank's
/// block, or `None` when it is in place already.
pub fn recursive_doubling(
    fabric: &mut dyn Fabric,
    rank: u32,
    peers: &RdPeers,
    send: Option<&[u8]>,
    recv: &mut [u8],
) -> Result<()> {
    let n = 1usize << peers.partners.len();
    let len = recv.len() / n;
    let at = |q: usize| q * len..(q + 1) * len;
    if let Some(b) = send {
        recv[at(rank as usize)].copy_from_slice(b);
    }
    if len == 0 || n == 1 {
        return Ok(());
    }
    let p = peers.position as usize;
    if p != rank as usize {
        // The first exchange is a permutation whose cycles may be long, and `to` and
        // `from` may be reached by different links: a send and a receive, the send first
        // where `rank < to`. Every cycle has a rank that receives first (its largest) and
        // one that sends first (its smallest), so the sends complete one after another.
        let own = recv[at(rank as usize)].to_vec();
        let (to, from) = (peers.send_own_to, peers.start_from);
        if rank < to {
            fabric.peer(to).send(&[to], &own)?;
            fabric.peer(from).recv(from, &mut recv[at(p)])?;
        } else {
            fabric.peer(from).recv(from, &mut recv[at(p)])?;
            fabric.peer(to).send(&[to], &own)?;
        }
    }
    for (k, &partner) in peers.partners.iter().enumerate() {
        let width = 1usize << k;
        let mine = p & !(width - 1);
        let theirs = mine ^ width;
        // The first swap sends this rank's own block: from `send` where it is there (the
        // partner then reads lines this rank has not just written), else from `recv`.
        if let (0, Some(own), true) = (k, send, p == rank as usize) {
            fabric
                .peer(partner)
                .sendrecv(partner, own, partner, &mut recv[at(theirs)])?;
            continue;
        }
        let (lo, hi) = recv.split_at_mut(mine.max(theirs) * len);
        let (data, buf) = if mine < theirs {
            (
                &lo[mine * len..(mine + width) * len],
                &mut hi[..width * len],
            )
        } else {
            (
                &hi[..width * len],
                &mut lo[theirs * len..(theirs + width) * len],
            )
        };
        fabric.peer(partner).sendrecv(partner, data, partner, buf)?;
    }
    Ok(())
}

/// A member's gather message that cannot be right (the ranks called different
/// collectives or counts).
fn bad(from: u32, what: String) -> Error {
    Error::Mismatch {
        reason: format!(
            "rank {from} sent {what} to an allgather; the ranks called different collectives \
             or counts"
        ),
    }
}
