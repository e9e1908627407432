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
//! ```

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::level::LevelName;

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

/// Every setting: its key in the plan, its environment variable and what it means.
pub const KEYS: &[(&str, &str, &str)] = &[
    (
        "slots",
        "TOPO_RUN_SLOTS",
        "slots per shared-memory queue (2..=1024, default 8)",
    ),
    (
        "fragment",
        "TOPO_RUN_FRAGMENT",
        "bytes per shared-memory slot, a multiple of 64 (64..=16M, default 128K)",
    ),
    (
        "chunk",
        "TOPO_RUN_CHUNK",
        "pipeline chunk: larger messages move through the levels in pieces of this size \
         (4K..=1G); one size, or rules per collective and message size, e.g. \
         bcast<128K=16K,allreduce=1M,256K (default: docs/runtime.md, Settings)",
    ),
    (
        "spin",
        "TOPO_RUN_SPIN",
        "busy-wait rounds before a waiting rank yields its core; 0 yields at once \
         (oversubscribed nodes), default 1024",
    ),
    (
        "single-copy",
        "TOPO_RUN_SINGLE_COPY",
        "messages of at least this size are copied once, straight from the sender's buffer \
         (process_vm_readv), instead of through the queues; 0 turns that off (default 16K); \
         among ranks of one group inside the node (a shared cache or memory) from twice \
         this size, and a reduce's partial results stay in the queues",
    ),
    (
        "progress",
        "TOPO_RUN_PROGRESS",
        "what advances nonblocking collectives while the program computes: none (its own \
         MPI calls, tests and waits; the default) or thread (also a progress thread per \
         process; worth it with a free core or hardware thread per rank, never when ranks \
         outnumber cores)",
    ),
    (
        "barrier",
        "TOPO_RUN_BARRIER",
        "how MPI_Barrier's top group meets: dissemination (everyone leaves one transfer after \
         the last arrival; the default) or root-first (the group's first member waits for \
         the others and then releases them, so it leaves one transfer before them, as Open \
         MPI's coll/sm does: a broadcast from it right after the barrier finds its data \
         waiting, at the cost of one more transfer per barrier)",
    ),
    (
        "bcast",
        "TOPO_RUN_BCAST",
        "broadcast rules, e.g. numa=knomial:4,node=flat (algorithms: flat, binomial, knomial:K, \
         scatter-allgather)",
    ),
    (
        "reduce",
        "TOPO_RUN_REDUCE",
        "reduce rules, e.g. intra=flat,inter<64K=knomial:4 (algorithms: flat, binomial, knomial:K, \
         reduce-scatter-gather)",
    ),
    (
        "allreduce",
        "TOPO_RUN_ALLREDUCE",
        "allreduce rules, e.g. <64K=rab:rd,*=rab:ring (rb = reduce then bcast; rab:rd / rab:ring = \
         reduce, allreduce among the top group by recursive doubling or ring, then bcast; ring, \
         rabenseifner[:PIECE], rd = over every rank in the hierarchy's order, Rabenseifner's in \
         overlapping pieces of PIECE bytes if given)",
    ),
    (
        "allgather",
        "TOPO_RUN_ALLGATHER",
        "allgather rules, by the total gathered size, e.g. <64K=rd,*=hier (hier:rd / hier:ring \
         = gather up the hierarchy, exchange among the top group by recursive doubling or \
         ring, then bcast down; hier = hier:rd; rd = recursive doubling over the whole job with \
         TopoMPI's rank remapping, or Bruck's exchange, remapped, when the job's size is not \
         a power of two; ring = a ring over the whole job in node-major order)",
    ),
];

/// A collective, as pipeline-chunk rules name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collective {
    Bcast,
    Reduce,
    Allreduce,
    Allgather,
}

impl Collective {
    /// Every collective that pipelines.
    pub const ALL: [Collective; 4] = [
        Collective::Bcast,
        Collective::Reduce,
        Collective::Allreduce,
        Collective::Allgather,
    ];

    /// Its name in settings and rules files.
    pub fn key(self) -> &'static str {
        match self {
            Collective::Bcast => "bcast",
            Collective::Reduce => "reduce",
            Collective::Allreduce => "allreduce",
            Collective::Allgather => "allgather",
        }
    }
}

impl FromStr for Collective {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Collective::ALL
            .into_iter()
            .find(|c| c.key() == s)
            .ok_or_else(|| {
                format!("unknown collective {s:?}; use bcast, reduce, allreduce or allgather")
            })
    }
}

/// One `[COLLECTIVE][<BYTES]=CHUNK` pipeline-chunk rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkRule {
    /// The collective it applies to (`None`: every one).
    pub collective: Option<Collective>,
    /// It applies to messages smaller than this many bytes (an Allgather's whole result).
    pub below: Option<u64>,
    /// The chunk in bytes.
    pub bytes: u32,
}

impl ChunkRule {
    fn matches(&self, c: Collective, bytes: usize) -> bool {
        self.collective.is_none_or(|x| x == c) && self.below.is_none_or(|b| (bytes as u64) < b)
    }
}

impl fmt::Display for ChunkRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.collective.map_or("", Collective::key);
        match self.below {
            Some(b) => write!(f, "{c}<{}", format_bytes(b))?,
            None if c.is_empty() => f.write_str("*")?,
            None => f.write_str(c)?,
        }
        write!(f, "={}", format_bytes(self.bytes.into()))
    }
}

