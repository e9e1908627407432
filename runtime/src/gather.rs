//! Gather, hierarchical: every rank's block climbs the plan's levels as the Allgather's
//! first part climbs them, each group's leader receiving the blocks under each member in
//! one message (the leader knows which ranks they are: [`Subtrees`]), up to the job's top
//! group, whose members send theirs to the root's place there: the root itself if it is a
//! member, else the member it is under (its node's leader, say), which then hands the
//! whole result to the root. So each node sends one message out of it (a leaf switch's
//! one out of the switch, and so on), which carries every block of its ranks.
//!
//! Inside a group the leader receives from its members one after another (the form of
//! Open MPI's linear gather, in the members' order). Blocks under a member that are
//! consecutive ranks (a node's, with block placement) travel straight into their places
//! in the leader's buffer; others travel packed in rank order and are put in place on
//! arrival. Blocks of [`crate::subtrees::GATHER_DIRECT_BLOCK`] bytes and more, in a job on more
//! than one node, go straight from every rank to the root instead, all at once. On one
//! node, blocks of [`crate::subtrees::ONE_NODE_GATHER_WRITTEN_BLOCK`] bytes and more are written by their
//! ranks straight into the root's buffer while the root copies its own.

use topo_hierarchy::Settings;

use crate::error::Result;
use crate::subtrees::{
    Blocks, Subtrees, below_top, direct, lent_to_root, piece_for, recv_blocks, root_exchange,
    send_blocks, with_root, written,
};
use crate::transport::Fabric;
use crate::view::View;

/// Gathers every rank's `len`-byte block into `recv` at `root`: rank r's block lands at
/// `recv[r * len..(r + 1) * len]`. `send` is this rank's block, or `None` at the root when
/// its block is in `recv` already (in place). `recv` is `Some` at the root only, of
/// `size * len` bytes. `sub` is what the context learned ([`Subtrees::learn`]); `s` are
/// the context's settings.
#[allow(clippy::too_many_arguments)]
pub fn gather(
    view: &View,
    fabric: &mut dyn Fabric,
    sub: &Subtrees,
    s: &Settings,
    root: u32,
    send: Option<&[u8]>,
    recv: Option<&mut [u8]>,
    len: usize,
) -> Result<()> {
    gather_blocks(view, fabric, sub, s, root, send, recv, Blocks::Same(len))
}

