//! Iallgatherv, in two forms:
//!
//! - [`build`]: every rank sends its block straight to every other rank over the link that
//!   reaches it and receives each other rank's into its place: on one node in `size - 1`
//!   rounds (in round d to the rank d places on, from the rank d places back, as
//!   Ialltoall's), across nodes all in one round, so that every network transfer is posted
//!   at the start.
//! - [`build_rd`] and [`build_ring`] (large blocks on several nodes, [`FLAT_FROM`]): the
//!   Allgather's remapped recursive doubling (a job whose size is a power of two) and its
//!   ring in node-major order, with each rank's own block. Recursive doubling crosses the
//!   network in its first steps, with one block per rank, and its heavy last steps stay
//!   inside the nodes; the ring passes on the block that came last, every node boundary
//!   crossed by one edge of the ring.
//!
//! A block of no bytes is not sent (every rank knows every length). The blocking
//! Allgatherv's way up the hierarchy, across the top group and down waits at each leader;
//! a schedule of that form is a later step.
//!
//! Buffers: this rank's block is [`Buf::Send`], or in place at its place in [`Buf::Recv`];
//! rank r's block lands at its place in [`Buf::Recv`].

use std::ops::Range;

use topo_hierarchy::remap::{RdPeers, RingPeers};

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

/// Whether an Allgatherv of `total` bytes among `size` ranks on `nodes` nodes runs a flat
/// exchange, recursive doubling or the ring (the same on every rank: every rank knows
/// every block's length).
pub fn flat_for(nodes: u32, size: usize, total: usize) -> bool {
    nodes > 1 && size > 1 && total / size >= FLAT_FROM
}

/// Remapped recursive doubling (`topo_hierarchy::remap::RdPeers`, as
/// [`super::iallgather::build_rd`]) with each rank's own block: round 0 puts this rank's
/// block at its place (a copy, unless in place), sends it to the rank at position `rank`
/// and receives the block of rank `position` from the rank it names; then, for each `k`, it
/// swaps the blocks of the `2^k` ranks each partner holds (those from `position & !(2^k -
/// 1)` on, in rank order: one message per run of blocks that follow one another in the
/// buffer, a round per message, none for empty blocks). `at[r]` is rank r's place
/// in [`Buf::Recv`]; `send`: this rank's block is [`Buf::Send`].
pub fn build_rd(rank: u32, peers: &RdPeers, at: &[Range<usize>], send: bool) -> Builder {
    let mut b = Builder::default();
    let region = |r: usize| Region {
        buf: Buf::Recv,
        off: at[r].start,
        len: at[r].len(),
    };
    let me = rank as usize;
    let own = if send {
        Region::whole(Buf::Send, at[me].len())
    } else {
        region(me)
    };
    let p = peers.position as usize;
    let mut first = Vec::new();
    if send && own.len > 0 {
        let dst = region(me);
        first.push((Link::Local, Action::Copy { src: own, dst }));
    }
    if p != me {
        let (to, from) = (peers.send_own_to, peers.start_from);
        if own.len > 0 {
            first.push((
                Link::Peer(to),
                Action::Send {
                    to: vec![to],
                    src: own,
                },
            ));
        }
        if !at[p].is_empty() {
            first.push((
                Link::Peer(from),
                Action::Recv {
                    from,
                    dst: region(p),
                },
            ));
        }
    }
    b.round(first);
    for (k, &partner) in peers.partners.iter().enumerate() {
        let width = 1usize << k;
        let mine = p & !(width - 1);
        let theirs = mine ^ width;
        let link = Link::Peer(partner);
        // One message per run of blocks that lie one after another (all of them, in the
        // usual layout), and one run each way per round: a round's receives from one
        // shared-memory writer would take its messages in the order they are polled, not
        // in the order they were sent.
        let (sends, recvs) = (
            runs(at, mine..mine + width),
            runs(at, theirs..theirs + width),
        );
        for j in 0..sends.len().max(recvs.len()) {
            let send = sends.get(j).map(|&src| {
                let to = vec![partner];
                (link, Action::Send { to, src })
            });
            let recv = recvs.get(j).map(|&dst| {
                let from = partner;
                (link, Action::Recv { from, dst })
            });
            b.round(send.into_iter().chain(recv));
        }
    }
    b
}

/// The blocks at `at` of ranks `ranks`, in rank order, as regions of [`Buf::Recv`]: one
/// per run of blocks that follow one another in the buffer; none for an empty block.
fn runs(at: &[Range<usize>], ranks: Range<usize>) -> Vec<Region> {
    let mut out: Vec<Region> = Vec::new();
    for r in ranks.filter(|&r| !at[r].is_empty()) {
        match out.last_mut() {
            Some(last) if last.off + last.len == at[r].start => last.len += at[r].len(),
            _ => out.push(Region {
                buf: Buf::Recv,
                off: at[r].start,
                len: at[r].len(),
            }),
        }
    }
    out
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
    let own = if send {
        Region::whole(Buf::Send, at[rank as usize].len())
    } else {
        region(rank)
    };
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
    let src = if send {
        if !mine.is_empty() {
            b.step(
                Link::Local,
                Action::Copy {
                    src: Region::whole(Buf::Send, mine.len()),
                    dst: region(Buf::Recv, mine),
                },
            );
        }
        Region::whole(Buf::Send, mine.len())
    } else {
        region(Buf::Recv, mine)
    };
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

    // Blocks that do not follow one another (reversed order, a gap after each) go one
    // message per round each way: two receives from one shared-memory writer in a round
    // could take each other's messages.
    #[test]
    fn recursive_doubling_receives_once_per_round_from_each_rank() {
        let at: Vec<Range<usize>> = (0..4).map(|r| (3 - r) * 16..(3 - r) * 16 + 8).collect();
        let peers = RdPeers {
            position: 1,
            send_own_to: 1,
            start_from: 1,
            partners: vec![0, 3],
        };
        let b = build_rd(1, &peers, &at, true);
        let mut swapped = 0;
        for round in b.rounds() {
            let mut from = Vec::new();
            for (_, action) in round {
                if let Action::Recv { from: f, dst } = action {
                    assert!(!from.contains(f), "two receives from rank {f} in one round");
                    from.push(*f);
                    assert_eq!(dst.len, 8);
                    swapped += 1;
                }
            }
        }
        // Rank 1's own block's place from rank 1 itself is not received; rank 0's in the
        // first step, ranks 2 and 3's in the second, one message each.
        assert_eq!(swapped, 3);
    }
}
