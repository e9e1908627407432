//! Iscan and Iexscan: the steps of [`crate::scan`] as a schedule, in either form (the
//! hierarchy's up and down passes, or recursive doubling over the ranks).
//!
//! Buffers: the contribution is in [`Buf::Send`], or in place in [`Buf::Recv`], from
//! which it is first copied to [`Buf::Tmp`]'s second `len` bytes (the offset lands in
//! `Recv`). The running total of the ranks under this one (or, doubling, of the ranks
//! this one has heard of) is the contribution itself until something is added to it,
//! then [`Buf::Acc`] (`Total`); [`Buf::Tmp`]'s first `len` bytes take what comes in.
//! Behind them in `Tmp`, the leader of a group of two in the one-way form keeps its own
//! total until its offset is known.

use super::{Action, Buf, Builder, Link, Region};
use crate::scan::{Form, chain_at, form, wanted};
use crate::subtrees::{Subtrees, below_top};
use crate::view::View;

/// The steps of this rank's part in a Scan (`exclusive` false) or Exscan of `len` bytes:
/// along the chain of ranks where [`chain_at`] says so for the settings' `spin`,
/// hierarchical where `hierarchical` gives the context's [`Subtrees`] (where
/// [`crate::scan::in_order`] answered yes), else by recursive doubling. `send`: the
/// contribution is in [`Buf::Send`] (else in place, in [`Buf::Recv`]). Returns the
/// builder and how many bytes of [`Buf::Acc`] and [`Buf::Tmp`] it uses.
pub fn build(
    view: &View,
    spin: u32,
    hierarchical: Option<&Subtrees>,
    send: bool,
    len: usize,
    exclusive: bool,
) -> (Builder, usize, usize) {
    let mut b = Builder::default();
    if len == 0 {
        return (b, 0, 0);
    }
    let out = Region::whole(Buf::Recv, len);
    // This rank's contribution, where it stays until the end.
    let (mut total, mut tmp_bytes) = if send {
        (Total::new(Region::whole(Buf::Send, len)), len)
    } else {
        // In place: copied aside, and into the accumulator as the running total (the
        // steps that add to it or keep it read it from another buffer than `Tmp`).
        let x = Region {
            buf: Buf::Tmp,
            off: len,
            len,
        };
        let mut total = Total::new(x);
        let copies = [(Link::Local, Action::Copy { src: out, dst: x })];
        b.round(copies.into_iter().chain(total.grow()));
        (total, 2 * len)
    };
    let x = total.x;
    // Rank 0's inclusive Scan, sent elsewhere, is its contribution; the others'
    // contribution is added to the offset at the end, or as the offset's one message
    // arrives (`fold`).
    let fold = !exclusive && view.rank != 0;
    let folded = match hierarchical {
        _ if chain_at(view.size, spin, len) => chain(&mut b, view, &mut total, fold),
        Some(sub) => {
            let (end, folded) = up_down(&mut b, view, sub, &mut total, fold, tmp_bytes);
            tmp_bytes = end;
            folded
        }
        None => {
            let (n, me) = (view.size as usize, view.rank as usize);
            let peer = |p: usize| p as u32;
            doubling_in(&mut b, n, me, peer, Link::Peer, &mut total, out, tmp(len));
            false
        }
    };
    match (view.rank == 0, exclusive) {
        // Rank 0's Exscan has no result: its buffer stays as it was. Its Scan's result,
        // sent from elsewhere, is copied beside its last messages.
        (true, true) => {}
        (true, false) if send => b.beside_last(Link::Local, Action::Copy { src: x, dst: out }),
        (true, false) => {}
        (false, true) => {}
        (false, false) if folded => {}
        (false, false) => b.step(Link::Local, Action::Combine { acc: out, src: x }),
    }
    (b, total.acc_bytes(), tmp_bytes)
}

/// [`crate::scan`]'s chain of ranks: the offset from the rank before (onto the
/// contribution if `fold`: then returns true, the result is complete), the offset and the
/// contribution to the rank after.
fn chain(b: &mut Builder, view: &View, total: &mut Total, fold: bool) -> bool {
    let (me, n) = (view.rank, view.size);
    let x = total.x;
    let out = Region::whole(Buf::Recv, x.len);
    let next = (me + 1 < n).then_some(me + 1);
    // What goes to the next rank: rank 0's contribution (`fold` is false there), or this
    // rank's offset with its contribution.
    let onward = if me == 0 {
        x
    } else if fold {
        let from = me - 1;
        b.step(Link::Local, Action::Copy { src: x, dst: out });
        b.step(Link::Peer(from), Action::RecvReduce { from, acc: out });
        out
    } else {
        let from = me - 1;
        let recv = (Link::Peer(from), Action::Recv { from, dst: out });
        if next.is_none() {
            b.round([recv]);
            return false;
        }
        b.round([recv].into_iter().chain(total.grow()));
        b.step(
            Link::Local,
            Action::Combine {
                acc: total.acc,
                src: out,
            },
        );
        total.acc
    };
    if let Some(to) = next {
        b.step(
            Link::Peer(to),
            Action::Send {
                to: vec![to],
                src: onward,
            },
        );
    }
    fold
}

