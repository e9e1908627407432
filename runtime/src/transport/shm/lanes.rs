//! A node's lanes: queues that contexts share, claimed for one blocking collective at a
//! time, so that any number of live contexts fits in a fixed amount of shared memory.
//!
//! Each process gives at most `TOPO_RUN_MAX_COMMS` contexts a segment of their own
//! (`ShmTransport`'s queues, sized for the context's ranks on the node). A context beyond
//! that uses the node's lanes instead: `lanes` segments of world's layout (one queue per
//! local rank of the node, so any context's ranks fit), set up with world's segment and
//! removed by name at once, and a board of one cache line per lane and per context:
//!
//! ```text
//! board    line 0: number of lanes
//!          line 1 + j: lane j's owner (0: free, else its context's record + 1) and
//!                      how many members have finished with it
//!          line 1 + MAX_LANES + r: context record r: members that hold it (0: free),
//!                      the last decision (call << 16 | lane, NO_LANE: none), and how
//!                      many members other than the leader have read it
//! lane j   a segment of world's layout
//! ```
//!
//! At its setup a context's node leader (its lowest rank on the node) claims a record and
//! the members learn its index over MPI. At each blocking collective the leader waits
//! until every member has read its previous decision, claims a free lane (a
//! compare-and-swap of its owner word) and publishes the call's decision; the others wait
//! for it. With a lane, the node's steps go through its queues; with none free, over
//! MPI's point-to-point, so no rank ever waits for a lane another context holds (a
//! context holding one may be waiting for this rank). Every member counts itself out of
//! the lane at the end of the collective; the last one zeroes the barrier counts, and
//! frees the lane. Its control words are zero already: every fragment was read.
//!
//! A blocking collective may synchronize its members (the MPI standard lets it; a
//! correct program cannot rely on the opposite), so these waits cannot make a legal
//! program hang. Nonblocking collectives on such contexts never claim a lane.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::layout::{Layout, SIGNAL_ROUNDS};
use super::segment::Segment;
use crate::error::Result;

pub use topo_hierarchy::settings::{DEFAULT_LANES, LANES_ENV, MAX_LANES, lanes_wanted};

/// Context records per node: the most live contexts beyond the cap a node serves with its
/// lanes (each node leader of such a context holds one).
pub const RECORDS: usize = 4096;

const LINE: usize = 64;
const FREE: u64 = 0;
/// The lane part of a decision that says "no lane".
const NO_LANE: u64 = 0xffff;
const LANE_MASK: u64 = 0xffff;

/// The board's layout: one queue of one slot holding its lines.
fn board_layout() -> Layout {
    Layout::new(1, 1, (1 + MAX_LANES + RECORDS) * LINE)
}

/// A node's lanes, mapped.
#[derive(Debug)]
pub struct Pool {
    board: Segment,
    lanes: Vec<Arc<Segment>>,
}

fn board_path(prefix: &str) -> String {
    format!("{prefix}.board")
}

fn lane_path(prefix: &str, j: usize) -> String {
    format!("{prefix}.lane{j}")
}

impl Pool {
    /// Creates the board and `lanes` lanes of `layout` at `prefix` (the node leader).
    pub fn create(prefix: &str, layout: Layout, node_plan: u64, lanes: usize) -> Result<Pool> {
        let board = Segment::create(&board_path(prefix), board_layout(), node_plan)?;
        let pool = (|| {
            board.reserve_queue(0)?;
            let mut made = Vec::with_capacity(lanes);
            for j in 0..lanes {
                match Segment::create(&lane_path(prefix, j), layout, node_plan) {
                    Ok(seg) => made.push(Arc::new(seg)),
                    Err(e) => {
                        for seg in &made {
                            let _ = seg.unlink();
                        }
                        return Err(e);
                    }
                }
            }
            Ok(made)
        })();
        match pool {
            Ok(lanes) => {
                // SYNC: Relaxed; the others read it after the MPI agreement that ends
                // creation.
                board
                    .atomic_u64(board.layout().data(0, 0))
                    .store(lanes.len() as u64, Ordering::Relaxed);
                Ok(Pool { board, lanes })
            }
            Err(e) => {
                let _ = board.unlink();
                Err(e)
            }
        }
    }

