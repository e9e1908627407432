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

pub mod layout;
pub mod segment;

use std::sync::atomic::Ordering;
use std::time::Instant;

use std::io::IoSliceMut;

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::sys::uio::{RemoteIoVec, process_vm_readv};
use nix::unistd::Pid;

pub use layout::Layout;
pub use segment::Segment;

use super::{Transfer, Transport};
use crate::backoff::Backoff;
use crate::combine::Combine;
use crate::error::{Error, Result};

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

/// A cache line that takes longer than this (nanoseconds, one way) between two ranks
/// says they do not share a cache, whatever the node reports: on the dev cluster's VM, a
/// line takes 27 ns between hardware threads of one core, 35-58 ns between cores sharing
/// an L3 and 120-240 ns between cores on different dies, while the guest reports one L3.
pub const NEAR_LINE_NS: f64 = 100.0;

/// The cache-line times [`ShmTransport::check_near`] measured in this process, by the
/// partner's PID. Both partners keep the result, so both skip the next measurement.
static LINE_TIMES: std::sync::Mutex<Vec<(i32, f64)>> = std::sync::Mutex::new(Vec::new());

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
    seg: Segment,
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

/// A fragment as its reader finds it.
enum Frag<'a> {
    /// In the writer's queue.
    Queue(&'a [u8]),
    /// In the writer's own buffer, at `addr` in process `pid`.
    Remote { pid: i32, addr: u64 },
}

/// Copies `dst.len()` bytes at `addr` in process `pid` into `dst`.
fn read_remote(pid: i32, addr: u64, dst: &mut [u8]) -> nix::Result<()> {
    let mut done = 0;
    while done < dst.len() {
        let remote = [RemoteIoVec {
            base: addr as usize + done,
            len: dst.len() - done,
        }];
        let mut local = [IoSliceMut::new(&mut dst[done..])];
        match process_vm_readv(Pid::from_raw(pid), &mut local, &remote)? {
            0 => return Err(Errno::EFAULT),
            n => done += n,
        }
    }
    Ok(())
}

/// Combines a fragment into `acc`. A remote buffer is read and combined in pieces of at
/// most [`REDUCE_PIECE`] bytes through `tmp` (not empty; a piece is as long as `tmp`
/// allows).
fn combine_in(op: &dyn Combine, frag: Frag<'_>, acc: &mut [u8], tmp: &mut [u8]) -> nix::Result<()> {
    match frag {
        Frag::Queue(src) => op.combine(acc, src),
        Frag::Remote { pid, addr } => {
            let piece = REDUCE_PIECE.min(tmp.len());
            let piece = (piece - piece % op.elem_size()).max(op.elem_size());
            for (i, a) in acc.chunks_mut(piece).enumerate() {
                let t = &mut tmp[..a.len()];
                read_remote(pid, addr + (i * piece) as u64, t)?;
                op.combine(a, t);
            }
        }
    }
    Ok(())
}

/// Combines a fragment onto `mine` (this rank's own contribution) in `part`: a queue
/// fragment into `part`, which already holds `mine` if `ready`; a remote buffer read
/// straight into `part`, a piece at a time, with `mine` combined in.
fn combine_onto(
    op: &dyn Combine,
    frag: Frag<'_>,
    part: &mut [u8],
    mine: &[u8],
    ready: bool,
) -> nix::Result<()> {
    match frag {
        Frag::Queue(src) => {
            if !ready {
                part.copy_from_slice(mine);
            }
            op.combine(part, src);
        }
        Frag::Remote { pid, addr } => {
            let piece = (REDUCE_PIECE - REDUCE_PIECE % op.elem_size()).max(op.elem_size());
            for (i, (p, m)) in part.chunks_mut(piece).zip(mine.chunks(piece)).enumerate() {
                read_remote(pid, addr + (i * piece) as u64, p)?;
                op.combine(p, m);
            }
        }
    }
    Ok(())
}

