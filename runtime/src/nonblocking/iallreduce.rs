//! Iallreduce: reduce up the hierarchy, then (ReduceAllreduceBcast) recursive doubling
//! among the top group or (ReduceBcast) nothing, then broadcast down, as one schedule.

use topo_hierarchy::Settings;
use topo_hierarchy::settings::AllreduceAlg;

use super::{Action, Buf, Builder, Link, Region, ibcast, ireduce};
use crate::view::View;

/// The steps of this rank's part in an allreduce of `len` bytes into [`Buf::Recv`]
/// (`send`: the contribution is in [`Buf::Send`], else in place). Returns the builder and
/// how many bytes of [`Buf::Tmp`] it uses.
pub fn build(view: &View, s: &Settings, send: bool, len: usize) -> (Builder, usize) {
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
    let top_exchange = matches!(s.allreduce_for(len), AllreduceAlg::ReduceAllreduceBcast(_));
    let until = if top_exchange && view.is_top(n - 1) {
        n - 1
    } else {
        n
    };
    let holds = ireduce::up(&mut b, view, s, 0, len, until, acc);
    let mut tmp = 0;
    if holds && until < n {
        let l = &view.levels[n - 1];
        recursive_doubling(&mut b, n - 1, &l.members, l.me, acc);
        tmp = len;
    }
    ibcast::down(&mut b, view, s, 0, len, until, acc);
    (b, tmp)
}

/// Recursive doubling among `members` on level `level`; every member ends with the full
/// reduction in `acc`. Non-powers of two fold the first `2 * rem` members pairwise first.
fn recursive_doubling(b: &mut Builder, level: usize, members: &[u32], me: usize, acc: Region) {
    let link = Link::Level(level);
    let tmp = Region {
        buf: Buf::Tmp,
        ..acc
    };
    let n = members.len();
    let pof2 = 1usize << (usize::BITS - 1 - n.leading_zeros());
    let rem = n - pof2;
    let folded_out = me < 2 * rem && me.is_multiple_of(2);
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
        let mut mask = 1;
        while mask < pof2 {
            let peer = nr ^ mask;
            let peer = members[if peer < rem { peer * 2 + 1 } else { peer + rem }];
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
            mask <<= 1;
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
}
