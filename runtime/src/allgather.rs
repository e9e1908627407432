//! Allgather, hierarchical (TopoMPI's first form): every rank's block travels bottom-up
//! through the plan's levels, each group's leader collecting its members' blocks tagged
//! with their ranks, until rank 0, which leads every level, holds them all; then the whole
//! result goes down the hierarchy as a broadcast from rank 0 does. A block crosses a node or
//! switch boundary once on the way up (inside its leader's message), and the whole result
//! once per group on the way down: few messages between nodes, though not the fewest
//! bytes (TopoMPI's remapped recursive doubling, not built yet, is the form for that).
//!
//! A member's message to its leader is its count of blocks (4 bytes), then the ranks
//! (4 bytes each, little-endian) and the blocks, packed: the leader cannot know which ranks
//! a member's subtree holds, since a rank's plan lists only its own groups.
//!
//! [`recursive_doubling`] is TopoMPI's second form: recursive doubling over the whole job
//! with the ranks remapped (`topo_hierarchy::remap`) so that its heavy last steps stay
//! inside nodes, each exchange over the link that reaches the partner directly.

use topo_hierarchy::Settings;
use topo_hierarchy::remap::RdPeers;

use crate::bcast;
use crate::error::{Error, Result};
use crate::view::{Fabric, View};

/// Gathers every rank's block into `recv` on every rank: rank r's block lands at
/// `recv[r * len..(r + 1) * len]`, `len = recv.len() / size`. `send` is this rank's block,
/// or `None` when it is in place already.
pub fn allgather(
    view: &View,
    fabric: &mut dyn Fabric,
    s: &Settings,
    send: Option<&[u8]>,
    recv: &mut [u8],
) -> Result<()> {
    let size = view.size as usize;
    let len = recv.len() / size;
    let at = |r: u32| r as usize * len..(r as usize + 1) * len;
    if let Some(b) = send {
        recv[at(view.rank)].copy_from_slice(b);
    }
    if len == 0 || size == 1 {
        return Ok(());
    }
    // Up: the ranks whose blocks this rank holds.
    let mut held = vec![view.rank];
    let mut from = view.levels.len();
    for (i, l) in view.levels.iter().enumerate() {
        let t = fabric.level(i);
        if l.me != 0 {
            let mut packed = Vec::with_capacity(held.len() * (4 + len));
            for &r in &held {
                packed.extend_from_slice(&r.to_le_bytes());
            }
            for &r in &held {
                packed.extend_from_slice(&recv[at(r)]);
            }
            let leader = l.members[0];
            t.send(&[leader], &(held.len() as u32).to_le_bytes())?;
            t.send(&[leader], &packed)?;
            from = i + 1;
            break;
        }
        for &m in &l.members[1..] {
            let mut count = [0u8; 4];
            t.recv(m, &mut count)?;
            let count = u32::from_le_bytes(count) as usize;
            if count == 0 || count > size {
                return Err(bad(m, format!("{count} blocks")));
            }
            let mut packed = vec![0u8; count * (4 + len)];
            t.recv(m, &mut packed)?;
            let (ranks, blocks) = packed.split_at(count * 4);
            for (k, r) in ranks.chunks_exact(4).enumerate() {
                let r = u32::from_le_bytes(r.try_into().expect("4 bytes"));
                if r >= view.size {
                    return Err(bad(m, format!("a block of rank {r}")));
                }
                recv[at(r)].copy_from_slice(&blocks[k * len..(k + 1) * len]);
                held.push(r);
            }
        }
    }
    // Down: the whole result, as a broadcast from rank 0, in the broadcast's chunks.
    let total = recv.len();
    for piece in recv.chunks_mut(view.chunk_bytes(s, 1)) {
        bcast::down(view, fabric, s, 0, total, from, piece)?;
    }
    Ok(())
}

/// Recursive doubling ("exch." form) over all `n = 2^L` ranks of the job, this rank being
/// `rank` with its remapped `peers`: first this rank's block goes to the rank at position
/// `rank` while the block of rank `peers.position` arrives; then at step `k` the partner
/// and this rank swap the `2^k` blocks each holds, which lie side by side in `recv` at the
/// aligned run of `2^k` positions around each one's position. `send` is this rank's
/// block, or `None` when it is in place already.
pub fn recursive_doubling(
    fabric: &mut dyn Fabric,
    rank: u32,
    peers: &RdPeers,
    send: Option<&[u8]>,
    recv: &mut [u8],
) -> Result<()> {
    let n = 1usize << peers.partners.len();
    let len = recv.len() / n;
    let at = |q: usize| q * len..(q + 1) * len;
    if let Some(b) = send {
        recv[at(rank as usize)].copy_from_slice(b);
    }
    if len == 0 || n == 1 {
        return Ok(());
    }
    let p = peers.position as usize;
    if p != rank as usize {
        // The first exchange is a permutation whose cycles may be long, and `to` and
        // `from` may be reached by different links: a send and a receive, the send first
        // where `rank < to`. Every cycle has a rank that receives first (its largest) and
        // one that sends first (its smallest), so the sends complete one after another.
        let own = recv[at(rank as usize)].to_vec();
        let (to, from) = (peers.send_own_to, peers.start_from);
        if rank < to {
            fabric.direct(to).send(&[to], &own)?;
            fabric.direct(from).recv(from, &mut recv[at(p)])?;
        } else {
            fabric.direct(from).recv(from, &mut recv[at(p)])?;
            fabric.direct(to).send(&[to], &own)?;
        }
    }
    for (k, &partner) in peers.partners.iter().enumerate() {
        let width = 1usize << k;
        let mine = p & !(width - 1);
        let theirs = mine ^ width;
        let (lo, hi) = recv.split_at_mut(mine.max(theirs) * len);
        let (data, buf) = if mine < theirs {
            (
                &lo[mine * len..(mine + width) * len],
                &mut hi[..width * len],
            )
        } else {
            (
                &hi[..width * len],
                &mut lo[theirs * len..(theirs + width) * len],
            )
        };
        fabric
            .direct(partner)
            .sendrecv(partner, data, partner, buf)?;
    }
    Ok(())
}

/// A member's gather message that cannot be right (the ranks called different
/// collectives or counts).
fn bad(from: u32, what: String) -> Error {
    Error::Mismatch {
        reason: format!(
            "rank {from} sent {what} to an allgather; the ranks called different collectives \
             or counts"
        ),
    }
}