/// [`Buf::Tmp`]'s first `len` bytes, where messages land that are added to something.
fn tmp(len: usize) -> Region {
    Region::whole(Buf::Tmp, len)
}

/// The running total of the ranks under this one (or heard of): the contribution itself
/// until something is added to it, so that a rank whose total never grows (rank 0 in
/// every group it leads with nothing to add, the members that only send theirs up)
/// sends its contribution without copying it first; then [`Buf::Acc`], the contribution
/// copied there while the message to add is on its way. A contribution in [`Buf::Tmp`]
/// (in place) goes to the accumulator at once: the steps that keep or add the total
/// write other regions of `Tmp`, and a step may not read and write one buffer.
struct Total {
    x: Region,
    acc: Region,
    grown: bool,
}

impl Total {
    fn new(x: Region) -> Self {
        Total {
            x,
            acc: Region::whole(Buf::Acc, x.len),
            grown: false,
        }
    }

    /// Where the total is.
    fn at(&self) -> Region {
        if self.grown { self.acc } else { self.x }
    }

    /// The copy that makes [`Buf::Acc`] the total, if it is not yet, to run beside the
    /// round that brings what is added to it (it reads the contribution only, and writes
    /// only the accumulator); the total is there from then on.
    fn grow(&mut self) -> Option<(Link, Action)> {
        (!std::mem::replace(&mut self.grown, true)).then_some((
            Link::Local,
            Action::Copy {
                src: self.x,
                dst: self.acc,
            },
        ))
    }

    /// How many bytes of [`Buf::Acc`] the schedule uses.
    fn acc_bytes(&self) -> usize {
        if self.grown { self.acc.len } else { 0 }
    }
}

