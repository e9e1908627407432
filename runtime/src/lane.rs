//! A context on the node's lanes (`transport::shm::lanes`): the pool this process
//! attached with world's context, and a context's part in it.
//!
//! Such a context has no segment of its own. Its links have no shared-memory transport
//! between calls, so its nonblocking collectives (and the flat forms, which run as
//! schedules) take the node's steps over MPI's point-to-point, and never wait for a lane.
//! Each blocking collective that runs the hierarchical algorithms directly claims a lane
//! with the context's other ranks on the node (`Lane::bind`), runs its node steps
//! through the lane's queues (or over MPI when none is free), and lets it go
//! (`Lane::unbind`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::Result;
use crate::links::Links;
use crate::transport::mpi::MpiTransport;
use crate::transport::shm::ShmTransport;
use crate::transport::shm::lanes::Pool;

/// The node's lanes as this process attached them, and whether single copy works between
/// its ranks (world's context found out).
#[derive(Debug)]
pub(crate) struct NodeLanes {
    pub(crate) pool: Pool,
    pub(crate) single_copy: bool,
}

static LANES: Mutex<Option<Arc<NodeLanes>>> = Mutex::new(None);

/// Makes `lanes` the pool later contexts use (world's context, at its setup).
pub(crate) fn install(lanes: Option<NodeLanes>) {
    *LANES.lock().unwrap_or_else(|p| p.into_inner()) = lanes.map(Arc::new);
}

/// The pool world's context attached, if any.
pub(crate) fn current() -> Option<Arc<NodeLanes>> {
    LANES.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Whether this process has lanes for contexts beyond the cap (the PMPI library asks
/// before it sets one up).
pub fn available() -> bool {
    current().is_some_and(|l| l.pool.lanes() > 0)
}

/// This process's contexts set up on the lanes, and their blocking collectives that
/// claimed a lane and that found none free (their node's steps went over MPI).
static CONTEXTS: AtomicU64 = AtomicU64::new(0);
static ON_LANE: AtomicU64 = AtomicU64::new(0);
static OVER_MPI: AtomicU64 = AtomicU64::new(0);

/// How this process used the node's lanes so far: contexts set up on them (those of its
/// ranks alone on their node, or without a record, left out), and their blocking
/// collectives that ran on a lane and that found none free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LaneUse {
    /// Contexts set up on the lanes.
    pub contexts: u64,
    /// Blocking collectives that ran on a lane.
    pub on_lane: u64,
    /// Blocking collectives whose node steps went over MPI, no lane being free.
    pub over_mpi: u64,
}

/// This process's use of the lanes so far.
pub fn lane_use() -> LaneUse {
    LaneUse {
        contexts: CONTEXTS.load(Ordering::Relaxed),
        on_lane: ON_LANE.load(Ordering::Relaxed),
        over_mpi: OVER_MPI.load(Ordering::Relaxed),
    }
}

/// A context's part in its node's lanes.
#[derive(Debug)]
pub(crate) struct Lane {
    lanes: Arc<NodeLanes>,
    /// The context's record on the board.
    record: usize,
    /// The context's ranks on this node.
    members: usize,
    /// Whether this rank is the context's node leader (it decides).
    leader: bool,
    /// Blocking collectives that have claimed so far.
    calls: u64,
    spin: u32,
    /// This rank's end of the queues, while not lent to the links.
    transport: Option<ShmTransport>,
    /// The lane lent to the links for the running collective.
    held: Option<usize>,
}

impl Lane {
    /// A context's part: `record` on `lanes`' board, this rank `me` among the context's
    /// ranks on the node (`peers`, its ranks, and `pids`), `near` as in
    /// [`ShmTransport::set_near`], single copy from `single_copy` bytes.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        lanes: Arc<NodeLanes>,
        record: usize,
        me: usize,
        peers: Vec<u32>,
        pids: Vec<i32>,
        near: Vec<bool>,
        single_copy: Option<usize>,
        node: String,
        spin: u32,
    ) -> Lane {
        let first = lanes.pool.lane(0).clone();
        let members = peers.len();
        let mut t = ShmTransport::for_lane(first, me, peers, pids, node, spin);
        t.set_near(near);
        t.set_single_copy(single_copy.filter(|_| lanes.single_copy));
        CONTEXTS.fetch_add(1, Ordering::Relaxed);
        Lane {
            members,
            leader: me == 0,
            lanes,
            record,
            calls: 0,
            spin,
            transport: Some(t),
            held: None,
        }
    }

    /// Claims a lane for the next blocking collective with the context's other ranks on
    /// the node, and lends it to `links`; with none free the links keep going over MPI.
    pub(crate) fn bind(&mut self, links: &mut Links<MpiTransport>) -> Result<()> {
        self.calls += 1;
        let t = self
            .transport
            .as_ref()
            .expect("a lane is bound once per call");
        // A member that died while the others wait for the claim is named by its queues'
        // liveness check.
        let alive = || t.check_peers_alive();
        let pool = &self.lanes.pool;
        let lane = if self.leader {
            pool.decide(self.record, self.calls, self.members, self.spin, alive)?
        } else {
            pool.learn(self.record, self.calls, self.spin, alive)?
        };
        let counter = if lane.is_some() { &ON_LANE } else { &OVER_MPI };
        counter.fetch_add(1, Ordering::Relaxed);
        if let Some(j) = lane {
            let mut t = self
                .transport
                .take()
                .expect("a lane is bound once per call");
            t.rebind(pool.lane(j).clone());
            links.shm = Some(t);
            self.held = Some(j);
        }
        Ok(())
    }

    /// Takes the lane back from `links` once the collective has completed, and lets it go.
    pub(crate) fn unbind(&mut self, links: &mut Links<MpiTransport>) {
        if let Some(j) = self.held.take() {
            self.transport = links.shm.take();
            let signaled = self.transport.as_ref().is_some_and(|t| t.has_signaled());
            self.lanes.pool.release(j, self.members, signaled);
        }
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        self.lanes.pool.leave_record(self.record);
    }
}
