//! Runtime settings: shared-memory queue sizes, pipelining, the spin policy and the
//! algorithm chosen per level and message size. The launcher validates them and writes
//! them into every rank's plan, so all ranks of a job use the same ones (the plan digest
//! covers them); the runtime reads them back from the plan.
//!
//! Algorithm rules are comma-separated `[SCOPE][>MEMBERS][<BYTES]=ALGORITHM` (a bare
//! `ALGORITHM` means `*=ALGORITHM`). `SCOPE` is a level
//! name (`numa`, `node`, `switch1`, `world`, ...), `intra` (groups inside one node),
//! `inter` (groups spanning nodes) or `*` (the default when left out). `>MEMBERS` (broadcast
//! and reduce rules only) limits the rule to groups of more than `MEMBERS` ranks. `<BYTES`
//! limits it to messages smaller than `BYTES` (suffixes `K`, `M`, `G` are powers of 1024).
//! The first matching rule wins; the user's rules come before the built-in defaults.
//!
//! ```text
//! bcast      numa=knomial:4,node=flat,inter<64K=knomial:2
//! reduce     intra=flat,inter=binomial
//! allreduce  <64K=rab:rd,*=rab:ring
//! allgather  <64K=rd,*=hier
//! alltoall   <512=spread,*=pairwise
//! ```

mod algorithms;
mod defaults;
mod keys;
mod rules;
#[cfg(test)]
mod tests;

use crate::error::{Error, Result};
use crate::level::LevelName;

pub use algorithms::{
    AllgatherAlg, AllreduceAlg, AlltoallAlg, BarrierAlg, BcastAlg, RABENSEIFNER_PIECE, ReduceAlg,
    ReduceScatterAlg, RootedVAlg, TopAlg,
};
pub use keys::KEYS;
pub use rules::{ChunkRule, Collective, Rule, Scope, format_bytes, parse_bytes};

use defaults::*;
use rules::{parse_chunk_rules, parse_rules, pick};

/// Slots per shared-memory queue when not set.
pub const DEFAULT_SLOTS: u32 = 8;
/// Bytes per shared-memory slot (fragment) when not set.
pub const DEFAULT_FRAGMENT: u32 = 128 << 10;
/// Bytes per pipeline chunk where no rule, of the user's or the built-in ones, says
/// otherwise.
pub const DEFAULT_CHUNK: u32 = 256 << 10;
/// Busy-wait rounds before a waiting rank starts yielding its core, when not set.
pub const DEFAULT_SPIN: u32 = 1 << 10;
/// Messages of at least this many bytes are copied once, from the sender's buffer, when
/// not set.
pub const DEFAULT_SINGLE_COPY: u32 = 16 << 10;

/// [`DEFAULT_SINGLE_COPY`] where `spin` is 0 (ranks outnumber cores): a single-copy
/// sender waits until its readers have copied, and a reader is often off its core then,
/// while a message through the queues leaves its sender free once written. The dev
/// cluster's 2 emulated nodes x 2 (`--spin 0`), 10 collectives of 8-64 KiB against Open
/// MPI's in the same job, two runs each, with 16K and with 64K: back to back 14 of 40
/// rows faster by more than 5 % and 7 slower (Scan of 32 KiB 1.27 -> 0.66 x Open MPI's
/// time, Reduce_scatter_block of 64 KiB 1.06 -> 0.67, Allgather of 64 KiB 1.43 -> 1.00;
/// Bcast of 32 KiB 1.75 -> 1.89), with a barrier between calls 20 faster and 4 slower
/// (Scatter of 32 KiB 1.37 -> 0.85). Larger messages keep single copy: without it at all,
/// Gather of 1 MiB went from 0.43 to 0.62 and Allgather of 256 KiB from 0.68 to 1.23
/// (benchmarks/records.md).
pub const OVERSUBSCRIBED_SINGLE_COPY: u32 = 64 << 10;

