//! `MPI_Comm_split` over a communicator that has a context: the colors and keys gathered
//! through that context, with each rank's kept contexts in the same exchange, then MPI's
//! constructor of each color's group (`abi::create_group`: `MPI_Comm_create` where the
//! parent lies on one node of Open MPI, `MPI_Comm_create_group` elsewhere).
//!
//! MPI's own split gathers every rank's color and key over MPI and then agrees on the new
//! communicator's context id; MPI's `MPI_Comm_create(_group)` does only the second.
//! The gather goes through the parent's context (shared memory inside a node), and the
//! same rows carry what the kept contexts need agreed (`contexts::take_up_kept` makes a
//! second exchange after MPI's split instead). What that saves: docs/runtime.md, "Any
//! communicator".

use super::*;
use topo_hierarchy::settings::KEPT_SEGMENTS;

/// Words of a rank's row: its color, its key, its flags ([`WISH`], [`FULL`]), and the ids
/// of the contexts it kept (two words each, 0 where it kept fewer).
const ROW: usize = 3 + 2 * KEPT_SEGMENTS;
/// The rank's last new communicator began with a nonblocking collective
/// (`State::nonblocking_first`): the new one is set up in this call.
const WISH: u32 = 1;
/// The rank has no room for another segment: the new context goes on the node's lanes.
const FULL: u32 = 2;

/// `MPI_Comm_split(parent, color, key_arg)` through `parent`'s context: MPI's return code
/// and the new communicator (`MPI_COMM_NULL` for `MPI_UNDEFINED`), with its context if its
/// members kept one. `None` where `parent` has no context (or at `MPI_THREAD_MULTIPLE`, or
/// without a plan): then MPI's split, and `contexts::adopt`. The same on every rank of
/// `parent`, which all make this call.
pub(crate) fn split(parent: MPI_Comm, color: c_int, key_arg: c_int) -> Option<(c_int, MPI_Comm)> {
    let mut g = lock();
    let st = g.0.state.as_mut()?;
    let keys = st.kept_keys?;
    if !st.on || st.multiple {
        return None;
    }
    let e = st.contexts.get_mut(&key(parent))?;
    // MPI_Comm_create where the parent lies on one node of Open MPI (docs/runtime.md, "Any
    // communicator").
    let by_create = e.one_node && abi::open_mpi();
    // The world ranks of `parent`'s ranks, where they differ from its ranks.
    let world_ranks = if matches!(e.kind, CommKind::World | CommKind::Duplicate) {
        None
    } else {
        let ranks = e
            .world_ranks
            .get_or_insert_with(|| topo_runtime::ffi::ranks_in(parent, abi::world()).into());
        Some(Arc::clone(ranks))
    };
    let mut offers = keys.offer_all();
    let mut mine = [0u32; ROW];
    mine[0] = color as u32;
    mine[1] = key_arg as u32;
    mine[2] =
        if st.nonblocking_first { WISH } else { 0 } | if st.segments_full() { FULL } else { 0 };
    for (i, id) in offers.ids().enumerate() {
        mine[3 + 2 * i] = id as u32;
        mine[4 + 2 * i] = (id >> 32) as u32;
    }
    let n = abi::comm_size(parent);
    let mut all = vec![0u32; ROW * n];
    let (g, (outcome, _)) = run_in_context(g, None, parent, |a, _| {
        a.topo.all_gather_into(&mine, &mut all);
        Ok(())
    });
    drop(g);
    // (The same outcome on every rank: the gather fails only where the context is gone.)
    outcome.ok()?;
    let row = |p: usize| &all[ROW * p..ROW * p + ROW];
    let undefined = abi::undefined();
    // A color MPI rejects: its split reports it, on every rank alike.
    if (0..n).any(|p| {
        let c = row(p)[0] as c_int;
        c < 0 && c != undefined
    }) {
        return None;
    }
    // The new communicator's ranks in `parent`, ordered by key, then by rank in `parent`
    // (none for `MPI_UNDEFINED`: `abi::create_group` gives `MPI_COMM_NULL`, after taking
    // part in `MPI_Comm_create` where that is the constructor, which every rank of the
    // parent calls).
    let mut ranks: Vec<c_int> = if color == undefined {
        Vec::new()
    } else {
        (0..n as c_int)
            .filter(|&p| row(p as usize)[0] as c_int == color)
            .collect()
    };
    ranks.sort_by_key(|&p| (row(p as usize)[1] as c_int, p));
    let (rc, comm) = abi::create_group(parent, &ranks, by_create);
    if rc != SUCCESS || ranks.len() < 2 {
        return Some((rc, comm));
    }
    let flags = ranks.iter().fold(0, |f, &p| f | row(p as usize)[2]);
    let members: Vec<u32> = match &world_ranks {
        Some(w) => ranks.iter().map(|&p| w[p as usize]).collect(),
        None => ranks.iter().map(|&p| p as u32).collect(),
    };
    // An id every member offered: each of them holds that context, for the same members.
    let offered_by = |p: c_int, id: u64| {
        let r = row(p as usize);
        (0..KEPT_SEGMENTS).any(|i| u64::from(r[3 + 2 * i]) | u64::from(r[4 + 2 * i]) << 32 == id)
    };
    let taken = offers.take_up(&members, flags & FULL != 0, |id| {
        ranks.iter().all(|&p| offered_by(p, id))
    });
    drop(offers);
    match taken {
        Some(topo) => {
            let mut g = lock();
            if let Some(st) = g.0.state.as_mut() {
                // World's ranks in world's order: a duplicate of world.
                let congruent = world_ranks.is_none()
                    && ranks.len() == st.size as usize
                    && ranks.iter().enumerate().all(|(i, &p)| i == p as usize);
                let active = active_as(topo, congruent);
                st.attach(comm, active);
                st.stats.context(Origin::KeptAtCreation);
            }
        }
        None if flags & WISH != 0 => adopt_as(Adoption::SetUpNow, comm),
        None => adopt_as(Adoption::Neither, comm),
    }
    Some((SUCCESS, comm))
}
