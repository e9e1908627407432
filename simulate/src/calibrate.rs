//! `topo-run simulate --calibrate FILE`: measures the cost model's parameters on the
//! machine it runs on, as an MPI job step (`srun --mpi=pmix topo-run simulate --calibrate
//! site.model`), and writes them as a model file.
//!
//! Rank 0 measures a ping-pong with each other rank in turn (the others sleep in a barrier):
//! one-way times (medians of many round trips, halved) at every size of [`SIZES`], from 8
//! bytes to 1 MiB. The smallest and the largest give the latency `alpha = t(8) - 8 /
//! bandwidth` and the bandwidth `(1 MiB - 8) / (t(1 MiB) - t(8))`; every size above 8 bytes
//! is one of the link's measured points, which the model follows between them (real paths
//! change protocol with the size). The pair's link class is `node` if both ranks are on one node
//! (Slurm's `SLURMD_NODENAME`, else the host name), else `leaf`, `spine` or `world` by the
//! network map (`world` without one). Each class takes, size by size, the fastest of its
//! pairs (two ranks that share a core measure the scheduler). Classes no pair measured
//! take the value of the nearest measured class: the classes inside a node from `node`
//! (one binding's classes are not told apart here), the network classes from the nearest
//! one measured. `copy` and `reduce` are memory copies and sums of 1 MiB on rank 0, the
//! reduce rate beyond the cache (`memory`) a sum of 64 MiB, and the interface's bandwidth
//! `nic` is the fastest network bandwidth measured. Each MPI pair also times an exchange
//! of 1 MiB, both ranks sending at once: where it takes more than 1.5 times the one way
//! between nodes, the network is half duplex (`nic duplex=half`: emulated nodes on one
//! host, whose network is the host's TCP stack on the same cores). Each MPI pair also times
//! an exchange of 8 bytes: on a half-duplex network, what it takes beyond the one way is
//! the time the second message waits for the first, each message's hold on the interface
//! (`nic rate`, one over it).
//!
//! Started by topo-run (`srun topo-run simulate --calibrate` plans the step), the classes
//! inside a node are measured through topo-run's own shared memory instead of MPI's, as
//! the collectives' steps use it ([`Topo::queue_transfer`]), by the same round trips. On a
//! step of two ranks on one node, the call overhead is a chain of topo-run's 8-byte
//! broadcasts, the root moving every call, less the queue's one way. On a full-duplex
//! network the interface's message rate is not measured (one pair at a time cannot load an
//! interface): it keeps its default.

use std::collections::BTreeMap;
use std::time::Instant;

use mpi::collective::{CommunicatorCollectives, Root};
use mpi::point_to_point::{Destination, Source};
use mpi::topology::{Communicator, SimpleCommunicator};
use topo_hierarchy::NetworkMap;
use topo_runtime::{Result, Topo};

use crate::model::{CostModel, Link, LinkClass, Points};

/// The ping-pong's message sizes and round trips per size: the first gives the latency,
/// the last the bandwidth, those between the links' points.
pub const SIZES: [(usize, usize); 7] = [
    (8, 2000),
    (1 << 10, 1000),
    (4 << 10, 1000),
    (16 << 10, 300),
    (64 << 10, 300),
    (256 << 10, 100),
    (1 << 20, 100),
];
/// An exchange of the largest size that takes more than this many times its one way
/// shows a half-duplex network.
const HALF_DUPLEX: f64 = 1.5;
/// The operands of the sum that no cache holds.
const HUGE: usize = 64 << 20;
/// The sums and copies timed on rank 0 (in cache).
const LARGE: usize = 1 << 20;

/// One-way times in microseconds at each of [`SIZES`].
pub type Times = [f64; SIZES.len()];

/// One pair's measurement: rank 0 and `peer`, through MPI or topo-run's shared memory.
#[derive(Debug, Clone, Copy)]
pub struct Pair {
    /// The other rank.
    pub peer: u32,
    /// The link class between rank 0 and it.
    pub class: LinkClass,
    /// One-way times at each size.
    pub times: Times,
    /// Both ranks sending the largest size to each other at once: the time until both
    /// have arrived, in microseconds (MPI's pairs only).
    pub exchange_us: Option<f64>,
    /// The same with the smallest size (MPI's pairs only).
    pub small_exchange_us: Option<f64>,
}

