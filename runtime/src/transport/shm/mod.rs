//! Shared-memory queues inside a node, after coll/sharm.
//!
//! Every local rank owns one circular queue of `slots` slots of `fragment` bytes and only
//! it writes there; any local rank reads. A fragment is addressed to a set of readers by
//! writing `seq << 32 | len` into each reader's control word of the slot; a reader copies
//! the fragment out and clears its word; the writer reuses a slot once every word is
//! clear. Because a broadcast fragment is copied in once and read by all, the flat
//! broadcast costs one copy in and one copy out per reader.
//!
//! Waiting spins with a growing backoff, then yields the core (so it progresses when ranks
//! outnumber cores), and checks now and then that the peer it waits for is still alive.

pub mod layout;
pub mod segment;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;

pub use layout::Layout;
pub use segment::Segment;

use super::Transport;
use crate::combine::Combine;
use crate::error::{Error, Result};

/// How often a waiting rank checks that its peer is alive.
const LIVENESS_PERIOD: Duration = Duration::from_millis(50);

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
    /// Fragments written to this rank's queue so far (the next slot is `written % slots`).
    written: u64,
    /// Last sequence number sent to each reader.
    send_seq: Vec<u32>,
    /// Last sequence number received from each writer.
    recv_seq: Vec<u32>,
    /// Where the next fragment from each writer probably is.
    recv_hint: Vec<usize>,
    /// Reused list of local reader indices.
    readers: Vec<usize>,
}

/// Copies a fragment out of the queue into `dst`.
fn copy_out(seg: &Segment, off: usize, dst: &mut [u8]) {
    // SAFETY: called by try_take with a published fragment of `dst.len()` bytes that stays
    // untouched until try_take clears the control word after we return.
    unsafe { seg.read(off, dst) }
}

fn next_seq(s: u32) -> u32 {
    if s == u32::MAX { 1 } else { s + 1 }
}

/// Spin, then yield; says when it is time to check on the peer.
struct Backoff {
    round: u32,
    spin: u32,
    last_check: Option<Instant>,
}

impl Backoff {
    fn new(spin: u32) -> Self {
        Backoff {
            round: 0,
            spin,
            last_check: None,
        }
    }

    /// Waits a little. Returns true when the caller should check liveness.
    fn pause(&mut self) -> bool {
        if self.round < self.spin {
            for _ in 0..(1u32 << (self.round.min(6))) {
                std::hint::spin_loop();
            }
            self.round += 1;
            return false;
        }
        std::thread::yield_now();
        let now = Instant::now();
        match self.last_check {
            Some(t) if now.duration_since(t) < LIVENESS_PERIOD => false,
            _ => {
                let first = self.last_check.is_none();
                self.last_check = Some(now);
                !first
            }
        }
    }
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
            written: 0,
            send_seq: vec![0; p],
            recv_seq: vec![0; p],
            recv_hint: vec![0; p],
            readers: Vec::with_capacity(p),
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

    /// Receives `buf.len()` bytes from `from` fragment by fragment, handing each fragment
    /// (in the queue) and its part of `buf` to `consume`.
    fn take(
        &mut self,
        from: u32,
        buf: &mut [u8],
        mut consume: impl FnMut(&Segment, usize, &mut [u8]),
    ) -> Result<()> {
        let w = self.local(from)?;
        let len = buf.len();
        for i in 0..self.fragments(len) {
            let r = self.frag_range(i, len);
            let mut backoff = Backoff::new(self.spin);
            while !self.try_take(w, &mut buf[r.clone()], &mut consume)? {
                if backoff.pause() {
                    self.check_alive(w)?;
                }
            }
        }
        Ok(())
    }

    fn check_alive(&self, local: usize) -> Result<()> {
        if is_dead(self.seg.pid(local)) {
            return Err(Error::PeerDied {
                rank: self.peers[local],
                node: self.node.clone(),
                op: "a collective",
            });
        }
        Ok(())
    }

    /// Puts one fragment into this rank's next slot for `self.readers`, if the slot is free.
    fn try_send(&mut self, frag: &[u8]) -> Result<bool> {
        let l = *self.seg.layout();
        let k = (self.written % l.slots as u64) as usize;
        for j in 0..l.ranks {
            // SYNC: Acquire pairs with the reader's Release store of 0, so its copy out of
            // this slot is complete before we overwrite the slot.
            if self
                .seg
                .atomic_u64(l.control(self.me, k, j))
                .load(Ordering::Acquire)
                != 0
            {
                return Ok(false);
            }
        }
        // SAFETY: every reader's word of slot k is 0, so nobody reads the slot, and only
        // this rank writes its own queue.
        unsafe { self.seg.write(l.data(self.me, k), frag) };
        for &j in &self.readers {
            self.send_seq[j] = next_seq(self.send_seq[j]);
            let word = u64::from(self.send_seq[j]) << 32 | frag.len() as u64;
            // SYNC: Release publishes the fragment's bytes; the reader's Acquire load of
            // this word in try_take pairs with it.
            self.seg
                .atomic_u64(l.control(self.me, k, j))
                .store(word, Ordering::Release);
        }
        self.written += 1;
        Ok(true)
    }

