//! Scatterv: the root sends each rank a block of a length that only the root and that
//! rank know. Gatherv's way back, in the same two forms ([`RootedVAlg`], setting
//! `rooted-v`):
//!
//! - **through the leaders**, as [`crate::scatter`]: first the lengths go down, a Scatter
//!   of one 8-byte number per rank, so that every leader knows the lengths of the ranks
//!   under its members (and each rank checks its own against its count); then the blocks,
//!   one after another in rank order, go down as a Scatter's. Between nodes, one message
//!   per node in each step.
//! - **direct**: the root sends each rank its block straight, all at once (the linear
//!   Scatterv of Open MPI and MPICH).
//!
//! Where the root's buffer holds the blocks one after another from its start, the
//! leaders' form sends straight out of it; otherwise the root first packs them in scratch.
//! Empty blocks are not sent.

use std::ops::Range;

use topo_hierarchy::Settings;
use topo_hierarchy::settings::RootedVAlg;

use crate::alltoall::exchange;
use crate::error::{Error, Result};
use crate::gatherv::{ends_of, laid_out, lengths_in};
use crate::scatter::scatter_kept;
use crate::subtrees::{Blocks, Subtrees};
use crate::transport::Fabric;
use crate::view::View;

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
    let size = view.size as usize;
    match send {
        None => {
            let block = recv.expect("a rank other than the root passes its buffer");
            if view.size == 1 {
                return Ok(());
            }
            match s.rooted_v_alg() {
                RootedVAlg::Direct if block.is_empty() => Ok(()),
                RootedVAlg::Direct => exchange(fabric, s.spin, None, &[], &mut [(root, block)]),
                RootedVAlg::Leaders => {
                    let mut mine = [0u8; 8];
                    let known = scatter_kept(
                        view,
                        fabric,
                        sub,
                        s,
                        root,
                        None,
                        Some(&mut mine),
                        Blocks::Same(8),
                    )?;
                    let len = u64::from_le_bytes(mine) as usize;
                    if len != block.len() {
                        return Err(Error::Mismatch {
                            reason: format!(
                                "MPI_Scatterv: the root sends rank {me} {len} bytes where \
                                 its count gives {}",
                                block.len()
                            ),
                        });
                    }
                    let lens = lengths_in(known.as_deref(), me, len, size);
                    let ends = ends_of(&lens);
                    let blocks = Blocks::Ends(&ends);
                    scatter_kept(view, fabric, sub, s, root, None, Some(block), blocks).map(drop)
                }
            }
        }
        Some((buf, at)) => {
            if let Some(r) = recv {
                r.copy_from_slice(&buf[at[me].clone()]);
            }
            if view.size == 1 {
                return Ok(());
            }
            if s.rooted_v_alg() == RootedVAlg::Direct {
                let to: Vec<(u32, &[u8])> = at
                    .iter()
                    .enumerate()
                    .filter(|(r, a)| *r != me && !a.is_empty())
                    .map(|(r, a)| (r as u32, &buf[a.clone()]))
                    .collect();
                return exchange(fabric, s.spin, None, &to, &mut []);
            }
            let lens: Vec<usize> = at.iter().map(Range::len).collect();
            let numbers: Vec<u8> = lens
                .iter()
                .flat_map(|&l| (l as u64).to_le_bytes())
                .collect();
            scatter_kept(
                view,
                fabric,
                sub,
                s,
                root,
                Some(&numbers),
                None,
                Blocks::Same(8),
            )?;
            let ends = ends_of(&lens);
            let blocks = Blocks::Ends(&ends);
            let work: &[u8] = if laid_out(at, &ends) {
                &buf[..ends.last().copied().unwrap_or(0)]
            } else {
                scratch.clear();
                for a in at {
                    scratch.extend_from_slice(&buf[a.clone()]);
                }
                scratch
            };
            // (The root's own block is in `recv` already, or stays in place.)
            scatter_kept(view, fabric, sub, s, root, Some(work), None, blocks).map(drop)
        }
    }
}
