//! Iallgatherv, in two forms:
//!
//! - [`build`]: every rank sends its block straight to every other rank over the link that
//!   reaches it and receives each other rank's into its place: on one node in `size - 1`
//!   rounds (in round d to the rank d places on, from the rank d places back, as
//!   Ialltoall's), across nodes all in one round, so that every network transfer is posted
//!   at the start.
//! - [`build_rd`], [`build_bruck`] and [`build_ring`] (on several nodes: large blocks,
//!   [`FLAT_FROM`], or more than [`DIRECT_PER_NODE`] ranks per node, [`schedule_flat`]):
//!   the Allgather's remapped recursive doubling (a job whose size is a power of two) or
//!   Bruck's exchange (any other size), and its ring in node-major order, with each rank's
//!   own block, as the Allgather's rules choose for the blocks' total. Recursive doubling
//!   crosses the network in its first steps, with one block per rank, and its heavy last
//!   steps stay inside the nodes; the ring passes on the block that came last, every node
//!   boundary crossed by one edge of the ring. The direct form sends every block over the
//!   network once per rank of each other node, which with many ranks per node costs the
//!   network interfaces that many times the flat exchanges' bytes (`topo-run simulate --ops
//!   allgatherv`: 16 nodes x 32, 4 KiB blocks, 5.0 ms direct against 0.29 ms for the
//!   ring).
//!
//! A block of no bytes is not sent (every rank knows every length). The blocking
//! Allgatherv's way up the hierarchy, across the top group and down waits at each leader;
//! a schedule of that form is a later step.
//!
//! Buffers: this rank's block is [`Buf::Send`], or in place at its place in [`Buf::Recv`];
//! rank r's block lands at its place in [`Buf::Recv`].

use std::ops::Range;

use topo_hierarchy::remap::{BruckPeers, RdPeers, RingPeers};

use super::{Action, Buf, Builder, Link, Region};

/// An Allgatherv on several nodes whose blocks average at least this many bytes runs
/// recursive doubling ([`build_rd`]) or, for a job whose size is not a power of two, the
/// ring ([`build_ring`]), blocking or not. Below it the blocking call takes the hierarchy
/// (up, across the top group, down) and the nonblocking one [`build`]. The hierarchy's
/// three steps run one after another, each whole, where Open MPI overlaps its transfers:
/// on 2 emulated nodes x 2 (`NODES=2 bash benchmarks/components.sh 3 --ops allgatherv`, two
/// runs of each build, 2026-12-03) the hierarchy took 1.06-1.17 times the best Open MPI
/// component's time at 16-32 KiB and 128 KiB and 1.2-1.8 from 256 KiB to 1 MiB, recursive
/// doubling 0.83-1.01 from 16 KiB to 128 KiB and 0.96-1.08 from 256 KiB to 1 MiB; below
/// 16 KiB the hierarchy is ahead (0.70-0.97 against 0.92-1.12).
pub const FLAT_FROM: usize = 16 << 10;

/// With at least this many ranks per node, the blocking Allgatherv on several nodes runs a
/// flat exchange from [`FLAT_FROM_MANY`] bytes per rank (where the job's size or its number
/// of nodes is a power of two) or [`FLAT_FROM_MANY_ANY`] (otherwise): the hierarchy's
/// three steps, one after another, cost more than the flat exchanges lose on the network
/// once a node has many ranks. `topo-run simulate --ops allgatherv`, 2-16 nodes x 4-36
/// ranks, blocking form against the schedule (2026-12-04): with 8 or more ranks per node
/// the flat exchange took 0.42-0.98 of the hierarchy's time from 256 B per rank on 2 and 16
/// nodes and 0.60-0.97 from 1-2 KiB on 3 and 5 nodes (1.3-2.9 below that); with 4 ranks
/// per node the hierarchy stayed ahead up to 1-2 KiB.
pub const FLAT_MANY_PER_NODE: usize = 8;

/// See [`FLAT_MANY_PER_NODE`].
pub const FLAT_FROM_MANY: usize = 256;

/// See [`FLAT_MANY_PER_NODE`].
pub const FLAT_FROM_MANY_ANY: usize = 2 << 10;

/// Whether an Allgatherv of `total` bytes among `size` ranks on `nodes` nodes runs a flat
/// exchange, recursive doubling, Bruck's or the ring (the same on every rank: every rank
/// knows every block's length): from [`FLAT_FROM`] bytes per rank, or earlier with many
/// ranks per node ([`FLAT_MANY_PER_NODE`]).
pub fn flat_for(nodes: u32, size: usize, total: usize) -> bool {
    if nodes < 2 || size < 2 {
        return false;
    }
    let mean = total / size;
    let many = size.div_ceil(nodes as usize) >= FLAT_MANY_PER_NODE;
    let from = match many {
        true if size.is_power_of_two() || nodes.is_power_of_two() => FLAT_FROM_MANY,
        true => FLAT_FROM_MANY_ANY,
        false => FLAT_FROM,
    };
    mean >= from
}

