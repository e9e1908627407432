//! Alltoall: every rank sends a `len`-byte block to every rank (its own included) and
//! receives one from each. Two forms:
//!
//! - **Aggregated** (small blocks, a job on several nodes): each rank's whole send buffer
//!   (its row: its block for every rank) climbs the plan's levels as a Gather's blocks
//!   climb them ([`Subtrees`]: each leader receives the rows under each member in one
//!   message), up to the job's top group. There each member holds the rows of the ranks
//!   under it and sends every other member, in one message, the blocks from those ranks
//!   to the ranks under that member; all these messages are in flight at once. Each member
//!   then holds, for every rank under it, its blocks from every rank, and they go down the
//!   levels as a Scatter's blocks do. On 8 nodes x 8 ranks, 8-byte blocks cross between
//!   nodes in 56 messages where pairwise exchange sends 3,584.
//! - **Spread** (small blocks, a job on several nodes; the default there): as aggregated,
//!   one message per pair of nodes, but each node's pairs are dealt out over its ranks
//!   ([`ByNode::spread_pair`]) instead of all going through its leader. Each rank first
//!   sends each rank of its node, in one message, its block for that rank and its blocks
//!   for the ranks of the nodes that rank carries; each rank then sends each node it
//!   carries the blocks of its node's ranks for that node's ranks, all at once; and hands
//!   what it received on to the ranks of its node, one message each. So the network
//!   traffic leaves every node through all its ranks, and each rank moves its own row of
//!   blocks through shared memory twice, where the aggregated form moves every row of the
//!   node through the leader.
//! - **Pairwise** (large blocks, or one node): every rank sends each other rank its block
//!   straight over the link that reaches it (shared memory inside the node, single copy
//!   for large blocks, MPI across) and receives from each: across nodes all transfers in
//!   flight at once, each rank starting with the rank after it in an order that
//!   interleaves the nodes ([`ByNode::interleaved`]), so that no rank is everyone's first
//!   and the ranks of one node send to different nodes at once (in rank order, the ranks
//!   of a node placed in blocks would all start with the next node); on one node in `size
//!   - 1` rounds of shared-memory exchanges.
//!
//! Which form runs is [`Settings::alltoall_for`] of the block's length, the same on every
//! rank. Alltoallv ([`alltoallv`]) runs the pairwise form with each pair's own block.

use std::ops::Range;

use topo_hierarchy::Settings;
use topo_hierarchy::settings::AlltoallAlg;

use crate::backoff::Backoff;
use crate::by_node::ByNode;
use crate::error::Result;
use crate::subtrees::{Blocks, Subtrees, below_top, piece_for, recv_blocks, send_blocks};
use crate::transport::{Fabric, Transfer, Transport};
use crate::view::View;

/// Every rank's `len`-byte block for rank r is at `send[r * len..]`; rank r's block for
/// this rank lands at `recv[r * len..]`. `send` is `None` in place (the blocks to send are
/// in `recv`). `sub` is what the context learned ([`Subtrees::learn`]); `s` are the
/// context's settings; `by_node` its ranks by node (on several nodes: without it the
/// spread form runs as the aggregated one and the pairwise form in rank order).
#[allow(clippy::too_many_arguments)]
pub fn alltoall(
    view: &View,
    fabric: &mut dyn Fabric,
    sub: &Subtrees,
    s: &Settings,
    by_node: Option<&ByNode>,
    send: Option<&[u8]>,
    recv: &mut [u8],
    len: usize,
) -> Result<()> {
    let size = view.size as usize;
    let me = view.rank as usize;
    debug_assert_eq!(recv.len(), size * len);
    let copy;
    let send = match send {
        Some(b) => b,
        None => {
            copy = recv.to_vec();
            &copy[..]
        }
    };
    let own = me * len..(me + 1) * len;
    recv[own.clone()].copy_from_slice(&send[own]);
    if len == 0 || size == 1 {
        return Ok(());
    }
    match (s.alltoall_for(len), by_node) {
        (AlltoallAlg::Spread, Some(b)) if s.nodes > 1 && b.nodes() > 1 => {
            return spread(view, fabric, b, s.spin, send, recv, len);
        }
        (AlltoallAlg::Spread | AlltoallAlg::Aggregated, _) => {
            return aggregated(view, fabric, sub, s.spin, send, recv, len);
        }
        (AlltoallAlg::Pairwise, _) => {}
    }
    let sends: Vec<&[u8]> = send.chunks(len).collect();
    let mut recvs: Vec<&mut [u8]> = recv.chunks_mut(len).collect();
    if s.nodes == 1 {
        in_rounds(view, fabric, &sends, &mut recvs)
    } else {
        pairwise(view, fabric, s.spin, by_node, &sends, recvs)
    }
}

