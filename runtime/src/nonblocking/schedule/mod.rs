//! A nonblocking collective as a schedule: rounds of steps over the plan's levels. The
//! steps of a round run concurrently (each polled in turn); a round starts when the one
//! before it has completed. Transfers are polled through [`Transport::poll_send`] and
//! [`Transport::poll_recv`]: shared-memory queue steps complete by polling, network steps
//! are `MPI_Isend`/`MPI_Irecv` that are tested.
//!
//! Network receives are also *posted ahead* of their round ([`Transport::posts_ahead`]):
//! as soon as no earlier step still uses their buffer (a receive that is combined lands in
//! memory of its own, so at once), and never ahead of an earlier receive from the same
//! rank that is still unposted (MPI matches in posting order). Sends wait for their round:
//! a send also says that this rank has got that far.
//!
//! Builders keep two rules. Within a round, no step writes a region that another step of
//! the round reads or writes, except receive-and-combine steps into the same accumulator
//! (each combine happens inside one poll call, so they never overlap in time). And within
//! a round, at most one receive from each rank: the shared-memory queues hand a writer's
//! messages to whichever receive polls first, not in the order they were sent (MPI's
//! matching would keep the order; the queues do not).
//!
//! The schedule refers to the caller's buffers by address. [`Schedule::lent`] takes them
//! lent for good, as a request lends them (`Request::lend`, sound by the request's
//! scope); [`Schedule::new`] and [`Schedule::with_buffers`] take borrowed ones under a
//! contract of their own (tests).

mod steps;
#[cfg(test)]
mod tests;

use std::ptr::NonNull;

use crate::combine::Combine;
use crate::error::Result;
use crate::transport::Fabric;
use crate::transport::Transport;

use steps::Step;
pub use steps::{Action, Buf, Builder, Link, Region, Shape};

/// Base address and length of a buffer.
#[derive(Debug, Clone, Copy)]
struct Base {
    ptr: *mut u8,
    len: usize,
}

impl Base {
    const NONE: Base = Base {
        ptr: std::ptr::null_mut(),
        len: 0,
    };
}

/// A collective in progress on one rank.
pub struct Schedule {
    name: &'static str,
    rounds: Vec<Vec<Step>>,
    round: usize,
    send: Base,
    recv: Base,
    acc: Base,
    tmp: Base,
    /// Owns the memory `acc` and `tmp` point into.
    owned: (Vec<u8>, Vec<u8>),
    op: Option<Box<dyn Combine>>,
    /// The shape its steps were built for, if they may serve later calls.
    shape: Option<Shape>,
}

impl std::fmt::Debug for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schedule")
            .field("name", &self.name)
            .field("round", &self.round)
            .field("rounds", &self.rounds.len())
            .finish()
    }
}

impl Schedule {
    /// A schedule named `name` (for error messages) running the rounds of `b` over the
    /// caller's `send` and `recv` buffers, an accumulator of `acc` bytes and scratch of
    /// `tmp` bytes, combining with `op`.
    ///
    /// # Safety
    ///
    /// Until the schedule completes (or is dropped), `send` must stay valid for reads and
    /// unmodified, and `recv` valid for reads and writes and untouched by anyone else. A
    /// request's scope guarantees this: it borrows both for longer than the request lives.
    pub unsafe fn new(
        name: &'static str,
        b: Builder,
        send: Option<&[u8]>,
        recv: Option<&mut [u8]>,
        acc: usize,
        tmp: usize,
        op: Option<Box<dyn Combine>>,
    ) -> Self {
        // SAFETY: the caller's contract is this function's.
        unsafe { Self::with_buffers(name, b, send, recv, vec![0; acc], vec![0; tmp], op) }
    }