/// With more ranks per node than this, an Iallgatherv on several nodes runs a flat
/// exchange at every size ([`schedule_flat`]): the direct form's network messages grow
/// with the ranks per node times the job's ranks. With 2 per node the direct form is
/// ahead below [`FLAT_FROM`] (`topo-run simulate --ops allgatherv`: 16 nodes x 2, 8-byte
/// blocks, 2.1 us against 6.5 for Bruck's exchange and 8.0 for the remapped recursive
/// doubling).
pub const DIRECT_PER_NODE: usize = 2;

/// Whether an Iallgatherv of `total` bytes among `size` ranks on `nodes` nodes runs a flat
/// exchange (else [`build`]): where the blocking one does ([`flat_for`]), and at every size
/// with more than [`DIRECT_PER_NODE`] ranks per node.
pub fn schedule_flat(nodes: u32, size: usize, total: usize) -> bool {
    flat_for(nodes, size, total)
        || (nodes > 1 && size > 1 && size.div_ceil(nodes as usize) > DIRECT_PER_NODE)
}

/// Remapped recursive doubling (`topo_hierarchy::remap::RdPeers`, as
/// [`super::iallgather::build_rd`]) with each rank's own block, over the blocks laid out
/// one after another in rank order: round 0 puts this rank's block at its place, sends it
/// to the rank at position `rank` and receives the block of rank `position` from the rank
/// it names; round `k + 1` swaps the blocks of the `2^k` ranks each partner holds (those
/// from `position & !(2^k - 1)` on), one message each way, none where they are all empty.
/// The messages depend only on the blocks' lengths, which every rank knows alike; where
/// the blocks lie in the receive buffer (`at[r]` of [`Buf::Recv`], which each rank chooses
/// for itself, as MPI's displacements) does not change them: a rank whose `at` lays the
/// blocks out one after another from 0 works in [`Buf::Recv`], any other in [`Buf::Tmp`],
/// from which a last round copies each block to its place. `send`: this rank's block is
/// [`Buf::Send`]. Returns the builder and the bytes of [`Buf::Tmp`] it uses.
pub fn build_rd(rank: u32, peers: &RdPeers, at: &[Range<usize>], send: bool) -> (Builder, usize) {
    let mut b = Builder::default();
    let size = at.len();
    // Where each rank's block starts in rank order, and the end.
    let (start, packed) = crate::allgatherv::rank_order(at);
    let total = start[size];
    let work = if packed { Buf::Recv } else { Buf::Tmp };
    // The blocks of ranks `from..to` in the work buffer.
    let span = |from: usize, to: usize| Region {
        buf: work,
        off: start[from],
        len: start[to] - start[from],
    };
    let me = rank as usize;
    let own = own_block(at, me, send);
    let p = peers.position as usize;
    let mut first = Vec::new();
    if own.len > 0 && own != span(me, me + 1) {
        let dst = span(me, me + 1);
        first.push((Link::Local, Action::Copy { src: own, dst }));
    }
    if p != me {
        let (to, from) = (peers.send_own_to, peers.start_from);
        if own.len > 0 {
            let send = Action::Send {
                to: vec![to],
                src: own,
            };
            first.push((Link::Peer(to), send));
        }
        let dst = span(p, p + 1);
        if dst.len > 0 {
            first.push((Link::Peer(from), Action::Recv { from, dst }));
        }
    }
    b.round(first);
    for (k, &partner) in peers.partners.iter().enumerate() {
        let width = 1usize << k;
        let mine = p & !(width - 1);
        let theirs = mine ^ width;
        let link = Link::Peer(partner);
        let (src, dst) = (span(mine, mine + width), span(theirs, theirs + width));
        let send = (src.len > 0).then(|| {
            let to = vec![partner];
            (link, Action::Send { to, src })
        });
        let recv = (dst.len > 0).then(|| {
            let from = partner;
            (link, Action::Recv { from, dst })
        });
        b.round(send.into_iter().chain(recv));
    }
    if !packed {
        b.round((0..size).filter(|&r| !at[r].is_empty()).map(|r| {
            let dst = Region {
                buf: Buf::Recv,
                off: at[r].start,
                len: at[r].len(),
            };
            let src = span(r, r + 1);
            (Link::Local, Action::Copy { src, dst })
        }));
    }
    (b, if packed { 0 } else { total })
}

