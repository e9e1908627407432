//! The context an application holds: [`Topo::from_env`] reads the plan, checks it against
//! MPI and across ranks, sets up the node's shared memory, and the collective methods
//! (named as in rsmpi) run the hierarchical algorithms or hand the call to MPI.
//!
//! This module holds the context and its small accessors; `setup.rs` makes it,
//! `blocking.rs` and `immediate.rs` are the typed collectives (blocking and
//! nonblocking), `raw.rs` and the `raw_immediate_*` methods the byte-level entry points of
//! the PMPI library, `start.rs` starts a nonblocking collective's schedule,
//! `exchanges.rs` works out the flat exchanges' peers, and `measure.rs` the measurements
//! of `topo-run simulate --calibrate`.

mod blocking;
mod comm;
pub use comm::MPICH_CONTEXTS;
mod exchanges;
mod immediate;
mod measure;
mod raw;
mod reuse;
pub use reuse::{KeptKeys, KeptOffer, KeptOffers};
mod setup;
mod start;

use crate::ffi::comm::{pmpi_allgather_u32, pmpi_allreduce_i32, pmpi_bcast, private};

use mpi::collective::{CommunicatorCollectives, Operation, Root, SystemOperation};
use mpi::datatype::Equivalence;
use mpi::raw::AsRaw;
use mpi::topology::{Communicator, SimpleCommunicator};
use topo_hierarchy::{PLAN_ENV, RankPlan, Settings};

use std::marker::PhantomData;

pub use crate::context::ABORT_CODE;
use crate::context::Exchanges;
use crate::context::{self, ContextState, HierarchicalPath, Locked, Shared, abort};
use crate::error::{Error, Result};
use crate::links::Links;
use crate::nonblocking::iallgather::Order;
use crate::plain::{self, MpiCombine};
use crate::reduce::Scratch;
use crate::transport::Transport;
use crate::transport::mpi::MpiTransport;
use crate::transport::shm::{Layout, Segment, ShmTransport};
use crate::view::View;
use crate::{
    allgather, allgatherv, allreduce, alltoall, barrier, bcast, gather, gatherv, reduce,
    reduce_scatter, scan, scatter, scatterv,
};
use topo_hierarchy::remap;
use topo_hierarchy::remap::halving::HalvingOrder;
use topo_hierarchy::remap::partition::Placement;
use topo_hierarchy::settings::{AllgatherAlg, AllreduceAlg, BarrierAlg, TopAlg};

/// Where the node segments live (`TOPO_RUN_SHM_DIR`, default `/dev/shm`).
pub const SHM_DIR_ENV: &str = "TOPO_RUN_SHM_DIR";

/// Why the collectives go to MPI's own implementation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fallback {
    /// The program was not started by topo-run.
    NoPlan,
    /// Shared memory could not be set up on some node.
    NoSharedMemory,
}

/// What a context is set up over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// World, or a communicator congruent to it, with its own segment.
    World,
    /// Any intracommunicator (the job's plan restricted to it), with its own segment.
    Restricted,
    /// Any intracommunicator, on the node's lanes (`crate::lane`).
    Lanes,
}

/// topo-run's collectives for one MPI job (the world communicator).
///
/// Drop it before MPI is finalized (before the `Universe`). Dropping it completes every
/// nonblocking collective still in flight.
pub struct Topo {
    pub(crate) world: SimpleCommunicator,
    pub(crate) core: Shared,
    fallback: Option<Fallback>,
    node: String,
    local: Option<(u32, u32)>,
    /// Whether a progress thread advances this context's collectives.
    thread: bool,
    /// This rank in `world` (asked of MPI once, not on every call).
    rank: i32,
    /// The last reduction of a predefined operation on a predefined type, reused while
    /// calls keep the same pair (see [`MpiCombine::reuse`]).
    combine: Option<MpiCombine>,
    /// The members and settings this context serves, and which context it is: set for a
    /// context over any communicator but world, kept when it is dropped (`crate::kept`).
    lineage: Option<(u64, u64)>,
    /// How many contexts used this one's parts before it (taken up from `crate::kept`).
    earlier: u32,
    /// Not `Send`: without a progress thread the state's lock is a plain flag, which
    /// relies on one thread using the context (and its requests, also not `Send`).
    _not_send: PhantomData<*const ()>,
}

impl Drop for Topo {
    fn drop(&mut self) {
        let hierarchical = self.quiesced().hier.is_some();
        // Idle now: a context over other members than world's is kept, whole, for the
        // next context over the same ones (`crate::kept`).
        if let (true, Some((key, id))) = (hierarchical, self.lineage) {
            let world = std::mem::replace(&mut self.world, SimpleCommunicator::world());
            crate::kept::keep(crate::kept::Kept {
                key,
                id,
                earlier: self.earlier + 1,
                world,
                core: std::sync::Arc::clone(&self.core),
                node: std::mem::take(&mut self.node),
                local: self.local,
                thread: self.thread,
            });
        }
    }
}

