//! `topo-run-tune`: finds good runtime settings for the machine it runs on and writes them
//! as a rules file (`topo-run-rules 1`, docs/runtime.md "Tuning"). Started by
//! `srun --mpi=pmix topo-run tune`, which runs it on every rank with a plan.
//!
//! It starts from the settings of its plan (the defaults, or what the command line and
//! `--rules` gave) and improves them one part at a time, each measured against the current
//! choice in the same job, interleaved:
//! 1. the queue geometry and thresholds (`single-copy`, `fragment`, `slots`), one value for
//!    all sizes each, kept only if it pays overall and hurts nowhere;
//! 2. per level, bottom-up, the broadcast and reduce algorithm for each message size;
//! 3. the allreduce variant and the allgather algorithm for each message size;
//! 4. where some rank has two or more levels, each collective's pipeline chunk for each
//!    message size (after its algorithms, which the chunk serves).
//!
//! Then it measures the settings it started from against the tuned ones at every size and
//! writes both columns into the file's comments. The whole run keeps to `--budget`.

mod measure;
mod space;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Parser;
use mpi::collective::{CommunicatorCollectives, SystemOperation};
use mpi::topology::{Communicator, SimpleCommunicator};
use topo_hierarchy::settings::format_bytes;
use topo_hierarchy::{LevelName, PLAN_ENV, RankPlan, RulesFile, Settings};

use crate::measure::{Contexts, agreed_elapsed, compare};
use crate::space::{Knob, Op};

#[derive(Parser, Debug)]
#[command(
    name = "topo-run-tune",
    about = "Measure topo-run's settings on this machine and write a rules file; started by \
             `srun --mpi=pmix topo-run tune` (see `topo-run tune --help`)"
)]
struct Args {
    /// Seconds the whole run may take (measurements are spread over it).
    #[arg(long, default_value_t = 600)]
    budget: u64,
    /// The rules file to write (rank 0 writes it; replaced if it exists).
    #[arg(long, short, default_value = "topo-run.rules")]
    output: PathBuf,
    /// Collectives to tune, comma-separated: bcast, reduce, allreduce, allgather (its sizes
    /// are the whole gathered result).
    #[arg(
        long,
        default_value = "bcast,reduce,allreduce,allgather",
        value_delimiter = ','
    )]
    ops: Vec<String>,
    /// Smallest message in bytes.
    #[arg(long, default_value = "4", value_parser = bytes)]
    min: usize,
    /// Largest message in bytes.
    #[arg(long, default_value = "16M", value_parser = bytes)]
    max: usize,
}

fn bytes(s: &str) -> Result<usize, String> {
    topo_hierarchy::settings::parse_bytes(s).map(|n| n as usize)
}

/// What the job looks like to the tuner, the same on every rank.
#[derive(Debug)]
struct Job {
    /// Levels with groups of two or more ranks, bottom-up: name, whether its groups are
    /// inside one node, the largest group.
    levels: Vec<(LevelName, bool, u32)>,
    /// Some rank has more than one level (messages are pipelined in chunks).
    pipelined: bool,
    /// The settings the run starts from (the plan's).
    base: Vec<(String, String)>,
    size: i32,
    /// Nodes in the job (the allreduce defaults depend on it).
    nodes: u32,
    node: String,
}

impl Job {
    /// The levels, comma-separated.
    fn level_names(&self) -> String {
        let names: Vec<String> = self.levels.iter().map(|l| l.0.to_string()).collect();
        names.join(",")
    }
}

/// Every level name a plan can hold, in the order of the hierarchy.
fn level_table() -> Vec<LevelName> {
    let mut t: Vec<LevelName> = topo_hierarchy::IntraLevel::ALL
        .into_iter()
        .map(LevelName::Intra)
        .collect();
    t.push(LevelName::Node);
    t.extend((1..=32).map(LevelName::Switch));
    t.push(LevelName::World);
    t
}

