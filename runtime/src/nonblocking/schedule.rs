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
//! Builders keep one rule: within a round, no step writes a region that another step of
//! the round reads or writes, except receive-and-combine steps into the same accumulator
//! (each combine happens inside one poll call, so they never overlap in time).
//!
//! The schedule refers to the caller's buffers by address; [`Schedule::new`] is the one
//! place that accepts them, and its contract is what the request's scope guarantees.

use std::ptr::NonNull;

use crate::combine::Combine;
use crate::error::Result;
use crate::transport::Fabric;
use crate::transport::{Transfer, Transport};

/// Which buffer a region lies in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buf {
    /// The caller's send buffer (read only).
    Send,
    /// The caller's receive buffer.
    Recv,
    /// The schedule's own accumulator.
    Acc,
    /// The schedule's own scratch.
    Tmp,
}

/// Bytes `off..off + len` of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    /// The buffer.
    pub buf: Buf,
    /// First byte.
    pub off: usize,
    /// Length in bytes.
    pub len: usize,
}

impl Region {
    /// All `len` bytes of `buf`.
    pub fn whole(buf: Buf, len: usize) -> Self {
        Region { buf, off: 0, len }
    }
}

/// Which transport a step uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// The transport of the rank's level `i`.
    Level(usize),
    /// The transport that reaches a peer directly (the root detour).
    Direct(u32),
    /// None: a local copy or combine.
    Local,
}

/// What a step does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Send `src` to every rank in `to`.
    Send {
        /// Receivers.
        to: Vec<u32>,
        /// What to send.
        src: Region,
    },
    /// Receive into `dst` from `from`.
    Recv {
        /// Sender.
        from: u32,
        /// Where it lands.
        dst: Region,
    },
    /// Receive from `from` and combine into `acc`.
    RecvReduce {
        /// Sender.
        from: u32,
        /// The accumulator.
        acc: Region,
    },
    /// Copy `src` to `dst` locally.
    Copy {
        /// Source.
        src: Region,
        /// Destination (another buffer).
        dst: Region,
    },
    /// Combine `src` into `acc` locally.
    Combine {
        /// The accumulator.
        acc: Region,
        /// What is combined in (another buffer).
        src: Region,
    },
    /// Round `round` of a dissemination barrier: tell `to` that this rank has reached it,
    /// and hear the same from `from` ([`Transport::poll_signal`]).
    Signal {
        /// The barrier's round.
        round: usize,
        /// Who learns that this rank got here.
        to: u32,
        /// Whom this rank waits for.
        from: u32,
    },
}

impl Region {
    /// Whether the two share a byte.
    fn overlaps(&self, other: &Region) -> bool {
        self.buf == other.buf
            && self.len > 0
            && other.len > 0
            && self.off < other.off + other.len
            && other.off < self.off + self.len
    }
}

impl Action {
    /// The regions this step reads or writes until it completes.
    fn regions(&self) -> impl Iterator<Item = Region> {
        let (a, b) = match *self {
            Action::Send { src, .. } => (src, None),
            Action::Recv { dst, .. } => (dst, None),
            Action::RecvReduce { acc, .. } => (acc, None),
            Action::Copy { src, dst } => (dst, Some(src)),
            Action::Combine { acc, src } => (acc, Some(src)),
            Action::Signal { .. } => (Region::whole(Buf::Acc, 0), None),
        };
        std::iter::once(a).chain(b)
    }

    /// The sender, if the step is a receive. Only receives are posted ahead: a send also
    /// tells its receiver that this rank has got this far (a barrier's empty messages
    /// carry nothing else), which its data alone does not show.
    fn sender(&self) -> Option<u32> {
        match *self {
            Action::Recv { from, .. } | Action::RecvReduce { from, .. } => Some(from),
            Action::Send { .. }
            | Action::Copy { .. }
            | Action::Combine { .. }
            | Action::Signal { .. } => None,
        }
    }

    /// Whether a receive may land while the earlier steps that use `pending` have not
    /// completed: one that is combined lands in the transfer's own memory until its round.
    fn lands_clear_of(&self, pending: &[Region]) -> bool {
        match self {
            Action::Recv { dst, .. } => !pending.iter().any(|r| r.overlaps(dst)),
            _ => true,
        }
    }

