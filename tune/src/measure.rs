//! Timing candidates against each other: one topo-run context per candidate setting, all
//! alive at once, taking turns, so that the machine's drift and the history of earlier
//! calls fall on all of them alike.

use std::time::Instant;

use mpi::Count;
use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
use mpi::topology::{Communicator, SimpleCommunicator};
use topo_runtime::Topo;

use crate::space::Op;

/// Where the buffers start in their page. An application's buffers may start anywhere: 16
/// bytes in is where glibc puts every block it maps on its own, 2064 the middle of a page.
/// Each candidate is timed at both, alternately, and judged by the mean of the two
/// medians, so that none wins on one alignment alone. (On the dev cluster the two
/// offsets time within 3 % of each other; benchmarks/records.md.)
const OFFSETS: [usize; 2] = [16, 2064];
const PAGE: usize = 4096;

/// Calls of each candidate before any is timed, and then calls timed to size the blocks.
const WARMUP_CALLS: usize = 3;
const PROBE_CALLS: usize = 8;
/// Untimed calls at the start of each block.
const REWARM_CALLS: usize = 2;
/// A block's timed calls take about this long (microseconds), and number at least and at
/// most these.
const BLOCK_US: f64 = 1000.0;
const MIN_BLOCK: usize = 3;
const MAX_BLOCK: usize = 1000;
/// Blocks per candidate, at least and at most.
const MIN_BLOCKS: usize = 4;
const MAX_BLOCKS: usize = 200;

/// Topo-run contexts for candidate settings, numbered apart from the application's.
pub struct Contexts<'w> {
    world: &'w SimpleCommunicator,
    next_instance: u32,
}

impl std::fmt::Debug for Contexts<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Contexts")
            .field("next_instance", &self.next_instance)
            .finish()
    }
}

impl<'w> Contexts<'w> {
    pub fn new(world: &'w SimpleCommunicator) -> Self {
        // Instance 0 is `Topo::from_env`'s.
        Contexts {
            world,
            next_instance: 1,
        }
    }

    /// A context with exactly these settings (collective). `None` when it fell back to
    /// MPI's collectives (its shared memory could not be set up, say): such a candidate is
    /// not one topo-run could run.
    pub fn open(&mut self, settings: &[(String, String)]) -> anyhow::Result<Option<Topo>> {
        let instance = self.next_instance;
        self.next_instance += 1;
        let topo = Topo::from_env_with_settings(self.world, instance, settings)?;
        Ok(topo.fallback().is_none().then_some(topo))
    }
}

