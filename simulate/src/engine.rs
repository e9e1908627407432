//! The discrete-event simulation: every rank runs its program in virtual time, a round
//! starting when the one before has completed, as the runtime's schedules run.
//!
//! - Every rank starts its first round after the model's `call` overhead.
//! - A send starts with its round; one that leaves the node first waits for the node's
//!   network interface, which carries one message at a time (at the model's `nic`
//!   bandwidth, and for at least the time per message its message rate gives); the
//!   receiving node's interface takes it in the same way (with `duplex=half` both ends
//!   share one queue; with full duplex the receiving side takes each message in the
//!   earliest free stretch of its time at or after the message's arrival, whatever order
//!   the simulation meets the messages in, as an interface takes whatever reaches it). It
//!   arrives `alpha + bytes / bandwidth` after it starts, by the class of the link between
//!   the two ranks, and the sender is busy for `bytes / bandwidth`.
//! - Each end of a message spends its class's `overhead` (LogP's `o`) of its core on it,
//!   out of the `alpha`: a rank posts the sends of a round one after another, `o` each,
//!   and a message leaves when posted; the receiver's core takes `o` once it has arrived.
//!   A lone message takes `alpha + bytes / bandwidth` as before; a root that sends to or
//!   receives from many ranks in one round pays `o` per message.
//! - A receive completes when its message has arrived and the receiver's core has taken
//!   it (and, if combined, `bytes / reduce` later). Messages between two ranks are matched
//!   in the order they were sent, as MPI and the shared-memory queues match them.
//! - A local copy takes `bytes / copy`, a local combine `bytes / reduce` (at the memory
//!   rate beyond the model's cache size).
//! - A rank has one core: the combines, copies and receive overheads of a round run one
//!   after the other, after its sends are posted, in the order their data became ready (a root that combines many children's messages in
//!   one round takes the sum of their combines, not the longest).
//!
//! Events are processed in time order (a binary heap), so the simulation costs
//! `O(steps log ranks)` time and memory linear in the ranks and steps (16 bytes a step,
//! about 100 a rank).

use std::cmp::{Ordering, Reverse};
use std::collections::{BTreeMap, BinaryHeap};

use crate::model::{CostModel, LinkClass};
use crate::place::Places;
use crate::program::{Kind, Programs};

/// Messages and bytes over one link class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Traffic {
    /// Messages.
    pub messages: u64,
    /// Bytes.
    pub bytes: u64,
}

/// What a simulation predicts.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Outcome {
    /// When the last rank finished, in microseconds.
    pub time_us: f64,
    /// Traffic per link class.
    pub traffic: BTreeMap<LinkClass, Traffic>,
}

/// A simulation that cannot finish: the programs do not match.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A rank waits for a message nobody sends.
    #[error("rank {rank} waits in round {round} for a message from rank {from} that never comes")]
    Deadlock {
        /// The waiting rank.
        rank: u32,
        /// Its round.
        round: usize,
        /// The sender it waits for.
        from: u32,
    },
    /// A message's size is not what its receiver expects.
    #[error("rank {to} expects {want} bytes from rank {from} and gets {got}")]
    Size {
        /// Sender.
        from: u32,
        /// Receiver.
        to: u32,
        /// Bytes expected.
        want: u64,
        /// Bytes sent.
        got: u64,
    },
    /// A step names a rank outside the job.
    #[error("rank {rank} names rank {peer}, outside a job of {size}")]
    Peer {
        /// The rank whose program it is.
        rank: u32,
        /// The rank it names.
        peer: u32,
        /// The job's size.
        size: usize,
    },
}

/// A time, ordered (never NaN: built from finite model values).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Time(f64);

impl Eq for Time {}

