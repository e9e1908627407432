//! Iallreduce: reduce up the hierarchy, then (ReduceAllreduceBcast) recursive doubling
//! among the top group or (ReduceBcast) nothing, then broadcast down, as one schedule.
//! The flat forms run over every rank in the hierarchy's order instead: the ring
//! ([`build_ring`]) and Rabenseifner's ([`build_rabenseifner`]) for large messages,
//! recursive doubling ([`build_recursive_doubling`]) for small ones on jobs with few ranks
//! per node.

use topo_hierarchy::Settings;
use topo_hierarchy::remap::RingPeers;
use topo_hierarchy::remap::halving::{Fold, HalvingPeers};
use topo_hierarchy::settings::AllreduceAlg;

use super::{Action, Buf, Builder, Link, Region, ibcast, ireduce};
use crate::ring::Blocks;
use crate::view::View;

/// The steps of this rank's part in an allreduce of `len` bytes (elements of `elem` bytes)
/// into [`Buf::Recv`] (`send`: the contribution is in [`Buf::Send`], else in place).
/// Returns the builder and how many bytes of [`Buf::Tmp`] it uses.
pub fn build(view: &View, s: &Settings, send: bool, len: usize, elem: usize) -> (Builder, usize) {
    let mut b = Builder::default();
    let acc = Region::whole(Buf::Recv, len);
    if send {
        let src = Region::whole(Buf::Send, len);
        b.step(Link::Local, Action::Copy { src, dst: acc });
    }
    let n = view.levels.len();
    if len == 0 || view.size == 1 || n == 0 {
        return (b, 0);
    }
    // (A flat form whose order is unknown falls back to recursive doubling at the top.)
    let top_exchange = !matches!(s.allreduce_for(len), AllreduceAlg::ReduceBcast);
    let until = if top_exchange && view.is_top(n - 1) {
        n - 1
    } else {
        n
    };
    let holds = ireduce::up(&mut b, view, s, 0, len, elem, until, acc);
    let mut tmp = 0;
    if holds && until < n {
        let l = &view.levels[n - 1];
        // Nothing was combined below the top group: the contribution itself can go out of
        // the send buffer, and the partner's be combined straight into `acc`.
        let own = (send && view.levels[..until].iter().all(|l| l.members.len() == 1))
            .then(|| Region::whole(Buf::Send, len));
        if recursive_doubling(&mut b, n - 1, &l.members, l.me, acc, own) {
            tmp = len;
        }
    }
    ibcast::down(&mut b, view, s, 0, len, until, acc);
    (b, tmp)
}

/// Recursive doubling among `members` on level `level`; every member ends with the full
/// reduction in `acc`. Non-powers of two fold the first `2 * rem` members pairwise first.
///
/// Each exchange sends `acc` and receives the partner's into scratch, then combines, since
/// `acc` may not change while the partner reads it. When `own` (a region that holds what
/// `acc` holds and stays put) is given, the first exchange sends it instead and combines
/// the partner's data straight into `acc` as it arrives: that exchange then completes
/// without waiting for the partner before combining. Returns whether the steps use
/// [`Buf::Tmp`] (`acc.len` bytes).
fn recursive_doubling(
    b: &mut Builder,
    level: usize,
    members: &[u32],
    me: usize,
    acc: Region,
    own: Option<Region>,
) -> bool {
    let link = Link::Level(level);
    let tmp = Region {
        buf: Buf::Tmp,
        ..acc
    };
    let n = members.len();
    let pof2 = 1usize << (usize::BITS - 1 - n.leading_zeros());
    let rem = n - pof2;
    let folded_out = me < 2 * rem && me.is_multiple_of(2);
    let mut uses_tmp = false;
    if me < 2 * rem {
        if folded_out {
            b.step(
                link,
                Action::Send {
                    to: vec![members[me + 1]],
                    src: acc,
                },
            );
        } else {
            b.step(
                link,
                Action::RecvReduce {
                    from: members[me - 1],
                    acc,
                },
            );
        }
    }
    if !folded_out {
        let nr = if me < 2 * rem { me / 2 } else { me - rem };
        // A member that combined a folded partner's data no longer holds only its own.
        let mut own = own.filter(|_| me >= 2 * rem);
        let mut mask = 1;
        uses_tmp = pof2 > 2 || own.is_none();
        while mask < pof2 {
            let peer = nr ^ mask;
            let peer = members[if peer < rem { peer * 2 + 1 } else { peer + rem }];
            mask <<= 1;
            if let Some(src) = own.take() {
                b.round([
                    (
                        link,
                        Action::Send {
                            to: vec![peer],
                            src,
                        },
                    ),
                    (link, Action::RecvReduce { from: peer, acc }),
                ]);
                continue;
            }
            b.round([
                (
                    link,
                    Action::Send {
                        to: vec![peer],
                        src: acc,
                    },
                ),
                (
                    link,
                    Action::Recv {
                        from: peer,
                        dst: tmp,
                    },
                ),
            ]);
            b.step(Link::Local, Action::Combine { acc, src: tmp });
        }
    }
    if me < 2 * rem {
        if folded_out {
            b.step(
                link,
                Action::Recv {
                    from: members[me + 1],
                    dst: acc,
                },
            );
        } else {
            b.step(
                link,
                Action::Send {
                    to: vec![members[me - 1]],
                    src: acc,
                },
            );
        }
    }
    uses_tmp
}