/// Alltoallv: this rank's block for rank r is `send[send_at[r]]`, rank r's block for it
/// lands in `recv[recv_at[r]]` (the ranges of `recv` do not overlap; the lengths of each
/// pair's two ranges agree, as MPI requires). `send` is `None` in place (the blocks to
/// send are `recv`'s, at `recv_at`). Pairwise (see the module's doc), blocks of no bytes
/// left out but on one node; `by_node` orders the exchange as [`alltoall`]'s. False where
/// the ranges of `recv` overlap or pass its end.
pub fn alltoallv(
    view: &View,
    fabric: &mut dyn Fabric,
    s: &Settings,
    by_node: Option<&ByNode>,
    send: Option<(&[u8], &[Range<usize>])>,
    recv: &mut [u8],
    recv_at: &[Range<usize>],
) -> Result<bool> {
    let me = view.rank as usize;
    let copy;
    let (send, send_at) = match send {
        Some(b) => b,
        None => {
            copy = recv.to_vec();
            (&copy[..], recv_at)
        }
    };
    let Some(mut recvs) = disjoint(recv, recv_at) else {
        return Ok(false);
    };
    // An empty range may lie anywhere, also past the buffer's end.
    let block = |r: &Range<usize>| {
        if r.is_empty() {
            &[][..]
        } else {
            &send[r.clone()]
        }
    };
    recvs[me].copy_from_slice(block(&send_at[me]));
    let sends: Vec<&[u8]> = send_at.iter().map(block).collect();
    if view.size == 1 {
        return Ok(true);
    }
    if s.nodes == 1 {
        in_rounds(view, fabric, &sends, &mut recvs)?;
    } else {
        pairwise(view, fabric, s.spin, by_node, &sends, recvs)?;
    }
    Ok(true)
}

/// Whether the non-empty ranges of `at` ascend in its order without overlapping (each
/// starts at or after the previous one's end): the usual layout of a v-form's blocks.
pub(crate) fn ascending(at: &[Range<usize>]) -> bool {
    let mut end = 0;
    at.iter().filter(|r| !r.is_empty()).all(|r| {
        let ok = r.start >= end;
        end = r.end;
        ok
    })
}

/// The parts of `buf` at `at`, by their index in `at`, if they do not overlap and lie in
/// `buf`.
pub(crate) fn disjoint<'b>(buf: &'b mut [u8], at: &[Range<usize>]) -> Option<Vec<&'b mut [u8]>> {
    // The usual layout first: the non-empty ranges ascend in `at`'s order.
    let last_end = at.iter().rev().find(|r| !r.is_empty()).map_or(0, |r| r.end);
    if ascending(at) && last_end <= buf.len() {
        let (mut rest, mut base) = (buf, 0usize);
        let mut parts = Vec::with_capacity(at.len());
        for r in at {
            if r.is_empty() {
                parts.push(&mut [][..]);
                continue;
            }
            let (_, tail) = std::mem::take(&mut rest).split_at_mut(r.start - base);
            let (part, tail) = tail.split_at_mut(r.len());
            parts.push(part);
            (rest, base) = (tail, r.end);
        }
        return Some(parts);
    }
    let mut order: Vec<usize> = (0..at.len()).collect();
    order.sort_by_key(|&i| (at[i].start, at[i].end));
    let mut parts: Vec<Option<&'b mut [u8]>> = (0..at.len()).map(|_| None).collect();
    let (mut rest, mut base) = (buf, 0usize);
    for i in order {
        let r = &at[i];
        if r.start > r.end || r.start < base || r.end - base > rest.len() {
            // An empty range may sit anywhere, also inside another.
            if r.is_empty() {
                parts[i] = Some(&mut []);
                continue;
            }
            return None;
        }
        let (_, tail) = std::mem::take(&mut rest).split_at_mut(r.start - base);
        let (part, tail) = tail.split_at_mut(r.len());
        parts[i] = Some(part);
        (rest, base) = (tail, r.end);
    }
    parts.into_iter().collect()
}