fn job(world: &SimpleCommunicator) -> anyhow::Result<Job> {
    let text = std::env::var(PLAN_ENV).with_context(|| {
        format!(
            "{PLAN_ENV} is not set: start the tuner with `srun --mpi=pmix topo-run tune`, so \
             that every rank has its plan"
        )
    })?;
    let plan = RankPlan::decode(&text).context("reading the rank's plan")?;
    let table = level_table();
    // Per level: the largest group, and whether some group of it spans nodes.
    let mut members = vec![0u32; table.len()];
    let mut spans = vec![0u32; table.len()];
    for g in &plan.groups {
        let Some(i) = table.iter().position(|l| *l == g.level) else {
            bail!("level {} is beyond what the tuner knows", g.level);
        };
        members[i] = members[i].max(g.members.len() as u32);
        let intra = g.members.iter().all(|m| plan.peers.contains(m));
        spans[i] = u32::from(!intra);
    }
    let (mut all_members, mut all_spans) = (vec![0u32; table.len()], vec![0u32; table.len()]);
    let max = SystemOperation::max();
    world.all_reduce_into(&members[..], &mut all_members[..], max);
    world.all_reduce_into(&spans[..], &mut all_spans[..], max);
    let groups = plan.groups.len() as u32;
    let mut most_groups = 0u32;
    world.all_reduce_into(&groups, &mut most_groups, max);
    let leader = u32::from(plan.peers.first().is_none_or(|&p| p == plan.rank));
    let mut nodes = 0u32;
    world.all_reduce_into(&leader, &mut nodes, SystemOperation::sum());
    let levels = (0..table.len())
        .filter(|&i| all_members[i] >= 2)
        .map(|i| (table[i], all_spans[i] == 0, all_members[i]))
        .collect();
    let base = plan
        .settings
        .iter()
        .filter(|(k, _)| k != "progress")
        .cloned()
        .collect();
    Ok(Job {
        levels,
        pipelined: most_groups > 1,
        base,
        size: world.size(),
        nodes,
        node: plan.node,
    })
}

/// The settings being tuned: values of the knobs, and the rules found so far per op.
#[derive(Debug, Clone)]
struct State {
    base: Vec<(String, String)>,
    values: BTreeMap<&'static str, String>,
    tuned: BTreeMap<&'static str, Vec<(String, String)>>,
    /// Per op, the levels whose rules were tuned (the base's rules of that op for them
    /// are dropped).
    tuned_levels: Vec<(&'static str, String)>,
    /// Pipeline-chunk rules found so far, as (selector, chunk); each selector starts with
    /// its op's key.
    chunks: Vec<(String, String)>,
    /// Ranks in the job (the allgather defaults depend on it).
    ranks: usize,
    /// Nodes in the job (the allreduce and allgather defaults depend on it).
    nodes: u32,
}

impl State {
    fn new(base: &[(String, String)], ranks: usize, nodes: u32) -> Self {
        State {
            ranks,
            nodes,
            base: base.to_vec(),
            values: BTreeMap::new(),
            tuned: BTreeMap::new(),
            tuned_levels: Vec::new(),
            chunks: Vec::new(),
        }
    }

    fn value(&self, key: &str) -> String {
        if let Some(v) = self.values.get(key) {
            return v.clone();
        }
        if let Some((_, v)) = self.base.iter().find(|(k, _)| k == key) {
            return v.clone();
        }
        let d = Settings::default();
        match key {
            "slots" => d.slots.to_string(),
            "fragment" => format_bytes(d.fragment.into()),
            "single-copy" => format_bytes(d.single_copy.into()),
            _ => d.spin.to_string(),
        }
    }

