//! Iscatter and Iscatterv: the direct form of [`crate::scatterv`] as a schedule. The root
//! sends every other rank its block straight over the link that reaches it, every
//! transfer in one round, so that each is posted at the start (the root's own block is
//! copied in that round too, after the sends); each rank receives its own. A block of no
//! bytes is not sent (both ends know its length). As for Igather, the
//! form through the leaders is a later step.
//!
//! Buffers: the root's blocks are in [`Buf::Send`]; a rank's block lands in [`Buf::Recv`]
//! (at the root `None` in place: its block stays in [`Buf::Send`]).

use std::ops::Range;

use super::igather::Sets;
use super::{Action, Buf, Builder, Link, Region};
use crate::subtrees::{Subtrees, below_top};
use crate::view::View;

/// The steps of rank `me`'s part in a Scatterv from `root`: at the root, `at` places rank
/// r's block at `at[r]` of [`Buf::Send`] and `recv` says whether its own lands in
/// [`Buf::Recv`] (else it stays in place); elsewhere `at` is `None` and the rank's block
/// lands in the `len` bytes of [`Buf::Recv`].
pub fn build(me: u32, root: u32, at: Option<&[Range<usize>]>, recv: bool, len: usize) -> Builder {
    let mut b = Builder::default();
    let region = |buf: Buf, r: &Range<usize>| Region {
        buf,
        off: r.start,
        len: r.len(),
    };
    match at {
        None => {
            if len > 0 {
                b.round([(
                    Link::Peer(root),
                    Action::Recv {
                        from: root,
                        dst: Region::whole(Buf::Recv, len),
                    },
                )]);
            }
        }
        Some(at) => {
            let mine = &at[me as usize];
            let to = (0..at.len() as u32).filter(|&r| r != me && !at[r as usize].is_empty());
            // The root's own block is copied in the same round, once the sends are out
            // (the copy does not hold them back).
            let own = (recv && !mine.is_empty()).then(|| {
                (
                    Link::Local,
                    Action::Copy {
                        src: region(Buf::Send, mine),
                        dst: Region::whole(Buf::Recv, mine.len()),
                    },
                )
            });
            b.round(
                to.map(|r| {
                    (
                        Link::Peer(r),
                        Action::Send {
                            to: vec![r],
                            src: region(Buf::Send, &at[r as usize]),
                        },
                    )
                })
                .chain(own),
            );
        }
    }
    b
}

/// The steps of this rank's part in a Scatter of `len`-byte blocks from `root` through the
/// leaders ([`crate::scatter`]'s way; for a context that knows its [`Subtrees`], as
/// [`super::igather::build_leaders`]): rank r's block is at `r * len` of the root's
/// [`Buf::Send`], and lands in [`Buf::Recv`] (`recv` false: at the root in place, where
/// it is already). Returns the builder and how many bytes of [`Buf::Acc`] and
/// [`Buf::Tmp`] it uses.
pub fn build_leaders(
    view: &View,
    sub: &Subtrees,
    root: u32,
    recv: bool,
    len: usize,
) -> (Builder, usize, usize) {
    let mut b = Builder::default();
    let (size, me) = (view.size as usize, view.rank);
    let total = size * len;
    let is_root = me == root;
    let mine = Region::whole(Buf::Recv, len);
    if total == 0 || size == 1 {
        if is_root && recv && len > 0 {
            let src = Region::whole(Buf::Send, len);
            b.step(Link::Local, Action::Copy { src, dst: mine });
        }
        return (b, 0, 0);
    }
    let n = view.levels.len();
    let until = below_top(view);
    let entry = sub.entry();
    let holder = (until < n).then(|| sub.over(until, root)).flatten();
    let holds_top = until < n && entry == until && Some(view.levels[until].me) == holder;
    // A root below the top group first hands every block to the member it is under (rank
    // 0 without a top group), which scatters them.
    let detour_to = (is_root && sub.top() != root).then(|| sub.top());
    let detour_from = !is_root && (holds_top || entry == n);
    // Where this rank's blocks come from: its leader, or the top group's holder.
    let from = match holder {
        Some(h) if entry == until => Some((Link::Level(until), view.levels[until].members[h])),
        _ if entry < until => Some((Link::Level(entry), view.levels[entry].members[0])),
        _ => None,
    };
    // A rank under nobody receives its own block alone, straight into its buffer.
    if sub.mine().len() == 1 && !holds_top && entry < n && detour_to.is_none() {
        let (link, from) = from.expect("a rank below the top has a leader");
        b.step(link, Action::Recv { from, dst: mine });
        return (b, 0, 0);
    }
    let whole = |buf| Region::whole(buf, total);
    // The blocks this rank passes on: the root's, or (received) scratch of its own.
    let holds_send = is_root && detour_to.is_none();
    let mut sets = Sets {
        buf: if holds_send { Buf::Send } else { Buf::Tmp },
        len,
        acc: 0,
    };
    if let Some(to) = detour_to {
        let step = Action::Send {
            to: vec![to],
            src: whole(Buf::Send),
        };
        b.step(Link::Peer(to), step);
    }
    if detour_from {
        let step = Action::Recv {
            from: root,
            dst: whole(Buf::Tmp),
        };
        b.step(Link::Peer(root), step);
    } else if !holds_send && let Some((link, from)) = from {
        // Everything under this rank, from its leader (or the top group's holder).
        let (mut recvs, mut copies) = (Vec::new(), Vec::new());
        sets.recv(link, from, sub.mine(), &mut recvs, &mut copies);
        b.round(recvs);
        b.round(copies);
    }
    if holds_top {
        let l = &view.levels[until];
        let each: Vec<(Link, u32, &[u32])> = (0..l.members.len())
            .filter(|&p| Some(p) != holder)
            .map(|p| {
                let ranks = sub
                    .under(until, p)
                    .expect("the top group knows its members");
                (Link::Level(until), l.members[p], ranks)
            })
            .collect();
        sets.sends(&mut b, &each);
    }
    // Down the levels this rank leads.
    for i in (0..entry.min(until)).rev() {
        let l = &view.levels[i];
        let each: Vec<(Link, u32, &[u32])> = (1..l.members.len())
            .map(|p| {
                let ranks = sub.under(i, p).expect("a leader knows its members' ranks");
                (Link::Level(i), l.members[p], ranks)
            })
            .collect();
        sets.sends(&mut b, &each);
    }
    if recv {
        b.step(
            Link::Local,
            Action::Copy {
                src: sets.at(me, 1),
                dst: mine,
            },
        );
    }
    let tmp = if holds_send { 0 } else { total };
    (b, sets.acc, tmp)
}
