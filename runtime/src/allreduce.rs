//! Allreduce: the top group's algorithms (recursive doubling, ring) and the two
//! hierarchical variants of coll/tcl, ReduceAllreduceBcast and ReduceBcast.

use topo_hierarchy::settings::{AllreduceAlg, Settings, TopAlg};

use crate::bcast;
use crate::combine::Combine;
use crate::error::Result;
use crate::reduce::{self, Scratch};
use crate::ring::{self, Blocks};
use crate::transport::Transport;
use crate::view::{Fabric, View};

/// Recursive doubling among `members`; every member ends with the full reduction in `acc`.
/// Non-powers of two fold the first `2 * rem` members pairwise first.
pub fn group_allreduce_rd(
    t: &mut dyn Transport,
    members: &[u32],
    me: usize,
    acc: &mut [u8],
    tmp: &mut [u8],
    op: &dyn Combine,
) -> Result<()> {
    let n = members.len();
    let pof2 = 1usize << (usize::BITS - 1 - n.leading_zeros());
    let rem = n - pof2;
    let new_rank = if me < 2 * rem {
        if me.is_multiple_of(2) {
            t.send_to_combine(members[me + 1], acc)?;
            None
        } else {
            t.recv_reduce(members[me - 1], acc, tmp, op)?;
            Some(me / 2)
        }
    } else {
        Some(me - rem)
    };
    if let Some(nr) = new_rank {
        let mut mask = 1;
        while mask < pof2 {
            let peer = nr ^ mask;
            let peer = if peer < rem { peer * 2 + 1 } else { peer + rem };
            t.sendrecv(members[peer], acc, members[peer], tmp)?;
            op.combine(acc, tmp);
            mask <<= 1;
        }
    }
    if me < 2 * rem {
        if me.is_multiple_of(2) {
            t.recv(members[me + 1], acc)?;
        } else {
            t.send(&[members[me - 1]], acc)?;
        }
    }
    Ok(())
}

/// Ring allreduce: reduce-scatter then allgather, each `n - 1` steps moving 1/n of the
/// message. Blocks are whole elements.
pub fn group_allreduce_ring(
    t: &mut dyn Transport,
    members: &[u32],
    me: usize,
    acc: &mut [u8],
    tmp: &mut [u8],
    op: &dyn Combine,
) -> Result<()> {
    let blocks = Blocks::new(acc.len(), members.len(), op.elem_size());
    if !blocks.all_nonempty() {
        return group_allreduce_rd(t, members, me, acc, tmp, op);
    }
    ring::reduce_scatter(t, members, me, blocks, acc, tmp, op)?;
    ring::allgather(t, members, me, blocks, 1, acc)
}

/// Hierarchical allreduce. `send == None` means in place: `recv` holds the contribution.
pub fn allreduce(
    view: &View,
    fabric: &mut dyn Fabric,
    s: &Settings,
    send: Option<&[u8]>,
    recv: &mut [u8],
    op: &dyn Combine,
    scratch: &mut Scratch,
) -> Result<()> {
    let total = recv.len();
    if let Some(sb) = send {
        recv.copy_from_slice(sb);
    }
    if total == 0 || view.size == 1 {
        return Ok(());
    }
    let top_alg = match s.allreduce_for(total) {
        AllreduceAlg::ReduceBcast => None,
        AllreduceAlg::ReduceAllreduceBcast(t) => Some(t),
    };
    let chunk = view.chunk_bytes(s, op.elem_size());
    let n = view.levels.len();
    if n == 0 {
        return Ok(());
    }
    // With ReduceAllreduceBcast the top group's members stop the reduce below the top,
    // allreduce among themselves, then broadcast down from the level below. Everyone else
    // (and every rank with ReduceBcast) goes through all its levels both ways.
    let until = match top_alg {
        Some(_) if view.is_top(n - 1) => n - 1,
        _ => n,
    };
    for acc in recv.chunks_mut(chunk) {
        let (_, tmp) = scratch.pair(acc.len());
        let holds = reduce::up(view, fabric, s, 0, total, until, acc, tmp, op)?;
        if holds && until < n {
            let l = &view.levels[n - 1];
            let t = fabric.level(n - 1);
            match top_alg {
                Some(TopAlg::Ring) => group_allreduce_ring(t, &l.members, l.me, acc, tmp, op)?,
                _ => group_allreduce_rd(t, &l.members, l.me, acc, tmp, op)?,
            }
        }
        bcast::down(view, fabric, s, 0, total, until, acc)?;
    }
    Ok(())
}
