//! Shared-memory queues inside a node, after coll/sharm.
//!
//! Every local rank owns one circular queue of `slots` slots of `fragment` bytes and only
//! it writes there; any local rank reads. A fragment is addressed to a set of readers by
//! writing `seq << 32 | len` into each reader's control word of the slot; a reader copies
//! the fragment out and clears its word; the writer reuses a slot once every word is
//! clear. Because a broadcast fragment is copied in once and read by all, the flat
//! broadcast costs one copy in and one copy out per reader.
//!
//! Messages of at least the single-copy threshold skip the copy in: the writer puts a
//! descriptor of its own buffer into the slot, each reader copies straight out of the
//! writer's memory with `process_vm_readv` (as Open MPI's CMA path does) and clears its
//! word, and the writer returns once every word is clear.
//!
//! Waiting spins, then yields the core (so it progresses when ranks outnumber cores), and
//! checks now and then that the peer it waits for is still alive.
//!
//! This module holds the transport's state and its [`Transport`] methods; the protocol
//! is in `queue.rs`, single copy in `single_copy.rs`, barrier signals in `signals.rs`,
//! exchanges in `exchange.rs`, the cache-line probe in `probe.rs`, and the segment's
//! layout and lifetime in `layout.rs` and `segment.rs`.

mod exchange;
pub mod lanes;
pub mod layout;
mod probe;
// Unsafe: the queue protocol reads and writes the shared segment's lines.
#[allow(unsafe_code)]
mod queue;
// Unsafe: the rings' records are read and written in the shared segment.
#[allow(unsafe_code)]
mod ring;
// Unsafe: the node's segment, mapped and laid out.
#[allow(unsafe_code)]
pub mod segment;
mod signals;
mod single_copy;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use std::io::{IoSlice, IoSliceMut};

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::sys::uio::{RemoteIoVec, process_vm_readv, process_vm_writev};
use nix::unistd::Pid;

pub use layout::Layout;
pub use segment::Segment;

use super::{Transfer, Transport};
use crate::backoff::Backoff;
use crate::combine::Combine;
use crate::error::{Error, Result};

pub use probe::NEAR_LINE_NS;
use single_copy::{Frag, combine_in, combine_onto, copy_out};

/// An exchange (`sendrecv`) between ranks that share a cache uses single copy from this
/// many times the threshold.
const SENDRECV_FACTOR: usize = 4;

/// A message whose readers all share the sender's nearest cache ([`ShmTransport::set_near`])
/// uses single copy from this many times the threshold: there the queues' two copies stay
/// cheaper for longer (a 16 KiB broadcast on one L3 took 0.66 of Open MPI's time through
/// the queues, 0.91 by single copy; across dies 1.51 and 0.85; docs/runtime.md).
const NEAR_FACTOR: usize = 2;

/// A message to a rank that does not share the sender's nearest cache uses single copy
/// from the threshold divided by this: there every fragment's lines cross the dies twice,
/// and single copy won from 8 KiB with the default threshold of 16 KiB (Allgather of 8
/// KiB blocks 1.03 of Open MPI's time through the queues, 0.51-0.54 by single copy;
/// docs/runtime.md).
const FAR_DIVISOR: usize = 2;

/// How many times a small receive polls the hinted slot before it looks at every slot
/// ([`ShmTransport::take_one`]): a few hundred nanoseconds, what a peer that is already
/// in the same collective takes to send.
const INLINE_POLLS: u32 = 16;

/// Bytes of a remote buffer read and combined at a time by a single-copy reduce. Across
/// dies (where a reduce's partial result goes by single copy), 1 MiB pieces took 1.06-1.27
/// times Open MPI's Reduce from 128 KiB to 4 MiB, 64 KiB pieces 1.22-1.43 (1 node x 2,
/// docs/runtime.md).
const REDUCE_PIECE: usize = 1 << 20;