/// Rank `me`'s own block: [`Buf::Send`] where `send`, else in place at `at[me]` of
/// [`Buf::Recv`].
fn own_block(at: &[Range<usize>], me: usize, send: bool) -> Region {
    if send {
        Region::whole(Buf::Send, at[me].len())
    } else {
        Region {
            buf: Buf::Recv,
            off: at[me].start,
            len: at[me].len(),
        }
    }
}

/// Bruck's exchange, remapped (`topo_hierarchy::remap::BruckPeers`, as
/// [`super::iallgather::build_bruck`]), with each rank's own block: round 0 puts the block
/// of rank `position` first in [`Buf::Tmp`] (exchanging this rank's own for it); round
/// `k + 1` sends the first `min(2^k, size - 2^k)` blocks of the scratch to the rank `2^k`
/// positions back and appends as many from the rank `2^k` positions on, so that the
/// scratch ends with the blocks of ranks `position`, `position + 1`, ... (mod `size`) one
/// after another, each as long as that rank's (every rank knows every length); the last
/// round copies each block to its place `at[r]` of [`Buf::Recv`] (its own too where
/// `send`), in two pieces where the blocks lie one after another in rank order. Returns the builder and the bytes of [`Buf::Tmp`] it uses.
pub fn build_bruck(
    rank: u32,
    peers: &BruckPeers,
    at: &[Range<usize>],
    send: bool,
) -> (Builder, usize) {
    let mut b = Builder::default();
    let n = at.len();
    let p = peers.position as usize;
    let me = rank as usize;
    // Where the block of rank `(p + j) mod n` starts in the scratch, and the end.
    let mut off = vec![0usize; n + 1];
    for j in 0..n {
        off[j + 1] = off[j] + at[(p + j) % n].len();
    }
    let total = off[n];
    if total == 0 {
        return (b, 0);
    }
    // Blocks `j..j + k` of the scratch.
    let tmp = |j: usize, k: usize| Region {
        buf: Buf::Tmp,
        off: off[j],
        len: off[j + k] - off[j],
    };
    let own = own_block(at, me, send);
    if p == me {
        if own.len > 0 {
            b.step(
                Link::Local,
                Action::Copy {
                    src: own,
                    dst: tmp(0, 1),
                },
            );
        }
    } else {
        let (to, from) = (peers.send_own_to, peers.start_from);
        let send = (own.len > 0).then(|| {
            let to = vec![to];
            (Link::Peer(to[0]), Action::Send { to, src: own })
        });
        let dst = tmp(0, 1);
        let recv = (dst.len > 0).then_some((Link::Peer(from), Action::Recv { from, dst }));
        b.round(send.into_iter().chain(recv));
    }
    let mut d = 1usize;
    for (&to, &from) in peers.to.iter().zip(&peers.from) {
        let blocks = d.min(n - d);
        let (src, dst) = (tmp(0, blocks), tmp(d, blocks));
        let send = (src.len > 0).then(|| (Link::Peer(to), Action::Send { to: vec![to], src }));
        let recv = (dst.len > 0).then_some((Link::Peer(from), Action::Recv { from, dst }));
        b.round(send.into_iter().chain(recv));
        d *= 2;
    }
    let (start, packed) = crate::allgatherv::rank_order(at);
    if packed {
        // Ranks `p..n` are the scratch's first blocks, ranks `0..p` its last: two copies.
        let (head, tail) = (tmp(0, n - p), tmp(n - p, p));
        let to = |from: usize, len: usize| Region {
            buf: Buf::Recv,
            off: start[from],
            len,
        };
        let copies = [(head, to(p, head.len)), (tail, to(0, tail.len))];
        b.round(
            copies
                .into_iter()
                .filter(|(src, _)| src.len > 0)
                .map(|(src, dst)| (Link::Local, Action::Copy { src, dst })),
        );
        return (b, total);
    }
    b.round((0..n).filter_map(|j| {
        let r = (p + j) % n;
        (!at[r].is_empty() && (r != me || send)).then(|| {
            let dst = Region {
                buf: Buf::Recv,
                off: at[r].start,
                len: at[r].len(),
            };
            (
                Link::Local,
                Action::Copy {
                    src: tmp(j, 1),
                    dst,
                },
            )
        })
    }));
    (b, total)
}

