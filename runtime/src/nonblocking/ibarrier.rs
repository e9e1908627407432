//! Ibarrier: empty messages up the hierarchy, a dissemination barrier among the top group
//! (as the blocking barrier), then down again, as one schedule (run with an operation that
//! combines nothing).

use topo_hierarchy::Settings;

use super::{Action, Buf, Builder, Link, Region, ibcast, ireduce};
use crate::view::View;

/// The steps of this rank's part in a barrier. A rank belongs to the groups above its
/// lowest one only as their leader, so it goes through all its levels both ways.
pub fn build(view: &View, s: &Settings) -> Builder {
    let mut b = Builder::default();
    let nothing = Region::whole(Buf::Acc, 0);
    let n = view.levels.len();
    if n == 0 || !view.is_top(n - 1) {
        ireduce::up(&mut b, view, s, 0, 0, n, nothing);
        ibcast::down(&mut b, view, s, 0, 0, n, nothing);
        return b;
    }
    // A member of the top group leads every group below it.
    let top = n - 1;
    ireduce::up(&mut b, view, s, 0, 0, top, nothing);
    let l = &view.levels[top];
    let m = l.members.len();
    let (mut d, mut round) = (1, 0);
    while d < m {
        let to = l.members[(l.me + d) % m];
        let from = l.members[(l.me + m - d) % m];
        b.step(Link::Level(top), Action::Signal { round, to, from });
        d *= 2;
        round += 1;
    }
    ibcast::down(&mut b, view, s, 0, 0, top, nothing);
    b
}