    /// Attaches to the board and lanes the node leader created at `prefix`.
    pub fn attach(prefix: &str, layout: Layout, node_plan: u64) -> Result<Pool> {
        let board = Segment::attach(&board_path(prefix), board_layout(), node_plan)?;
        let n = board
            .atomic_u64(board.layout().data(0, 0))
            .load(Ordering::Relaxed) as usize;
        let lanes = (0..n.min(MAX_LANES))
            .map(|j| Segment::attach(&lane_path(prefix, j), layout, node_plan).map(Arc::new))
            .collect::<Result<Vec<_>>>()?;
        Ok(Pool { board, lanes })
    }

    /// Reserves local rank `r`'s queue in every lane (its pages from this rank's NUMA
    /// node).
    pub fn reserve(&self, r: usize) -> Result<()> {
        self.lanes.iter().try_for_each(|l| l.reserve_queue(r))
    }

    /// Removes the names of the board and the lanes (mappings stay valid).
    pub fn unlink(&self) -> Result<()> {
        self.lanes
            .iter()
            .try_for_each(|l| l.unlink())
            .and(self.board.unlink())
    }

    /// The number of lanes.
    pub fn lanes(&self) -> usize {
        self.lanes.len()
    }

    /// Lane `j`'s segment.
    pub fn lane(&self, j: usize) -> &Arc<Segment> {
        &self.lanes[j]
    }

    /// Bytes of shared memory the pool holds: the board and every lane.
    pub fn bytes(&self) -> usize {
        self.board.layout().total() + self.lanes.iter().map(|l| l.layout().total()).sum::<usize>()
    }

    fn word(&self, line: usize, i: usize) -> &AtomicU64 {
        self.board
            .atomic_u64(self.board.layout().data(0, 0) + line * LINE + 8 * i)
    }

    fn owner(&self, j: usize) -> &AtomicU64 {
        self.word(1 + j, 0)
    }

    fn done(&self, j: usize) -> &AtomicU64 {
        self.word(1 + j, 1)
    }

    fn refs(&self, r: usize) -> &AtomicU64 {
        self.word(1 + MAX_LANES + r, 0)
    }

    fn decision(&self, r: usize) -> &AtomicU64 {
        self.word(1 + MAX_LANES + r, 1)
    }

    fn seen(&self, r: usize) -> &AtomicU64 {
        self.word(1 + MAX_LANES + r, 2)
    }

    /// Claims a free context record for a context with `members` ranks on this node (its
    /// node leader, at setup; publish the index to the others over MPI). `None`: all are
    /// taken.
    pub fn claim_record(&self, members: usize) -> Option<usize> {
        (0..RECORDS).find(|&r| {
            // SYNC: Acquire pairs with the Release of the last holder's `leave_record`,
            // after which nobody reads the record's words.
            let ok = self
                .refs(r)
                .compare_exchange(FREE, members as u64, Ordering::Acquire, Ordering::Relaxed)
                .is_ok();
            if ok {
                // SYNC: Relaxed; the members learn the record over MPI, after these.
                self.decision(r).store(0, Ordering::Relaxed);
                self.seen(r).store(0, Ordering::Relaxed);
            }
            ok
        })
    }

    /// Gives record `r` back at once, unused (its context is not set up on the lanes
    /// after all): no member holds it yet.
    pub fn abandon_record(&self, r: usize) {
        // SYNC: Release, as in `leave_record`.
        self.refs(r).store(FREE, Ordering::Release);
    }

    /// One member has done with record `r` (its context is gone); the last frees it.
    pub fn leave_record(&self, r: usize) {
        // SYNC: Release: this member's reads of the record happen before a new claim.
        self.refs(r).fetch_sub(1, Ordering::Release);
    }

