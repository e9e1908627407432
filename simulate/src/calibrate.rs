//! `topo-run simulate --calibrate FILE`: measures the cost model's parameters on the
//! machine it runs on, as an MPI job step (`srun --mpi=pmix topo-run simulate --calibrate
//! site.model`), and writes them as a model file.
//!
//! Rank 0 measures a ping-pong with each other rank in turn (the others sleep in a barrier):
//! one-way times of 8 bytes and of 1 MiB, medians of many round trips, give the latency
//! `alpha = t(8) - 8 / bandwidth` and the bandwidth `(1 MiB - 8) / (t(1 MiB) - t(8))`. The
//! pair's link class is `node` if both ranks are on one node (Slurm's `SLURMD_NODENAME`,
//! else the host name), else `leaf`, `spine` or `world` by the network map (`world`
//! without one). Each class takes the lowest latency and the highest bandwidth of its
//! pairs (two ranks that share a core measure the scheduler). Classes no pair measured
//! take the value of the nearest measured class: the classes inside a node from `node`
//! (one binding's classes are not told apart here), the network classes from the nearest
//! one measured. `copy` and `reduce` are memory copies and sums of 1 MiB on rank 0, and
//! the interface's bandwidth `nic` is the fastest network bandwidth measured. The reduce
//! rate beyond the cache, the interface's message rate and the call overhead are not
//! measured: they keep the defaults.

use std::collections::BTreeMap;
use std::time::Instant;

use mpi::collective::CommunicatorCollectives;
use mpi::point_to_point::{Destination, Source};
use mpi::topology::{Communicator, SimpleCommunicator};
use topo_hierarchy::NetworkMap;

use crate::model::{CostModel, Link, LinkClass};

/// The small and the large message of the ping-pong.
const SMALL: usize = 8;
const LARGE: usize = 1 << 20;

/// One pair's measurement.
#[derive(Debug, Clone, Copy)]
pub struct Pair {
    /// The other rank.
    pub peer: i32,
    /// The link class between rank 0 and it.
    pub class: LinkClass,
    /// One-way time of `SMALL` bytes, in microseconds.
    pub small_us: f64,
    /// One-way time of `LARGE` bytes, in microseconds.
    pub large_us: f64,
}

impl Pair {
    fn link(&self) -> Link {
        let bytes_per_us = (LARGE - SMALL) as f64 / (self.large_us - self.small_us).max(1e-3);
        Link {
            alpha_us: (self.small_us - SMALL as f64 / bytes_per_us).max(0.0),
            bytes_per_us,
        }
    }
}

/// This rank's node: Slurm's name for it (the dev cluster's nodes share one host), else
/// the host name.
fn node_name() -> String {
    std::env::var("SLURMD_NODENAME").unwrap_or_else(|_| {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    })
}

/// Median of `xs` (not empty).
fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

/// One-way times of `bytes` between rank 0 and `peer`: the median of `iters` round trips,
/// halved. Both ranks call it.
fn ping_pong(world: &SimpleCommunicator, peer: i32, bytes: usize, iters: usize) -> f64 {
    let me = world.rank();
    let mut buf = vec![0u8; bytes];
    let other = world.process_at_rank(if me == 0 { peer } else { 0 });
    let mut times = Vec::with_capacity(iters);
    for i in 0..iters + iters / 10 + 2 {
        let t0 = Instant::now();
        if me == 0 {
            other.send(&buf[..]);
            other.receive_into(&mut buf[..]);
        } else {
            other.receive_into(&mut buf[..]);
            other.send(&buf[..]);
        }
        if i >= iters / 10 + 2 {
            times.push(t0.elapsed().as_secs_f64() * 1e6 / 2.0);
        }
    }
    median(times)
}

/// A barrier that sleeps while it waits, so that the ranks not measuring leave the cores
/// to the two that are (MPI's own barrier spins, and ranks may outnumber cores).
fn sleepy_barrier(world: &SimpleCommunicator) {
    let mut req = world.immediate_barrier();
    loop {
        match req.test() {
            Ok(_) => return,
            Err(r) => {
                req = r;
                std::thread::sleep(std::time::Duration::from_micros(50));
            }
        }
    }
}

/// The median time in microseconds of `f`, run `iters` times after a warm-up.
fn timed(iters: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..3 {
        f();
    }
    median(
        (0..iters)
            .map(|_| {
                let t0 = Instant::now();
                f();
                t0.elapsed().as_secs_f64() * 1e6
            })
            .collect(),
    )
}