/// The built-in pipeline chunks, after the user's rules, measured on 2 emulated nodes x 2
/// (docs/runtime.md, "Pipeline chunks"): Broadcasts below 256 KiB in 16 KiB pieces,
/// larger ones and Reduce and Allreduce in 1 MiB pieces (an Allreduce's pieces do not
/// overlap each other, so each piece only costs), everything else in [`DEFAULT_CHUNK`].
const CHUNK_DEFAULTS: [ChunkRule; 5] = [
    ChunkRule {
        collective: Some(Collective::Bcast),
        below: Some(256 << 10),
        bytes: 16 << 10,
    },
    ChunkRule {
        collective: Some(Collective::Bcast),
        below: None,
        bytes: 1 << 20,
    },
    ChunkRule {
        collective: Some(Collective::Reduce),
        below: None,
        bytes: 1 << 20,
    },
    ChunkRule {
        collective: Some(Collective::Allreduce),
        below: None,
        bytes: 1 << 20,
    },
    ChunkRule {
        collective: None,
        below: None,
        bytes: DEFAULT_CHUNK,
    },
];

/// `bytes` as the size of a pipeline's pieces (a chunk, Rabenseifner's piece), which must be
/// between 4 KiB and 1 GiB; else what `what` must be.
fn pipeline_bytes(bytes: u64, what: &str) -> std::result::Result<u32, String> {
    const RANGE: std::ops::RangeInclusive<u64> = 4 << 10..=1 << 30;
    if RANGE.contains(&bytes) {
        Ok(bytes as u32)
    } else {
        Err(format!(
            "the {what} must be between {} and {} bytes",
            RANGE.start(),
            RANGE.end()
        ))
    }
}

/// Parses comma-separated `[COLLECTIVE][<BYTES]=CHUNK` rules; a bare `CHUNK` is `*=CHUNK`.
fn parse_chunk_rules(text: &str) -> std::result::Result<Vec<ChunkRule>, String> {
    let mut rules = Vec::new();
    for (part, collective, below, size) in rule_parts(text)? {
        let collective = match collective {
            "" | "*" => None,
            c => Some(c.parse().map_err(|e| format!("rule {part:?}: {e}"))?),
        };
        let bytes = parse_bytes(size)?;
        let bytes = pipeline_bytes(bytes, "chunk").map_err(|e| format!("rule {part:?}: {e}"))?;
        rules.push(ChunkRule {
            collective,
            below,
            bytes,
        });
    }
    if rules.is_empty() {
        return Err("no chunk given".to_string());
    }
    Ok(rules)
}

/// Where a rule applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every group.
    Any,
    /// Groups whose members share a node (shared-memory queues).
    Intra,
    /// Groups that span nodes (MPI point-to-point).
    Inter,
    /// One level.
    Level(LevelName),
}

impl Scope {
    fn matches(self, level: LevelName, intra: bool) -> bool {
        match self {
            Scope::Any => true,
            Scope::Intra => intra,
            Scope::Inter => !intra,
            Scope::Level(l) => l == level,
        }
    }
}

/// One `[SCOPE][>MEMBERS][<BYTES]=ALGORITHM` rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule<A> {
    /// Where it applies.
    pub scope: Scope,
    /// It applies to groups of more than this many members only (broadcast and reduce
    /// rules; the Allreduce's and Allgather's are not per group).
    pub more_than: Option<u32>,
    /// It applies to messages smaller than this many bytes.
    pub below: Option<u64>,
    /// What to run.
    pub algorithm: A,
}

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
fn parse_tree(s: &str, extra: &str) -> std::result::Result<Option<u32>, String> {
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
/// [`ALLREDUCE_EARLY_RANKS`] ranks or more: on 16 and 128 nodes x 32 and 16 x 128 the
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

/// Parses `123`, `8K`, `16M`, `1G` (powers of 1024).
pub fn parse_bytes(s: &str) -> std::result::Result<u64, String> {
    let (digits, shift) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{s:?} is not a byte count (like 4096, 8K or 16M)"));
    }
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .filter(|&n| n < 1 << 40)
        .ok_or_else(|| format!("{s:?} is too large"))
}

/// Writes a byte count as [`parse_bytes`] reads it, with the largest suffix that divides
/// it exactly: `4096` → `4K`, `1536` → `1536`, `16777216` → `16M`.
pub fn format_bytes(n: u64) -> String {
    for (shift, suffix) in [(30, 'G'), (20, 'M'), (10, 'K')] {
        if n != 0 && n.is_multiple_of(1 << shift) {
            return format!("{}{suffix}", n >> shift);
        }
    }
    n.to_string()
}

/// One rule of a list, split: the rule's text, `WHERE`, the bound and `VALUE`.
type RulePart<'a> = (&'a str, &'a str, Option<u64>, &'a str);

/// Splits comma-separated `[WHERE][<BYTES]=VALUE` rules (a bare `VALUE` is `*=VALUE`;
/// `WHERE` may end in a group-size clause `>MEMBERS`, see [`parse_rules`]).
fn rule_parts(text: &str) -> std::result::Result<Vec<RulePart<'_>>, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lhs, value) = part.split_once('=').unwrap_or(("*", part));
        let (head, below) = match lhs.split_once('<') {
            Some((head, bytes)) => (head, Some(parse_bytes(bytes)?)),
            None => (lhs, None),
        };
        out.push((part, head, below, value));
    }
    Ok(out)
}