/// The pairwise form in a job on one node: `size - 1` rounds, in round d an exchange
/// (`sendrecv`) with the rank d places on and the rank d places back, both over shared
/// memory, whose exchange is quicker than two transfers in flight (one entry each way for
/// a small block; single copy for a large one only where the transport's exchange takes
/// it). `sends[r]` goes to rank r, `recvs[r]` takes rank r's; every round exchanges, also
/// an empty block (the partners of a round do not know each other's other block).
pub(crate) fn in_rounds(
    view: &View,
    fabric: &mut dyn Fabric,
    sends: &[&[u8]],
    recvs: &mut [&mut [u8]],
) -> Result<()> {
    let size = view.size as usize;
    let me = view.rank as usize;
    for d in 1..size {
        let (to, from) = ((me + d) % size, (me + size - d) % size);
        fabric
            .peer(to as u32)
            .sendrecv(to as u32, sends[to], from as u32, recvs[from])?;
    }
    Ok(())
}

/// The pairwise form (see the module's doc): `sends[r]` goes to rank r, `recvs[r]` takes
/// rank r's, this rank's own left out; a block of no bytes is not sent (both ends know).
pub fn pairwise(
    view: &View,
    fabric: &mut dyn Fabric,
    spin: u32,
    by_node: Option<&ByNode>,
    sends: &[&[u8]],
    recvs: Vec<&mut [u8]>,
) -> Result<()> {
    let (to, from) = turns(view.rank, view.size as usize, by_node);
    let out: Vec<(u32, &[u8])> = to
        .iter()
        .filter(|&&r| !sends[r as usize].is_empty())
        .map(|&r| (r, sends[r as usize]))
        .collect();
    let mut slots: Vec<Option<&mut [u8]>> = recvs.into_iter().map(Some).collect();
    let mut blocks: Vec<(u32, &mut [u8])> = from
        .iter()
        .filter_map(|&r| Some((r, slots[r as usize].take()?)))
        .filter(|(_, b)| !b.is_empty())
        .collect();
    exchange(fabric, spin, None, &out, &mut blocks)
}

/// The other ranks in the order in which rank `me` of `size` sends to them, and the order
/// in which it receives from them (the rank before it first): in rank order from `me` on,
/// or, given the ranks by node, in [`ByNode::interleaved`]'s order.
pub fn turns(me: u32, size: usize, by_node: Option<&ByNode>) -> (Vec<u32>, Vec<u32>) {
    let order: Vec<u32> = match by_node {
        Some(b) if b.nodes() > 1 && b.size() == size => b.interleaved(),
        _ => (0..size as u32).collect(),
    };
    let at = order.iter().position(|&r| r == me).unwrap_or(0);
    let to = (1..size).map(|d| order[(at + d) % size]).collect();
    let from = (1..size).map(|d| order[(at + size - d) % size]).collect();
    (to, from)
}