    /// Like [`Schedule::new`], with the accumulator and scratch given (their lengths are
    /// the sizes; their contents do not matter, the builders write before they read).
    ///
    /// # Safety
    ///
    /// As [`Schedule::new`].
    pub unsafe fn with_buffers(
        name: &'static str,
        b: Builder,
        send: Option<&[u8]>,
        recv: Option<&mut [u8]>,
        mut acc: Vec<u8>,
        mut tmp: Vec<u8>,
        op: Option<Box<dyn Combine>>,
    ) -> Self {
        let base = |ptr: *mut u8, len| Base { ptr, len };
        Schedule {
            name,
            rounds: b.rounds,
            round: 0,
            send: send.map_or(Base::NONE, |s| base(s.as_ptr().cast_mut(), s.len())),
            recv: recv.map_or(Base::NONE, |r| base(r.as_mut_ptr(), r.len())),
            acc: base(acc.as_mut_ptr(), acc.len()),
            tmp: base(tmp.as_mut_ptr(), tmp.len()),
            owned: (acc, tmp),
            op,
            shape: None,
        }
    }

    /// Like [`Schedule::with_buffers`], on buffers lent for good (a request lends the
    /// caller's: `Request::lend`).
    pub fn lent(
        name: &'static str,
        b: Builder,
        send: Option<&'static [u8]>,
        recv: Option<&'static mut [u8]>,
        acc: Vec<u8>,
        tmp: Vec<u8>,
        op: Option<Box<dyn Combine>>,
    ) -> Self {
        // SAFETY: `'static` buffers outlive the schedule; `recv` is borrowed uniquely.
        unsafe { Self::with_buffers(name, b, send, recv, acc, tmp, op) }
    }

    /// Marks the schedule's steps as those of every call of `shape` on its context: once
    /// complete, they serve the next such call.
    pub fn shaped(mut self, shape: Shape) -> Self {
        self.shape = Some(shape);
        self
    }

    /// The accumulator and scratch, for reuse by a later schedule; and the steps, reset,
    /// with their shape, if the schedule has one.
    pub(crate) fn into_parts(self) -> (Vec<u8>, Vec<u8>, Option<(Shape, Builder)>) {
        let (acc, tmp) = self.owned;
        let steps = self.shape.map(|shape| {
            let mut b = Builder {
                rounds: self.rounds,
            };
            b.reset();
            (shape, b)
        });
        (acc, tmp, steps)
    }

    /// The collective's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Makes what progress it can without waiting, on the steps within `reach`; returns
    /// whether the schedule is done. Adds to `moves` every step that completed, started or
    /// moved data.
    pub fn poll(&mut self, fabric: &mut dyn Fabric, reach: Reach, moves: &mut u64) -> Result<bool> {
        let mem = Memory {
            send: self.send,
            recv: self.recv,
            acc: self.acc,
            tmp: self.tmp,
        };
        let op = self.op.as_deref();
        while let Some(round) = self.rounds.get_mut(self.round) {
            let mut all = true;
            for step in round.iter_mut().filter(|s| !s.done) {
                let skip = match reach {
                    Reach::All => false,
                    Reach::WithoutMpi => calls_mpi(fabric, step, op),
                    Reach::Start => !starts(fabric, step),
                };
                if skip {
                    all = false;
                    continue;
                }
                let before = (step.transfer.started, step.transfer.done);
                step.done = run(fabric, step, &mem, op).map_err(|e| e.during(self.name))?;
                if step.done || (step.transfer.started, step.transfer.done) != before {
                    *moves += 1;
                }
                all &= step.done;
            }
            if !all {
                if reach != Reach::WithoutMpi {
                    let later = &mut self.rounds[self.round..];
                    post_ahead(later, fabric, &mem, op, moves).map_err(|e| e.during(self.name))?;
                }
                return Ok(false);
            }
            self.round += 1;
        }
        Ok(true)
    }

    /// Fails if a peer the current round waits on has died.
    pub fn check_peers(&mut self, fabric: &mut dyn Fabric) -> Result<()> {
        if let Some(round) = self.rounds.get(self.round) {
            for step in round.iter().filter(|s| !s.done) {
                for &p in step.action.peers() {
                    link(fabric, step.link)
                        .check_peer(p)
                        .map_err(|e| e.during(self.name))?;
                }
            }
        }
        Ok(())
    }
}