/// Parses `[SCOPE][>MEMBERS][<BYTES]=ALGORITHM` rules; `per_group`: whether a rule may
/// name a group size (broadcast and reduce rules).
fn parse_rules<A: FromStr<Err = String>>(
    text: &str,
    per_group: bool,
) -> std::result::Result<Vec<Rule<A>>, String> {
    let mut rules = Vec::new();
    for (part, head, below, alg) in rule_parts(text)? {
        let (scope, more_than) = match head.split_once('>') {
            Some(_) if !per_group => {
                return Err(format!(
                    "rule {part:?}: a group size (>MEMBERS) applies to bcast and reduce rules only"
                ));
            }
            Some((scope, members)) => {
                let m = members.parse::<u32>().map_err(|_| {
                    format!("rule {part:?}: {members:?} is not a number of members (like intra>2)")
                })?;
                (scope, Some(m))
            }
            None => (head, None),
        };
        let scope = match scope {
            "" | "*" => Scope::Any,
            "intra" => Scope::Intra,
            "inter" => Scope::Inter,
            level => Scope::Level(level.parse().map_err(|e| format!("rule {part:?}: {e}"))?),
        };
        let algorithm = alg.parse().map_err(|e| format!("rule {part:?}: {e}"))?;
        rules.push(Rule {
            scope,
            more_than,
            below,
            algorithm,
        });
    }
    Ok(rules)
}

/// The first rule of `rules`, then of `defaults`, that applies to a group of `members` at
/// `level` (`None`: a rule that is not per group, which no group-size clause matches).
fn pick<A: Copy>(
    rules: &[Rule<A>],
    defaults: &[Rule<A>],
    level: LevelName,
    intra: bool,
    members: Option<usize>,
    bytes: usize,
) -> A {
    rules
        .iter()
        .chain(defaults)
        .find(|r| {
            r.scope.matches(level, intra)
                && r.more_than
                    .is_none_or(|m| members.is_some_and(|n| n > m as usize))
                && r.below.is_none_or(|b| (bytes as u64) < b)
        })
        .map(|r| r.algorithm)
        .unwrap_or(defaults[defaults.len() - 1].algorithm)
}

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
            nodes: 1,
            ranks: 1,
        }
    }
}

const BCAST_DEFAULTS: [Rule<BcastAlg>; 2] = [
    Rule {
        scope: Scope::Intra,
        more_than: None,
        below: None,
        algorithm: BcastAlg::Flat,
    },
    Rule {
        scope: Scope::Any,
        more_than: None,
        below: None,
        algorithm: BcastAlg::Knomial(2),
    },
];

const REDUCE_DEFAULTS: [Rule<ReduceAlg>; 5] = [
    Rule {
        scope: Scope::Intra,
        more_than: None,
        below: Some(REDUCE_FLAT_BELOW),
        algorithm: ReduceAlg::Flat,
    },
    Rule {
        scope: Scope::Intra,
        more_than: Some(2),
        below: Some(REDUCE_RSG_FROM),
        algorithm: ReduceAlg::Knomial(4),
    },
    Rule {
        scope: Scope::Intra,
        more_than: Some(2),
        below: None,
        algorithm: ReduceAlg::ReduceScatterGather,
    },
    Rule {
        scope: Scope::Intra,
        more_than: None,
        below: None,
        algorithm: ReduceAlg::Flat,
    },
    Rule {
        scope: Scope::Any,
        more_than: None,
        below: None,
        algorithm: ReduceAlg::Knomial(2),
    },
];

/// Inside a node, reduces below this size are flat in every group: the root combines each
/// member's message as it comes, which is quickest while the combines are short.
const REDUCE_FLAT_BELOW: u64 = 512;

/// Inside a node, groups of more than two members reduce by a 4-nomial tree from
/// [`REDUCE_FLAT_BELOW`] and by reduce-scatter-gather from this size, where the root of a
/// flat group would combine every member's whole message one after the other: on 16 nodes
/// x 32 and x 128 ranks `topo-run simulate` predicts the flat reduce at 1.03-1.72 x the
/// flat binomial tree from 4 KiB, reduce-scatter-gather at 0.60-0.95 (docs/simulate.md).
/// Groups of two stay flat at every size: on 1 node x 2, reduce-scatter-gather measured
/// 1.2-1.9 x the flat reduce from 4 KiB to 4 MiB (the root reads the other's buffer once,
/// by single copy, and combines as it reads).
const REDUCE_RSG_FROM: u64 = 4 << 10;

/// Two rules for every group: `small` below `below` bytes, `large` from there.
const fn below_then<A: Copy>(below: u64, small: A, large: A) -> [Rule<A>; 2] {
    [
        Rule {
            scope: Scope::Any,
            more_than: None,
            below: Some(below),
            algorithm: small,
        },
        Rule {
            scope: Scope::Any,
            more_than: None,
            below: None,
            algorithm: large,
        },
    ]
}

/// On one node: the hierarchy's forms, the ring at the top for large messages (pipelined
/// through the levels below it when blocking).
const ALLREDUCE_DEFAULTS: [Rule<AllreduceAlg>; 2] = below_then(
    64 << 10,
    AllreduceAlg::ReduceAllreduceBcast(TopAlg::RecursiveDoubling),
    AllreduceAlg::ReduceAllreduceBcast(TopAlg::Ring),
);