/// The validated runtime settings of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Slots per shared-memory queue.
    pub slots: u32,
    /// Bytes per slot.
    pub fragment: u32,
    /// User pipeline-chunk rules (before the defaults).
    pub chunk: Vec<ChunkRule>,
    /// Busy-wait rounds before yielding.
    pub spin: u32,
    /// Single-copy threshold in bytes (0: never).
    pub single_copy: u32,
    /// Whether a progress thread advances nonblocking collectives.
    pub progress_thread: bool,
    /// The barrier the user asked for; `None`: the built-in choice by the job's shape
    /// ([`Settings::barrier_alg`]).
    pub barrier: Option<BarrierAlg>,
    /// User broadcast rules (before the defaults).
    pub bcast: Vec<Rule<BcastAlg>>,
    /// User reduce rules.
    pub reduce: Vec<Rule<ReduceAlg>>,
    /// User allreduce rules (their scope is ignored).
    pub allreduce: Vec<Rule<AllreduceAlg>>,
    /// User allgather rules (their scope is ignored; sizes are the whole gathered result).
    pub allgather: Vec<Rule<AllgatherAlg>>,
    /// User alltoall rules (their scope is ignored; sizes are one block).
    pub alltoall: Vec<Rule<AlltoallAlg>>,
    /// User Reduce_scatter_block rules (their scope is ignored; sizes are one block).
    pub reduce_scatter: Vec<Rule<ReduceScatterAlg>>,
    /// The Gatherv and Scatterv form the user asked for; `None`: the built-in choice by
    /// the job's shape ([`Settings::rooted_v_alg`]).
    pub rooted_v: Option<RootedVAlg>,
    /// The job's nodes, which the built-in Allreduce rules depend on: set where the job is
    /// known (the runtime at setup, `topo-run simulate` from the job), 1 elsewhere.
    pub nodes: u32,
    /// The job's ranks, set with [`Settings::nodes`].
    pub ranks: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            slots: DEFAULT_SLOTS,
            fragment: DEFAULT_FRAGMENT,
            chunk: Vec::new(),
            spin: DEFAULT_SPIN,
            single_copy: DEFAULT_SINGLE_COPY,
            progress_thread: false,
            barrier: None,
            bcast: Vec::new(),
            reduce: Vec::new(),
            allreduce: Vec::new(),
            allgather: Vec::new(),
            alltoall: Vec::new(),
            reduce_scatter: Vec::new(),
            rooted_v: None,
            nodes: 1,
            ranks: 1,
        }
    }
}

/// The variable that sets the most live contexts with a shared-memory segment (one each)
/// a process of the PMPI library keeps: world's and any other communicator's.
pub const MAX_COMMS_ENV: &str = "TOPO_RUN_MAX_COMMS";

/// Segments of dropped contexts a process keeps for later contexts over the same members
/// (beside those of its live contexts).
pub const KEPT_SEGMENTS: usize = 4;

/// The most contexts a process keeps without [`MAX_COMMS_ENV`].
pub const DEFAULT_MAX_COMMS: usize = 16;

/// The most contexts a process keeps, from the value of [`MAX_COMMS_ENV`] if set (one that
/// is not a number counts as unset).
pub fn max_comms(value: Option<&str>) -> usize {
    count_or(value, DEFAULT_MAX_COMMS)
}