/// The scratch a nonblocking single-copy receive reads and combines through (a piece at
/// a time): allocated anew for every call, so it stays small.
const POLL_REDUCE_PIECE: usize = 64 << 10;

/// One local rank's end of the node's queues.
#[derive(Debug)]
pub struct ShmTransport {
    /// The segment its queues are in: the context's own, or while a collective runs, the
    /// node lane it claimed (`lanes.rs`).
    seg: Arc<Segment>,
    /// The PIDs of the local ranks, for a transport whose segment's records are not its
    /// ranks' (a lane's); `None`: read from the segment.
    pids: Option<Vec<i32>>,
    /// This rank's local index.
    me: usize,
    /// World rank of each local index, ascending.
    peers: Vec<u32>,
    node: String,
    spin: u32,
    /// Messages of at least this many bytes are read straight from the sender's buffer
    /// with `process_vm_readv`; `None` keeps everything in the queues.
    single_copy: Option<usize>,
    /// Fragments written to this rank's queue so far (the next slot is `written % slots`).
    written: u64,
    /// The slot of a single-copy descriptor whose readers may still be reading our buffer.
    pending: Option<usize>,
    /// Last sequence number sent to each reader.
    send_seq: Vec<u32>,
    /// Last sequence number received from each writer.
    recv_seq: Vec<u32>,
    /// Where the next fragment from each writer probably is.
    recv_hint: Vec<usize>,
    /// Whether the last fragment from each writer was where the hint said: only then does
    /// a small receive poll the hinted slot alone first ([`ShmTransport::take_one`]).
    hint_held: Vec<bool>,
    /// Words put into the ring to each local reader so far (its head).
    ring_head: Vec<u64>,
    /// Each local reader's tail (words it has taken from our ring) as last read.
    ring_seen: Vec<u64>,
    /// Words taken from each local writer's ring so far (our tail).
    ring_pos: Vec<u64>,
    /// Reused list of local reader indices.
    readers: Vec<usize>,
    /// Whether each local rank shares this rank's lowest group inside the node (its
    /// nearest cache or memory); see [`ShmTransport::set_near`].
    near: Vec<bool>,
    /// The one-way cache-line time [`ShmTransport::check_near`] measured.
    checked_ns: Option<f64>,
    /// How many times this rank has passed each barrier round ([`Transport::signal`]).
    signals: [u64; layout::SIGNAL_ROUNDS],
    /// The local rank this one waits for in each barrier round, once it has: the one
    /// whose counts move with this rank's.
    signal_from: [Option<usize>; layout::SIGNAL_ROUNDS],
}

fn next_seq(s: u32) -> u32 {
    if s == u32::MAX { 1 } else { s + 1 }
}

/// Whether process `pid` has exited (or is a zombie waiting to be reaped).
fn is_dead(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    match kill(Pid::from_raw(pid), None) {
        Err(Errno::ESRCH) => true,
        Err(_) => false,
        Ok(()) => std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .map(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
            })
            .unwrap_or(false),
    }
}

impl ShmTransport {
    /// This rank's end of the queues in `seg`. `peers` are the world ranks of the node in
    /// local order and `me` this rank's index among them.
    pub fn new(seg: Segment, me: usize, peers: Vec<u32>, node: String, spin: u32) -> Self {
        Self::new_in(Arc::new(seg), me, peers, node, spin)
    }

    fn new_in(seg: Arc<Segment>, me: usize, peers: Vec<u32>, node: String, spin: u32) -> Self {
        let p = peers.len();
        let mut t = ShmTransport {
            seg,
            pids: None,
            me,
            peers,
            node,
            spin,
            single_copy: None,
            written: 0,
            pending: None,
            send_seq: vec![0; p],
            recv_seq: vec![0; p],
            recv_hint: vec![0; p],
            hint_held: vec![true; p],
            ring_head: vec![0; p],
            ring_seen: vec![0; p],
            ring_pos: vec![0; p],
            readers: Vec::with_capacity(p),
            near: vec![true; p],
            checked_ns: None,
            signals: [0; layout::SIGNAL_ROUNDS],
            signal_from: [None; layout::SIGNAL_ROUNDS],
        };
        t.load_rings();
        t
    }

