//! The search: each knob, algorithm and pipeline chunk against the current choice, in the
//! same job, interleaved, within the run's budget.

use std::time::Instant;

use mpi::topology::SimpleCommunicator;
use topo_hierarchy::LevelName;
use topo_hierarchy::settings::format_bytes;

use crate::measure::{Contexts, agreed_elapsed, compare};
use crate::space::{self, Knob, Op};
use crate::state::State;

/// The run's clock, plan of work and progress lines.
pub(crate) struct Run<'w> {
    pub(crate) world: &'w SimpleCommunicator,
    pub(crate) contexts: Contexts<'w>,
    pub(crate) start: Instant,
    pub(crate) budget: f64,
    /// Seconds per candidate and size.
    pub(crate) slice: f64,
    pub(crate) units: usize,
    pub(crate) done: usize,
    pub(crate) rank0: bool,
    pub(crate) out_of_time: bool,
}

impl Run<'_> {
    pub(crate) fn say(&self, line: &str) {
        if self.rank0 {
            let pct = 100 * self.done / self.units.max(1);
            eprintln!("topo-run tune: [{pct:>3}%] {line}");
        }
    }

    /// Whether there is time left for more measurements (the same answer on every rank).
    pub(crate) fn time_left(&mut self) -> bool {
        if !self.out_of_time && agreed_elapsed(self.world, self.start) > self.budget {
            self.out_of_time = true;
            self.say("the budget is spent: what is left keeps its current setting");
        }
        !self.out_of_time
    }

    /// Opens a context per candidate settings.
    pub(crate) fn open(
        &mut self,
        cands: &[Vec<(String, String)>],
    ) -> anyhow::Result<Vec<Option<topo_runtime::Topo>>> {
        cands.iter().map(|p| self.contexts.open(p)).collect()
    }

    pub(crate) fn compare(
        &mut self,
        cands: &mut [Option<topo_runtime::Topo>],
        op: Op,
        bytes: usize,
    ) -> Vec<f64> {
        self.done += cands.len();
        compare(self.world, cands, op, bytes, self.slice)
    }
}

