//! The runtime's one error type. Every variant names what went wrong, where (rank, node,
//! segment) and what to do about it.

use thiserror::Error;

/// Everything that can go wrong in the runtime.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// `TOPO_RUN_PLAN` is set but cannot be read.
    #[error(
        "{0}; start the program with `srun --mpi=pmix topo-run ./app` and do not edit TOPO_RUN_PLAN"
    )]
    Plan(#[source] topo_hierarchy::Error),

    /// The plan's runtime settings are invalid.
    #[error("{0}")]
    Settings(#[source] topo_hierarchy::Error),

    /// The plan was written for another rank or job size than MPI reports.
    #[error(
        "the topo-run plan is for {what} {plan}, but MPI reports {mpi}; the plan belongs to \
         another job step (was TOPO_RUN_PLAN inherited from an outer job?)"
    )]
    PlanMismatch {
        /// `rank` or `size`.
        what: &'static str,
        /// The plan's value.
        plan: u32,
        /// MPI's value.
        mpi: u32,
    },

    /// Two ranks were planned from different inputs.
    #[error(
        "ranks were planned from different inputs: rank {rank} on {node} has plan digest \
         {digest} but rank 0 has {digest0}; every node must see the same network map, \
         --levels and settings"
    )]
    DigestMismatch {
        /// The first rank whose digest differs from rank 0's.
        rank: u32,
        /// Its node.
        node: String,
        /// Its digest.
        digest: String,
        /// Rank 0's digest.
        digest0: String,
    },

    /// A system call on the node's shared-memory segment failed.
    #[error("shared-memory segment {path}: {action} failed: {source}{hint}")]
    Shm {
        /// The segment's path.
        path: String,
        /// What was attempted.
        action: &'static str,
        /// The system error.
        #[source]
        source: nix::Error,
        /// How to fix it (may be empty).
        hint: &'static str,
    },

    /// Another live launch on this node uses the same segment name.
    #[error(
        "shared-memory segment {path} is in use by another launch on this node with the same \
         job and step (two mpirun or srun --mpi=none runs at once in one allocation?); \
         start each with srun --mpi=pmix, or give each its own SLURM_STEP_ID"
    )]
    ShmInUse {
        /// The segment's path.
        path: String,
    },

    /// The ranks of one node were planned from different views of the node.
    #[error(
        "the ranks of this node were planned with different intra-node groups (node plan \
         {mine:016x} here, {theirs:016x} in the leader's segment {path}): their tasks saw \
         different CPU bindings (with --allow-unbound, some tasks were bound differently than \
         SLURM_CPU_BIND_LIST says); bind every task alike (srun --cpu-bind=cores), or pass \
         --levels node,... to drop the intra-node levels"
    )]
    NodePlans {
        /// The leader's segment.
        path: String,
        /// This rank's node plan.
        mine: u64,
        /// The leader's.
        theirs: u64,
    },

    /// A peer sent what the collective cannot have produced: the ranks called different
    /// collectives or counts.
    #[error("{reason}")]
    Mismatch {
        /// What arrived.
        reason: String,
    },

    /// The segment found is not the one this job step expects.
    #[error("shared-memory segment {path}: {reason}")]
    ShmLayout {
        /// The segment's path.
        path: String,
        /// What does not match.
        reason: String,
    },

    /// MPI could not make a context's communicators (it has no room for more on some
    /// member: MPICH allows 2,048 per process).
    #[error(
        "MPI has no room for another communicator (MPICH allows 2,048 per process, and a \
         context of topo-run's takes two); this communicator's collectives are MPI's own"
    )]
    NoCommunicator,

    /// A peer on this node exited (or was killed) while this rank waited for it.
    #[error(
        "rank {rank} on node {node} died during {op}; the job cannot continue (see that \
         rank's output and the Slurm step log for the cause)"
    )]
    PeerDied {
        /// The dead rank.
        rank: u32,
        /// Its node.
        node: String,
        /// The collective that was running.
        op: &'static str,
    },

    /// Reading or writing a local peer's buffer directly failed.
    #[error(
        "reading or writing rank {rank}'s buffer on node {node} with process_vm_readv or \
         process_vm_writev failed: {source}; \
         set TOPO_RUN_SINGLE_COPY=0 to keep every message in the shared-memory queues"
    )]
    SingleCopy {
        /// The rank whose buffer was read or written.
        rank: u32,
        /// Its node.
        node: String,
        /// The system error.
        #[source]
        source: nix::Error,
    },

    /// Another rank could not set up the collectives; its message is attached.
    #[error("{message}")]
    Remote {
        /// The first rank that failed.
        rank: u32,
        /// Its error message.
        message: String,
    },

    /// Ranks passed different settings to [`crate::Topo::from_env_with_settings`].
    #[error(
        "rank {rank} passed other settings than rank 0 to Topo::from_env_with_settings; \
         every rank must pass the same"
    )]
    SettingsDiffer {
        /// The first rank whose settings differ from rank 0's.
        rank: u32,
    },

    /// A rank the plan puts on this node is not among the node's ranks (a plan bug).
    #[error("rank {rank} is not on node {node}, yet a node-local level lists it")]
    NotLocal {
        /// The rank.
        rank: u32,
        /// This node.
        node: String,
    },

    /// A level spans nodes but the fabric has no network transport (a plan bug).
    #[error("a level spans nodes, but this fabric has no network transport")]
    NoNetwork,
}

impl Error {
    /// Names the collective in a [`Error::PeerDied`].
    pub(crate) fn during(self, op: &'static str) -> Self {
        match self {
            Error::PeerDied { rank, node, .. } => Error::PeerDied { rank, node, op },
            e => e,
        }
    }
}

/// The runtime's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