    /// This rank's end of a lane's queues (`lanes.rs`): as [`ShmTransport::new`], with the
    /// local ranks' PIDs given, since the lane's records are those of the node's ranks in
    /// its own order. Bind it to the lane claimed for each collective with
    /// [`ShmTransport::rebind`].
    pub fn for_lane(
        seg: Arc<Segment>,
        me: usize,
        peers: Vec<u32>,
        pids: Vec<i32>,
        node: String,
        spin: u32,
    ) -> Self {
        assert_eq!(pids.len(), peers.len(), "one PID per local rank");
        let mut t = ShmTransport::new_in(seg, me, peers, node, spin);
        t.pids = Some(pids);
        t
    }

    /// Moves this end to `seg`, a lane every local rank of this transport has just claimed
    /// together, with every count back at zero: the lane's control words and signal lines
    /// are all zero when it is claimed, and this rank's queue state must match them. The
    /// rings go on from the head and tail words the lane's last users left.
    pub fn rebind(&mut self, seg: Arc<Segment>) {
        debug_assert!(self.pending.is_none(), "a descriptor still being read");
        debug_assert!(seg.layout().ranks >= self.peers.len(), "a lane too small");
        self.seg = seg;
        self.written = 0;
        self.pending = None;
        self.send_seq.fill(0);
        self.recv_seq.fill(0);
        self.recv_hint.fill(0);
        self.hint_held.fill(true);
        self.signals = [0; layout::SIGNAL_ROUNDS];
        self.signal_from = [None; layout::SIGNAL_ROUNDS];
        self.load_rings();
    }

    /// Whether this rank has counted a barrier round since it was bound to its segment
    /// ([`ShmTransport::rebind`]): its signal line is then not all zero.
    pub fn has_signaled(&self) -> bool {
        self.signals.iter().any(|&n| n > 0)
    }

    /// Fails if another local rank has died (a wait outside the queues, such as a lane's
    /// claim, checks its peers with it).
    pub fn check_peers_alive(&self) -> Result<()> {
        (0..self.peers.len())
            .filter(|&j| j != self.me)
            .try_for_each(|j| self.check_alive(j))
    }

    /// The PID of local rank `j`.
    fn pid(&self, j: usize) -> i32 {
        match &self.pids {
            Some(p) => p[j],
            None => self.seg.pid(j),
        }
    }

    /// Reads messages of at least `threshold` bytes straight from the sender's buffer
    /// (`None`: never). Every rank of the node must use the same value; check with
    /// [`ShmTransport::probe_single_copy`] first.
    pub fn set_single_copy(&mut self, threshold: Option<usize>) {
        self.single_copy = threshold.map(|t| t.max(1));
    }

    /// Which local ranks (by local index) share this rank's lowest group inside the node
    /// (`RankPlan::near_peers`); all of them unless set. A reduce's partial result for a
    /// rank that does not goes by single copy from half the threshold: across dies or
    /// sockets the queues pay two transfers of every line (the slot's lines come back from
    /// the reader's cache before the writer can fill them, then go to the reader), while
    /// the reader of the sender's own buffer pays one.
    pub fn set_near(&mut self, near: Vec<bool>) {
        assert_eq!(near.len(), self.peers.len(), "one entry per local rank");
        self.near = near;
    }

    /// The one-way cache-line time [`ShmTransport::check_near`] measured, if it ran.
    pub fn checked_line_ns(&self) -> Option<f64> {
        self.checked_ns
    }

    /// Whether local rank `j` counts as near (see [`ShmTransport::set_near`]).
    pub fn is_near(&self, j: usize) -> bool {
        self.near[j]
    }