    /// The node leader's decision for call `call` (counted from 1) of the context with
    /// record `r` and `members` ranks on the node: the lane it claimed, or `None` with
    /// none free. Waits, calling `alive` now and then, until every other member has read
    /// the previous call's decision.
    pub fn decide(
        &self,
        r: usize,
        call: u64,
        members: usize,
        spin: u32,
        mut alive: impl FnMut() -> Result<()>,
    ) -> Result<Option<usize>> {
        if call > 1 {
            let mut backoff = crate::backoff::Backoff::new(spin);
            // SYNC: Acquire pairs with the members' Release increments.
            while self.seen(r).load(Ordering::Acquire) < members as u64 - 1 {
                if backoff.pause() {
                    alive()?;
                }
            }
        }
        // SYNC: Relaxed: nobody reads `seen` before the Release store of the decision.
        self.seen(r).store(0, Ordering::Relaxed);
        let lane = (0..self.lanes.len()).find(|&j| {
            // SYNC: Acquire pairs with the Release that freed the lane: its zeroed counts
            // and drained queues are seen by this rank, and through the decision's
            // Release by the members.
            self.owner(j)
                .compare_exchange(FREE, r as u64 + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        });
        let word = call << 16 | lane.map_or(NO_LANE, |j| j as u64);
        // SYNC: Release publishes the claim; `learn`'s Acquire pairs with it.
        self.decision(r).store(word, Ordering::Release);
        Ok(lane)
    }

    /// A member's wait for the node leader's decision for call `call` of the context with
    /// record `r` ([`Pool::decide`]).
    pub fn learn(
        &self,
        r: usize,
        call: u64,
        spin: u32,
        mut alive: impl FnMut() -> Result<()>,
    ) -> Result<Option<usize>> {
        let mut backoff = crate::backoff::Backoff::new(spin);
        let word = loop {
            // SYNC: Acquire pairs with the leader's Release in `decide`.
            let w = self.decision(r).load(Ordering::Acquire);
            if w >> 16 == call {
                break w;
            }
            if backoff.pause() {
                alive()?;
            }
        };
        // SYNC: Release: this member has read the decision (the leader's Acquire load).
        self.seen(r).fetch_add(1, Ordering::Release);
        let lane = word & LANE_MASK;
        Ok((lane != NO_LANE).then_some(lane as usize))
    }

    /// A member of a collective on lane `j`, among `members` on the node, has finished
    /// with it (every message it sent has been read, every one to it taken); `signaled`:
    /// it counted barrier rounds in its signal line. The last to finish zeroes the
    /// barrier counts, if anyone counted, and frees the lane.
    pub fn release(&self, j: usize, members: usize, signaled: bool) {
        // The low half counts the members done, the high half those that signaled.
        let mine = 1 | u64::from(signaled) << 32;
        // SYNC: AcqRel: the last member sees every member's use of the lane.
        let before = self.done(j).fetch_add(mine, Ordering::AcqRel);
        if (before & 0xffff_ffff) + 1 < members as u64 {
            return;
        }
        if (before | mine) >> 32 != 0 {
            let lane = &self.lanes[j];
            let l = *lane.layout();
            for m in 0..members {
                for round in 0..SIGNAL_ROUNDS {
                    // SYNC: Relaxed; published by the Release store of the owner below.
                    lane.atomic_u64(l.signal(m, round))
                        .store(0, Ordering::Relaxed);
                }
            }
        }
        self.done(j).store(0, Ordering::Relaxed);
        // SYNC: Release: the next claimer's Acquire sees the lane as left here.
        self.owner(j).store(FREE, Ordering::Release);
    }

    /// Whether lane `j` is free (for tests and statistics).
    pub fn is_free(&self, j: usize) -> bool {
        self.owner(j).load(Ordering::Acquire) == FREE
    }
}