/// Runs `op` on `a` and `b` (as `f32`, root 0, sum) on `topo`; an allgather gathers
/// `a.len() / size` elements from each of the `size` ranks into `b`.
fn call(topo: &mut Topo, op: Op, rank: i32, size: usize, a: &mut [f32], b: &mut [f32]) {
    let sum = SystemOperation::sum();
    match op {
        Op::Bcast => topo.broadcast_into(0, a),
        Op::Reduce if rank == 0 => topo.reduce_into_root(a, b, sum),
        Op::Reduce => topo.reduce_into(0, a, sum),
        Op::Allreduce => topo.all_reduce_into(a, b, sum),
        Op::Allgather => {
            let k = a.len() / size;
            topo.all_gather_into(&a[..k], &mut b[..k * size]);
        }
        Op::Alltoall => {
            let all = a.len() / size * size;
            topo.all_to_all_into(&a[..all], &mut b[..all]);
        }
        Op::ReduceScatter => {
            let k = a.len() / size;
            topo.reduce_scatter_block_into(&a[..k * size], &mut b[..k], sum);
        }
        Op::Gatherv | Op::Scatterv => {
            let k = a.len() / size;
            let counts = vec![k as Count; size];
            let displs: Vec<Count> = (0..size).map(|r| (r * k) as Count).collect();
            match (op, rank) {
                (Op::Gatherv, 0) => {
                    topo.gather_varcount_into_root(&a[..k], &mut b[..k * size], &counts, &displs)
                }
                (Op::Gatherv, _) => topo.gather_varcount_into(0, &a[..k]),
                (_, 0) => {
                    topo.scatter_varcount_into_root(&a[..k * size], &counts, &displs, &mut b[..k])
                }
                _ => topo.scatter_varcount_into(0, &mut b[..k]),
            }
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::INFINITY,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The time of `op` on `bytes` for each candidate (`None`: not runnable, infinite time):
/// the median over calls of the slowest rank's time, in microseconds, averaged over the
/// buffer offsets of [`OFFSETS`] (one per round of blocks, in turn).
///
/// Candidates take turns in blocks of about a millisecond of calls, in a rotating order,
/// the first calls of each block untimed: each candidate runs with its own memory warm, as
/// in an application that uses one setting, while the machine's drift falls on all alike.
/// (Alternating call by call would charge every candidate for the cache misses the
/// others cause, and favour those with small queues.) The blocks fill about `seconds`
/// per candidate. Counts are agreed over ranks, so every rank makes the same calls.
pub fn compare(
    world: &SimpleCommunicator,
    cands: &mut [Option<Topo>],
    op: Op,
    bytes: usize,
    seconds: f64,
) -> Vec<f64> {
    let rank = world.rank();
    let size = world.size() as usize;
    // An allgather's `bytes` are the gathered result: at least one element per rank.
    let n = match op {
        Op::Allgather | Op::Alltoall | Op::ReduceScatter | Op::Gatherv | Op::Scatterv => {
            (bytes / 4).max(size)
        }
        _ => (bytes / 4).max(1),
    };
    // The buffers, at each offset of OFFSETS from a page boundary in turn.
    let page = PAGE / 4;
    let mut a0 = vec![rank as f32 + 1.0; n + 2 * page];
    let mut b0 = vec![0f32; n + 2 * page];
    let start = |v: &[f32]| (page - (v.as_ptr() as usize % PAGE) / 4) % page;
    let (sa, sb) = (start(&a0), start(&b0));
    let mut calls = |topo: &mut Topo, at: usize, count: usize, times: Option<&mut Vec<f64>>| {
        let mut times = times;
        let (oa, ob) = (sa + OFFSETS[at] / 4, sb + OFFSETS[at] / 4);
        let (a, b) = (&mut a0[oa..oa + n], &mut b0[ob..ob + n]);
        for _ in 0..count {
            world.barrier();
            let t0 = Instant::now();
            call(topo, op, rank, size, a, b);
            let dt = t0.elapsed().as_secs_f64() * 1e6;
            if let Some(t) = times.as_deref_mut() {
                t.push(dt);
            }
        }
    };
    // Warm-up, which also tells how long a call takes, alone and with its barrier.
    let mut cost = vec![0.0f64; 2 * cands.len()];
    for (c, topo) in cands.iter_mut().enumerate() {
        if let Some(topo) = topo {
            calls(topo, 0, WARMUP_CALLS, None);
            let mut t = Vec::new();
            let t0 = Instant::now();
            calls(topo, 0, PROBE_CALLS, Some(&mut t));
            cost[2 * c] = median(&mut t);
            cost[2 * c + 1] = t0.elapsed().as_secs_f64() * 1e6 / PROBE_CALLS as f64;
        }
    }
    let mut agreed = vec![0.0f64; cost.len()];
    world.all_reduce_into(&cost[..], &mut agreed[..], SystemOperation::max());
    let live: Vec<usize> = (0..cands.len()).filter(|&c| cands[c].is_some()).collect();
    // Timed calls per block: about BLOCK_US of them.
    let per_block: Vec<usize> = (0..cands.len())
        .map(|c| ((BLOCK_US / agreed[2 * c].max(0.01)) as usize).clamp(MIN_BLOCK, MAX_BLOCK))
        .collect();
    // What a round of blocks really takes, barriers and untimed calls included.
    let round_us: f64 = live
        .iter()
        .map(|&c| (per_block[c] + REWARM_CALLS) as f64 * agreed[2 * c + 1])
        .sum();
    let wanted = seconds * 1e6 * live.len() as f64 / round_us.max(1.0);
    let blocks = (wanted as usize).clamp(MIN_BLOCKS, MAX_BLOCKS);
    // times[offset][candidate]
    let mut times: Vec<Vec<Vec<f64>>> = vec![vec![Vec::new(); cands.len()]; OFFSETS.len()];
    for r in 0..blocks {
        for j in 0..live.len() {
            let c = live[(j + r) % live.len()];
            let topo = cands[c].as_mut().expect("live candidates are open");
            let o = r % OFFSETS.len();
            calls(topo, o, REWARM_CALLS, None);
            calls(topo, o, per_block[c], Some(&mut times[o][c]));
        }
    }
    // The mean over offsets of the median of the slowest rank.
    let mut out = vec![0.0; cands.len()];
    for per_offset in times {
        for (c, mine) in per_offset.into_iter().enumerate() {
            if mine.is_empty() {
                out[c] = f64::INFINITY;
                continue;
            }
            let mut slowest = vec![0.0; mine.len()];
            world.all_reduce_into(&mine[..], &mut slowest[..], SystemOperation::max());
            out[c] += median(&mut slowest) / OFFSETS.len() as f64;
        }
    }
    out
}

/// Rank 0's seconds since `start`, the same on every rank.
pub fn agreed_elapsed(world: &SimpleCommunicator, start: Instant) -> f64 {
    let mut e = start.elapsed().as_secs_f64();
    world.process_at_rank(0).broadcast_into(&mut e);
    e
}
