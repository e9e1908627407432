//! Nonblocking collectives, after NumGRID: each call builds a [`Schedule`] of steps over
//! the plan's levels (local roots gather from their groups, then talk to the level
//! above) and returns at once; the [`Engine`] advances schedules whenever the application
//! tests or waits on any request.
//!
//! Schedules run one after another, in the order they were started. Every rank starts
//! collectives in the same order (MPI requires it), so the messages between any two ranks
//! come in the same order on both sides, which the shared-memory queues rely on.
//!
//! Per level the schedules use the configured algorithm's tree: flat or k-nomial
//! (scatter-allgather and reduce-scatter-gather become binomial trees, the ring top
//! allreduce becomes recursive doubling). Messages are not pipelined across levels. The
//! Allreduce's flat forms (`ring`, `rabenseifner`) and the flat Allgathers run over every
//! rank as they do when blocking: the blocking call runs the same schedule.

pub mod iallgather;
pub mod iallgatherv;
pub mod iallreduce;
pub mod ialltoall;
pub mod ibarrier;
pub mod ibcast;
pub mod igather;
pub mod ireduce;
pub mod ireduce_scatter;
pub mod iscan;
pub mod iscatter;
// Unsafe: a schedule addresses its regions of the lent buffers as raw parts.
#[allow(unsafe_code)]
pub mod schedule;

use std::collections::VecDeque;
use std::ops::Range;

use topo_hierarchy::settings::{BcastAlg, ReduceAlg};

pub use schedule::{Action, Buf, Builder, Link, Reach, Region, Schedule, Shape};

use crate::error::Result;
use crate::transport::Fabric;
use crate::tree;

/// The schedules in flight on one rank, oldest first.
#[derive(Debug, Default)]
pub struct Engine {
    queue: VecDeque<(u64, Schedule)>,
    /// Steps completed or moved so far (see [`Engine::moves`]).
    moves: u64,
    /// Accumulators and scratch of completed schedules, for the next ones: a fresh large
    /// allocation costs page faults on every call.
    pool: Vec<Vec<u8>>,
    /// Steps of completed schedules by shape, most recent last, with the sizes of the
    /// accumulator and scratch they use.
    steps: Vec<(Shape, Builder, usize, usize)>,
}

/// Buffers kept for reuse, and the largest one kept.
const POOL_BUFFERS: usize = 4;
const POOL_MAX_BYTES: usize = 64 << 20;
/// Shapes whose steps are kept for reuse (a program's few hot calls).
const KEPT_SHAPES: usize = 8;

impl Engine {
    /// Queues schedule `id` (ids grow with every call) and starts it if nothing is ahead:
    /// sends its data and posts its network transfers ([`Reach::Start`]); receiving and
    /// combining wait for the next call.
    pub fn start(&mut self, id: u64, s: Schedule, fabric: &mut dyn Fabric) -> Result<()> {
        self.queue.push_back((id, s));
        self.progress(fabric, Reach::Start)
    }

    /// Advances the schedules as far as they go without waiting, running the steps within
    /// `reach`.
    pub fn progress(&mut self, fabric: &mut dyn Fabric, reach: Reach) -> Result<()> {
        while let Some((_, s)) = self.queue.front_mut() {
            if !s.poll(fabric, reach, &mut self.moves)? {
                return Ok(());
            }
            if let Some((_, s)) = self.queue.pop_front() {
                let (acc, tmp, steps) = s.into_parts();
                if let Some((shape, b)) = steps {
                    if self.steps.len() == KEPT_SHAPES {
                        self.steps.remove(0);
                    }
                    self.steps.push((shape, b, acc.len(), tmp.len()));
                }
                for v in [acc, tmp] {
                    if v.capacity() > 0
                        && v.capacity() <= POOL_MAX_BYTES
                        && self.pool.len() < POOL_BUFFERS
                    {
                        self.pool.push(v);
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether nothing with this `id` is in flight (schedule `id` has completed).
    pub fn is_done(&self, id: u64) -> bool {
        !self.queue.iter().any(|(i, _)| *i == id)
    }

    /// A buffer of `len` bytes for a new schedule's accumulator or scratch, reused from a
    /// completed schedule when one is large enough (its old contents stay: initialised
    /// bytes that the new schedule overwrites before it reads them).
    pub fn buffer(&mut self, len: usize) -> Vec<u8> {
        if len == 0 {
            return Vec::new();
        }
        match self.pool.iter().position(|v| v.capacity() >= len) {
            Some(i) => {
                let mut v = self.pool.swap_remove(i);
                // Shrinking keeps the bytes; only growth is filled.
                v.resize(len, 0);
                v
            }
            None => vec![0; len],
        }
    }

    /// The steps of a completed schedule of the shape `head` with the blocks `parts`
    /// ([`Shape::is`]), ready to run again, with their shape and the sizes of its
    /// accumulator and scratch.
    pub fn reuse(
        &mut self,
        head: &Shape,
        parts: &[&[Range<usize>]],
    ) -> Option<(Shape, Builder, usize, usize)> {
        let i = self.steps.iter().rposition(|(s, ..)| s.is(head, parts))?;
        Some(self.steps.remove(i))
    }

    /// How many steps have completed or moved data so far: a poll that leaves it
    /// unchanged made no progress.
    pub fn moves(&self) -> u64 {
        self.moves
    }

    /// Whether no schedule is in flight.
    pub fn is_idle(&self) -> bool {
        self.queue.is_empty()
    }

    /// The collective at the head of the queue, for messages.
    pub fn current(&self) -> Option<&'static str> {
        self.queue.front().map(|(_, s)| s.name())
    }

    /// Fails if a peer the oldest schedule waits on has died.
    pub fn check_peers(&mut self, fabric: &mut dyn Fabric) -> Result<()> {
        match self.queue.front_mut() {
            Some((_, s)) => s.check_peers(fabric),
            None => Ok(()),
        }
    }
}

/// Parent and children of `me` in a broadcast over a group of `n` rooted at `root`.
pub(crate) fn bcast_shape(
    alg: BcastAlg,
    me: usize,
    root: usize,
    n: usize,
) -> (Option<usize>, Vec<usize>) {
    match alg {
        BcastAlg::Flat => tree::flat(me, root, n),
        BcastAlg::Knomial(k) => tree::knomial(me, root, n, k as usize),
        BcastAlg::ScatterAllgather => tree::knomial(me, root, n, 2),
    }
}

/// Parent and children of `me` in a reduction over a group of `n` rooted at `root`.
pub(crate) fn reduce_shape(
    alg: ReduceAlg,
    me: usize,
    root: usize,
    n: usize,
) -> (Option<usize>, Vec<usize>) {
    match alg {
        ReduceAlg::Flat => tree::flat(me, root, n),
        ReduceAlg::Knomial(k) => tree::knomial(me, root, n, k as usize),
        ReduceAlg::ReduceScatterGather => tree::knomial(me, root, n, 2),
    }
}
