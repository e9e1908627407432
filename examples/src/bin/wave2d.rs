//! An explicit 2D wave-equation solver (damped, fixed edges) on an N x N grid split into
//! row blocks, one per rank, with halo exchange. Every iteration computes the norm of the
//! change between iterations with an Allreduce and stops once it falls below `--eps`
//! (or after `--max-iters`).
//!
//! The blocking mode exchanges halos (`MPI_Sendrecv`) and waits for the norm before the
//! next iteration. The nonblocking mode starts the halo exchange (`MPI_Isend`/`MPI_Irecv`)
//! and the norm's Allreduce together, computes the next iteration's interior rows (which
//! need no halo) while testing the requests, and only then checks the stop condition and
//! computes the boundary rows; the interior rows are kept if the solver goes on. Both modes do the same arithmetic, so
//! `--mode both` checks that they give bit-identical solutions and prints the speedup.
//! The blocking run also prints its communication share: the slowest rank's time in the
//! halo exchange and the norm's Allreduce over its whole time; the nonblocking run, the
//! slowest rank's share in the calls that start them, in the tests and in the waits. Both
//! runs print their
//! kernel share: the process's system CPU time over its whole time (the highest rank's),
//! which between emulated nodes of one machine is mostly the TCP stack working on the
//! rank's own core.
//!
//! ```text
//! srun --mpi=pmix -n 4 topo-run -- wave2d --n 1000 --mode both
//! ```

use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use mpi::collective::{CommunicatorCollectives, SystemOperation};
use mpi::point_to_point::{Destination, Source, send_receive_into};
use mpi::topology::{Communicator, SimpleCommunicator};
use topo_runtime::Topo;

#[derive(Parser, Debug)]
#[command(
    about = "Explicit 2D wave equation: blocking vs nonblocking halo exchange and norm Allreduce"
)]
struct Args {
    /// Initialise MPI with MPI_THREAD_MULTIPLE, so that topo-run's progress thread
    /// (`topo-run --progress-thread`) may also run the network steps.
    #[arg(long)]
    thread_multiple: bool,
    /// Grid points per side.
    #[arg(long, default_value_t = 500)]
    n: usize,
    /// Stop when the norm of the change between iterations falls below this.
    #[arg(long, default_value_t = 1e-3)]
    eps: f64,
    /// Stop after this many iterations at the latest.
    #[arg(long, default_value_t = 2000)]
    max_iters: usize,
    /// `blocking`, `nonblocking`, or `both` (runs both, checks that the solutions are
    /// identical and prints the speedup).
    #[arg(long, default_value = "both", value_parser = ["blocking", "nonblocking", "both"])]
    mode: String,
    /// Test the nonblocking requests (halo and norm) this many times during the interior
    /// update.
    #[arg(long, default_value_t = 8)]
    tests: usize,
}

/// Courant number squared (c dt / h)^2, stable below 0.5.
const C2: f64 = 0.25;
/// Damping per step, so the norm decays and the stop condition is reached.
const DAMP: f64 = 0.002;

/// This rank's rows `lo..hi` of the grid, with one halo row above and below.
struct Block {
    n: usize,
    lo: usize,
    rows: usize,
    prev: Vec<f64>,
    cur: Vec<f64>,
    next: Vec<f64>,
}

impl Block {
    fn new(n: usize, rank: usize, size: usize) -> Self {
        let lo = n * rank / size;
        let hi = n * (rank + 1) / size;
        let rows = hi - lo;
        let mut cur = vec![0.0; (rows + 2) * n];
        for r in 0..rows {
            for c in 0..n {
                let (y, x) = ((lo + r) as f64 / n as f64 - 0.5, c as f64 / n as f64 - 0.5);
                let edge = lo + r == 0 || lo + r == n - 1 || c == 0 || c == n - 1;
                if !edge {
                    cur[(r + 1) * n + c] = (-(x * x + y * y) * 200.0).exp();
                }
            }
        }
        Block {
            n,
            lo,
            rows,
            prev: cur.clone(),
            next: cur.clone(),
            cur,
        }
    }

    /// Computes `next` for local rows `from..to` (1-based, halo rows excluded) and returns
    /// the sum of squared changes over them.
    fn update(&mut self, from: usize, to: usize) -> f64 {
        update_rows(
            self.n,
            self.lo,
            from..to,
            &self.prev,
            &self.cur,
            0,
            &mut self.next,
        )
    }

    /// Exchanges halo rows of `cur` with the neighbours.
    fn halo(&mut self, world: &SimpleCommunicator) {
        let (rank, size, n, rows) = (world.rank(), world.size(), self.n, self.rows);
        if rows == 0 {
            return;
        }
        let (top, rest) = self.cur.split_at_mut(n);
        let (body, bottom) = rest.split_at_mut(rows * n);
        if rank > 0 {
            let up = world.process_at_rank(rank - 1);
            send_receive_into(&body[..n], &up, top, &up);
        }
        if rank + 1 < size {
            let down = world.process_at_rank(rank + 1);
            send_receive_into(&body[(rows - 1) * n..], &down, bottom, &down);
        }
    }

