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