/// The spread form (see the module's doc) on a job of several nodes.
fn spread(
    view: &View,
    fabric: &mut dyn Fabric,
    by_node: &ByNode,
    spin: u32,
    send: &[u8],
    recv: &mut [u8],
    len: usize,
) -> Result<()> {
    let me = view.rank;
    let n = by_node.node_of(me);
    let i = by_node.local_of(me);
    let here = by_node.ranks(n);
    let l = here.len();
    let block = |r: u32| r as usize * len..(r as usize + 1) * len;
    // 1. To each rank k of this node: the block for k, then the blocks for the ranks of
    // the nodes k carries. From each: the same for this rank.
    let carried = by_node.ranks_of(&by_node.spread_targets(n, i));
    let out: Vec<Vec<u8>> = (0..l)
        .map(|k| {
            let mut m = Vec::new();
            if k != i {
                m.extend_from_slice(&send[block(here[k])]);
                for r in by_node.ranks_of(&by_node.spread_targets(n, k)) {
                    m.extend_from_slice(&send[block(r)]);
                }
            }
            m
        })
        .collect();
    let mut back: Vec<Vec<u8>> = (0..l)
        .map(|k| vec![0u8; if k == i { 0 } else { (1 + carried.len()) * len }])
        .collect();
    {
        let sends: Vec<(u32, &[u8])> = (1..l)
            .map(|d| (i + d) % l)
            .map(|k| (here[k], &out[k][..]))
            .collect();
        let mut recvs: Vec<(u32, &mut [u8])> = back
            .iter_mut()
            .enumerate()
            .filter(|(k, _)| *k != i)
            .map(|(k, m)| (here[k], &mut m[..]))
            .collect();
        exchange(fabric, spin, None, &sends, &mut recvs)?;
    }
    // This rank's row for the nodes it carries, from each rank of its node in turn.
    let row = |k: usize| -> Vec<u8> {
        if k == i {
            carried
                .iter()
                .flat_map(|&r| &send[block(r)])
                .copied()
                .collect()
        } else {
            recv[block(here[k])].copy_from_slice(&back[k][..len]);
            back[k][len..].to_vec()
        }
    };
    let rows: Vec<Vec<u8>> = (0..l).map(row).collect();
    // 2. To each node b it carries: the blocks from each rank here (in turn) to each rank
    // of b. From each node a it receives for: the blocks from each rank of a to each rank
    // here.
    let targets = by_node.spread_targets(n, i);
    let mut at = 0;
    let mut to_nodes: Vec<(u32, Vec<u8>)> = Vec::with_capacity(targets.len());
    for &b in &targets {
        let width = by_node.ranks(b).len() * len;
        let mut m = Vec::with_capacity(l * width);
        for r in &rows {
            m.extend_from_slice(&r[at..at + width]);
        }
        at += width;
        let (_, receiver) = by_node.spread_pair(n, b);
        to_nodes.push((by_node.ranks(b)[receiver], m));
    }
    let sources = by_node.spread_sources(n, i);
    let mut from_nodes: Vec<Vec<u8>> = sources
        .iter()
        .map(|&a| vec![0u8; by_node.ranks(a).len() * l * len])
        .collect();
    {
        let sends: Vec<(u32, &[u8])> = to_nodes.iter().map(|(r, m)| (*r, &m[..])).collect();
        let mut recvs: Vec<(u32, &mut [u8])> = sources
            .iter()
            .zip(&mut from_nodes)
            .map(|(&a, m)| (by_node.ranks(a)[by_node.spread_pair(a, n).0], &mut m[..]))
            .collect();
        exchange(fabric, spin, None, &sends, &mut recvs)?;
    }
    // 3. To each rank k of this node: the blocks from the ranks of the nodes this rank
    // received for, to k. From each: the same for this rank.
    let pick = |k: usize| -> Vec<u8> {
        let mut m = Vec::new();
        for (&a, got) in sources.iter().zip(&from_nodes) {
            for j in 0..by_node.ranks(a).len() {
                m.extend_from_slice(&got[(j * l + k) * len..][..len]);
            }
        }
        m
    };
    let mut place = |k_sources: &[usize], m: &[u8]| {
        let mut blocks = m.chunks(len);
        for &a in k_sources {
            for &src in by_node.ranks(a) {
                recv[block(src)].copy_from_slice(blocks.next().expect("a block per rank"));
            }
        }
    };
    place(&sources, &pick(i));
    let out: Vec<Vec<u8>> = (0..l)
        .map(|k| if k == i { Vec::new() } else { pick(k) })
        .collect();
    let their_sources: Vec<Vec<usize>> = (0..l).map(|k| by_node.spread_sources(n, k)).collect();
    let mut back: Vec<Vec<u8>> = their_sources
        .iter()
        .enumerate()
        .map(|(k, src)| {
            let blocks: usize = src.iter().map(|&a| by_node.ranks(a).len()).sum();
            vec![0u8; if k == i { 0 } else { blocks * len }]
        })
        .collect();
    {
        let sends: Vec<(u32, &[u8])> = (1..l)
            .map(|d| (i + d) % l)
            .filter(|&k| !out[k].is_empty())
            .map(|k| (here[k], &out[k][..]))
            .collect();
        let mut recvs: Vec<(u32, &mut [u8])> = back
            .iter_mut()
            .enumerate()
            .filter(|(k, m)| *k != i && !m.is_empty())
            .map(|(k, m)| (here[k], &mut m[..]))
            .collect();
        exchange(fabric, spin, None, &sends, &mut recvs)?;
    }
    for (k, m) in back.iter().enumerate() {
        if k != i {
            place(&their_sources[k], m);
        }
    }
    Ok(())
}