impl PartialOrd for Time {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Time {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// The stretches of time an interface is busy: disjoint, by their start, touching ones
/// joined.
#[derive(Debug, Default)]
struct Calendar {
    busy: BTreeMap<Time, f64>,
}

impl Calendar {
    /// Books the earliest free stretch of `hold` microseconds that starts at `from` or
    /// later; returns its start.
    fn take(&mut self, from: f64, hold: f64) -> f64 {
        let mut start = from;
        if let Some((_, &end)) = self.busy.range(..=Time(start)).next_back() {
            start = start.max(end);
        }
        for (&Time(s), &end) in self.busy.range(Time(start)..) {
            if s >= start + hold {
                break;
            }
            start = start.max(end);
        }
        let mut at = start;
        let mut until = start + hold;
        // Join the stretch that ends where this one starts, and the one that starts where
        // it ends.
        if let Some((&Time(s), &end)) = self.busy.range(..=Time(at)).next_back()
            && end >= at
        {
            self.busy.remove(&Time(s));
            at = s;
        }
        if let Some(end) = self.busy.remove(&Time(until)) {
            until = until.max(end);
        }
        self.busy.insert(Time(at), until);
        start
    }
}

/// A receive still waiting for its message.
#[derive(Debug, Clone, Copy)]
struct Waiting {
    from: u32,
    bytes: u64,
    combine: bool,
}

/// A message sent and not yet received.
#[derive(Debug, Clone, Copy)]
struct Message {
    from: u32,
    arrival: f64,
    bytes: u64,
    /// The receiver's overhead for it (its class's).
    overhead: f64,
}

/// A rank's progress.
#[derive(Debug, Default)]
struct Rank {
    /// The round in progress (or next to start).
    round: usize,
    /// When it started.
    start: f64,
    /// When its core has posted the round's sends so far (from `start`, `o` a send).
    posted: f64,
    /// When its steps have completed so far (local work aside).
    done: f64,
    /// The local work of the round so far (combines, copies): when each can start, and
    /// how long it takes. One core does it, one piece after the other.
    local: Vec<(f64, f64)>,
    /// Its receives still waiting, in program order.
    waiting: Vec<Waiting>,
    /// Messages that arrived for it before it asked for them, in sending order.
    inbox: Vec<Message>,
    /// When the rank finished its program.
    finished: Option<f64>,
}

/// Runs `programs` on the ranks of `places` under `model`.
pub fn run(programs: &Programs, places: &Places, model: &CostModel) -> Result<Outcome, SimError> {
    let n = programs.len();
    for r in 0..n as u32 {
        for step in programs.steps_of(r) {
            let remote = matches!(step.kind, Kind::Send | Kind::Recv | Kind::RecvCombine);
            if remote && step.peer as usize >= n {
                return Err(SimError::Peer {
                    rank: r,
                    peer: step.peer,
                    size: n,
                });
            }
        }
    }
    let mut sim = Sim {
        programs,
        places,
        model,
        ranks: (0..n).map(|_| Rank::default()).collect(),
        nic_free: vec![0.0; places.nodes()],
        nic_in: (0..places.nodes()).map(|_| Calendar::default()).collect(),
        heap: (0..n as u32)
            .map(|r| Reverse((Time(model.call_us), r)))
            .collect(),
        traffic: [Traffic::default(); 8],
    };
    while let Some(Reverse((Time(t), r))) = sim.heap.pop() {
        sim.start_round(r, t)?;
    }
    let mut time: f64 = 0.0;
    for (r, state) in sim.ranks.iter().enumerate() {
        match state.finished {
            Some(t) => time = time.max(t),
            None => {
                let from = state.waiting.first().map_or(r as u32, |w| w.from);
                return Err(SimError::Deadlock {
                    rank: r as u32,
                    round: state.round,
                    from,
                });
            }
        }
    }
    Ok(Outcome {
        time_us: time,
        traffic: LinkClass::ALL
            .into_iter()
            .zip(sim.traffic)
            .filter(|(_, t)| t.messages > 0)
            .collect(),
    })
}

struct Sim<'a> {
    programs: &'a Programs,
    places: &'a Places,
    model: &'a CostModel,
    ranks: Vec<Rank>,
    /// When each node's network interface is free again.
    nic_free: Vec<f64>,
    /// When each node's interface is busy taking messages in (full duplex: its receiving
    /// side, apart from the sending one).
    nic_in: Vec<Calendar>,
    /// Ranks to start their next round, by time.
    heap: BinaryHeap<Reverse<(Time, u32)>>,
    /// Per link class, in the order of [`LinkClass::ALL`].
    traffic: [Traffic; 8],
}

impl Sim<'_> {
    /// Rank `r` starts its next round at `t` (or finishes, with none left).
    fn start_round(&mut self, r: u32, t: f64) -> Result<(), SimError> {
        let idx = self.ranks[r as usize].round;
        if idx >= self.programs.rounds(r) {
            self.ranks[r as usize].finished = Some(t);
            return Ok(());
        }
        {
            let state = &mut self.ranks[r as usize];
            state.start = t;
            state.posted = t;
            state.done = t;
        }
        for &step in self.programs.round(r, idx) {
            match step.kind {
                Kind::Send => {
                    let busy = self.send(r, step.peer, step.bytes, t)?;
                    let state = &mut self.ranks[r as usize];
                    state.done = state.done.max(busy);
                }
                Kind::Recv | Kind::RecvCombine => {
                    let w = Waiting {
                        from: step.peer,
                        bytes: step.bytes,
                        combine: step.kind == Kind::RecvCombine,
                    };
                    let state = &mut self.ranks[r as usize];
                    // Receives from one sender match in order: behind a waiting one, wait.
                    let behind = state.waiting.iter().any(|x| x.from == w.from);
                    let found = if behind {
                        None
                    } else {
                        state.inbox.iter().position(|m| m.from == w.from)
                    };
                    match found {
                        Some(i) => {
                            let m = state.inbox.remove(i);
                            self.complete(r, w, m)?;
                        }
                        None => state.waiting.push(w),
                    }
                }
                Kind::Copy | Kind::Combine => {
                    let took = if step.kind == Kind::Combine {
                        self.model.combine_us(step.bytes)
                    } else {
                        step.bytes as f64 / self.model.copy_bytes_per_us
                    };
                    self.ranks[r as usize].local.push((t, took));
                }
            }
        }
        self.maybe_next(r);
        Ok(())
    }