/// [`crate::scan`]'s hierarchical form, each group below the top in the form the blocking
/// one takes ([`form`]): leaves the offset in [`Buf::Recv`] (rank 0 has none), with the
/// contribution added if `fold` where the offset comes whole in one message to a rank
/// that leads no group (then it returns true: the result is complete). The total a
/// one-way leader keeps goes into [`Buf::Tmp`] from byte `end`; returns where its use of
/// `Tmp` ends.
fn up_down(
    b: &mut Builder,
    view: &View,
    sub: &Subtrees,
    total: &mut Total,
    fold: bool,
    mut end: usize,
) -> (usize, bool) {
    let len = total.x.len;
    let out = Region::whole(Buf::Recv, len);
    let tmp = tmp(len);
    let n = view.levels.len();
    let until = below_top(view);
    // Where the leader of each group in the one-way form (of two) keeps its own total
    // below the group.
    let mut kept: Vec<Option<Region>> = vec![None; until];
    let mut entry = n;
    let mut folded = false;
    for (i, l) in view.levels[..until].iter().enumerate() {
        let link = Link::Level(i);
        let k = l.members.len();
        let form = form(view, len, i);
        if l.me != 0 {
            let leader = l.members[0];
            // Nobody wants the total of the last ranks.
            let sends = wanted(Some(sub.mine()), view.size);
            // The total up, beside what the member gets first (not in the doubling).
            let up = |total: &Total| {
                sends.then(|| {
                    let to = vec![leader];
                    (
                        link,
                        Action::Send {
                            to,
                            src: total.at(),
                        },
                    )
                })
            };
            if form == Form::Doubling {
                let member = |p: usize| l.members[p];
                doubling_in(b, k, l.me, member, |_| link, total, out, tmp);
                if l.me + 1 == k && sends {
                    // The group's total: this member's offset inside the group and its
                    // own total (its running total never grew).
                    b.step(Link::Local, Action::Copy { src: out, dst: tmp });
                    b.step(
                        Link::Local,
                        Action::Combine {
                            acc: tmp,
                            src: total.at(),
                        },
                    );
                    b.step(
                        link,
                        Action::Send {
                            to: vec![leader],
                            src: tmp,
                        },
                    );
                }
            } else if fold && i == 0 && (leader == 0 || form == Form::OneWay) {
                // The whole offset in one message (from rank 0's groups, and in the
                // one-way form once the leader knows its own), onto the contribution
                // copied while the total goes up, at a rank that leads no group (and so
                // hands its offset to nobody).
                let copy = (
                    Link::Local,
                    Action::Copy {
                        src: total.x,
                        dst: out,
                    },
                );
                b.round(up(total).into_iter().chain([copy]));
                b.step(
                    link,
                    Action::RecvReduce {
                        from: leader,
                        acc: out,
                    },
                );
                folded = true;
            } else {
                // The total up, and in the same round the offset: whole, or the part from
                // inside the group (the exchange).
                let down = (
                    link,
                    Action::Recv {
                        from: leader,
                        dst: out,
                    },
                );
                b.round(up(total).into_iter().chain([down]));
            }
            if leader != 0 && form != Form::OneWay {
                // The leader's own offset, sent on its way down.
                b.step(
                    link,
                    Action::RecvReduce {
                        from: leader,
                        acc: out,
                    },
                );
            }
            entry = i;
            break;
        }
        let wants_last = wanted(sub.under(i, k - 1), view.size);
        if form == Form::Doubling {
            // Recursive doubling among the members: the leader sends its total to the
            // members 1, 2, 4, ... on and gets the group's total from the last member.
            let member = |p: usize| l.members[p];
            doubling_in(b, k, 0, member, |_| link, total, out, tmp);
            if wants_last {
                let from = l.members[k - 1];
                total.grown = true;
                b.step(
                    link,
                    Action::Recv {
                        from,
                        dst: total.acc,
                    },
                );
            }
            continue;
        }
        if view.rank != 0 && form == Form::OneWay {
            // The one member's total comes one way; this rank's own total so far is kept
            // until its offset is known.
            let own = Region {
                buf: Buf::Tmp,
                off: end,
                len,
            };
            end += len;
            kept[i] = Some(own);
            let keep = (
                Link::Local,
                Action::Copy {
                    src: total.at(),
                    dst: own,
                },
            );
            if wants_last {
                let grow = total.grow();
                b.round([keep].into_iter().chain(grow));
                let from = l.members[1];
                b.step(
                    link,
                    Action::RecvReduce {
                        from,
                        acc: total.acc,
                    },
                );
            } else {
                b.round([keep]);
            }
            continue;
        }
        for &m in &l.members[1..] {
            let give = (
                link,
                Action::Send {
                    to: vec![m],
                    src: total.at(),
                },
            );
            if m == l.members[k - 1] && !wants_last {
                b.round([give]);
                continue;
            }
            let take = (link, Action::Recv { from: m, dst: tmp });
            b.round([give, take].into_iter().chain(total.grow()));
            b.step(
                Link::Local,
                Action::Combine {
                    acc: total.acc,
                    src: tmp,
                },
            );
        }
    }
    if entry == n && until < n {
        // The top group: an exclusive scan of the members' totals.
        entry = until;
        let l = &view.levels[until];
        let member = |p: usize| l.members[p];
        let link = Link::Level(until);
        doubling_in(b, l.members.len(), l.me, member, |_| link, total, out, tmp);
    }
    if view.rank != 0 {
        for i in (0..entry.min(until)).rev() {
            let (link, members) = (Link::Level(i), &view.levels[i].members);
            let to = members[1..].to_vec();
            let Some(own) = kept[i] else {
                // The members have the rest from the exchange on the way up.
                b.step(link, Action::Send { to, src: out });
                continue;
            };
            // The member's whole offset: this rank's and its own total below the level.
            b.step(Link::Local, Action::Combine { acc: own, src: out });
            b.step(link, Action::Send { to, src: own });
        }
    }
    (end, folded)
}

/// The exclusive scan of `k` members' totals by recursive doubling, this rank member `me`
/// (`member(p)` the rank of member `p`, reached over `link(rank)`): in the round of
/// distance `d`, the total of the members this one has heard of goes to the member `d`
/// on, and the one from the member `d` back lands in the offset `out` the first time and
/// in `tmp` after, added to the offset, and to the running total while that is still
/// sent. The top group's, [`crate::scan`]'s `Form::Doubling` below it (where the leader
/// only sends), and the flat form over all ranks.
#[allow(clippy::too_many_arguments)]
fn doubling_in(
    b: &mut Builder,
    k: usize,
    me: usize,
    member: impl Fn(usize) -> u32,
    link: impl Fn(u32) -> Link,
    total: &mut Total,
    out: Region,
    tmp: Region,
) {
    let mut have = false;
    let mut d = 1;
    while d < k {
        let send = (me + d < k).then(|| {
            let to = member(me + d);
            (
                link(to),
                Action::Send {
                    to: vec![to],
                    src: total.at(),
                },
            )
        });
        let from = (me >= d).then(|| member(me - d));
        let dst = if have { tmp } else { out };
        let recv = from.map(|from| (link(from), Action::Recv { from, dst }));
        // The running total grows while it is still sent.
        let grows = from.is_some() && me + 2 * d < k;
        let copy = if grows { total.grow() } else { None };
        b.round(send.into_iter().chain(recv).chain(copy));
        if from.is_some() {
            // Into the offset, and into the running total (both read what came in: one
            // round).
            let offset = have.then_some((Link::Local, Action::Combine { acc: out, src: tmp }));
            let acc = total.acc;
            let grow = grows.then_some((Link::Local, Action::Combine { acc, src: dst }));
            b.round(offset.into_iter().chain(grow));
            have = true;
        }
        d *= 2;
    }
}
