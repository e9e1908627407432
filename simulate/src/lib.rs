//! `topo-run simulate`: predicts what topo-run's hierarchy gains on a cluster one does not
//! have. It runs the very schedules of topo-run's nonblocking collectives, built from the
//! job's real plans, and the flat algorithms MPI libraries use, in virtual time over a
//! cost model per link class ([`model`]), and reports each one's time and its traffic per
//! link class.
#![forbid(unsafe_code)]

pub mod blocking;
pub mod calibrate;
pub mod engine;
pub mod flat;
pub mod model;
pub mod place;
pub mod program;
pub mod replay;

use std::fmt;
use std::str::FromStr;

use topo_hierarchy::remap;
use topo_hierarchy::remap::halving::HalvingOrder;
use topo_hierarchy::remap::partition::Placement;
use topo_hierarchy::settings::format_bytes;
use topo_hierarchy::settings::{
    AllgatherAlg, AllreduceAlg, AlltoallAlg, BarrierAlg, ReduceScatterAlg,
};
use topo_hierarchy::{Digest, Hierarchy, Job, LevelFilter, NetworkMap, Settings};
use topo_runtime::by_node::ByNode;
use topo_runtime::nonblocking::iallgather::{Exchange, Order};
use topo_runtime::nonblocking::{
    Builder, iallgatherv, iallreduce, ialltoall, ibarrier, ibcast, igather, ireduce,
    ireduce_scatter, iscan, iscatter,
};
use topo_runtime::reduce::Scratch;
use topo_runtime::subtrees::{self, Subtrees};
use topo_runtime::view::View;
use topo_runtime::{
    allgatherv, allreduce, alltoall, barrier, bcast, gather, gatherv, reduce, reduce_scatter, scan,
    scatter, scatterv,
};

use crate::engine::{Outcome, SimError};
use crate::model::CostModel;
use crate::place::Places;
use crate::program::{Program, Programs};

/// The collectives simulated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// Broadcast from rank 0.
    Bcast,
    /// Reduce to rank 0.
    Reduce,
    /// Allreduce.
    Allreduce,
    /// Barrier (sizes do not apply).
    Barrier,
    /// Allgather (the size is each rank's block).
    Allgather,
    /// Gather to rank 0 (the size is each rank's block).
    Gather,
    /// Scatter from rank 0 (the size is each rank's block).
    Scatter,
    /// Alltoall (the size is the block for one rank).
    Alltoall,
    /// Reduce_scatter_block (the size is each rank's block of the result).
    #[serde(rename = "reduce_scatter")]
    ReduceScatter,
    /// Scan.
    Scan,
    /// Gatherv to rank 0, every rank's block the size given (topo-run's Gatherv forms,
    /// which differ from its Gather's).
    Gatherv,
    /// Scatterv from rank 0, every rank's block the size given.
    Scatterv,
    /// Allgatherv, every rank's block the size given.
    Allgatherv,
    /// Alltoallv, every block the size given.
    Alltoallv,
    /// Reduce_scatter (per-rank counts), every rank's block of the result the size given.
    #[serde(rename = "reduce_scatter_v")]
    ReduceScatterV,
    /// Exscan.
    Exscan,
}

impl Op {
    /// Every op.
    pub const ALL: [Op; 16] = [
        Op::Bcast,
        Op::Reduce,
        Op::Allreduce,
        Op::Barrier,
        Op::Allgather,
        Op::Gather,
        Op::Scatter,
        Op::Alltoall,
        Op::ReduceScatter,
        Op::Scan,
        Op::Gatherv,
        Op::Scatterv,
        Op::Allgatherv,
        Op::Alltoallv,
        Op::ReduceScatterV,
        Op::Exscan,
    ];

    /// Whether the size is each rank's block and the blocks' layout is the call's
    /// argument (the v-forms, simulated with every block the same size).
    pub fn is_v(self) -> bool {
        matches!(
            self,
            Op::Gatherv | Op::Scatterv | Op::Allgatherv | Op::Alltoallv | Op::ReduceScatterV
        )
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Bcast => "bcast",
            Op::Reduce => "reduce",
            Op::Allreduce => "allreduce",
            Op::Barrier => "barrier",
            Op::Allgather => "allgather",
            Op::Gather => "gather",
            Op::Scatter => "scatter",
            Op::Alltoall => "alltoall",
            Op::ReduceScatter => "reduce_scatter",
            Op::Scan => "scan",
            Op::Gatherv => "gatherv",
            Op::Scatterv => "scatterv",
            Op::Allgatherv => "allgatherv",
            Op::Alltoallv => "alltoallv",
            Op::ReduceScatterV => "reduce_scatter_v",
            Op::Exscan => "exscan",
        })
    }
}

