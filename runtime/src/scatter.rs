//! Scatter, hierarchical: Gather's way back. The root's place in the job's top group (the
//! root itself if it is a member, else the member it is under, its node's leader say, to
//! which the root first hands every block) sends each other member the blocks under it in
//! one message; then
//! each leader, level by level down, sends each member of its group the blocks under that
//! member ([`Subtrees`]), until every rank has its own. So each node receives one message
//! from outside it, which carries every block of its ranks.
//!
//! Inside a group the leader sends to its members one after another, in their order.
//! Blocks under a member that are consecutive ranks travel straight out of their places
//! in the leader's buffer; others travel packed in rank order. Blocks of
//! [`crate::subtrees::SCATTER_DIRECT_BLOCK`] bytes and more, in a job on more than one node, go
//! straight from the root to every rank instead, all at once (on one node, from
//! [`crate::subtrees::ONE_NODE_SCATTER_DIRECT_BLOCK`]), the root copying its own block
//! while they leave.

use topo_hierarchy::Settings;

use crate::error::Result;
use crate::subtrees::{
    Blocks, Subtrees, below_top, direct, piece_for, recv_blocks, root_exchange, send_blocks,
    with_root,
};
use crate::transport::Fabric;
use crate::view::View;

/// Scatters the root's `send` (every rank's `len`-byte block by rank, `size * len` bytes;
/// `Some` at the root only): rank r receives `send[r * len..(r + 1) * len]` into `recv`.
/// `recv` is `None` at the root when it keeps its block in `send` (in place). `sub` is
/// what the context learned ([`Subtrees::learn`]); `s` are the context's
/// settings.
#[allow(clippy::too_many_arguments)]
pub fn scatter(
    view: &View,
    fabric: &mut dyn Fabric,
    sub: &Subtrees,
    s: &Settings,
    root: u32,
    send: Option<&[u8]>,
    recv: Option<&mut [u8]>,
    len: usize,
) -> Result<()> {
    scatter_blocks(view, fabric, sub, s, root, send, recv, Blocks::Same(len))
}

/// [`scatter`] of blocks laid out as `blocks` (of lengths that every rank knows of the
/// ranks under it, the root of all): rank r receives `send[blocks.at(r)]`. Blocks of
/// different lengths always go through the leaders.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_blocks(
    view: &View,
    fabric: &mut dyn Fabric,
    sub: &Subtrees,
    s: &Settings,
    root: u32,
    send: Option<&[u8]>,
    recv: Option<&mut [u8]>,
    blocks: Blocks,
) -> Result<()> {
    let size = view.size as usize;
    let me = view.rank;
    let at = |r: u32| blocks.at(r);
    let total = at(view.size - 1).end;
    if total == 0 {
        return Ok(());
    }
    if size == 1 {
        if let (Some(s), Some(r)) = (send, recv) {
            r.copy_from_slice(&s[at(me)]);
        }
        return Ok(());
    }
    if let Blocks::Same(len) = blocks
        && direct(false, s.nodes, len)
    {
        if me != root {
            let recv = recv.expect("a rank other than the root passes its buffer");
            return with_root(fabric, s.spin, root, false, |link, t| {
                link.poll_recv(t, root, recv, None)
            });
        }
        let send = send.expect("the root passes its blocks");
        // The root copies its own block while the others' leave.
        let copy = recv.map(|r| || r.copy_from_slice(&send[at(me)]));
        return root_exchange(
            view,
            fabric,
            s.spin,
            true,
            |link, r, t| link.poll_send(t, &[r], &send[at(r)]),
            copy,
        );
    }
    let n = view.levels.len();
    let until = below_top(view);
    let entry = sub.entry();
    let holder = (until < n).then(|| sub.over(until, root)).flatten();
    let holds_top = until < n && entry == until && Some(view.levels[until].me) == holder;
    // A root below the top group first hands every block to the member it is under (rank
    // 0 without a top group), which scatters them.
    let detour_to = (me == root && sub.top() != root).then(|| sub.top());
    let detour_from = (me != root && (holds_top || entry == n)).then_some(root);
    // A rank under nobody receives its own block alone, straight into `recv`.
    if sub.mine().len() == 1 && !holds_top && entry < n && detour_to.is_none() {
        let recv = recv.expect("a rank other than the root passes its buffer");
        let from = match holder {
            Some(h) if entry == until => view.levels[until].members[h],
            _ => view.levels[entry].members[0],
        };
        let t = fabric.level(entry);
        for p in recv.chunks_mut(piece_for(view, entry)) {
            t.recv(from, p)?;
        }
        return Ok(());
    }
    // The blocks this rank passes on: the root's, or (received) a buffer of its own.
    let mut own: Vec<u8> = Vec::new();
    let mut held: Option<&[u8]> = if detour_to.is_some() { None } else { send };
    if let Some(to) = detour_to {
        let all = send.expect("the root passes its blocks");
        fabric.peer(to).send(&[to], all)?;
    } else if let Some(from) = detour_from {
        own = vec![0u8; total];
        fabric.peer(from).recv(from, &mut own)?;
    }
    if held.is_none() && !own.is_empty() {
        held = Some(&own);
    }
    let mut got: Vec<u8>;
    if held.is_none() {
        // Everything under this rank, from its leader (or the top group's holder).
        got = vec![0u8; total];
        if entry < until {
            let l = &view.levels[entry];
            let (t, piece) = (fabric.level(entry), piece_for(view, entry));
            recv_blocks(t, l.members[0], sub.mine(), &mut got, blocks, piece)?;
        } else if let Some(h) = holder {
            let l = &view.levels[until];
            let (t, piece) = (fabric.level(until), piece_for(view, until));
            recv_blocks(t, l.members[h], sub.mine(), &mut got, blocks, piece)?;
        }
        held = Some(&got);
    }
    let all = held.expect("this rank holds its blocks");
    if holds_top {
        let l = &view.levels[until];
        let piece = piece_for(view, until);
        let t = fabric.level(until);
        for p in (0..l.members.len()).filter(|&p| Some(p) != holder) {
            let ranks = sub
                .under(until, p)
                .expect("the top group knows its members");
            send_blocks(t, l.members[p], ranks, all, blocks, piece)?;
        }
    }
    // Down the levels this rank leads.
    for i in (0..entry.min(until)).rev() {
        let l = &view.levels[i];
        let piece = piece_for(view, i);
        let t = fabric.level(i);
        for p in 1..l.members.len() {
            let ranks = sub.under(i, p).expect("a leader knows its members' ranks");
            send_blocks(t, l.members[p], ranks, all, blocks, piece)?;
        }
    }
    if let Some(r) = recv {
        r.copy_from_slice(&all[at(me)]);
    }
    Ok(())
}