/// On more than one node: Rabenseifner's in the hierarchy's order from 64 KiB, where
/// `topo-run simulate` predicts it faster than every flat algorithm and than the
/// hierarchy's forms on 16 to 1,024 nodes (docs/simulate.md): only a share of each rank's
/// message crosses the network, from every rank of the node at once. On 2 nodes x 2 it
/// took 0.49-0.86 of Open MPI's time from 64 KiB to 4 MiB, where `rab:ring` took 0.65-0.91.
const ALLREDUCE_DEFAULTS_NODES: [Rule<AllreduceAlg>; 2] = below_then(
    64 << 10,
    AllreduceAlg::ReduceAllreduceBcast(TopAlg::RecursiveDoubling),
    AllreduceAlg::Rabenseifner(0),
);

/// Jobs of at least this many ranks on more than one node take Rabenseifner's from 4 KiB:
/// on 2-128 nodes x 8-128 ranks the simulator predicts it at 0.12-1.006 of the best flat
/// algorithm from 8 to 32 KiB, where recursive doubling among the node leaders is up to
/// 2.9 x (cyclic placement); at 4 KiB, on 16 and 128 nodes x 16-128 ranks, at 0.22-0.999
/// where the leaders' form, once the node's combines are counted one after the other on a
/// core, is up to 1.18 x (cyclic placement). On 2 nodes x 2 (4 ranks) the leaders' recursive doubling
/// measured 23-29 us against Rabenseifner's 45-55 us from 8 to 32 KiB, which the model
/// does not see (docs/simulate.md): small jobs keep it.
const ALLREDUCE_EARLY_RANKS: u32 = 16;

/// See [`ALLREDUCE_EARLY_RANKS`].
const ALLREDUCE_DEFAULTS_MANY: [Rule<AllreduceAlg>; 2] = below_then(
    4 << 10,
    AllreduceAlg::ReduceAllreduceBcast(TopAlg::RecursiveDoubling),
    AllreduceAlg::Rabenseifner(RABENSEIFNER_PIECE),
);

/// With few ranks per node, small messages take recursive doubling over every rank in the
/// hierarchy's order: climbing and descending the node's levels costs more there than the
/// exchanges inside the node that it saves, and the network interface carries few
/// messages per node either way. The simulator (2, 16 and 128 nodes, docs/simulate.md)
/// predicts the hierarchical form at 1.002-1.21 x recursive doubling below 1 KiB with 8 and
/// 16 ranks per node and below 256 B with 32, where this form takes exactly recursive
/// doubling's time, and the hierarchical form ahead beyond those sizes, and at every size
/// with 4 or fewer and with 48 or more ranks per node. Each entry: the most ranks per node
/// and the size below which recursive doubling runs.
const ALLREDUCE_RD_BELOW: [(u32, u64); 2] = [(16, 1 << 10), (32, 256)];

/// The fewest ranks per node that take [`ALLREDUCE_RD_BELOW`]'s recursive doubling.
const ALLREDUCE_RD_MIN_PER_NODE: u32 = 5;

/// [`ALLREDUCE_DEFAULTS_MANY`] with recursive doubling over every rank below `below`.
const fn rd_then_many(below: u64) -> [Rule<AllreduceAlg>; 3] {
    [
        Rule {
            scope: Scope::Any,
            more_than: None,
            below: Some(below),
            algorithm: AllreduceAlg::RecursiveDoubling,
        },
        ALLREDUCE_DEFAULTS_MANY[0],
        ALLREDUCE_DEFAULTS_MANY[1],
    ]
}

/// See [`ALLREDUCE_RD_BELOW`].
const ALLREDUCE_DEFAULTS_FEW_PER_NODE: [[Rule<AllreduceAlg>; 3]; 2] = [
    rd_then_many(ALLREDUCE_RD_BELOW[0].1),
    rd_then_many(ALLREDUCE_RD_BELOW[1].1),
];

/// Recursive doubling for jobs whose size is a power of two: on 1 node x 2 it took
/// 0.26-1.02 of Open MPI's `MPI_Allgather` from 4 B to 4 MiB per rank, the hierarchical form
/// 0.74-3.05; on 2 emulated nodes x 2, 930 us against the ring's 1,200 at 256 KiB per rank
/// and 18.6 ms against 21 at 4 MiB (docs/runtime.md).
const ALLGATHER_DEFAULTS: [Rule<AllgatherAlg>; 1] = [Rule {
    scope: Scope::Any,
    more_than: None,
    below: None,
    algorithm: AllgatherAlg::RecursiveDoubling,
}];

/// Other job sizes: Bruck's exchange (`rd`) for small results, where its `log n` rounds
/// beat the ring's `n - 1`, and the ring from 32 KiB gathered, where Bruck's scratch and
/// final rotation cost more: on 1 node x 3 the ring took 0.75-0.85 of Bruck's time from
/// 16 KiB per rank (48 KiB gathered) up and 0.6-0.9 from 1 MiB (docs/runtime.md).
const ALLGATHER_DEFAULTS_ANY_SIZE: [Rule<AllgatherAlg>; 2] = below_then(
    32 << 10,
    AllgatherAlg::RecursiveDoubling,
    AllgatherAlg::Ring,
);

