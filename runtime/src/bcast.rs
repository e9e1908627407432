//! Broadcast: per-level algorithms (flat, k-nomial, scatter-allgather) and the
//! hierarchical broadcast (coll/tcl BcastGroup, top-down), pipelined in chunks.

use topo_hierarchy::settings::{BcastAlg, Collective, Settings};

use crate::error::Result;
use crate::ring::{self, Blocks};
use crate::transport::Fabric;
use crate::transport::Transport;
use crate::tree;
use crate::view::View;

/// Broadcasts `buf` from `members[root]` to the group.
pub fn group_bcast(
    t: &mut dyn Transport,
    members: &[u32],
    me: usize,
    root: usize,
    alg: BcastAlg,
    buf: &mut [u8],
) -> Result<()> {
    match alg {
        BcastAlg::Flat => flat(t, members, me, root, buf),
        BcastAlg::Knomial(k) => knomial(t, members, me, root, k as usize, buf),
        BcastAlg::ScatterAllgather => scatter_allgather(t, members, me, root, buf),
    }
}

/// The root sends to every other member at once. Inlined: the small broadcast of a
/// one-level job runs nothing else (the other forms stay out of line, so that this one
/// is not slowed by their setup).
#[inline]
fn flat(
    t: &mut dyn Transport,
    members: &[u32],
    me: usize,
    root: usize,
    buf: &mut [u8],
) -> Result<()> {
    let n = members.len();
    if me != root {
        return t.recv(members[root], buf);
    }
    // The others are a slice of `members` when the root is first or last (a group's
    // leader is first): no list to build on every call.
    match root {
        0 => t.send(&members[1..], buf),
        r if r + 1 == n => t.send(&members[..r], buf),
        _ => {
            let others: Vec<u32> = (0..n).filter(|&i| i != root).map(|i| members[i]).collect();
            t.send(&others, buf)
        }
    }
}

/// A k-nomial tree rooted at `root`: receive from the parent, then send to the children.
#[inline(never)]
fn knomial(
    t: &mut dyn Transport,
    members: &[u32],
    me: usize,
    root: usize,
    k: usize,
    buf: &mut [u8],
) -> Result<()> {
    let (parent, children) = tree::knomial(me, root, members.len(), k);
    if let Some(p) = parent {
        t.recv(members[p], buf)?;
    }
    if !children.is_empty() {
        let to: Vec<u32> = children.iter().map(|&c| members[c]).collect();
        t.send(&to, buf)?;
    }
    Ok(())
}

/// Member i gets block i from the root, then the ring completes everyone's copy.
#[inline(never)]
fn scatter_allgather(
    t: &mut dyn Transport,
    members: &[u32],
    me: usize,
    root: usize,
    buf: &mut [u8],
) -> Result<()> {
    let n = members.len();
    let blocks = Blocks::new(buf.len(), n, 1);
    if !blocks.all_nonempty() {
        return knomial(t, members, me, root, 2, buf);
    }
    if me == root {
        for i in (0..n).filter(|&i| i != root) {
            t.send(&[members[i]], &buf[blocks.get(i)])?;
        }
    } else {
        t.recv(members[root], &mut buf[blocks.get(me)])?;
    }
    ring::allgather(t, members, me, blocks, 0, buf)
}

/// Hierarchical broadcast of `buf` from world rank `root`.
///
/// A root in the top group leads it, so the data takes no detour. Any other root first
/// sends each chunk to rank 0, which leads every level (coll/tcl).
pub fn bcast(
    view: &View,
    fabric: &mut dyn Fabric,
    s: &Settings,
    root: u32,
    buf: &mut [u8],
) -> Result<()> {
    let total = buf.len();
    if total == 0 || view.size == 1 {
        return Ok(());
    }
    if let Some(l) = view.only_level() {
        // One group holds the whole job and nothing is pipelined: straight to it.
        let alg = s.bcast_for(l.name, l.intra, l.members.len(), total);
        let r = l.position(root);
        return group_bcast(fabric.level(0), &l.members, l.me, r, alg, buf);
    }
    let detour = root != 0 && (view.rank == root || view.rank == 0) && !view.top_has(root);
    for piece in buf.chunks_mut(view.chunk_bytes(s, Collective::Bcast, total, 1)) {
        if detour {
            if view.rank == root {
                fabric.peer(0).send(&[0], piece)?;
            } else {
                fabric.peer(root).recv(root, piece)?;
            }
        }
        down(view, fabric, s, root, total, view.levels.len(), piece)?;
    }
    Ok(())
}

/// The top-down part: broadcast `piece` through `view.levels[..from]`, highest first.
/// Used by the broadcast and by the allreduce's last phase.
pub(crate) fn down(
    view: &View,
    fabric: &mut dyn Fabric,
    s: &Settings,
    root: u32,
    total: usize,
    from: usize,
    piece: &mut [u8],
) -> Result<()> {
    for i in (0..from).rev() {
        let l = &view.levels[i];
        let alg = s.bcast_for(l.name, l.intra, l.members.len(), total);
        let r = view.group_root(i, root);
        group_bcast(fabric.level(i), &l.members, l.me, r, alg, piece)?;
    }
    Ok(())
}