    /// Finds the next fragment from writer `w`; if it has arrived, hands the segment, the
    /// fragment's offset and `dst` (whose length the fragment must have) to `consume`, then
    /// releases the slot.
    fn try_take(
        &mut self,
        w: usize,
        dst: &mut [u8],
        consume: &mut impl FnMut(&Segment, usize, &mut [u8]),
    ) -> Result<bool> {
        let expect = dst.len();
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
            let len = (word & 0xffff_ffff) as usize;
            if len != expect {
                return Err(Error::ShmLayout {
                    path: self.seg.path().into(),
                    reason: format!(
                        "rank {} expected a fragment of {} bytes from rank {} but got {len}; \
                         the ranks called different collectives or counts",
                        self.peers[self.me], expect, self.peers[w]
                    ),
                });
            }
            // The word addressed this fragment to us and the writer leaves the slot alone
            // until we clear the word below.
            consume(&self.seg, l.data(w, k), dst);
            // SYNC: Release orders our copy before the writer's Acquire check in try_send.
            word_ref.store(0, Ordering::Release);
            self.recv_seq[w] = want;
            self.recv_hint[w] = (k + 1) % l.slots;
            return Ok(true);
        }
        Ok(false)
    }

    fn fragments(&self, len: usize) -> usize {
        len.div_ceil(self.seg.layout().fragment).max(1)
    }

    fn frag_range(&self, i: usize, len: usize) -> std::ops::Range<usize> {
        let f = self.seg.layout().fragment;
        (i * f).min(len)..((i + 1) * f).min(len)
    }

    /// Local readers that still hold a word in the slot we wait for.
    fn check_readers(&self) -> Result<()> {
        let l = self.seg.layout();
        let k = (self.written % l.slots as u64) as usize;
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
}

impl Transport for ShmTransport {
    fn send(&mut self, to: &[u32], data: &[u8]) -> Result<()> {
        self.readers.clear();
        for &r in to {
            let j = self.local(r)?;
            self.readers.push(j);
        }
        for i in 0..self.fragments(data.len()) {
            let frag = &data[self.frag_range(i, data.len())];
            let mut backoff = Backoff::new(self.spin);
            while !self.try_send(frag)? {
                if backoff.pause() {
                    self.check_readers()?;
                }
            }
        }
        Ok(())
    }

    fn recv(&mut self, from: u32, buf: &mut [u8]) -> Result<()> {
        self.take(from, buf, copy_out)
    }

    fn recv_reduce(
        &mut self,
        from: u32,
        acc: &mut [u8],
        _tmp: &mut [u8],
        op: &dyn Combine,
    ) -> Result<()> {
        self.take(from, acc, |seg, off, acc| {
            // SAFETY: try_take hands us a published fragment of `acc.len()` bytes that
            // stays untouched until it clears the control word; the slice lives only
            // during the combine.
            let frag = unsafe { seg.slice(off, acc.len()) };
            op.combine(acc, frag);
        })
    }

    fn sendrecv(&mut self, to: u32, data: &[u8], from: u32, buf: &mut [u8]) -> Result<()> {
        self.readers.clear();
        let j = self.local(to)?;
        self.readers.push(j);
        let w = self.local(from)?;
        let (ns, nr) = (self.fragments(data.len()), self.fragments(buf.len()));
        let (mut si, mut ri) = (0, 0);
        let mut backoff = Backoff::new(self.spin);
        while si < ns || ri < nr {
            let mut progress = false;
            if si < ns && self.try_send(&data[self.frag_range(si, data.len())])? {
                si += 1;
                progress = true;
            }
            if ri < nr {
                let r = self.frag_range(ri, buf.len());
                if self.try_take(w, &mut buf[r], &mut copy_out)? {
                    ri += 1;
                    progress = true;
                }
            }
            if progress {
                backoff = Backoff::new(self.spin);
            } else if backoff.pause() {
                self.check_alive(w)?;
                self.check_readers()?;
            }
        }
        Ok(())
    }
}
