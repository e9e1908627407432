//! Allreduce: the top group's algorithms (recursive doubling, ring) and the two
//! hierarchical variants of coll/tcl, ReduceAllreduceBcast and ReduceBcast.

use topo_hierarchy::settings::{AllreduceAlg, Collective, Settings, TopAlg};

use crate::bcast;
use crate::combine::Combine;
use crate::error::Result;
use crate::reduce::{self, Scratch};
use crate::ring::{self, Blocks};
use crate::transport::Fabric;
use crate::transport::Transport;
use crate::view::View;

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

/// [`group_allreduce_rd`] with `acc` not yet holding this member's contribution `own`: in
/// a group whose size is a power of two, the first exchange sends `own` and takes the
/// partner's message onto it ([`Transport::sendrecv_onto`]), which saves copying `own`
/// to `acc` and the partner's message to scratch.
pub fn group_allreduce_rd_onto(
    t: &mut dyn Transport,
    members: &[u32],
    me: usize,
    acc: &mut [u8],
    own: &[u8],
    tmp: &mut [u8],
    op: &dyn Combine,
) -> Result<()> {
    let n = members.len();
    if n < 2 || !n.is_power_of_two() {
        acc.copy_from_slice(own);
        return group_allreduce_rd(t, members, me, acc, tmp, op);
    }
    // The exchanges of `group_allreduce_rd` for a power of two, the first onto `own`.
    let peer = members[me ^ 1];
    t.sendrecv_onto(peer, own, peer, acc, own, tmp, op)?;
    let mut mask = 2;
    while mask < n {
        let peer = members[me ^ mask];
        t.sendrecv(peer, acc, peer, tmp)?;
        op.combine(acc, tmp);
        mask <<= 1;
    }
    Ok(())
}

/// Below this many bytes (the whole message) a top group of two inside a node runs
/// recursive doubling where the ring was asked for: its one exchange of the whole message beat the ring's two of half on 1 node x 2,
/// on a shared L3 and across dies (64-512 KiB: 0.72-0.90 of Open MPI's time against
/// 0.92-1.59, docs/runtime.md); from 1 MiB the ring's halved combining evens it out.
/// Between two nodes over TCP it lost at 64 KiB (the ring's 32 KiB halves go eagerly, a
/// 64 KiB message does not) though it won from 128 KiB, so there the rules decide.
pub const PAIR_RD_BELOW: usize = 1 << 20;

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

/// The view an allreduce of `bytes` runs on: with recursive doubling among the top group,
/// `network` ([`View::over_network`]), whose network part is one recursive doubling
/// among the node leaders, with no climb through the switch levels; with the ring (large
/// messages) `view`, whose pipelined reduce and broadcast through the switch levels keep
/// the ring's group small.
pub fn view_for<'a>(view: &'a View, network: &'a View, s: &Settings, bytes: usize) -> &'a View {
    match s.allreduce_for(bytes) {
        AllreduceAlg::ReduceAllreduceBcast(TopAlg::Ring)
        | AllreduceAlg::Ring
        | AllreduceAlg::Rabenseifner(_) => view,
        _ => network,
    }
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
    if total == 0 || view.size == 1 {
        if let Some(sb) = send {
            recv.copy_from_slice(sb);
        }
        return Ok(());
    }
    let top_alg = match s.allreduce_for(total) {
        AllreduceAlg::ReduceBcast => None,
        AllreduceAlg::ReduceAllreduceBcast(t) => Some(t),
        // The flat forms run as schedules over every rank (`Topo::raw_all_reduce`); a
        // caller without their order gets the hierarchical ring for the same sizes.
        AllreduceAlg::Ring | AllreduceAlg::Rabenseifner(_) => Some(TopAlg::Ring),
        AllreduceAlg::RecursiveDoubling => Some(TopAlg::RecursiveDoubling),
    };
    let chunk = view.chunk_bytes(s, Collective::Allreduce, total, op.elem_size());
    let n = view.levels.len();
    if n == 0 {
        if let Some(sb) = send {
            recv.copy_from_slice(sb);
        }
        return Ok(());
    }
    // With ReduceAllreduceBcast the top group's members stop the reduce below the top,
    // allreduce among themselves, then broadcast down from the level below. Everyone else
    // (and every rank with ReduceBcast) goes through all its levels both ways.
    let until = match top_alg {
        Some(_) if view.is_top(n - 1) => n - 1,
        _ => n,
    };
    // A top group of two inside a node takes recursive doubling below PAIR_RD_BELOW
    // whatever was asked.
    let top = &view.levels[n - 1];
    let pair_rd = top.intra && top.members.len() == 2 && total < PAIR_RD_BELOW;
    let rd = matches!(top_alg, Some(TopAlg::RecursiveDoubling)) || (top_alg.is_some() && pair_rd);
    // A rank whose only level is the top group, running recursive doubling there, takes
    // its first exchange onto its send buffer; everyone else starts from a copy.
    let onto = send.filter(|_| until == 0 && rd);
    if let (Some(sb), None) = (send, onto) {
        recv.copy_from_slice(sb);
    }
    let mut off = 0;
    for acc in recv.chunks_mut(chunk) {
        let (_, tmp) = scratch.pair(acc.len());
        if let Some(sb) = onto {
            let own = &sb[off..off + acc.len()];
            off += acc.len();
            let l = &view.levels[n - 1];
            group_allreduce_rd_onto(fabric.level(n - 1), &l.members, l.me, acc, own, tmp, op)?;
            continue;
        }
        let holds = reduce::up(view, fabric, s, 0, total, until, acc, tmp, op)?;
        if holds && until < n {
            let l = &view.levels[n - 1];
            let t = fabric.level(n - 1);
            if rd {
                group_allreduce_rd(t, &l.members, l.me, acc, tmp, op)?;
            } else {
                group_allreduce_ring(t, &l.members, l.me, acc, tmp, op)?;
            }
        }
        bcast::down(view, fabric, s, 0, total, until, acc)?;
    }
    Ok(())
}
