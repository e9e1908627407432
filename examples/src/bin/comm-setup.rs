//! What a context over a communicator costs to set up (`Topo::for_comm`), against MPI's
//! own `MPI_Comm_split` that made the communicator, and what a split-and-free loop costs
//! with and without a context per communicator.
//!
//! ```text
//! srun --mpi=pmix -n 4 topo-run -- comm-setup --rounds 200
//! ```
//!
//! Each round splits world into the even and the odd ranks, then sets a context up over
//! the half and frees both. Rank 0 prints the median and the 90th percentile of each step
//! (the maximum over ranks of each round), and the loop's time per round with and without
//! the contexts.

use std::time::Instant;

use clap::Parser;
use mpi::collective::{CommunicatorCollectives, SystemOperation};
use mpi::topology::{Color, Communicator};
use topo_runtime::Topo;

#[derive(Parser, Debug)]
#[command(about = "The setup time of a context over a communicator, against MPI_Comm_split")]
struct Args {
    /// Rounds of split, set up and free.
    #[arg(long, default_value_t = 200)]
    rounds: usize,
}

/// The median and the 90th percentile of `v`, in microseconds.
fn summary(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.9))
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let universe = mpi::initialize().ok_or_else(|| anyhow::anyhow!("MPI_Init failed"))?;
    let world = universe.world();
    let rank = world.rank();
    let slowest = |us: f64| {
        let mut max = 0.0f64;
        world.all_reduce_into(&us, &mut max, SystemOperation::max());
        max
    };
    let (mut split, mut setup, mut free) = (Vec::new(), Vec::new(), Vec::new());
    let t_with = Instant::now();
    for _ in 0..args.rounds {
        world.barrier();
        let t = Instant::now();
        let half = world
            .split_by_color_with_key(Color::with_value(rank % 2), rank)
            .ok_or_else(|| anyhow::anyhow!("split"))?;
        split.push(slowest(t.elapsed().as_secs_f64() * 1e6));
        let t = Instant::now();
        let topo = Topo::for_comm(&half)?;
        setup.push(slowest(t.elapsed().as_secs_f64() * 1e6));
        let t = Instant::now();
        drop(topo);
        drop(half);
        free.push(slowest(t.elapsed().as_secs_f64() * 1e6));
    }
    let with = t_with.elapsed().as_secs_f64() * 1e6 / args.rounds as f64;
    world.barrier();
    let t_without = Instant::now();
    for _ in 0..args.rounds {
        world.barrier();
        let half = world
            .split_by_color_with_key(Color::with_value(rank % 2), rank)
            .ok_or_else(|| anyhow::anyhow!("split"))?;
        drop(half);
        slowest(0.0);
        slowest(0.0);
    }
    let without = t_without.elapsed().as_secs_f64() * 1e6 / args.rounds as f64;
    if rank == 0 {
        for (what, v) in [
            ("MPI_Comm_split", split),
            ("Topo::for_comm", setup),
            ("free both", free),
        ] {
            let (median, p90) = summary(v);
            println!("{what:<16} median {median:9.1} us, 90th percentile {p90:9.1} us");
        }
        println!(
            "a round: {with:.1} us with a context, {without:.1} us without ({:.2}x)",
            with / without
        );
    }
    Ok(())
}
