//! Reduce_scatter_block: the hierarchical Reduce to rank 0, then the hierarchical Scatter
//! of the result's blocks from rank 0 (MPI's reduce-then-scatter, each half along the
//! hierarchy: one message out of each node on the way up, one into it on the way down,
//! whatever the placement). Only commutative operations come here.
//!
//! (Reduce_scatter, whose blocks differ in length, runs as an Allreduce of which each
//! rank keeps its part: `Topo::raw_reduce_scatter`.)

use topo_hierarchy::Settings;

use crate::combine::Combine;
use crate::error::Result;
use crate::reduce::{self, Scratch};
use crate::scatter;
use crate::subtrees::Subtrees;
use crate::transport::Fabric;
use crate::view::View;

/// Reduces every rank's `size * block` bytes with `op` and leaves block r of the result
/// at rank r: in `recv` (`block` bytes) with `send` (`size * block` bytes), or in place
/// (`send` `None`) at the start of `recv`, which holds the contribution (`size * block`
/// bytes) and keeps the rest of it as it was (as Open MPI's does, and mpi4py's tests
/// check). `sub` is what the context learned for Gather and Scatter; `full` is scratch
/// for rank 0's whole result, kept between calls.
#[allow(clippy::too_many_arguments)]
pub fn reduce_scatter_block(
    view: &View,
    fabric: &mut dyn Fabric,
    sub: &Subtrees,
    s: &Settings,
    send: Option<&[u8]>,
    recv: &mut [u8],
    block: usize,
    op: &dyn Combine,
    scratch: &mut Scratch,
    full: &mut Vec<u8>,
) -> Result<()> {
    let total = block * view.size as usize;
    if block == 0 {
        return Ok(());
    }
    if view.rank == 0 {
        let mine: &[u8] = match send {
            Some(sb) => sb,
            None => &recv[..total],
        };
        full.resize(total, 0);
        reduce::reduce(
            view,
            fabric,
            s,
            0,
            Some(mine),
            Some(&mut full[..]),
            op,
            scratch,
        )?;
        let mine = Some(&mut recv[..block]);
        scatter::scatter(view, fabric, sub, s, 0, Some(&full[..]), mine, block)
    } else {
        let mine: &[u8] = match send {
            Some(sb) => sb,
            None => &recv[..total],
        };
        reduce::reduce(view, fabric, s, 0, Some(mine), None, op, scratch)?;
        scatter::scatter(
            view,
            fabric,
            sub,
            s,
            0,
            None,
            Some(&mut recv[..block]),
            block,
        )
    }
}
