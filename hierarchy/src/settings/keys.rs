//! Every setting's key in the plan, its environment variable and its meaning: what the
//! launcher validates and `topo-run --help` lists.

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
         (process_vm_readv), instead of through the queues; 0 turns that off (default 16K, \
         64K with spin 0); among ranks of one group inside the node (a shared cache or \
         memory) from twice this size, and a reduce's partial results stay in the queues",
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
    (
        "alltoall",
        "TOPO_RUN_ALLTOALL",
        "alltoall rules, by the size of one block, e.g. <1K=spread,*=pairwise (spread = one \
         message per pair of nodes, each node's pairs dealt out over its ranks; aggregated \
         = every rank's blocks go up the hierarchy to the top group, whose members exchange \
         one message per pair, and down again: one message per pair of nodes; pairwise = \
         every rank sends each other rank its block straight; default on several nodes: \
         spread while a message between two nodes, block x (ranks per node)^2, is below \
         32K, else pairwise; pairwise on one node)",
    ),
    (
        "reduce-scatter",
        "TOPO_RUN_REDUCE_SCATTER",
        "MPI_Reduce_scatter_block rules, by the size of one block, e.g. <512=root,*=allreduce \
         (root = the hierarchical Reduce to rank 0, then the hierarchical Scatter from it; \
         leaders = the whole contribution reduced to the top group's members, a ring \
         reduce-scatter among them of the blocks under each, then a Scatter down from each; \
         allreduce = the Allreduce of the whole contribution, of which each rank keeps its \
         block; halving = recursive halving over every rank in the hierarchy's order; \
         default: halving while the whole contribution is below 256 KiB, then leaders on \
         nodes of at most 2 ranks and allreduce on nodes of more; on one node halving, but \
         root on a node of at most 2 ranks; MPI_Reduce_scatter takes allreduce where the \
         rules give it for the blocks' mean size, else halving)",
    ),
    (
        "rooted-v",
        "TOPO_RUN_ROOTED_V",
        "how MPI_Gatherv and MPI_Scatterv go: leaders (first each rank's length, then the \
         blocks, through the node leaders as Gather and Scatter: one message per node \
         between nodes; the default on several nodes with more than 2 ranks per node) or \
         direct (straight between the root and every rank, all at once; the default \
         elsewhere)",
    ),
];
