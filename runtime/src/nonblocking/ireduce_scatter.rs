//! Ireduce_scatter_block and Ireduce_scatter, as the blocking Reduce_scatter runs, in two
//! forms:
//!
//! - [`build`]: the Allreduce's schedule of the whole contribution, moved into the
//!   accumulator, then this rank's block of the result copied out.
//! - [`build_halving`] (the `halving` form of Reduce_scatter_block, and of Reduce_scatter
//!   wherever the rules do not give the Allreduce's): recursive halving over every rank in
//!   the hierarchy's order ([`topo_hierarchy::remap::halving`]), on the blocks put in that
//!   order first.
//! - [`build_ring`] (the `ring` form): the reduce-scatter half of the Allreduce's ring, in
//!   node-major order ([`topo_hierarchy::remap::RingPeers`]), each rank's block of the
//!   result ending at that rank.
//!
//! Buffers: the contribution is [`Buf::Send`], or in place the first `total` bytes of
//! [`Buf::Recv`] (which the rest of the buffer keeps, as Open MPI's does); [`Buf::Acc`]
//! (`total` bytes) holds the whole result of the Allreduce's form, [`Buf::Tmp`] the
//! halving's blocks; this rank's block lands at the start of [`Buf::Recv`].

use std::ops::Range;
use std::sync::Arc;

use topo_hierarchy::remap::RingPeers;
use topo_hierarchy::remap::halving::{Fold, HalvingOrder, HalvingPeers};

use super::{Action, Buf, Builder, Link, Region};
use crate::subtrees::Blocks;

/// The blocks' order of a reduce-scatter by recursive halving
/// ([`topo_hierarchy::remap::halving::HalvingOrder::blocks`]), with this rank's part.
#[derive(Debug, Clone)]
pub struct HalvingBlocks {
    /// This rank.
    pub rank: u32,
    /// This rank's fold, slot and partners.
    pub peers: HalvingPeers,
    /// Every rank, in the order its block takes.
    pub order: Arc<[u32]>,
    /// Where each slot's blocks start in `order` (`slots + 1` entries).
    pub starts: Arc<[u32]>,
}

impl HalvingBlocks {
    /// Every rank's part of `order`'s halving, as a function of the rank (`None` for a
    /// rank not in it): the blocks' order and the slots' starts are worked out once and
    /// shared by all.
    pub fn of(order: &HalvingOrder) -> impl Fn(u32) -> Option<HalvingBlocks> + '_ {
        let (blocks, starts) = order.blocks();
        let (blocks, starts): (Arc<[u32]>, Arc<[u32]>) = (blocks.into(), starts.into());
        move |rank| {
            Some(HalvingBlocks {
                rank,
                peers: order.peers(rank)?,
                order: blocks.clone(),
                starts: starts.clone(),
            })
        }
    }
}

/// Reduce_scatter_block by recursive halving over `h`'s order, of blocks of `block` bytes
/// (`send`: the contribution is in [`Buf::Send`], else in place in [`Buf::Recv`]), and
/// the bytes of [`Buf::Tmp`] it uses. Every rank first puts its contribution's blocks in
/// the order (one [`Action::Permute`]) in scratch; a rank folded out sends them to its
/// partner, which combines them into its own, and gets its block back at the end. At the
/// step of mask `m` a rank keeps the slots on its side of bit `m` of those it holds, sends
/// the others' blocks to its partner and combines the partner's copy of its own as it
/// arrives: it ends holding its slot's blocks, its own first.
///
/// Blocks of different lengths (Reduce_scatter's, `blocks` of [`Blocks::Ends`]) are put
/// in the order by one copy each, and a slot's run is as long as its blocks together.
pub fn build_halving(h: &HalvingBlocks, blocks: Blocks<'_>, send: bool) -> (Builder, usize) {
    let mut b = Builder::default();
    let n = h.order.len();
    let len = |r: u32| blocks.at(r).len();
    let total = (0..n as u32).map(len).sum::<usize>();
    if total == 0 || n == 0 {
        return (b, 0);
    }
    let me = h.rank;
    // Where each place of the order starts in the scratch (`n + 1` entries).
    let mut at = Vec::with_capacity(n + 1);
    at.push(0usize);
    for &r in h.order.iter() {
        at.push(at[at.len() - 1] + len(r));
    }
    let work = Region::whole(Buf::Tmp, total);
    let from = if send { Buf::Send } else { Buf::Recv };
    match blocks {
        Blocks::Same(block) => {
            b.step(
                Link::Local,
                Action::Permute {
                    src: Region::whole(from, total),
                    dst: work,
                    block,
                    order: h.order.clone(),
                },
            );
        }
        Blocks::Ends(_) => {
            let copies = h.order.iter().enumerate().filter_map(|(k, &r)| {
                let src = blocks.at(r);
                (!src.is_empty()).then(|| {
                    let dst = Region {
                        buf: Buf::Tmp,
                        off: at[k],
                        len: src.len(),
                    };
                    let src = Region {
                        buf: from,
                        off: src.start,
                        len: src.len(),
                    };
                    (Link::Local, Action::Copy { src, dst })
                })
            });
            b.round(copies);
        }
    }
    let mine = Region::whole(Buf::Recv, len(me));
    if let Fold::Out(into) = h.peers.fold {
        let link = Link::Peer(into);
        b.step(
            link,
            Action::Send {
                to: vec![into],
                src: work,
            },
        );
        if mine.len > 0 {
            b.step(
                link,
                Action::Recv {
                    from: into,
                    dst: mine,
                },
            );
        }
        return (b, total);
    }
    if let Fold::In(from) = h.peers.fold {
        b.step(Link::Peer(from), Action::RecvReduce { from, acc: work });
    }
    // Slots `first..first + count`, in bytes of the scratch.
    let slots = |first: usize, count: usize| {
        let (a, z) = (
            at[h.starts[first] as usize],
            at[h.starts[first + count] as usize],
        );
        Region {
            buf: Buf::Tmp,
            off: a,
            len: z - a,
        }
    };
    for step in h.peers.steps() {
        let (partner, half) = (step.partner, step.half);
        let link = Link::Peer(partner);
        // Both know the lengths: runs of no bytes are not sent.
        let (give, keep) = (slots(step.give, half), slots(step.keep, half));
        let sends = (give.len > 0).then_some((
            link,
            Action::Send {
                to: vec![partner],
                src: give,
            },
        ));
        let recvs = (keep.len > 0).then_some((
            link,
            Action::RecvReduce {
                from: partner,
                acc: keep,
            },
        ));
        b.round(sends.into_iter().chain(recvs));
    }
    let held = slots(h.peers.slot as usize, 1);
    let own = Region {
        len: len(me),
        ..held
    };
    let mut last = Vec::new();
    if own.len > 0 {
        last.push((
            Link::Local,
            Action::Copy {
                src: own,
                dst: mine,
            },
        ));
    }
    if let Fold::In(from) = h.peers.fold
        && len(from) > 0
    {
        let src = Region {
            off: held.off + own.len,
            len: len(from),
            ..held
        };
        last.push((
            Link::Peer(from),
            Action::Send {
                to: vec![from],
                src,
            },
        ));
    }
    b.round(last);
    (b, total)
}