    /// The base's rules of `op` that still matter: not for a level tuned since.
    fn base_rules(&self, op: Op) -> Vec<(String, String)> {
        let Some((_, text)) = self.base.iter().find(|(k, _)| k == op.key()) else {
            return Vec::new();
        };
        if matches!(op, Op::Allreduce | Op::Allgather) && self.tuned.contains_key(op.key()) {
            return Vec::new(); // the tuned rules end with one for every size
        }
        text.split(',')
            .filter_map(|r| {
                let (sel, alg) = r.split_once('=').unwrap_or(("*", r));
                let scope = sel.split('<').next().unwrap_or("");
                (!self
                    .tuned_levels
                    .iter()
                    .any(|(o, l)| *o == op.key() && l == scope))
                .then(|| (sel.to_string(), alg.to_string()))
            })
            .collect()
    }

    /// All rules of `op`, in order, with `first` tried before them.
    fn rules(&self, op: Op, first: Option<(String, String)>) -> Vec<(String, String)> {
        let mut out: Vec<_> = first.into_iter().collect();
        out.extend(self.tuned.get(op.key()).cloned().unwrap_or_default());
        out.extend(self.base_rules(op));
        out
    }

    /// The chunk rules in order: `first`, those found so far, then the base's.
    fn chunk_rules(&self, first: Option<(String, String)>) -> Vec<(String, String)> {
        let mut out: Vec<_> = first
            .into_iter()
            .chain(self.chunks.iter().cloned())
            .collect();
        if let Some((_, text)) = self.base.iter().find(|(k, _)| k == "chunk") {
            out.extend(text.split(',').map(|r| {
                let (sel, size) = r.split_once('=').unwrap_or(("*", r));
                (sel.to_string(), size.to_string())
            }));
        }
        out
    }

    /// The settings pairs, with `knob` set to a candidate value, `rule` first in its op and
    /// `chunk` (selector, chunk) the first chunk rule.
    fn pairs(
        &self,
        knob: Option<(&str, &str)>,
        rule: Option<(Op, String, String)>,
        chunk: Option<(String, String)>,
    ) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        let chunks: Vec<String> = self
            .chunk_rules(chunk)
            .iter()
            .map(|(sel, size)| format!("{sel}={size}"))
            .collect();
        if !chunks.is_empty() {
            out.push(("chunk".to_string(), chunks.join(",")));
        }
        for key in ["slots", "fragment", "spin", "single-copy"] {
            let v = match knob {
                Some((k, v)) if k == key => v.to_string(),
                _ => self.value(key),
            };
            out.push((key.to_string(), v));
        }
        for op in Op::ALL {
            let first = match &rule {
                Some((o, sel, alg)) if *o == op => Some((sel.clone(), alg.clone())),
                _ => None,
            };
            let rules = self.rules(op, first);
            if !rules.is_empty() {
                let text: Vec<String> = rules.iter().map(|(s, a)| format!("{s}={a}")).collect();
                out.push((op.key().to_string(), text.join(",")));
            }
        }
        out
    }

    /// The pipeline chunk the settings give `op` for `bytes` now.
    fn current_chunk(&self, op: Op, bytes: usize) -> String {
        let s =
            Settings::from_pairs(&self.pairs(None, None, None)).expect("tuned settings are valid");
        format_bytes(s.chunk_for(op, bytes).into())
    }

    /// What the settings pick for `op` at `level` (groups of `members`) for `bytes` now.
    fn current(
        &self,
        op: Op,
        level: LevelName,
        intra: bool,
        members: usize,
        bytes: usize,
    ) -> String {
        let mut s =
            Settings::from_pairs(&self.pairs(None, None, None)).expect("tuned settings are valid");
        s.nodes = self.nodes;
        s.ranks = self.ranks as u32;
        let alg = match op {
            Op::Bcast => s.bcast_for(level, intra, members, bytes).to_string(),
            Op::Reduce => s.reduce_for(level, intra, members, bytes).to_string(),
            Op::Allreduce => s.allreduce_for(bytes).to_string(),
            Op::Allgather => s.allgather_for(bytes, self.ranks).to_string(),
        };
        space::canonical(alg)
    }

