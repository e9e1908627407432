//! A context over any intracommunicator: the job's plan restricted to the communicator's
//! members, in its own ranks (`topo_hierarchy::restrict`).
//!
//! At setup the members exchange their world rank, their node (named by its lowest world
//! rank) and their domains at every level of the job (the plan's `domains`); each works
//! out the same groups from them. The node's shared memory is a segment of the context's
//! own, named after the job's segment, the lowest world rank of the node's members and
//! the context's number.

use std::sync::atomic::{AtomicU32, Ordering};

use super::*;
use topo_hierarchy::{LevelName, restrict};

/// Pads a member's level list to the longest member's ([`LevelName::code`] never gives it).
const NO_LEVEL: u32 = u32::MAX - 1;

/// The most contexts a process holds under MPICH ([`Topo::room_for_another`]).
pub const MPICH_CONTEXTS: usize = 256;

/// The next context number of this process for [`Topo::for_comm`] (0 is world's).
static NEXT_INSTANCE: AtomicU32 = AtomicU32::new(1);

impl Topo {
    /// Sets up topo-run's collectives for `comm`, any intracommunicator: world, a
    /// duplicate, a split in any rank order, a node's communicator, any subset
    /// (collective over `comm`; every member gets the same outcome). Its hierarchy is the
    /// job's restricted to its members: at every level a group holds the members that share
    /// that level's domain, led by the lowest rank in `comm`, and levels where every group
    /// has one member drop out. The collectives take `comm`'s ranks.
    ///
    /// Each context has a number of its own, agreed over `comm` (the highest next number
    /// of its members), so that contexts alive at the same time on a node never share a
    /// segment. Without a plan, or where shared memory cannot be set up, the collectives go
    /// to MPI ([`Topo::fallback`]), as for world.
    ///
    /// Under `MPI_THREAD_MULTIPLE`, threads may set up contexts over different
    /// communicators at the same time; each thread's context gets a number no other
    /// context of the process has (see `agree_instance`).
    pub fn for_comm(comm: &SimpleCommunicator) -> Result<Topo> {
        let instance = agree_instance(comm, crate::ffi::comm::thread_multiple());
        Self::init(comm, instance, None, Scope::Restricted)
    }

    /// Like [`Topo::for_comm`], for a context without a segment of its own: its blocking
    /// collectives claim one of the node's lanes for each call (`crate::lane`), and its
    /// nonblocking ones take the node's steps over MPI. For the PMPI library's contexts
    /// beyond `TOPO_RUN_MAX_COMMS`; every member must choose it alike.
    pub fn for_comm_on_lanes(comm: &SimpleCommunicator) -> Result<Topo> {
        let instance = agree_instance(comm, crate::ffi::comm::thread_multiple());
        Self::init(comm, instance, None, Scope::Lanes)
    }

    /// Whether this process may set up another context over a communicator other than
    /// world (each takes two communicators of topo-run's own). MPICH and the libraries
    /// built on it (Intel MPI, MVAPICH) allow 2,048 communicators per process: there
    /// topo-run's contexts, kept ones included, take at most [`MPICH_CONTEXTS`] of them
    /// (512 communicators), so that a program keeps room for 1,500 of its own. Open MPI
    /// has no such limit. Every member must agree before a setup (the PMPI library does).
    pub fn room_for_another() -> bool {
        static UNBOUNDED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let unbounded = *UNBOUNDED.get_or_init(|| {
            mpi::environment::library_version().is_ok_and(|v| v.contains("Open MPI"))
        });
        unbounded || MpiTransport::live() < MPICH_CONTEXTS
    }