impl FromStr for Op {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Op::ALL
            .into_iter()
            .find(|o| o.to_string() == s)
            .ok_or_else(|| {
                format!(
                    "unknown collective {s:?}; use bcast, reduce, allreduce, barrier, \
                     allgather, gather, scatter, alltoall, reduce_scatter, scan, gatherv, \
                     scatterv, allgatherv, alltoallv, reduce_scatter_v or exscan"
                )
            })
    }
}

/// The flat algorithms simulate a ring only up to this many ranks: it takes `n - 1`
/// rounds on every rank, `n^2` steps in all.
pub const RING_UP_TO: u32 = 4096;

/// topo-run's blocking forms are recorded on buffers of their real sizes (the code slices
/// them, and its leaders keep the blocks under them): up to this many bytes of a call's
/// whole data (every rank's blocks).
pub const BLOCKING_BYTES_UP_TO: u64 = 256 << 20;

/// Every rank has its part of an exchange: the positions are a permutation of the ranks.
const PERMUTATION: &str = "the exchange's positions are a permutation of the ranks";

/// The name of topo-run's own algorithm in reports: its nonblocking schedule.
pub const TOPO_RUN: &str = "topo-run";

/// The name of topo-run's blocking form in reports.
pub const TOPO_RUN_BLOCKING: &str = "topo-run blocking";

/// Whether a prediction's algorithm is one of topo-run's (not a flat one).
pub fn is_topo_run(algorithm: &str) -> bool {
    algorithm == TOPO_RUN || algorithm == TOPO_RUN_BLOCKING
}

/// How topo-run's blocking form of a collective runs.
#[derive(Debug)]
pub enum Blocking {
    /// As its nonblocking schedule, waited for: the flat Allreduce forms, the flat Barrier,
    /// the flat Allgather exchanges (recursive doubling's blocking code sends what its
    /// schedule does: see the tests).
    Schedule,
    /// Its own code, recorded on every rank ([`blocking`]).
    Recorded(Programs),
}

/// A job as the simulator sees it.
#[derive(Debug)]
pub struct Cluster {
    job: Job,
    hierarchy: Hierarchy,
    digest: Digest,
    places: Places,
    settings: Settings,
    /// Each rank's node and leaf switch, for the Allgather's remapping.
    placement: Placement,
    /// The ranks that reach the network (the node leaders), in their meeting order.
    network: Vec<u32>,
}

impl Cluster {
    /// The job `job` on the network `map`, with topo-run's `settings`.
    pub fn new(
        job: Job,
        map: Option<&NetworkMap>,
        mut settings: Settings,
    ) -> topo_hierarchy::Result<Cluster> {
        // As the runtime learns at setup: the built-in Allreduce rules depend on it.
        settings.nodes = job.nodes().len() as u32;
        settings.ranks = job.size();
        let filter = LevelFilter::all();
        let hierarchy = topo_hierarchy::build(&job, map, &filter)?;
        let digest = Digest::of_job(&job, map, &filter, "");
        let places = Places::new(&job, map);
        let node_of: Vec<u32> = (0..job.size()).map(|r| job.node_of(r)).collect();
        let switch_of: Vec<u32> = (0..job.size())
            .map(|r| {
                map.and_then(|m| m.leaf_of(job.node_name(job.node_of(r))))
                    .unwrap_or(u32::MAX)
            })
            .collect();
        let mut cluster = Cluster {
            network: Vec::new(),
            placement: Placement::with_switches(&node_of, &switch_of),
            job,
            hierarchy,
            digest,
            places,
            settings,
        };
        let views: Vec<(u32, Option<u32>)> = (0..cluster.size())
            .map(|r| cluster.view(r))
            .filter(|v| v.reaches_network())
            .map(|v| (v.rank, v.switch_label()))
            .collect();
        let reaching: Vec<u32> = views.iter().map(|&(r, _)| r).collect();
        cluster.network = View::meeting_order(&reaching, |r| {
            views[reaching
                .binary_search(&r)
                .expect("a rank that reaches the network")]
            .1
        });
        Ok(cluster)
    }

    /// The number of ranks.
    pub fn size(&self) -> u32 {
        self.job.size()
    }

    /// Rank `r`'s view of the hierarchy, as the runtime builds it from its plan.
    fn view(&self, r: u32) -> View {
        let plan = self
            .hierarchy
            .rank_plan(&self.job, r, "", self.digest, Vec::new());
        let mut view = View::from_plan(&plan);
        view.pipeline = self.hierarchy.levels().len() > 1;
        view
    }

