//! `topo-run-simulate`: predicts topo-run's collective times and those of the flat
//! algorithms MPI libraries use, for a job and network map one may not have, over a cost
//! model per link class. Started by `topo-run simulate` (see `topo-run simulate --help`);
//! it needs no allocation and no MPI.
#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use mpi::topology::Communicator;
use topo_hierarchy::settings::{format_bytes, parse_bytes};
use topo_hierarchy::{ErrorKind, NetworkMap, RulesFile, Settings};
use topo_simulate::model::{CostModel, LinkClass};
use topo_simulate::{Cluster, Op, Predicted, Prediction, TOPO_RUN, is_topo_run, predict};

/// Exit codes, as topo-run's (docs/exit-codes.md).
mod code {
    pub const INTERNAL: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const INPUT_UNREADABLE: u8 = 3;
    pub const BAD_JOB: u8 = 4;
    pub const BAD_NETWORK_MAP: u8 = 5;
    pub const NODE_NOT_IN_MAP: u8 = 6;
    pub const BAD_SETTINGS: u8 = 13;
    pub const BAD_MODEL: u8 = 17;
}

#[derive(Parser, Debug)]
#[command(
    name = "topo-run simulate",
    about = "Predict topo-run's collective times and those of flat MPI algorithms on a cluster \
             described by a job and a network map, over a cost model per link class",
    after_help = "Examples:\n  \
        topo-run simulate --job job.yaml --network-map topology.conf\n  \
        topo-run simulate --job job.yaml --model site.model --ops allreduce --sizes 8,1M\n  \
        topo-run simulate --job job.yaml --ops all --sizes 8,64K   # every collective\n  \
        topo-run simulate --job big.yaml --network-map topology.conf --profile app.json\n  \
        topo-run simulate --print-model > site.model   # the defaults, to edit\n\n\
        Exit codes: 0 success, 1 internal failure, 2 bad command line, 3 an input file \
        cannot be read, 4 invalid job, 5 invalid network map, 6 a node missing from the map, \
        13 invalid --rules file, 17 invalid cost model."
)]
struct Args {
    /// The job: a job file as `topo-run plan` reads (layouts included).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present_any = ["print_model", "calibrate"]
    )]
    job: Option<PathBuf>,
    /// The network map: topo-run's YAML or Slurm's topology.conf. Without one, all nodes
    /// share one network level (`world`).
    #[arg(long, value_name = "FILE")]
    network_map: Option<PathBuf>,
    /// The cost model (docs/simulate.md); default: a typical cluster (`--print-model`).
    #[arg(long, value_name = "FILE")]
    model: Option<PathBuf>,
    /// topo-run's settings, as a rules file (`topo-run tune` writes one); default: the
    /// built-in defaults.
    #[arg(long, value_name = "FILE")]
    rules: Option<PathBuf>,
    /// Collectives, comma-separated: bcast, reduce, allreduce, barrier, allgather, gather,
    /// scatter, alltoall, reduce_scatter (Reduce_scatter_block), scan, gatherv, scatterv,
    /// allgatherv, alltoallv, reduce_scatter_v (Reduce_scatter), exscan; or `all`. The
    /// v-forms run with every block of the size given.
    #[arg(
        long,
        default_value = "bcast,reduce,allreduce,barrier,allgather",
        value_delimiter = ','
    )]
    ops: Vec<String>,
    /// Message sizes, comma-separated (suffixes K, M, G); for the Allgather, each rank's
    /// block.
    #[arg(long, default_value = "8,4K,64K,1M", value_delimiter = ',')]
    sizes: Vec<String>,
    /// Replay an application's collectives from a profile (`topo-run --profile FILE`)
    /// instead of --ops and --sizes: its predicted collective time with topo-run and with
    /// the flat algorithms, per collective and in total.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["ops", "sizes", "svg"])]
    profile: Option<PathBuf>,
    /// Output: `text` (tables) or `json`.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    format: String,
    /// Also write an SVG plot of topo-run's predicted time normalised to the fastest flat
    /// algorithm's, per collective, against message size.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Print the default cost model as a file to edit, and exit.
    #[arg(long)]
    print_model: bool,
    /// Measure the model's parameters on this machine and write them to FILE: run it as a
    /// job step over the nodes to measure, e.g. `srun -N2 --ntasks-per-node=2 --mpi=pmix
    /// topo-run simulate --calibrate site.model [--network-map FILE]` (the classes inside
    /// a node through topo-run's own shared memory; on 1 node x 2 also the call overhead).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["job", "print_model"])]
    calibrate: Option<PathBuf>,
}