/// Wraps `allreduce`, the steps of an Allreduce of `total` bytes (built with the same
/// `send`: the contribution in [`Buf::Send`]), into a Reduce_scatter whose block for this
/// rank is `mine` of the result. The accumulator is `total` bytes.
pub fn build(allreduce: Builder, send: bool, total: usize, mine: Range<usize>) -> Builder {
    let mut b = Builder::default();
    if total == 0 {
        return b;
    }
    if !send {
        b.step(
            Link::Local,
            Action::Copy {
                src: Region::whole(Buf::Recv, total),
                dst: Region::whole(Buf::Acc, total),
            },
        );
    }
    b.append(allreduce.moved(Buf::Recv, Buf::Acc));
    if !mine.is_empty() {
        b.step(
            Link::Local,
            Action::Copy {
                src: Region {
                    buf: Buf::Acc,
                    off: mine.start,
                    len: mine.len(),
                },
                dst: Region::whole(Buf::Recv, mine.len()),
            },
        );
    }
    b
}

/// Reduce_scatter_block or Reduce_scatter by the ring in `peers`' order (node-major: every
/// node boundary crossed by one edge of the ring), rank r's block of the result being
/// `blocks.at(r)` of the `total` bytes of contribution (`send`: in [`Buf::Send`], else in
/// place in [`Buf::Recv`]); returns the builder and the bytes of [`Buf::Tmp`] it uses. In
/// step `s` a rank sends the next rank its running sum of the block of the rank `s + 1`
/// positions back (at step 0 its own contribution to it) and combines into its sum of the
/// block of the rank `s + 2` positions back what the previous rank sends: after `n - 1`
/// steps it holds its own block of the result, which lands at the start of [`Buf::Recv`].
/// Each block of the contribution is copied into [`Buf::Tmp`] one round before it is first
/// combined into, beside that round's transfers, as the Allreduce's ring does. Every rank
/// sends and receives each block but its own once: `(n - 1) / n` of the contribution, where
/// the Allreduce's form moves twice that.
pub fn build_ring(
    peers: &RingPeers,
    blocks: Blocks<'_>,
    total: usize,
    send: bool,
) -> (Builder, usize) {
    let mut b = Builder::default();
    let n = peers.size();
    let me = peers.rank_at[peers.position as usize];
    let region = |buf: Buf, r: u32| {
        let at = blocks.at(r);
        Region {
            buf,
            off: at.start,
            len: at.len(),
        }
    };
    let contribution = |r: u32| region(if send { Buf::Send } else { Buf::Recv }, r);
    let acc = |r: u32| region(Buf::Tmp, r);
    let copy = |r: u32| {
        let (src, dst) = (contribution(r), acc(r));
        (src.len > 0).then_some((Link::Local, Action::Copy { src, dst }))
    };
    let mine = blocks.at(me).len();
    let out = Region::whole(Buf::Recv, mine);
    if n < 2 {
        if send && mine > 0 {
            b.step(
                Link::Local,
                Action::Copy {
                    src: contribution(me),
                    dst: out,
                },
            );
        }
        return (b, 0);
    }
    let (next, prev) = (peers.next(), peers.prev());
    b.round(copy(peers.step(1).1));
    for s in 0..n - 1 {
        let (sent, received) = peers.step(s + 1);
        let src = if s == 0 {
            contribution(sent)
        } else {
            acc(sent)
        };
        let dst = acc(received);
        let send = (src.len > 0).then(|| {
            (
                Link::Peer(next),
                Action::Send {
                    to: vec![next],
                    src,
                },
            )
        });
        let recv = (dst.len > 0).then_some((
            Link::Peer(prev),
            Action::RecvReduce {
                from: prev,
                acc: dst,
            },
        ));
        let ahead = (s + 2 < n).then(|| copy(peers.step(s + 2).1)).flatten();
        b.round(send.into_iter().chain(recv).chain(ahead));
    }
    if mine > 0 {
        b.step(
            Link::Local,
            Action::Copy {
                src: acc(me),
                dst: out,
            },
        );
    }
    (b, total)
}