/// Recursive doubling over every rank in the halving order of `peers`
/// ([`topo_hierarchy::remap::halving`]) as a schedule, into [`Buf::Recv`] (`send`: the
/// contribution is in [`Buf::Send`], else in place): `log2(slots)` exchanges of the whole
/// message, with the partners in the order of `peers.partners`, so that the first ones stay
/// inside the node. A job size that is not a power of two first folds pairs of one node;
/// the rank folded out gets the result last. With a send buffer, the first message in
/// (the folded partner's, else the first exchange's) lands in the result and the send
/// buffer is combined into it, so nothing is copied; after that each exchange sends the
/// result so far and combines the partner's from scratch, since the result may not change
/// while the partner reads it. Returns the builder and how many bytes of [`Buf::Tmp`] it
/// uses.
pub fn build_recursive_doubling(peers: &HalvingPeers, send: bool, len: usize) -> (Builder, usize) {
    let mut b = Builder::default();
    let acc = Region::whole(Buf::Recv, len);
    let own = Region::whole(if send { Buf::Send } else { Buf::Recv }, len);
    if let Fold::Out(into) = peers.fold {
        return (folded_out(into, send, len), 0);
    }
    if len == 0 {
        return (b, 0);
    }
    // Whether this rank's data is still only in the send buffer (`own`), which stays put
    // and can go out while the result fills.
    let mut apart = send;
    if let Fold::In(from) = peers.fold {
        if apart {
            // The first message in lands in `acc`, and `own` joins it there.
            b.step(Link::Peer(from), Action::Recv { from, dst: acc });
            b.step(Link::Local, Action::Combine { acc, src: own });
            apart = false;
        } else {
            b.step(Link::Peer(from), Action::RecvReduce { from, acc });
        }
    }
    let tmp = Region {
        buf: Buf::Tmp,
        ..acc
    };
    let mut uses_tmp = false;
    for &partner in &peers.partners {
        let link = Link::Peer(partner);
        let out = |src| {
            (
                link,
                Action::Send {
                    to: vec![partner],
                    src,
                },
            )
        };
        if apart {
            let recv = Action::Recv {
                from: partner,
                dst: acc,
            };
            b.round([out(own), (link, recv)]);
            b.step(Link::Local, Action::Combine { acc, src: own });
            apart = false;
            continue;
        }
        uses_tmp = true;
        let recv = Action::Recv {
            from: partner,
            dst: tmp,
        };
        b.round([out(acc), (link, recv)]);
        b.step(Link::Local, Action::Combine { acc, src: tmp });
    }
    if apart {
        // Alone: the result is this rank's data.
        b.step(Link::Local, Action::Copy { src: own, dst: acc });
    }
    give_back(&mut b, peers.fold, acc);
    (b, if uses_tmp { len } else { 0 })
}

/// The steps of a rank folded out of an exchange in the halving order (a job size that is
/// not a power of two): it sends its contribution of `len` bytes (`send`: in
/// [`Buf::Send`], else in place) to the rank it folds into and gets the result back.
fn folded_out(into: u32, send: bool, len: usize) -> Builder {
    let mut b = Builder::default();
    if len > 0 {
        let link = Link::Peer(into);
        let src = Region::whole(if send { Buf::Send } else { Buf::Recv }, len);
        b.step(
            link,
            Action::Send {
                to: vec![into],
                src,
            },
        );
        let dst = Region::whole(Buf::Recv, len);
        b.step(link, Action::Recv { from: into, dst });
    }
    b
}

/// The last step of a rank that a partner folded into: the result `acc` back to it.
fn give_back(b: &mut Builder, fold: Fold, acc: Region) {
    if let Fold::In(from) = fold {
        b.step(
            Link::Peer(from),
            Action::Send {
                to: vec![from],
                src: acc,
            },
        );
    }
}

/// Bytes of blocks `first..first + count` of `blocks`, in the receive buffer.
fn span(blocks: &Blocks, first: usize, count: usize) -> Region {
    let (a, b) = (blocks.get(first).start, blocks.get(first + count - 1).end);
    Region {
        buf: Buf::Recv,
        off: a,
        len: b - a,
    }
}

