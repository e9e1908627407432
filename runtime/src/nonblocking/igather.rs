//! Igather and Igatherv as schedules, in two forms:
//!
//! - [`build`], the direct form of [`crate::gatherv`]: every rank but the root sends its
//!   block straight to the root over the link that reaches it, and the root receives them
//!   all, every transfer in one round, so that each is posted at the start (the root's
//!   own block is copied in that round too, after the receives are posted). A block of
//!   no bytes is not sent (both ends know its length).
//! - [`build_leaders`], Gather's way through the leaders ([`crate::gather`]), for a
//!   context that has learned its [`Subtrees`] (at a blocking Gather, Scatter, Alltoall or
//!   Scan before: a start must not wait for the other ranks to learn them): each leader
//!   receives the blocks under each member in one message, level by level, and the
//!   members of the top group send theirs to the root's place in it.
//!
//! Buffers: a rank's block is [`Buf::Send`] (at the root `None` in place: its block is at
//! its place in [`Buf::Recv`] already); the root's blocks land in [`Buf::Recv`].

use std::ops::Range;

use super::{Action, Buf, Builder, Link, Region};
use crate::subtrees::{Subtrees, below_top};
use crate::view::View;

/// The steps of rank `me`'s part in a Gatherv to `root`: at the root, `at` places rank r's
/// block at `at[r]` of [`Buf::Recv`] and `send` says whether its own is in [`Buf::Send`]
/// (else in place); elsewhere `at` is `None` and the rank's block is the `len` bytes of
/// [`Buf::Send`]. With `one_node`, blocks of
/// [`crate::subtrees::ONE_NODE_GATHER_WRITTEN_BLOCK`] bytes and more are written by their
/// ranks into the root's buffer, as a blocking Gather's ([`crate::subtrees::written`]):
/// the root lends each its place and copies its own block in the first round, and waits
/// for them in the second.
pub fn build(
    me: u32,
    root: u32,
    at: Option<&[Range<usize>]>,
    send: bool,
    len: usize,
    one_node: bool,
) -> Builder {
    let mut b = Builder::default();
    let region = |buf: Buf, r: &Range<usize>| Region {
        buf,
        off: r.start,
        len: r.len(),
    };
    let written = |len: usize| one_node && crate::subtrees::written(len);
    match at {
        None => {
            if len > 0 {
                let src = Region::whole(Buf::Send, len);
                let action = if written(len) {
                    Action::WriteInto { to: root, src }
                } else {
                    Action::Send {
                        to: vec![root],
                        src,
                    }
                };
                b.round([(Link::Peer(root), action)]);
            }
        }
        Some(at) => {
            let mine = &at[me as usize];
            let from = (0..at.len() as u32).filter(|&r| r != me && !at[r as usize].is_empty());
            let place = |r: u32| region(Buf::Recv, &at[r as usize]);
            // The root's own block is copied in the same round, once the receives are
            // posted (the copy does not hold them back).
            let own = (send && !mine.is_empty()).then(|| {
                (
                    Link::Local,
                    Action::Copy {
                        src: Region::whole(Buf::Send, mine.len()),
                        dst: region(Buf::Recv, mine),
                    },
                )
            });
            let lent = |r: &u32| written(at[*r as usize].len());
            b.round(
                from.clone()
                    .map(|r| {
                        let dst = place(r);
                        let action = if lent(&r) {
                            Action::Lend { from: r, dst }
                        } else {
                            Action::Recv { from: r, dst }
                        };
                        (Link::Peer(r), action)
                    })
                    .chain(own),
            );
            b.round(from.filter(lent).map(|r| {
                (
                    Link::Peer(r),
                    Action::WaitLent {
                        from: r,
                        dst: place(r),
                    },
                )
            }));
        }
    }
    b
}