    /// The single-copy threshold in force.
    pub fn single_copy(&self) -> Option<usize> {
        self.single_copy
    }

    /// The world ranks of the node, in local order.
    pub fn peers(&self) -> &[u32] {
        &self.peers
    }

    /// This rank's local index.
    pub fn local_index(&self) -> usize {
        self.me
    }
}

impl Transport for ShmTransport {
    fn send(&mut self, to: &[u32], data: &[u8]) -> Result<()> {
        if Self::ringed(data.len()) {
            for &r in to {
                let j = self.local(r)?;
                self.ring_put(j, data)?;
            }
            return Ok(());
        }
        if let [r] = *to
            && self.one_entry(data.len())
        {
            let j = self.local(r)?;
            if !self.single_copy_one_way(self.near[j], data.len()) {
                return self.send_one(j, data);
            }
        }
        self.set_readers(to)?;
        let single_copy = self.single_copy_to_readers(data.len());
        self.send_as(data, single_copy)
    }

    /// For a rank that shares this rank's nearest cache, stays in the queues: the
    /// receiver combines each fragment as it arrives while this rank copies in the next,
    /// which beats reading everything first and combining after. For one that does not
    /// ([`ShmTransport::set_near`]), from half the single-copy threshold the receiver reads
    /// and combines straight from `data`.
    fn send_to_combine(&mut self, to: u32, data: &[u8]) -> Result<()> {
        let j = self.local(to)?;
        if Self::ringed(data.len()) {
            return self.ring_put(j, data);
        }
        let single_copy = !self.near[j] && self.single_copy_far(data.len());
        if !single_copy && self.one_entry(data.len()) {
            return self.send_one(j, data);
        }
        self.set_readers(&[to])?;
        self.send_as(data, single_copy)
    }

    fn recv(&mut self, from: u32, buf: &mut [u8]) -> Result<()> {
        if self.take_small(from, buf, |src, dst| dst.copy_from_slice(src))? {
            return Ok(());
        }
        self.take(from, buf, copy_out)
    }

    fn recv_reduce(
        &mut self,
        from: u32,
        acc: &mut [u8],
        tmp: &mut [u8],
        op: &dyn Combine,
    ) -> Result<()> {
        if self.take_small(from, acc, |src, acc| op.combine(acc, src))? {
            return Ok(());
        }
        self.take(from, acc, |frag, acc| combine_in(op, frag, acc, tmp))
    }

    /// A message that [`Transport::send`] would send by single copy goes as one
    /// descriptor of `data`: the transfer completes once every reader has copied it out
    /// (the caller keeps `data` in place until then). Anything smaller goes through the
    /// queues, a fragment per free slot.
    /// A message that the sender sends from its own buffer ([`Transport::send_to_combine`]
    /// to a far rank) is read straight into `acc`, a piece at a time, and `own` combined
    /// into it: two passes over the data instead of three (no copy of `own` first, no
    /// scratch). One that comes through the queues is combined fragment by fragment onto
    /// `own`, copied first while the sender fills the queues.
    fn recv_reduce_onto(
        &mut self,
        from: u32,
        acc: &mut [u8],
        own: &[u8],
        tmp: &mut [u8],
        op: &dyn Combine,
    ) -> Result<()> {
        assert_eq!(acc.len(), own.len(), "recv_reduce_onto: lengths differ");
        let w = self.local(from)?;
        // The sender's choice in `send_to_combine` (both sides agree on who is near).
        if Self::ringed(acc.len()) || self.near[w] || !self.single_copy_far(acc.len()) {
            acc.copy_from_slice(own);
            return self.recv_reduce(from, acc, tmp, op);
        }
        let mut at = 0;
        self.take(from, acc, |frag, part| {
            let mine = &own[at..at + part.len()];
            at += part.len();
            combine_onto(op, frag, part, mine, false)
        })
    }