/// The link of one-way `times`: latency and bandwidth from the smallest and the largest
/// size, every size above the smallest as a point (times made non-decreasing: a median
/// below a smaller size's is noise), the bandwidth beyond the largest.
fn link_of(times: &Times) -> Link {
    let (first, last) = (SIZES[0].0, SIZES[SIZES.len() - 1].0);
    let bytes_per_us = (last - first) as f64 / (times[times.len() - 1] - times[0]).max(1e-3);
    let mut link = Link::new(
        (times[0] - first as f64 / bytes_per_us).max(0.0),
        bytes_per_us,
    );
    let mut floor = link.alpha_us;
    let between = SIZES[1..]
        .iter()
        .zip(&times[1..])
        .map(|(&(bytes, _), &t)| {
            floor = floor.max(t);
            (bytes as u64, floor)
        })
        .collect::<Vec<_>>();
    if let Ok(points) = Points::new(&between) {
        link.points = points;
    }
    link
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

/// The time of both ranks sending `bytes` to each other at once, rank 0 and `peer`: the
/// median of `iters` exchanges. Both ranks call it.
fn exchange(world: &SimpleCommunicator, peer: i32, bytes: usize, iters: usize) -> f64 {
    let me = world.rank();
    let out = vec![0u8; bytes];
    let mut buf = vec![0u8; bytes];
    let other = world.process_at_rank(if me == 0 { peer } else { 0 });
    let mut times = Vec::with_capacity(iters);
    for i in 0..iters + iters / 10 + 2 {
        let t0 = Instant::now();
        mpi::point_to_point::send_receive_into(&out[..], &other, &mut buf[..], &other);
        if i >= iters / 10 + 2 {
            times.push(t0.elapsed().as_secs_f64() * 1e6);
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

/// What the measurement found, at rank 0.
#[derive(Debug, Clone)]
pub struct Measured {
    /// The model the measurements give.
    pub model: CostModel,
    /// MPI's ping-pong between rank 0 and each other rank.
    pub pairs: Vec<Pair>,
    /// topo-run's shared memory between rank 0 and each rank of its node (empty when the
    /// step was not started by topo-run, or rank 0 is alone on its node).
    pub queues: Vec<Pair>,
    /// The one-way time of a chain of topo-run's 8-byte broadcasts on two ranks of one
    /// node, in microseconds (`None` on other steps).
    pub chain_us: Option<f64>,
}

/// topo-run's shared memory between rank 0 and each rank of its node, and on a step of
/// two ranks on one node the one-way time of topo-run's chained 8-byte broadcasts.
/// Collective over `world`.
fn measure_topo(world: &SimpleCommunicator, topo: &mut Topo) -> Result<(Vec<Pair>, Option<f64>)> {
    let mut queues: Vec<Pair> = Vec::new();
    for (i, &(bytes, iters)) in SIZES.iter().enumerate() {
        for (k, (peer, t)) in topo.queue_transfer(bytes, iters)?.into_iter().enumerate() {
            if i == 0 {
                queues.push(Pair {
                    peer,
                    class: LinkClass::Node,
                    times: [0.0; SIZES.len()],
                    exchange_us: None,
                    small_exchange_us: None,
                });
            }
            queues[k].times[i] = t;
        }
    }
    let mut on_one_node = [u8::from(topo.local().is_some_and(|(_, n)| n == 2))];
    world
        .process_at_rank(0)
        .broadcast_into(&mut on_one_node[..]);
    let chain = (world.size() == 2 && on_one_node[0] == 1 && topo.is_hierarchical()).then(|| {
        let mut buf = [0u64];
        let calls = 2000;
        for r in 0..100 {
            topo.broadcast_into(r % 2, &mut buf[..]);
        }
        median(
            (0..20)
                .map(|_| {
                    let t0 = Instant::now();
                    for r in 0..calls {
                        topo.broadcast_into(r % 2, &mut buf[..]);
                    }
                    t0.elapsed().as_secs_f64() * 1e6 / calls as f64
                })
                .collect(),
        )
    });
    Ok((queues, chain))
}

/// Measures on every rank of `world` (each must call it); rank 0 gets what it found, the
/// others `None`. With `topo` (a context of the step, started by topo-run), the classes
/// inside the node are those of topo-run's own shared memory.
pub fn measure(
    world: &SimpleCommunicator,
    map: Option<&NetworkMap>,
    topo: Option<&mut Topo>,
) -> Result<Option<Measured>> {
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
            let mut times = [0.0; SIZES.len()];
            for (t, &(bytes, iters)) in times.iter_mut().zip(&SIZES) {
                *t = ping_pong(world, peer, bytes, iters);
            }
            let (largest, iters) = SIZES[SIZES.len() - 1];
            let exchange_us = exchange(world, peer, largest, iters);
            let (smallest, iters) = SIZES[0];
            let small_exchange_us = exchange(world, peer, smallest, iters);
            if me == 0 {
                pairs.push(Pair {
                    peer: peer as u32,
                    class: class_of(peer),
                    times,
                    exchange_us: Some(exchange_us),
                    small_exchange_us: Some(small_exchange_us),
                });
            }
        }
    }
    sleepy_barrier(world);
    let (queues, chain_us) = match topo {
        Some(topo) => measure_topo(world, topo)?,
        None => (Vec::new(), None),
    };
    if me != 0 {
        return Ok(None);
    }
    // Copies and sums of LARGE bytes on this rank, and sums of HUGE.
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
    let (big_src, mut big_dst) = (vec![1.0f64; HUGE / 8], vec![0.0f64; HUGE / 8]);
    let memory_us = timed(5, || {
        for (d, s) in big_dst.iter_mut().zip(&big_src) {
            *d += *s;
        }
        std::hint::black_box(&mut big_dst);
    });
    let base = CostModel {
        copy_bytes_per_us: LARGE as f64 / copy_us,
        reduce_bytes_per_us: LARGE as f64 / reduce_us,
        reduce_memory_bytes_per_us: HUGE as f64 / memory_us,
        ..CostModel::default()
    };
    let model = fit(base, &pairs, &queues, chain_us);
    Ok(Some(Measured {
        model,
        pairs,
        queues,
        chain_us,
    }))
}

/// The model the measured pairs give, on top of `model` (its copy and reduce rates
/// measured, the rest the defaults): the links, the interface's bandwidth, duplex and
/// (half duplex) message hold, and from the chained broadcasts the call overhead.
fn fit(mut model: CostModel, pairs: &[Pair], queues: &[Pair], chain_us: Option<f64>) -> CostModel {
    // Per class, size by size, the fastest of its pairs. (Two ranks that share a core, as
    // ranks of emulated nodes on one host can, measure the scheduler's time slice instead
    // of the link.) Inside the node, topo-run's own shared memory where it was measured.
    let mut fastest: BTreeMap<LinkClass, Times> = BTreeMap::new();
    let mpi_pairs = pairs
        .iter()
        .filter(|p| p.class != LinkClass::Node || queues.is_empty());
    for p in queues.iter().chain(mpi_pairs) {
        let best = fastest.entry(p.class).or_insert(p.times);
        for (b, t) in best.iter_mut().zip(&p.times) {
            *b = b.min(*t);
        }
    }
    let measured: BTreeMap<LinkClass, Link> =
        fastest.iter().map(|(c, t)| (*c, link_of(t))).collect();
    for c in LinkClass::ALL {
        // The class itself, else the nearest measured one on the same side of the node
        // boundary, else the nearest at all.
        let near = measured
            .iter()
            .min_by_key(|(m, _)| {
                (
                    m.is_network() != c.is_network(),
                    (**m as i32 - c as i32).abs(),
                )
            })
            .map(|(_, l)| *l);
        if let Some(l) = near {
            // The per-message overhead is not measured here: the model's stays.
            let overhead_us = model.links[c as usize].overhead_us;
            model.links[c as usize] = Link { overhead_us, ..l };
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
    // The network's exchanges: full duplex takes about one way's time, half duplex two.
    // The fastest pair between nodes decides.
    let last = SIZES.len() - 1;
    if let Some((p, exchange)) = pairs
        .iter()
        .filter(|p| p.class.is_network())
        .filter_map(|p| Some((p, p.exchange_us?)))
        .min_by(|a, b| a.0.times[last].total_cmp(&b.0.times[last]))
    {
        model.nic_half_duplex = exchange > HALF_DUPLEX * p.times[last];
        // Half duplex: two small messages crossing take one way and the wait of the
        // second for the first, each message's hold on the interface.
        if model.nic_half_duplex
            && let Some(hold) = p.small_exchange_us.map(|x| x - p.times[0])
            && hold > model.nic_message_us
        {
            model.nic_message_us = hold;
        }
    }
    if let (Some(chain), Some(node)) = (chain_us, measured.get(&LinkClass::Node)) {
        model.call_us = (chain - node.one_way_us(SIZES[0].0 as u64)).max(0.0);
    }
    model
}

/// The model file, with the measurements in its comments.
pub fn file_text(m: &Measured) -> String {
    let sizes = SIZES
        .iter()
        .map(|&(b, _)| match b {
            b if b >= 1 << 20 => format!("{}M", b >> 20),
            b if b >= 1 << 10 => format!("{}K", b >> 10),
            b => b.to_string(),
        })
        .map(|s| format!(" {s:>8}"))
        .collect::<String>();
    let rows = |out: &mut String, pairs: &[Pair], what: &str| {
        for p in pairs {
            let times = p
                .times
                .iter()
                .map(|t| format!(" {t:>8.2}"))
                .collect::<String>();
            let exchange = match (p.small_exchange_us, p.exchange_us) {
                (Some(small), Some(large)) => format!("  (exchange {small:.2} / {large:.2})"),
                _ => String::new(),
            };
            out.push_str(&format!(
                "#   0-{:<5} {:<6} {what:<6}{times}{exchange}\n",
                p.peer,
                p.class.name()
            ));
        }
    };
    let mut out = format!(
        "# Measured by `topo-run simulate --calibrate`: one-way times in us (medians of round\n\
         # trips, halved) between rank 0 and each rank, by message size in bytes, and the\n\
         # times of both sending the smallest and the largest size to each other at once\n\
         # (`exchange`):\n\
         #   pair    class  path  {sizes}\n"
    );
    rows(&mut out, &m.pairs, "MPI");
    rows(&mut out, &m.queues, "queues");
    if m.queues.is_empty() {
        out.push_str(
            "# The classes inside a node are MPI's: the step was not started by topo-run\n\
             # (srun topo-run simulate --calibrate), or rank 0 is alone on its node.\n",
        );
    } else {
        out.push_str("# The classes inside a node are topo-run's queues.\n");
    }
    match m.chain_us {
        Some(chain) => out.push_str(&format!(
            "# topo-run's 8-byte broadcasts chained on the two ranks: {chain:.3} us a call; less\n\
             # the queue's one way, the call overhead.\n"
        )),
        None => out.push_str(
            "# The call overhead is the default: it is measured on a step of two ranks on one\n\
             # node started by topo-run.\n",
        ),
    }
    out.push_str("# Classes not measured take the nearest measured class's values.\n");
    out.push_str(&m.model.to_text());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_half_duplex_network_holds_the_interface_for_what_a_small_exchange_takes_beyond_one_way() {
        // Two emulated nodes: 3.5 us one way for 8 bytes, 107 us for 1 MiB.
        let times = [3.5, 4.0, 5.0, 8.0, 23.0, 30.0, 107.0];
        let pair = |large: f64, small: f64| Pair {
            peer: 1,
            class: LinkClass::World,
            times,
            exchange_us: Some(large),
            small_exchange_us: Some(small),
        };
        // Half duplex (1 MiB both ways takes twice one way): 8 bytes both ways take 5.3 us,
        // 1.8 us beyond the one way.
        let half = fit(CostModel::default(), &[pair(214.0, 5.3)], &[], None);
        assert!(half.nic_half_duplex);
        assert!((half.nic_message_us - 1.8).abs() < 1e-9, "{half:?}");
        // Full duplex: the message rate keeps its default, whatever the small exchange.
        let full = fit(CostModel::default(), &[pair(110.0, 5.3)], &[], None);
        assert!(!full.nic_half_duplex);
        assert_eq!(full.nic_message_us, CostModel::default().nic_message_us);
        // Half duplex, a small exchange within the one way: the default stays too.
        let quick = fit(CostModel::default(), &[pair(214.0, 3.4)], &[], None);
        assert!(quick.nic_half_duplex);
        assert_eq!(quick.nic_message_us, CostModel::default().nic_message_us);
    }

    #[test]
    fn a_links_ends_give_latency_and_bandwidth_and_the_sizes_between_its_points() {
        // 0.5 us + 1 GB/s at the ends; a bump at 4 KiB that 16 KiB's median undercuts.
        let times = [0.508, 2.0, 6.0, 5.0, 70.0, 300.0, 1049.076];
        let l = link_of(&times);
        assert!((l.bytes_per_us - 1000.0).abs() < 1e-6, "{l:?}");
        assert!((l.alpha_us - 0.5).abs() < 1e-9, "{l:?}");
        let points = l.points.as_slice();
        assert_eq!(points.len(), SIZES.len() - 1);
        assert_eq!(points[0], (1024, 2.0));
        // Not decreasing: 16 KiB takes 4 KiB's time.
        assert_eq!(points[2], (16 << 10, 6.0));
        assert!(
            (l.one_way_us(8) - times[0]).abs() < 0.01,
            "{}",
            l.one_way_us(8)
        );
        assert_eq!(l.one_way_us(64 << 10), 70.0);
        assert!((l.one_way_us(1 << 20) - times[6]).abs() < 1e-6);
    }
}
