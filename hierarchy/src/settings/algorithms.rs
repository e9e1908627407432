//! The algorithms a rule can name, per collective, and how they are written.

use std::fmt;
use std::str::FromStr;

use super::rules::{format_bytes, parse_bytes, pipeline_bytes};

/// How a group broadcasts among its members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BcastAlg {
    /// The root talks to every member directly. In shared memory a broadcast fragment is
    /// copied once and read by all.
    Flat,
    /// A k-nomial tree of radix `k` (2 = binomial).
    Knomial(u32),
    /// The root scatters 1/n of the message to each member, then a ring allgather
    /// completes everyone's copy (bandwidth-optimal for large messages).
    ScatterAllgather,
}

/// How a group reduces to one member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceAlg {
    /// The root combines every member's message in turn.
    Flat,
    /// A k-nomial tree of radix `k` (2 = binomial).
    Knomial(u32),
    /// A ring reduce-scatter leaves each member with 1/n of the result, then the root
    /// gathers the pieces (bandwidth-optimal for large messages).
    ReduceScatterGather,
}

/// How a barrier's top group meets (the levels below always gather to their first member
/// and release from it), or that the barrier runs over every rank without the hierarchy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BarrierAlg {
    /// In round k each member tells the member 2^k places on and hears from the one 2^k
    /// places back: ceil(log2 n) transfers, and the last member to arrive leaves first.
    #[default]
    Dissemination,
    /// The first member waits until every other one has arrived, then releases them: it
    /// leaves first, one transfer before the others.
    RootFirst,
    /// No hierarchy: a dissemination over every rank, with the nodes interleaved (the
    /// first rank of every node, then the second of every node, ...: consecutive places on
    /// different nodes), so that the first rounds cross the network while a node's ranks
    /// still reach it at different times, and the last ones stay inside the nodes.
    Flat,
}

impl FromStr for BarrierAlg {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "dissemination" => Ok(BarrierAlg::Dissemination),
            "root-first" => Ok(BarrierAlg::RootFirst),
            "flat" => Ok(BarrierAlg::Flat),
            _ => Err(format!(
                "unknown barrier {s:?}; use dissemination, root-first or flat"
            )),
        }
    }
}

impl fmt::Display for BarrierAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BarrierAlg::Dissemination => "dissemination",
            BarrierAlg::RootFirst => "root-first",
            BarrierAlg::Flat => "flat",
        })
    }
}

/// The algorithms both trees share: `flat`, `binomial`, `knomial:K`.
pub(super) fn parse_tree(s: &str, extra: &str) -> std::result::Result<Option<u32>, String> {
    match s {
        "flat" => Ok(None),
        "binomial" => Ok(Some(2)),
        _ => {
            let k = s.strip_prefix("knomial:").ok_or_else(|| {
                format!("unknown algorithm {s:?}; use flat, binomial, knomial:K or {extra}")
            })?;
            match k.parse::<u32>() {
                Ok(k @ 2..=64) => Ok(Some(k)),
                _ => Err(format!("the radix in {s:?} must be 2..=64")),
            }
        }
    }
}

impl FromStr for BcastAlg {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s == "scatter-allgather" {
            return Ok(BcastAlg::ScatterAllgather);
        }
        Ok(parse_tree(s, "scatter-allgather")?.map_or(BcastAlg::Flat, BcastAlg::Knomial))
    }
}

impl FromStr for ReduceAlg {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if s == "reduce-scatter-gather" {
            return Ok(ReduceAlg::ReduceScatterGather);
        }
        Ok(parse_tree(s, "reduce-scatter-gather")?.map_or(ReduceAlg::Flat, ReduceAlg::Knomial))
    }
}

impl fmt::Display for BcastAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BcastAlg::Flat => f.write_str("flat"),
            BcastAlg::Knomial(k) => write!(f, "knomial:{k}"),
            BcastAlg::ScatterAllgather => f.write_str("scatter-allgather"),
        }
    }
}

impl fmt::Display for ReduceAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReduceAlg::Flat => f.write_str("flat"),
            ReduceAlg::Knomial(k) => write!(f, "knomial:{k}"),
            ReduceAlg::ReduceScatterGather => f.write_str("reduce-scatter-gather"),
        }
    }
}

/// How the top group of a ReduceAllreduceBcast allreduce combines its members' values, and
/// how the top group of a hierarchical allgather exchanges its members' blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopAlg {
    /// Recursive doubling: log2(p) exchanges of the whole message.
    RecursiveDoubling,
    /// Ring reduce-scatter then ring allgather: 2(p-1) exchanges of 1/p of the message.
    Ring,
}

