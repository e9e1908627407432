//! Scatterv: the root sends each rank a block of a length that only the root and that
//! rank know. Gatherv's way back, in the same two forms ([`RootedVAlg`], setting
//! `rooted-v`):
//!
//! - **through the leaders**, as [`crate::scatter`]: first every rank's length (its
//!   receive count) climbs to the job's top group (`crate::gatherv::lengths_up`, as
//!   Gatherv's), so that every leader knows the lengths of the ranks under its members;
//!   the root knows every length. Then the blocks, one after another in rank order, go
//!   down as a Scatter's. Where the top group is the node leaders', the lengths stay
//!   inside the nodes: between nodes, one message per node, as Scatter's. In a job on
//!   several nodes a block of a Scatter's direct size and more
//!   ([`crate::subtrees::SCATTER_DIRECT_BLOCK`]) goes straight from the root to its rank
//!   first, as a Scatter's blocks of that size do (`crate::gatherv::through_leaders`).
//! - **direct**: the root sends each rank its block straight (the linear Scatterv of Open
//!   MPI and MPICH): all at once in a job on several nodes; on one node one after another
//!   over shared memory (as Gatherv's), but the blocks of
//!   [`crate::subtrees::ONE_NODE_SCATTER_DIRECT_BLOCK`] bytes and more all at once after
//!   the others (each rank knows which its own is), the root copying its own block while
//!   they leave.
//!
//! Where the root's buffer holds the blocks one after another from its start, the
//! leaders' form sends straight out of it; otherwise the root first packs them in scratch.
//! Empty blocks are not sent.

use std::ops::Range;

use topo_hierarchy::Settings;
use topo_hierarchy::settings::RootedVAlg;

use crate::alltoall::{exchange, exchange_meanwhile};
use crate::error::Result;
use crate::gatherv::{ends_of, laid_out, lengths_up, through_leaders};
use crate::scatter::scatter_blocks;
use crate::subtrees::{Blocks, Subtrees, direct};
use crate::transport::Fabric;
use crate::view::View;

const CALL: &str = "MPI_Scatterv";

/// The root's side of a Scatterv: its buffer and the place of each rank's block in it.
pub type Source<'a> = (&'a [u8], &'a [Range<usize>]);

/// Scatters the root's blocks: rank r receives `send.0[send.1[r]]` into `recv`. `send` is
/// `Some` at the root only; `recv` is `None` at the root in place (it keeps its block
/// where it is). The caller has checked that the root's ranges lie in its buffer and that
/// its `recv` has its length.
#[allow(clippy::too_many_arguments)]
pub fn scatterv(
    view: &View,
    fabric: &mut dyn Fabric,
    sub: &Subtrees,
    s: &Settings,
    root: u32,
    send: Option<Source>,
    recv: Option<&mut [u8]>,
    scratch: &mut Vec<u8>,
) -> Result<()> {
    let me = view.rank as usize;
    match send {
        None => {
            let block = recv.expect("a rank other than the root passes its buffer");
            if view.size == 1 {
                return Ok(());
            }
            match s.rooted_v_alg() {
                RootedVAlg::Direct if block.is_empty() => Ok(()),
                // (A large block comes at once with the others, as the root sends it.)
                RootedVAlg::Direct if s.nodes == 1 && !direct(false, 1, block.len()) => {
                    fabric.peer(root).recv(root, block)
                }
                RootedVAlg::Direct => exchange(fabric, s.spin, None, &[], &mut [(root, block)]),
                RootedVAlg::Leaders => {
                    let lens = lengths_up(view, fabric, sub, root, block.len(), None, CALL)?;
                    let small = through_leaders(false, s.nodes, root, &lens);
                    let own: &mut [u8] = if small[me] == block.len() {
                        block
                    } else {
                        exchange(fabric, s.spin, None, &[], &mut [(root, block)])?;
                        &mut []
                    };
                    let ends = ends_of(&small);
                    let blocks = Blocks::Ends(&ends);
                    scatter_blocks(view, fabric, sub, s, root, None, Some(own), blocks)
                }
            }
        }
        Some((buf, at)) => {
            let own = &buf[at[me].clone()];
            let mut recv = recv;
            if view.size == 1 {
                if let Some(r) = recv {
                    r.copy_from_slice(own);
                }
                return Ok(());
            }
            // The root copies its own block while the others' leave, where they leave at once.
            let copy = |recv| copy_into(recv, own);
            if s.rooted_v_alg() == RootedVAlg::Direct {
                let others = || (0..at.len()).filter(|&r| r != me && !at[r].is_empty());
                if s.nodes == 1 && !others().any(|r| direct(false, 1, at[r].len())) {
                    // One node, small blocks only: one after another, in rank order (with
                    // nothing to collect first: this is a small call's whole time).
                    if let Some(r) = recv {
                        r.copy_from_slice(own);
                    }
                    for r in others() {
                        fabric
                            .peer(r as u32)
                            .send(&[r as u32], &buf[at[r].clone()])?;
                    }
                    return Ok(());
                }
                let to: Vec<(u32, &[u8])> =
                    others().map(|r| (r as u32, &buf[at[r].clone()])).collect();
                if s.nodes > 1 {
                    return exchange_meanwhile(fabric, s.spin, None, &to, &mut [], copy(recv));
                }
                // One node: the small blocks one after another, in rank order; then the
                // large ones (each rank knows which its own is) all at once, the root
                // copying its own block while they leave.
                let (large, small): (Vec<_>, Vec<_>) =
                    to.into_iter().partition(|(_, b)| direct(false, 1, b.len()));
                for (r, block) in small {
                    fabric.peer(r).send(&[r], block)?;
                }
                return exchange_meanwhile(fabric, s.spin, None, &large, &mut [], copy(recv));
            }
            let counts: Vec<usize> = at.iter().map(Range::len).collect();
            let lens = lengths_up(view, fabric, sub, root, counts[me], Some(&counts), CALL)?;
            let small = through_leaders(false, s.nodes, root, &lens);
            let straight = small != lens;
            if straight {
                // The large blocks first, straight from their places, the root copying its
                // own while they leave.
                let to: Vec<(u32, &[u8])> = (0..at.len())
                    .filter(|&r| small[r] != lens[r])
                    .map(|r| (r as u32, &buf[at[r].clone()]))
                    .collect();
                exchange_meanwhile(fabric, s.spin, None, &to, &mut [], copy(recv.take()))?;
            } else if let Some(r) = recv.take() {
                r.copy_from_slice(own);
            }
            let ends = ends_of(&small);
            let blocks = Blocks::Ends(&ends);
            let work: &[u8] = if !straight && laid_out(at, &ends) {
                &buf[..ends.last().copied().unwrap_or(0)]
            } else {
                scratch.clear();
                for (_, a) in at.iter().enumerate().filter(|&(r, _)| small[r] == lens[r]) {
                    scratch.extend_from_slice(&buf[a.clone()]);
                }
                scratch
            };
            // (The root's own block is in `recv` already, or stays in place.)
            scatter_blocks(view, fabric, sub, s, root, Some(work), None, blocks)
        }
    }
}

/// The copy of `own` into `recv`, to run later, if there is a `recv`.
fn copy_into<'a>(recv: Option<&'a mut [u8]>, own: &'a [u8]) -> Option<impl FnOnce() + 'a> {
    recv.map(|r| move || r.copy_from_slice(own))
}
