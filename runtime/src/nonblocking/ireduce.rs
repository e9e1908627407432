//! Ireduce: the hierarchical reduction as a schedule, bottom-up. Each group's root
//! receives and combines its children's partial results concurrently.

use topo_hierarchy::Settings;

use super::{Action, Buf, Builder, Link, Region, reduce_shape};
use crate::view::View;

/// The steps of this rank's part in a reduction of `len` bytes to world rank `root`.
/// `send`: the contribution is in [`Buf::Send`] (else in place, in [`Buf::Recv`], at the
/// root). Returns the builder and how many bytes of [`Buf::Acc`] it uses.
pub fn build(view: &View, s: &Settings, root: u32, send: bool, len: usize) -> (Builder, usize) {
    let mut b = Builder::default();
    if len == 0 {
        return (b, 0);
    }
    let is_root = view.rank == root;
    let detour = root != 0 && (is_root || view.rank == 0) && !view.top_has(root);
    let mine = Region::whole(if send { Buf::Send } else { Buf::Recv }, len);
    // A rank that only sends (a leaf of its lowest group) sends its contribution as it is.
    if send && !is_root && is_leaf(view, s, root, len) {
        up(&mut b, view, s, root, len, view.levels.len(), mine);
        return (b, 0);
    }
    let (acc, acc_bytes) = if is_root && !detour {
        (Region::whole(Buf::Recv, len), 0)
    } else {
        (Region::whole(Buf::Acc, len), len)
    };
    if mine.buf != acc.buf {
        b.step(
            Link::Local,
            Action::Copy {
                src: mine,
                dst: acc,
            },
        );
    }
    let holds = up(&mut b, view, s, root, len, view.levels.len(), acc);
    if detour {
        let whole = Region::whole(Buf::Recv, len);
        if view.rank == 0 && holds {
            b.step(
                Link::Direct(root),
                Action::Send {
                    to: vec![root],
                    src: acc,
                },
            );
        } else if is_root {
            b.step(
                Link::Direct(0),
                Action::Recv {
                    from: 0,
                    dst: whole,
                },
            );
        }
    }
    (b, acc_bytes)
}

/// Whether this rank receives nothing in a reduction to `root`.
fn is_leaf(view: &View, s: &Settings, root: u32, len: usize) -> bool {
    view.levels.first().is_none_or(|l| {
        let alg = s.reduce_for(l.name, l.intra, len);
        let (parent, children) = reduce_shape(alg, l.me, view.group_root(0, root), l.members.len());
        parent.is_some() && children.is_empty()
    })
}

/// Reduces `acc` through `view.levels[..until]`. Returns whether this rank still holds a
/// partial result at the end (it is the group root of every level it passed).
pub(crate) fn up(
    b: &mut Builder,
    view: &View,
    s: &Settings,
    root: u32,
    total: usize,
    until: usize,
    acc: Region,
) -> bool {
    for i in 0..until {
        let l = &view.levels[i];
        let alg = s.reduce_for(l.name, l.intra, total);
        let (parent, children) = reduce_shape(alg, l.me, view.group_root(i, root), l.members.len());
        b.round(children.iter().map(|&c| {
            let from = l.members[c];
            (Link::Level(i), Action::RecvReduce { from, acc })
        }));
        if let Some(p) = parent {
            let to = vec![l.members[p]];
            b.step(Link::Level(i), Action::Send { to, src: acc });
            return false;
        }
    }
    true
}