/// Jobs of 16 to 4,096 ranks on more than one node take the ring (in switch-major,
/// node-major order) from 4 KiB per rank: `topo-run simulate` predicts it at the flat
/// ring's time under block placement and 0.75-0.95 of the best flat algorithm under cyclic
/// placement from 16 KiB, where recursive doubling's network steps and the node's heavy
/// steps, one after the other, lose to the ring, which overlaps them (docs/simulate.md).
/// Beyond 4,096 ranks the ring's `n - 1` steps cost more than they save (and the
/// simulator cannot run them); smaller jobs keep the measured defaults above.
const ALLGATHER_RING_RANKS: usize = 16;

/// See [`ALLGATHER_RING_RANKS`].
const ALLGATHER_RING_MAX_RANKS: usize = 4096;

/// See [`ALLGATHER_RING_RANKS`].
const ALLGATHER_RING_BLOCK: usize = 4 << 10;

/// The variable that sets the most contexts (one shared-memory segment each) a process
/// of the PMPI library keeps: world's and its congruent communicators'.
pub const MAX_COMMS_ENV: &str = "TOPO_RUN_MAX_COMMS";

/// The most contexts a process keeps without [`MAX_COMMS_ENV`].
pub const DEFAULT_MAX_COMMS: usize = 16;

/// The most contexts a process keeps, from the value of [`MAX_COMMS_ENV`] if set (one that
/// is not a number counts as unset).
pub fn max_comms(value: Option<&str>) -> usize {
    value
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_MAX_COMMS)
}

impl Settings {
    /// An upper bound on the bytes of one node's shared-memory segment for `ranks` local
    /// ranks with these slots and fragment: a header of 64 bytes plus 80 per rank, and per
    /// rank a queue of `slots` fragments with a 64-byte control word per slot and reader,
    /// each part rounded up to 4 KiB pages. The runtime's layout tests check that its
    /// segments never exceed it; `topo-run doctor` reserves this much to test `/dev/shm`.
    pub fn segment_bound(&self, ranks: u64) -> u64 {
        const PAGE: u64 = 4096;
        let (slots, fragment) = (u64::from(self.slots), u64::from(self.fragment));
        let header = 64 + 144 * ranks + 2 * PAGE;
        let queue = slots * ranks * 64 + slots * fragment + 2 * PAGE;
        header + ranks * queue
    }

    /// Reads `key:value` pairs (as stored in a plan), rejecting unknown keys and bad values.
    pub fn from_pairs<K: AsRef<str>, V: AsRef<str>>(pairs: &[(K, V)]) -> Result<Self> {
        let mut s = Settings::default();
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
                "single-copy" => s.single_copy = bytes(0, 1 << 30)?,
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
                _ => {
                    return Err(bad(format!(
                        "unknown setting; known: {}",
                        KEYS.iter().map(|k| k.0).collect::<Vec<_>>().join(", ")
                    )));
                }
            }
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