/// Posts the network receives of the rounds after the current one (`rounds[0]`) whose
/// buffers allow it (see the module's documentation).
fn post_ahead(
    rounds: &mut [Vec<Step>],
    fabric: &mut dyn Fabric,
    mem: &Memory,
    op: Option<&dyn Combine>,
    moves: &mut u64,
) -> Result<()> {
    let Some((current, later)) = rounds.split_first_mut() else {
        return Ok(());
    };
    // Most polls have nothing to post (every transport of a node posts nothing ahead):
    // find out before collecting the regions in use.
    let candidate = |fabric: &mut dyn Fabric, step: &Step| {
        !step.done
            && step.action.sender().is_some()
            && !step.transfer.started
            && step.link != Link::Local
            && link(fabric, step.link).posts_ahead()
    };
    if !later.iter().flatten().any(|s| candidate(fabric, s)) {
        return Ok(());
    }
    // Regions that steps not yet completed still use.
    let mut pending: Vec<Region> = current
        .iter()
        .filter(|s| !s.done)
        .flat_map(|s| s.action.regions())
        .collect();
    // Senders of earlier receives that are still unposted: MPI matches in posting order.
    let mut held: Vec<u32> = Vec::new();
    for step in later.iter_mut().flatten().filter(|s| !s.done) {
        if candidate(fabric, step)
            && let Some(from) = step.action.sender()
        {
            if !held.contains(&from) && step.action.lands_clear_of(&pending) {
                // A transport that posts ahead only posts on the first poll; should one
                // ever complete there, the step is done and is not polled again.
                step.done = run(fabric, step, mem, op)?;
                *moves += 1;
            } else {
                held.push(from);
            }
        }
        pending.extend(step.action.regions());
    }
    Ok(())
}

/// Which steps a poll may run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Every step.
    All,
    /// Only steps that make no MPI call (for a thread that may not call MPI): transfers
    /// over transports that do not use MPI, and combines that do not call it.
    WithoutMpi,
    /// What the call that starts a collective does: it makes this rank's data available
    /// (sends, local copies) and posts network transfers, but leaves receiving and
    /// combining to the calls that follow (a test during the computation, the progress
    /// thread, the wait), so that the start returns at once.
    Start,
}

/// Whether the start of a collective runs `step` ([`Reach::Start`]).
fn starts(fabric: &mut dyn Fabric, step: &Step) -> bool {
    match step.action {
        // A signal's first poll announces this rank; it waits for nothing.
        // A lend tells its sender where to write; a write takes place at once if the
        // receiver has lent its region already, else later.
        Action::Copy { .. }
        | Action::Permute { .. }
        | Action::Send { .. }
        | Action::Lend { .. }
        | Action::WriteInto { .. }
        | Action::Signal { .. } => true,
        Action::Combine { .. } => false,
        Action::Recv { .. } | Action::RecvReduce { .. } | Action::WaitLent { .. } => {
            !step.transfer.started && link(fabric, step.link).posts_ahead()
        }
    }
}

/// Whether running `step` may call MPI.
fn calls_mpi(fabric: &mut dyn Fabric, step: &Step, op: Option<&dyn Combine>) -> bool {
    let combines = match &step.action {
        Action::RecvReduce { acc, .. } => acc.len > 0,
        Action::Combine { .. } => true,
        _ => false,
    };
    (combines && op.is_some_and(|op| op.calls_mpi()))
        || (step.link != Link::Local && link(fabric, step.link).calls_mpi())
}

fn link(fabric: &mut dyn Fabric, l: Link) -> &mut dyn Transport {
    match l {
        Link::Level(i) => fabric.level(i),
        Link::Peer(p) => fabric.peer(p),
        Link::Local => unreachable!("a local step has no transport"),
    }
}

