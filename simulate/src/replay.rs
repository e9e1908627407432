//! `topo-run simulate --profile FILE`: an application's collectives, as `topo-run
//! --profile` recorded them (`topo_profile`), replayed on a cluster. Every size class of
//! every (call, communicator kind) is predicted once per algorithm, at the class's
//! smallest size, and counted as many times as the busiest rank called it; topo-run's
//! time (its blocking form's for blocking calls where one is simulated) is set beside the
//! fastest flat algorithm's.
//!
//! What the replay cannot know is said with it ([`Replay::caveats`]): every communicator
//! is replayed as the whole job, and the v-forms with every rank's block of the size this
//! rank's had (the profile keeps no counts of the other ranks).

use std::collections::BTreeMap;

use topo_profile::Profile;

use crate::engine::SimError;
use crate::model::CostModel;
use crate::{Cluster, Op, Predicted, Prediction, TOPO_RUN, TOPO_RUN_BLOCKING, is_topo_run};

/// The simulated collective a profiled call is replayed as, and whether it is replayed
/// with the call's own blocks (`false` for the v-forms, whose blocks are all taken of one
/// size).
pub fn op_of(call: &str) -> Option<(Op, bool)> {
    let base = call.strip_prefix("MPI_")?;
    // The nonblocking forms replay as their blocking ones (topo-run's schedule).
    let base = match base.strip_prefix('I') {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_lowercase()) => {
            let mut s = rest.to_string();
            s[..1].make_ascii_uppercase();
            s
        }
        _ => base.to_string(),
    };
    Some(match base.as_str() {
        "Bcast" => (Op::Bcast, true),
        "Reduce" => (Op::Reduce, true),
        "Allreduce" => (Op::Allreduce, true),
        "Barrier" => (Op::Barrier, true),
        "Allgather" => (Op::Allgather, true),
        "Allgatherv" => (Op::Allgatherv, false),
        "Gather" => (Op::Gather, true),
        "Gatherv" => (Op::Gatherv, false),
        "Scatter" => (Op::Scatter, true),
        "Scatterv" => (Op::Scatterv, false),
        "Alltoall" => (Op::Alltoall, true),
        "Alltoallv" => (Op::Alltoallv, false),
        "Reduce_scatter_block" => (Op::ReduceScatter, true),
        "Reduce_scatter" => (Op::ReduceScatterV, false),
        "Scan" => (Op::Scan, true),
        "Exscan" => (Op::Exscan, true),
        _ => return None,
    })
}

/// One (call, communicator kind) of the profile, replayed.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    /// The profiled call (`MPI_Allreduce`).
    pub call: String,
    /// Its communicator kind in the profile.
    pub comm: String,
    /// The collective simulated for it.
    pub op: Op,
    /// Whether the call's blocks are replayed as they were (`false` for the v-forms:
    /// every rank's block of the size this rank's had).
    pub exact: bool,
    /// The busiest rank's calls.
    pub calls: u64,
    /// topo-run's predicted time for them, in microseconds.
    pub topo_run_us: f64,
    /// The fastest flat algorithm's (per size class), in microseconds.
    pub flat_us: f64,
    /// The flat algorithm that was fastest for the most calls.
    pub flat_algorithm: String,
    /// The time the profile measured (the slowest rank's), in microseconds.
    pub measured_us: f64,
    /// Of `calls`, those of blocking calls whose topo-run time is its nonblocking
    /// schedule's, its blocking form not being simulated at that size.
    pub schedule_for_blocking: u64,
}

/// A profile replayed on a cluster.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Replay {
    pub rows: Vec<Row>,
    /// topo-run's predicted collective time in all, in microseconds.
    pub topo_run_us: f64,
    /// The flat algorithms'.
    pub flat_us: f64,
    /// The measured one (the slowest rank's).
    pub measured_us: f64,
    /// What the replay assumed.
    pub caveats: Vec<String>,
    /// Classes that could not be replayed, and why.
    pub skipped: Vec<String>,
}

fn time(p: &Prediction) -> Option<f64> {
    match &p.result {
        Predicted::Outcome(o) => Some(o.time_us),
        Predicted::Skipped(_) => None,
    }
}

