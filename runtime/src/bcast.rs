//! Broadcast: per-level algorithms (flat, k-nomial, scatter-allgather) and the
//! hierarchical broadcast (coll/tcl BcastGroup, top-down), pipelined in chunks.

use topo_hierarchy::settings::{BcastAlg, Collective, Settings};

use crate::error::Result;
use crate::ring::{self, Blocks};
use crate::transport::Transport;
use crate::tree;
use crate::view::{Fabric, View};

/// Broadcasts `buf` from `members[root]` to the group.
pub fn group_bcast(
    t: &mut dyn Transport,
    members: &[u32],
    me: usize,
    root: usize,
    alg: BcastAlg,
    buf: &mut [u8],
) -> Result<()> {
    let n = members.len();
    match alg {
        BcastAlg::Flat => {
            if me == root {
                // The others are a slice of `members` when the root is first or last (a
                // group's leader is first): no list to build on every call.
                match root {
                    0 => t.send(&members[1..], buf),
                    r if r + 1 == n => t.send(&members[..r], buf),
                    _ => {
                        let others: Vec<u32> =
                            (0..n).filter(|&i| i != root).map(|i| members[i]).collect();
                        t.send(&others, buf)
                    }
                }
            } else {
                t.recv(members[root], buf)
            }
        }
        BcastAlg::Knomial(k) => {
            let (parent, children) = tree::knomial(me, root, n, k as usize);
            if let Some(p) = parent {
                t.recv(members[p], buf)?;
            }
            if !children.is_empty() {
                let to: Vec<u32> = children.iter().map(|&c| members[c]).collect();
                t.send(&to, buf)?;
            }
            Ok(())
        }
        BcastAlg::ScatterAllgather => {
            let blocks = Blocks::new(buf.len(), n, 1);
            if !blocks.all_nonempty() {
                return group_bcast(t, members, me, root, BcastAlg::Knomial(2), buf);
            }
            // Member i gets block i from the root, then the ring completes everyone's copy.
            if me == root {
                for i in (0..n).filter(|&i| i != root) {
                    t.send(&[members[i]], &buf[blocks.get(i)])?;
                }
            } else {
                t.recv(members[root], &mut buf[blocks.get(me)])?;
            }
            ring::allgather(t, members, me, blocks, 0, buf)
        }
    }
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
        let alg = s.bcast_for(l.name, l.intra, total);
        let r = l.members.binary_search(&root).unwrap_or(0);
        return group_bcast(fabric.level(0), &l.members, l.me, r, alg, buf);
    }
    let detour = root != 0 && (view.rank == root || view.rank == 0) && !view.top_has(root);
    for piece in buf.chunks_mut(view.chunk_bytes(s, Collective::Bcast, total, 1)) {
        if detour {
            if view.rank == root {
                fabric.direct(0).send(&[0], piece)?;
            } else {
                fabric.direct(root).recv(root, piece)?;
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
        let alg = s.bcast_for(l.name, l.intra, total);
        let r = view.group_root(i, root);
        group_bcast(fabric.level(i), &l.members, l.me, r, alg, piece)?;
    }
    Ok(())
}