/// The steps of this rank's part in a Gather of `len`-byte blocks to `root` through the
/// leaders (see the module's doc): the root's blocks land at `r * len` of [`Buf::Recv`];
/// `send`: this rank's block is [`Buf::Send`] (else, at the root only, in place). Returns
/// the builder and how many bytes of [`Buf::Acc`] (blocks of ranks that are not
/// consecutive, packed for one transfer) and [`Buf::Tmp`] (a leader's blocks, by rank) it
/// uses.
pub fn build_leaders(
    view: &View,
    sub: &Subtrees,
    root: u32,
    send: bool,
    len: usize,
) -> (Builder, usize, usize) {
    let mut b = Builder::default();
    let (size, me) = (view.size as usize, view.rank);
    let total = size * len;
    let is_root = me == root;
    let own = if send {
        Region::whole(Buf::Send, len)
    } else {
        Region {
            buf: Buf::Recv,
            off: me as usize * len,
            len,
        }
    };
    if total == 0 || size == 1 {
        if is_root && send && len > 0 {
            let dst = Region::whole(Buf::Recv, len);
            b.step(Link::Local, Action::Copy { src: own, dst });
        }
        return (b, 0, 0);
    }
    let n = view.levels.len();
    let until = below_top(view);
    let entry = sub.entry();
    let holder = (until < n).then(|| sub.over(until, root)).flatten();
    let holds_top = until < n && entry == until && Some(view.levels[until].me) == holder;
    let receives = is_root || sub.mine().len() > 1 || holds_top || entry == n;
    if !receives {
        // A rank under nobody sends its block alone.
        let to = match holder {
            Some(h) if entry == until => view.levels[until].members[h],
            _ => view.levels[entry].members[0],
        };
        let step = Action::Send {
            to: vec![to],
            src: own,
        };
        b.step(Link::Level(entry), step);
        return (b, 0, 0);
    }
    // This rank's blocks, by rank: the root's buffer, or scratch of its own.
    let buf = if is_root { Buf::Recv } else { Buf::Tmp };
    let mut sets = Sets { buf, len, acc: 0 };
    if own != sets.at(me, 1) {
        b.step(
            Link::Local,
            Action::Copy {
                src: own,
                dst: sets.at(me, 1),
            },
        );
    }
    // Up to the level where this rank hands its blocks on.
    for i in 0..entry.min(until) {
        let l = &view.levels[i];
        let each: Vec<(Link, u32, &[u32])> = (l.members.iter().enumerate().skip(1))
            .map(|(p, &m)| {
                let ranks = sub.under(i, p).expect("a leader knows its members' ranks");
                (Link::Level(i), m, ranks)
            })
            .collect();
        sets.recvs(&mut b, &each);
    }
    if entry < until {
        // A member below the top: everything under it to its leader, in one message.
        let to = view.levels[entry].members[0];
        sets.send(&mut b, Link::Level(entry), to, sub.mine());
    } else if until < n {
        // The top group: every member's blocks to the root's place in it.
        let l = &view.levels[until];
        let h = holder.expect("a top group has the root's place");
        if l.me != h {
            sets.send(&mut b, Link::Level(until), l.members[h], sub.mine());
        } else {
            let each: Vec<(Link, u32, &[u32])> = (l.members.iter().enumerate())
                .filter(|&(p, _)| p != h)
                .map(|(p, &m)| {
                    let ranks = sub
                        .under(until, p)
                        .expect("the top group knows its members");
                    (Link::Level(until), m, ranks)
                })
                .collect();
            sets.recvs(&mut b, &each);
        }
    }
    // A root below the top group gets everything from the member it is under (rank 0
    // without a top group), which holds it now.
    let whole = |buf| Region::whole(buf, total);
    if is_root && sub.top() != root {
        let from = sub.top();
        let step = Action::Recv {
            from,
            dst: whole(Buf::Recv),
        };
        b.step(Link::Peer(from), step);
    } else if !is_root && (holds_top || entry == n) {
        let step = Action::Send {
            to: vec![root],
            src: whole(Buf::Tmp),
        };
        b.step(Link::Peer(root), step);
    }
    let tmp = if is_root { 0 } else { total };
    (b, sets.acc, tmp)
}

/// The blocks of sets of ranks in a buffer laid out by rank, and the transfers that move
/// a set in one message: straight from or into its place when the ranks are consecutive,
/// else packed in rank order in [`Buf::Acc`] (which grows by what each packed set takes).
pub(super) struct Sets {
    pub(super) buf: Buf,
    pub(super) len: usize,
    pub(super) acc: usize,
}

impl Sets {
    /// The blocks of `count` ranks from `r` on, in place.
    pub(super) fn at(&self, r: u32, count: usize) -> Region {
        Region {
            buf: self.buf,
            off: r as usize * self.len,
            len: count * self.len,
        }
    }