/// A failure with its exit code.
struct Fail(u8, String);

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Fail(code, message)) => {
            eprintln!("topo-run simulate: error: {message}");
            ExitCode::from(code)
        }
    }
}

fn read(path: &Path, what: &str) -> Result<File, Fail> {
    File::open(path).map_err(|e| {
        Fail(
            code::INPUT_UNREADABLE,
            format!("cannot read the {what} {}: {e}", path.display()),
        )
    })
}

/// The whole text of the `what` at `path`.
fn read_text(path: &Path, what: &str) -> Result<String, Fail> {
    std::io::read_to_string(read(path, what)?).map_err(|e| {
        Fail(
            code::INPUT_UNREADABLE,
            format!("cannot read the {what} {}: {e}", path.display()),
        )
    })
}

fn hierarchy_error(e: topo_hierarchy::Error, what: &str, path: &Path) -> Fail {
    let code = match e.kind() {
        ErrorKind::NetworkMap => code::BAD_NETWORK_MAP,
        ErrorKind::NodeNotInMap => code::NODE_NOT_IN_MAP,
        ErrorKind::Settings => code::BAD_SETTINGS,
        _ => code::BAD_JOB,
    };
    Fail(code, format!("{what} {}: {e}", path.display()))
}

fn run(args: &Args) -> Result<(), Fail> {
    if args.print_model {
        print!("{}", CostModel::default().to_text());
        return Ok(());
    }
    if let Some(out) = &args.calibrate {
        return calibrate(out, args.network_map.as_deref());
    }
    let ops = if args.ops.iter().any(|o| o == "all") {
        Op::ALL.to_vec()
    } else {
        args.ops
            .iter()
            .map(|o| o.parse::<Op>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| Fail(code::USAGE, format!("--ops: {e}")))?
    };
    let sizes = args
        .sizes
        .iter()
        .map(|s| parse_bytes(s))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Fail(code::USAGE, format!("--sizes: {e}")))?;
    let model = match &args.model {
        None => CostModel::default(),
        Some(path) => {
            let text = read_text(path, "cost model")?;
            CostModel::parse(&text).map_err(|e| {
                Fail(
                    code::BAD_MODEL,
                    format!(
                        "cost model {}: {e} (see docs/simulate.md; `topo-run simulate \
                         --print-model` writes a valid one)",
                        path.display()
                    ),
                )
            })?
        }
    };
    let settings = match &args.rules {
        None => Settings::default(),
        Some(path) => {
            let text = read_text(path, "rules file")?;
            let file =
                RulesFile::parse(&text).map_err(|e| hierarchy_error(e, "rules file", path))?;
            Settings::from_pairs(&file.pairs())
                .map_err(|e| hierarchy_error(e, "rules file", path))?
        }
    };
    let job_path = args.job.as_deref().expect("clap requires --job");
    let job = topo_hierarchy::job_from_reader(read(job_path, "job description")?)
        .map_err(|e| hierarchy_error(e, "job", job_path))?;
    let map = match &args.network_map {
        None => None,
        Some(path) => Some(
            NetworkMap::from_reader(read(path, "network map")?)
                .map_err(|e| hierarchy_error(e, "network map", path))?,
        ),
    };
    let nodes = job.node_count();
    let cluster = Cluster::new(job, map.as_ref(), settings).map_err(|e| {
        let path = args.network_map.as_deref().unwrap_or(job_path);
        hierarchy_error(e, "job and map", path)
    })?;
    if let Some(path) = &args.profile {
        return replay(args, path, &cluster, nodes, &model);
    }
    let mut all = Vec::new();
    for &op in &ops {
        let op_sizes: &[u64] = if op == Op::Barrier { &[0] } else { &sizes };
        for &bytes in op_sizes {
            let preds = predict(&cluster, &model, op, bytes)
                .map_err(|e| Fail(code::INTERNAL, format!("{op} of {bytes} bytes: {e}")))?;
            all.extend(preds);
        }
    }
    if let Some(path) = &args.svg {
        plot(path, cluster.size(), &all).map_err(|e| {
            Fail(
                code::INPUT_UNREADABLE,
                format!("cannot write {}: {e}", path.display()),
            )
        })?;
    }
    if args.format == "json" {
        let doc = serde_json::json!({
            "ranks": cluster.size(),
            "nodes": nodes,
            "model": model,
            "predictions": all,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("serialisable")
        );
    } else {
        print!(
            "{}",
            render(cluster.size(), nodes, args.model.as_deref(), &all)
        );
    }
    Ok(())
}