impl std::fmt::Debug for Topo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topo")
            .field("rank", &self.world.rank())
            .field("hierarchical", &self.is_hierarchical())
            .field("fallback", &self.fallback)
            .finish()
    }
}

// The agreements at init call the profiling entry points (`PMPI_*`), not rsmpi's
// collectives, because the PMPI library sets this context up from inside its own
// `MPI_Init`, where `MPI_Bcast` and `MPI_Allreduce` are its own.

/// A nonblocking collective in flight failed while a blocking call waited for it: the
/// error, named after that collective.
#[cold]
#[inline(never)]
fn failed(core: Locked<'_>, e: crate::Error) -> ! {
    core.fail(e)
}

impl Topo {
    /// The shared state, after every nonblocking collective in flight has completed (a
    /// blocking call must not overtake them).
    ///
    /// Inlined into every collective, the guard never lent out: handed back through
    /// memory from a function of its own, its last field went out as a byte and came back
    /// in a word, a load that stalls on the store.
    #[inline(always)]
    fn quiesced(&self) -> Locked<'_> {
        let mut core = context::lock(&self.core);
        if let Err(e) = core.quiesce() {
            failed(core, e);
        }
        core
    }

    /// Why collectives go to MPI's own implementation, if they do.
    pub fn fallback(&self) -> Option<&Fallback> {
        self.fallback.as_ref()
    }

    /// Whether this rank's context has a shared-memory segment (its node's levels go
    /// through topo-run's queues); false where the rank is alone on its node or its
    /// collectives are MPI's.
    pub fn has_segment(&self) -> bool {
        let core = context::lock(&self.core);
        core.hier.as_ref().is_some_and(|h| h.links.shm.is_some())
    }

    /// Whether this context's node steps go through the node's lanes
    /// ([`Topo::for_comm_on_lanes`]): false where it has a segment of its own, where the
    /// rank is alone on its node, or where the node has no lanes.
    pub fn uses_lanes(&self) -> bool {
        let core = context::lock(&self.core);
        core.hier.as_ref().is_some_and(|h| h.lane.is_some())
    }

    /// How many contexts used this context's node queues and communicators before it: 0
    /// for one set up anew, more where it took up what an earlier context over the same
    /// members left when it was dropped (`crate::kept`).
    pub fn earlier_contexts(&self) -> u32 {
        self.earlier
    }

    /// The size from which node-local messages are copied once, straight from the
    /// sender's buffer (`None`: every message goes through the shared-memory queues).
    pub fn single_copy(&self) -> Option<usize> {
        let core = context::lock(&self.core);
        core.hier.as_ref()?.links.shm.as_ref()?.single_copy()
    }

    /// How many other ranks of this node share this rank's nearest cache or memory (its
    /// lowest group inside the node, unless the check at setup found the node's report
    /// wrong), and the one-way cache-line time that check measured, if it ran. `None`
    /// without shared memory.
    pub fn near_peers(&self) -> Option<(usize, Option<f64>)> {
        let core = context::lock(&self.core);
        let t = core.hier.as_ref()?.links.shm.as_ref()?;
        let me = t.local_index();
        let near = (0..t.peers().len())
            .filter(|&j| j != me && t.is_near(j))
            .count();
        Some((near, t.checked_line_ns()))
    }

    /// Whether the hierarchical path is active.
    pub fn is_hierarchical(&self) -> bool {
        context::lock(&self.core).hier.is_some()
    }

    /// Whether a progress thread advances this context's nonblocking collectives
    /// (`--progress-thread`, unless `--spin 0` turned it off).
    pub fn has_progress_thread(&self) -> bool {
        self.thread
    }

    /// The world communicator topo-run works on: a communicator of its own over the
    /// application's group (`private_comm`).
    pub fn world(&self) -> &SimpleCommunicator {
        &self.world
    }

    fn abort(&self, op: &'static str, e: Error) -> ! {
        abort(self.world.rank(), &self.node, op, e)
    }

    // Byte-level entry points, for callers that hold raw MPI buffers (the PMPI library).
    // Each runs the hierarchical algorithm and returns `true`, or returns `false` without
    // doing anything when the collectives go to MPI's own (see [`Topo::fallback`]); the
    // caller then hands the call to MPI. A failure (a dead peer) aborts the job, as in
    // the typed methods. Ranks are world ranks; every rank must make the same calls in
    // the same order, as MPI requires of collectives.

    /// The node this rank runs on (from the plan, else the host name).
    pub fn node(&self) -> &str {
        &self.node
    }

    /// This rank's index on its node and the number of ranks there, from the plan
    /// (`None` without a plan).
    pub fn local(&self) -> Option<(u32, u32)> {
        self.local
    }
}

fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "this node".into())
}