    /// The place of `count` blocks packed in [`Buf::Acc`], taken from what is free.
    fn packed(&mut self, count: usize) -> Region {
        let r = Region {
            buf: Buf::Acc,
            off: self.acc,
            len: count * self.len,
        };
        self.acc += r.len;
        r
    }

    /// Receiving the blocks of `ranks` (sorted) from `from`: the receive, and the copies
    /// that unpack it (a round after).
    pub(super) fn recv(
        &mut self,
        link: Link,
        from: u32,
        ranks: &[u32],
        recvs: &mut Vec<(Link, Action)>,
        copies: &mut Vec<(Link, Action)>,
    ) {
        if consecutive(ranks) {
            let dst = self.at(ranks[0], ranks.len());
            recvs.push((link, Action::Recv { from, dst }));
            return;
        }
        let packed = self.packed(ranks.len());
        recvs.push((link, Action::Recv { from, dst: packed }));
        for (k, &r) in ranks.iter().enumerate() {
            let src = Region {
                off: packed.off + k * self.len,
                len: self.len,
                ..packed
            };
            copies.push((
                Link::Local,
                Action::Copy {
                    src,
                    dst: self.at(r, 1),
                },
            ));
        }
    }

    /// Receiving the blocks of each `(link, from, ranks)` (ranks sorted): the sets of
    /// consecutive ranks straight into place, in the first round with the first packed
    /// set; each packed set's copies in the round that receives the next one (the last
    /// set's in a round of their own), so that a rank unpacks one message while it waits
    /// for the next instead of after all have come.
    pub(super) fn recvs(&mut self, b: &mut Builder, each: &[(Link, u32, &[u32])]) {
        let mut round = Vec::new();
        let mut packed = Vec::new();
        for &(link, from, ranks) in each {
            let (mut recv, mut copies) = (Vec::new(), Vec::new());
            self.recv(link, from, ranks, &mut recv, &mut copies);
            if copies.is_empty() {
                round.extend(recv);
            } else {
                packed.push((recv, copies));
            }
        }
        let mut unpack = Vec::new();
        for (recv, copies) in packed {
            round.extend(recv);
            round.append(&mut unpack);
            b.round(std::mem::take(&mut round));
            unpack = copies;
        }
        round.append(&mut unpack);
        b.round(round);
    }

    /// Sending the blocks of `ranks` (sorted) to `to`, packed first (a round before) if
    /// they are not consecutive.
    fn send(&mut self, b: &mut Builder, link: Link, to: u32, ranks: &[u32]) {
        self.sends(b, &[(link, to, ranks)]);
    }

    /// Sending the blocks of each `(link, to, ranks)` (ranks sorted) to its `to`: the sets
    /// of consecutive ranks straight from their place, in the first round; each set of
    /// others packed in a round of its own, the one before its send, which goes with the
    /// next set's packing (so that a rank packs one message while the one before it
    /// leaves, instead of packing all first).
    pub(super) fn sends(&mut self, b: &mut Builder, each: &[(Link, u32, &[u32])]) {
        let mut round = Vec::new();
        for &(link, to, ranks) in each {
            if !consecutive(ranks) {
                continue;
            }
            let src = self.at(ranks[0], ranks.len());
            round.push((link, Action::Send { to: vec![to], src }));
        }
        for &(link, to, ranks) in each {
            if consecutive(ranks) {
                continue;
            }
            let packed = self.packed(ranks.len());
            for (k, &r) in ranks.iter().enumerate() {
                let dst = Region {
                    off: packed.off + k * self.len,
                    len: self.len,
                    ..packed
                };
                let src = self.at(r, 1);
                round.push((Link::Local, Action::Copy { src, dst }));
            }
            b.round(std::mem::take(&mut round));
            round.push((
                link,
                Action::Send {
                    to: vec![to],
                    src: packed,
                },
            ));
        }
        b.round(round);
    }
}

/// Whether `ranks` (sorted, not empty) are consecutive ranks.
fn consecutive(ranks: &[u32]) -> bool {
    ranks.last().copied() == Some(ranks[0] + ranks.len() as u32 - 1)
}