pub(crate) fn show_times(names: &[String], times: &[f64]) -> String {
    names
        .iter()
        .zip(times)
        .map(|(n, t)| format!("{n} {t:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Tunes one knob: every value against the current one, over the sizes it touches.
pub(crate) fn tune_knob(
    run: &mut Run,
    state: &mut State,
    knob: &Knob,
    ops: &[Op],
    sizes: &[usize],
) -> anyhow::Result<()> {
    let sizes: Vec<usize> = sizes
        .iter()
        .copied()
        .filter(|&s| s >= knob.from && s <= knob.to)
        .collect();
    if sizes.is_empty() || !run.time_left() {
        return Ok(());
    }
    let now = state.value(knob.key);
    let current = knob
        .values
        .iter()
        .position(|v| *v == now)
        .expect("knobs hold the current value");
    let pairs: Vec<_> = knob
        .values
        .iter()
        .map(|v| state.pairs(Some((knob.key, v)), None, None))
        .collect();
    let mut cands = run.open(&pairs)?;
    let mut ratios = vec![Vec::new(); knob.values.len()];
    let ops = knob.ops(ops);
    for &op in ops {
        for &b in &sizes {
            if !run.time_left() {
                return Ok(());
            }
            let t = run.compare(&mut cands, op, b);
            for (c, r) in ratios.iter_mut().enumerate() {
                r.push(t[c] / t[current]);
            }
            run.say(&format!(
                "{} {} {}: {} us",
                knob.key,
                op.key(),
                format_bytes(b as u64),
                show_times(&knob.values, &t)
            ));
        }
    }
    let pick = space::choose_overall(&ratios, current);
    run.say(&format!("{} {} (was {now})", knob.key, knob.values[pick]));
    if pick != current {
        state.values.insert(knob.key, knob.values[pick].clone());
    }
    Ok(())
}

/// Tunes the algorithm of `op` at one level (or, for allreduce, the variant) per size.
pub(crate) fn tune_algorithm(
    run: &mut Run,
    state: &mut State,
    op: Op,
    level: Option<(LevelName, bool, u32)>,
    sizes: &[usize],
) -> anyhow::Result<()> {
    if !run.time_left() {
        return Ok(());
    }
    let (scope, lvl, intra, members) = match level {
        Some((l, intra, m)) => (l.to_string(), l, intra, m),
        None => ("*".to_string(), LevelName::World, false, 2),
    };
    let first_current = state.current(op, lvl, intra, members as usize, sizes[0]);
    // Algorithms that the settings use now at some size are candidates too.
    let mut algs = space::algorithms(op, members, state.nodes, &first_current);
    for &b in sizes {
        let c = state.current(op, lvl, intra, members as usize, b);
        if !algs.contains(&c) {
            algs.push(c);
        }
    }
    let pairs: Vec<_> = algs
        .iter()
        .map(|a| state.pairs(None, Some((op, scope.clone(), a.clone())), None))
        .collect();
    let mut cands = run.open(&pairs)?;
    let mut picks = Vec::new();
    for &b in sizes {
        let current = state.current(op, lvl, intra, members as usize, b);
        let c = algs
            .iter()
            .position(|a| *a == current)
            .expect("the current algorithm is a candidate");
        if !run.time_left() {
            picks.push(current);
            continue;
        }
        let t = run.compare(&mut cands, op, b);
        let pick = space::choose(&t, c);
        run.say(&format!(
            "{} {scope} {}: {} us -> {}",
            op.key(),
            format_bytes(b as u64),
            show_times(&algs, &t),
            algs[pick]
        ));
        picks.push(algs[pick].clone());
    }
    let rule_sizes: Vec<usize> = sizes
        .iter()
        .map(|&b| op.rule_bytes(b, state.ranks))
        .collect();
    let rules = space::rules(&scope, &rule_sizes, &picks);
    state.tuned.entry(op.key()).or_default().extend(rules);
    if level.is_some() {
        state.tuned_levels.push((op.key(), scope));
    }
    Ok(())
}

/// Tunes the pipeline chunk of `op` per size, from [`space::CHUNK_FROM`] up.
pub(crate) fn tune_chunk(
    run: &mut Run,
    state: &mut State,
    op: Op,
    sizes: &[usize],
) -> anyhow::Result<()> {
    let sizes: Vec<usize> = sizes
        .iter()
        .copied()
        .filter(|&b| b >= space::CHUNK_FROM)
        .collect();
    if sizes.is_empty() || !run.time_left() {
        return Ok(());
    }
    let now: Vec<String> = sizes.iter().map(|&b| state.current_chunk(op, b)).collect();
    let mut values = space::chunks(&now[0]);
    for c in &now {
        if !values.contains(c) {
            values.push(c.clone());
        }
    }
    let pairs: Vec<_> = values
        .iter()
        .map(|v| state.pairs(None, None, Some((op.key().to_string(), v.clone()))))
        .collect();
    let mut cands = run.open(&pairs)?;
    let mut picks = Vec::new();
    for (i, &b) in sizes.iter().enumerate() {
        let c = values
            .iter()
            .position(|v| *v == now[i])
            .expect("the current chunk is a candidate");
        if !run.time_left() {
            picks.push(now[i].clone());
            continue;
        }
        let t = run.compare(&mut cands, op, b);
        let pick = space::choose(&t, c);
        run.say(&format!(
            "chunk {} {}: {} us -> {}",
            op.key(),
            format_bytes(b as u64),
            show_times(&values, &t),
            values[pick]
        ));
        picks.push(values[pick].clone());
    }
    if picks != now {
        let rules = space::rules(op.key(), &sizes, &picks);
        state.chunks.extend(rules);
    }
    Ok(())
}