    /// topo-run's program on every rank for `op` of `bytes`, or why it is not simulated
    /// (the hierarchical Allgather has no schedule form; a ring over more than
    /// [`RING_UP_TO`] ranks is too long to simulate).
    pub fn topo_run(&self, op: Op, bytes: u64) -> Result<Programs, String> {
        let n = self.size();
        let len = bytes as usize;
        let s = &self.settings;
        // The root's blocks (every rank's, for the v-forms), in rank order.
        let at = match op {
            Op::Gather | Op::Scatter => even_blocks(n, len),
            op if op.is_v() => even_blocks(n, len),
            _ => Vec::new(),
        };
        // (The v-forms' schedules are their direct forms: the runtime's `sched_gather_v`
        // and `sched_scatter_v` take the leaders' for a Gather and Scatter only.)
        match op {
            // A context that has learned its subtrees (at a blocking collective before)
            // runs the leaders' forms as schedules where the blocking ones would.
            Op::Gather | Op::Scatter if !subtrees::direct(op == Op::Gather, s.nodes, len) => {
                let (views, subs) = self.views_and_subtrees();
                return Ok(Programs::build(n, |r| {
                    let (v, sub) = (&views[r as usize], &subs[r as usize]);
                    Program::from_builder(&if op == Op::Gather {
                        igather::build_leaders(v, sub, 0, true, len).0
                    } else {
                        iscatter::build_leaders(v, sub, 0, true, len).0
                    })
                }));
            }
            Op::Gather | Op::Gatherv => {
                return Ok(Programs::build(n, |r| {
                    let at = (r == 0).then_some(&at[..]);
                    Program::from_builder(&igather::build(r, 0, at, true, len, s.nodes == 1))
                }));
            }
            Op::Scatter | Op::Scatterv => {
                return Ok(Programs::build(n, |r| {
                    let at = (r == 0).then_some(&at[..]);
                    Program::from_builder(&iscatter::build(r, 0, at, true, len))
                }));
            }
            Op::Alltoall => {
                pairs_fit(n)?;
                let one_node = self.job.nodes().len() == 1;
                let by_node = ByNode::new(self.placement.node_of());
                let spread = !one_node && s.alltoall_for(len) == AlltoallAlg::Spread;
                return Ok(Programs::build(n, |r| {
                    if spread {
                        let b = ialltoall::build_spread(r, &by_node, len, true);
                        return Program::from_builder(&b.0);
                    }
                    let b = ialltoall::build(r, n as usize, one_node, Some(&by_node), len, true);
                    Program::from_builder(&b.0)
                }));
            }
            // The ring in node-major order (the runtime's `sched_reduce_scatter`), on several
            // nodes (a context on one node keeps no ring order: halving there).
            Op::ReduceScatter | Op::ReduceScatterV
                if s.reduce_scatter_for(len) == ReduceScatterAlg::Ring
                    && self.job.nodes().len() > 1 =>
            {
                ring_fits(n)?;
                let ring = remap::Positions::new(remap::ring_positions(&self.placement));
                let total = len * n as usize;
                return Ok(Programs::build(n, |r| {
                    let peers = ring.ring_peers(r).expect(PERMUTATION);
                    let blocks = topo_runtime::subtrees::Blocks::Same(len);
                    Program::from_builder(
                        &ireduce_scatter::build_ring(&peers, blocks, total, true).0,
                    )
                }));
            }
            // On two ranks every form is halving's one exchange (`halving_blocks`).
            Op::ReduceScatter
                if n == 2
                    || matches!(
                        s.reduce_scatter_for(len),
                        ReduceScatterAlg::Halving | ReduceScatterAlg::Ring
                    ) =>
            {
                let order = HalvingOrder::new(&self.placement);
                let of = ireduce_scatter::HalvingBlocks::of(&order);
                return Ok(Programs::build(n, |r| {
                    let h = of(r).expect("a rank of the job");
                    let blocks = topo_runtime::subtrees::Blocks::Same(len);
                    Program::from_builder(&ireduce_scatter::build_halving(&h, blocks, true).0)
                }));
            }
            Op::ReduceScatter => {
                let total = len * n as usize;
                let all = self.all_reduce_steps(total)?;
                return Ok(Programs::build(n, |r| {
                    let mine = r as usize * len..(r as usize + 1) * len;
                    Program::from_builder(&ireduce_scatter::build(all(r), true, total, mine))
                }));
            }
            Op::Scan | Op::Exscan => {
                // The hierarchical form where the blocking Scan takes it (below).
                let (views, subs) = self.views_and_subtrees();
                let hierarchical = subs.iter().all(Subtrees::consecutive);
                let exclusive = op == Op::Exscan;
                return Ok(Programs::build(n, |r| {
                    let (view, sub) = (&views[r as usize], &subs[r as usize]);
                    // The network's view is built only where the Scan runs on it.
                    let network = (hierarchical && scan::flat_network(len))
                        .then(|| scan::network_in_order(view, &self.network));
                    let view = network.as_ref().unwrap_or(view);
                    let sub = hierarchical.then_some(sub);
                    let b = iscan::build(view, s.spin, sub, true, len, exclusive).0;
                    Program::from_builder(&b)
                }));
            }
            Op::Allgatherv => return self.allgatherv_schedule(&at),
            Op::Alltoallv => {
                pairs_fit(n)?;
                let one_node = self.job.nodes().len() == 1;
                let by_node = ByNode::new(self.placement.node_of());
                let by_node = (!one_node).then_some(&by_node);
                let end = len * n as usize;
                return Ok(Programs::build(n, |r| {
                    let b = ialltoall::build_v(r, one_node, by_node, Some(&at), &at, end);
                    Program::from_builder(&b.0)
                }));
            }
            // The runtime's `sched_reduce_scatter` with the blocks' ends.
            Op::ReduceScatterV if n == 2 || s.reduce_scatter_v_halving(len) => {
                let order = HalvingOrder::new(&self.placement);
                let of = ireduce_scatter::HalvingBlocks::of(&order);
                let ends: Vec<usize> = at.iter().map(|r| r.end).collect();
                return Ok(Programs::build(n, |r| {
                    let h = of(r).expect("a rank of the job");
                    let blocks = topo_runtime::subtrees::Blocks::Ends(&ends);
                    Program::from_builder(&ireduce_scatter::build_halving(&h, blocks, true).0)
                }));
            }
            Op::ReduceScatterV => {
                let total = len * n as usize;
                let all = self.all_reduce_steps(total)?;
                return Ok(Programs::build(n, |r| {
                    let mine = at[r as usize].clone();
                    Program::from_builder(&ireduce_scatter::build(all(r), true, total, mine))
                }));
            }
            _ => {}
        }
        if op == Op::Allgather {
            let total = len * n as usize;
            let alg = s.allgather_for(total, n as usize);
            if alg == AllgatherAlg::Ring {
                ring_fits(n)?;
            }
            let order = Order::new(alg, &self.placement).ok_or(
                "the settings choose the hierarchical Allgather, which has no schedule form",
            )?;
            return Ok(Programs::build(n, |r| {
                let exchange = order.exchange(r).expect(PERMUTATION);
                Program::from_builder(&exchange.build(r, len, true).0)
            }));
        }
        if op == Op::Barrier && s.barrier_alg() == BarrierAlg::Flat {
            let flat = remap::Positions::new(remap::interleaved_positions(&self.placement));
            return Ok(Programs::build(n, |r| {
                let rounds = flat.dissemination_peers(r).expect(PERMUTATION);
                Program::from_builder(&ibarrier::build_flat(&rounds))
            }));
        }
        if op == Op::Allreduce {
            let all = self.all_reduce_steps(len)?;
            return Ok(Programs::build(n, |r| Program::from_builder(&all(r))));
        }
        let elem = elem_of(len);
        Ok(Programs::build(n, |r| {
            let view = self.view(r);
            let b = match op {
                Op::Bcast => ibcast::build(&view, s, 0, len),
                Op::Reduce => ireduce::build(&view, s, 0, true, len, elem).0,
                // (The others have returned above.)
                _ => ibarrier::build(&view.over_network(&self.network), s),
            };
            Program::from_builder(&b)
        }))
    }