    /// Drops the algorithm and chunk rules tuned for `op`: the base's rules for it apply
    /// again.
    fn revert_rules(&mut self, op: Op) {
        self.tuned.remove(op.key());
        self.tuned_levels.retain(|(o, _)| *o != op.key());
        self.chunks
            .retain(|(sel, _)| sel.split('<').next() != Some(op.key()));
    }

    /// The rules file of these settings.
    fn file(&self) -> anyhow::Result<RulesFile> {
        let mut f = RulesFile::default();
        for op in Op::ALL {
            for (sel, alg) in self.rules(op, None) {
                f.add_line(&format!("{} {sel} {alg}", op.key()))
                    .map_err(anyhow::Error::msg)?;
            }
        }
        for (sel, size) in self.chunk_rules(None) {
            f.add_line(&format!("chunk {sel} {size}"))
                .map_err(anyhow::Error::msg)?;
        }
        for key in ["slots", "fragment", "single-copy"] {
            f.add_line(&format!("{key} {}", self.value(key)))
                .map_err(anyhow::Error::msg)?;
        }
        if self.base.iter().any(|(k, _)| k == "spin") {
            f.add_line(&format!("spin {}", self.value("spin")))
                .map_err(anyhow::Error::msg)?;
        }
        Ok(f)
    }
}

/// The run's clock, plan of work and progress lines.
struct Run<'w> {
    world: &'w SimpleCommunicator,
    contexts: Contexts<'w>,
    start: Instant,
    budget: f64,
    /// Seconds per candidate and size.
    slice: f64,
    units: usize,
    done: usize,
    rank0: bool,
    out_of_time: bool,
}

impl Run<'_> {
    fn say(&self, line: &str) {
        if self.rank0 {
            let pct = 100 * self.done / self.units.max(1);
            eprintln!("topo-run tune: [{pct:>3}%] {line}");
        }
    }

    /// Whether there is time left for more measurements (the same answer on every rank).
    fn time_left(&mut self) -> bool {
        if !self.out_of_time && agreed_elapsed(self.world, self.start) > self.budget {
            self.out_of_time = true;
            self.say("the budget is spent: what is left keeps its current setting");
        }
        !self.out_of_time
    }

    /// Opens a context per candidate settings.
    fn open(
        &mut self,
        cands: &[Vec<(String, String)>],
    ) -> anyhow::Result<Vec<Option<topo_runtime::Topo>>> {
        cands.iter().map(|p| self.contexts.open(p)).collect()
    }

    fn compare(
        &mut self,
        cands: &mut [Option<topo_runtime::Topo>],
        op: Op,
        bytes: usize,
    ) -> Vec<f64> {
        self.done += cands.len();
        compare(self.world, cands, op, bytes, self.slice)
    }
}