/// The count in a variable's `value`, or `default` where it is unset or not a number.
fn count_or(value: Option<&str>, default: usize) -> usize {
    value.and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

/// The variable that sets the number of lanes per node: segments of world's layout that
/// the PMPI library's contexts beyond [`MAX_COMMS_ENV`] share, claimed per blocking
/// collective (`0`: none, and collectives on those communicators are MPI's).
pub const LANES_ENV: &str = "TOPO_RUN_LANES";

/// Lanes per node without [`LANES_ENV`].
pub const DEFAULT_LANES: usize = 2;

/// The most lanes a node may have.
pub const MAX_LANES: usize = 64;

/// Bytes of a node's board of lanes (a line per lane and per context on them, 4096
/// contexts, in a segment of its own): what the lanes hold beyond the lanes themselves.
pub const LANE_BOARD_BYTES: u64 = 286_720;

/// The number of lanes from the value of [`LANES_ENV`], if set (one that is not a number
/// counts as unset), at most [`MAX_LANES`].
pub fn lanes_wanted(value: Option<&str>) -> usize {
    count_or(value, DEFAULT_LANES).min(MAX_LANES)
}

impl Settings {
    /// An upper bound on the bytes of one node's shared-memory segment for `ranks` local
    /// ranks with these slots and fragment: a header of 64 bytes plus 80 per rank, and per
    /// rank a queue of `slots` fragments (each 128 bytes past the one before, and the first
    /// up to a page into its part) with a 64-byte control word per slot and reader and a
    /// ring of 16 lines per reader for small messages, each part rounded up to 4 KiB pages.
    /// The runtime's layout tests check that its segments never exceed it; `topo-run
    /// doctor` reserves this much to test `/dev/shm`.
    pub fn segment_bound(&self, ranks: u64) -> u64 {
        const PAGE: u64 = 4096;
        let (slots, fragment) = (u64::from(self.slots), u64::from(self.fragment));
        let header = 64 + 144 * ranks + 2 * PAGE;
        // Control lines, the rings (16 lines per reader and the head and tail words), the
        // slots' data (runtime/src/transport/shm/layout.rs).
        let rings = ranks * 16 * 64 + 2 * (8 * ranks).next_multiple_of(64);
        // The slots are staggered by two lines each, and by up to a page per queue.
        let queue = slots * ranks * 64 + rings + slots * (fragment + 128) + 4 * PAGE;
        header + ranks * queue
    }

    /// Reads `key:value` pairs (as stored in a plan), rejecting unknown keys and bad values.
    /// With `spin` 0 and no `single-copy`, single copy starts at
    /// [`OVERSUBSCRIBED_SINGLE_COPY`].
    pub fn from_pairs<K: AsRef<str>, V: AsRef<str>>(pairs: &[(K, V)]) -> Result<Self> {
        let mut s = Settings::default();
        let mut single_copy_set = false;
        for (key, value) in pairs {
            let (key, value) = (key.as_ref(), value.as_ref());
            let bad = |reason: String| Error::Settings {
                key: key.to_string(),
                value: value.to_string(),
                reason,
            };
            let bytes = |lo: u64, hi: u64| -> Result<u32> {
                let n = parse_bytes(value).map_err(bad)?;
                if n < lo || n > hi {
                    return Err(bad(format!("must be between {lo} and {hi} bytes")));
                }
                Ok(n as u32)
            };
            match key {
                "slots" => {
                    s.slots = value
                        .parse()
                        .ok()
                        .filter(|n| (2..=1024).contains(n))
                        .ok_or_else(|| bad("must be a number from 2 to 1024".into()))?;
                }
                "fragment" => {
                    s.fragment = bytes(64, 16 << 20)?;
                    if s.fragment % 64 != 0 {
                        return Err(bad("must be a multiple of 64".into()));
                    }
                }
                "chunk" => s.chunk = parse_chunk_rules(value).map_err(bad)?,
                "spin" => {
                    s.spin = value
                        .parse()
                        .map_err(|_| bad("must be a number of rounds".into()))?;
                }
                "single-copy" => {
                    s.single_copy = bytes(0, 1 << 30)?;
                    single_copy_set = true;
                }
                "progress" => {
                    s.progress_thread = match value {
                        "none" => false,
                        "thread" => true,
                        _ => return Err(bad("must be none or thread".into())),
                    };
                }
                "barrier" => s.barrier = Some(value.parse().map_err(bad)?),
                "bcast" => s.bcast = parse_rules(value, true).map_err(bad)?,
                "reduce" => s.reduce = parse_rules(value, true).map_err(bad)?,
                "allreduce" => s.allreduce = parse_rules(value, false).map_err(bad)?,
                "allgather" => s.allgather = parse_rules(value, false).map_err(bad)?,
                "alltoall" => s.alltoall = parse_rules(value, false).map_err(bad)?,
                "reduce-scatter" => s.reduce_scatter = parse_rules(value, false).map_err(bad)?,
                "rooted-v" => s.rooted_v = Some(value.parse().map_err(bad)?),
                _ => {
                    return Err(bad(format!(
                        "unknown setting; known: {}",
                        KEYS.iter().map(|k| k.0).collect::<Vec<_>>().join(", ")
                    )));
                }
            }
        }
        if s.spin == 0 && !single_copy_set {
            s.single_copy = OVERSUBSCRIBED_SINGLE_COPY;
        }
        Ok(s)
    }

    /// The broadcast algorithm for a group of `members` at `level` (`intra`: inside one
    /// node).
    pub fn bcast_for(
        &self,
        level: LevelName,
        intra: bool,
        members: usize,
        bytes: usize,
    ) -> BcastAlg {
        pick(
            &self.bcast,
            &BCAST_DEFAULTS,
            level,
            intra,
            Some(members),
            bytes,
        )
    }

    /// The reduce algorithm for a group of `members` at `level`.
    pub fn reduce_for(
        &self,
        level: LevelName,
        intra: bool,
        members: usize,
        bytes: usize,
    ) -> ReduceAlg {
        pick(
            &self.reduce,
            &REDUCE_DEFAULTS,
            level,
            intra,
            Some(members),
            bytes,
        )
    }

    /// The job's ranks per node, rounded up.
    fn per_node(&self) -> u32 {
        self.ranks.div_ceil(self.nodes.max(1))
    }

    /// The built-in Allgather rules for a job of `ranks` ranks on [`Settings::nodes`]
    /// nodes.
    fn allgather_defaults(&self, ranks: usize) -> [Rule<AllgatherAlg>; 2] {
        if self.nodes > 1 && (ALLGATHER_RING_RANKS..=ALLGATHER_RING_MAX_RANKS).contains(&ranks) {
            let per_node = ranks.div_ceil(self.nodes as usize);
            let block = if ranks.is_power_of_two() {
                (ALLGATHER_RING_POW2_NODE_BYTES / per_node)
                    .clamp(ALLGATHER_RING_BLOCK, ALLGATHER_RING_POW2_BLOCK_MAX)
            } else if self.nodes.is_power_of_two() {
                ALLGATHER_RING_BLOCK
            } else {
                (ALLGATHER_RING_NODE_BYTES / per_node)
                    .clamp(ALLGATHER_RING_BLOCK_MIN, ALLGATHER_RING_BLOCK)
            };
            let below = (block * ranks) as u64;
            below_then(below, AllgatherAlg::RecursiveDoubling, AllgatherAlg::Ring)
        } else if ranks.is_power_of_two() {
            [ALLGATHER_DEFAULTS[0]; 2]
        } else {
            ALLGATHER_DEFAULTS_ANY_SIZE
        }
    }

    /// The allgather algorithm for a gathered result of `bytes` (all ranks' blocks) in a
    /// job of `ranks` ranks (the defaults differ for sizes that are not a power of two,
    /// and for large jobs on several nodes).
    pub fn allgather_for(&self, bytes: usize, ranks: usize) -> AllgatherAlg {
        let defaults = self.allgather_defaults(ranks);
        pick(
            &self.allgather,
            &defaults,
            LevelName::World,
            false,
            None,
            bytes,
        )
    }

    /// Every flat Allgather algorithm (`rd`, `ring`) that [`Settings::allgather_for`] may
    /// choose for some size in a job of `ranks` ranks, each once, in the order of the
    /// rules: what a context works out at setup, so that no Allgather has to learn about
    /// the other ranks when it starts.
    pub fn flat_allgather_algs(&self, ranks: usize) -> Vec<AllgatherAlg> {
        let defaults = self.allgather_defaults(ranks);
        let mut algs = Vec::new();
        for r in self.allgather.iter().chain(&defaults) {
            if r.scope.matches(LevelName::World, false)
                && !matches!(r.algorithm, AllgatherAlg::Hierarchical(_))
                && !algs.contains(&r.algorithm)
            {
                algs.push(r.algorithm);
            }
        }
        algs
    }

    /// The alltoall algorithm for blocks of `bytes` (each rank's block for one rank): on
    /// several nodes of at least `ALLTOALL_SPREAD_RANKS` ranks the spread form for blocks
    /// below `ALLTOALL_SPREAD_BELOW` bytes, else (and on one node) pairwise.
    pub fn alltoall_for(&self, bytes: usize) -> AlltoallAlg {
        let per_node = self.per_node();
        let defaults = if self.nodes > 1 && per_node >= ALLTOALL_SPREAD_RANKS {
            below_then(
                ALLTOALL_SPREAD_BELOW,
                AlltoallAlg::Spread,
                AlltoallAlg::Pairwise,
            )
        } else {
            [Rule {
                scope: Scope::Any,
                more_than: None,
                below: None,
                algorithm: AlltoallAlg::Pairwise,
            }; 2]
        };
        pick(
            &self.alltoall,
            &defaults,
            LevelName::World,
            false,
            None,
            bytes,
        )
    }

    /// The Reduce_scatter_block form for blocks of `bytes` (each rank's block of the
    /// result): by recursive halving in the hierarchy's order while the whole contribution
    /// (`bytes` times the ranks) is below `REDUCE_SCATTER_HALVING_BELOW`, above it
    /// as the Allreduce's form; but on at most `REDUCE_SCATTER_LEADERS_NODES` nodes of at
    /// most `REDUCE_SCATTER_LEADERS_PER_NODE` ranks by halving below
    /// `REDUCE_SCATTER_LEADERS_FROM` and through the leaders from there; on one node by
    /// halving at every size, but through rank 0 on a node of at most 2 ranks. On several nodes where the
    /// job's size is not a power of two, by the ring from `REDUCE_SCATTER_RING_FROM`.
    pub fn reduce_scatter_for(&self, bytes: usize) -> ReduceScatterAlg {
        let per_node = self.per_node();
        let few = per_node <= REDUCE_SCATTER_LEADERS_PER_NODE;
        let halving_below = (REDUCE_SCATTER_HALVING_BELOW / u64::from(self.ranks.max(1))).max(1);
        let all = |algorithm| {
            [Rule {
                scope: Scope::Any,
                more_than: None,
                below: None,
                algorithm,
            }; 2]
        };
        let ring = self.nodes > 1 && !self.ranks.is_power_of_two();
        let defaults = match (self.nodes > 1, few) {
            _ if ring && bytes >= REDUCE_SCATTER_RING_FROM => all(ReduceScatterAlg::Ring),
            (true, true) if self.nodes <= REDUCE_SCATTER_LEADERS_NODES => below_then(
                (REDUCE_SCATTER_LEADERS_FROM / u64::from(self.ranks.max(1))).max(1),
                ReduceScatterAlg::Halving,
                ReduceScatterAlg::Leaders,
            ),
            (true, _) => below_then(
                halving_below,
                ReduceScatterAlg::Halving,
                ReduceScatterAlg::Allreduce,
            ),
            (false, true) => all(ReduceScatterAlg::Root),
            (false, false) => all(ReduceScatterAlg::Halving),
        };
        pick(
            &self.reduce_scatter,
            &defaults,
            LevelName::World,
            false,
            None,
            bytes,
        )
    }

    /// Whether a Reduce_scatter (blocks of different lengths, `mean` bytes on average)
    /// runs as a schedule, by recursive halving or the ring (where
    /// [`Settings::reduce_scatter_for`] gives the ring): wherever it does not give the
    /// Allreduce's form, as the leaders' and root forms have no such variant yet. On 2
    /// emulated nodes x 2 (`benchmarks/preload-bench.c`) halving took 0.67-0.89 x Open MPI's
    /// from 8 B to 32 KiB blocks and 0.82-1.05 from 256 KiB to 2 MiB, the Allreduce's form
    /// 0.80-1.33 and 1.12-1.43.
    pub fn reduce_scatter_v_halving(&self, mean: usize) -> bool {
        self.reduce_scatter_for(mean) != ReduceScatterAlg::Allreduce
    }

    /// The pipeline chunk of `collective` for a message of `bytes` (an Allgather's whole
    /// result): the first matching rule of the user's, then of the defaults.
    pub fn chunk_for(&self, collective: Collective, bytes: usize) -> u32 {
        self.chunk_rules()
            .find(|r| r.matches(collective, bytes))
            .map_or(DEFAULT_CHUNK, |r| r.bytes)
    }

    /// Every pipeline-chunk rule in the order they are tried: the user's, then the
    /// built-in ones.
    pub fn chunk_rules(&self) -> impl Iterator<Item = &ChunkRule> {
        self.chunk.iter().chain(&CHUNK_DEFAULTS)
    }

    /// Every flat Allreduce algorithm (`ring`, `rabenseifner`, `rd`) that
    /// [`Settings::allreduce_for`] may choose for some size, each once: what a context
    /// works out the order of at setup.
    pub fn flat_allreduce_algs(&self) -> Vec<AllreduceAlg> {
        let mut algs = Vec::new();
        for r in self.allreduce.iter().chain(self.allreduce_defaults()) {
            if r.algorithm.is_flat() && !algs.contains(&r.algorithm) {
                algs.push(r.algorithm);
            }
        }
        algs
    }

    /// For a job of [`ALLREDUCE_EARLY_RANKS`] ranks or more on more than one node with
    /// at most 32 ranks per node, the entry of
    /// [`ALLREDUCE_RD_BELOW`] its ranks per node fall under; `None` for other jobs.
    fn few_per_node(&self) -> Option<usize> {
        let per_node = self.per_node();
        ALLREDUCE_RD_BELOW
            .iter()
            .position(|&(most, _)| per_node <= most)
            .filter(|_| self.nodes > 1 && self.ranks >= ALLREDUCE_EARLY_RANKS)
    }

    /// The barrier: the user's, else the flat dissemination with the nodes interleaved for
    /// the jobs whose small Allreduce takes recursive doubling over every rank (up to 32
    /// ranks per node, `Settings::few_per_node`): there the simulator predicts the
    /// hierarchy's barrier at up to 1.05 x a dissemination over ranks placed cyclically
    /// (1.01-1.04 x with 2 ranks per node), which this one is in any placement
    /// (docs/simulate.md); else the hierarchy's, with a
    /// dissemination among the node leaders.
    pub fn barrier_alg(&self) -> BarrierAlg {
        self.barrier.unwrap_or(if self.few_per_node().is_some() {
            BarrierAlg::Flat
        } else {
            BarrierAlg::Dissemination
        })
    }

    /// How Gatherv and Scatterv go: the user's choice, else through the leaders in a job
    /// on several nodes with more than `ROOTED_V_DIRECT_PER_NODE` ranks per node, where
    /// they spare the root a message per rank; else straight between the root and each
    /// rank, in one step instead of the leaders' two.
    pub fn rooted_v_alg(&self) -> RootedVAlg {
        self.rooted_v.unwrap_or(
            if self.nodes > 1 && self.per_node() > ROOTED_V_DIRECT_PER_NODE {
                RootedVAlg::Leaders
            } else {
                RootedVAlg::Direct
            },
        )
    }

    /// The built-in Allreduce rules for a job of [`Settings::ranks`] ranks on
    /// [`Settings::nodes`] nodes.
    fn allreduce_defaults(&self) -> &'static [Rule<AllreduceAlg>] {
        if let Some(i) = self.few_per_node() {
            &ALLREDUCE_DEFAULTS_FEW_PER_NODE[i]
        } else if self.nodes > 1 && self.ranks >= ALLREDUCE_EARLY_RANKS {
            &ALLREDUCE_DEFAULTS_MANY
        } else if self.nodes > 1 {
            &ALLREDUCE_DEFAULTS_NODES
        } else {
            &ALLREDUCE_DEFAULTS
        }
    }

    /// The allreduce variant for a message of `bytes`.
    pub fn allreduce_for(&self, bytes: usize) -> AllreduceAlg {
        pick(
            &self.allreduce,
            self.allreduce_defaults(),
            LevelName::World,
            false,
            None,
            bytes,
        )
    }
}
