//! Ialltoall and Ialltoallv: [`crate::alltoall`]'s pairwise form as a schedule. Every rank
//! sends each other rank its block over the link that reaches it and receives one from
//! each: on one node in `size - 1` rounds (in round d to the rank d places on, from the
//! rank d places back, as the blocking form's exchanges), across nodes all in one round, so
//! that every network transfer is posted at the start, in the blocking form's order
//! ([`crate::alltoall::turns`]: the nodes interleaved). A block of no bytes is not sent
//! (both ends know its length).
//!
//! Buffers: the blocks to send are in [`Buf::Send`], or in place in [`Buf::Recv`], from
//! which they are first copied to [`Buf::Tmp`] (the blocks received land in `Recv`).

use std::ops::Range;

use super::{Action, Buf, Builder, Link, Region};
use crate::by_node::ByNode;

/// The steps of rank `me`'s part in an Alltoall of `len`-byte blocks among `size` ranks
/// (`one_node`: all on one node; else `by_node`, if known, orders the transfers). `send`:
/// the blocks are in [`Buf::Send`] (else in place, in [`Buf::Recv`]). Returns the builder
/// and how many bytes of [`Buf::Tmp`] it uses.
pub fn build(
    me: u32,
    size: usize,
    one_node: bool,
    by_node: Option<&ByNode>,
    len: usize,
    send: bool,
) -> (Builder, usize) {
    let at: Vec<Range<usize>> = (0..size).map(|r| r * len..(r + 1) * len).collect();
    build_v(
        me,
        one_node,
        by_node,
        send.then_some(&at[..]),
        &at,
        size * len,
    )
}