/// Sends each `(rank, data)` of `sends` and receives each `(rank, buf)` of `recvs`, all
/// in flight at once, over `fabric.level(i)` for `via = Some(i)`, else over the link that
/// reaches each rank; returns once all have completed.
pub(crate) fn exchange(
    fabric: &mut dyn Fabric,
    spin: u32,
    via: Option<usize>,
    sends: &[(u32, &[u8])],
    recvs: &mut [(u32, &mut [u8])],
) -> Result<()> {
    exchange_meanwhile(fabric, spin, via, sends, recvs, None::<fn()>)
}

/// [`exchange`], running `meanwhile` (if any) once after the first round has posted every
/// transfer, as [`crate::subtrees::root_exchange`] does.
pub(crate) fn exchange_meanwhile(
    fabric: &mut dyn Fabric,
    spin: u32,
    via: Option<usize>,
    sends: &[(u32, &[u8])],
    recvs: &mut [(u32, &mut [u8])],
    mut meanwhile: Option<impl FnOnce()>,
) -> Result<()> {
    let mut out: Vec<(usize, Transfer)> =
        (0..sends.len()).map(|i| (i, Transfer::default())).collect();
    let mut back: Vec<(usize, Transfer)> =
        (0..recvs.len()).map(|i| (i, Transfer::default())).collect();
    let mut backoff = Backoff::new(spin);
    let mut first = crate::subtrees::tests_at_once(!sends.is_empty());
    while !(out.is_empty() && back.is_empty()) {
        let before = out.len() + back.len();
        let mut k = 0;
        while k < back.len() {
            let (i, t) = &mut back[k];
            let (from, buf) = &mut recvs[*i];
            if link(fabric, via, *from).poll_recv(t, *from, buf, None)? {
                back.swap_remove(k);
            } else {
                k += 1;
            }
        }
        let mut k = 0;
        while k < out.len() {
            let (i, t) = &mut out[k];
            let (to, data) = sends[*i];
            if link(fabric, via, to).poll_send(t, &[to], data)? {
                out.swap_remove(k);
            } else {
                k += 1;
            }
        }
        if let Some(m) = meanwhile.take() {
            m();
        }
        let posted = std::mem::take(&mut first);
        if out.len() + back.len() == before && !posted && backoff.pause() {
            let waiting = out.iter().map(|&(i, _)| sends[i].0);
            let waiting: Vec<u32> = waiting
                .chain(back.iter().map(|&(i, _)| recvs[i].0))
                .collect();
            for r in waiting {
                link(fabric, via, r).check_peer(r)?;
            }
        }
    }
    // (Every transfer completed in the first round.)
    if let Some(m) = meanwhile.take() {
        m();
    }
    Ok(())
}

/// The transport of [`exchange`]'s transfers with rank `r`.
fn link(fabric: &mut dyn Fabric, via: Option<usize>, r: u32) -> &mut dyn Transport {
    match via {
        Some(i) => fabric.level(i),
        None => fabric.peer(r),
    }
}