    /// Through the exchange of [`Transport::sendrecv`], with the partner's message
    /// combined onto `own` as it is taken (as in `recv_reduce_onto`): from the partner's
    /// buffer, read straight into `acc` and `own` combined in; through the queues,
    /// combined fragment by fragment onto `own`, copied first. No scratch either way.
    #[allow(clippy::too_many_arguments)]
    fn sendrecv_onto(
        &mut self,
        to: u32,
        data: &[u8],
        from: u32,
        acc: &mut [u8],
        own: &[u8],
        _tmp: &mut [u8],
        op: &dyn Combine,
    ) -> Result<()> {
        assert_eq!(acc.len(), own.len(), "sendrecv_onto: lengths differ");
        // The partner sends as this rank does (`exchange`): through the queues, `acc`
        // holds `own` before the first fragment comes.
        let ready =
            Self::ringed(acc.len()) || !self.exchange_single_copy(acc.len(), self.local(from)?);
        if ready {
            acc.copy_from_slice(own);
        }
        let mut at = 0;
        self.exchange(to, data, from, acc, &mut |frag, part| {
            let mine = &own[at..at + part.len()];
            at += part.len();
            combine_onto(op, frag, part, mine, ready)
        })
    }

    fn lend(&mut self, from: u32, buf: &mut [u8]) -> Result<()> {
        self.lend_to(from, buf)
    }

    fn wait_lent(&mut self, from: u32, buf: &mut [u8]) -> Result<()> {
        self.wait_lent_from(from, buf)
    }

    fn write_into(&mut self, to: u32, data: &[u8]) -> Result<()> {
        self.write_to(to, data)
    }

    fn poll_lend(&mut self, transfer: &mut Transfer, from: u32, buf: &mut [u8]) -> Result<bool> {
        self.poll_lend_to(transfer, from, buf)
    }

    fn poll_wait_lent(
        &mut self,
        transfer: &mut Transfer,
        from: u32,
        buf: &mut [u8],
    ) -> Result<bool> {
        self.poll_wait_lent_from(transfer, from, buf)
    }

    fn poll_write_into(&mut self, transfer: &mut Transfer, to: u32, data: &[u8]) -> Result<bool> {
        self.poll_write_to(transfer, to, data)
    }

    fn poll_send(&mut self, transfer: &mut Transfer, to: &[u32], data: &[u8]) -> Result<bool> {
        if Self::ringed(data.len()) {
            // `done` counts the readers whose ring has the record.
            while let Some(&r) = to.get(transfer.done) {
                let j = self.local(r)?;
                if !self.try_ring_send(j, data) {
                    return Ok(false);
                }
                transfer.done += 1;
            }
            return Ok(true);
        }
        self.set_readers(to)?;
        if self.single_copy_to_readers(data.len()) {
            if transfer.slot.is_none() {
                if !self.try_send(data, true)? {
                    return Ok(false);
                }
                let k = self.pending.take().expect("a descriptor was just written");
                transfer.slot = Some(k);
            }
            let k = transfer.slot.expect("set above");
            return Ok(self.drained(k));
        }
        let n = self.units(data.len(), false);
        while transfer.done < n {
            if !self.try_send(
                &data[self.unit_range(transfer.done, data.len(), false)],
                false,
            )? {
                return Ok(false);
            }
            transfer.done += 1;
        }
        Ok(true)
    }