fn show_times(names: &[String], times: &[f64]) -> String {
    names
        .iter()
        .zip(times)
        .map(|(n, t)| format!("{n} {t:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Tunes one knob: every value against the current one, over the sizes it touches.
fn tune_knob(
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
fn tune_algorithm(
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
    let algs = space::algorithms(op, members, &first_current);
    // Algorithms that the settings use now at some size are candidates too.
    let mut algs = algs;
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
    let rules = space::rules(&scope, sizes, &picks);
    state.tuned.entry(op.key()).or_default().extend(rules);
    if level.is_some() {
        state.tuned_levels.push((op.key(), scope));
    }
    Ok(())
}

/// Tunes the pipeline chunk of `op` per size, from [`space::CHUNK_FROM`] up.
fn tune_chunk(run: &mut Run, state: &mut State, op: Op, sizes: &[usize]) -> anyhow::Result<()> {
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

fn run(args: &Args) -> anyhow::Result<()> {
    let ops: Vec<Op> = args
        .ops
        .iter()
        .map(|s| {
            s.parse::<Op>().ok().with_context(|| {
                format!("--ops: unknown collective {s:?}; use bcast, reduce, allreduce, allgather")
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let sizes = space::sizes(args.min, args.max);
    if sizes.is_empty() {
        bail!("--min {} is above --max {}", args.min, args.max);
    }
    let universe = mpi::initialize().context("MPI_Init failed")?;
    let world = universe.world();
    // Every rank has a plan, from the same inputs (checked across ranks).
    let main = topo_runtime::Topo::from_env(&world)?;
    match main.fallback() {
        None => {}
        Some(topo_runtime::Fallback::NoPlan) => bail!(
            "{PLAN_ENV} is not set: start the tuner with `srun --mpi=pmix topo-run tune`, so \
             that every rank has its plan"
        ),
        Some(f) => bail!("topo-run's collectives are off in this job ({f:?}): nothing to tune"),
    }
    drop(main);
    let job = job(&world)?;
    let rank0 = world.rank() == 0;
    let mut state = State::new(&job.base, job.size as usize, job.nodes);
    let mut run = Run {
        world: &world,
        contexts: Contexts::new(&world),
        start: Instant::now(),
        budget: args.budget as f64,
        slice: 0.0,
        units: 0,
        done: 0,
        rank0,
        out_of_time: false,
    };
    // Can this node's ranks read each other's memory? A context with single copy on says.
    let probe = run.open(&[state.pairs(Some(("single-copy", "16K")), None, None)])?;
    let single_copy = probe[0].as_ref().is_some_and(|t| t.single_copy().is_some());
    drop(probe);
    let intra = job.levels.iter().any(|l| l.1);
    let knobs = if intra {
        space::knobs(|k| state.value(k), single_copy)
    } else {
        Vec::new()
    };
    // The plan of work, in candidate x size units, and the time each may take.
    let count = |from: usize, to: usize| sizes.iter().filter(|&&s| s >= from && s <= to).count();
    let mut units: usize = knobs
        .iter()
        .map(|k| k.values.len() * count(k.from, k.to) * ops.len())
        .sum();
    for &op in &ops {
        let per_level = match op {
            Op::Allreduce | Op::Allgather => space::algorithms(op, 2, "rb").len(),
            _ => job
                .levels
                .iter()
                .map(|l| space::algorithms(op, l.2, "flat").len())
                .sum(),
        };
        units += per_level * sizes.len() + 2 * sizes.len();
        if job.pipelined {
            units += space::chunks("").len() * count(space::CHUNK_FROM, usize::MAX);
        }
    }
    run.units = units;
    // Warm-up rounds, barriers and opening contexts take their share too.
    run.slice = 0.7 * run.budget / units.max(1) as f64;
    run.say(&format!(
        "{} ranks, levels {}, {} sizes from {} to {}, {} measurements in {} s",
        job.size,
        job.level_names(),
        sizes.len(),
        format_bytes(sizes[0] as u64),
        format_bytes(*sizes.last().expect("not empty") as u64),
        units,
        args.budget
    ));
    for knob in &knobs {
        tune_knob(&mut run, &mut state, knob, &ops, &sizes)?;
    }
    for &op in &ops {
        if matches!(op, Op::Allreduce | Op::Allgather) {
            tune_algorithm(&mut run, &mut state, op, None, &sizes)?;
        } else {
            for &level in &job.levels {
                tune_algorithm(&mut run, &mut state, op, Some(level), &sizes)?;
            }
        }
        if job.pipelined {
            tune_chunk(&mut run, &mut state, op, &sizes)?;
        }
    }
    // Both settings, side by side, at every size: the table the file keeps. A size where
    // the tuned settings are slower than those tuning started from by more than the
    // margin is timed twice more (a loss is the median of the three). A loss undoes the
    // tuned queue settings first (each was judged on the sizes it touches most, and
    // reaches the others too), then, where a loss remains, the tuned rules of its op, so
    // the file is never worse than where tuning started (within the runs' noise).
    let start = State::new(&job.base, job.size as usize, job.nodes);
    let mut table = side_by_side(&mut run, &start, &state, &ops, &sizes)?;
    if table.iter().any(|r| r.4) && !state.values.is_empty() {
        run.say(&format!(
            "slower than the start at {}: the tuned queue settings are undone",
            losses(&table)
        ));
        state.values.clear();
        table = side_by_side(&mut run, &start, &state, &ops, &sizes)?;
    }
    if table.iter().any(|r| r.4) {
        run.say(&format!(
            "slower than the start at {}: the tuned rules of those collectives are undone",
            losses(&table)
        ));
        for &op in &ops {
            if table.iter().any(|r| r.0 == op && r.4) {
                state.revert_rules(op);
            }
        }
        table = side_by_side(&mut run, &start, &state, &ops, &sizes)?;
    }
    let file = state.file()?;
    if rank0 {
        let mut text = format!(
            "# Written by topo-run tune: {} ranks, levels {}, rank 0 on {}, in {:.0} s.\n\
             # Time per call (us; the slowest rank's median, the mean over two buffer offsets\n\
             # in the page): the settings tuning started from, these, and their ratio.\n",
            job.size,
            job.level_names(),
            job.node,
            run.start.elapsed().as_secs_f64()
        );
        println!(
            "{:<10} {:>8} {:>12} {:>12} {:>7}",
            "op", "bytes", "start_us", "tuned_us", "ratio"
        );
        for (op, b, t0, t1, _) in &table {
            let line = format!(
                "{:<10} {:>8} {:>12.2} {:>12.2} {:>7.2}",
                op.key(),
                format_bytes(*b as u64),
                t0,
                t1,
                t1 / t0
            );
            println!("{line}");
            text.push_str(&format!("# {line}\n"));
        }
        text.push_str(&file.to_text());
        let tmp = args.output.with_extension("tmp");
        std::fs::write(&tmp, &text)
            .and_then(|()| std::fs::rename(&tmp, &args.output))
            .with_context(|| format!("writing {}", args.output.display()))?;
        eprintln!(
            "topo-run tune: wrote {} (use it with topo-run --rules {})",
            args.output.display(),
            args.output.display()
        );
    }
    Ok(())
}

/// One row of the final table: op, bytes, the start's time, the tuned time (us), and
/// whether the tuned settings lost there (the times are then those of the median ratio).
type Row = (Op, usize, f64, f64, bool);

/// Times the settings tuning started from and the tuned ones side by side at every size;
/// a size where the tuned ones lose by more than [`space::MARGIN`] three times over is
/// timed twice more, and counts as lost if the median of the three ratios loses.
fn side_by_side(
    run: &mut Run,
    start: &State,
    state: &State,
    ops: &[Op],
    sizes: &[usize],
) -> anyhow::Result<Vec<Row>> {
    let mut both = run.open(&[start.pairs(None, None, None), state.pairs(None, None, None)])?;
    let slice = run.slice.max(0.01);
    let mut table = Vec::new();
    for &op in ops {
        for &b in sizes {
            // The comparison always runs: a file without it would say nothing.
            let mut t = compare(run.world, &mut both, op, b, slice);
            run.done += 2;
            let mut lost = false;
            if space::loses(t[0], t[1]) {
                let mut runs = vec![t];
                for _ in 0..2 {
                    runs.push(compare(run.world, &mut both, op, b, slice));
                    run.done += 2;
                }
                runs.sort_by(|x, y| (x[1] / x[0]).total_cmp(&(y[1] / y[0])));
                t = runs.swap_remove(1);
                lost = space::loses(t[0], t[1]);
            }
            table.push((op, b, t[0], t[1], lost));
        }
    }
    Ok(table)
}

/// Where the tuned settings lost in `table`, for a progress line.
fn losses(table: &[Row]) -> String {
    table
        .iter()
        .filter(|r| r.4)
        .map(|r| {
            format!(
                "{} {} ({:.2})",
                r.0.key(),
                format_bytes(r.1 as u64),
                r.3 / r.2
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("topo-run-tune: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Vec<(String, String)> {
        vec![
            ("bcast".into(), "node<1K=binomial,node=flat".into()),
            ("reduce".into(), "node=flat".into()),
        ]
    }

    #[test]
    fn a_tuned_level_replaces_the_base_rules_of_its_own_op_only() {
        let mut s = State::new(&base(), 4, 1);
        s.tuned
            .insert("bcast", vec![("node".into(), "knomial:4".into())]);
        s.tuned_levels.push(("bcast", "node".into()));
        let pairs = s.pairs(None, None, None);
        let get = |k: &str| {
            pairs
                .iter()
                .find(|(key, _)| key == k)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(get("bcast").as_deref(), Some("node=knomial:4"));
        // Reduce was not tuned at the node level: its base rule stays.
        assert_eq!(get("reduce").as_deref(), Some("node=flat"));
    }

    #[test]
    fn undoing_an_ops_rules_gives_back_where_tuning_started() {
        let start = State::new(&base(), 4, 1);
        let mut s = start.clone();
        s.tuned
            .insert("bcast", vec![("node".into(), "knomial:4".into())]);
        s.tuned_levels.push(("bcast", "node".into()));
        s.tuned
            .insert("allreduce", vec![("*".into(), "rab:ring".into())]);
        s.values.insert("fragment", "32K".into());
        s.revert_rules(Op::Bcast);
        let (p, q) = (s.pairs(None, None, None), start.pairs(None, None, None));
        let get = |v: &[(String, String)], k: &str| {
            v.iter().find(|(key, _)| key == k).map(|(_, x)| x.clone())
        };
        assert_eq!(get(&p, "bcast"), get(&q, "bcast"));
        // The other op's rules and the queue settings are left as tuned.
        assert_eq!(get(&p, "allreduce").as_deref(), Some("*=rab:ring"));
        assert_eq!(get(&p, "fragment").as_deref(), Some("32K"));
        s.revert_rules(Op::Allreduce);
        s.values.clear();
        assert_eq!(s.pairs(None, None, None), start.pairs(None, None, None));
    }

    #[test]
    fn chunk_rules_come_before_the_base_ones_and_undo_per_op() {
        let mut base = base();
        base.push(("chunk".into(), "512K".into()));
        let mut s = State::new(&base, 4, 1);
        assert_eq!(s.current_chunk(Op::Allreduce, 1 << 20), "512K");
        s.chunks.push(("allreduce<2M".into(), "1M".into()));
        s.chunks.push(("bcast".into(), "64K".into()));
        assert_eq!(s.current_chunk(Op::Allreduce, 1 << 20), "1M");
        assert_eq!(s.current_chunk(Op::Allreduce, 2 << 20), "512K");
        assert_eq!(s.current_chunk(Op::Bcast, 2 << 20), "64K");
        // A candidate goes first.
        let p = s.pairs(None, None, Some(("allreduce".into(), "16K".into())));
        let t = Settings::from_pairs(&p).unwrap();
        assert_eq!(t.chunk_for(Op::Allreduce, 1 << 20), 16 << 10);
        // The file holds every chunk rule, in order, and loads back to the same choices.
        let f = s.file().unwrap();
        let back = Settings::from_pairs(&f.pairs()).unwrap();
        let now = Settings::from_pairs(&s.pairs(None, None, None)).unwrap();
        assert_eq!(back.chunk, now.chunk);
        assert!(
            f.to_text().contains("chunk        allreduce<2M 1M"),
            "{}",
            f.to_text()
        );
        s.revert_rules(Op::Allreduce);
        assert_eq!(s.current_chunk(Op::Allreduce, 1 << 20), "512K");
        assert_eq!(s.current_chunk(Op::Bcast, 2 << 20), "64K");
    }

    #[test]
    fn a_loss_is_more_than_three_margins() {
        assert!(!space::loses(10.0, 10.9));
        assert!(space::loses(10.0, 10.95));
        assert!(!space::loses(10.0, 9.0));
    }
}
