//! Allgatherv: every rank's block, of a length every rank knows, lands at its place on
//! every rank. Gatherv then Bcast (the form of Open MPI's basic Allgatherv): the blocks
//! climb the hierarchy to rank 0 as a Gather's do ([`crate::gather::gather_blocks`], one
//! message out of each node), laid out one after another in rank order, and the whole
//! result goes down by the hierarchical broadcast ([`crate::bcast`], pipelined in its
//! chunks). Where the receive buffer holds the blocks one after another in rank order from
//! its start (the usual displacements), the collective works in it; otherwise in scratch,
//! from which each block is copied to its place at the end.

use std::ops::Range;

use topo_hierarchy::Settings;

use crate::bcast;
use crate::error::Result;
use crate::gather::gather_blocks;
use crate::subtrees::{Blocks, Subtrees};
use crate::transport::Fabric;
use crate::view::View;

/// Rank r's block lands at `recv[at[r]]` on every rank. `send` is this rank's block, or
/// `None` when it is in place (at `recv[at[rank]]`). `scratch` holds the blocks where
/// `at` does not lay them out one after another from 0. The caller has checked that the
/// ranges lie in `recv` and that `send` has this rank's length.
#[allow(clippy::too_many_arguments)]
pub fn allgatherv(
    view: &View,
    fabric: &mut dyn Fabric,
    sub: &Subtrees,
    s: &Settings,
    send: Option<&[u8]>,
    recv: &mut [u8],
    at: &[Range<usize>],
    scratch: &mut Vec<u8>,
) -> Result<()> {
    let me = view.rank as usize;
    let mut ends = Vec::with_capacity(at.len());
    let mut total = 0;
    for r in at {
        total += r.len();
        ends.push(total);
    }
    // (An empty block may sit anywhere.)
    let packed = at
        .iter()
        .zip(&ends)
        .all(|(r, &end)| r.is_empty() || r.end == end);
    let own: Vec<u8>;
    let mine: Option<&[u8]> = match send {
        Some(b) => Some(b),
        // In place at rank 0 of a packed buffer, the block is where the Gather puts it.
        None if packed && me == 0 => None,
        None => {
            own = recv[at[me].clone()].to_vec();
            Some(&own)
        }
    };
    let work: &mut [u8] = if packed {
        &mut recv[..total]
    } else {
        scratch.resize(total, 0);
        &mut scratch[..]
    };
    let blocks = Blocks::Ends(&ends);
    let root_buf = (me == 0).then_some(&mut *work);
    gather_blocks(view, fabric, sub, s, 0, mine, root_buf, blocks)?;
    if total > 0 {
        bcast::bcast(view, fabric, s, 0, work)?;
    }
    if !packed {
        for (r, place) in at.iter().enumerate() {
            recv[place.clone()].copy_from_slice(&scratch[blocks.at(r as u32)]);
        }
    }
    Ok(())
}