/// Replays `profile` on `cluster` over `model`.
pub fn replay(cluster: &Cluster, model: &CostModel, profile: &Profile) -> Result<Replay, SimError> {
    let mut cache: BTreeMap<(String, u64), Vec<Prediction>> = BTreeMap::new();
    let mut rows = Vec::new();
    let mut skipped = Vec::new();
    let (mut stand_ins, mut not_world) = (Vec::new(), 0u64);
    for c in &profile.collectives {
        let Some((op, exact)) = op_of(&c.call) else {
            skipped.push(format!("{}: not a collective the simulator knows", c.call));
            continue;
        };
        if !exact && !stand_ins.contains(&c.call) {
            stand_ins.push(c.call.clone());
        }
        let blocking = !c.call.starts_with("MPI_I");
        let mut row = Row {
            call: c.call.clone(),
            comm: c.comm.clone(),
            op,
            exact,
            calls: 0,
            topo_run_us: 0.0,
            flat_us: 0.0,
            flat_algorithm: String::new(),
            measured_us: c.seconds.max * 1e6,
            schedule_for_blocking: 0,
        };
        let mut flat_calls: BTreeMap<&'static str, u64> = BTreeMap::new();
        for class in &c.bytes {
            let bytes = if op == Op::Barrier {
                0
            } else {
                class.min_bytes
            };
            let key = (op.to_string(), bytes);
            if !cache.contains_key(&key) {
                cache.insert(key.clone(), crate::predict(cluster, model, op, bytes)?);
            }
            let preds = &cache[&key];
            let recorded = preds
                .iter()
                .find(|p| blocking && p.algorithm == TOPO_RUN_BLOCKING && time(p).is_some());
            let stand_in = blocking
                && recorded.is_none()
                && preds.iter().any(|p| p.algorithm == TOPO_RUN_BLOCKING);
            let topo = recorded
                .or_else(|| preds.iter().find(|p| p.algorithm == TOPO_RUN))
                .and_then(time);
            let flat = preds
                .iter()
                .filter(|p| !is_topo_run(p.algorithm))
                .filter_map(|p| time(p).map(|t| (p.algorithm, t)))
                .min_by(|a, b| a.1.total_cmp(&b.1));
            let (Some(topo), Some((flat_name, flat))) = (topo, flat) else {
                skipped.push(format!(
                    "{} on {} of {} bytes: no prediction of {}",
                    c.call,
                    c.comm,
                    bytes,
                    if topo.is_none() {
                        "topo-run's"
                    } else {
                        "a flat algorithm"
                    }
                ));
                continue;
            };
            let n = class.calls_max;
            if stand_in {
                row.schedule_for_blocking += n;
            }
            row.calls += n;
            row.topo_run_us += topo * n as f64;
            row.flat_us += flat * n as f64;
            *flat_calls.entry(flat_name).or_default() += n;
        }
        row.flat_algorithm = flat_calls
            .iter()
            .max_by_key(|(_, n)| **n)
            .map_or(String::new(), |(name, _)| name.to_string());
        if !matches!(c.comm.as_str(), "world" | "duplicate") {
            not_world += row.calls;
        }
        rows.push(row);
    }
    let mut caveats = vec![
        "every communicator is replayed as the whole job; each size class at its smallest \
         size, as recorded (each rank's block as large as in the profiled run, as when a \
         problem grows with the job); calls: the busiest rank's"
            .to_string(),
    ];
    let stood_in: u64 = rows.iter().map(|r| r.schedule_for_blocking).sum();
    if stood_in > 0 {
        caveats.push(format!(
            "{stood_in} blocking calls (marked *) are predicted with topo-run's nonblocking \
             schedule: their blocking form is simulated only up to {} of data per call",
            topo_hierarchy::settings::format_bytes(crate::BLOCKING_BYTES_UP_TO)
        ));
    }
    if not_world > 0 {
        caveats.push(format!(
            "{not_world} calls were on smaller communicators (node, split, other): their \
             prediction is the whole job's, an upper bound for both columns"
        ));
    }
    if !stand_ins.is_empty() {
        caveats.push(format!(
            "replayed with every rank's block of one size (the profile keeps no other \
             ranks' counts): {}",
            stand_ins.join(", ")
        ));
    }
    Ok(Replay {
        topo_run_us: rows.iter().map(|r| r.topo_run_us).sum(),
        flat_us: rows.iter().map(|r| r.flat_us).sum(),
        measured_us: rows.iter().map(|r| r.measured_us).sum(),
        rows,
        caveats,
        skipped,
    })
}