    /// This rank's plan in `comm`: the job's plan restricted to `comm`'s members
    /// (collective over `comm`).
    pub(super) fn restricted_plan(comm: &SimpleCommunicator, plan: &RankPlan) -> Result<RankPlan> {
        // Each node's plan lists the intra-node levels its own ranks share (a level where
        // every group of a node has one member is not in that node's plans), so members on
        // different nodes can list different levels: the members unite their lists, and
        // each gives its domains at every level of the union.
        let mut padded: Vec<u32> = plan.domains.iter().map(|&(l, _)| l.code()).collect();
        let width = pmpi_allreduce_i32(comm, padded.len() as i32, SystemOperation::max().as_raw());
        padded.resize(width.max(0) as usize, NO_LEVEL);
        let lists = pmpi_allgather_u32(comm, &padded);
        let mut plans: Vec<Vec<LevelName>> = Vec::new();
        for (rank, row) in lists.chunks(padded.len().max(1)).enumerate() {
            let codes = row.iter().copied().take_while(|&c| c != NO_LEVEL);
            let levels: Option<Vec<LevelName>> = codes.map(LevelName::from_code).collect();
            plans.push(levels.ok_or_else(|| Error::Remote {
                rank: rank as u32,
                message: "its plan lists a level this version of topo-run does not know".into(),
            })?);
        }
        let levels = topo_hierarchy::union_of_levels(plans.iter().map(Vec::as_slice));
        let node_key = plan.peers.first().copied().unwrap_or(plan.rank);
        let mut row = vec![plan.rank, node_key];
        row.extend(topo_hierarchy::domains_at(
            &plan.domains,
            plan.rank,
            &levels,
        ));
        let n = row.len();
        let all = pmpi_allgather_u32(comm, &row);
        let size = comm.size() as u32;
        let domains: Vec<Vec<u32>> = (0..size as usize)
            .map(|i| all[i * n + 2..(i + 1) * n].to_vec())
            .collect();
        let hierarchy = restrict(&levels, &domains).map_err(Error::Plan)?;
        let me = comm.rank() as u32;
        let peers: Vec<u32> = (0..size)
            .filter(|&i| all[i as usize * n + 1] == node_key)
            .collect();
        let local_rank = peers.partition_point(|&p| p < me) as u32;
        // The node's members are named by the lowest world rank among them: a segment name
        // no other live context of this node shares with this number.
        let node_leader = peers
            .iter()
            .map(|&p| all[p as usize * n])
            .min()
            .unwrap_or(plan.rank);
        Ok(RankPlan {
            rank: me,
            size,
            node: plan.node.clone(),
            local_rank,
            local_size: peers.len() as u32,
            peers,
            shm_name: format!("{}.w{node_leader}", plan.shm_name),
            digest: plan.digest,
            node_plan: plan.node_plan,
            settings: plan.settings.clone(),
            groups: hierarchy.plan_groups(me),
            domains: Vec::new(),
            top: hierarchy.top(),
        })
    }
}

/// FNV-1a-64.
pub(super) fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A context number for `comm` that no other context of any member process has: the
/// highest next number of the members (collective over `comm`).
///
/// With `concurrent` (`MPI_THREAD_MULTIPLE`), another thread of a member may agree on the
/// same number for another communicator meanwhile. Each member then reserves the number
/// (raising its next number past it); a member that finds the next number already past it
/// (another thread reserved this number or a higher one since) says so, and the members
/// agree again, from their new next numbers. Of two threads that agreed on one number,
/// the later to reserve sees the clash, so numbers never repeat within a process.
fn agree_instance(comm: &SimpleCommunicator, concurrent: bool) -> u32 {
    loop {
        let mine = NEXT_INSTANCE.load(Ordering::Relaxed) as i32;
        let instance = pmpi_allreduce_i32(comm, mine, SystemOperation::max().as_raw()) as u32;
        let before = NEXT_INSTANCE.fetch_max(instance + 1, Ordering::Relaxed);
        if !concurrent {
            return instance;
        }
        let clash = i32::from(before > instance);
        if pmpi_allreduce_i32(comm, clash, SystemOperation::max().as_raw()) == 0 {
            return instance;
        }
    }
}
