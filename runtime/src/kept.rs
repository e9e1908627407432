//! Contexts kept for the next communicator over the same members.
//!
//! Setting a context up is mostly the node's segment (1.7 ms of 2.1 ms on 1 node x 2:
//! reserving the queues' pages in `/dev/shm`, mapping them, three agreements) and two
//! communicators of topo-run's own, and programs make the same communicators again and
//! again (BLACS splits and frees its rows and columns around every operation). So a
//! context over any communicator but world, when it is dropped (idle: its collectives have
//! completed), leaves itself here whole: its private communicator and its state, with the
//! hierarchical path in it (the node's queues, the network transport, the schedules'
//! choices). The next context over the same members in the same order, with the same
//! settings, takes it up where it was left, nothing built again, as if the first context
//! had lived on, once every member has agreed that it kept the same one (`Topo::init`, or
//! the caller through [`crate::KeptOffer`] and [`crate::KeptOffers`]); otherwise it sets a
//! new one up.
//!
//! At most [`KEPT_SEGMENTS`] contexts are kept per process, the oldest dropped first (its segment
//! unmapped, its communicators freed); with the live contexts' segments (at most
//! `TOPO_RUN_MAX_COMMS` in the PMPI library) they bound the process's share of
//! `/dev/shm`.

use std::collections::VecDeque;
use std::sync::Mutex;

use mpi::topology::SimpleCommunicator;

use topo_hierarchy::settings::KEPT_SEGMENTS;

use crate::context::Shared;

/// A context kept: the members and settings it serves (`key`), which context it is (`id`,
/// the same on every member), how many contexts used it before, and its parts.
pub(crate) struct Kept {
    pub(crate) key: u64,
    pub(crate) id: u64,
    pub(crate) earlier: u32,
    pub(crate) world: SimpleCommunicator,
    /// The context's state, idle, with its hierarchical path.
    pub(crate) core: Shared,
    /// This rank's node, and its rank and the member count there.
    pub(crate) node: String,
    pub(crate) local: Option<(u32, u32)>,
    /// Whether a progress thread advances the context's collectives.
    pub(crate) thread: bool,
}

// SAFETY: a kept context is idle (nothing in flight, no buffer of a caller's in it): what
// it holds are MPI handles (process-wide values) and the mapping of a node segment
// (process-wide memory), as in `ContextState`, which is `Send` for the same reason. It is
// used again only by a context that a thread sets up as MPI's thread level allows.
unsafe impl Send for Kept {}

static CONTEXTS: Mutex<VecDeque<Kept>> = Mutex::new(VecDeque::new());

fn kept() -> std::sync::MutexGuard<'static, VecDeque<Kept>> {
    CONTEXTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Keeps an idle context; the oldest kept one goes if there are [`KEPT_SEGMENTS`] already.
pub(crate) fn keep(k: Kept) {
    let dropped = {
        let mut all = kept();
        all.push_back(k);
        if all.len() > KEPT_SEGMENTS {
            all.pop_front()
        } else {
            None
        }
    };
    // Freed outside the lock (its communicators, its segment's mapping).
    drop(dropped);
}

/// Takes the context kept last for `key`, if any. Give it back with [`keep`] if the
/// members do not all have it.
pub(crate) fn take(key: u64) -> Option<Kept> {
    let mut all = kept();
    let i = all.iter().rposition(|k| k.key == key)?;
    all.remove(i)
}

/// Takes every kept context, oldest first. Give those not taken up back with [`keep`], in
/// that order.
pub(crate) fn take_all() -> Vec<Kept> {
    kept().drain(..).collect()
}

/// Drops every kept context (their communicators freed, their segments unmapped): call it
/// before MPI is finalized.
pub fn clear() {
    let all = std::mem::take(&mut *kept());
    drop(all);
}
