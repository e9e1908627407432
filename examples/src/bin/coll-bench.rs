//! OSU-style benchmark: our collectives and MPI's own, in the same job, interleaved,
//! after a warm-up. For each message size it reports the median over iterations of the
//! slowest rank's time, for both, and their ratio; and a memcpy of the same size as the
//! physical limit of one copy.
//!
//! ```text
//! srun --mpi=pmix -n 4 topo-run -- coll-bench --csv --svg bench.svg
//! ```

use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
use mpi::topology::{Communicator, SimpleCommunicator};
use plotters::prelude::*;
use topo_runtime::Topo;

#[derive(Parser, Debug)]
#[command(about = "Compare topo-run's collectives with MPI's own, per message size")]
struct Args {
    /// Collectives to measure, comma-separated: bcast, reduce, allreduce.
    #[arg(long, default_value = "bcast,reduce,allreduce", value_delimiter = ',')]
    ops: Vec<String>,
    /// Smallest message in bytes (a power of two; at least 4).
    #[arg(long, default_value_t = 4)]
    min: usize,
    /// Largest message in bytes (a power of two).
    #[arg(long, default_value_t = 16 << 20)]
    max: usize,
    /// Timed iterations per size and side (fewer for large messages).
    #[arg(long, default_value_t = 200)]
    iters: usize,
    /// Untimed warm-up iterations per size and side.
    #[arg(long, default_value_t = 20)]
    warmup: usize,
    /// Root of bcast and reduce.
    #[arg(long, default_value_t = 0)]
    root: i32,
    /// Change the data before every iteration, so caches do not flatter anyone.
    #[arg(long)]
    vary: bool,
    /// How ranks line up before every timed call: `mpi` (MPI_Barrier) or `topo`
    /// (topo-run's barrier, which leaves less skew between ranks). Both columns use it.
    #[arg(long, default_value = "mpi", value_parser = ["mpi", "topo"])]
    sync: String,
    /// Print CSV lines `op,bytes,ranks,topo_us,native_us,ratio` instead of a table.
    #[arg(long)]
    csv: bool,
    /// Write an SVG plot of topo-run's time normalised to MPI's against message size.
    #[arg(long, value_name = "FILE")]
    svg: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone)]
