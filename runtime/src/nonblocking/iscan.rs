//! Iscan and Iexscan: the steps of [`crate::scan`] as a schedule, in either form (the
//! hierarchy's up and down passes, or recursive doubling over the ranks).
//!
//! Buffers: the contribution is in [`Buf::Send`], or in place in [`Buf::Recv`], from
//! which it is first copied to [`Buf::Tmp`]'s second half (the offset lands in `Recv`).
//! [`Buf::Acc`] is the running total of the ranks under this one (or, doubling, of the
//! ranks this one has heard of), and [`Buf::Tmp`]'s first `len` bytes take what comes
//! in. Behind them in `Tmp`, the leader of a group in the one-way form keeps the totals
//! its members' offsets add until its own offset is known.

use super::{Action, Buf, Builder, Link, Region};
use crate::scan::{Form, form, wanted};
use crate::subtrees::{Subtrees, below_top};
use crate::view::View;

/// The steps of this rank's part in a Scan (`exclusive` false) or Exscan of `len` bytes:
/// hierarchical where `hierarchical` gives the context's [`Subtrees`] (where
/// [`crate::scan::in_order`] answered yes), else by recursive doubling. `send`: the
/// contribution is in [`Buf::Send`] (else in place, in [`Buf::Recv`]). Returns the
/// builder and how many bytes of [`Buf::Acc`] and [`Buf::Tmp`] it uses.
pub fn build(
    view: &View,
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
    let (x, mut tmp_bytes) = if send {
        (Region::whole(Buf::Send, len), len)
    } else {
        let x = Region {
            buf: Buf::Tmp,
            off: len,
            len,
        };
        b.step(Link::Local, Action::Copy { src: out, dst: x });
        (x, 2 * len)
    };
    let rank0 = view.rank == 0;
    match hierarchical {
        Some(sub) => tmp_bytes = up_down(&mut b, view, sub, x, len, tmp_bytes),
        None => doubling(&mut b, view, x),
    }
    match (rank0, exclusive) {
        // Rank 0's Exscan has no result: its buffer stays as it was.
        (true, true) => {}
        (true, false) if send => b.step(Link::Local, Action::Copy { src: x, dst: out }),
        (true, false) => {}
        (false, true) => {}
        (false, false) => b.step(Link::Local, Action::Combine { acc: out, src: x }),
    }
    (b, len, tmp_bytes)
}

