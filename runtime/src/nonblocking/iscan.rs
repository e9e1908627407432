//! Iscan and Iexscan: the steps of [`crate::scan`] as a schedule, in either form (the
//! hierarchy's up and down passes, or recursive doubling over the ranks).
//!
//! Buffers: the contribution is in [`Buf::Send`], or in place in [`Buf::Recv`], from
//! which it is first copied to [`Buf::Tmp`]'s second half (the offset lands in `Recv`).
//! [`Buf::Acc`] is the running total of the ranks under this one (or, doubling, of the
//! ranks this one has heard of), and [`Buf::Tmp`]'s first half takes what comes in.

use super::{Action, Buf, Builder, Link, Region};
use crate::scan::doubling_at;
use crate::view::View;

/// The steps of this rank's part in a Scan (`exclusive` false) or Exscan of `len` bytes,
/// hierarchical or by recursive doubling ([`crate::scan::in_order`]'s answer). `send`: the
/// contribution is in [`Buf::Send`] (else in place, in [`Buf::Recv`]). Returns the builder
/// and how many bytes of [`Buf::Acc`] and [`Buf::Tmp`] it uses.
pub fn build(
    view: &View,
    hierarchical: bool,
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
    let (x, tmp_bytes) = if send {
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
    if hierarchical {
        up_down(&mut b, view, x, len);
    } else {
        doubling(&mut b, view, x);
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

/// [`crate::scan`]'s hierarchical form: leaves the offset in [`Buf::Recv`] (rank 0 has
/// none).
fn up_down(b: &mut Builder, view: &View, x: Region, len: usize) {
    let out = Region::whole(Buf::Recv, len);
    let tot = Region::whole(Buf::Acc, len);
    let tmp = Region::whole(Buf::Tmp, len);
    let n = view.levels.len();
    let until = if n > 0 && view.is_top(n - 1) {
        n - 1
    } else {
        n
    };
    b.step(Link::Local, Action::Copy { src: x, dst: tot });
    let mut entry = n;
    for (i, l) in view.levels[..until].iter().enumerate() {
        let link = Link::Level(i);
        let k = l.members.len();
        if doubling_at(k, len) {
            // Recursive doubling among the members (`crate::scan`'s `Form::Doubling`):
            // the leader sends its total to the members 1, 2, 4, ... on and gets the
            // group's total from the last member; the members get the leader's offset
            // after (but in rank 0's groups).
            if l.me == 0 {
                let mut d = 1;
                while d < k {
                    let to = vec![l.members[d]];
                    b.step(link, Action::Send { to, src: tot });
                    d *= 2;
                }
                let from = l.members[k - 1];
                b.step(link, Action::Recv { from, dst: tot });
                continue;
            }
            let me = l.me;
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
                    if have {
                        b.step(Link::Local, Action::Combine { acc: out, src: tmp });
                    }
                    if me + 2 * d < k {
                        b.step(Link::Local, Action::Combine { acc: tot, src: dst });
                    }
                    have = true;
                }
                d *= 2;
            }
            let leader = l.members[0];
            if me + 1 == k {
                // The group's total: this member's offset inside the group and its own
                // total (its running total never grew).
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
            if leader != 0 {
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
        if l.me != 0 {
            let leader = l.members[0];
            b.round([
                (
                    link,
                    Action::Send {
                        to: vec![leader],
                        src: tot,
                    },
                ),
                (
                    link,
                    Action::Recv {
                        from: leader,
                        dst: out,
                    },
                ),
            ]);
            if leader != 0 {
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
        for &m in &l.members[1..] {
            b.round([
                (
                    link,
                    Action::Send {
                        to: vec![m],
                        src: tot,
                    },
                ),
                (link, Action::Recv { from: m, dst: tmp }),
            ]);
            b.step(Link::Local, Action::Combine { acc: tot, src: tmp });
        }
    }
    if entry == n && until < n {
        entry = until;
        let l = &view.levels[until];
        let link = Link::Level(until);
        let (k, me) = (l.members.len(), l.me);
        let mut have = false;
        let mut d = 1;
        while d < k {
            let mut round = Vec::new();
            if me + d < k {
                let to = vec![l.members[me + d]];
                round.push((link, Action::Send { to, src: tot }));
            }
            if me >= d {
                let from = l.members[me - d];
                round.push((link, Action::Recv { from, dst: tmp }));
            }
            b.round(round);
            if me >= d {
                let mut local = vec![if have {
                    (Link::Local, Action::Combine { acc: out, src: tmp })
                } else {
                    (Link::Local, Action::Copy { src: tmp, dst: out })
                }];
                have = true;
                if 2 * d < k {
                    local.push((Link::Local, Action::Combine { acc: tot, src: tmp }));
                }
                b.round(local);
            }
            d *= 2;
        }
    }
    if view.rank != 0 {
        for i in (0..entry.min(until)).rev() {
            let to = view.levels[i].members[1..].to_vec();
            b.step(Link::Level(i), Action::Send { to, src: out });
        }
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
