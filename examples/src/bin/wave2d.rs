//! An explicit 2D wave-equation solver (damped, fixed edges) on an N x N grid split into
//! row blocks, one per rank, with halo exchange. Every iteration computes the norm of the
//! change between iterations with an Allreduce and stops once it falls below `--eps`
//! (or after `--max-iters`).
//!
//! The blocking mode waits for the norm before the next iteration. The nonblocking mode
//! starts the norm's Allreduce, computes the next iteration's interior rows (which need
//! no halo) while testing the request, and only then checks the stop condition; the
//! interior rows are kept if the solver goes on. Both modes do the same arithmetic, so
//! `--mode both` checks that they give bit-identical solutions and prints the speedup.
//! The blocking run also prints its communication share: the slowest rank's time in the
//! halo exchange and the norm's Allreduce over its whole time.
//!
//! ```text
//! srun --mpi=pmix -n 4 topo-run -- wave2d --n 1000 --mode both
//! ```

use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use mpi::collective::{CommunicatorCollectives, SystemOperation};
use mpi::point_to_point::send_receive_into;
use mpi::topology::{Communicator, SimpleCommunicator};
use topo_runtime::Topo;

#[derive(Parser, Debug)]
#[command(about = "Explicit 2D wave equation: blocking vs nonblocking norm Allreduce")]
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
    /// Test the nonblocking request this many times during the interior update.
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
        let n = self.n;
        let mut sq = 0.0;
        for r in from..to {
            let g = self.lo + r - 1;
            if g == 0 || g == n - 1 {
                continue;
            }
            for c in 1..n - 1 {
                let i = r * n + c;
                let u = &self.cur;
                let lap = u[i - 1] + u[i + 1] + u[i - n] + u[i + n] - 4.0 * u[i];
                let v = (2.0 * u[i] - (1.0 - DAMP) * self.prev[i] + C2 * lap) / (1.0 + DAMP);
                let d = v - u[i];
                sq += d * d;
                self.next[i] = v;
            }
        }
        sq
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

    fn rotate(&mut self) {
        std::mem::swap(&mut self.prev, &mut self.cur);
        std::mem::swap(&mut self.cur, &mut self.next);
    }
}

/// Runs the solver; returns the final block, the iterations, the seconds taken and the
/// seconds spent communicating (halo exchange and the blocking norm; 0 when nonblocking).
fn solve(
    args: &Args,
    topo: &mut Topo,
    world: &SimpleCommunicator,
    nonblocking: bool,
) -> (Block, usize, f64, f64) {
    let mut b = Block::new(args.n, world.rank() as usize, world.size() as usize);
    let rows = b.rows;
    world.barrier();
    let t0 = Instant::now();
    let mut iters = 0;
    // Nonblocking: the interior of iteration k + 1 is already in `next` when k ends.
    let mut interior_done = 0.0;
    let mut have_interior = false;
    let mut comm = 0.0f64;
    loop {
        let tc = Instant::now();
        b.halo(world);
        if !nonblocking {
            comm += tc.elapsed().as_secs_f64();
        }
        let local = if have_interior {
            // Only the boundary rows are left; they needed the halo.
            let mut sq = interior_done;
            sq += b.update(1, 2.min(rows + 1));
            if rows > 1 {
                sq += b.update(rows, rows + 1);
            }
            sq
        } else {
            b.update(1, rows + 1)
        };
        iters += 1;
        let mut global = 0.0f64;
        let stop;
        if nonblocking && rows > 2 {
            b.rotate();
            // Start the norm, then the next interior rows while it is in flight.
            mpi::request::scope(|scope| {
                let mut req = Some(topo.immediate_all_reduce_into(
                    scope,
                    std::slice::from_ref(&local),
                    std::slice::from_mut(&mut global),
                    SystemOperation::sum(),
                ));
                let chunk = ((rows - 2) / (args.tests + 1)).max(1);
                let mut r = 2;
                interior_done = 0.0;
                while r < rows {
                    let end = (r + chunk).min(rows);
                    interior_done += b.update(r, end);
                    r = end;
                    if let Some(q) = req.take() {
                        req = q.test().err();
                    }
                }
                if let Some(q) = req {
                    q.wait();
                }
            });
            stop = global.sqrt() < args.eps || iters >= args.max_iters;
            if stop {
                // Undo the speculative rotation: the solution is iteration `iters`.
                std::mem::swap(&mut b.cur, &mut b.next);
                std::mem::swap(&mut b.prev, &mut b.cur);
            }
            have_interior = !stop;
        } else {
            let tc = Instant::now();
            topo.all_reduce_into(
                std::slice::from_ref(&local),
                std::slice::from_mut(&mut global),
                SystemOperation::sum(),
            );
            comm += tc.elapsed().as_secs_f64();
            stop = global.sqrt() < args.eps || iters >= args.max_iters;
            if !stop {
                b.rotate();
            }
        }
        if stop {
            break;
        }
    }
    (b, iters, t0.elapsed().as_secs_f64(), comm)
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
        let (b, iters, secs, comm) = solve(&args, &mut topo, &world, nb);
        let mut t = 0.0f64;
        world.all_reduce_into(&secs, &mut t, SystemOperation::max());
        let mut share = 0.0f64;
        world.all_reduce_into(&(comm / secs), &mut share, SystemOperation::max());
        let mut sum = 0.0f64;
        let local: f64 = b.next[b.n..(b.rows + 1) * b.n].iter().sum();
        world.all_reduce_into(&local, &mut sum, SystemOperation::sum());
        if rank == 0 {
            println!(
                "wave2d: {} n={} ranks={} iterations={iters} time={t:.4} s checksum={sum:.12e}{}",
                if nb { "nonblocking" } else { "blocking" },
                args.n,
                world.size(),
                if nb {
                    String::new()
                } else {
                    format!(" communication={:.0}%", share * 100.0)
                }
            );
        }
        results.push((b, iters, t));
    }
    if let [(a, ia, ta), (b, ib, tb)] = &results[..] {
        let same = u8::from(ia == ib && a.next == b.next);
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