/// The schedule's buffers.
struct Memory {
    send: Base,
    recv: Base,
    acc: Base,
    tmp: Base,
}

impl Memory {
    fn base(&self, b: Buf) -> Base {
        match b {
            Buf::Send => self.send,
            Buf::Recv => self.recv,
            Buf::Acc => self.acc,
            Buf::Tmp => self.tmp,
        }
    }

    fn ptr(&self, r: Region) -> *mut u8 {
        let b = self.base(r.buf);
        assert!(
            r.off + r.len <= b.len && (r.len == 0 || !b.ptr.is_null()),
            "schedule region {r:?} outside its buffer of {} bytes",
            b.len
        );
        if r.len == 0 {
            return NonNull::dangling().as_ptr();
        }
        // SAFETY: in bounds (checked above).
        unsafe { b.ptr.add(r.off) }
    }

    fn get(&self, r: Region) -> &[u8] {
        // SAFETY: the buffers were lent for good, or `Schedule::new`'s contract keeps them
        // valid; the builders' rule keeps any concurrent writer away from this region while
        // the slice lives.
        unsafe { std::slice::from_raw_parts(self.ptr(r), r.len) }
    }

    #[allow(clippy::mut_from_ref)]
    fn get_mut(&self, r: Region) -> &mut [u8] {
        assert!(r.buf != Buf::Send, "schedule writes into the send buffer");
        // SAFETY: as in `get`; only this step touches the region while the slice lives.
        unsafe { std::slice::from_raw_parts_mut(self.ptr(r), r.len) }
    }
}

fn run(
    fabric: &mut dyn Fabric,
    step: &mut Step,
    mem: &Memory,
    op: Option<&dyn Combine>,
) -> Result<bool> {
    let transfer = &mut step.transfer;
    let need_op = || op.expect("a reducing schedule carries its operation");
    match &step.action {
        Action::Send { to, src } => link(fabric, step.link).poll_send(transfer, to, mem.get(*src)),
        Action::Recv { from, dst } => {
            link(fabric, step.link).poll_recv(transfer, *from, mem.get_mut(*dst), None)
        }
        Action::RecvReduce { from, acc } => {
            // An empty message (a barrier's) has nothing to combine.
            let op = (acc.len > 0).then(need_op);
            let acc = mem.get_mut(*acc);
            link(fabric, step.link).poll_recv(transfer, *from, acc, op)
        }
        Action::Copy { src, dst } => {
            assert_ne!(src.buf, dst.buf, "schedule copies within one buffer");
            mem.get_mut(*dst).copy_from_slice(mem.get(*src));
            Ok(true)
        }
        Action::Permute {
            src,
            dst,
            block,
            order,
        } => {
            assert_ne!(src.buf, dst.buf, "schedule permutes within one buffer");
            let (from, to) = (mem.get(*src), mem.get_mut(*dst));
            if *block > 0 {
                for (out, &j) in to.chunks_exact_mut(*block).zip(order.iter()) {
                    let at = j as usize * block;
                    out.copy_from_slice(&from[at..at + block]);
                }
            }
            Ok(true)
        }
        Action::Combine { acc, src } => {
            assert_ne!(acc.buf, src.buf, "schedule combines within one buffer");
            need_op().combine(mem.get_mut(*acc), mem.get(*src));
            Ok(true)
        }
        Action::Signal { round, to, from } => {
            link(fabric, step.link).poll_signal(transfer, *round, *to, *from)
        }
        Action::Lend { from, dst } => {
            link(fabric, step.link).poll_lend(transfer, *from, mem.get_mut(*dst))
        }
        Action::WaitLent { from, dst } => {
            link(fabric, step.link).poll_wait_lent(transfer, *from, mem.get_mut(*dst))
        }
        Action::WriteInto { to, src } => {
            link(fabric, step.link).poll_write_into(transfer, *to, mem.get(*src))
        }
    }
}