    /// Sends `bytes` from `r` to `d` in the round that started at `t`, once the sends
    /// before it in the round are posted; returns when the sender is free.
    fn send(&mut self, r: u32, d: u32, bytes: u64, t: f64) -> Result<f64, SimError> {
        let class = self.places.class(r, d);
        let link = *self.model.link(class);
        let o = link.overhead_us.min(link.alpha_us / 2.0);
        let posted = &mut self.ranks[r as usize].posted;
        *posted = posted.max(t) + o;
        let mut start = *posted;
        let mut in_hold = None;
        if class.is_network() {
            // The sender's interface, and with half duplex the receiver's too, carry the
            // message one after another with the others they carry.
            let (from, to) = (
                self.places.node_of(r) as usize,
                self.places.node_of(d) as usize,
            );
            let half = self.model.nic_half_duplex;
            start = start.max(self.nic_free[from]);
            if half {
                start = start.max(self.nic_free[to]);
            }
            let hold = (bytes as f64 / self.model.nic_bytes_per_us).max(self.model.nic_message_us);
            let until = start + hold;
            self.nic_free[from] = until;
            if half {
                self.nic_free[to] = until;
            }
            in_hold = Some((to, hold));
        }
        let busy = start + link.transfer_us(bytes);
        // The receiver's `o` comes after the arrival: the wire has the rest of `alpha`.
        let mut arrival = busy + (link.alpha_us - 2.0 * o).max(0.0);
        // Full duplex, the receiving interface takes in one message at a time too, each
        // for the time it holds the sender's: messages from many nodes into one (a flat
        // Gather's root) queue there. (A message alone arrives as the link says.)
        if let (Some((to, hold)), false) = (in_hold, self.model.nic_half_duplex) {
            arrival = self.nic_in[to].take(arrival - hold, hold) + hold;
        }
        let e = &mut self.traffic[class as usize];
        e.messages += 1;
        e.bytes += bytes;
        // The receiver may be waiting for it already.
        let state = &mut self.ranks[d as usize];
        let m = Message {
            from: r,
            arrival,
            bytes,
            overhead: o,
        };
        if let Some(i) = state.waiting.iter().position(|w| w.from == r) {
            let w = state.waiting.remove(i);
            self.complete(d, w, m)?;
            self.maybe_next(d);
        } else {
            state.inbox.push(m);
        }
        Ok(busy)
    }

    /// Receive `w` of rank `r` gets its message `m`: the core takes it (its overhead, and
    /// the combine if any) once it has arrived.
    fn complete(&mut self, r: u32, w: Waiting, m: Message) -> Result<(), SimError> {
        let (arrival, got) = (m.arrival, m.bytes);
        if got != w.bytes {
            return Err(SimError::Size {
                from: w.from,
                to: r,
                want: w.bytes,
                got,
            });
        }
        let state = &mut self.ranks[r as usize];
        let ready = arrival.max(state.start);
        let combine = if w.combine {
            self.model.combine_us(w.bytes)
        } else {
            0.0
        };
        state.local.push((ready, m.overhead + combine));
        Ok(())
    }

    /// Schedules rank `r`'s next round once nothing of this one waits.
    fn maybe_next(&mut self, r: u32) {
        let state = &mut self.ranks[r as usize];
        if state.waiting.is_empty() && state.finished.is_none() {
            // The round's local work, in the order it became possible.
            state.local.sort_by(|a, b| a.0.total_cmp(&b.0));
            let mut core = state.posted;
            for (ready, took) in state.local.drain(..) {
                core = core.max(ready) + took;
            }
            state.done = state.done.max(core);
            state.round += 1;
            self.heap.push(Reverse((Time(state.done), r)));
        }
    }
}
