//! Ibarrier: empty messages up the hierarchy, a dissemination barrier among the top group
//! (as the blocking barrier), then down again, as one schedule (run with an operation that
//! combines nothing); or, with `barrier = flat`, a dissemination over every rank with the
//! nodes interleaved ([`build_flat`]), blocking and nonblocking alike.

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
        ireduce::up(&mut b, view, s, 0, 0, 1, n, nothing);
        ibcast::down(&mut b, view, s, 0, 0, n, nothing);
        return b;
    }
    // A member of the top group leads every group below it.
    let top = n - 1;
    ireduce::up(&mut b, view, s, 0, 0, 1, top, nothing);
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

/// The flat barrier: a dissemination over every rank, this rank's `rounds` (whom it
/// signals and whom it hears from, [`topo_hierarchy::remap::dissemination_peers`] on
/// [`topo_hierarchy::remap::interleaved_positions`]), each an empty message sent and one
/// received over the link that reaches that rank directly. The send and the receive of a
/// round share it, as the matching receive and send of the other ranks do.
pub fn build_flat(rounds: &[(u32, u32)]) -> Builder {
    let mut b = Builder::default();
    let nothing = Region::whole(Buf::Acc, 0);
    for &(to, from) in rounds {
        b.round([
            (
                Link::Peer(to),
                Action::Send {
                    to: vec![to],
                    src: nothing,
                },
            ),
            (Link::Peer(from), Action::Recv { from, dst: nothing }),
        ]);
    }
    b
}