/// Copies a fragment into `dst`.
fn copy_out(frag: Frag<'_>, dst: &mut [u8]) -> nix::Result<()> {
    match frag {
        Frag::Queue(src) => dst.copy_from_slice(src),
        Frag::Remote { pid, addr } => read_remote(pid, addr, dst)?,
    }
    Ok(())
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
        let p = peers.len();
        ShmTransport {
            seg,
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
            readers: Vec::with_capacity(p),
            near: vec![true; p],
            checked_ns: None,
            signals: [0; layout::SIGNAL_ROUNDS],
            signal_from: [None; layout::SIGNAL_ROUNDS],
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

    /// Checks the node's report of what its ranks share against the machine: this rank
    /// and its partner (the local rank whose index differs in the last bit), if the plan
    /// puts them in one group, time a cache line between them ([`ShmTransport::line_time`],
    /// the fastest of 5 x 32 round trips, well under a millisecond). If it takes more than
    /// [`NEAR_LINE_NS`], the report is wrong (a virtual machine's, typically) and this rank
    /// treats every peer as far. Both partners call it; nothing happens with `spin` 0
    /// (ranks outnumber cores, so the time would be the scheduler's). Returns the time
    /// measured. A process times the line to a partner process once: later contexts (the
    /// PMPI library makes one per communicator) take the time both partners kept.
    pub fn check_near(&mut self) -> Result<Option<f64>> {
        let partner = self.me ^ 1;
        if self.spin == 0 || partner >= self.peers.len() || !self.near[partner] {
            return Ok(None);
        }
        let pid = self.seg.pid(partner);
        let kept = LINE_TIMES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .find(|&&(p, _)| p == pid)
            .map(|&(_, ns)| ns);
        let ns = match kept {
            Some(ns) => ns,
            None => {
                let ns = self.line_time(self.peers[partner], 5, 32)?;
                LINE_TIMES
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push((pid, ns));
                ns
            }
        };
        if ns > NEAR_LINE_NS {
            self.near.fill(false);
        }
        self.checked_ns = Some(ns);
        Ok(Some(ns))
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

    /// Checks that this rank may read every local peer's memory with `process_vm_readv`
    /// (by reading the segment's magic through each peer's mapping). Call after every
    /// local rank has attached.
    pub fn probe_single_copy(&self) -> std::result::Result<(), String> {
        if crate::fault::hit("no-single-copy") {
            return Err(format!(
                "rank {} cannot read its peers' memory (simulated: {}=no-single-copy)",
                self.peers[self.me],
                crate::fault::FAULT_ENV
            ));
        }
        let mut word = [0u8; 8];
        for j in (0..self.peers.len()).filter(|&j| j != self.me) {
            let addr = self.seg.base_of(j) + layout::header::MAGIC as u64;
            match read_remote(self.seg.pid(j), addr, &mut word) {
                Ok(()) if u64::from_ne_bytes(word) == layout::MAGIC => {}
                Ok(()) => return Err(format!("rank {} reads garbage", self.peers[self.me])),
                Err(e) => {
                    return Err(format!(
                        "rank {} cannot read rank {}'s memory: {}",
                        self.peers[self.me],
                        self.peers[j],
                        e.desc()
                    ));
                }
            }
        }
        Ok(())
    }

    /// Bounces a cache line between this rank and `peer` (a world rank on this node),
    /// `rounds` round trips in each of `batches` batches; both call it, each naming the
    /// other. The lower local index leads and returns each batch's one-way time in
    /// nanoseconds (half a round trip), the other returns nothing (as does a rank that
    /// names itself). Each side writes only its own probe line and spins on the
    /// other's, so a round trip is two transfers of a line between the two cores: the
    /// floor under any handoff between them.
    pub fn ping_pong(&self, peer: u32, batches: usize, rounds: u32) -> Result<Vec<f64>> {
        let p = self.local(peer)?;
        if p == self.me {
            return Ok(Vec::new());
        }
        let l = self.seg.layout();
        let mine = self.seg.atomic_u64(l.probe(self.me));
        let leads = self.me < p;
        // A value names the follower and the round, so a line left from an earlier
        // measurement (a higher round, or another follower) never passes for a new one.
        let tag = (p.max(self.me) as u64) << 32;
        let wait_for = |v: u64| self.wait_probe(p, |x| x == v).map(drop);
        let mut out = Vec::with_capacity(if leads { batches } else { 0 });
        for b in 0..batches as u64 {
            let t0 = Instant::now();
            for k in 1..=u64::from(rounds) {
                let v = tag | (b * u64::from(rounds) + k);
                if leads {
                    // SYNC: Release/Acquire order the rounds; no data rides on the line.
                    mine.store(v, Ordering::Release);
                    wait_for(v)?;
                } else {
                    wait_for(v)?;
                    mine.store(v, Ordering::Release);
                }
            }
            if leads {
                out.push(t0.elapsed().as_secs_f64() * 1e9 / (2.0 * f64::from(rounds)));
            }
        }
        Ok(out)
    }

    /// Waits until local rank `p`'s probe line holds a value that `done` accepts, and
    /// returns it. Spins; yields the core now and then (a round trip takes well under the
    /// first yield when both ranks have cores of their own) and checks `p` is alive.
    fn wait_probe(&self, p: usize, done: impl Fn(u64) -> bool) -> Result<u64> {
        let theirs = self.seg.atomic_u64(self.seg.layout().probe(p));
        let mut spins = 0u32;
        loop {
            // SYNC: Acquire pairs with the other side's Release store of the value.
            let v = theirs.load(Ordering::Acquire);
            if done(v) {
                return Ok(v);
            }
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(1 << 10) {
                std::thread::yield_now();
            }
            if spins.is_multiple_of(1 << 16) {
                self.check_alive(p)?;
            }
        }
    }

    /// The one-way time of a cache line between this rank and `peer` (a world rank on
    /// this node), in nanoseconds: the fastest of [`ShmTransport::ping_pong`]'s batches
    /// (whatever else runs on the cores only adds to a batch), which the leader then hands
    /// to the other, so both get it. Both call it, each naming the other; a rank naming
    /// itself gets 0.
    pub fn line_time(&self, peer: u32, batches: usize, rounds: u32) -> Result<f64> {
        let p = self.local(peer)?;
        if p == self.me {
            return Ok(0.0);
        }
        let t = self.ping_pong(peer, batches, rounds)?;
        // Bit 31 marks the result (in nanoseconds, below 2^31), apart from round numbers.
        const RESULT: u64 = 1 << 31;
        let tag = (p.max(self.me) as u64) << 32 | RESULT;
        let mine = self.seg.atomic_u64(self.seg.layout().probe(self.me));
        // The leader sends the result and waits until the other echoes it (so that
        // neither line is used again before both know it).
        if self.me < p {
            let ns = t.iter().copied().fold(f64::INFINITY, f64::min);
            let code = (ns.round() as u64).min(RESULT - 1);
            // SYNC: Release/Acquire with the other side's wait; the value is the message.
            mine.store(tag | code, Ordering::Release);
            self.wait_probe(p, |v| v == tag | code)?;
            Ok(ns)
        } else {
            let v = self.wait_probe(p, |v| v & !(RESULT - 1) == tag)?;
            // SYNC: as above.
            mine.store(v, Ordering::Release);
            Ok((v & (RESULT - 1)) as f64)
        }
    }

    /// Counts one more pass of barrier round `round` in this rank's signal line and
    /// returns the count.
    fn raise(&mut self, round: usize, from: usize) -> u64 {
        self.signal_from[round] = Some(from);
        self.signals[round] += 1;
        let n = self.signals[round];
        // SYNC: Release orders everything this rank did before the barrier before the
        // count; the Acquire load in `reached` pairs with it.
        self.seg
            .atomic_u64(self.seg.layout().signal(self.me, round))
            .store(n, Ordering::Release);
        n
    }

    /// Waits until local rank `w` has passed barrier round `round` `n` times.
    fn await_signal(&self, w: usize, round: usize, n: u64) -> Result<()> {
        let mut backoff = Backoff::new(self.spin);
        while !self.reached(w, round, n) {
            if backoff.pause() {
                self.check_alive(w)?;
                self.check_not_sending(w)?;
            }
        }
        Ok(())
    }

    /// Whether local rank `w` has passed barrier round `round` `n` times.
    fn reached(&self, w: usize, round: usize, n: u64) -> bool {
        // SYNC: Acquire pairs with `w`'s Release store in `raise`.
        self.seg
            .atomic_u64(self.seg.layout().signal(w, round))
            .load(Ordering::Acquire)
            >= n
    }

    /// Fails if writer `w`, whose signal this rank has waited for a while, has a message
    /// for this rank that it has not taken: `w` is in a collective other than the barrier
    /// this rank is in (every earlier message from `w` was taken before the barrier).
    fn check_not_sending(&self, w: usize) -> Result<()> {
        let l = self.seg.layout();
        let want = next_seq(self.recv_seq[w]);
        let waiting = (0..l.slots).any(|k| {
            // SYNC: Relaxed: a hint on a slow path; the wait goes on either way.
            let word = self
                .seg
                .atomic_u64(l.control(w, k, self.me))
                .load(Ordering::Relaxed);
            (word >> 32) as u32 == want
        });
        if waiting {
            return Err(self.mismatch(w, "a barrier", "another collective"));
        }
        Ok(())
    }

    /// Fails if writer `w`, whose message this rank has waited for a while, has passed a
    /// barrier round more often than this rank, in a round where this rank waits for `w`
    /// (their counts move together): `w` is in a barrier while this rank waits for data
    /// (which `w` would have sent before the barrier).
    fn check_not_in_barrier(&self, w: usize) -> Result<()> {
        let ahead = (0..layout::SIGNAL_ROUNDS)
            .any(|r| self.signal_from[r] == Some(w) && self.reached(w, r, self.signals[r] + 1));
        if ahead {
            return Err(self.mismatch(w, "another collective", "a barrier"));
        }
        Ok(())
    }

    fn mismatch(&self, w: usize, mine: &str, theirs: &str) -> Error {
        Error::Mismatch {
            reason: format!(
                "rank {} waits in {mine} while rank {} is in {theirs}; the ranks called \
                 different collectives",
                self.peers[self.me], self.peers[w]
            ),
        }
    }

    fn local(&self, rank: u32) -> Result<usize> {
        self.peers
            .binary_search(&rank)
            .map_err(|_| Error::NotLocal {
                rank,
                node: self.node.clone(),
            })
    }

    /// Whether a message of `len` bytes goes as one single-copy descriptor (receivers
    /// accept either form; the sender decides).
    fn direct(&self, len: usize) -> bool {
        self.single_copy.is_some_and(|t| len >= t)
    }

    /// [`ShmTransport::direct`] for a message to a rank that is not near.
    fn direct_far(&self, len: usize) -> bool {
        self.direct(len.saturating_mul(FAR_DIVISOR))
    }

    /// [`ShmTransport::direct`] for a one-way message to readers that are all near (later)
    /// or not.
    fn direct_one_way(&self, all_near: bool, len: usize) -> bool {
        if all_near {
            self.direct(len / NEAR_FACTOR)
        } else {
            self.direct_far(len)
        }
    }

    /// [`ShmTransport::direct_one_way`] for `self.readers`.
    fn direct_to_readers(&self, len: usize) -> bool {
        self.direct_one_way(self.readers.iter().all(|&j| self.near[j]), len)
    }

    /// The slot of this rank's queue that its next entry goes to.
    fn write_slot(&self) -> usize {
        (self.written % self.seg.layout().slots as u64) as usize
    }

    /// How many queue entries a message of `len` bytes takes.
    fn units(&self, len: usize, direct: bool) -> usize {
        if direct {
            1
        } else {
            len.div_ceil(self.seg.layout().fragment).max(1)
        }
    }

    /// The part of a `len`-byte message that entry `i` carries.
    fn unit_range(&self, i: usize, len: usize, direct: bool) -> std::ops::Range<usize> {
        if direct {
            return 0..len;
        }
        let f = self.seg.layout().fragment;
        (i * f).min(len)..((i + 1) * f).min(len)
    }

    /// Receives `buf.len()` bytes from `from` entry by entry (fragments, or one
    /// descriptor: the sender decides), handing each and its part of `buf` to `consume`.
    fn take(
        &mut self,
        from: u32,
        buf: &mut [u8],
        mut consume: impl FnMut(Frag<'_>, &mut [u8]) -> nix::Result<()>,
    ) -> Result<()> {
        let w = self.local(from)?;
        let mut off = 0;
        loop {
            let mut backoff = Backoff::new(self.spin);
            let n = loop {
                if let Some(n) = self.try_take(w, &mut buf[off..], &mut consume)? {
                    break n;
                }
                if backoff.pause() {
                    self.check_alive(w)?;
                    self.check_not_in_barrier(w)?;
                }
            };
            off += n;
            if off == buf.len() {
                return Ok(());
            }
        }
    }

    /// The error for a failed copy out of writer `w`'s memory.
    fn consume_failed(&self, w: usize, source: Errno) -> Error {
        match source {
            Errno::ESRCH => self.died(w),
            source => Error::SingleCopy {
                rank: self.peers[w],
                node: self.node.clone(),
                source,
            },
        }
    }

    fn check_alive(&self, local: usize) -> Result<()> {
        if is_dead(self.seg.pid(local)) {
            return Err(self.died(local));
        }
        Ok(())
    }

    fn died(&self, local: usize) -> Error {
        Error::PeerDied {
            rank: self.peers[local],
            node: self.node.clone(),
            op: "a collective",
        }
    }

    /// Whether every reader has released slot `k` of this rank's queue.
    fn drained(&self, k: usize) -> bool {
        let l = self.seg.layout();
        (0..l.ranks).all(|j| {
            // SYNC: Acquire pairs with the reader's Release store of 0, so its copy out of
            // the slot (or out of our buffer) is complete.
            self.seg
                .atomic_u64(l.control(self.me, k, j))
                .load(Ordering::Acquire)
                == 0
        })
    }

    /// Puts one entry into this rank's next slot for `self.readers`, if the slot is free:
    /// the bytes of `frag`, or with `direct` a descriptor of `frag` itself.
    fn try_send(&mut self, frag: &[u8], direct: bool) -> Result<bool> {
        let l = *self.seg.layout();
        let k = self.write_slot();
        if !self.drained(k) {
            return Ok(false);
        }
        let len = if direct {
            let mut d = [0u8; layout::DESCRIPTOR];
            d[..8].copy_from_slice(&(frag.as_ptr() as u64).to_ne_bytes());
            d[8..].copy_from_slice(&(frag.len() as u64).to_ne_bytes());
            // SAFETY: slot k is drained and only this rank writes its own queue.
            unsafe { self.seg.write(l.data(self.me, k), &d) };
            self.pending = Some(k);
            layout::SINGLE_COPY | layout::DESCRIPTOR as u64
        } else if frag.len() <= layout::INLINE_MAX {
            for &j in &self.readers {
                // SAFETY: reader j's word of slot k is 0, so j does not read its line, and
                // only this rank writes its own queue's lines (the bytes after the word,
                // which the Release store of the word below publishes).
                unsafe {
                    self.seg
                        .write(l.control(self.me, k, j) + layout::INLINE_AT, frag)
                };
            }
            layout::INLINE | frag.len() as u64
        } else {
            // SAFETY: every reader's word of slot k is 0, so nobody reads the slot, and
            // only this rank writes its own queue.
            unsafe { self.seg.write(l.data(self.me, k), frag) };
            frag.len() as u64
        };
        for &j in &self.readers {
            self.send_seq[j] = next_seq(self.send_seq[j]);
            let word = u64::from(self.send_seq[j]) << 32 | len;
            // SYNC: Release publishes the slot's bytes; the reader's Acquire load of this
            // word in try_take pairs with it.
            self.seg
                .atomic_u64(l.control(self.me, k, j))
                .store(word, Ordering::Release);
        }
        self.written += 1;
        Ok(true)
    }

    /// Whether the readers of our pending descriptor are done with our buffer.
    fn try_finish(&mut self) -> bool {
        match self.pending {
            Some(k) if !self.drained(k) => false,
            _ => {
                self.pending = None;
                true
            }
        }
    }

    /// Finds the next entry from writer `w`; if it has arrived, hands it and the part of
    /// `rest` (what remains of the message) that it fills to `consume`, releases the slot
    /// and returns how many bytes of `rest` it filled. A fragment fills
    /// `min(fragment, rest.len())` bytes, a descriptor all of `rest`.
    fn try_take(
        &mut self,
        w: usize,
        rest: &mut [u8],
        consume: &mut impl FnMut(Frag<'_>, &mut [u8]) -> nix::Result<()>,
    ) -> Result<Option<usize>> {
        let l = *self.seg.layout();
        let want = next_seq(self.recv_seq[w]);
        for d in 0..l.slots {
            let k = (self.recv_hint[w] + d) % l.slots;
            let word_ref = self.seg.atomic_u64(l.control(w, k, self.me));
            // SYNC: Acquire pairs with the writer's Release store in try_send.
            let word = word_ref.load(Ordering::Acquire);
            if (word >> 32) as u32 != want {
                continue;
            }
            let direct = word & layout::SINGLE_COPY != 0;
            let expect = if direct {
                rest.len()
            } else {
                rest.len().min(l.fragment)
            };
            // SAFETY (the reads below): the word addressed this slot to us, and the
            // writer leaves the slot and our control line (and, for a descriptor, its
            // buffer) alone until we clear the word below.
            let (len, frag) = if direct {
                let mut d = [0u8; layout::DESCRIPTOR];
                unsafe { self.seg.read(l.data(w, k), &mut d) };
                let addr = u64::from_ne_bytes(d[..8].try_into().expect("8 bytes"));
                let len = u64::from_ne_bytes(d[8..].try_into().expect("8 bytes"));
                let pid = self.seg.pid(w);
                (len as usize, Frag::Remote { pid, addr })
            } else if word & layout::INLINE != 0 {
                let len = (word & layout::LEN_MASK) as usize;
                let at = l.control(w, k, self.me) + layout::INLINE_AT;
                let n = len.min(expect).min(layout::INLINE_MAX);
                (len, Frag::Queue(unsafe { self.seg.slice(at, n) }))
            } else {
                let len = (word & layout::LEN_MASK) as usize;
                let frag = unsafe { self.seg.slice(l.data(w, k), len.min(expect)) };
                (len, Frag::Queue(frag))
            };
            if len != expect {
                return Err(Error::ShmLayout {
                    path: self.seg.path().into(),
                    reason: format!(
                        "rank {} expected {expect} bytes from rank {} but got {len}; the \
                         ranks called different collectives or counts",
                        self.peers[self.me], self.peers[w]
                    ),
                });
            }
            if let Err(e) = consume(frag, &mut rest[..len]) {
                return Err(self.consume_failed(w, e));
            }
            // SYNC: Release orders our copy before the writer's Acquire check in try_send.
            word_ref.store(0, Ordering::Release);
            self.recv_seq[w] = want;
            self.hint_held[w] = d == 0;
            self.recv_hint[w] = (k + 1) % l.slots;
            // Start fetching the line where the writer's next fragment to us will be: when
            // the writer is ahead it is there already, and the transfer overlaps whatever
            // this rank does until it looks.
            self.seg.prefetch(l.control(w, self.recv_hint[w], self.me));
            return Ok(Some(len));
        }
        Ok(None)
    }

    /// Whether a message of `len` bytes that does not go by single copy is one queue
    /// entry: inline in the reader's control line up to [`layout::INLINE_MAX`] bytes, else
    /// one fragment.
    fn one_entry(&self, len: usize) -> bool {
        (1..=self.seg.layout().fragment).contains(&len)
    }

    /// A receive of `buf.len()` bytes from `from` that is one queue entry, taken by
    /// [`ShmTransport::take_one`] when the hint held last time: true if it was.
    fn take_small(
        &mut self,
        from: u32,
        buf: &mut [u8],
        consume: impl FnOnce(&[u8], &mut [u8]),
    ) -> Result<bool> {
        if !self.one_entry(buf.len()) {
            return Ok(false);
        }
        let w = self.local(from)?;
        Ok(self.hint_held[w] && self.take_one(w, buf, consume))
    }

    /// The small receive's first look: polls only the slot where writer `w`'s next
    /// fragment to this rank usually is, [`INLINE_POLLS`] times with a `pause` between
    /// looks, and if it is the one entry of `buf`'s length (inline when it fits the
    /// control line, as [`ShmTransport::send_one`] puts it), hands it and `buf` to
    /// `consume` (which copies or combines) and releases the slot. Returns false,
    /// having taken nothing, when the fragment did not come (the general path then scans
    /// every slot and waits) or came in another form (the general path takes it, or names
    /// the mismatch).
    ///
    /// The `pause` matters: polling the line flat out while the writer fills it took it
    /// away from the writer between its stores (a two-thread chain of 8-byte broadcasts,
    /// `queue-floor`, took 2.4 times the line's ping-pong this way against 2.5-2.8 polling
    /// flat out; docs/runtime.md).
    fn take_one(
        &mut self,
        w: usize,
        buf: &mut [u8],
        consume: impl FnOnce(&[u8], &mut [u8]),
    ) -> bool {
        let l = self.seg.layout();
        let k = self.recv_hint[w];
        let at = l.control(w, k, self.me);
        let want = next_seq(self.recv_seq[w]);
        let (form, src) = l.entry(w, k, self.me, buf.len());
        let expect = u64::from(want) << 32 | form | buf.len() as u64;
        let word = self.seg.atomic_u64(at);
        for _ in 0..INLINE_POLLS {
            // SYNC: Acquire pairs with the writer's Release store in try_send.
            let v = word.load(Ordering::Acquire);
            if v == expect {
                // SAFETY: the word addressed this entry to us, and the writer leaves our
                // control line and the slot's data alone until we clear the word below.
                consume(unsafe { self.seg.slice(src, buf.len()) }, buf);
                // SYNC: Release orders our copy before the writer's Acquire check in
                // try_send.
                word.store(0, Ordering::Release);
                self.recv_seq[w] = want;
                self.recv_hint[w] = if k + 1 == l.slots { 0 } else { k + 1 };
                return true;
            }
            if (v >> 32) as u32 == want {
                return false;
            }
            std::hint::spin_loop();
        }
        false
    }

    /// Checks the liveness of local readers that still hold a word in slot `k`.
    fn check_readers(&self, k: usize) -> Result<()> {
        let l = self.seg.layout();
        for j in 0..l.ranks {
            if self
                .seg
                .atomic_u64(l.control(self.me, k, j))
                .load(Ordering::Relaxed)
                != 0
            {
                self.check_alive(j)?;
            }
        }
        Ok(())
    }

    /// The slot this rank is waiting on as a writer.
    fn waiting_slot(&self) -> usize {
        self.pending.unwrap_or(self.write_slot())
    }

    fn set_readers(&mut self, to: &[u32]) -> Result<()> {
        self.readers.clear();
        for &r in to {
            let j = self.local(r)?;
            self.readers.push(j);
        }
        Ok(())
    }
}

impl ShmTransport {
    /// Puts one entry for `self.readers` ([`ShmTransport::try_send`]), waiting for its
    /// slot to be free.
    fn put(&mut self, frag: &[u8], direct: bool) -> Result<()> {
        let mut backoff = Backoff::new(self.spin);
        while !self.try_send(frag, direct)? {
            if backoff.pause() {
                self.check_readers(self.waiting_slot())?;
            }
        }
        Ok(())
    }

    /// The small send to one reader: `data` (1 byte to one fragment, not by single copy)
    /// goes into this rank's next slot as [`try_send`] would put it, inline in local
    /// reader `j`'s control line when it fits there, else as the slot's fragment, without
    /// the general path's reader list and fragment loop.
    ///
    /// [`try_send`]: ShmTransport::try_send
    #[inline(always)]
    fn send_one(&mut self, j: usize, data: &[u8]) -> Result<()> {
        let l = *self.seg.layout();
        let k = self.write_slot();
        if !self.drained(k) {
            self.wait_drained(k)?;
        }
        let at = l.control(self.me, k, j);
        let (form, dst) = l.entry(self.me, k, j, data.len());
        // SAFETY: every reader's word of slot k is 0, so nobody reads the slot or j's
        // control line past the word, and only this rank writes its own queue (the bytes,
        // which the Release store of the word below publishes).
        unsafe { self.seg.write(dst, data) };
        self.send_seq[j] = next_seq(self.send_seq[j]);
        let word = u64::from(self.send_seq[j]) << 32 | form | data.len() as u64;
        // SYNC: Release publishes the bytes; the reader's Acquire load of this word pairs
        // with it.
        self.seg.atomic_u64(at).store(word, Ordering::Release);
        self.written += 1;
        Ok(())
    }

    /// Waits until every reader has released slot `k` of this rank's queue.
    #[cold]
    fn wait_drained(&self, k: usize) -> Result<()> {
        let mut backoff = Backoff::new(self.spin);
        while !self.drained(k) {
            if backoff.pause() {
                self.check_readers(k)?;
            }
        }
        Ok(())
    }

    /// Sends `data` to `self.readers`, as one descriptor if `direct`, else in fragments.
    fn send_as(&mut self, data: &[u8], direct: bool) -> Result<()> {
        if !direct && data.len() <= layout::INLINE_MAX {
            // One entry in the readers' control lines, and nothing to wait for after it.
            return self.put(data, false);
        }
        for i in 0..self.units(data.len(), direct) {
            self.put(&data[self.unit_range(i, data.len(), direct)], direct)?;
        }
        let mut backoff = Backoff::new(self.spin);
        while !self.try_finish() {
            if backoff.pause() {
                self.check_readers(self.waiting_slot())?;
            }
        }
        Ok(())
    }
}

impl Transport for ShmTransport {
    fn send(&mut self, to: &[u32], data: &[u8]) -> Result<()> {
        if let [r] = *to
            && self.one_entry(data.len())
        {
            let j = self.local(r)?;
            if !self.direct_one_way(self.near[j], data.len()) {
                return self.send_one(j, data);
            }
        }
        self.set_readers(to)?;
        let direct = self.direct_to_readers(data.len());
        self.send_as(data, direct)
    }

    /// For a rank that shares this rank's nearest cache, stays in the queues: the
    /// receiver combines each fragment as it arrives while this rank copies in the next,
    /// which beats reading everything first and combining after. For one that does not
    /// ([`ShmTransport::set_near`]), from half the single-copy threshold the receiver reads
    /// and combines straight from `data`.
    fn send_to_combine(&mut self, to: u32, data: &[u8]) -> Result<()> {
        let j = self.local(to)?;
        let direct = !self.near[j] && self.direct_far(data.len());
        if !direct && self.one_entry(data.len()) {
            return self.send_one(j, data);
        }
        self.set_readers(&[to])?;
        self.send_as(data, direct)
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
        if self.near[w] || !self.direct_far(acc.len()) {
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
        let ready = !self.exchange_direct(acc.len(), self.local(from)?);
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

    fn poll_send(&mut self, x: &mut Transfer, to: &[u32], data: &[u8]) -> Result<bool> {
        self.set_readers(to)?;
        if self.direct_to_readers(data.len()) {
            if x.slot.is_none() {
                if !self.try_send(data, true)? {
                    return Ok(false);
                }
                let k = self.pending.take().expect("a descriptor was just written");
                x.slot = Some(k);
            }
            let k = x.slot.expect("set above");
            return Ok(self.drained(k));
        }
        let n = self.units(data.len(), false);
        while x.done < n {
            if !self.try_send(&data[self.unit_range(x.done, data.len(), false)], false)? {
                return Ok(false);
            }
            x.done += 1;
        }
        Ok(true)
    }

    fn poll_recv(
        &mut self,
        x: &mut Transfer,
        from: u32,
        buf: &mut [u8],
        op: Option<&dyn Combine>,
    ) -> Result<bool> {
        let w = self.local(from)?;
        // An empty message still takes one entry.
        while !x.started || x.done < buf.len() {
            let rest = &mut buf[x.done..];
            let got = match op {
                None => self.try_take(w, rest, &mut copy_out)?,
                Some(op) => {
                    let tmp = &mut x.tmp;
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
                    x.started = true;
                    x.done += n;
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
    fn poll_signal(&mut self, x: &mut Transfer, round: usize, to: u32, from: u32) -> Result<bool> {
        if round >= layout::SIGNAL_ROUNDS {
            return super::exchange_empty(self, x, to, from);
        }
        let w = self.local(from)?;
        self.local(to)?;
        if !x.started {
            x.started = true;
            x.done = self.raise(round, w) as usize;
        }
        Ok(self.reached(w, round, x.done as u64))
    }

    fn sendrecv(&mut self, to: u32, data: &[u8], from: u32, buf: &mut [u8]) -> Result<()> {
        self.exchange(to, data, from, buf, &mut copy_out)
    }
}

impl ShmTransport {
    /// Whether an exchange of `len` bytes with local rank `j` goes by single copy. Both
    /// ranks copy in parallel there, so between ranks that share a cache the queues stay
    /// faster than the system calls of single copy up to a larger size (4x the
    /// threshold); between far ones, where every fragment's line crosses the dies twice,
    /// single copy wins from half the threshold (docs/runtime.md). Both partners decide
    /// alike: they agree on who is near ([`ShmTransport::check_near`]).
    fn exchange_direct(&self, len: usize, j: usize) -> bool {
        if self.near[j] {
            self.direct(len / SENDRECV_FACTOR)
        } else {
            self.direct_far(len)
        }
    }

    /// Sends `data` to `to` while taking `buf.len()` bytes from `from` into `buf` through
    /// `consume`.
    fn exchange(
        &mut self,
        to: u32,
        data: &[u8],
        from: u32,
        buf: &mut [u8],
        consume: &mut impl FnMut(Frag<'_>, &mut [u8]) -> nix::Result<()>,
    ) -> Result<()> {
        if self.one_entry(data.len()) && self.one_entry(buf.len()) {
            // One entry each way: ours goes first (it waits for nothing but a free slot,
            // which the partner frees without us), then the partner's is taken.
            let j = self.local(to)?;
            if !self.exchange_direct(data.len(), j) {
                self.send_one(j, data)?;
                let w = self.local(from)?;
                let mut taken = Ok(());
                if self.hint_held[w]
                    && self.take_one(w, buf, |src, dst| taken = consume(Frag::Queue(src), dst))
                {
                    return taken.map_err(|e| self.consume_failed(w, e));
                }
                return self.take(from, buf, consume);
            }
        }
        self.set_readers(&[to])?;
        let w = self.local(from)?;
        let direct = self.exchange_direct(data.len(), self.readers[0]);
        let ns = self.units(data.len(), direct);
        let (mut si, mut got, mut finished) = (0, 0, false);
        // An empty message still takes one entry.
        let mut recv_done = false;
        let mut backoff = Backoff::new(self.spin);
        while si < ns || !recv_done || !finished {
            let mut progress = false;
            if si < ns && self.try_send(&data[self.unit_range(si, data.len(), direct)], direct)? {
                si += 1;
                progress = true;
            }
            if !recv_done && let Some(n) = self.try_take(w, &mut buf[got..], consume)? {
                got += n;
                recv_done = got == buf.len();
                progress = true;
            }
            if si == ns && !finished && self.try_finish() {
                finished = true;
                progress = true;
            }
            if progress {
                backoff = Backoff::new(self.spin);
            } else if backoff.pause() {
                self.check_alive(w)?;
                self.check_readers(self.waiting_slot())?;
            }
        }
        Ok(())
    }
}