/// The steps of rank `me`'s part in an Alltoallv (`one_node`: all on one node; else
/// `by_node`, if known, orders the transfers): its block for rank r is `send_at[r]` of
/// [`Buf::Send`] (`None` in place: `recv_at[r]` of [`Buf::Recv`]), rank r's block for it
/// lands at `recv_at[r]` of [`Buf::Recv`], whose blocks end by `recv_len`. Returns the
/// builder and how many bytes of [`Buf::Tmp`] it uses.
pub fn build_v(
    me: u32,
    one_node: bool,
    by_node: Option<&ByNode>,
    send_at: Option<&[Range<usize>]>,
    recv_at: &[Range<usize>],
    recv_len: usize,
) -> (Builder, usize) {
    let mut b = Builder::default();
    let size = recv_at.len();
    let me = me as usize;
    let region = |buf: Buf, r: &Range<usize>| Region {
        buf,
        off: r.start,
        len: r.len(),
    };
    let (src, from_at, tmp) = match send_at {
        Some(at) => {
            if !at[me].is_empty() {
                b.step(
                    Link::Local,
                    Action::Copy {
                        src: region(Buf::Send, &at[me]),
                        dst: region(Buf::Recv, &recv_at[me]),
                    },
                );
            }
            (Buf::Send, at, 0)
        }
        None if size > 1 && recv_len > 0 => {
            b.step(
                Link::Local,
                Action::Copy {
                    src: Region::whole(Buf::Recv, recv_len),
                    dst: Region::whole(Buf::Tmp, recv_len),
                },
            );
            (Buf::Tmp, recv_at, recv_len)
        }
        None => (Buf::Tmp, recv_at, 0),
    };
    let (tos, froms) = if one_node {
        (Vec::new(), Vec::new())
    } else {
        crate::alltoall::turns(me as u32, size, by_node)
    };
    let pair = |d: usize| {
        let (to, from) = if one_node {
            ((me + d) % size, (me + size - d) % size)
        } else {
            (tos[d - 1] as usize, froms[d - 1] as usize)
        };
        let send = (!from_at[to].is_empty()).then(|| {
            (
                Link::Peer(to as u32),
                Action::Send {
                    to: vec![to as u32],
                    src: region(src, &from_at[to]),
                },
            )
        });
        let recv = (!recv_at[from].is_empty()).then(|| {
            (
                Link::Peer(from as u32),
                Action::Recv {
                    from: from as u32,
                    dst: region(Buf::Recv, &recv_at[from]),
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
    (b, tmp)
}

/// Copies `pieces` (`(from, to, len)` byte offsets in `src` and `dst`) as one step per run
/// of pieces that continue each other in both buffers.
fn copy_runs(
    steps: &mut Vec<(Link, Action)>,
    src: Buf,
    dst: Buf,
    pieces: impl IntoIterator<Item = (usize, usize, usize)>,
) {
    let mut run: Option<(usize, usize, usize)> = None;
    let flush = |steps: &mut Vec<(Link, Action)>, r: Option<(usize, usize, usize)>| {
        if let Some((from, to, len)) = r.filter(|r| r.2 > 0) {
            steps.push((
                Link::Local,
                Action::Copy {
                    src: Region {
                        buf: src,
                        off: from,
                        len,
                    },
                    dst: Region {
                        buf: dst,
                        off: to,
                        len,
                    },
                },
            ));
        }
    };
    for (from, to, len) in pieces {
        run = match run {
            Some((f, t, l)) if f + l == from && t + l == to => Some((f, t, l + len)),
            r => {
                flush(steps, r);
                Some((from, to, len))
            }
        };
    }
    flush(steps, run);
}

/// The steps of rank `me`'s part in an Alltoall of `len`-byte blocks in its spread form
/// ([`crate::alltoall`]'s module doc) on a context of several nodes, `by_node` its ranks
/// by node. `send`: the blocks are in [`Buf::Send`] (else in place, in [`Buf::Recv`], from
/// which they are first copied to [`Buf::Acc`]). Returns the builder and how many bytes of
/// [`Buf::Acc`] and [`Buf::Tmp`] it uses.
///
/// Rounds: the blocks for each rank of the node packed (with those for the nodes it
/// carries); exchanged inside the node; the messages for the nodes this rank carries
/// assembled; exchanged between the nodes; the blocks for each rank of the node picked out
/// of what came; exchanged inside the node; put in place.
pub fn build_spread(me: u32, by_node: &ByNode, len: usize, send: bool) -> (Builder, usize, usize) {
    let mut b = Builder::default();
    let size = by_node.size();
    let n = by_node.node_of(me);
    let i = by_node.local_of(me);
    let here = by_node.ranks(n);
    let l = here.len();
    if len == 0 {
        return (b, 0, 0);
    }
    let block = |r: u32| r as usize * len;
    let targets: Vec<Vec<usize>> = (0..l).map(|k| by_node.spread_targets(n, k)).collect();
    let sources: Vec<Vec<usize>> = (0..l).map(|k| by_node.spread_sources(n, k)).collect();
    let carried: Vec<usize> = targets.iter().map(|t| by_node.count(t)).collect();
    let src = if send { Buf::Send } else { Buf::Acc };
    let (mut acc, mut tmp) = (if send { 0 } else { size * len }, 0usize);
    let take = |at: &mut usize, bytes: usize| {
        let off = *at;
        *at += bytes;
        off
    };
    // Tmp: the packed messages for the node's ranks, then what comes from them (this
    // rank's own row among them), then what comes from the nodes, then what comes back.
    let pack: Vec<usize> = (0..l)
        .map(|k| take(&mut tmp, if k == i { 0 } else { (1 + carried[k]) * len }))
        .collect();
    let row = (1 + carried[i]) * len;
    let rows: Vec<usize> = (0..l).map(|_| take(&mut tmp, row)).collect();
    let from_nodes: Vec<usize> = sources[i]
        .iter()
        .map(|&a| take(&mut tmp, by_node.ranks(a).len() * l * len))
        .collect();
    let handed = by_node.count(&sources[i]) * len;
    let back_len: Vec<usize> = (0..l)
        .map(|k| {
            if k == i {
                0
            } else {
                by_node.count(&sources[k]) * len
            }
        })
        .collect();
    let back: Vec<usize> = back_len.iter().map(|&m| take(&mut tmp, m)).collect();
    // Acc (after the blocks' copy, in place): the messages for the nodes, then those
    // handed on inside the node.
    let to_nodes: Vec<usize> = targets[i]
        .iter()
        .map(|&t| take(&mut acc, l * by_node.ranks(t).len() * len))
        .collect();
    let hand: Vec<usize> = (0..l)
        .map(|k| take(&mut acc, if k == i { 0 } else { handed }))
        .collect();
    let region = |buf: Buf, off: usize, len: usize| Region { buf, off, len };
    if !send {
        b.step(
            Link::Local,
            Action::Copy {
                src: Region::whole(Buf::Recv, size * len),
                dst: Region::whole(Buf::Acc, size * len),
            },
        );
    }
    // 1. Pack.
    let mut steps = Vec::new();
    if send {
        copy_runs(&mut steps, src, Buf::Recv, [(block(me), block(me), len)]);
    }
    for k in 0..l {
        let (at, ranks) = if k == i {
            (rows[i], by_node.ranks_of(&targets[i]))
        } else {
            (pack[k], by_node.ranks_of(&targets[k]))
        };
        let first = (k != i).then_some((block(here[k]), at, len));
        let rest = ranks
            .iter()
            .enumerate()
            .map(|(x, &r)| (block(r), at + (1 + x) * len, len));
        copy_runs(&mut steps, src, Buf::Tmp, first.into_iter().chain(rest));
    }
    b.round(steps);
    // 2. Inside the node.
    let others = || (1..l).map(|d| (i + d) % l);
    b.round(others().flat_map(|k| {
        let send = (
            Link::Peer(here[k]),
            Action::Send {
                to: vec![here[k]],
                src: region(Buf::Tmp, pack[k], (1 + carried[k]) * len),
            },
        );
        let recv = (
            Link::Peer(here[k]),
            Action::Recv {
                from: here[k],
                dst: region(Buf::Tmp, rows[k], row),
            },
        );
        [send, recv]
    }));
    // 3. Assemble: to node t, from each rank of this node in turn, the blocks for t's ranks.
    let mut steps = Vec::new();
    for k in others() {
        copy_runs(
            &mut steps,
            Buf::Tmp,
            Buf::Recv,
            [(rows[k], block(here[k]), len)],
        );
    }
    let mut at = len;
    for (x, &t) in targets[i].iter().enumerate() {
        let width = by_node.ranks(t).len() * len;
        let pieces = (0..l).map(|k| (rows[k] + at, to_nodes[x] + k * width, width));
        copy_runs(&mut steps, Buf::Tmp, Buf::Acc, pieces);
        at += width;
    }
    b.round(steps);
    // 4. Between the nodes.
    let sends = targets[i].iter().enumerate().map(|(x, &t)| {
        let to = by_node.ranks(t)[by_node.spread_pair(n, t).1];
        let bytes = l * by_node.ranks(t).len() * len;
        (
            Link::Peer(to),
            Action::Send {
                to: vec![to],
                src: region(Buf::Acc, to_nodes[x], bytes),
            },
        )
    });
    let recvs = sources[i].iter().enumerate().map(|(x, &a)| {
        let from = by_node.ranks(a)[by_node.spread_pair(a, n).0];
        let bytes = by_node.ranks(a).len() * l * len;
        (
            Link::Peer(from),
            Action::Recv {
                from,
                dst: region(Buf::Tmp, from_nodes[x], bytes),
            },
        )
    });
    b.round(sends.chain(recvs));
    // 5. Pick out: for each rank of this node, the blocks from each rank of each node this
    // rank received for.
    let mut steps = Vec::new();
    for (k, &into) in hand.iter().enumerate() {
        let mut off = 0;
        let mut pieces = Vec::new();
        for (x, &a) in sources[i].iter().enumerate() {
            for (j, &r) in by_node.ranks(a).iter().enumerate() {
                let from = from_nodes[x] + (j * l + k) * len;
                if k == i {
                    pieces.push((from, block(r), len));
                } else {
                    pieces.push((from, into + off, len));
                }
                off += len;
            }
        }
        let dst = if k == i { Buf::Recv } else { Buf::Acc };
        copy_runs(&mut steps, Buf::Tmp, dst, pieces);
    }
    b.round(steps);
    // 6. Inside the node again.
    b.round(others().flat_map(|k| {
        let send = (handed > 0).then(|| {
            (
                Link::Peer(here[k]),
                Action::Send {
                    to: vec![here[k]],
                    src: region(Buf::Acc, hand[k], handed),
                },
            )
        });
        let recv = (back_len[k] > 0).then(|| {
            (
                Link::Peer(here[k]),
                Action::Recv {
                    from: here[k],
                    dst: region(Buf::Tmp, back[k], back_len[k]),
                },
            )
        });
        send.into_iter().chain(recv)
    }));
    // 7. Into place.
    let mut steps = Vec::new();
    for k in others() {
        let pieces = by_node
            .ranks_of(&sources[k])
            .into_iter()
            .enumerate()
            .map(|(x, r)| (back[k] + x * len, block(r), len));
        copy_runs(&mut steps, Buf::Tmp, Buf::Recv, pieces);
    }
    b.round(steps);
    (b, acc, tmp)
}