/// The bytes per piece of Rabenseifner's Allreduce in the built-in rules of jobs of
/// 16 ranks or more: on 16 and 128 nodes x 32 and 16 x 128 the
/// simulator predicts 1 MiB in 64 KiB pieces at 0.50-0.88 of the best flat algorithm
/// (whole: 0.85-1.23; the network 5 x slower gives the upper ends), 4 MiB at 0.44-0.96
/// (16 pieces of 256 KiB: up to 1.003), while pieces below 64 KiB add a message per piece
/// and step that outweighs the overlap (64 KiB in two pieces: up to 1.046). Smaller jobs
/// reduce the message whole: on 2 emulated nodes x 2, where ranks share cores and every
/// round is a wait, 64 KiB pieces took 1.04-1.56 x Open MPI's time from 512 KiB to 4 MiB,
/// the whole message 0.53-0.66 x.
pub const RABENSEIFNER_PIECE: u32 = 64 << 10;

/// The hierarchical allreduce variants of coll/tcl.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllreduceAlg {
    /// Reduce up the whole hierarchy to rank 0, then broadcast down.
    ReduceBcast,
    /// Reduce up to the top group, allreduce inside it, then broadcast down.
    ReduceAllreduceBcast(TopAlg),
    /// Every rank in one ring, in switch-major, node-major order (every block crosses
    /// each node boundary once): a reduce-scatter and an allgather, `2(n-1)` steps of
    /// `1/n` of the message. Large messages on jobs of moderate size.
    Ring,
    /// Rabenseifner's reduce-scatter by recursive halving and allgather by recursive
    /// doubling over every rank, ordered so that the heavy steps stay inside the nodes
    /// and every rank of a node sends its share over the network at once. Large messages
    /// on jobs of any size. With a piece (`rabenseifner:PIECE`, bytes; 0 for plain
    /// `rabenseifner`: none), messages of at least two pieces run as pieces, each a few
    /// steps behind the one before, so that one piece's network steps overlap the next
    /// one's steps inside the node.
    Rabenseifner(u32),
    /// Recursive doubling over every rank in Rabenseifner's order: `log2(p)` exchanges of
    /// the whole message, the first ones inside the nodes. Small messages on jobs with few
    /// ranks per node, where the hierarchy's climb and descent inside the node cost more
    /// than the exchanges they save.
    RecursiveDoubling,
}

impl AllreduceAlg {
    /// Whether it runs over every rank as one exchange, rather than through the
    /// hierarchy's groups.
    pub fn is_flat(self) -> bool {
        matches!(
            self,
            AllreduceAlg::Ring | AllreduceAlg::Rabenseifner(_) | AllreduceAlg::RecursiveDoubling
        )
    }

    /// Whether it runs in the halving order ([`crate::remap::halving`]).
    pub fn uses_halving_order(self) -> bool {
        matches!(
            self,
            AllreduceAlg::Rabenseifner(_) | AllreduceAlg::RecursiveDoubling
        )
    }
}

impl FromStr for AllreduceAlg {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "rb" => Ok(AllreduceAlg::ReduceBcast),
            "rab" | "rab:rd" => Ok(AllreduceAlg::ReduceAllreduceBcast(
                TopAlg::RecursiveDoubling,
            )),
            "rab:ring" => Ok(AllreduceAlg::ReduceAllreduceBcast(TopAlg::Ring)),
            "ring" => Ok(AllreduceAlg::Ring),
            "rabenseifner" => Ok(AllreduceAlg::Rabenseifner(0)),
            "rd" => Ok(AllreduceAlg::RecursiveDoubling),
            _ => match s.strip_prefix("rabenseifner:") {
                Some(piece) => {
                    let bytes = pipeline_bytes(parse_bytes(piece)?, "piece")
                        .map_err(|e| format!("{s:?}: {e}"))?;
                    Ok(AllreduceAlg::Rabenseifner(bytes))
                }
                None => Err(format!(
                    "unknown allreduce algorithm {s:?}; use rb, rab:rd, rab:ring, ring, \
                     rabenseifner[:PIECE] or rd"
                )),
            },
        }
    }
}

impl fmt::Display for AllreduceAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AllreduceAlg::ReduceBcast => f.write_str("rb"),
            AllreduceAlg::ReduceAllreduceBcast(TopAlg::RecursiveDoubling) => f.write_str("rab:rd"),
            AllreduceAlg::ReduceAllreduceBcast(TopAlg::Ring) => f.write_str("rab:ring"),
            AllreduceAlg::Ring => f.write_str("ring"),
            AllreduceAlg::Rabenseifner(0) => f.write_str("rabenseifner"),
            AllreduceAlg::Rabenseifner(piece) => {
                write!(f, "rabenseifner:{}", format_bytes((*piece).into()))
            }
            AllreduceAlg::RecursiveDoubling => f.write_str("rd"),
        }
    }
}

/// The Allgather algorithms (TopoMPI's two forms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllgatherAlg {
    /// Gather up the hierarchy to the top group, exchange among its members (recursive
    /// doubling where their number is a power of two, else a ring; or a ring), then
    /// broadcast down from each.
    Hierarchical(TopAlg),
    /// Recursive doubling over the whole job, ranks remapped so that the heavy steps stay
    /// inside nodes; Bruck's exchange, remapped, when the job's size is not a power of two.
    RecursiveDoubling,
    /// A ring over the whole job, ranks in node-major order: `n - 1` steps of one block
    /// each, every node boundary crossed by one edge of the ring.
    Ring,
}

