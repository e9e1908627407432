//! OSU-style benchmark: our collectives and MPI's own, in the same job, interleaved,
//! after a warm-up. For each message size it reports the median over iterations of the
//! slowest rank's time, for both, and their ratio; and a memcpy of the same size as the
//! physical limit of one copy.
//!
//! With `--overlap` it measures the nonblocking collectives instead: how much of their
//! time hides behind computation, OSU style (test calls during the computation) and IMB
//! style (none).
//!
//! ```text
//! srun --mpi=pmix -n 4 topo-run -- coll-bench --csv --svg bench.svg
//! srun --mpi=pmix -n 4 topo-run -- coll-bench --overlap --max 1048576
//! ```

use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
use mpi::datatype::{Partition, PartitionMut};
use mpi::topology::{Communicator, SimpleCommunicator};
use plotters::prelude::*;
use topo_runtime::Topo;

#[derive(Parser, Debug)]
#[command(about = "Compare topo-run's collectives with MPI's own, per message size")]
struct Args {
    /// Initialise MPI with MPI_THREAD_MULTIPLE, so that topo-run's progress thread
    /// (`topo-run --progress-thread`) may also run the network steps.
    #[arg(long)]
    thread_multiple: bool,
    /// Collectives to measure, comma-separated: bcast, reduce, allreduce, allgather,
    /// allgatherv, gather, scatter, gatherv, scatterv, reduce_scatter_block, alltoall and alltoallv (their size
    /// is each rank's block, for an Alltoall the block it sends each rank; the v-forms with
    /// every count the same), scan,
    /// exscan, barrier (measured once, as 0 bytes).
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
    /// Place both buffers this many bytes past a page boundary (a multiple of 4 below
    /// 4096), to see whether alignment matters. glibc's `malloc` puts large blocks 16
    /// bytes past one. Default: where the allocator puts them.
    #[arg(long, value_name = "BYTES", value_parser = parse_offset)]
    offset: Option<usize>,
    /// In which order the (collective, size) cases run: `shuffle` (a random order, the
    /// same on every rank, so that no result depends on what ran before it) or `sweep`
    /// (each collective from the smallest size up). Rows are printed sorted either way.
    #[arg(long, default_value = "shuffle", value_parser = ["shuffle", "sweep"])]
    order: String,
    /// Seed of the shuffled order (default: from the clock; printed on stderr).
    #[arg(long)]
    seed: Option<u64>,
    /// Change the data before every iteration, so caches do not flatter anyone (with
    /// --chain: before every call, written outside the time of the calls, which is then
    /// the sum of the calls' own times).
    #[arg(long)]
    vary: bool,
    /// How ranks line up before every timed call: `mpi` (MPI_Barrier) or `topo`
    /// (topo-run's barrier, which leaves less skew between ranks) for both columns, or
    /// `own`: each side by its own barrier, as a program lines up with and without
    /// topo-run (whose library takes `MPI_Barrier` too).
    #[arg(long, default_value = "mpi", value_parser = ["mpi", "topo", "own"])]
    sync: String,
    /// Time the lining-up barrier with each call: the time of one iteration of a loop that
    /// calls a barrier and the collective (with `--sync own`, the whole of OSU's loop).
    /// Not with --chain or --overlap, which line nothing up before each call.
    #[arg(long, conflicts_with_all = ["chain", "overlap"])]
    with_sync: bool,
    /// Time calls chained back to back instead of lined up by a barrier each: the root of
    /// bcast and reduce moves to the next rank every call, so every call starts when the
    /// previous one's data has arrived, and a call's time is the collective's latency,
    /// both sides' software included (on 2 ranks: one tree edge, to set beside the
    /// cache-line time printed first). A sample is a chain of 20 calls, each side's in
    /// turn; --root does not apply.
    #[arg(long)]
    chain: bool,
    /// The communicator both sides run on: `world`; `dup` (a duplicate of world); `node`
    /// (each node's ranks, `MPI_Comm_split_type` SHARED); `parity` (the even and the odd
    /// ranks); `half` (the first and the second half); `reversed` (world in reversed
    /// order). topo-run's side is a context over it (`Topo::for_comm`), MPI's side its own
    /// collectives on it; where it splits world, every part runs at once and world rank 0
    /// prints its part's rows.
    #[arg(long, default_value = "world", value_parser = ["world", "dup", "node", "parity", "half", "reversed"], conflicts_with = "overlap")]
    comm: String,
    /// A control run: MPI's own collective (and barrier) in both columns, timed exactly as
    /// the two sides are, in the same order. Its ratios, which would all be 1 on a quiet
    /// machine, show how far the measurement itself leans and spreads per collective and
    /// size, to set beside topo-run's.
    #[arg(long, conflicts_with = "overlap")]
    control: bool,
    /// Run topo-run's column first in every iteration (chain with --chain). By default the
    /// two take turns going first, topo-run's in even iterations and MPI's in odd ones:
    /// a fixed order can favour one column by as much as 1.5 x where a collective's time
    /// depends on what ran just before it (Open MPI's han Gatherv against itself after a
    /// barrier, see --control).
    #[arg(long, conflicts_with = "overlap")]
    topo_first: bool,
    /// Print CSV lines `op,bytes,ranks,topo_us,native_us,ratio` instead of a table.
    #[arg(long)]
    csv: bool,
    /// Write an SVG plot of topo-run's time normalised to MPI's against message size.
    #[arg(long, value_name = "FILE")]
    svg: Option<std::path::PathBuf>,
    /// Measure the nonblocking collectives (ibcast, ireduce, iallreduce, ibarrier) and
    /// how much of their time hides behind computation, in two styles: `osu` (compute as
    /// long as the pure collective takes, calling test 10 times along the way) and `imb`
    /// (the same compute without any test call). Reports, per style, the time of
    /// start + compute + wait and the overlap percentage, ours against MPI's `MPI_I*`.
    #[arg(long)]
    overlap: bool,
    /// With --overlap: compute this many times as long as the slower side's pure
    /// collective (default 1, as OSU does). Longer computations give a progress thread
    /// that shares the core with the computation some scheduler slices to work in.
    #[arg(long, default_value_t = 1.0, value_name = "F")]
    compute_factor: f64,
    /// With --overlap: the computation sleeps instead of keeping the core busy, as a rank
    /// does while a GPU or the file system works for it. It leaves the core free, which
    /// shows what a progress thread does with a core of its own.
    #[arg(long)]
    compute_sleeps: bool,
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

const PAGE: usize = 4096;

/// `cases` in a random order drawn from `seed` (Fisher-Yates over splitmix64).
fn shuffle<T>(cases: &mut [T], mut seed: u64) {
    let mut next = || {
        seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    for i in (1..cases.len()).rev() {
        cases.swap(i, (next() % (i as u64 + 1)) as usize);
    }
}

fn parse_offset(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(o) if o < PAGE && o % 4 == 0 => Ok(o),
        _ => Err(format!("{s:?} is not a multiple of 4 below {PAGE}")),
    }
}

/// `n` elements starting `offset` bytes past a page boundary, inside `v` (which has room).
fn at_offset(v: &mut [f32], n: usize, offset: Option<usize>) -> &mut [f32] {
    let Some(offset) = offset else {
        return &mut v[..n];
    };
    let skip = ((PAGE + offset - v.as_ptr() as usize % PAGE) % PAGE) / 4;
    &mut v[skip..skip + n]
}

fn iterations(args: &Args, bytes: usize) -> usize {
    // Keep every size to a similar amount of data moved.
    (args.iters * (64 << 10) / bytes.max(64 << 10)).clamp(args.iters.min(10), args.iters)
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
    let room = if args.offset.is_some() { PAGE / 4 } else { 0 };
    let (mut send0, mut recv0) = (vec![rank as f32; n + room], vec![0f32; n + room]);
    let send = at_offset(&mut send0, n, args.offset);
    let recv = at_offset(&mut recv0, n, args.offset);
    // Allgather: each rank's block is `bytes`, the gathered result `size` blocks.
    let mut all = all_for(op, n, world.size() as usize);
    let iters = iterations(args, bytes);
    let (mut t_topo, mut t_native) = (Vec::with_capacity(iters), Vec::with_capacity(iters));
    for it in 0..args.warmup + iters {
        for side in sides(args, it) {
            if args.vary {
                let v = (it * 2 + side + rank as usize) as f32;
                send.iter_mut().for_each(|x| *x = v);
            }
            let t_sync = Instant::now();
            let who = if args.control { 1 } else { side };
            if args.sync == "topo" || (args.sync == "own" && who == 0) {
                topo.barrier();
            } else {
                world.barrier();
            }
            let t0 = if args.with_sync {
                t_sync
            } else {
                Instant::now()
            };
            call(topo, world, op, who, args.root, send, recv, &mut all);
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
        bytes: if op == "barrier" { 0 } else { n * 4 },
        topo_us: slowest_median(world, &t_topo),
        native_us: slowest_median(world, &t_native),
    }
}

/// The columns in the order iteration `it` runs them: topo-run's (0) first in even
/// iterations, MPI's (1) in odd ones, or topo-run's always (`--topo-first`).
fn sides(args: &Args, it: usize) -> [usize; 2] {
    if !args.topo_first && it % 2 == 1 {
        [1, 0]
    } else {
        [0, 1]
    }
}

/// The buffer of `size` blocks of `n` elements that `op` needs beside `send` and `recv`
/// (an Allgather's result, a Gather's at the root, ...); two of them, the send and the
/// receive side, for an Alltoall.
fn all_for(op: &str, n: usize, size: usize) -> Vec<f32> {
    match op {
        "allgather"
        | "allgatherv"
        | "gather"
        | "scatter"
        | "gatherv"
        | "scatterv"
        | "reduce_scatter_block" => {
            vec![0f32; n * size]
        }
        "alltoall" | "alltoallv" => vec![0f32; 2 * n * size],
        _ => Vec::new(),
    }
}

/// One call of `op` rooted at `root`: topo-run's (`side` 0) or MPI's own. A broadcast
/// goes from and into `send`.
#[allow(clippy::too_many_arguments)]
fn call(
    topo: &mut Topo,
    world: &SimpleCommunicator,
    op: &str,
    side: usize,
    root: i32,
    send: &mut [f32],
    recv: &mut [f32],
    all: &mut [f32],
) {
    let sum = SystemOperation::sum();
    let at = world.process_at_rank(root);
    let me = world.rank() == root;
    match (op, side) {
        ("bcast", 0) => topo.broadcast_into(root, send),
        ("bcast", _) => at.broadcast_into(send),
        ("reduce", 0) if me => topo.reduce_into_root(send, recv, sum),
        ("reduce", 0) => topo.reduce_into(root, send, sum),
        ("reduce", _) if me => at.reduce_into_root(send, recv, sum),
        ("reduce", _) => at.reduce_into(send, sum),
        ("allgather", 0) => topo.all_gather_into(send, all),
        ("allgather", _) => world.all_gather_into(send, all),
        ("gather", 0) if me => topo.gather_into_root(send, all),
        ("gather", 0) => topo.gather_into(root, send),
        ("gather", _) if me => at.gather_into_root(send, all),
        ("gather", _) => at.gather_into(send),
        ("scatter", 0) if me => topo.scatter_into_root(all, recv),
        ("scatter", 0) => topo.scatter_into(root, recv),
        ("scatter", _) if me => at.scatter_into_root(all, recv),
        ("scatter", _) => at.scatter_into(recv),
        ("reduce_scatter_block", 0) => topo.reduce_scatter_block_into(all, recv, sum),
        ("reduce_scatter_block", _) => world.reduce_scatter_block_into(all, recv, sum),
        ("alltoall", side) => {
            let (out, back) = all.split_at_mut(all.len() / 2);
            if side == 0 {
                topo.all_to_all_into(out, back)
            } else {
                world.all_to_all_into(&out[..], back)
            }
        }
        ("allgatherv", side) => {
            // Every rank's block of `send.len()`, one after another: the counts of an
            // Allgather, through the v-form.
            let size = world.size();
            let n = send.len() as i32;
            let counts = vec![n; size as usize];
            let displs: Vec<i32> = (0..size).map(|r| r * n).collect();
            if side == 0 {
                topo.all_gather_varcount_into(send, all, &counts, &displs)
            } else {
                let mut part = PartitionMut::new(all, &counts[..], &displs[..]);
                world.all_gather_varcount_into(&send[..], &mut part)
            }
        }
        ("gatherv" | "scatterv", side) => {
            // Every rank's block of `send.len()` (`recv.len()`), one after another: the
            // counts of a Gather (Scatter), through the v-form.
            let size = world.size();
            let n = send.len() as i32;
            let counts = vec![n; size as usize];
            let displs: Vec<i32> = (0..size).map(|r| r * n).collect();
            match (op, side, me) {
                ("gatherv", 0, true) => topo.gather_varcount_into_root(send, all, &counts, &displs),
                ("gatherv", 0, false) => topo.gather_varcount_into(root, send),
                ("gatherv", _, true) => {
                    let mut part = PartitionMut::new(all, &counts[..], &displs[..]);
                    at.gather_varcount_into_root(&send[..], &mut part)
                }
                ("gatherv", _, false) => at.gather_varcount_into(&send[..]),
                (_, 0, true) => topo.scatter_varcount_into_root(all, &counts, &displs, recv),
                (_, 0, false) => topo.scatter_varcount_into(root, recv),
                (_, _, true) => {
                    let part = Partition::new(&all[..], &counts[..], &displs[..]);
                    at.scatter_varcount_into_root(&part, recv)
                }
                (_, _, false) => at.scatter_varcount_into(recv),
            }
        }
        ("alltoallv", side) => {
            let size = world.size();
            let (out, back) = all.split_at_mut(all.len() / 2);
            let n = out.len() as i32 / size;
            let counts = vec![n; size as usize];
            let displs: Vec<i32> = (0..size).map(|r| r * n).collect();
            if side == 0 {
                topo.all_to_all_varcount_into(out, &counts, &displs, back, &counts, &displs)
            } else {
                let send = Partition::new(&out[..], &counts[..], &displs[..]);
                let mut recv = PartitionMut::new(back, &counts[..], &displs[..]);
                world.all_to_all_varcount_into(&send, &mut recv)
            }
        }
        ("scan", 0) => topo.scan_into(send, recv, sum),
        ("scan", _) => world.scan_into(send, recv, sum),
        ("exscan", 0) => topo.exclusive_scan_into(send, recv, sum),
        ("exscan", _) => world.exclusive_scan_into(send, recv, sum),
        ("barrier", 0) => topo.barrier(),
        ("barrier", _) => world.barrier(),
        (_, 0) => topo.all_reduce_into(send, recv, sum),
        (_, _) => world.all_reduce_into(send, recv, sum),
    }
}

/// Calls per sample with `--chain`.
const CHAIN: usize = 20;

/// `--chain`: [`CHAIN`] calls back to back per sample, topo-run's and MPI's in turn, the
/// root of bcast and reduce moving on every call; the per-call time of each sample.
fn measure_chain(
    args: &Args,
    topo: &mut Topo,
    world: &SimpleCommunicator,
    op: &str,
    bytes: usize,
) -> Row {
    let n = (bytes / 4).max(1);
    let (rank, size) = (world.rank(), world.size());
    let (mut send, mut recv) = (vec![rank as f32; n], vec![0f32; n]);
    let mut all = all_for(op, n, size as usize);
    let samples = iterations(args, bytes);
    let (mut t_topo, mut t_native) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
    for it in 0..args.warmup + samples {
        for side in sides(args, it) {
            world.barrier();
            let t0 = Instant::now();
            let mut in_calls = 0.0;
            let who = if args.control { 1 } else { side };
            for k in 0..CHAIN {
                let root = (k % size as usize) as i32;
                if args.vary {
                    // New data for every call, as an application computes it, written
                    // outside the call's time.
                    let v = ((it * 2 + side) * CHAIN + k + rank as usize) as f32;
                    send.iter_mut().for_each(|x| *x = v);
                    let t = Instant::now();
                    call(topo, world, op, who, root, &mut send, &mut recv, &mut all);
                    in_calls += t.elapsed().as_secs_f64() * 1e6;
                } else {
                    call(topo, world, op, who, root, &mut send, &mut recv, &mut all);
                }
            }
            let dt = if args.vary {
                in_calls
            } else {
                t0.elapsed().as_secs_f64() * 1e6
            } / CHAIN as f64;
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
        bytes: if op == "barrier" { 0 } else { n * 4 },
        topo_us: slowest_median(world, &t_topo),
        native_us: slowest_median(world, &t_native),
    }
}

/// A request of either side, for the overlap measurement.
trait Pending: Sized {
    fn test(self) -> Result<(), Self>;
    fn wait(self);
}

impl<'a, S: mpi::request::Scope<'a>> Pending for topo_runtime::Request<'a, S> {
    fn test(self) -> Result<(), Self> {
        topo_runtime::Request::test(self)
    }
    fn wait(self) {
        topo_runtime::Request::wait(self)
    }
}

impl<'a, D: ?Sized, S: mpi::request::Scope<'a>> Pending for mpi::request::Request<'a, D, S> {
    fn test(self) -> Result<(), Self> {
        mpi::request::Request::test(self).map(|_| ())
    }
    fn wait(self) {
        mpi::request::Request::wait(self);
    }
}

/// Computation for `us` microseconds, calling `poll` `tests` times along the way: busy,
/// or asleep when `sleeps`.
fn compute(us: f64, tests: u32, sleeps: bool, mut poll: impl FnMut()) {
    let t0 = Instant::now();
    let slice = us / f64::from(tests + 1);
    let mut x = 1.0f64;
    for k in 0..=tests {
        loop {
            let left = slice * f64::from(k + 1) - t0.elapsed().as_secs_f64() * 1e6;
            if left <= 0.0 {
                break;
            }
            if sleeps {
                std::thread::sleep(std::time::Duration::from_secs_f64(left * 1e-6));
                continue;
            }
            for _ in 0..64 {
                x = std::hint::black_box(x * 1.000_000_1 + 1e-9);
            }
        }
        if k < tests {
            poll();
        }
    }
}

/// One nonblocking collective: start, compute `compute_us` (with `tests` test calls),
/// wait. Returns the elapsed microseconds.
fn overlapped<P: Pending>(
    start: impl FnOnce() -> P,
    compute_us: f64,
    tests: u32,
    sleeps: bool,
) -> f64 {
    let t0 = Instant::now();
    let mut req = Some(start());
    if compute_us > 0.0 {
        compute(compute_us, tests, sleeps, || {
            if let Some(r) = req.take() {
                req = r.test().err();
            }
        });
    }
    if let Some(r) = req {
        r.wait();
    }
    t0.elapsed().as_secs_f64() * 1e6
}

/// Overlap results of one collective and size: pure time, and per style the overlapped
/// time and the overlap percentage, for topo-run (index 0) and MPI (index 1).
struct Overlap {
    pure: [f64; 2],
    total: [[f64; 2]; 2],
    percent: [[f64; 2]; 2],
}

/// OSU's overlap: the share of the pure collective time hidden behind computation.
fn overlap_percent(pure: f64, total: f64, compute: f64) -> f64 {
    (100.0 * (1.0 - (total - compute) / pure)).clamp(0.0, 100.0)
}

fn measure_overlap(
    args: &Args,
    topo: &mut Topo,
    world: &SimpleCommunicator,
    op: &str,
    bytes: usize,
) -> Overlap {
    let n = (bytes / 4).max(1);
    let rank = world.rank();
    let root = args.root;
    let send = vec![rank as f32; n];
    let mut recv = vec![0f32; n];
    let iters = iterations(args, bytes);
    let sum = SystemOperation::sum();
    // One timed run of `side` (0 ours, 1 MPI's) with `compute_us` of computation.
    let mut one = |side: usize, compute_us: f64, tests: u32| -> f64 {
        world.barrier();
        mpi::request::scope(|sc| match (op, side) {
            ("ibcast", 0) => overlapped(
                || topo.immediate_broadcast_into(sc, root, &mut recv[..]),
                compute_us,
                tests,
                args.compute_sleeps,
            ),
            ("ibcast", _) => overlapped(
                || {
                    world
                        .process_at_rank(root)
                        .immediate_broadcast_into(sc, &mut recv[..])
                },
                compute_us,
                tests,
                args.compute_sleeps,
            ),
            ("ireduce", 0) if rank == root => overlapped(
                || topo.immediate_reduce_into_root(sc, &send[..], &mut recv[..], sum),
                compute_us,
                tests,
                args.compute_sleeps,
            ),
            ("ireduce", 0) => overlapped(
                || topo.immediate_reduce_into(sc, root, &send[..], sum),
                compute_us,
                tests,
                args.compute_sleeps,
            ),
            ("ireduce", _) if rank == root => overlapped(
                || {
                    world.process_at_rank(root).immediate_reduce_into_root(
                        sc,
                        &send[..],
                        &mut recv[..],
                        sum,
                    )
                },
                compute_us,
                tests,
                args.compute_sleeps,
            ),
            ("ireduce", _) => overlapped(
                || {
                    world
                        .process_at_rank(root)
                        .immediate_reduce_into(sc, &send[..], sum)
                },
                compute_us,
                tests,
                args.compute_sleeps,
            ),
            ("iallreduce", 0) => overlapped(
                || topo.immediate_all_reduce_into(sc, &send[..], &mut recv[..], sum),
                compute_us,
                tests,
                args.compute_sleeps,
            ),
            ("iallreduce", _) => overlapped(
                || world.immediate_all_reduce_into(sc, &send[..], &mut recv[..], sum),
                compute_us,
                tests,
                args.compute_sleeps,
            ),
            (_, 0) => overlapped(
                || topo.immediate_barrier(),
                compute_us,
                tests,
                args.compute_sleeps,
            ),
            (_, _) => overlapped(
                || world.immediate_barrier(),
                compute_us,
                tests,
                args.compute_sleeps,
            ),
        })
    };
    let mut pure = [0.0; 2];
    for (side, p) in pure.iter_mut().enumerate() {
        for _ in 0..args.warmup {
            one(side, 0.0, 0);
        }
        let t: Vec<f64> = (0..iters).map(|_| one(side, 0.0, 0)).collect();
        *p = slowest_median(world, &t);
    }
    let mut total = [[0.0; 2]; 2];
    let mut percent = [[0.0; 2]; 2];
    // Compute as long as the slower side's pure collective takes, so both sides get the
    // same computation; OSU calls test along the way, IMB does not.
    let compute_us = pure[0].max(pure[1]) * args.compute_factor;
    for (style, tests) in [10u32, 0].into_iter().enumerate() {
        for side in 0..2 {
            let t: Vec<f64> = (0..iters).map(|_| one(side, compute_us, tests)).collect();
            total[style][side] = slowest_median(world, &t);
            percent[style][side] = overlap_percent(pure[side], total[style][side], compute_us);
        }
    }
    Overlap {
        pure,
        total,
        percent,
    }
}

fn run_overlap(
    args: &Args,
    topo: &mut Topo,
    world: &SimpleCommunicator,
    sizes: &[usize],
) -> anyhow::Result<()> {
    let rank = world.rank();
    if rank == 0 {
        println!(
            "{:<10} {:>9} {:>5} {:>9} {:>9} {:>9} {:>9} {:>6} {:>6} {:>9} {:>9} {:>6} {:>6}",
            "op",
            "bytes",
            "ranks",
            "pure_us",
            "mpi_us",
            "osu_us",
            "mpi_us",
            "osu%",
            "mpi%",
            "imb_us",
            "mpi_us",
            "imb%",
            "mpi%"
        );
    }
    let ops: Vec<&str> = if args.ops.iter().any(|o| o.starts_with('i')) {
        args.ops.iter().map(String::as_str).collect()
    } else {
        vec!["ibcast", "ireduce", "iallreduce", "ibarrier"]
    };
    for op in ops {
        anyhow::ensure!(
            ["ibcast", "ireduce", "iallreduce", "ibarrier"].contains(&op),
            "unknown nonblocking collective {op:?}; use ibcast, ireduce, iallreduce or ibarrier"
        );
        let sizes = if op == "ibarrier" { &sizes[..1] } else { sizes };
        for &bytes in sizes {
            let o = measure_overlap(args, topo, world, op, bytes);
            if rank == 0 {
                let b = if op == "ibarrier" { 0 } else { bytes };
                println!(
                    "{:<10} {:>9} {:>5} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>6.1} {:>6.1} {:>9.2} {:>9.2} {:>6.1} {:>6.1}",
                    op,
                    b,
                    world.size(),
                    o.pure[0],
                    o.pure[1],
                    o.total[0][0],
                    o.total[0][1],
                    o.percent[0][0],
                    o.percent[0][1],
                    o.total[1][0],
                    o.total[1][1],
                    o.percent[1][0],
                    o.percent[1][1]
                );
            }
        }
    }
    Ok(())
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

/// The communicator `kind` (see `--comm`) and topo-run's context over it.
fn on_comm(world: &SimpleCommunicator, kind: &str) -> anyhow::Result<(SimpleCommunicator, Topo)> {
    use mpi::topology::Color;
    let (rank, size) = (world.rank(), world.size());
    let split = |color: i32, key: i32| {
        world
            .split_by_color_with_key(Color::with_value(color), key)
            .context("MPI_Comm_split")
    };
    let comm = match kind {
        "world" => {
            let topo =
                Topo::from_env(world).context("topo-run could not set up its collectives")?;
            return Ok((SimpleCommunicator::world(), topo));
        }
        "dup" => world.duplicate(),
        "node" => world.split_shared(rank),
        "parity" => split(rank % 2, rank)?,
        "half" => split(i32::from(rank >= size / 2), rank)?,
        "reversed" => split(0, size - rank)?,
        _ => anyhow::bail!("unknown communicator {kind:?}"),
    };
    let topo = Topo::for_comm(&comm).context("topo-run could not set up its collectives")?;
    Ok((comm, topo))
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(
        args.min >= 4 && args.min <= args.max,
        "--min must be at least 4 and at most --max"
    );
    let universe = topo_examples::init_mpi(args.thread_multiple)?;
    let whole = universe.world();
    let printer = whole.rank() == 0;
    let (world, mut topo) = on_comm(&whole, &args.comm)?;
    let rank = world.rank();
    let size = world.size();
    if printer {
        eprintln!(
            "coll-bench: {} ranks ({} communicator), {}",
            size,
            args.comm,
            topo_examples::describe(&topo)
        );
    }
    // The floor under small messages: one cache line from core to core.
    for (peer, ns) in topo
        .cache_line_transfer(9, 2000)
        .context("measuring the cache-line transfer time")?
    {
        eprintln!(
            "coll-bench: on {}, a cache line takes {ns:.0} ns one way between ranks {rank} \
             and {peer} (median of 9 x 2000 round trips)",
            topo.node()
        );
    }
    if printer && args.control {
        eprintln!("coll-bench: a control run (--control): both columns are MPI's own");
    }
    if printer && !topo.is_hierarchical() {
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
    if args.compute_sleeps {
        // Sleep as long as asked, not up to 50 us longer (the default timer slack).
        nix::sys::prctl::set_timerslack(1000).context("prctl(PR_SET_TIMERSLACK)")?;
    }
    if args.overlap {
        run_overlap(&args, &mut topo, &world, &sizes)?;
        drop(topo);
        return Ok(());
    }
    let mut measured = Vec::new();
    if printer {
        if args.csv {
            println!("op,bytes,ranks,topo_us,native_us,ratio");
        } else {
            println!(
                "{:<10} {:>10} {:>6} {:>12} {:>12} {:>7} {:>11}",
                "op", "bytes", "ranks", "topo_us", "native_us", "ratio", "memcpy_us"
            );
        }
    }
    let mut cases = Vec::new();
    for (i, op) in args.ops.iter().enumerate() {
        anyhow::ensure!(
            [
                "bcast",
                "reduce",
                "allreduce",
                "allgather",
                "gather",
                "scatter",
                "scan",
                "exscan",
                "reduce_scatter_block",
                "alltoall",
                "alltoallv",
                "allgatherv",
                "gatherv",
                "scatterv",
                "barrier"
            ]
            .contains(&op.as_str()),
            "unknown collective {op:?}; use bcast, reduce, allreduce, allgather, gather, \
             scatter, scan, exscan, reduce_scatter_block, alltoall, alltoallv, allgatherv, \
             gatherv, scatterv or barrier"
        );
        if op == "barrier" {
            cases.push((i, op.as_str(), 0));
        } else {
            cases.extend(sizes.iter().map(|&bytes| (i, op.as_str(), bytes)));
        }
    }
    if args.order == "shuffle" {
        let mut seed = args.seed.unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
        });
        world.process_at_rank(0).broadcast_into(&mut seed);
        if rank == 0 {
            eprintln!("coll-bench: cases in a shuffled order (--seed {seed})");
        }
        shuffle(&mut cases, seed);
    }
    for &(i, op, bytes) in &cases {
        let row = if args.chain {
            measure_chain(&args, &mut topo, &world, op, bytes)
        } else {
            measure(&args, &mut topo, &world, op, bytes)
        };
        let copy = memcpy_us(row.bytes);
        measured.push((i, row, copy));
    }
    measured.sort_by_key(|(i, row, _)| (*i, row.bytes));
    for (_, row, copy) in measured.iter().filter(|_| printer) {
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
    if printer && let Some(path) = &args.svg {
        // The plot's axis is the message size: the barrier has none.
        measured.retain(|(_, r, _)| r.op != "barrier");
        let copies: Vec<_> = measured.iter().map(|(_, r, c)| (r.bytes, *c)).collect();
        let rows: Vec<_> = measured.into_iter().map(|(_, r, _)| r).collect();
        plot(path, &rows, &copies, size)?;
        eprintln!("coll-bench: plot written to {}", path.display());
    }
    drop(topo);
    Ok(())
}