    /// The built-in Allgather rules for a job of `ranks` ranks on [`Settings::nodes`]
    /// nodes.
    fn allgather_defaults(&self, ranks: usize) -> [Rule<AllgatherAlg>; 2] {
        if self.nodes > 1 && (ALLGATHER_RING_RANKS..=ALLGATHER_RING_MAX_RANKS).contains(&ranks) {
            let below = (ALLGATHER_RING_BLOCK * ranks) as u64;
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
    /// [`ALLREDUCE_RD_MIN_PER_NODE`] to 32 ranks per node, the entry of
    /// [`ALLREDUCE_RD_BELOW`] its ranks per node fall under; `None` for other jobs.
    fn few_per_node(&self) -> Option<usize> {
        let per_node = self.ranks.div_ceil(self.nodes.max(1));
        ALLREDUCE_RD_BELOW
            .iter()
            .position(|&(most, _)| per_node <= most)
            .filter(|_| per_node >= ALLREDUCE_RD_MIN_PER_NODE)
            .filter(|_| self.nodes > 1 && self.ranks >= ALLREDUCE_EARLY_RANKS)
    }

    /// The barrier: the user's, else the flat dissemination with the nodes interleaved for
    /// the jobs whose small Allreduce takes recursive doubling over every rank (5 to 32
    /// ranks per node, [`Settings::few_per_node`]): there the simulator predicts the
    /// hierarchy's barrier at up to 1.05 x a dissemination over ranks placed cyclically,
    /// which this one is in any placement (docs/simulate.md); else the hierarchy's, with a
    /// dissemination among the node leaders.
    pub fn barrier_alg(&self) -> BarrierAlg {
        self.barrier.unwrap_or(if self.few_per_node().is_some() {
            BarrierAlg::Flat
        } else {
            BarrierAlg::Dissemination
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_print_as_they_parse() {
        for (n, text) in [
            (0, "0"),
            (64, "64"),
            (1536, "1536"),
            (4096, "4K"),
            (16 << 20, "16M"),
        ] {
            assert_eq!(format_bytes(n), text);
            assert_eq!(parse_bytes(text), Ok(n));
        }
        for n in [1u64, 63, 1 << 10, 3 << 20, (1 << 30) + 1024, 5 << 30] {
            assert_eq!(parse_bytes(&format_bytes(n)), Ok(n));
        }
    }

    fn lvl(s: &str) -> LevelName {
        s.parse().unwrap()
    }

    #[test]
    fn flat_allgather_algs_cover_every_choice() {
        let d = Settings::default();
        assert_eq!(d.flat_allgather_algs(4), [AllgatherAlg::RecursiveDoubling]);
        assert_eq!(
            d.flat_allgather_algs(3),
            [AllgatherAlg::RecursiveDoubling, AllgatherAlg::Ring]
        );
        let s = Settings::from_pairs(&[("allgather", "<64K=ring,*=hier")]).unwrap();
        // The user's rules first, then the defaults behind them (never reached for a
        // power of two here, but the set may be larger than needed, never smaller).
        assert_eq!(
            s.flat_allgather_algs(4),
            [AllgatherAlg::Ring, AllgatherAlg::RecursiveDoubling]
        );
        // Large jobs on several nodes: the ring from 4 KiB per rank, up to 4,096 ranks.
        let many = Settings {
            nodes: 4,
            ..Settings::default()
        };
        assert_eq!(
            many.flat_allgather_algs(64),
            [AllgatherAlg::RecursiveDoubling, AllgatherAlg::Ring]
        );
        assert_eq!(many.allgather_for(64 << 12, 64), AllgatherAlg::Ring);
        assert_eq!(
            many.allgather_for((64 << 12) - 1, 64),
            AllgatherAlg::RecursiveDoubling
        );
        assert_eq!(
            many.flat_allgather_algs(8),
            [AllgatherAlg::RecursiveDoubling]
        );
        assert_eq!(
            many.flat_allgather_algs(8192),
            [AllgatherAlg::RecursiveDoubling]
        );
        for ranks in [2, 3, 4, 6, 8, 32, 48] {
            for bytes in [8, 1 << 10, 32 << 10, 1 << 20, 64 << 20] {
                for set in [&d, &s, &many] {
                    let alg = set.allgather_for(bytes, ranks);
                    assert!(
                        matches!(alg, AllgatherAlg::Hierarchical(_))
                            || set.flat_allgather_algs(ranks).contains(&alg)
                    );
                }
            }
        }
    }

    #[test]
    fn allgather_rules_by_the_gathered_size() {
        let d = Settings::default();
        assert_eq!(d.allgather_for(8, 4), AllgatherAlg::RecursiveDoubling);
        assert_eq!(d.allgather_for(1 << 30, 4), AllgatherAlg::RecursiveDoubling);
        // Other sizes: Bruck (rd) below 32 KiB gathered, the ring from there.
        assert_eq!(
            d.allgather_for((32 << 10) - 1, 3),
            AllgatherAlg::RecursiveDoubling
        );
        assert_eq!(d.allgather_for(32 << 10, 3), AllgatherAlg::Ring);
        let s = Settings::from_pairs(&[("allgather", "<64K=rd,*=hier")]).unwrap();
        for ranks in [3, 4] {
            assert_eq!(
                s.allgather_for((64 << 10) - 1, ranks),
                AllgatherAlg::RecursiveDoubling
            );
            assert_eq!(
                s.allgather_for(64 << 10, ranks),
                AllgatherAlg::Hierarchical(TopAlg::RecursiveDoubling)
            );
        }
        let e = Settings::from_pairs(&[("allgather", "bruck")]).unwrap_err();
        assert!(
            e.to_string().contains("use hier:rd, hier:ring, rd or ring"),
            "{e}"
        );
        for a in [
            AllgatherAlg::Hierarchical(TopAlg::RecursiveDoubling),
            AllgatherAlg::Hierarchical(TopAlg::Ring),
            AllgatherAlg::RecursiveDoubling,
            AllgatherAlg::Ring,
        ] {
            assert_eq!(a.to_string().parse::<AllgatherAlg>(), Ok(a));
        }
    }

    #[test]
    fn the_barrier_is_dissemination_unless_root_first_is_asked_for() {
        assert_eq!(Settings::default().barrier_alg(), BarrierAlg::Dissemination);
        for a in [
            BarrierAlg::Dissemination,
            BarrierAlg::RootFirst,
            BarrierAlg::Flat,
        ] {
            let s = Settings::from_pairs(&[("barrier", a.to_string())]).unwrap();
            assert_eq!(s.barrier_alg(), a);
        }
        // By shape: flat with 5 to 32 ranks per node on more than one node, from 16 ranks.
        for (nodes, ranks, alg) in [
            (16, 512, BarrierAlg::Flat),
            (2, 16, BarrierAlg::Flat),
            (16, 64, BarrierAlg::Dissemination),
            (16, 768, BarrierAlg::Dissemination),
            (1, 32, BarrierAlg::Dissemination),
            (2, 4, BarrierAlg::Dissemination),
        ] {
            let s = Settings {
                nodes,
                ranks,
                ..Settings::default()
            };
            assert_eq!(s.barrier_alg(), alg, "{nodes} nodes, {ranks} ranks");
            let asked = Settings {
                barrier: Some(BarrierAlg::RootFirst),
                ..s
            };
            assert_eq!(asked.barrier_alg(), BarrierAlg::RootFirst);
        }
        let e = Settings::from_pairs(&[("barrier", "tree")]).unwrap_err();
        assert!(
            e.to_string()
                .contains("use dissemination, root-first or flat"),
            "{e}"
        );
    }

    #[test]
    fn flat_allreduce_algorithms_are_named_and_listed() {
        let s =
            Settings::from_pairs(&[("allreduce", "<64K=rab:rd,<1M=ring,*=rabenseifner")]).unwrap();
        assert_eq!(s.allreduce_for(100 << 10), AllreduceAlg::Ring);
        assert_eq!(s.allreduce_for(4 << 20), AllreduceAlg::Rabenseifner(0));
        assert_eq!(
            s.flat_allreduce_algs(),
            [AllreduceAlg::Ring, AllreduceAlg::Rabenseifner(0)]
        );
        for a in ["ring", "rabenseifner", "rabenseifner:256K", "rd"] {
            assert_eq!(a.parse::<AllreduceAlg>().unwrap().to_string(), a);
        }
        // The piece: none when plain, a named one is kept, one out of range is refused.
        assert_eq!(
            "rabenseifner:64K".parse::<AllreduceAlg>(),
            Ok(AllreduceAlg::Rabenseifner(RABENSEIFNER_PIECE))
        );
        assert_eq!(
            "rabenseifner:1M".parse::<AllreduceAlg>(),
            Ok(AllreduceAlg::Rabenseifner(1 << 20))
        );
        for bad in ["rabenseifner:1K", "rabenseifner:2G", "rabenseifner:x"] {
            assert!(bad.parse::<AllreduceAlg>().is_err(), "{bad}");
        }
        assert!(
            "rabenseifner:1K"
                .parse::<AllreduceAlg>()
                .unwrap_err()
                .contains("the piece must be between 4096 and 1073741824 bytes")
        );
        assert!(Settings::default().flat_allreduce_algs().is_empty());
        // Built in: the hierarchy's forms on one node, Rabenseifner's (whole) from 64 KiB on
        // more.
        let two = Settings {
            nodes: 2,
            ..Settings::default()
        };
        assert_eq!(two.flat_allreduce_algs(), [AllreduceAlg::Rabenseifner(0)]);
        assert_eq!(two.allreduce_for(64 << 10), AllreduceAlg::Rabenseifner(0));
        assert_eq!(
            two.allreduce_for((64 << 10) - 1),
            AllreduceAlg::ReduceAllreduceBcast(TopAlg::RecursiveDoubling)
        );
        // From 16 ranks, from 4 KiB, in pieces.
        let many = Settings {
            nodes: 2,
            ranks: 16,
            ..Settings::default()
        };
        assert_eq!(
            many.allreduce_for(4 << 10),
            AllreduceAlg::Rabenseifner(RABENSEIFNER_PIECE)
        );
        assert_eq!(
            many.allreduce_for((4 << 10) - 1),
            AllreduceAlg::ReduceAllreduceBcast(TopAlg::RecursiveDoubling)
        );
        // With 5 to 32 ranks per node, recursive doubling over every rank for small
        // messages: below 1 KiB up to 16 per node, below 256 B up to 32.
        let rab_rd = AllreduceAlg::ReduceAllreduceBcast(TopAlg::RecursiveDoubling);
        let rd = AllreduceAlg::RecursiveDoubling;
        assert_eq!(many.allreduce_for(1023), rd);
        assert_eq!(many.allreduce_for(1024), rab_rd);
        assert_eq!(
            many.flat_allreduce_algs(),
            [rd, AllreduceAlg::Rabenseifner(RABENSEIFNER_PIECE)]
        );
        let shape = |nodes, per_node| Settings {
            nodes,
            ranks: nodes * per_node,
            ..Settings::default()
        };
        for (nodes, per_node, bytes, alg) in [
            (16, 32, 255, rd),
            (16, 32, 256, rab_rd),
            (16, 17, 256, rab_rd),
            (16, 16, 1023, rd),
            (16, 5, 8, rd),
            (16, 4, 8, rab_rd),
            (16, 48, 8, rab_rd),
            (1, 32, 8, rab_rd),
            (3, 5, 8, rab_rd),
        ] {
            assert_eq!(
                shape(nodes, per_node).allreduce_for(bytes),
                alg,
                "{nodes} x {per_node}, {bytes} B"
            );
        }
    }

    #[test]
    fn ring_algorithms_belong_to_their_collective() {
        let s = Settings::from_pairs(&[
            ("bcast", "inter=scatter-allgather"),
            ("reduce", "node=reduce-scatter-gather"),
            ("single-copy", "0"),
        ])
        .unwrap();
        assert_eq!(
            s.bcast_for(lvl("world"), false, 2, 8),
            BcastAlg::ScatterAllgather
        );
        assert_eq!(
            s.reduce_for(lvl("node"), true, 2, 8),
            ReduceAlg::ReduceScatterGather
        );
        assert_eq!(s.single_copy, 0);
        assert!(!s.progress_thread);
        let e = Settings::from_pairs(&[("reduce", "scatter-allgather")]).unwrap_err();
        assert!(e.to_string().contains("reduce-scatter-gather"), "{e}");
        assert!(Settings::from_pairs(&[("bcast", "reduce-scatter-gather")]).is_err());
    }

    #[test]
    fn defaults_and_user_rules() {
        let d = Settings::default();
        assert_eq!(d.bcast_for(lvl("numa"), true, 2, 8), BcastAlg::Flat);
        assert_eq!(
            d.bcast_for(lvl("switch1"), false, 2, 8),
            BcastAlg::Knomial(2)
        );
        assert_eq!(
            d.allreduce_for(1 << 20),
            AllreduceAlg::ReduceAllreduceBcast(TopAlg::Ring)
        );
        let s = Settings::from_pairs(&[
            ("bcast", "numa=knomial:4,inter<64K=flat"),
            ("fragment", "16K"),
            ("slots", "4"),
            ("allreduce", "rb"),
        ])
        .unwrap();
        assert_eq!(s.fragment, 16384);
        assert_eq!(s.slots, 4);
        assert_eq!(
            s.bcast_for(lvl("numa"), true, 2, 1 << 30),
            BcastAlg::Knomial(4)
        );
        assert_eq!(s.bcast_for(lvl("world"), false, 2, 100), BcastAlg::Flat);
        assert_eq!(
            s.bcast_for(lvl("world"), false, 2, 64 << 10),
            BcastAlg::Knomial(2)
        );
        assert_eq!(s.allreduce_for(4), AllreduceAlg::ReduceBcast);
    }

    #[test]
    fn a_rule_may_name_the_group_size() {
        let numa = lvl("numa");
        let s = Settings::from_pairs(&[("reduce", "intra>4<4K=knomial:3,intra=flat")]).unwrap();
        assert_eq!(s.reduce_for(numa, true, 4, 100), ReduceAlg::Flat);
        assert_eq!(s.reduce_for(numa, true, 5, 100), ReduceAlg::Knomial(3));
        assert_eq!(s.reduce_for(numa, true, 5, 4096), ReduceAlg::Flat);
        // The defaults: flat for groups of two and small messages, else by size.
        let d = Settings::default();
        assert_eq!(d.reduce_for(numa, true, 2, 1 << 20), ReduceAlg::Flat);
        assert_eq!(d.reduce_for(numa, true, 16, 511), ReduceAlg::Flat);
        assert_eq!(d.reduce_for(numa, true, 16, 512), ReduceAlg::Knomial(4));
        assert_eq!(
            d.reduce_for(numa, true, 3, 4096),
            ReduceAlg::ReduceScatterGather
        );
        assert_eq!(
            d.reduce_for(lvl("world"), false, 16, 1 << 20),
            ReduceAlg::Knomial(2)
        );
        for (key, value, needle) in [
            ("reduce", "intra>two=flat", "not a number of members"),
            ("allreduce", "*>2=ring", "bcast and reduce rules only"),
            ("allgather", ">2<4K=rd", "bcast and reduce rules only"),
        ] {
            let e = Settings::from_pairs(&[(key, value)])
                .unwrap_err()
                .to_string();
            assert!(e.contains(needle), "{value}: {e}");
        }
    }

    #[test]
    fn chunk_rules_by_collective_and_size() {
        let d = Settings::default();
        assert_eq!(d.chunk_for(Collective::Bcast, (256 << 10) - 1), 16 << 10);
        assert_eq!(d.chunk_for(Collective::Bcast, 256 << 10), 1 << 20);
        assert_eq!(d.chunk_for(Collective::Reduce, 4), 1 << 20);
        assert_eq!(d.chunk_for(Collective::Allreduce, 1 << 30), 1 << 20);
        assert_eq!(d.chunk_for(Collective::Allgather, 1 << 30), DEFAULT_CHUNK);
        let s = Settings::from_pairs(&[("chunk", "bcast<128K=16K,allreduce=1M,512K")]).unwrap();
        assert_eq!(s.chunk_for(Collective::Bcast, (128 << 10) - 1), 16 << 10);
        assert_eq!(s.chunk_for(Collective::Bcast, 128 << 10), 512 << 10);
        assert_eq!(s.chunk_for(Collective::Allreduce, 4), 1 << 20);
        assert_eq!(s.chunk_for(Collective::Reduce, 1 << 30), 512 << 10);
        // Without a rule for every size, the defaults take the rest.
        let s = Settings::from_pairs(&[("chunk", "<64K=8K")]).unwrap();
        assert_eq!(s.chunk_for(Collective::Allgather, 100), 8 << 10);
        assert_eq!(s.chunk_for(Collective::Allgather, 64 << 10), DEFAULT_CHUNK);
        // Rules print as they parse.
        let text = "bcast<128K=16K,allreduce=1M,<2M=64K,*=256K";
        let s = Settings::from_pairs(&[("chunk", text)]).unwrap();
        let shown: Vec<String> = s.chunk.iter().map(ToString::to_string).collect();
        assert_eq!(shown.join(","), text);
        for (v, needle) in [
            ("gather=1M", "unknown collective"),
            ("bcast<1Q=1M", "byte count"),
            (
                "bcast=1K",
                "rule \"bcast=1K\": the chunk must be between 4096 and 1073741824 bytes",
            ),
            ("", "no chunk"),
        ] {
            let e = Settings::from_pairs(&[("chunk", v)]).unwrap_err();
            assert!(e.to_string().contains(needle), "{v}: {e}");
        }
    }

    #[test]
    fn bad_settings_are_named() {
        for (k, v, needle) in [
            ("slots", "1", "2 to 1024"),
            ("fragment", "100", "multiple of 64"),
            ("fragment", "12Q", "byte count"),
            ("chunk", "1", "between"),
            ("bcast", "numa=ring", "unknown algorithm"),
            ("bcast", "numa", "unknown algorithm"),
            ("reduce", "nowhere=flat", "nowhere"),
            ("reduce", "knomial:1", "radix"),
            ("reduce", "*=knomial:1", "radix"),
            ("allreduce", "*=fast", "rb, rab:rd"),
            ("colour", "blue", "unknown setting"),
        ] {
            let e = Settings::from_pairs(&[(k, v)]).unwrap_err();
            assert!(e.to_string().contains(needle), "{k}={v}: {e}");
            assert!(e.to_string().contains(k), "{e}");
        }
    }
}