/// Measures on every rank of `world` (each must call it); rank 0 gets the model and the
/// pairs, the others `None`.
pub fn measure(
    world: &SimpleCommunicator,
    map: Option<&NetworkMap>,
) -> Option<(CostModel, Vec<Pair>)> {
    let me = world.rank();
    let n = world.size();
    // Every rank's node name, gathered at rank 0 (fixed-width, zero-padded).
    let mut name = node_name().into_bytes();
    name.resize(64, 0);
    let mut names = vec![0u8; 64 * n as usize];
    world.all_gather_into(&name[..], &mut names[..]);
    let node_of = |r: i32| {
        let raw = &names[r as usize * 64..(r as usize + 1) * 64];
        String::from_utf8_lossy(raw)
            .trim_end_matches('\0')
            .to_string()
    };
    let class_of = |r: i32| {
        let (a, b) = (node_of(0), node_of(r));
        if a == b {
            return LinkClass::Node;
        }
        let (pa, pb) = (
            map.and_then(|m| m.path(&a)).unwrap_or_default(),
            map.and_then(|m| m.path(&b)).unwrap_or_default(),
        );
        match (pa.first(), pb.first()) {
            (Some(x), Some(y)) if x == y => LinkClass::Leaf,
            _ if pa.iter().any(|s| pb.contains(s)) => LinkClass::Spine,
            _ => LinkClass::World,
        }
    };
    let mut pairs = Vec::new();
    for peer in 1..n {
        sleepy_barrier(world);
        if me == 0 || me == peer {
            let small_us = ping_pong(world, peer, SMALL, 2000);
            let large_us = ping_pong(world, peer, LARGE, 100);
            if me == 0 {
                pairs.push(Pair {
                    peer,
                    class: class_of(peer),
                    small_us,
                    large_us,
                });
            }
        }
    }
    sleepy_barrier(world);
    if me != 0 {
        return None;
    }
    // Copies and sums of LARGE bytes on this rank.
    let src = vec![1.0f64; LARGE / 8];
    let mut dst = vec![0.0f64; LARGE / 8];
    let copy_us = timed(200, || {
        dst.copy_from_slice(&src);
        std::hint::black_box(&mut dst);
    });
    let reduce_us = timed(200, || {
        for (d, s) in dst.iter_mut().zip(&src) {
            *d += *s;
        }
        std::hint::black_box(&mut dst);
    });
    let mut model = CostModel {
        copy_bytes_per_us: LARGE as f64 / copy_us,
        reduce_bytes_per_us: LARGE as f64 / reduce_us,
        ..CostModel::default()
    };
    // Per class, the fastest of its pairs: the lowest latency and the highest bandwidth.
    // (Two ranks that share a core, as ranks of emulated nodes on one host can, measure
    // the scheduler's time slice instead of the link.)
    let mut measured: BTreeMap<LinkClass, Link> = BTreeMap::new();
    for p in &pairs {
        let l = p.link();
        let best = measured.entry(p.class).or_insert(l);
        best.alpha_us = best.alpha_us.min(l.alpha_us);
        best.bytes_per_us = best.bytes_per_us.max(l.bytes_per_us);
    }
    for c in LinkClass::ALL {
        // The class itself, else the nearest measured one on the same side of the node
        // boundary, else the nearest at all.
        let near = |c: LinkClass| {
            measured
                .iter()
                .min_by_key(|(m, _)| {
                    (
                        m.is_network() != c.is_network(),
                        (**m as i32 - c as i32).abs(),
                    )
                })
                .map(|(_, l)| *l)
        };
        if let Some(l) = near(c) {
            model.links[c as usize] = l;
        }
    }
    if let Some(fastest) = measured
        .iter()
        .filter(|(c, _)| c.is_network())
        .map(|(_, l)| l.bytes_per_us)
        .max_by(f64::total_cmp)
    {
        model.nic_bytes_per_us = fastest;
    }
    Some((model, pairs))
}

/// The model file, with the measurements in its comments.
pub fn file_text(model: &CostModel, pairs: &[Pair]) -> String {
    let mut out = String::from(
        "# Measured by `topo-run simulate --calibrate`: one-way times (medians of round trips)\n\
         # between rank 0 and each rank, 8 bytes and 1 MiB:\n",
    );
    for p in pairs {
        let l = p.link();
        out.push_str(&format!(
            "#   rank 0 - rank {:<5} {:<6} {:>9.2} us {:>10.1} us   alpha {:.2} us, {:.2} GB/s\n",
            p.peer,
            p.class.name(),
            p.small_us,
            p.large_us,
            l.alpha_us,
            l.bytes_per_us / 1e3
        ));
    }
    out.push_str("# Classes not measured take the nearest measured class's values.\n");
    out.push_str(&model.to_text());
    out
}