impl FromStr for AllgatherAlg {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "hier" | "hier:rd" => Ok(AllgatherAlg::Hierarchical(TopAlg::RecursiveDoubling)),
            "hier:ring" => Ok(AllgatherAlg::Hierarchical(TopAlg::Ring)),
            "rd" => Ok(AllgatherAlg::RecursiveDoubling),
            "ring" => Ok(AllgatherAlg::Ring),
            _ => Err(format!(
                "unknown allgather algorithm {s:?}; use hier:rd, hier:ring, rd or ring"
            )),
        }
    }
}

impl fmt::Display for AllgatherAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AllgatherAlg::Hierarchical(TopAlg::RecursiveDoubling) => "hier:rd",
            AllgatherAlg::Hierarchical(TopAlg::Ring) => "hier:ring",
            AllgatherAlg::RecursiveDoubling => "rd",
            AllgatherAlg::Ring => "ring",
        })
    }
}

/// The Alltoall algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlltoallAlg {
    /// Every rank's blocks climb to the job's top group as a Gather's do, its members
    /// exchange one message per pair (the blocks between the ranks under each), and the
    /// results go down as a Scatter's do: one message per pair of nodes.
    Aggregated,
    /// One message per pair of nodes as aggregated, but each node's pairs dealt out over
    /// its ranks: each rank gathers, inside its node, the blocks for the nodes it carries,
    /// sends them, and hands what it receives on inside its node.
    Spread,
    /// Every rank sends each other rank its block straight, all at once.
    Pairwise,
}

impl FromStr for AlltoallAlg {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "aggregated" => Ok(AlltoallAlg::Aggregated),
            "pairwise" => Ok(AlltoallAlg::Pairwise),
            "spread" => Ok(AlltoallAlg::Spread),
            _ => Err(format!(
                "unknown alltoall algorithm {s:?}; use spread, aggregated or pairwise"
            )),
        }
    }
}

impl fmt::Display for AlltoallAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AlltoallAlg::Aggregated => "aggregated",
            AlltoallAlg::Pairwise => "pairwise",
            AlltoallAlg::Spread => "spread",
        })
    }
}

/// The Reduce_scatter_block forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceScatterAlg {
    /// The hierarchical Reduce of every rank's blocks to rank 0, then the hierarchical
    /// Scatter of the result's blocks from rank 0.
    Root,
    /// The whole contribution reduced to the members of the job's top group, a ring
    /// reduce-scatter among them of the blocks under each, then a Scatter down from each.
    Leaders,
    /// The Allreduce of the whole contribution (its algorithms and rules), of which each
    /// rank keeps its block: the reduction's work spread over every rank.
    Allreduce,
    /// Recursive halving over every rank in the hierarchy's order
    /// ([`crate::remap::halving`]): the blocks are first put in that order, the heavy
    /// steps stay inside the nodes, and only the last, smallest ones cross the network,
    /// from every rank of a node at once. Half the Allreduce form's steps.
    Halving,
    /// The ring over every rank in node-major order (the reduce-scatter half of the
    /// Allreduce's ring): `n - 1` steps, each rank sending and receiving one block per
    /// step, every node boundary crossed by one edge. Half the data of the Allreduce's
    /// form, and no folding where the job's size is not a power of two.
    Ring,
}

impl FromStr for ReduceScatterAlg {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "root" => Ok(ReduceScatterAlg::Root),
            "leaders" => Ok(ReduceScatterAlg::Leaders),
            "allreduce" => Ok(ReduceScatterAlg::Allreduce),
            "halving" => Ok(ReduceScatterAlg::Halving),
            "ring" => Ok(ReduceScatterAlg::Ring),
            _ => Err(format!(
                "unknown reduce_scatter algorithm {s:?}; use root, leaders, allreduce, halving \
                 or ring"
            )),
        }
    }
}

impl fmt::Display for ReduceScatterAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ReduceScatterAlg::Root => "root",
            ReduceScatterAlg::Leaders => "leaders",
            ReduceScatterAlg::Allreduce => "allreduce",
            ReduceScatterAlg::Halving => "halving",
            ReduceScatterAlg::Ring => "ring",
        })
    }
}

/// How Gatherv and Scatterv move their blocks, whose lengths only the root knows in full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootedVAlg {
    /// Through the leaders, as Gather and Scatter: first the blocks' lengths (a Gather or
    /// Scatter of one number per rank), so that each leader knows those under it, then the
    /// blocks: one message per node between nodes, two steps.
    Leaders,
    /// Straight between the root and every rank, all at once: one step, a message per rank.
    Direct,
}

impl FromStr for RootedVAlg {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "leaders" => Ok(RootedVAlg::Leaders),
            "direct" => Ok(RootedVAlg::Direct),
            _ => Err(format!(
                "unknown gatherv/scatterv algorithm {s:?}; use leaders or direct"
            )),
        }
    }
}

impl fmt::Display for RootedVAlg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RootedVAlg::Leaders => "leaders",
            RootedVAlg::Direct => "direct",
        })
    }
}