    /// The ranks this step waits on: every receiver of a send (a shared-memory slot is
    /// free again only once all of them have read it), the sender of a receive.
    fn peers(&self) -> &[u32] {
        match self {
            Action::Send { to, .. } => to,
            Action::Recv { from, .. }
            | Action::RecvReduce { from, .. }
            | Action::Signal { from, .. } => std::slice::from_ref(from),
            Action::Copy { .. } | Action::Combine { .. } => &[],
        }
    }
}

#[derive(Debug)]
struct Step {
    link: Link,
    action: Action,
    x: Transfer,
    done: bool,
}

/// Collects a schedule's rounds.
#[derive(Debug, Default)]
pub struct Builder {
    rounds: Vec<Vec<Step>>,
}

impl Builder {
    /// Appends a round of `steps` (nothing when empty).
    pub fn round(&mut self, steps: impl IntoIterator<Item = (Link, Action)>) {
        let steps: Vec<Step> = steps
            .into_iter()
            .map(|(link, action)| Step {
                link,
                action,
                x: Transfer::default(),
                done: false,
            })
            .collect();
        if !steps.is_empty() {
            self.rounds.push(steps);
        }
    }

    /// Appends a round of one step.
    pub fn step(&mut self, link: Link, action: Action) {
        self.round([(link, action)]);
    }

    /// The rounds built so far, each its steps, for tools that read a schedule without
    /// running it (`topo-run simulate`).
    pub fn rounds(&self) -> impl Iterator<Item = impl Iterator<Item = (Link, &Action)>> {
        self.rounds
            .iter()
            .map(|r| r.iter().map(|step| (step.link, &step.action)))
    }
}

/// What a schedule's steps depend on besides its context (view and settings): calls of
/// one shape on one context build the same steps, so the steps of a completed schedule,
/// reset, serve the next call of its shape ([`super::Engine::reuse`]) without building
/// or allocating anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// The collective (its MPI name) and, for an Allgather, its algorithm.
    pub op: &'static str,
    /// The Allgather's algorithm (`None` for the other collectives).
    pub alg: Option<topo_hierarchy::settings::AllgatherAlg>,
    /// The root (0 where there is none).
    pub root: u32,
    /// The bytes the builder was given.
    pub len: usize,
    /// Whether the caller passed a send buffer (not in place).
    pub has_send: bool,
    /// The element's bytes where the steps cut the message into blocks of whole elements
    /// (an Allreduce's; 0 elsewhere).
    pub elem: usize,
}