/// The aggregated form (see the module's doc).
fn aggregated(
    view: &View,
    fabric: &mut dyn Fabric,
    sub: &Subtrees,
    spin: u32,
    send: &[u8],
    recv: &mut [u8],
    len: usize,
) -> Result<()> {
    let size = view.size as usize;
    let row = size * len;
    let n = view.levels.len();
    let until = below_top(view);
    let entry = sub.entry();
    let mine = sub.mine();
    // A rank under nobody: its row to its leader, its blocks from every rank back.
    if mine.len() == 1 && entry < until {
        let leader = view.levels[entry].members[0];
        let piece = piece_for(view, entry);
        let t = fabric.level(entry);
        for p in send.chunks(piece) {
            t.send(&[leader], p)?;
        }
        for p in recv.chunks_mut(piece) {
            t.recv(leader, p)?;
        }
        return Ok(());
    }
    // The rows of the ranks under this rank, by their place in `mine`; `got[b]` will be
    // the blocks from every rank for the rank at place b.
    let at = |ranks: &[u32]| -> Vec<u32> {
        let place = |r: &u32| mine.binary_search(r).expect("a rank under this one") as u32;
        ranks.iter().map(place).collect()
    };
    let mut rows = vec![0u8; mine.len() * row];
    let own = at(&[view.rank])[0] as usize;
    rows[own * row..(own + 1) * row].copy_from_slice(send);
    for i in 0..entry.min(until) {
        let l = &view.levels[i];
        let (t, piece) = (fabric.level(i), piece_for(view, i));
        for p in 1..l.members.len() {
            let ranks = sub.under(i, p).expect("a leader knows its members' ranks");
            recv_blocks(
                t,
                l.members[p],
                &at(ranks),
                &mut rows,
                Blocks::Same(row),
                piece,
            )?;
        }
    }
    let mut got = vec![0u8; mine.len() * row];
    if entry >= until {
        // The top group (or rank 0 of a job without one): the blocks among the ranks
        // under this rank stay here.
        for (a, &src) in mine.iter().enumerate() {
            for (b, &dst) in mine.iter().enumerate() {
                let (src, dst) = (src as usize, dst as usize);
                got[b * row + src * len..][..len]
                    .copy_from_slice(&rows[a * row + dst * len..][..len]);
            }
        }
    }
    if entry < until {
        let leader = view.levels[entry].members[0];
        let piece = piece_for(view, entry);
        let t = fabric.level(entry);
        for p in rows.chunks(piece) {
            t.send(&[leader], p)?;
        }
        for p in got.chunks_mut(piece) {
            t.recv(leader, p)?;
        }
    } else if until < n {
        let l = &view.levels[until];
        let k = l.members.len();
        let under = |q: usize| {
            sub.under(until, q)
                .expect("the top group knows its members")
        };
        let others: Vec<usize> = (1..k).map(|d| (l.me + d) % k).collect();
        // To member q: the blocks from each rank here (in rank order) to each rank under q.
        let out: Vec<Vec<u8>> = others
            .iter()
            .map(|&q| {
                let mut m = Vec::with_capacity(mine.len() * under(q).len() * len);
                for a in 0..mine.len() {
                    for &dst in under(q) {
                        m.extend_from_slice(&rows[a * row + dst as usize * len..][..len]);
                    }
                }
                m
            })
            .collect();
        let mut back: Vec<Vec<u8>> = others
            .iter()
            .map(|&q| vec![0u8; under(q).len() * mine.len() * len])
            .collect();
        let sends: Vec<(u32, &[u8])> = others
            .iter()
            .zip(&out)
            .map(|(&q, m)| (l.members[q], &m[..]))
            .collect();
        let mut recvs: Vec<(u32, &mut [u8])> = others
            .iter()
            .zip(&mut back)
            .map(|(&q, m)| (l.members[q], &mut m[..]))
            .rev()
            .collect();
        exchange(fabric, spin, Some(until), &sends, &mut recvs)?;
        for (&q, m) in others.iter().zip(&back) {
            let mut blocks = m.chunks(len);
            for &src in under(q) {
                for b in 0..mine.len() {
                    let block = blocks.next().expect("a block per pair");
                    got[b * row + src as usize * len..][..len].copy_from_slice(block);
                }
            }
        }
    }
    for i in (0..entry.min(until)).rev() {
        let l = &view.levels[i];
        let (t, piece) = (fabric.level(i), piece_for(view, i));
        for p in 1..l.members.len() {
            let ranks = sub.under(i, p).expect("a leader knows its members' ranks");
            send_blocks(t, l.members[p], &at(ranks), &got, Blocks::Same(row), piece)?;
        }
    }
    recv.copy_from_slice(&got[own * row..(own + 1) * row]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress_hook::with_progress_hook;
    use crate::subtrees::with_root;
    use crate::transport::testing::Posting;

    /// A network-like transport on which a transfer completes at its second poll (a small
    /// send, or a message that has arrived already), the first having posted it.
    fn eager() -> Posting {
        Posting {
            open: true,
            ..Posting::default()
        }
    }

    /// See [`crate::subtrees::tests_at_once`].
    #[test]
    fn a_wait_tests_the_sends_it_has_just_posted_before_it_pauses() {
        let pauses = std::cell::Cell::new(0);
        let mut hook = || pauses.set(pauses.get() + 1);
        with_progress_hook(&mut hook, || {
            with_root(&mut eager(), 0, 1, true, |l, t| l.poll_send(t, &[1], &[7])).unwrap();
            let mut buf = [0u8; 1];
            let sends = [(1, &[7u8][..]), (2, &[8u8][..])];
            let mut recvs = [(3, &mut buf[..])];
            exchange(&mut eager(), 0, None, &sends, &mut recvs).unwrap();
        });
        assert_eq!(pauses.get(), 0);
        // A wait over receives alone pauses once first.
        with_progress_hook(&mut hook, || {
            let mut buf = [0u8; 1];
            with_root(&mut eager(), 0, 1, false, |l, t| {
                l.poll_recv(t, 1, &mut buf, None)
            })
            .unwrap();
            let mut recvs = [(3, &mut buf[..])];
            exchange(&mut eager(), 0, None, &[], &mut recvs).unwrap();
        });
        assert_eq!(pauses.get(), 2);
    }

    /// The root's own copy runs once, after the first round has posted every transfer and
    /// before the second polls them: it overlaps the transfers (see `scatter`).
    #[test]
    fn the_step_meanwhile_runs_once_after_every_transfer_is_posted() {
        let mut net = eager();
        let polls = net.polls.clone();
        let seen = std::cell::Cell::new(Vec::new());
        let note = || seen.set([seen.take(), vec![polls.get()]].concat());
        let sends = [(1, &[7u8][..]), (2, &[8u8][..])];
        let mut buf = [0u8; 1];
        let mut recvs = [(3, &mut buf[..])];
        exchange_meanwhile(&mut net, 0, None, &sends, &mut recvs, Some(note)).unwrap();
        assert_eq!((seen.take(), polls.get()), (vec![3], 6));
        // The root's side of a direct Scatter over 3 other ranks.
        let view = View {
            rank: 0,
            size: 4,
            levels: Vec::new(),
            top: None,
            pipeline: false,
        };
        let mut net = eager();
        let polls = net.polls.clone();
        let step = |l: &mut dyn Transport, r: u32, t: &mut Transfer| l.poll_send(t, &[r], &[1]);
        let note = || seen.set([seen.take(), vec![polls.get()]].concat());
        crate::subtrees::root_exchange(&view, &mut net, 0, true, step, Some(note)).unwrap();
        assert_eq!((seen.take(), polls.get()), (vec![3], 6));
        // Without a step meanwhile, nothing changes.
        let mut net = eager();
        exchange_meanwhile(&mut net, 0, None, &sends, &mut [], None::<fn()>).unwrap();
        assert_eq!(net.polls.get(), 4);
    }
}