struct Row {
    op: String,
    bytes: usize,
    topo_us: f64,
    native_us: f64,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        0.0
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// Per-iteration maximum over ranks, then the median.
fn slowest_median(world: &SimpleCommunicator, mine: &[f64]) -> f64 {
    let mut max = vec![0.0; mine.len()];
    world.all_reduce_into(mine, &mut max[..], SystemOperation::max());
    median(&mut max)
}

fn iterations(args: &Args, bytes: usize) -> usize {
    // Keep every size to a similar amount of data moved.
    (args.iters * (64 << 10) / bytes.max(64 << 10)).clamp(10, args.iters)
}

fn measure(
    args: &Args,
    topo: &mut Topo,
    world: &SimpleCommunicator,
    op: &str,
    bytes: usize,
) -> Row {
    let n = (bytes / 4).max(1);
    let rank = world.rank();
    let mut send = vec![rank as f32; n];
    let mut recv = vec![0f32; n];
    let iters = iterations(args, bytes);
    let (mut t_topo, mut t_native) = (Vec::with_capacity(iters), Vec::with_capacity(iters));
    let sum = SystemOperation::sum();
    for it in 0..args.warmup + iters {
        for side in [0, 1] {
            if args.vary {
                let v = (it * 2 + side + rank as usize) as f32;
                send.iter_mut().for_each(|x| *x = v);
            }
            if args.sync == "topo" {
                topo.barrier();
            } else {
                world.barrier();
            }
            let t0 = Instant::now();
            match (op, side) {
                ("bcast", 0) => topo.broadcast_into(args.root, &mut send[..]),
                ("bcast", _) => world
                    .process_at_rank(args.root)
                    .broadcast_into(&mut send[..]),
                ("reduce", 0) if rank == args.root => {
                    topo.reduce_into_root(&send[..], &mut recv[..], sum)
                }
                ("reduce", 0) => topo.reduce_into(args.root, &send[..], sum),
                ("reduce", _) if rank == args.root => world
                    .process_at_rank(args.root)
                    .reduce_into_root(&send[..], &mut recv[..], sum),
                ("reduce", _) => world.process_at_rank(args.root).reduce_into(&send[..], sum),
                (_, 0) => topo.all_reduce_into(&send[..], &mut recv[..], sum),
                (_, _) => world.all_reduce_into(&send[..], &mut recv[..], sum),
            }
            let dt = t0.elapsed().as_secs_f64() * 1e6;
            if it >= args.warmup {
                if side == 0 {
                    t_topo.push(dt)
                } else {
                    t_native.push(dt)
                }
            }
        }
    }
    Row {
        op: op.to_string(),
        bytes: n * 4,
        topo_us: slowest_median(world, &t_topo),
        native_us: slowest_median(world, &t_native),
    }
}

fn memcpy_us(bytes: usize) -> f64 {
    let src = vec![1u8; bytes];
    let mut dst = vec![0u8; bytes];
    let iters = ((256 << 20) / bytes.max(1)).clamp(5, 2000);
    let mut t = Vec::with_capacity(iters);
    for i in 0..iters {
        let t0 = Instant::now();
        dst.copy_from_slice(&src);
        t.push(t0.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(&mut dst[i % bytes.max(1)..]);
    }
    median(&mut t)
}

fn plot(
    path: &std::path::Path,
    rows: &[Row],
    memcpy: &[(usize, f64)],
    ranks: i32,
) -> anyhow::Result<()> {
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let max_ratio = rows
        .iter()
        .map(|r| r.topo_us / r.native_us)
        .fold(1.2f64, f64::max)
        .min(4.0);
    let (lo, hi) = (
        rows.iter().map(|r| r.bytes).min().unwrap_or(4) as f64,
        rows.iter().map(|r| r.bytes).max().unwrap_or(4) as f64,
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("topo-run / MPI time, {ranks} ranks (below 1 = topo-run faster)"),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d((lo..hi * 1.01).log_scale(), 0.0..max_ratio)?;
    chart
        .configure_mesh()
        .x_desc("message size, bytes")
        .y_desc("normalised time")
        .draw()?;
    let colours = [RED, BLUE, GREEN];
    let mut ops: Vec<&str> = rows.iter().map(|r| r.op.as_str()).collect();
    ops.dedup();
    for (i, op) in ops.iter().enumerate() {
        let c = colours[i % colours.len()];
        let pts: Vec<(f64, f64)> = rows
            .iter()
            .filter(|r| r.op == *op)
            .map(|r| (r.bytes as f64, (r.topo_us / r.native_us).min(max_ratio)))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
            .label(op.to_string())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, c.filled())))?;
    }
    // One memcpy of the message, relative to MPI's bcast: the cost of a single copy.
    let bc: Vec<(f64, f64)> = rows
        .iter()
        .filter(|r| r.op == "bcast")
        .filter_map(|r| {
            memcpy
                .iter()
                .find(|m| m.0 == r.bytes)
                .map(|m| (r.bytes as f64, (m.1 / r.native_us).min(max_ratio)))
        })
        .collect();
    if !bc.is_empty() {
        chart
            .draw_series(LineSeries::new(bc, BLACK.stroke_width(1)))?
            .label("memcpy / MPI bcast")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
    }
    chart.draw_series(LineSeries::new(vec![(lo, 1.0), (hi, 1.0)], BLACK.mix(0.3)))?;
    chart
        .configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE.mix(0.9))
        .draw()?;
    root.present()?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.min >= 4 && args.min <= args.max,
        "--min must be at least 4 and at most --max"
    );
    let universe = mpi::initialize().context("MPI_Init failed")?;
    let world = universe.world();
    let mut topo = Topo::from_env(&world).context("topo-run could not set up its collectives")?;
    let rank = world.rank();
    let size = world.size();
    if rank == 0 && !topo.is_hierarchical() {
        eprintln!(
            "coll-bench: warning: topo-run is not active ({:?}); both columns are MPI",
            topo.fallback()
        );
    }
    let mut sizes = vec![];
    let mut b = args.min.next_power_of_two();
    while b <= args.max {
        sizes.push(b);
        b *= 2;
    }
    let mut rows = Vec::new();
    let mut copies = Vec::new();
    if rank == 0 {
        if args.csv {
            println!("op,bytes,ranks,topo_us,native_us,ratio");
        } else {
            println!(
                "{:<10} {:>10} {:>6} {:>12} {:>12} {:>7} {:>11}",
                "op", "bytes", "ranks", "topo_us", "native_us", "ratio", "memcpy_us"
            );
        }
    }
    for op in &args.ops {
        anyhow::ensure!(
            ["bcast", "reduce", "allreduce"].contains(&op.as_str()),
            "unknown collective {op:?}; use bcast, reduce or allreduce"
        );
        for &bytes in &sizes {
            let row = measure(&args, &mut topo, &world, op, bytes);
            let copy = memcpy_us(row.bytes);
            if rank == 0 {
                let ratio = row.topo_us / row.native_us;
                if args.csv {
                    println!(
                        "{},{},{},{:.3},{:.3},{:.3}",
                        row.op, row.bytes, size, row.topo_us, row.native_us, ratio
                    );
                } else {
                    println!(
                        "{:<10} {:>10} {:>6} {:>12.2} {:>12.2} {:>7.3} {:>11.2}",
                        row.op, row.bytes, size, row.topo_us, row.native_us, ratio, copy
                    );
                }
            }
            copies.push((row.bytes, copy));
            rows.push(row);
        }
    }
    if rank == 0
        && let Some(path) = &args.svg
    {
        plot(path, &rows, &copies, size)?;
        eprintln!("coll-bench: plot written to {}", path.display());
    }
    drop(topo);
    Ok(())
}