/// [`crate::scan`]'s hierarchical form, each group below the top in the form the blocking
/// one takes ([`form`]): leaves the offset in [`Buf::Recv`] (rank 0 has none). The totals
/// a one-way leader keeps go into [`Buf::Tmp`] from byte `end`; returns where its use of
/// `Tmp` ends.
fn up_down(
    b: &mut Builder,
    view: &View,
    sub: &Subtrees,
    x: Region,
    len: usize,
    mut end: usize,
) -> usize {
    let out = Region::whole(Buf::Recv, len);
    let tot = Region::whole(Buf::Acc, len);
    let tmp = Region::whole(Buf::Tmp, len);
    let n = view.levels.len();
    let until = below_top(view);
    b.step(Link::Local, Action::Copy { src: x, dst: tot });
    // Where the leader of each group in the one-way form (of two) keeps its own total
    // below the group.
    let mut kept: Vec<Option<Region>> = vec![None; until];
    let mut entry = n;
    for (i, l) in view.levels[..until].iter().enumerate() {
        let link = Link::Level(i);
        let k = l.members.len();
        let form = form(view, len, i);
        if l.me != 0 {
            let leader = l.members[0];
            // Nobody wants the total of the last ranks.
            let sends = wanted(Some(sub.mine()), view.size);
            if form == Form::Doubling {
                doubling_in(b, l, link, tot, out, tmp);
                if l.me + 1 == k && sends {
                    // The group's total: this member's offset inside the group and its
                    // own total (its running total never grew).
                    b.step(Link::Local, Action::Copy { src: out, dst: tmp });
                    b.step(Link::Local, Action::Combine { acc: tmp, src: tot });
                    b.step(
                        link,
                        Action::Send {
                            to: vec![leader],
                            src: tmp,
                        },
                    );
                }
            } else {
                // The total up, and in the same round the offset: whole (rank 0's groups,
                // and the one-way form, where it comes once the leader knows its own) or
                // the part from inside the group (the exchange).
                let up = sends.then(|| {
                    let to = vec![leader];
                    (link, Action::Send { to, src: tot })
                });
                let down = (
                    link,
                    Action::Recv {
                        from: leader,
                        dst: out,
                    },
                );
                b.round(up.into_iter().chain([down]));
            }
            if leader != 0 && form != Form::OneWay {
                // The leader's own offset, sent on its way down.
                let from = leader;
                b.step(link, Action::RecvReduce { from, acc: out });
            }
            entry = i;
            break;
        }
        let wants_last = wanted(sub.under(i, k - 1), view.size);
        if form == Form::Doubling {
            // Recursive doubling among the members: the leader sends its total to the
            // members 1, 2, 4, ... on and gets the group's total from the last member.
            doubling_in(b, l, link, tot, out, tmp);
            if wants_last {
                let from = l.members[k - 1];
                b.step(link, Action::Recv { from, dst: tot });
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
            b.step(Link::Local, Action::Copy { src: tot, dst: own });
            if wants_last {
                let from = l.members[1];
                b.step(link, Action::RecvReduce { from, acc: tot });
            }
            continue;
        }
        for &m in &l.members[1..] {
            let give = (
                link,
                Action::Send {
                    to: vec![m],
                    src: tot,
                },
            );
            if m == l.members[k - 1] && !wants_last {
                b.round([give]);
                continue;
            }
            b.round([give, (link, Action::Recv { from: m, dst: tmp })]);
            b.step(Link::Local, Action::Combine { acc: tot, src: tmp });
        }
    }
    if entry == n && until < n {
        // The top group: an exclusive scan of the members' totals.
        entry = until;
        doubling_in(b, &view.levels[until], Link::Level(until), tot, out, tmp);
    }
    if view.rank != 0 {
        for i in (0..entry.min(until)).rev() {
            let (link, members) = (Link::Level(i), &view.levels[i].members);
            let Some(own) = kept[i] else {
                // The members have the rest from the exchange on the way up.
                b.step(
                    link,
                    Action::Send {
                        to: members[1..].to_vec(),
                        src: out,
                    },
                );
                continue;
            };
            // The member's whole offset: this rank's and its own total below the level.
            b.step(Link::Local, Action::Combine { acc: own, src: out });
            b.step(
                link,
                Action::Send {
                    to: members[1..].to_vec(),
                    src: own,
                },
            );
        }
    }
    end
}

/// The exclusive scan of the members' totals among the members of group `l` by
/// recursive doubling (the top group's, and [`crate::scan`]'s `Form::Doubling` below it,
/// where the leader only sends): the running total in `tot`, what comes in landing in
/// `out` the first time and in `tmp` after.
fn doubling_in(
    b: &mut Builder,
    l: &crate::view::Level,
    link: Link,
    tot: Region,
    out: Region,
    tmp: Region,
) {
    let (k, me) = (l.members.len(), l.me);
    let mut have = false;
    let mut d = 1;
    while d < k {
        let send = (me + d < k).then(|| {
            let to = vec![l.members[me + d]];
            (link, Action::Send { to, src: tot })
        });
        let from = (me >= d).then(|| l.members[me - d]);
        let dst = if have { tmp } else { out };
        let recv = from.map(|from| (link, Action::Recv { from, dst }));
        b.round(send.into_iter().chain(recv));
        if from.is_some() {
            // Into the offset, and into the running total while it is still sent (both
            // read what came in: one round).
            let offset = have.then_some((Link::Local, Action::Combine { acc: out, src: tmp }));
            let total =
                (me + 2 * d < k).then_some((Link::Local, Action::Combine { acc: tot, src: dst }));
            b.round(offset.into_iter().chain(total));
            have = true;
        }
        d *= 2;
    }
}

/// [`crate::scan`]'s recursive doubling over every rank in rank order: in the round of
/// distance `d`, the total of the ranks this one has heard of ([`Buf::Acc`]) goes to the
/// rank `d` on, and the one from the rank `d` back lands in the offset ([`Buf::Recv`]) the
/// first time and in [`Buf::Tmp`]'s first half after, to be added to the offset and to the
/// total.
fn doubling(b: &mut Builder, view: &View, x: Region) {
    let (n, me) = (view.size, view.rank);
    let out = Region::whole(Buf::Recv, x.len);
    let tot = Region::whole(Buf::Acc, x.len);
    let tmp = Region::whole(Buf::Tmp, x.len);
    if n > 1 {
        b.step(Link::Local, Action::Copy { src: x, dst: tot });
    }
    let mut have = false;
    let mut d = 1;
    while d < n {
        let send = (me + d < n).then(|| {
            let to = me + d;
            (
                Link::Peer(to),
                Action::Send {
                    to: vec![to],
                    src: tot,
                },
            )
        });
        let from = me.checked_sub(d);
        let dst = if have { tmp } else { out };
        let recv = from.map(|from| (Link::Peer(from), Action::Recv { from, dst }));
        b.round(send.into_iter().chain(recv));
        if from.is_some() {
            if have {
                b.step(Link::Local, Action::Combine { acc: out, src: tmp });
            }
            // `tot` is sent no more after the last round.
            if 2 * d < n {
                b.step(Link::Local, Action::Combine { acc: tot, src: dst });
            }
            have = true;
        }
        d *= 2;
    }
}