impl Builder {
    /// Makes the steps of a completed schedule new again.
    fn reset(&mut self) {
        for step in self.rounds.iter_mut().flatten() {
            step.done = false;
            step.x = Transfer::default();
        }
    }
}

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
                let before = (step.x.started, step.x.done);
                step.done = run(fabric, step, &mem, op).map_err(|e| e.during(self.name))?;
                if step.done || (step.x.started, step.x.done) != before {
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
            && !step.x.started
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
        Action::Copy { .. } | Action::Send { .. } | Action::Signal { .. } => true,
        Action::Combine { .. } => false,
        Action::Recv { .. } | Action::RecvReduce { .. } => {
            !step.x.started && link(fabric, step.link).posts_ahead()
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
        Link::Direct(p) => fabric.direct(p),
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
        // SAFETY: `Schedule::new`'s contract keeps the buffer valid; the builders' rule
        // keeps any concurrent writer away from this region while the slice lives.
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
    let x = &mut step.x;
    let need_op = || op.expect("a reducing schedule carries its operation");
    match &step.action {
        Action::Send { to, src } => link(fabric, step.link).poll_send(x, to, mem.get(*src)),
        Action::Recv { from, dst } => {
            link(fabric, step.link).poll_recv(x, *from, mem.get_mut(*dst), None)
        }
        Action::RecvReduce { from, acc } => {
            // An empty message (a barrier's) has nothing to combine.
            let op = (acc.len > 0).then(need_op);
            let acc = mem.get_mut(*acc);
            link(fabric, step.link).poll_recv(x, *from, acc, op)
        }
        Action::Copy { src, dst } => {
            assert_ne!(src.buf, dst.buf, "schedule copies within one buffer");
            mem.get_mut(*dst).copy_from_slice(mem.get(*src));
            Ok(true)
        }
        Action::Combine { acc, src } => {
            assert_ne!(acc.buf, src.buf, "schedule combines within one buffer");
            need_op().combine(mem.get_mut(*acc), mem.get(*src));
            Ok(true)
        }
        Action::Signal { round, to, from } => {
            link(fabric, step.link).poll_signal(x, *round, *to, *from)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    /// A transport whose transfers never complete and on which one peer has died.
    struct Stuck {
        dead: u32,
        /// The transfers polled, in order.
        polls: Vec<&'static str>,
    }

    impl Transport for Stuck {
        fn send(&mut self, _: &[u32], _: &[u8]) -> Result<()> {
            unreachable!()
        }
        fn recv(&mut self, _: u32, _: &mut [u8]) -> Result<()> {
            unreachable!()
        }
        fn sendrecv(&mut self, _: u32, _: &[u8], _: u32, _: &mut [u8]) -> Result<()> {
            unreachable!()
        }
        fn poll_send(&mut self, _: &mut Transfer, _: &[u32], _: &[u8]) -> Result<bool> {
            self.polls.push("send");
            Ok(false)
        }
        fn poll_recv(
            &mut self,
            _: &mut Transfer,
            _: u32,
            _: &mut [u8],
            _: Option<&dyn Combine>,
        ) -> Result<bool> {
            self.polls.push("recv");
            Ok(false)
        }
        fn check_peer(&mut self, peer: u32) -> Result<()> {
            if peer == self.dead {
                Err(Error::PeerDied {
                    rank: peer,
                    node: "n".into(),
                    op: "?",
                })
            } else {
                Ok(())
            }
        }
    }

    impl Fabric for Stuck {
        fn level(&mut self, _: usize) -> &mut dyn Transport {
            self
        }
        fn direct(&mut self, _: u32) -> &mut dyn Transport {
            self
        }
    }

    /// A network-like transport: the first poll of a transfer posts it (recorded), and no
    /// transfer completes until `open`.
    #[derive(Default)]
    struct Posting {
        posted: Vec<(&'static str, u32, usize)>,
        open: bool,
    }

    impl Transport for Posting {
        fn send(&mut self, _: &[u32], _: &[u8]) -> Result<()> {
            unreachable!()
        }
        fn recv(&mut self, _: u32, _: &mut [u8]) -> Result<()> {
            unreachable!()
        }
        fn sendrecv(&mut self, _: u32, _: &[u8], _: u32, _: &mut [u8]) -> Result<()> {
            unreachable!()
        }
        fn posts_ahead(&self) -> bool {
            true
        }
        fn calls_mpi(&self) -> bool {
            true
        }
        fn poll_send(&mut self, x: &mut Transfer, to: &[u32], data: &[u8]) -> Result<bool> {
            if !x.started {
                x.started = true;
                self.posted.push(("send", to[0], data.len()));
                return Ok(false);
            }
            Ok(self.open)
        }
        fn poll_recv(
            &mut self,
            x: &mut Transfer,
            from: u32,
            buf: &mut [u8],
            _: Option<&dyn Combine>,
        ) -> Result<bool> {
            if !x.started {
                x.started = true;
                self.posted.push(("recv", from, buf.len()));
                return Ok(false);
            }
            Ok(self.open)
        }
    }

    impl Fabric for Posting {
        fn level(&mut self, _: usize) -> &mut dyn Transport {
            self
        }
        fn direct(&mut self, _: u32) -> &mut dyn Transport {
            self
        }
    }

    struct Sum;
    impl Combine for Sum {
        fn elem_size(&self) -> usize {
            1
        }
        fn combine(&self, acc: &mut [u8], src: &[u8]) {
            for (a, s) in acc.iter_mut().zip(src) {
                *a = a.wrapping_add(*s);
            }
        }
    }

    #[test]
    fn transfers_are_posted_ahead_as_far_as_their_buffers_and_order_allow() {
        let l = Link::Level(0);
        let r = |buf, off| Region { buf, off, len: 8 };
        let mut b = Builder::default();
        // As recursive doubling: exchange, then exchange into scratch and combine, twice.
        b.round([
            (
                l,
                Action::Send {
                    to: vec![1],
                    src: r(Buf::Send, 0),
                },
            ),
            (
                l,
                Action::RecvReduce {
                    from: 1,
                    acc: r(Buf::Recv, 0),
                },
            ),
        ]);
        b.round([
            // Its data is still being combined into: not yet.
            (
                l,
                Action::Send {
                    to: vec![2],
                    src: r(Buf::Recv, 0),
                },
            ),
            // Scratch nobody uses yet: posted.
            (
                l,
                Action::Recv {
                    from: 2,
                    dst: r(Buf::Tmp, 0),
                },
            ),
        ]);
        b.step(
            Link::Local,
            Action::Combine {
                acc: r(Buf::Recv, 0),
                src: r(Buf::Tmp, 0),
            },
        );
        b.round([
            (
                l,
                Action::Send {
                    to: vec![3],
                    src: r(Buf::Recv, 0),
                },
            ),
            // The combine above still reads the scratch: not yet.
            (
                l,
                Action::Recv {
                    from: 3,
                    dst: r(Buf::Tmp, 0),
                },
            ),
        ]);
        b.round([
            // Free buffer, but an earlier receive from rank 3 is unposted: not yet.
            (
                l,
                Action::Recv {
                    from: 3,
                    dst: r(Buf::Recv, 8),
                },
            ),
            // Combined on arrival, from its own memory: posted.
            (
                l,
                Action::RecvReduce {
                    from: 5,
                    acc: r(Buf::Recv, 0),
                },
            ),
            // Data nobody writes, but a send says that this rank got here (a barrier's
            // empty message says nothing else): not yet.
            (
                l,
                Action::Send {
                    to: vec![6],
                    src: r(Buf::Send, 0),
                },
            ),
            // Likewise.
            (
                l,
                Action::Send {
                    to: vec![2],
                    src: r(Buf::Send, 0),
                },
            ),
        ]);
        let data = [1u8; 8];
        let mut out = [0u8; 16];
        // SAFETY: `data` and `out` outlive the schedule.
        let mut s = unsafe {
            Schedule::new(
                "MPI_Iallreduce",
                b,
                Some(&data),
                Some(&mut out),
                0,
                8,
                Some(Box::new(Sum)),
            )
        };
        let mut net = Posting::default();
        let mut moves = 0;
        assert!(!s.poll(&mut net, Reach::All, &mut moves).unwrap());
        assert_eq!(
            net.posted,
            [
                ("send", 1, 8),
                ("recv", 1, 8),
                ("recv", 2, 8),
                ("recv", 5, 8),
            ]
        );
        assert_eq!(moves, 4);
        // A thread that may not call MPI posts nothing.
        let mut net2 = Posting::default();
        let mut b = Builder::default();
        b.step(
            l,
            Action::Recv {
                from: 1,
                dst: r(Buf::Tmp, 0),
            },
        );
        b.step(
            l,
            Action::Recv {
                from: 2,
                dst: r(Buf::Recv, 0),
            },
        );
        // SAFETY: `out` outlives the schedule.
        let mut t = unsafe { Schedule::new("MPI_Ibcast", b, None, Some(&mut out), 0, 8, None) };
        assert!(!t.poll(&mut net2, Reach::WithoutMpi, &mut 0).unwrap());
        assert!(net2.posted.is_empty());
        // Once transfers complete, the rest is posted and tested; each transfer is posted
        // exactly once (10 in all).
        net.open = true;
        let polls = (1..=10).find(|_| s.poll(&mut net, Reach::All, &mut moves).unwrap());
        assert!(polls.is_some(), "the schedule never completed");
        assert_eq!(net.posted.len(), 10, "{:?}", net.posted);
    }

    #[test]
    fn a_completed_schedule_of_a_shape_serves_the_next_call_of_that_shape_once() {
        let r = |buf, off| Region { buf, off, len: 8 };
        let build = || {
            let mut b = Builder::default();
            b.round([(
                Link::Level(0),
                Action::Recv {
                    from: 1,
                    dst: r(Buf::Tmp, 0),
                },
            )]);
            b.round([(
                Link::Local,
                Action::Combine {
                    acc: r(Buf::Recv, 0),
                    src: r(Buf::Tmp, 0),
                },
            )]);
            b.step(
                Link::Level(0),
                Action::Send {
                    to: vec![1],
                    src: r(Buf::Recv, 0),
                },
            );
            b
        };
        let steps =
            |b: &Builder| format!("{:?}", b.rounds().map(Vec::from_iter).collect::<Vec<_>>());
        let shape = Shape {
            op: "MPI_Iallreduce",
            alg: None,
            root: 0,
            len: 8,
            has_send: false,
            elem: 8,
        };
        let mut engine = crate::nonblocking::Engine::default();
        let mut net = Posting {
            posted: Vec::new(),
            open: true,
        };
        let mut outs = [[1u8; 8], [1u8; 8]];
        for (call, out) in outs.iter_mut().enumerate() {
            let (b, acc, tmp) = match engine.reuse(&shape) {
                Some(kept) => {
                    assert_eq!(call, 1, "nothing is kept before a schedule completes");
                    kept
                }
                None => (build(), 0, 8),
            };
            assert_eq!(steps(&b), steps(&build()));
            assert_eq!((acc, tmp), (0, 8));
            // SAFETY: `out` outlives the schedule, which completes in this iteration.
            let s = unsafe {
                Schedule::new(
                    "MPI_Iallreduce",
                    b,
                    None,
                    Some(out),
                    acc,
                    tmp,
                    Some(Box::new(Sum)),
                )
            }
            .shaped(shape);
            engine.start(call as u64, s, &mut net).unwrap();
            let polls = (0..10).find(|_| {
                engine.progress(&mut net, Reach::All).unwrap();
                engine.is_idle()
            });
            assert!(polls.is_some(), "call {call} never completed");
        }
        // The reused steps ran in full again: posted the same transfers, gave the same result.
        assert_eq!(net.posted[..2], net.posted[2..]);
        assert_eq!(outs[0], outs[1]);
        // Another shape finds nothing; the kept steps serve one call at a time.
        assert!(engine.reuse(&Shape { len: 16, ..shape }).is_none());
        assert!(engine.reuse(&shape).is_some());
        assert!(engine.reuse(&shape).is_none());
    }

    #[test]
    fn a_start_sends_and_copies_but_leaves_receiving_and_combining_for_later() {
        let r = |buf, off| Region { buf, off, len: 8 };
        let mut b = Builder::default();
        b.round([
            (
                Link::Local,
                Action::Copy {
                    src: r(Buf::Send, 0),
                    dst: r(Buf::Recv, 0),
                },
            ),
            (
                Link::Local,
                Action::Combine {
                    acc: r(Buf::Recv, 8),
                    src: r(Buf::Send, 0),
                },
            ),
            (
                Link::Level(0),
                Action::Send {
                    to: vec![1],
                    src: r(Buf::Send, 0),
                },
            ),
            // Over a transport that does not post ahead: not even polled.
            (
                Link::Level(0),
                Action::Recv {
                    from: 1,
                    dst: r(Buf::Recv, 16),
                },
            ),
        ]);
        let data = [3u8; 8];
        let mut out = [1u8; 24];
        // SAFETY: `data` and `out` outlive the schedule.
        let mut s = unsafe {
            Schedule::new(
                "MPI_Iallreduce",
                b,
                Some(&data),
                Some(&mut out),
                0,
                0,
                Some(Box::new(Sum)),
            )
        };
        let mut net = Stuck {
            dead: 9,
            polls: Vec::new(),
        };
        let mut moves = 0;
        assert!(!s.poll(&mut net, Reach::Start, &mut moves).unwrap());
        assert_eq!(net.polls, ["send"]);
        assert_eq!(moves, 1);
        // The combine has not run yet, the copy has.
        assert!(!s.poll(&mut net, Reach::All, &mut moves).unwrap());
        assert_eq!(net.polls, ["send", "send", "recv"]);
        drop(s);
        assert_eq!(out[..8], [3; 8]);
        assert_eq!(out[8..16], [4; 8]);
    }

    #[test]
    fn a_send_checks_every_receiver_for_death() {
        // A broadcast's writer waits for all of its readers; the one that died is not the
        // first of them.
        for dead in [1, 2, 3] {
            let mut b = Builder::default();
            b.step(
                Link::Level(0),
                Action::Send {
                    to: vec![1, 2, 3],
                    src: Region::whole(Buf::Send, 8),
                },
            );
            let data = [0u8; 8];
            // SAFETY: `data` outlives the schedule.
            let mut s = unsafe { Schedule::new("MPI_Ibcast", b, Some(&data), None, 0, 0, None) };
            let mut fabric = Stuck {
                dead,
                polls: Vec::new(),
            };
            assert!(!s.poll(&mut fabric, Reach::All, &mut 0).unwrap());
            let e = s.check_peers(&mut fabric).unwrap_err();
            assert!(e.to_string().contains("MPI_Ibcast"), "{e}");
        }
        let mut fabric = Stuck {
            dead: 9,
            polls: Vec::new(),
        };
        let mut b = Builder::default();
        b.step(
            Link::Level(0),
            Action::Send {
                to: vec![1, 2],
                src: Region::whole(Buf::Send, 0),
            },
        );
        // SAFETY: no buffer is referred to.
        let mut s = unsafe { Schedule::new("MPI_Ibcast", b, Some(&[]), None, 0, 0, None) };
        assert!(!s.poll(&mut fabric, Reach::All, &mut 0).unwrap());
        s.check_peers(&mut fabric).unwrap();
    }
}
