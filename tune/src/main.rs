//! `topo-run-tune`: finds good runtime settings for the machine it runs on and writes them
//! as a rules file (`topo-run-rules 1`, docs/runtime.md "Tuning"). Started by
//! `srun --mpi=pmix topo-run tune`, which runs it on every rank with a plan.
//!
//! It starts from the settings of its plan (the defaults, or what the command line and
//! `--rules` gave) and improves them one part at a time, each measured against the current
//! choice in the same job, interleaved:
//! 1. the queue geometry and thresholds (`single-copy`, `fragment`, `slots`), and on several
//!    nodes Gatherv's and Scatterv's form (`rooted-v`, measured on those two), one value
//!    for all sizes each, kept only if it pays overall and hurts nowhere;
//! 2. per level, bottom-up, the broadcast and reduce algorithm for each message size;
//! 3. the allreduce variant, the allgather algorithm, the alltoall form (spread, aggregated
//!    or pairwise) and the Reduce_scatter_block form (root, leaders, allreduce or halving,
//!    and ring on several nodes) for each message size;
//! 4. where some rank has two or more levels, each collective's pipeline chunk for each
//!    message size (after its algorithms, which the chunk serves).
//!
//! Then it measures the settings it started from against the tuned ones at every size and
//! writes both columns into the file's comments. The whole run keeps to `--budget`.
#![forbid(unsafe_code)]

mod job;
mod measure;
mod report;
mod search;
mod space;
mod state;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, bail};
use clap::Parser;
use mpi::topology::Communicator;
use topo_hierarchy::PLAN_ENV;
use topo_hierarchy::settings::format_bytes;

use crate::job::job;
use crate::measure::Contexts;
use crate::report::{losses, side_by_side};
use crate::search::{Run, tune_algorithm, tune_chunk, tune_knob};
use crate::space::Op;
use crate::state::State;

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
    /// are the whole gathered result), alltoall and reduce-scatter (Reduce_scatter_block;
    /// their sizes are the whole of one rank's blocks).
    #[arg(
        long,
        default_value = "bcast,reduce,allreduce,allgather,alltoall,reduce-scatter",
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
fn run(args: &Args) -> anyhow::Result<()> {
    let ops: Vec<Op> = args
        .ops
        .iter()
        .map(|s| s.parse::<Op>().map_err(|e| anyhow::anyhow!("--ops: {e}")))
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
    let mut knobs = if intra {
        space::knobs(|k| state.value(k), single_copy)
    } else {
        Vec::new()
    };
    if job.nodes > 1 {
        knobs.push(space::rooted_v_knob(state.value("rooted-v")));
    }
    // The plan of work, in candidate x size units, and the time each may take.
    let count = |from: usize, to: usize| sizes.iter().filter(|&&s| s >= from && s <= to).count();
    let mut units: usize = knobs
        .iter()
        .map(|k| k.values.len() * count(k.from, k.to) * k.ops(&ops).len())
        .sum();
    for &op in &ops {
        let per_level = match op {
            _ if op.job_wide() => space::algorithms(op, 2, job.nodes, "rb").len(),
            _ => job
                .levels
                .iter()
                .map(|l| space::algorithms(op, l.2, job.nodes, "flat").len())
                .sum(),
        };
        units += per_level * sizes.len() + 2 * sizes.len();
        if job.pipelined && op.chunked().is_some() {
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
        if op.job_wide() {
            tune_algorithm(&mut run, &mut state, op, None, &sizes)?;
        } else {
            for &level in &job.levels {
                tune_algorithm(&mut run, &mut state, op, Some(level), &sizes)?;
            }
        }
        if job.pipelined && op.chunked().is_some() {
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