    fn poll_recv(
        &mut self,
        transfer: &mut Transfer,
        from: u32,
        buf: &mut [u8],
        op: Option<&dyn Combine>,
    ) -> Result<bool> {
        let w = self.local(from)?;
        if Self::ringed(buf.len()) {
            if transfer.started {
                return Ok(true);
            }
            let took = match op {
                None => self.try_ring_take(w, buf, &mut copy_out)?,
                Some(op) => {
                    let tmp = &mut transfer.tmp;
                    self.try_ring_take(w, buf, &mut |frag: Frag<'_>, acc: &mut [u8]| {
                        combine_in(op, frag, acc, tmp)
                    })?
                }
            };
            if took {
                transfer.started = true;
                transfer.done = buf.len();
            }
            return Ok(took);
        }
        // An empty message still takes one entry.
        while !transfer.started || transfer.done < buf.len() {
            let rest = &mut buf[transfer.done..];
            let got = match op {
                None => self.try_take(w, rest, &mut copy_out)?,
                Some(op) => {
                    let tmp = &mut transfer.tmp;
                    self.try_take(w, rest, &mut |frag: Frag<'_>, acc: &mut [u8]| {
                        if matches!(frag, Frag::Remote { .. }) {
                            tmp.resize(acc.len().min(POLL_REDUCE_PIECE), 0);
                        }
                        combine_in(op, frag, acc, tmp)
                    })?
                }
            };
            match got {
                Some(n) => {
                    transfer.started = true;
                    transfer.done += n;
                }
                None => return Ok(false),
            }
        }
        Ok(true)
    }

    fn check_peer(&mut self, peer: u32) -> Result<()> {
        let j = self.local(peer)?;
        self.check_alive(j)
    }

    /// Through the signal lines (layout.rs): this rank counts the round in its own line,
    /// which `to` waits on, and waits until `from`'s count reaches the same. Every member
    /// passes each round once per barrier, so the counts agree; a count beyond ours means
    /// `from` has already gone on to a later barrier, which it could not without us.
    fn signal(&mut self, round: usize, to: u32, from: u32) -> Result<()> {
        if round >= layout::SIGNAL_ROUNDS {
            return self.sendrecv(to, &[], from, &mut []);
        }
        let w = self.local(from)?;
        self.local(to)?;
        let n = self.raise(round, w);
        self.await_signal(w, round, n)
    }

    /// Every member counts its passes of rounds 0 and 1 in its signal line. Round 0 says
    /// it has arrived, as in the dissemination: the first member waits until every
    /// other's round-0 count reaches its own, then raises its round-1 count, the release,
    /// which the others wait for. The first member counts its arrival too, before it
    /// waits: a member that waits for a message from it meanwhile sees it in a barrier
    /// (`check_not_in_barrier`). The others count round 1 when they arrive, so that every
    /// member's counts of both rounds move together, whichever form each barrier takes.
    fn root_first_barrier(&mut self, members: &[u32], me: usize) -> Result<()> {
        let root = self.local(members[0])?;
        if me != 0 {
            self.raise(0, root);
            let n = self.raise(1, root);
            return self.await_signal(root, 1, n);
        }
        // The first other member stands for them all in `check_not_in_barrier`.
        let first = match members.get(1) {
            Some(&m) => self.local(m)?,
            None => root,
        };
        let n = self.raise(0, first);
        for &m in &members[1..] {
            let w = self.local(m)?;
            self.await_signal(w, 0, n)?;
        }
        self.raise(1, first);
        Ok(())
    }

    /// The nonblocking [`ShmTransport::signal`]: the first poll raises this rank's count.
    fn poll_signal(
        &mut self,
        transfer: &mut Transfer,
        round: usize,
        to: u32,
        from: u32,
    ) -> Result<bool> {
        if round >= layout::SIGNAL_ROUNDS {
            return super::exchange_empty(self, transfer, to, from);
        }
        let w = self.local(from)?;
        self.local(to)?;
        if !transfer.started {
            transfer.started = true;
            transfer.done = self.raise(round, w) as usize;
        }
        Ok(self.reached(w, round, transfer.done as u64))
    }

    fn sendrecv(&mut self, to: u32, data: &[u8], from: u32, buf: &mut [u8]) -> Result<()> {
        self.exchange(to, data, from, buf, &mut copy_out)
    }
}