/// A message of whole elements cut into `slots` blocks of proportional size: block `b`
/// starts at element `b * count / slots`. Every aligned run of blocks that a halving step
/// keeps then holds its share of the elements (to one), even when there are fewer
/// elements than slots.
struct Split {
    count: u128,
    slots: u128,
    elem: usize,
    /// Where the message starts in its buffers, in bytes.
    base: usize,
}

impl Split {
    fn new(len: usize, slots: usize, elem: usize) -> Split {
        let elem = elem.max(1);
        Split {
            count: (len / elem) as u128,
            slots: slots.max(1) as u128,
            elem,
            base: 0,
        }
    }

    /// The same split of a message that starts `base` bytes into its buffers.
    fn at(self, base: usize) -> Split {
        Split { base, ..self }
    }

    /// Where block `b` starts, in bytes.
    fn start(&self, b: usize) -> usize {
        (b as u128 * self.count / self.slots) as usize * self.elem
    }

    /// Blocks `first..first + count` of `buf`.
    fn region(&self, buf: Buf, first: usize, count: usize) -> Region {
        let (a, b) = (self.start(first), self.start(first + count));
        Region {
            buf,
            off: self.base + a,
            len: b - a,
        }
    }
}

/// The ring allreduce over every rank in the order of `peers`
/// ([`topo_hierarchy::remap::ring_positions`]) as a schedule, into [`Buf::Recv`] (`send`:
/// the contribution is in [`Buf::Send`], else in place). The message is cut into one block
/// of whole `elem`-byte elements per position; in step `s` of the reduce-scatter a rank
/// sends block `position - s` to the next position and combines block `position - s - 1`
/// from the previous one as it arrives, after which it holds block `position + 1` of the
/// result; the allgather passes the finished blocks round in `n - 1` more steps.
pub fn build_ring(peers: &RingPeers, elem: usize, send: bool, len: usize) -> Builder {
    let mut b = Builder::default();
    let n = peers.size();
    if len == 0 || n < 2 {
        if send && len > 0 {
            let (src, dst) = (Region::whole(Buf::Send, len), Region::whole(Buf::Recv, len));
            b.step(Link::Local, Action::Copy { src, dst });
        }
        return b;
    }
    let blocks = Blocks::new(len, n, elem.max(1));
    let (next, prev, p) = (peers.next(), peers.prev(), peers.position as usize);
    let block = |i: usize| span(&blocks, (i + 2 * n) % n, 1);
    // With a send buffer, each block is copied into place one round before it is first
    // combined into, beside that round's transfers, and the first send reads the send
    // buffer: no round waits for a copy of the whole message.
    let own = |i: usize| Region {
        buf: Buf::Send,
        ..block(i)
    };
    if send {
        b.step(
            Link::Local,
            Action::Copy {
                src: own(p + n - 1),
                dst: block(p + n - 1),
            },
        );
    }
    for s in 0..n - 1 {
        let src = if send && s == 0 {
            own(p)
        } else {
            block(p + n - s)
        };
        let mut round = vec![
            (
                Link::Peer(next),
                Action::Send {
                    to: vec![next],
                    src,
                },
            ),
            (
                Link::Peer(prev),
                Action::RecvReduce {
                    from: prev,
                    acc: block(p + 2 * n - s - 1),
                },
            ),
        ];
        if send && s + 2 < n {
            let i = p + 2 * n - s - 2;
            round.push((
                Link::Local,
                Action::Copy {
                    src: own(i),
                    dst: block(i),
                },
            ));
        }
        b.round(round);
    }
    for s in 0..n - 1 {
        b.round([
            (
                Link::Peer(next),
                Action::Send {
                    to: vec![next],
                    src: block(p + 1 + n - s),
                },
            ),
            (
                Link::Peer(prev),
                Action::Recv {
                    from: prev,
                    dst: block(p + n - s),
                },
            ),
        ]);
    }
    b
}