    /// Whether an Allgatherv of blocks `at` runs a flat exchange (the runtime's
    /// `Topo::all_gather_v_flat`: on several nodes, where the blocks are large).
    fn allgatherv_flat(&self, at: &[std::ops::Range<usize>]) -> bool {
        let total = at.iter().map(std::ops::Range::len).sum();
        iallgatherv::flat_for(self.settings.nodes, at.len(), total)
    }

    /// The Allgatherv's schedule on every rank, as the runtime's `sched_all_gather_v`
    /// chooses it (`iallgatherv::schedule_flat`): on several nodes, for large blocks or
    /// more than 2 ranks per node, the flat exchange the Allgather's rules choose for the
    /// blocks' total (the ring; recursive doubling where the job's size is a power of two,
    /// else Bruck's), else every rank's block straight to every other rank.
    fn allgatherv_schedule(&self, at: &[std::ops::Range<usize>]) -> Result<Programs, String> {
        let n = self.size();
        pairs_fit(n)?;
        let total: usize = at.iter().map(std::ops::Range::len).sum();
        if !iallgatherv::schedule_flat(self.settings.nodes, at.len(), total) {
            let one_node = self.settings.nodes == 1;
            return Ok(Programs::build(n, |r| {
                Program::from_builder(&iallgatherv::build(r, one_node, at, true))
            }));
        }
        let s = &self.settings;
        let doubling = s.allgather_for(total, n as usize) != AllgatherAlg::Ring
            && s.flat_allgather_algs(n as usize)
                .contains(&AllgatherAlg::RecursiveDoubling);
        let order = if doubling {
            Order::new(AllgatherAlg::RecursiveDoubling, &self.placement)
        } else {
            Order::new(AllgatherAlg::Ring, &self.placement)
        }
        .expect("a flat exchange's order");
        Ok(Programs::build(n, |r| {
            let b = match order.exchange(r).expect(PERMUTATION) {
                Exchange::RecursiveDoubling(peers, _) => {
                    iallgatherv::build_rd(r, &peers, at, true).0
                }
                e @ Exchange::Bruck(..) => {
                    let peers = e.bruck_peers(total / at.len()).expect("Bruck's exchange");
                    iallgatherv::build_bruck(r, peers, at, true).0
                }
                Exchange::Ring(peers) => iallgatherv::build_ring(r, &peers, at, true),
            };
            Program::from_builder(&b)
        }))
    }

