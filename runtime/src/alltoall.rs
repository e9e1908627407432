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
//! - **Pairwise** (large blocks, or one node): every rank sends each other rank its block
//!   straight over the link that reaches it (shared memory inside the node, single copy
//!   for large blocks, MPI across) and receives from each: across nodes all transfers in
//!   flight at once, each rank starting with the rank after it so that no rank is
//!   everyone's first; on one node in `size - 1` rounds of shared-memory exchanges.
//!
//! Which form runs is [`Settings::alltoall_for`] of the block's length, the same on every
//! rank. Alltoallv ([`alltoallv`]) runs the pairwise form with each pair's own block.

use std::ops::Range;

use topo_hierarchy::Settings;
use topo_hierarchy::settings::AlltoallAlg;

use crate::backoff::Backoff;
use crate::error::Result;
use crate::subtrees::{Blocks, Subtrees, below_top, piece_for, recv_blocks, send_blocks};
use crate::transport::{Fabric, Transfer, Transport};
use crate::view::View;

/// Every rank's `len`-byte block for rank r is at `send[r * len..]`; rank r's block for
/// this rank lands at `recv[r * len..]`. `send` is `None` in place (the blocks to send are
/// in `recv`). `sub` is what the context learned ([`Subtrees::learn`]); `s` are the
/// context's settings.
pub fn alltoall(
    view: &View,
    fabric: &mut dyn Fabric,
    sub: &Subtrees,
    s: &Settings,
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
    if s.alltoall_for(len) == AlltoallAlg::Aggregated {
        return aggregated(view, fabric, sub, s.spin, send, recv, len);
    }
    let sends: Vec<&[u8]> = send.chunks(len).collect();
    let mut recvs: Vec<&mut [u8]> = recv.chunks_mut(len).collect();
    if s.nodes == 1 {
        in_rounds(view, fabric, &sends, &mut recvs)
    } else {
        pairwise(view, fabric, s.spin, &sends, recvs)
    }
}

/// Alltoallv: this rank's block for rank r is `send[send_at[r]]`, rank r's block for it
/// lands in `recv[recv_at[r]]` (the ranges of `recv` do not overlap; the lengths of each
/// pair's two ranges agree, as MPI requires). `send` is `None` in place (the blocks to
/// send are `recv`'s, at `recv_at`). Pairwise (see the module's doc), blocks of no bytes
/// left out but on one node. False where the ranges of `recv` overlap or pass its end.
pub fn alltoallv(
    view: &View,
    fabric: &mut dyn Fabric,
    s: &Settings,
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
    recvs[me].copy_from_slice(&send[send_at[me].clone()]);
    let sends: Vec<&[u8]> = send_at.iter().map(|r| &send[r.clone()]).collect();
    if view.size == 1 {
        return Ok(true);
    }
    if s.nodes == 1 {
        in_rounds(view, fabric, &sends, &mut recvs)?;
    } else {
        pairwise(view, fabric, s.spin, &sends, recvs)?;
    }
    Ok(true)
}

/// The parts of `buf` at `at`, by their index in `at`, if they do not overlap and lie in
/// `buf`.
pub(crate) fn disjoint<'b>(buf: &'b mut [u8], at: &[Range<usize>]) -> Option<Vec<&'b mut [u8]>> {
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
    sends: &[&[u8]],
    recvs: Vec<&mut [u8]>,
) -> Result<()> {
    let size = view.size as usize;
    let me = view.rank as usize;
    let out: Vec<(u32, &[u8])> = (1..size)
        .map(|d| (me + d) % size)
        .filter(|&to| !sends[to].is_empty())
        .map(|to| (to as u32, sends[to]))
        .collect();
    // The rank before this one first.
    let mut blocks: Vec<(u32, &mut [u8])> = recvs
        .into_iter()
        .enumerate()
        .map(|(r, b)| (r as u32, b))
        .collect();
    blocks.rotate_left(me);
    blocks.reverse();
    blocks.retain(|(r, b)| *r as usize != me && !b.is_empty());
    exchange(fabric, spin, None, &out, &mut blocks)
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
    let mut out: Vec<(usize, Transfer)> =
        (0..sends.len()).map(|i| (i, Transfer::default())).collect();
    let mut back: Vec<(usize, Transfer)> =
        (0..recvs.len()).map(|i| (i, Transfer::default())).collect();
    let mut backoff = Backoff::new(spin);
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
        if out.len() + back.len() == before && backoff.pause() {
            let waiting = out.iter().map(|&(i, _)| sends[i].0);
            let waiting: Vec<u32> = waiting
                .chain(back.iter().map(|&(i, _)| recvs[i].0))
                .collect();
            for r in waiting {
                link(fabric, via, r).check_peer(r)?;
            }
        }
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