/// The ring (`topo_hierarchy::remap::RingPeers`) with each rank's own block: round `s`
/// sends to the next rank the block of the rank `s` positions back (this rank's own at
/// round 0, with the copy to its place unless in place) and receives from the previous
/// rank the block of the rank `s + 1` positions back, straight into its place `at[r]` of
/// [`Buf::Recv`]. `send`: this rank's block is [`Buf::Send`].
pub fn build_ring(rank: u32, peers: &RingPeers, at: &[Range<usize>], send: bool) -> Builder {
    let mut b = Builder::default();
    let region = |r: u32| Region {
        buf: Buf::Recv,
        off: at[r as usize].start,
        len: at[r as usize].len(),
    };
    let own = own_block(at, rank as usize, send);
    let mut round = Vec::new();
    if send && own.len > 0 {
        round.push((
            Link::Local,
            Action::Copy {
                src: own,
                dst: region(rank),
            },
        ));
    }
    let (next, prev) = (peers.next(), peers.prev());
    for s in 0..peers.size().saturating_sub(1) {
        let (sent, received) = peers.step(s);
        let src = if s == 0 { own } else { region(sent) };
        if src.len > 0 {
            round.push((
                Link::Peer(next),
                Action::Send {
                    to: vec![next],
                    src,
                },
            ));
        }
        let dst = region(received);
        if dst.len > 0 {
            round.push((Link::Peer(prev), Action::Recv { from: prev, dst }));
        }
        b.round(std::mem::take(&mut round));
    }
    b.round(round);
    b
}

/// The steps of rank `me`'s part in an Allgatherv (`one_node`: all on one node): rank r's
/// block lands at `at[r]` of [`Buf::Recv`]; `send`: this rank's block is [`Buf::Send`]
/// (else in place, at `at[me]` of [`Buf::Recv`]).
pub fn build(me: u32, one_node: bool, at: &[Range<usize>], send: bool) -> Builder {
    let mut b = Builder::default();
    let size = at.len();
    let me = me as usize;
    let region = |buf: Buf, r: &Range<usize>| Region {
        buf,
        off: r.start,
        len: r.len(),
    };
    let mine = &at[me];
    let src = own_block(at, me, send);
    if send && !mine.is_empty() {
        let dst = region(Buf::Recv, mine);
        b.step(Link::Local, Action::Copy { src, dst });
    }
    let pair = |d: usize| {
        let (to, from) = ((me + d) % size, (me + size - d) % size);
        let send = (!mine.is_empty()).then(|| {
            (
                Link::Peer(to as u32),
                Action::Send {
                    to: vec![to as u32],
                    src,
                },
            )
        });
        let recv = (!at[from].is_empty()).then(|| {
            (
                Link::Peer(from as u32),
                Action::Recv {
                    from: from as u32,
                    dst: region(Buf::Recv, &at[from]),
                },
            )
        });
        send.into_iter().chain(recv)
    };
    if one_node {
        for d in 1..size {
            b.round(pair(d));
        }
    } else {
        b.round((1..size).flat_map(pair));
    }
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    // Where the blocks lie in the receive buffer is each rank's own choice (MPI's
    // displacements): recursive doubling sends the same messages either way, one each way
    // per round; a rank whose blocks are not laid out one after another from 0 works in
    // scratch and copies each block to its place last.
    #[test]
    fn recursive_doubling_sends_the_same_messages_whatever_the_layout() {
        let lens = [8usize, 0, 24, 16];
        let mut packed = vec![0..0; 4];
        let mut off = 0;
        for r in 0..4 {
            packed[r] = off..off + lens[r];
            off += lens[r];
        }
        // Reversed, with a gap after each block.
        let mut reversed = vec![0..0; 4];
        let mut off = 0;
        for r in (0..4).rev() {
            reversed[r] = off..off + lens[r];
            off += lens[r] + 8;
        }
        let peers = RdPeers {
            position: 1,
            send_own_to: 1,
            start_from: 1,
            partners: vec![0, 3],
        };
        let messages = |at: &[Range<usize>]| {
            let (b, tmp) = build_rd(1, &peers, at, true);
            let mut m = Vec::new();
            for round in b.rounds() {
                let mut from = Vec::new();
                for (_, action) in round {
                    match action {
                        Action::Send { to, src } => m.push(("send", to[0], src.len)),
                        Action::Recv { from: f, dst } => {
                            assert!(!from.contains(f), "two receives from {f} in one round");
                            from.push(*f);
                            m.push(("recv", *f, dst.len));
                        }
                        _ => {}
                    }
                }
            }
            (m, tmp)
        };
        let (a, tmp_a) = messages(&packed);
        let (b, tmp_b) = messages(&reversed);
        assert_eq!(a, b);
        assert_eq!((tmp_a, tmp_b), (0, 48));
        // Rank 1's own block is empty: not sent in the first step, where rank 0's comes;
        // then ranks 0 and 1's blocks go to rank 3 and ranks 2 and 3's come from it, one
        // message each way.
        assert_eq!(a, vec![("recv", 0, 8), ("send", 3, 8), ("recv", 3, 40)]);
    }
}
