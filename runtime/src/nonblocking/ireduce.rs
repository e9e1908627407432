//! Ireduce: the hierarchical reduction as a schedule, bottom-up. Each group's root
//! receives and combines its children's partial results concurrently; a group that takes
//! `reduce-scatter-gather` runs the ring's reduce-scatter and gathers the blocks at its
//! root, as the blocking form does ([`crate::reduce::group_reduce`]).

use topo_hierarchy::Settings;

use topo_hierarchy::settings::ReduceAlg;

use super::{Action, Buf, Builder, Link, Region, reduce_shape};
use crate::ring::Blocks;
use crate::view::View;

/// The steps of this rank's part in a reduction of `len` bytes (elements of `elem` bytes) to
/// world rank `root`. `send`: the contribution is in [`Buf::Send`] (else in place, in
/// [`Buf::Recv`], at the root). Returns the builder and how many bytes of [`Buf::Acc`] it
/// uses.
pub fn build(
    view: &View,
    s: &Settings,
    root: u32,
    send: bool,
    len: usize,
    elem: usize,
) -> (Builder, usize) {
    let mut b = Builder::default();
    if len == 0 {
        return (b, 0);
    }
    let is_root = view.rank == root;
    let detour = root != 0 && (is_root || view.rank == 0) && !view.top_has(root);
    let mine = Region::whole(if send { Buf::Send } else { Buf::Recv }, len);
    // A rank that only sends (a leaf of its lowest group) sends its contribution as it is.
    if send && !is_root && is_leaf(view, s, root, len) {
        up(&mut b, view, s, root, len, elem, view.levels.len(), mine);
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
    let holds = up(&mut b, view, s, root, len, elem, view.levels.len(), acc);
    if detour {
        let whole = Region::whole(Buf::Recv, len);
        if view.rank == 0 && holds {
            b.step(
                Link::Peer(root),
                Action::Send {
                    to: vec![root],
                    src: acc,
                },
            );
        } else if is_root {
            b.step(
                Link::Peer(0),
                Action::Recv {
                    from: 0,
                    dst: whole,
                },
            );
        }
    }
    (b, acc_bytes)
}

/// Whether this rank receives nothing in a reduction to `root` (a member of a
/// reduce-scatter-gather combines its share of the blocks).
fn is_leaf(view: &View, s: &Settings, root: u32, len: usize) -> bool {
    view.levels.first().is_none_or(|l| {
        let alg = s.reduce_for(l.name, l.intra, l.members.len(), len);
        if alg == ReduceAlg::ReduceScatterGather {
            return false;
        }
        let (parent, children) = reduce_shape(alg, l.me, view.group_root(0, root), l.members.len());
        parent.is_some() && children.is_empty()
    })
}

/// Reduces `acc` (elements of `elem` bytes) through `view.levels[..until]`. Returns whether
/// this rank still holds a partial result at the end (it is the group root of every level
/// it passed).
#[allow(clippy::too_many_arguments)]
pub(crate) fn up(
    b: &mut Builder,
    view: &View,
    s: &Settings,
    root: u32,
    total: usize,
    elem: usize,
    until: usize,
    acc: Region,
) -> bool {
    for i in 0..until {
        let l = &view.levels[i];
        let alg = s.reduce_for(l.name, l.intra, l.members.len(), total);
        let r = view.group_root(i, root);
        let blocks = Blocks::new(acc.len, l.members.len(), elem.max(1));
        if alg == ReduceAlg::ReduceScatterGather && blocks.all_nonempty() {
            if !reduce_scatter_gather(b, i, &l.members, l.me, r, blocks, acc) {
                return false;
            }
            continue;
        }
        let (parent, children) = reduce_shape(alg, l.me, r, l.members.len());
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

/// One group's reduce-scatter-gather on level `level`, as [`crate::ring::reduce_scatter`]
/// and the gather of [`crate::reduce::group_reduce`] run it: in step `k` of the ring member
/// `me` sends block `me - k` of `acc` to the next member and combines block `me - k - 1`
/// from the previous one, after which it holds block `me + 1` of the group's result; then
/// every member sends that block to `members[root]`. Returns whether this rank is the root
/// (and holds the group's result).
fn reduce_scatter_gather(
    b: &mut Builder,
    level: usize,
    members: &[u32],
    me: usize,
    root: usize,
    blocks: Blocks,
    acc: Region,
) -> bool {
    let n = members.len();
    let (next, prev) = (members[(me + 1) % n], members[(me + n - 1) % n]);
    let block = |i: usize| {
        let range = blocks.get(i);
        Region {
            buf: acc.buf,
            off: acc.off + range.start,
            len: range.len(),
        }
    };
    for k in 0..n - 1 {
        b.round([
            (
                Link::Level(level),
                Action::Send {
                    to: vec![next],
                    src: block(me + n - k),
                },
            ),
            (
                Link::Level(level),
                Action::RecvReduce {
                    from: prev,
                    acc: block(me + 2 * n - k - 1),
                },
            ),
        ]);
    }
    if me != root {
        let to = vec![members[root]];
        b.step(
            Link::Level(level),
            Action::Send {
                to,
                src: block(me + 1),
            },
        );
        return false;
    }
    b.round((0..n).filter(|&j| j != root).map(|j| {
        let dst = block(j + 1);
        (
            Link::Level(level),
            Action::Recv {
                from: members[j],
                dst,
            },
        )
    }));
    true
}