    /// Rank r's steps of an Allreduce of `len` bytes into its receive buffer, as the
    /// runtime chooses them (`all_reduce_steps` in the runtime's `start.rs`): a flat form
    /// where the settings choose one, else the hierarchical one on the view the runtime
    /// gives it; or why it is not simulated.
    fn all_reduce_steps(&self, len: usize) -> Result<impl Fn(u32) -> Builder + '_, String> {
        let s = &self.settings;
        // The flat forms cut the message into whole elements: doubles where the size allows.
        let elem = elem_of(len);
        enum Form {
            Ring(remap::Positions),
            Halving(HalvingOrder, AllreduceAlg),
            Hierarchical,
        }
        let form = match s.allreduce_for(len) {
            AllreduceAlg::Ring => {
                ring_fits(self.size())?;
                Form::Ring(remap::Positions::new(remap::ring_positions(
                    &self.placement,
                )))
            }
            alg if alg.uses_halving_order() => {
                Form::Halving(HalvingOrder::new(&self.placement), alg)
            }
            _ => Form::Hierarchical,
        };
        Ok(move |r: u32| match &form {
            Form::Ring(ring) => {
                let peers = ring.ring_peers(r).expect(PERMUTATION);
                iallreduce::build_ring(&peers, elem, true, len)
            }
            Form::Halving(order, alg) => {
                let peers = order.peers(r).expect(PERMUTATION);
                if let AllreduceAlg::Rabenseifner(piece) = alg {
                    iallreduce::build_rabenseifner(&peers, elem, true, len, *piece as usize)
                } else {
                    iallreduce::build_recursive_doubling(&peers, true, len).0
                }
            }
            Form::Hierarchical => {
                let view = self.view(r);
                let network = view.over_network(&self.network);
                let view = allreduce::view_for(&view, &network, s, len);
                iallreduce::build(view, s, true, len, elem).0
            }
        })
    }

    /// Every rank's view, and what each learns of the ranks under each member
    /// (`Subtrees`, worked out for the whole job at once).
    fn views_and_subtrees(&self) -> (Vec<View>, Vec<Subtrees>) {
        let views: Vec<View> = (0..self.size()).map(|r| self.view(r)).collect();
        let sub = Subtrees::of_job(&views);
        (views, sub)
    }

    /// topo-run's blocking form of `op` of `bytes` on every rank, chosen as the runtime's
    /// blocking entry points choose it (`Topo::raw_*`), or why it is not simulated (the
    /// hierarchical Allgather, whose messages tell their receivers which ranks' blocks they
    /// carry: a recording that moves no data cannot run it).
    pub fn topo_run_blocking(&self, op: Op, bytes: u64) -> Result<Blocking, String> {
        let n = self.size();
        let len = bytes as usize;
        let s = &self.settings;
        let flat = match op {
            Op::Allreduce => {
                let alg = s.allreduce_for(len);
                alg == AllreduceAlg::Ring || alg.uses_halving_order()
            }
            Op::Barrier => s.barrier_alg() == BarrierAlg::Flat,
            // The flat exchanges run as their schedule; the hierarchical form's messages
            // carry the lists of ranks their receivers read, which a recording cannot give.
            Op::Allgather => match s.allgather_for(len * n as usize, n as usize) {
                AllgatherAlg::Hierarchical(_) => {
                    return Err(
                        "the settings choose the hierarchical Allgather, whose messages \
                                carry the lists of ranks their receivers read: a recording \
                                cannot run it"
                            .into(),
                    );
                }
                _ => true,
            },
            // The Allreduce's form runs as the schedule does (`Topo::raw_reduce_scatter`),
            // recursive halving as its schedule; on two ranks every form is one exchange
            // (`reduce_scatter::pair`, recorded).
            Op::ReduceScatter => {
                n > 2
                    && matches!(
                        s.reduce_scatter_for(len),
                        ReduceScatterAlg::Allreduce
                            | ReduceScatterAlg::Halving
                            | ReduceScatterAlg::Ring
                    )
            }
            // Recursive halving (the schedule, waited for) or the Allreduce's form
            // (`Topo::raw_reduce_scatter`); two ranks' exchange as Reduce_scatter_block's.
            Op::ReduceScatterV => n > 2,
            Op::Alltoall | Op::Alltoallv | Op::Allgatherv if self.size() > RING_UP_TO => {
                return Err(format!(
                    "{op} over more than {RING_UP_TO} ranks is not simulated"
                ));
            }
            // The flat exchanges run as their schedule (`Topo::raw_all_gather_v`).
            Op::Allgatherv => self.allgatherv_flat(&even_blocks(n, len)),
            _ => false,
        };
        if flat {
            return Ok(Blocking::Schedule);
        }
        if matches!(
            op,
            Op::Gather
                | Op::Scatter
                | Op::Alltoall
                | Op::ReduceScatter
                | Op::ReduceScatterV
                | Op::Gatherv
                | Op::Scatterv
                | Op::Allgatherv
                | Op::Alltoallv
        ) {
            let whole = bytes.saturating_mul(u64::from(n));
            let whole = if matches!(op, Op::Alltoall | Op::Alltoallv) {
                whole.saturating_mul(u64::from(n))
            } else {
                whole
            };
            if whole > BLOCKING_BYTES_UP_TO {
                return Err(format!(
                    "the blocking form is recorded on buffers of the call's real sizes, up to {} in all: this call has {}",
                    format_bytes(BLOCKING_BYTES_UP_TO),
                    format_bytes(whole)
                ));
            }
            return self.record_rooted(op, len);
        }
        // Buffers of the real sizes (the code slices them), reused by every rank.
        let (send, mut recv) = (vec![0u8; len], vec![0u8; len]);
        let mut scratch = Scratch::default();
        let elem = elem_of(len);
        // The Scan's hierarchical form where it serves the job, as a context agrees at
        // its first Scan: the ranks under every member of every group are consecutive.
        let subtrees = if matches!(op, Op::Scan | Op::Exscan) {
            let (_, sub) = self.views_and_subtrees();
            sub.iter().all(Subtrees::consecutive).then_some(sub)
        } else {
            None
        };
        let mut failed = None;
        let programs = Programs::build(n, |r| {
            let view = self.view(r);
            let mut tape = blocking::Tape::default();
            let combine = tape.combine(elem);
            let done = match op {
                // (Exscan's rank 0 has no result.)
                Op::Scan | Op::Exscan => {
                    let network = (subtrees.is_some() && scan::flat_network(len))
                        .then(|| scan::network_in_order(&view, &self.network));
                    scan::scan(
                        network.as_ref().unwrap_or(&view),
                        &mut tape,
                        s.spin,
                        subtrees.as_ref().map(|sub| &sub[r as usize]),
                        Some(&send),
                        (op == Op::Scan || r > 0).then_some(&mut recv[..]),
                        op == Op::Exscan,
                        &combine,
                        &mut scratch,
                    )
                }
                Op::Bcast => bcast::bcast(&view, &mut tape, s, 0, &mut recv),
                Op::Reduce => reduce::reduce(
                    &view,
                    &mut tape,
                    s,
                    0,
                    Some(&send),
                    (r == 0).then_some(&mut recv[..]),
                    &combine,
                    &mut scratch,
                ),
                Op::Allreduce => {
                    let network = view.over_network(&self.network);
                    let view = allreduce::view_for(&view, &network, s, len);
                    allreduce::allreduce(
                        view,
                        &mut tape,
                        s,
                        Some(&send),
                        &mut recv,
                        &combine,
                        &mut scratch,
                    )
                }
                // (The others have returned above.)
                _ => barrier::barrier(&view.over_network(&self.network), &mut tape, s),
            };
            if let Err(e) = done {
                failed.get_or_insert_with(|| format!("rank {r}'s blocking {op} failed: {e}"));
            }
            tape.take()
        });
        match failed {
            Some(why) => Err(why),
            None => Ok(Blocking::Recorded(programs)),
        }
    }

    /// The blocking Gather, Scatter, Alltoall or Reduce_scatter_block, or the Gatherv,
    /// Scatterv, Allgatherv or Alltoallv of blocks of `len` bytes one after another in rank
    /// order, recorded on every rank: the code that learned its `Subtrees` over the
    /// network runs on what [`Subtrees::of_job`] works out.
    fn record_rooted(&self, op: Op, len: usize) -> Result<Blocking, String> {
        let n = self.size() as usize;
        let s = &self.settings;
        let (views, subs) = self.views_and_subtrees();
        let (mut send, mut recv) = (Vec::new(), Vec::new());
        let mut scratch = Scratch::default();
        let mut full = Vec::new();
        let mut failed = None;
        let elem = elem_of(len);
        let by_node = ByNode::new(self.placement.node_of());
        let one_node = self.job.nodes().len() == 1;
        let at = even_blocks(n as u32, len);
        let programs = Programs::build(n as u32, |r| {
            let (view, sub) = (&views[r as usize], &subs[r as usize]);
            // (The v-forms' leaders read the blocks' lengths from what they receive.)
            let mut tape = if op.is_v() {
                blocking::Tape::reading(len as u64)
            } else {
                blocking::Tape::default()
            };
            let combine = tape.combine(elem);
            let root = r == 0;
            let done = match op {
                Op::Gather => {
                    send.resize(len, 0);
                    recv.resize(if root { n * len } else { 0 }, 0);
                    let out = root.then_some(&mut recv[..]);
                    gather::gather(view, &mut tape, sub, s, 0, Some(&send), out, len)
                }
                Op::Scatter => {
                    send.resize(if root { n * len } else { 0 }, 0);
                    recv.resize(len, 0);
                    let from = root.then_some(&send[..]);
                    scatter::scatter(view, &mut tape, sub, s, 0, from, Some(&mut recv), len)
                }
                Op::Gatherv => {
                    send.resize(len, 0);
                    recv.resize(if root { n * len } else { 0 }, 0);
                    let out = root.then_some((&mut recv[..], &at[..]));
                    gatherv::gatherv(view, &mut tape, sub, s, 0, Some(&send), out, &mut full)
                }
                Op::Scatterv => {
                    send.resize(if root { n * len } else { 0 }, 0);
                    recv.resize(len, 0);
                    let from = root.then_some((&send[..], &at[..]));
                    let to = Some(&mut recv[..]);
                    scatterv::scatterv(view, &mut tape, sub, s, 0, from, to, &mut full)
                }
                Op::Allgatherv => {
                    send.resize(len, 0);
                    recv.resize(n * len, 0);
                    let b = Some(&send[..]);
                    allgatherv::allgatherv(view, &mut tape, sub, s, b, &mut recv, &at, &mut full)
                }
                Op::Alltoallv => {
                    send.resize(n * len, 0);
                    recv.resize(n * len, 0);
                    let by_node = (!one_node).then_some(&by_node);
                    let from = Some((&send[..], &at[..]));
                    alltoall::alltoallv(view, &mut tape, s, by_node, from, &mut recv, &at)
                        .map(|done| assert!(done, "blocks one after another do not overlap"))
                }
                Op::Alltoall => {
                    send.resize(n * len, 0);
                    recv.resize(n * len, 0);
                    let by_node = Some(&by_node);
                    alltoall::alltoall(
                        view,
                        &mut tape,
                        sub,
                        s,
                        by_node,
                        Some(&send),
                        &mut recv,
                        len,
                    )
                }
                // Two ranks: one exchange (`Topo::raw_reduce_scatter_block`, and
                // `raw_reduce_scatter` with every block of one length).
                _ if n == 2 => {
                    send.resize(2 * len, 0);
                    recv.resize(len, 0);
                    let me = r as usize;
                    let block = |x: usize| x * len..(x + 1) * len;
                    let (tmp, _) = scratch.pair(len);
                    reduce_scatter::pair(
                        view,
                        &mut tape,
                        Some(&send),
                        &mut recv,
                        block(me),
                        block(1 - me),
                        &combine,
                        tmp,
                    )
                }
                _ => {
                    send.resize(n * len, 0);
                    recv.resize(len, 0);
                    reduce_scatter::reduce_scatter_block(
                        view,
                        &mut tape,
                        sub,
                        s,
                        Some(&send),
                        &mut recv,
                        len,
                        &combine,
                        &mut scratch,
                        &mut full,
                    )
                }
            };
            if let Err(e) = done {
                failed.get_or_insert_with(|| format!("rank {r}'s blocking {op} failed: {e}"));
            }
            tape.take()
        });
        match failed {
            Some(why) => Err(why),
            None => Ok(Blocking::Recorded(programs)),
        }
    }

    /// Runs `programs` on this cluster under `model`.
    pub fn run(&self, programs: &Programs, model: &CostModel) -> Result<Outcome, SimError> {
        engine::run(programs, &self.places, model)
    }
}