/// Rabenseifner's allreduce over every rank in the order of `peers`
/// ([`topo_hierarchy::remap::halving`]) as a schedule, into [`Buf::Recv`] (`send`: the
/// contribution is in [`Buf::Send`], else in place). The message is cut into one block of
/// whole `elem`-byte elements per slot. Halving: at the step of mask `m` a rank keeps the
/// half of its current blocks on its slot's side of bit `m`, sends the other half to its
/// partner and combines the partner's copy of its own half as it arrives; it ends holding
/// block `slot` of the result. Doubling: the same partners in reverse, each sending what
/// it holds and receiving the partner's part beside it. A rank folded out sends its
/// contribution first and gets the result at the end.
///
/// With a `piece` (not 0), a message of at least two is cut into `len / piece` pieces of
/// whole elements (fewer when a piece would hold fewer elements than there are slots),
/// each reduced by the steps above, and piece `j` runs [`PIECE_LAG`] steps behind piece `j - 1`: while one
/// piece crosses the network in the middle steps, the next is still at the first steps,
/// inside the node, and the node's work overlaps the network's as in the ring.
pub fn build_rabenseifner(
    peers: &HalvingPeers,
    elem: usize,
    send: bool,
    len: usize,
    piece: usize,
) -> Builder {
    let mut b = Builder::default();
    let acc = Region::whole(Buf::Recv, len);
    if let Fold::Out(into) = peers.fold {
        return folded_out(into, send, len);
    }
    if len == 0 {
        return b;
    }
    // A rank that takes part from the start with a send buffer sends the first half out
    // of it and copies only the half it keeps; everyone else starts from a copy of the
    // whole.
    let from_send = send && peers.fold == Fold::None && !peers.partners.is_empty();
    if send && !from_send {
        let src = Region::whole(Buf::Send, len);
        b.step(Link::Local, Action::Copy { src, dst: acc });
    }
    if let Fold::In(from) = peers.fold {
        b.step(Link::Peer(from), Action::RecvReduce { from, acc });
    }
    let q = peers.slots as usize;
    let elem = elem.max(1);
    let count = len / elem;
    let pieces = match piece {
        0 => 1,
        piece => (len / piece).clamp(1, (count / q.max(1)).max(1)),
    };
    // Every piece's rounds, placed `PIECE_LAG` rounds after the previous piece's.
    let mut rounds: Vec<Vec<(Link, Action)>> = Vec::new();
    for j in 0..pieces {
        let (a, z) = (j * count / pieces, (j + 1) * count / pieces);
        let split = Split::new((z - a) * elem, q, elem).at(a * elem);
        for (i, round) in piece_rounds(peers, &split, from_send)
            .into_iter()
            .enumerate()
        {
            let at = j * PIECE_LAG + i;
            if rounds.len() <= at {
                rounds.resize_with(at + 1, Vec::new);
            }
            rounds[at].extend(round);
        }
    }
    for round in rounds {
        b.round(round);
    }
    give_back(&mut b, peers.fold, acc);
    b
}

/// How many steps of [`build_rabenseifner`] a piece runs behind the one before it. Even,
/// so that two pieces never exchange with the same partner in the same round: of `2L`
/// steps, halving step `i` and doubling step `2L - 1 - i` share a partner, an odd number
/// of steps apart.
pub const PIECE_LAG: usize = 2;

/// One piece's rounds in [`build_rabenseifner`]: the halving steps and the doubling steps
/// over the blocks of `split`. With `from_send` (the contribution is in the send buffer), the
/// first step sends the half it gives straight from there, and copies the half it keeps
/// into the result beside that exchange, before the partner's half is combined into it.
fn piece_rounds(peers: &HalvingPeers, split: &Split, from_send: bool) -> Vec<Vec<(Link, Action)>> {
    let q = peers.slots as usize;
    let mut rounds = Vec::new();
    let mut from_send = from_send;
    // The blocks held before each halving step: `(first, count)`.
    let mut held = Vec::with_capacity(peers.partners.len());
    let (mut first, mut count) = (0, q);
    for step in peers.steps() {
        held.push((first, count));
        let (partner, half, keep, give) = (step.partner, step.half, step.keep, step.give);
        let link = Link::Peer(partner);
        let region = |buf, i| split.region(buf, i, half);
        let combine = (
            link,
            Action::RecvReduce {
                from: partner,
                acc: region(Buf::Recv, keep),
            },
        );
        let src = region(if from_send { Buf::Send } else { Buf::Recv }, give);
        let send = (
            link,
            Action::Send {
                to: vec![partner],
                src,
            },
        );
        if from_send {
            // The copy is the round's first step, so it is done before the combine: the
            // steps of a round run in order, and a combining receive posted ahead lands
            // in the transfer's own memory until its round. The transfers run meanwhile.
            let (src, dst) = (region(Buf::Send, keep), region(Buf::Recv, keep));
            rounds.push(vec![
                (Link::Local, Action::Copy { src, dst }),
                send,
                combine,
            ]);
            from_send = false;
        } else {
            rounds.push(vec![send, combine]);
        }
        (first, count) = (keep, half);
    }
    for (&partner, &(whole, twice)) in peers.partners.iter().zip(&held).rev() {
        let other = if first == whole { whole + count } else { whole };
        let link = Link::Peer(partner);
        rounds.push(vec![
            (
                link,
                Action::Send {
                    to: vec![partner],
                    src: split.region(Buf::Recv, first, count),
                },
            ),
            (
                link,
                Action::Recv {
                    from: partner,
                    dst: split.region(Buf::Recv, other, count),
                },
            ),
        ]);
        (first, count) = (whole, twice);
    }
    rounds
}
