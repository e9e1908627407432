//! Barrier: empty messages up the hierarchy, a dissemination barrier among the top group
//! (in round k each member signals the member 2^k places on and hears from the one 2^k
//! places back, so ceil(log2 n) one-way latencies instead of the 2 log n of a gather and a
//! release), then down again.
//!
//! With `barrier = root-first` the top group gathers to its first member, which then
//! releases the others: that member leaves one transfer before them, at the cost of one
//! more transfer per barrier. A broadcast from it right after the barrier (OSU's loop)
//! then finds its data waiting at the receivers, as with Open MPI's coll/sm; with the
//! dissemination the last rank to arrive leaves first and waits inside the broadcast.

use topo_hierarchy::settings::{BarrierAlg, Settings};

use crate::bcast::group_bcast;
use crate::combine::FnCombine;
use crate::error::Result;
use crate::reduce::group_reduce;
use crate::transport::Fabric;
use crate::transport::Transport;
use crate::view::View;

/// Returns once every rank has entered the barrier.
pub fn barrier(view: &View, fabric: &mut dyn Fabric, s: &Settings) -> Result<()> {
    if let Some(l) = view.only_level() {
        // One group holds the whole job: its meeting is the barrier.
        return top(fabric.level(0), &l.members, l.me, s.barrier_alg());
    }
    let nothing = FnCombine {
        elem: 1,
        f: |_: &mut [u8], _: &[u8]| {},
    };
    let mut highest = view.levels.len();
    for (i, l) in view.levels.iter().enumerate() {
        if view.is_top(i) {
            top(fabric.level(i), &l.members, l.me, s.barrier_alg())?;
            highest = i;
            break;
        }
        let alg = s.reduce_for(l.name, l.intra, l.members.len(), 0);
        group_reduce(
            fabric.level(i),
            &l.members,
            l.me,
            0,
            alg,
            &mut [],
            &mut [],
            &nothing,
        )?;
        if l.me != 0 {
            highest = i + 1;
            break;
        }
    }
    for i in (0..highest).rev() {
        let l = &view.levels[i];
        let alg = s.bcast_for(l.name, l.intra, l.members.len(), 0);
        group_bcast(fabric.level(i), &l.members, l.me, 0, alg, &mut [])?;
    }
    Ok(())
}

/// The top group's barrier among `members` (this rank is `members[me]`). The flat barrier
/// runs as a schedule over every rank (`Topo::raw_barrier`); a caller without its order
/// gets the dissemination.
fn top(t: &mut dyn Transport, members: &[u32], me: usize, alg: BarrierAlg) -> Result<()> {
    match alg {
        BarrierAlg::Dissemination | BarrierAlg::Flat => dissemination(t, members, me),
        BarrierAlg::RootFirst => t.root_first_barrier(members, me),
    }
}

/// The dissemination barrier among `members` (this rank is `members[me]`).
fn dissemination(t: &mut dyn Transport, members: &[u32], me: usize) -> Result<()> {
    let n = members.len();
    let (mut d, mut round) = (1, 0);
    while d < n {
        let to = members[(me + d) % n];
        let from = members[(me + n - d) % n];
        t.signal(round, to, from)?;
        d *= 2;
        round += 1;
    }
    Ok(())
}
