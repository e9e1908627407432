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

use std::fmt;
use std::str::FromStr;

use topo_hierarchy::remap;
use topo_hierarchy::remap::halving::HalvingOrder;
use topo_hierarchy::remap::partition::Placement;
use topo_hierarchy::settings::{AllgatherAlg, AllreduceAlg, BarrierAlg};
use topo_hierarchy::{Digest, Hierarchy, Job, LevelFilter, NetworkMap, Settings};
use topo_runtime::nonblocking::iallgather::Order;
use topo_runtime::nonblocking::{iallreduce, ibarrier, ibcast, ireduce};
use topo_runtime::reduce::Scratch;
use topo_runtime::view::View;
use topo_runtime::{allreduce, barrier, bcast, reduce};

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
}

impl Op {
    /// Every op.
    pub const ALL: [Op; 5] = [
        Op::Bcast,
        Op::Reduce,
        Op::Allreduce,
        Op::Barrier,
        Op::Allgather,
    ];
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Op::Bcast => "bcast",
            Op::Reduce => "reduce",
            Op::Allreduce => "allreduce",
            Op::Barrier => "barrier",
            Op::Allgather => "allgather",
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
                    "unknown collective {s:?}; use bcast, reduce, allreduce, barrier or allgather"
                )
            })
    }
}

/// The flat algorithms simulate a ring only up to this many ranks: it takes `n - 1`
/// rounds on every rank, `n^2` steps in all.
pub const RING_UP_TO: u32 = 4096;

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
        // The flat Allreduce forms cut the message into whole elements: doubles where the
        // size allows.
        let elem = if len.is_multiple_of(8) { 8 } else { 1 };
        match (op, s.allreduce_for(len)) {
            (Op::Allreduce, AllreduceAlg::Ring) => {
                ring_fits(n)?;
                let ring = remap::Positions::new(remap::ring_positions(&self.placement));
                return Ok(Programs::build(n, |r| {
                    let peers = ring.ring_peers(r).expect(PERMUTATION);
                    Program::from_builder(&iallreduce::build_ring(&peers, elem, true, len))
                }));
            }
            (Op::Allreduce, alg) if alg.uses_halving_order() => {
                let order = HalvingOrder::new(&self.placement);
                return Ok(Programs::build(n, |r| {
                    let peers = order.peers(r).expect(PERMUTATION);
                    Program::from_builder(&if let AllreduceAlg::Rabenseifner(piece) = alg {
                        iallreduce::build_rabenseifner(&peers, elem, true, len, piece as usize)
                    } else {
                        iallreduce::build_recursive_doubling(&peers, true, len).0
                    })
                }));
            }
            _ => {}
        }
        Ok(Programs::build(n, |r| {
            let view = self.view(r);
            // Allreduce and Barrier run on the views the runtime gives them.
            let network = view.over_network(&self.network);
            let b = match op {
                Op::Bcast => ibcast::build(&view, s, 0, len),
                Op::Reduce => ireduce::build(&view, s, 0, true, len, elem).0,
                Op::Allreduce => {
                    let view = allreduce::view_for(&view, &network, s, len);
                    iallreduce::build(view, s, true, len, elem).0
                }
                Op::Barrier | Op::Allgather => ibarrier::build(&network, s),
            };
            Program::from_builder(&b)
        }))
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
            Op::Bcast | Op::Reduce => false,
        };
        if flat {
            return Ok(Blocking::Schedule);
        }
        // Buffers of the real sizes (the code slices them), reused by every rank.
        let (send, mut recv) = (vec![0u8; len], vec![0u8; len]);
        let mut scratch = Scratch::default();
        let elem = if len.is_multiple_of(8) { 8 } else { 1 };
        let mut failed = None;
        let programs = Programs::build(n, |r| {
            let view = self.view(r);
            let mut tape = blocking::Tape::default();
            let combine = tape.combine(elem);
            let done = match op {
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
                // (The Allgather has returned above.)
                Op::Barrier | Op::Allgather => {
                    barrier::barrier(&view.over_network(&self.network), &mut tape, s)
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
    }
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
        if name == "ring" && n > RING_UP_TO {
            push(
                name,
                Predicted::Skipped(format!(
                    "a ring over more than {RING_UP_TO} ranks is not simulated"
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