    /// The solution's rows of this block (`next` without its halo rows).
    fn solution(&self) -> &[f64] {
        &self.next[self.n..(self.rows + 1) * self.n]
    }

    fn rotate(&mut self) {
        std::mem::swap(&mut self.prev, &mut self.cur);
        std::mem::swap(&mut self.cur, &mut self.next);
    }
}

/// Computes `next` for local rows `rows` (1-based, halo rows excluded) of the block whose
/// first global row is `lo`, from `prev` and `cur`, where `cur[0]` is the first element of
/// local row `base` (0 for the whole block with its top halo row, 1 for its body alone);
/// returns the sum of squared changes over those rows.
fn update_rows(
    n: usize,
    lo: usize,
    rows: std::ops::Range<usize>,
    prev: &[f64],
    cur: &[f64],
    base: usize,
    next: &mut [f64],
) -> f64 {
    let mut sq = 0.0;
    for r in rows {
        let g = lo + r - 1;
        if g == 0 || g == n - 1 {
            continue;
        }
        for c in 1..n - 1 {
            let i = r * n + c;
            let j = i - base * n;
            let u = cur;
            let lap = u[j - 1] + u[j + 1] + u[j - n] + u[j + n] - 4.0 * u[j];
            let v = (2.0 * u[j] - (1.0 - DAMP) * prev[i] + C2 * lap) / (1.0 + DAMP);
            let d = v - u[j];
            sq += d * d;
            next[i] = v;
        }
    }
    sq
}

/// One run of the solver on this rank.
struct Run {
    block: Block,
    iters: usize,
    /// Seconds taken.
    secs: f64,
    /// Seconds spent communicating. Blocking: halo exchange and the norm. Nonblocking:
    /// in the calls that start them, in the tests, and in the waits that end them.
    comm: [f64; 3],
    /// Seconds of CPU time the process spent in the kernel (system time) meanwhile: on
    /// these machines TCP between emulated nodes is the kernel's work on the ranks' own
    /// cores, which no overlap can hide.
    kernel: f64,
}

fn system_time() -> f64 {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_SELF).map_or(0.0, |u| {
        let t = u.system_time();
        t.tv_sec() as f64 + t.tv_usec() as f64 * 1e-6
    })
}

/// Whether every rank's block has an interior row (one that needs no halo) to compute
/// while its communication is in flight, which takes at least 3 rows. All ranks must
/// agree: the nonblocking mode pairs its nonblocking halo exchanges and Allreduce with the
/// neighbours' own.
fn can_overlap(n: usize, size: usize) -> bool {
    n / size >= 3
}

/// Runs the solver.
fn solve(args: &Args, topo: &mut Topo, world: &SimpleCommunicator, nonblocking: bool) -> Run {
    let mut b = Block::new(args.n, world.rank() as usize, world.size() as usize);
    world.barrier();
    let k0 = system_time();
    let t0 = Instant::now();
    let (iters, comm) = if nonblocking && can_overlap(args.n, world.size() as usize) {
        solve_overlapped(args, topo, world, &mut b)
    } else {
        let (iters, comm) = solve_blocking(args, topo, world, &mut b);
        (iters, [comm, 0.0, 0.0])
    };
    Run {
        block: b,
        iters,
        secs: t0.elapsed().as_secs_f64(),
        comm,
        kernel: system_time() - k0,
    }
}

/// Each iteration exchanges halos, updates every row, then waits for the norm's
/// Allreduce. Returns the iterations and the seconds spent communicating.
fn solve_blocking(
    args: &Args,
    topo: &mut Topo,
    world: &SimpleCommunicator,
    b: &mut Block,
) -> (usize, f64) {
    let mut comm = 0.0f64;
    let mut iters = 0;
    loop {
        let tc = Instant::now();
        b.halo(world);
        comm += tc.elapsed().as_secs_f64();
        let local = b.update(1, b.rows + 1);
        iters += 1;
        let mut global = 0.0f64;
        let tc = Instant::now();
        topo.all_reduce_into(
            std::slice::from_ref(&local),
            std::slice::from_mut(&mut global),
            SystemOperation::sum(),
        );
        comm += tc.elapsed().as_secs_f64();
        if global.sqrt() < args.eps || iters >= args.max_iters {
            return (iters, comm);
        }
        b.rotate();
    }
}

