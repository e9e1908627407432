//! The built-in rules, after the user's: which algorithm runs per level, message size and
//! job shape where no rule of the user's says otherwise, each with the measurement or the
//! simulation that chose it.

use super::DEFAULT_CHUNK;
use super::algorithms::{
    AllgatherAlg, AllreduceAlg, BcastAlg, RABENSEIFNER_PIECE, ReduceAlg, TopAlg,
};
use super::rules::{ChunkRule, Collective, Rule, Scope};

/// The built-in pipeline chunks, after the user's rules, measured on 2 emulated nodes x 2
/// (docs/runtime.md, "Pipeline chunks"): Broadcasts below 256 KiB in 16 KiB pieces,
/// larger ones and Reduce and Allreduce in 1 MiB pieces (an Allreduce's pieces do not
/// overlap each other, so each piece only costs), everything else in [`DEFAULT_CHUNK`].
pub(super) const CHUNK_DEFAULTS: [ChunkRule; 5] = [
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

pub(super) const BCAST_DEFAULTS: [Rule<BcastAlg>; 2] = [
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

pub(super) const REDUCE_DEFAULTS: [Rule<ReduceAlg>; 5] = [
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
pub(super) const REDUCE_FLAT_BELOW: u64 = 512;

/// Inside a node, groups of more than two members reduce by a 4-nomial tree from
/// [`REDUCE_FLAT_BELOW`] and by reduce-scatter-gather from this size, where the root of a
/// flat group would combine every member's whole message one after the other: on 16 nodes
/// x 32 and x 128 ranks `topo-run simulate` predicts the flat reduce at 1.03-1.72 x the
/// flat binomial tree from 4 KiB, reduce-scatter-gather at 0.60-0.95 (docs/simulate.md).
/// Groups of two stay flat at every size: on 1 node x 2, reduce-scatter-gather measured
/// 1.2-1.9 x the flat reduce from 4 KiB to 4 MiB (the root reads the other's buffer once,
/// by single copy, and combines as it reads).
pub(super) const REDUCE_RSG_FROM: u64 = 4 << 10;

/// Two rules for every group: `small` below `below` bytes, `large` from there.
pub(super) const fn below_then<A: Copy>(below: u64, small: A, large: A) -> [Rule<A>; 2] {
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
pub(super) const ALLREDUCE_DEFAULTS: [Rule<AllreduceAlg>; 2] = below_then(
    64 << 10,
    AllreduceAlg::ReduceAllreduceBcast(TopAlg::RecursiveDoubling),
    AllreduceAlg::ReduceAllreduceBcast(TopAlg::Ring),
);

/// On more than one node: Rabenseifner's in the hierarchy's order from 64 KiB, where
/// `topo-run simulate` predicts it faster than every flat algorithm and than the
/// hierarchy's forms on 16 to 1,024 nodes (docs/simulate.md): only a share of each rank's
/// message crosses the network, from every rank of the node at once. On 2 nodes x 2 it
/// took 0.49-0.86 of Open MPI's time from 64 KiB to 4 MiB, where `rab:ring` took 0.65-0.91.
pub(super) const ALLREDUCE_DEFAULTS_NODES: [Rule<AllreduceAlg>; 2] = below_then(
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
pub(super) const ALLREDUCE_EARLY_RANKS: u32 = 16;

/// See [`ALLREDUCE_EARLY_RANKS`].
pub(super) const ALLREDUCE_DEFAULTS_MANY: [Rule<AllreduceAlg>; 2] = below_then(
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
/// with 48 or more ranks per node. With 1 to 4 ranks per node (4, 16 and 128 nodes, block and
/// cyclic placement, 2026-12-04) the hierarchical form took 1.004-1.076 x at 1 KiB and
/// Rabenseifner's 1.02-1.26 x at 4 KiB, where recursive doubling took the best flat
/// algorithm's time, and Rabenseifner's won from 8 KiB (recursive doubling 1.03-1.46 x
/// there). Each entry: the most ranks per node and the size below which recursive
/// doubling runs.
pub(super) const ALLREDUCE_RD_BELOW: [(u32, u64); 3] = [(4, 8 << 10), (16, 1 << 10), (32, 256)];

/// [`ALLREDUCE_DEFAULTS_MANY`] with recursive doubling over every rank below `below`.
pub(super) const fn rd_then_many(below: u64) -> [Rule<AllreduceAlg>; 3] {
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
pub(super) const ALLREDUCE_DEFAULTS_FEW_PER_NODE: [[Rule<AllreduceAlg>; 3]; 3] = [
    rd_then_many(ALLREDUCE_RD_BELOW[0].1),
    rd_then_many(ALLREDUCE_RD_BELOW[1].1),
    rd_then_many(ALLREDUCE_RD_BELOW[2].1),
];

/// Recursive doubling for jobs whose size is a power of two: on 1 node x 2 it took
/// 0.26-1.02 of Open MPI's `MPI_Allgather` from 4 B to 4 MiB per rank, the hierarchical form
/// 0.74-3.05; on 2 emulated nodes x 2, 930 us against the ring's 1,200 at 256 KiB per rank
/// and 18.6 ms against 21 at 4 MiB (docs/runtime.md).
pub(super) const ALLGATHER_DEFAULTS: [Rule<AllgatherAlg>; 1] = [Rule {
    scope: Scope::Any,
    more_than: None,
    below: None,
    algorithm: AllgatherAlg::RecursiveDoubling,
}];

/// Other job sizes: Bruck's exchange (`rd`) for small results, where its `log n` rounds
/// beat the ring's `n - 1`, and the ring from 32 KiB gathered, where Bruck's scratch and
/// final rotation cost more: on 1 node x 3 the ring took 0.75-0.85 of Bruck's time from
/// 16 KiB per rank (48 KiB gathered) up and 0.6-0.9 from 1 MiB (docs/runtime.md).
pub(super) const ALLGATHER_DEFAULTS_ANY_SIZE: [Rule<AllgatherAlg>; 2] = below_then(
    32 << 10,
    AllgatherAlg::RecursiveDoubling,
    AllgatherAlg::Ring,
);

/// Jobs of 16 to 4,096 ranks on more than one node take the ring (in switch-major,
/// node-major order) from 4 KiB per rank (where the job's size is a power of two, from
/// [`ALLGATHER_RING_POW2_NODE_BYTES`] per node): `topo-run simulate` predicts it at the flat
/// ring's time under block placement and 0.75-0.95 of the best flat algorithm under cyclic
/// placement from 16 KiB, where recursive doubling's network steps and the node's heavy
/// steps, one after the other, lose to the ring, which overlaps them (docs/simulate.md).
/// Beyond 4,096 ranks the ring's `n - 1` steps cost more than they save (and the
/// simulator cannot run them); smaller jobs keep the measured defaults above.
pub(super) const ALLGATHER_RING_RANKS: usize = 16;

/// See [`ALLGATHER_RING_RANKS`].
pub(super) const ALLGATHER_RING_MAX_RANKS: usize = 4096;

/// See [`ALLGATHER_RING_RANKS`].
pub(super) const ALLGATHER_RING_BLOCK: usize = 4 << 10;

/// Where such a job's size is a power of two, the ring from this many bytes divided by the
/// ranks per node, per rank (at least [`ALLGATHER_RING_BLOCK`], at most
/// [`ALLGATHER_RING_POW2_BLOCK_MAX`]): the remapped recursive doubling keeps its heavy steps
/// inside the nodes, and the fewer ranks a node has, the longer its `log n` rounds beat the
/// ring's `n - 1`. `topo-run simulate --ops allgather` on 16 and 128 nodes x 2-128 ranks,
/// block and cyclic placement, each form forced by a rules file (2026-12-04): with 2 ranks
/// per node recursive doubling took 0.71-1.03 of the best flat algorithm up to 16 KiB per
/// rank, where the ring took 1.10-2.49 (1.6-2.0 at 4 KiB, the threshold before), and the
/// ring won from 32 KiB; with 4 ranks the two met at 8 KiB, with 8 the ring won from 16
/// KiB, with 16 from 4-8 KiB, with 32 and 128 from 4 KiB (recursive doubling 0.25-1.0 up
/// to 2 KiB, the ring 1.0-3.6).
pub(super) const ALLGATHER_RING_POW2_NODE_BYTES: usize = 64 << 10;

/// See [`ALLGATHER_RING_POW2_NODE_BYTES`].
pub(super) const ALLGATHER_RING_POW2_BLOCK_MAX: usize = 32 << 10;

/// Where such a job's size is not a power of two, nor its number of nodes (where it is,
/// Bruck's distances meet the node boundaries alike on every node: on 2-32 nodes x 6-36
/// ranks Bruck's stays ahead of the ring up to 1 KiB per rank, behind it at 4 KiB, as
/// [`ALLGATHER_RING_BLOCK`] has it), the ring from this many bytes divided by
/// the ranks per node, per rank (at least [`ALLGATHER_RING_BLOCK_MIN`], at most
/// [`ALLGATHER_RING_BLOCK`]): Bruck's exchange, which stands in for recursive doubling
/// there, cannot keep its heavy steps inside the nodes as the remapped recursive doubling
/// does, and its last steps send about half of every rank's blocks across the network from
/// every rank, so the more ranks a node has, the sooner the ring (which crosses each node
/// boundary once) wins. `topo-run simulate --ops allgather` on 3-48 nodes x 2-36 ranks,
/// block placement, each form forced by a rules file (2026-12-04): the ring became the
/// faster from 128-512 B per rank with 36 ranks per node, 512 B-2 KiB with 8-12, 1-4 KiB
/// with 2-6; before, with the 4 KiB of powers of two, Bruck's took up to 14.5 x the ring's
/// time (12 and 48 nodes x 36, 2 KiB per rank). Of 4, 6 and 8 KiB here, 6 left the fewest
/// rows of that sweep above the best flat algorithm (docs/simulate.md, "The v-forms").
pub(super) const ALLGATHER_RING_NODE_BYTES: usize = 6 << 10;

/// See [`ALLGATHER_RING_NODE_BYTES`].
pub(super) const ALLGATHER_RING_BLOCK_MIN: usize = 128;

/// Reduce_scatter on several nodes, where the job's size is not a power of two, takes the
/// ring from this many bytes per block: recursive halving must fold the ranks beyond a
/// power of two in and out, and the Allreduce's form moves twice the ring's data.
/// `topo-run simulate --ops reduce_scatter,reduce_scatter_v` on 3-17 nodes x 2-36 ranks
/// (2026-12-04): the flat ring took 0.35-0.95 of topo-run's time for 4 and 64 KiB blocks
/// (the Allreduce's form, or halving), the halving stayed within 1.11 of the best below.
pub(super) const REDUCE_SCATTER_RING_FROM: usize = 4 << 10;

/// Alltoall in a job on several nodes of at least [`ALLTOALL_SPREAD_RANKS`] ranks takes the
/// spread form (the aggregated one's messages between nodes, sent by all ranks of a node)
/// for blocks below this size, pairwise from there; one node always exchanges pairwise
/// (there is no network to spare messages on). The spread form saves messages between
/// nodes but moves every rank's whole row of blocks through shared memory twice (three
/// passes more as a schedule), which `topo-run simulate` prices above the messages saved
/// from 64-byte blocks on (16 and 128 nodes x 4-32 ranks, each form forced by a rules
/// file, the default model, 2026-12-04: spread 0.34-0.73 of the best flat algorithm for
/// 8-byte blocks where pairwise took 0.97-3.6, and 0.97-1.65 for 64-byte blocks where
/// pairwise took 1.00-1.03; up to 3.6 x at 4 KiB, the threshold before being a message
/// of 32 KiB between two nodes). With LogP's per-message overheads (`--models logp`) it
/// stays ahead up to 256 B-1 KiB; docs/simulate.md has both.
pub(super) const ALLTOALL_SPREAD_BELOW: u64 = 64;

/// See [`ALLTOALL_SPREAD_BELOW`]: on nodes of fewer ranks (2 per node, 16-1,024 nodes) the
/// spread form saves too few messages: 1.1-2.7 x pairwise's time for 8-byte blocks on 16
/// and 1,024 nodes (0.75 on 128), more from there. On 2 emulated nodes x 2 of the dev
/// cluster it measured 0.64-0.92 of Open MPI's time for blocks of 4 B to 4 KiB, pairwise
/// 0.72-0.94 (docs/runtime.md, "Alltoall").
pub(super) const ALLTOALL_SPREAD_RANKS: u32 = 4;

/// Reduce_scatter_block runs by recursive halving in the hierarchy's order on several
/// nodes while the whole contribution (the block times the ranks) is below this many
/// bytes. `topo-run simulate` (16 and 128 nodes x 32, block and cyclic placement) predicts
/// it at 0.24-0.99 of the best flat algorithm there (8 to 256-byte blocks), where the
/// Allreduce's form took 0.42-1.76 for 8-byte blocks; from here the Allreduce's form is faster (16 x 32, 1 KiB blocks:
/// 182.9 against 229.6 us). On 2 emulated nodes x 2 it took 0.37-0.99 x the best of Open
/// MPI's components from 4 B to 64 KiB blocks, where the root form took 0.64-0.87 below 512
/// bytes and the leaders' 0.80-1.12 from there (docs/runtime.md, "Reduce_scatter_block").
pub(super) const REDUCE_SCATTER_HALVING_BELOW: u64 = 256 << 10;

/// Reduce_scatter_block on several nodes goes through the leaders from
/// [`REDUCE_SCATTER_HALVING_BELOW`] on in jobs of this many ranks per node or fewer
/// (measured on 2 emulated nodes x 2: at most 1.05 x the best of Open MPI's components
/// from 256 B to 1 MiB, where the Allreduce's form took 1.3-1.4 x from 16 to 256 KiB),
/// and as the Allreduce of the whole contribution with more ranks per node (which
/// `topo-run simulate` predicts 2-6 x faster than both others from 512 B to 1 MiB blocks
/// on 2 nodes x 32 to 16 x 32: the leaders' form makes each node's leader combine the
/// whole message for every rank of its node, the root form funnels it through rank 0).
/// On one node of this many ranks or fewer it goes through rank 0 (measured on 1 x 2:
/// 0.82-0.90 x the best component below 512 B, where halving took 1.15-1.35); on one node
/// of more, by halving at every size (predicted 0.93-0.99 of the best flat algorithm on
/// 1 x 32 and 1 x 128, the root form 1.9-2.7).
pub(super) const REDUCE_SCATTER_LEADERS_PER_NODE: u32 = 2;

/// Reduce_scatter_block goes through the leaders (above) only on jobs of at most this
/// many nodes: the leaders' form was measured on 2 emulated nodes x 2 only, and at scale
/// `topo-run simulate` predicts it far behind the flat ring (blocks of 4 and 64 KiB, the
/// default model, 2026-12-04: 1.5-2.0 x on 16 nodes x 2, 4.4-8.5 x on 128 x 2; each
/// leader combines the whole contribution once per rank of its node, then rings it among
/// the leaders), where the Allreduce's form took 0.83-0.98 x.
pub(super) const REDUCE_SCATTER_LEADERS_NODES: u32 = 2;

/// Where Reduce_scatter_block goes through the leaders (at most
/// [`REDUCE_SCATTER_LEADERS_NODES`] nodes of at most [`REDUCE_SCATTER_LEADERS_PER_NODE`]
/// ranks), it runs by recursive halving while the whole contribution is below this many
/// bytes instead of [`REDUCE_SCATTER_HALVING_BELOW`]. On 2 emulated nodes x 2, the two
/// forms in turn, three rounds (`coll-bench --ops reduce_scatter_block --min 65536 --max
/// 524288 --iters 100`, 2026-12-05): with a cache line of 190-200 ns (the machine's slow
/// state) halving took 378-399 / 651-653 / 1,128-1,130 / 2,113-2,352 us at 64 / 128 /
/// 256 / 512 KiB blocks, the leaders 480-488 / 777-813 / 1,428-1,441 / 2,776-2,914; with
/// 41-47 ns halving 229 / 355 / 611 / 1,446, the leaders 245 / 378 / 604 / 1,172.
pub(super) const REDUCE_SCATTER_LEADERS_FROM: u64 = 2 << 20;

/// Gatherv and Scatterv go straight between the root and each rank in jobs of this many
/// ranks per node or fewer (and on one node), through the leaders above
/// ([`super::Settings::rooted_v_alg`]; docs/runtime.md, "Gatherv and Scatterv").
pub const ROOTED_V_DIRECT_PER_NODE: u32 = 2;