/// What the model is, and how far it was checked against measurements.
fn model_words(model: Option<&Path>) -> String {
    format!(
        "model: {}; checked against measurements on 1 node x 2 and 2 emulated nodes x 1 \
         only (docs/simulate.md, \"Validation on the dev cluster\"): predictions at scale are \
         the model's, not measured",
        model.map_or(
            "the defaults (a typical cluster; --print-model)".into(),
            |p| p.display().to_string()
        )
    )
}

/// `--profile FILE`: the profile's collectives replayed on the cluster.
fn replay(
    args: &Args,
    path: &Path,
    cluster: &Cluster,
    nodes: usize,
    model: &CostModel,
) -> Result<(), Fail> {
    let profile =
        topo_profile::read(path).map_err(|e| Fail(code::INPUT_UNREADABLE, e.to_string()))?;
    let r = topo_simulate::replay::replay(cluster, model, &profile)
        .map_err(|e| Fail(code::INTERNAL, format!("replaying {}: {e}", path.display())))?;
    let recorded = format!(
        "{} ranks on {} nodes, {}, {}",
        profile.ranks,
        profile.nodes,
        if profile.native {
            "MPI's own collectives (--native)"
        } else {
            "topo-run's collectives"
        },
        profile.mpi_name()
    );
    if args.format == "json" {
        let doc = serde_json::json!({
            "profile": path.display().to_string(),
            "recorded": recorded,
            "ranks": cluster.size(),
            "nodes": nodes,
            "model": model,
            "replay": r,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("serialisable")
        );
        return Ok(());
    }
    let mut out = format!(
        "topo-run simulate: the collectives of {} (recorded on {recorded}) replayed on {} \
         ranks on {nodes} nodes\n{}\n",
        path.display(),
        cluster.size(),
        model_words(args.model.as_deref())
    );
    for c in &r.caveats {
        out.push_str(&format!("  {c}\n"));
    }
    out.push_str(&format!(
        "\n{:<26} {:<9} {:>8}  {:>14} {:>14}  {:<20} {:>7}  {:>14}\n",
        "call",
        "comm",
        "calls",
        "topo-run (us)",
        "flat (us)",
        "flat algorithm",
        "ratio",
        "recorded (us)"
    ));
    // One row: `mark` before topo-run's time flags calls predicted with its schedule.
    let line = |call: &str,
                comm: &str,
                calls: u64,
                mark: &str,
                topo: f64,
                flat: f64,
                alg: &str,
                recorded: f64| {
        let ratio = if flat > 0.0 {
            format!("{:.2}", topo / flat)
        } else {
            "-".into()
        };
        format!(
            "{call:<26} {comm:<9} {calls:>8}  {:>14} {flat:>14.1}  {alg:<20} {ratio:>7}  {recorded:>14.1}\n",
            format!("{mark}{topo:.1}")
        )
    };
    for row in &r.rows {
        let mark = if row.schedule_for_blocking > 0 {
            "*"
        } else {
            ""
        };
        out.push_str(&line(
            &row.call,
            &row.comm,
            row.calls,
            mark,
            row.topo_run_us,
            row.flat_us,
            &row.flat_algorithm,
            row.measured_us,
        ));
    }
    let calls = r.rows.iter().map(|x| x.calls).sum();
    out.push_str(&line(
        "total",
        "",
        calls,
        "",
        r.topo_run_us,
        r.flat_us,
        "",
        r.measured_us,
    ));
    for s in &r.skipped {
        out.push_str(&format!("  not replayed: {s}\n"));
    }
    out.push_str(
        "\nratio: topo-run's predicted time over the flat algorithms' (below 1: topo-run \
         faster); recorded: the profile's own time (the slowest rank's), on the cluster it \
         ran on\n",
    );
    print!("{out}");
    Ok(())
}

/// `--calibrate OUT`: measures as an MPI job and writes the model (rank 0).
fn calibrate(out: &Path, map: Option<&Path>) -> Result<(), Fail> {
    let map = match map {
        None => None,
        Some(path) => Some(
            NetworkMap::from_reader(read(path, "network map")?)
                .map_err(|e| hierarchy_error(e, "network map", path))?,
        ),
    };
    let Some(universe) = mpi::initialize() else {
        return Err(Fail(code::INTERNAL, "MPI is initialised already".into()));
    };
    let world = universe.world();
    if world.size() < 2 {
        return Err(Fail(
            code::USAGE,
            "--calibrate needs at least 2 ranks: run it under srun (or mpirun) over the \
             nodes to measure, e.g. srun -N2 --ntasks-per-node=2 --mpi=pmix"
                .into(),
        ));
    }
    // Started by topo-run, the classes inside a node are measured through its own shared
    // memory; otherwise (no plan) the context hands everything to MPI and measures nothing.
    let mut topo = topo_runtime::Topo::from_env(&world)
        .map_err(|e| Fail(code::INTERNAL, format!("cannot set up topo-run: {e}")))?;
    let measured = topo_simulate::calibrate::measure(&world, map.as_ref(), Some(&mut topo))
        .map_err(|e| Fail(code::INTERNAL, format!("calibration failed: {e}")))?;
    if let Some(measured) = measured {
        let text = topo_simulate::calibrate::file_text(&measured);
        std::fs::write(out, &text).map_err(|e| {
            Fail(
                code::INPUT_UNREADABLE,
                format!("cannot write {}: {e}", out.display()),
            )
        })?;
        print!("{text}");
        eprintln!("topo-run simulate: wrote {}", out.display());
    }
    Ok(())
}

/// topo-run's predicted time over the fastest flat algorithm's, per op and size (ops with
/// a size only).
fn normalised(all: &[Prediction]) -> Vec<(Op, u64, f64)> {
    let time = |p: &Prediction| match &p.result {
        Predicted::Outcome(o) => Some(o.time_us),
        Predicted::Skipped(_) => None,
    };
    let mut out = Vec::new();
    for p in all
        .iter()
        .filter(|p| p.algorithm == TOPO_RUN && p.op != Op::Barrier)
    {
        let best = all
            .iter()
            .filter(|q| q.op == p.op && q.bytes == p.bytes && !is_topo_run(q.algorithm))
            .filter_map(time)
            .min_by(f64::total_cmp);
        if let (Some(t), Some(best)) = (time(p), best)
            && best > 0.0
        {
            out.push((p.op, p.bytes, t / best));
        }
    }
    out
}

/// The SVG plot of [`normalised`].
fn plot(path: &Path, ranks: u32, all: &[Prediction]) -> Result<(), Box<dyn std::error::Error>> {
    use plotters::prelude::*;
    let points = normalised(all);
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let top = points.iter().map(|p| p.2).fold(1.2f64, f64::max).min(4.0);
    let lo = points.iter().map(|p| p.1).min().unwrap_or(1).max(1) as f64;
    let hi = points.iter().map(|p| p.1).max().unwrap_or(2).max(2) as f64;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("predicted topo-run / fastest flat algorithm, {ranks} ranks (below 1 = topo-run faster)"),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d((lo..hi * 1.01).log_scale(), 0.0..top)?;
    chart
        .configure_mesh()
        .x_desc("message size, bytes")
        .y_desc("normalised time")
        .draw()?;
    let colours = [
        RED,
        BLUE,
        GREEN,
        MAGENTA,
        CYAN,
        BLACK,
        RGBColor(230, 140, 0),
        RGBColor(120, 60, 160),
        RGBColor(110, 110, 110),
    ];
    let with_sizes = Op::ALL.into_iter().filter(|&op| op != Op::Barrier);
    for (i, op) in with_sizes.enumerate() {
        let op = &op;
        let c = colours[i % colours.len()];
        let pts: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.0 == *op)
            .map(|p| (p.1.max(1) as f64, p.2.min(top)))
            .collect();
        if pts.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
            .label(op.to_string())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, c.filled())))?;
    }
    chart.draw_series(LineSeries::new(vec![(lo, 1.0), (hi, 1.0)], BLACK.mix(0.3)))?;
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// The two tables: times, then traffic per link class.
fn render(ranks: u32, nodes: usize, model: Option<&Path>, all: &[Prediction]) -> String {
    let mut out = format!(
        "topo-run simulate: {ranks} ranks on {nodes} nodes; {}\n\n",
        model_words(model)
    );
    out.push_str(&format!(
        "{:<14} {:>8}  {:<27} {:>12}  {:>12}\n",
        "op", "bytes", "algorithm", "time (us)", "/ topo-run"
    ));
    let time = |p: &Prediction| match &p.result {
        Predicted::Outcome(o) => Some(o.time_us),
        Predicted::Skipped(_) => None,
    };
    let mut topo = None;
    for p in all {
        if p.algorithm == TOPO_RUN {
            topo = time(p);
        }
        let (t, ratio) = match (time(p), topo) {
            (Some(t), Some(base)) if base > 0.0 => (format!("{t:.2}"), format!("{:.2}", t / base)),
            (Some(t), _) => (format!("{t:.2}"), "-".into()),
            (None, _) => ("-".into(), "-".into()),
        };
        out.push_str(&format!(
            "{:<14} {:>8}  {:<27} {:>12}  {:>12}\n",
            p.op.to_string(),
            format_bytes(p.bytes),
            p.algorithm,
            t,
            ratio
        ));
    }
    let skipped: Vec<String> = all
        .iter()
        .filter_map(|p| match &p.result {
            Predicted::Skipped(why) => Some(format!(
                "{} {} {}: {why}",
                p.op,
                format_bytes(p.bytes),
                p.algorithm
            )),
            Predicted::Outcome(_) => None,
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    for s in skipped {
        out.push_str(&format!("  not simulated: {s}\n"));
    }
    out.push_str(&format!(
        "\nTraffic per link class (messages / bytes):\n{:<14} {:>8}  {:<27} {}\n",
        "op", "bytes", "algorithm", "classes"
    ));
    for p in all {
        let Predicted::Outcome(o) = &p.result else {
            continue;
        };
        let classes: Vec<String> = LinkClass::ALL
            .iter()
            .filter_map(|c| {
                o.traffic
                    .get(c)
                    .map(|t| format!("{c} {} / {}", t.messages, t.bytes))
            })
            .collect();
        out.push_str(&format!(
            "{:<14} {:>8}  {:<27} {}\n",
            p.op.to_string(),
            format_bytes(p.bytes),
            p.algorithm,
            if classes.is_empty() {
                "none".into()
            } else {
                classes.join(", ")
            }
        ));
    }
    out
}