/// Once iteration k's rows are all computed, the halo rows of its solution travel
/// (`MPI_Isend`/`MPI_Irecv`) and its norm's Allreduce runs while the interior rows of
/// iteration k + 1, which need no halo, are computed (the requests are tested between
/// chunks); the boundary rows follow once everything has arrived. If the norm says stop,
/// the interior computed ahead is dropped. Returns the iterations and the seconds spent
/// in the calls that start the transfers, in the tests and in the waits.
fn solve_overlapped(
    args: &Args,
    topo: &mut Topo,
    world: &SimpleCommunicator,
    b: &mut Block,
) -> (usize, [f64; 3]) {
    let mut calls = [0.0f64; 3];
    let (rank, size, n, rows, lo) = (world.rank(), world.size(), b.n, b.rows, b.lo);
    b.halo(world);
    let mut interior = b.update(2, rows);
    let mut iters = 0;
    loop {
        let local = interior + b.update(1, 2) + b.update(rows, rows + 1);
        iters += 1;
        b.rotate();
        let mut global = 0.0f64;
        mpi::request::scope(|scope| {
            let tc = Instant::now();
            let (top, rest) = b.cur.split_at_mut(n);
            let (body, bottom) = rest.split_at_mut(rows * n);
            let body: &[f64] = body;
            let mut halo = Vec::with_capacity(4);
            if rank > 0 {
                let up = world.process_at_rank(rank - 1);
                halo.push(Some(up.immediate_receive_into(scope, top)));
                halo.push(Some(up.immediate_send(scope, &body[..n])));
            }
            if rank + 1 < size {
                let down = world.process_at_rank(rank + 1);
                halo.push(Some(down.immediate_receive_into(scope, bottom)));
                halo.push(Some(down.immediate_send(scope, &body[(rows - 1) * n..])));
            }
            let mut norm = Some(topo.immediate_all_reduce_into(
                scope,
                std::slice::from_ref(&local),
                std::slice::from_mut(&mut global),
                SystemOperation::sum(),
            ));
            calls[0] += tc.elapsed().as_secs_f64();
            let chunk = ((rows - 2) / (args.tests + 1)).max(1);
            let mut r = 2;
            interior = 0.0;
            while r < rows {
                let end = (r + chunk).min(rows);
                interior += update_rows(n, lo, r..end, &b.prev, body, 1, &mut b.next);
                r = end;
                let tc = Instant::now();
                norm = norm.take().and_then(|q| q.test().err());
                for h in &mut halo {
                    *h = h.take().and_then(|q| q.test().err());
                }
                calls[1] += tc.elapsed().as_secs_f64();
            }
            let tc = Instant::now();
            if let Some(q) = norm {
                q.wait();
            }
            for q in halo.into_iter().flatten() {
                q.wait();
            }
            calls[2] += tc.elapsed().as_secs_f64();
        });
        if global.sqrt() < args.eps || iters >= args.max_iters {
            // Undo the rotation: the solution is iteration `iters`, back in `next`.
            std::mem::swap(&mut b.cur, &mut b.next);
            std::mem::swap(&mut b.prev, &mut b.cur);
            return (iters, calls);
        }
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    anyhow::ensure!(args.n >= 3, "--n must be at least 3");
    let universe = topo_examples::init_mpi(args.thread_multiple)?;
    let world = universe.world();
    let mut topo = Topo::from_env(&world).context("topo-run could not set up its collectives")?;
    let rank = world.rank();
    if rank == 0 {
        eprintln!("wave2d: {}", topo_examples::describe(&topo));
    }
    let modes: Vec<bool> = match args.mode.as_str() {
        "blocking" => vec![false],
        "nonblocking" => vec![true],
        _ => vec![false, true],
    };
    let mut results = Vec::new();
    for &nb in &modes {
        let Run {
            block: b,
            iters,
            secs,
            comm,
            kernel,
        } = solve(&args, &mut topo, &world, nb);
        let mut t = 0.0f64;
        world.all_reduce_into(&secs, &mut t, SystemOperation::max());
        let mut share = [0.0f64; 3];
        world.all_reduce_into(
            &comm.map(|c| c / secs)[..],
            &mut share[..],
            SystemOperation::max(),
        );
        let mut kernel_share = 0.0f64;
        world.all_reduce_into(&(kernel / secs), &mut kernel_share, SystemOperation::max());
        let mut sum = 0.0f64;
        let local: f64 = b.solution().iter().sum();
        world.all_reduce_into(&local, &mut sum, SystemOperation::sum());
        if rank == 0 {
            println!(
                "wave2d: {} n={} ranks={} iterations={iters} time={t:.4} s checksum={sum:.12e}{} \
                 kernel={:.0}%",
                if nb { "nonblocking" } else { "blocking" },
                args.n,
                world.size(),
                if nb && !can_overlap(args.n, world.size() as usize) {
                    " (blocks of fewer than 3 rows: nothing to overlap, ran blocking)".to_string()
                } else if nb {
                    format!(
                        " start={:.0}% test={:.0}% wait={:.0}%",
                        share[0] * 100.0,
                        share[1] * 100.0,
                        share[2] * 100.0
                    )
                } else {
                    format!(" communication={:.0}%", share[0] * 100.0)
                },
                kernel_share * 100.0
            );
        }
        results.push((b, iters, t));
    }
    if let [(a, ia, ta), (b, ib, tb)] = &results[..] {
        let same = u8::from(ia == ib && a.solution() == b.solution());
        let mut all = 0u8;
        world.all_reduce_into(&same, &mut all, SystemOperation::min());
        if rank == 0 {
            println!(
                "wave2d: speedup {:.3} (blocking / nonblocking time)",
                ta / tb
            );
            println!(
                "wave2d: same solution in both modes: {}",
                if all == 1 { "yes" } else { "NO" }
            );
        }
        if all != 1 {
            std::process::exit(1);
        }
    }
    drop(topo);
    Ok(())
}