/// `n` blocks of `len` bytes one after another, in rank order.
fn even_blocks(n: u32, len: usize) -> Vec<std::ops::Range<usize>> {
    (0..n as usize).map(|q| q * len..(q + 1) * len).collect()
}

/// The element a reduction's message is cut into: doubles where the size allows.
fn elem_of(len: usize) -> usize {
    if len.is_multiple_of(8) { 8 } else { 1 }
}

/// Whether an exchange between every pair of `n` ranks is simulated (`n^2` steps).
fn pairs_fit(n: u32) -> Result<(), String> {
    if n > RING_UP_TO {
        return Err(format!(
            "an exchange between every pair of more than {RING_UP_TO} ranks is not simulated"
        ));
    }
    Ok(())
}

/// Whether topo-run's ring over `n` ranks, which the settings choose, is simulated.
fn ring_fits(n: u32) -> Result<(), String> {
    if n > RING_UP_TO {
        return Err(format!(
            "the settings choose the ring, and a ring over more than {RING_UP_TO} ranks is not simulated"
        ));
    }
    Ok(())
}

/// A flat algorithm: its name and rank `r`'s program among `n` for `m` bytes.
pub type Baseline = (&'static str, fn(u32, u32, u64) -> Program);

/// The flat algorithms MPI libraries use for `op`.
pub fn baselines(op: Op) -> Vec<Baseline> {
    match op {
        Op::Bcast => vec![("binomial", flat::bcast_binomial)],
        Op::Reduce => vec![("binomial", flat::reduce_binomial)],
        Op::Allreduce => vec![
            ("recursive doubling", flat::allreduce_rd),
            ("ring", flat::allreduce_ring),
            ("rabenseifner", flat::allreduce_rabenseifner),
        ],
        Op::Barrier => vec![("dissemination", |r, n, _| flat::barrier_dissemination(r, n))],
        Op::Allgather => vec![
            ("recursive doubling (bruck)", flat::allgather_rd),
            ("ring", flat::allgather_ring),
        ],
        Op::Gather => vec![
            ("binomial", flat::gather_binomial),
            ("linear", flat::gather_linear),
        ],
        Op::Scatter => vec![
            ("binomial", flat::scatter_binomial),
            ("linear", flat::scatter_linear),
        ],
        Op::Alltoall => vec![
            ("bruck", flat::alltoall_bruck),
            ("pairwise", flat::alltoall_pairwise),
            ("linear", flat::alltoall_linear),
        ],
        Op::ReduceScatter => vec![
            ("recursive halving", flat::reduce_scatter_halving),
            ("ring", flat::reduce_scatter_ring),
        ],
        Op::Scan => vec![
            ("recursive doubling", flat::scan_rd),
            ("linear", flat::scan_linear),
        ],
        // Open MPI's and MPICH's Gatherv and Scatterv are linear.
        Op::Gatherv => vec![("linear", flat::gather_linear)],
        Op::Scatterv => vec![("linear", flat::scatter_linear)],
        Op::Allgatherv => vec![
            ("recursive doubling (bruck)", flat::allgather_rd),
            ("ring", flat::allgather_ring),
        ],
        Op::Alltoallv => vec![
            ("pairwise", flat::alltoall_pairwise),
            ("linear", flat::alltoall_linear),
        ],
        Op::ReduceScatterV => vec![
            ("recursive halving", flat::reduce_scatter_halving),
            ("ring", flat::reduce_scatter_ring),
        ],
        Op::Exscan => vec![
            ("recursive doubling", flat::exscan_rd),
            ("linear", flat::exscan_linear),
        ],
    }
}

/// Whether flat algorithm `name` of `op` makes `n^2` steps in all on `n` ranks (then it is
/// simulated up to [`RING_UP_TO`] ranks).
fn quadratic(op: Op, name: &str) -> bool {
    name == "ring" || (matches!(op, Op::Alltoall | Op::Alltoallv) && name != "bruck")
}

/// One algorithm's prediction for one op and size.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Prediction {
    /// The collective.
    pub op: Op,
    /// Bytes (per rank for the Allgather; 0 for the barrier).
    pub bytes: u64,
    /// `topo-run` or a flat algorithm's name.
    pub algorithm: &'static str,
    /// The prediction, or why there is none.
    #[serde(flatten)]
    pub result: Predicted,
}