/// [`gather`] of blocks laid out as `blocks` (of any lengths, which every rank knows of the
/// ranks under it, the root of all): rank r's block lands at `recv[blocks.at(r)]`. Blocks
/// of different lengths always go through the leaders.
#[allow(clippy::too_many_arguments)]
pub fn gather_blocks(
    view: &View,
    fabric: &mut dyn Fabric,
    sub: &Subtrees,
    s: &Settings,
    root: u32,
    send: Option<&[u8]>,
    mut recv: Option<&mut [u8]>,
    blocks: Blocks,
) -> Result<()> {
    let size = view.size as usize;
    let me = view.rank;
    let at = |r: u32| blocks.at(r);
    let total = at(view.size - 1).end;
    let straight = match blocks {
        Blocks::Same(len) => (total > 0 && size > 1 && direct(true, s.nodes, len)).then_some(len),
        _ => None,
    };
    if let Blocks::Same(len) = blocks
        && s.nodes == 1
        && size > 1
        && written(len)
    {
        return match recv {
            Some(all) => {
                let mut parts: Vec<(u32, &mut [u8])> = (0..).zip(all.chunks_mut(len)).collect();
                let (_, own) = parts.remove(me as usize);
                lent_to_root(fabric, &mut parts, |_| {
                    if let Some(b) = send {
                        own.copy_from_slice(b);
                    }
                    Ok(())
                })
            }
            None => {
                let block = send.expect("a rank other than the root passes its block");
                fabric.peer(root).write_into(root, block)
            }
        };
    }
    if let Some(len) = straight {
        return match recv {
            Some(all) => {
                // The root copies its own block while the others' arrive.
                let mut parts: Vec<Option<&mut [u8]>> = all.chunks_mut(len).map(Some).collect();
                let own = parts[me as usize].take().expect("the root's own place");
                let copy = send.map(|b| move || own.copy_from_slice(b));
                root_exchange(
                    view,
                    fabric,
                    s.spin,
                    false,
                    |link, r, t| {
                        let part = parts[r as usize].as_deref_mut();
                        link.poll_recv(t, r, part.expect("another rank's place"), None)
                    },
                    copy,
                )
            }
            None => {
                let block = send.expect("a rank other than the root passes its block");
                with_root(fabric, s.spin, root, true, |link, t| {
                    link.poll_send(t, &[root], block)
                })
            }
        };
    }
    if let (Some(r), Some(b)) = (recv.as_deref_mut(), send) {
        r[at(me)].copy_from_slice(b);
    }
    if total == 0 || size == 1 {
        return Ok(());
    }
    let n = view.levels.len();
    let until = below_top(view);
    let entry = sub.entry();
    // The root's place in the top group: the member the root is under (see the module's
    // doc), known to every member there.
    let holder = (until < n).then(|| sub.over(until, root)).flatten();
    let holds_top = until < n && entry == until && Some(view.levels[until].me) == holder;
    // Where this rank's blocks are: the root's buffer, or (a rank that receives blocks
    // of others) a buffer of its own, by rank; a rank under nobody sends its block alone.
    let receives = recv.is_some() || sub.mine().len() > 1 || holds_top || entry == n;
    if !receives {
        let block = send.expect("a rank other than the root passes its block");
        let to = match holder {
            Some(h) if entry == until => view.levels[until].members[h],
            _ => view.levels[entry].members[0],
        };
        let t = fabric.level(entry);
        for p in block.chunks(piece_for(view, entry)) {
            t.send(&[to], p)?;
        }
        return Ok(());
    }
    let mut own: Vec<u8>;
    let buf: &mut [u8] = match recv {
        Some(r) => r,
        None => {
            own = vec![0u8; total];
            if let Some(b) = send {
                own[at(me)].copy_from_slice(b);
            }
            &mut own
        }
    };
    // Up to the level where this rank hands its blocks on.
    for i in 0..entry.min(until) {
        let l = &view.levels[i];
        let t = fabric.level(i);
        for p in 1..l.members.len() {
            let ranks = sub.under(i, p).expect("a leader knows its members' ranks");
            recv_blocks(t, l.members[p], ranks, buf, blocks, piece_for(view, i))?;
        }
    }
    if entry < until {
        // A member below the top: everything under it to its leader, in one message.
        let l = &view.levels[entry];
        let piece = piece_for(view, entry);
        send_blocks(
            fabric.level(entry),
            l.members[0],
            sub.mine(),
            buf,
            blocks,
            piece,
        )?;
    } else if until < n {
        // The top group: every member's blocks to the root's place in it.
        let l = &view.levels[until];
        let holder = holder.expect("a top group");
        let piece = piece_for(view, until);
        let t = fabric.level(until);
        if l.me != holder {
            send_blocks(t, l.members[holder], sub.mine(), buf, blocks, piece)?;
        } else {
            for p in (0..l.members.len()).filter(|&p| p != holder) {
                let ranks = sub
                    .under(until, p)
                    .expect("the top group knows its members");
                recv_blocks(t, l.members[p], ranks, buf, blocks, piece)?;
            }
        }
    }
    // A root below the top group gets everything from the member it is under (rank 0
    // without a top group), which holds it now.
    if me == root && sub.top() != root {
        fabric.peer(sub.top()).recv(sub.top(), buf)?;
    } else if me != root && (holds_top || entry == n) {
        fabric.peer(root).send(&[root], buf)?;
    }
    Ok(())
}
