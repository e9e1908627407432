//! Ibcast: the hierarchical broadcast as a schedule, top-down.

use topo_hierarchy::Settings;

use super::{Action, Buf, Builder, Link, Region, bcast_shape};
use crate::view::View;

/// The steps of this rank's part in a broadcast of `len` bytes (in [`Buf::Recv`]) from
/// world rank `root`. A root outside the top group first sends to rank 0 (coll/tcl).
pub fn build(view: &View, s: &Settings, root: u32, len: usize) -> Builder {
    let mut b = Builder::default();
    if len == 0 || view.size == 1 {
        return b;
    }
    let whole = Region::whole(Buf::Recv, len);
    if root != 0 && !view.top_has(root) {
        if view.rank == root {
            let send = Action::Send {
                to: vec![0],
                src: whole,
            };
            b.step(Link::Peer(0), send);
        } else if view.rank == 0 {
            let recv = Action::Recv {
                from: root,
                dst: whole,
            };
            b.step(Link::Peer(root), recv);
        }
    }
    down(&mut b, view, s, root, len, view.levels.len(), whole);
    b
}

/// Broadcasts `region` through `view.levels[..from]`, highest first (also the allreduce's
/// last phase).
pub(crate) fn down(
    b: &mut Builder,
    view: &View,
    s: &Settings,
    root: u32,
    total: usize,
    from: usize,
    region: Region,
) {
    for i in (0..from).rev() {
        let l = &view.levels[i];
        let alg = s.bcast_for(l.name, l.intra, l.members.len(), total);
        let (parent, children) = bcast_shape(alg, l.me, view.group_root(i, root), l.members.len());
        if let Some(p) = parent {
            let from = l.members[p];
            b.step(Link::Level(i), Action::Recv { from, dst: region });
        }
        if !children.is_empty() {
            let to = children.iter().map(|&c| l.members[c]).collect();
            b.step(Link::Level(i), Action::Send { to, src: region });
        }
    }
}