/// A prediction or why there is none.
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Predicted {
    /// Simulated.
    Outcome(Outcome),
    /// Not simulated, and why.
    Skipped(String),
}

/// Predicts `op` of `bytes` on `cluster`: topo-run's schedule (its nonblocking form)
/// first, then its blocking form, then each flat algorithm.
pub fn predict(
    cluster: &Cluster,
    model: &CostModel,
    op: Op,
    bytes: u64,
) -> Result<Vec<Prediction>, SimError> {
    let n = cluster.size();
    let mut out = Vec::new();
    let mut push = |algorithm: &'static str, result: Predicted| {
        out.push(Prediction {
            op,
            bytes,
            algorithm,
            result,
        })
    };
    let nonblocking = match cluster.topo_run(op, bytes) {
        Ok(programs) => Predicted::Outcome(cluster.run(&programs, model)?),
        Err(why) => Predicted::Skipped(why),
    };
    let blocking = match cluster.topo_run_blocking(op, bytes) {
        Ok(Blocking::Schedule) => nonblocking.clone(),
        Ok(Blocking::Recorded(programs)) => Predicted::Outcome(cluster.run(&programs, model)?),
        Err(why) => Predicted::Skipped(why),
    };
    push(TOPO_RUN, nonblocking);
    push(TOPO_RUN_BLOCKING, blocking);
    for (name, build) in baselines(op) {
        if quadratic(op, name) && n > RING_UP_TO {
            let what = if name == "ring" {
                "a ring"
            } else {
                "an exchange between every pair"
            };
            push(
                name,
                Predicted::Skipped(format!(
                    "{what} of more than {RING_UP_TO} ranks is not simulated"
                )),
            );
            continue;
        }
        let programs = Programs::build(n, |r| build(r, n, bytes));
        push(name, Predicted::Outcome(cluster.run(&programs, model)?));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
