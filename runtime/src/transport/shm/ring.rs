//! The rings: messages of at most [`layout::RING_MAX`] bytes from one local rank to
//! another, several to a cache line (layout.rs). Both sides tell from the length alone
//! whether a message goes through the ring: every message of that size does, whatever
//! the single-copy settings, and no larger one does.
//!
//! A record's header word is the last thing the writer stores (Release); before it, the
//! writer zeroes the two words where the record after it may begin (right after it in its
//! line, and the first word of the next line), so a reader never mistakes what an earlier
//! lap left in the ring for the next record's header.

use super::*;
use layout::{RING_MAX, RING_WORDS, WORDS_PER_LINE};

/// Words of the record of a `len`-byte message: the header and the bytes.
fn record_words(len: usize) -> u64 {
    1 + len.div_ceil(8) as u64
}

/// Where a record of `len` bytes starts when the ring's next word is `pos`: there, or at
/// the next line if it would cross into it.
fn record_at(pos: u64, len: usize) -> u64 {
    let line = WORDS_PER_LINE as u64;
    let o = pos % line;
    if o + record_words(len) > line {
        pos + line - o
    } else {
        pos
    }
}

/// The lap a record at `pos` carries in its header: the times its writer has gone round
/// the ring, from 1 (never 0, which a zeroed word holds).
fn lap(pos: u64) -> u64 {
    (pos / RING_WORDS as u64) % u64::from(u32::MAX) + 1
}

impl ShmTransport {
    /// Whether a message of `len` bytes goes through a ring.
    pub(super) fn ringed(len: usize) -> bool {
        len <= RING_MAX
    }

    /// The offset of word `pos` of the ring from writer `w` to reader `j`.
    fn ring_word(&self, w: usize, j: usize, pos: u64) -> usize {
        self.seg.layout().ring(w, j) + (pos % RING_WORDS as u64) as usize * 8
    }

    /// Loads this rank's ring positions from the segment's head and tail words: where
    /// whoever used these queues before left them (zero in a new segment).
    pub(super) fn load_rings(&mut self) {
        let l = *self.seg.layout();
        for j in 0..self.peers.len() {
            // SYNC: Acquire pairs with the Release stores of the words' last writers,
            // whose use of the queues ended before this one's began (the context's setup
            // or the lane's claim orders them).
            self.ring_head[j] = self
                .seg
                .atomic_u64(l.head(self.me, j))
                .load(Ordering::Acquire);
            self.ring_seen[j] = self
                .seg
                .atomic_u64(l.tail(j, self.me))
                .load(Ordering::Acquire);
            self.ring_pos[j] = self
                .seg
                .atomic_u64(l.tail(self.me, j))
                .load(Ordering::Acquire);
        }
    }

    /// Puts `data` (at most [`RING_MAX`] bytes) into the ring to local reader `j` if it has
    /// room; false if the reader has not taken enough of it yet.
    pub(super) fn try_ring_send(&mut self, j: usize, data: &[u8]) -> bool {
        debug_assert!(Self::ringed(data.len()));
        let line = WORDS_PER_LINE as u64;
        let at = record_at(self.ring_head[j], data.len());
        let end = at + record_words(data.len());
        // The first word of the line after the record's, zeroed below.
        let next_line = (at / line + 1) * line;
        let reach = next_line + 1;
        if reach - self.ring_seen[j] > RING_WORDS as u64 {
            // SYNC: Acquire pairs with the reader's Release store of its tail, made after
            // it copied its records out.
            let l = *self.seg.layout();
            self.ring_seen[j] = self
                .seg
                .atomic_u64(l.tail(j, self.me))
                .load(Ordering::Acquire);
            if reach - self.ring_seen[j] > RING_WORDS as u64 {
                return false;
            }
        }
        let word = |p: u64| self.ring_word(self.me, j, p);
        // The words where the next record may start: nobody reads them until the header
        // below says this record is there (the reader takes records in order), and the
        // reader is done with their earlier lap (the room checked above).
        if !end.is_multiple_of(line) {
            self.seg.atomic_u64(word(end)).store(0, Ordering::Relaxed);
        }
        self.seg
            .atomic_u64(word(next_line))
            .store(0, Ordering::Relaxed);
        // SAFETY: words at+1..end lie in one line of our own ring, which the reader does
        // not read before the header below is stored, and whose earlier lap it has taken
        // (the room checked above); only this rank writes its rings.
        unsafe { self.seg.write(word(at + 1), data) };
        // SYNC: Release publishes the bytes and the zeroed words; the reader's Acquire
        // load of the header pairs with it.
        self.seg
            .atomic_u64(word(at))
            .store(lap(at) << 32 | data.len() as u64, Ordering::Release);
        self.ring_head[j] = end;
        let l = *self.seg.layout();
        // For whoever uses this queue next (only this rank writes the word).
        self.seg
            .atomic_u64(l.head(self.me, j))
            .store(end, Ordering::Relaxed);
        self.send_seq[j] = next_seq(self.send_seq[j]);
        true
    }

    /// Puts `data` into the ring to local reader `j`, waiting for room.
    pub(super) fn ring_put(&mut self, j: usize, data: &[u8]) -> Result<()> {
        let mut backoff = Backoff::new(self.spin);
        while !self.try_ring_send(j, data) {
            if backoff.pause() {
                self.check_alive(j)?;
            }
        }
        Ok(())
    }

    /// Takes the next record from writer `w` if it has come: hands its bytes and `buf`
    /// (the message's whole length) to `consume` and returns true. Fails if the record's
    /// length is not `buf`'s.
    pub(super) fn try_ring_take(
        &mut self,
        w: usize,
        buf: &mut [u8],
        consume: &mut impl FnMut(Frag<'_>, &mut [u8]) -> nix::Result<()>,
    ) -> Result<bool> {
        let at = record_at(self.ring_pos[w], buf.len());
        let header = self.ring_word(w, self.me, at);
        // SYNC: Acquire pairs with the writer's Release store of the header.
        let h = self.seg.atomic_u64(header).load(Ordering::Acquire);
        if h >> 32 != lap(at) {
            return Ok(false);
        }
        let len = (h & u64::from(u32::MAX)) as usize;
        if len != buf.len() {
            return Err(self.wrong_length(w, buf.len(), len));
        }
        // SAFETY: the header says the record is there; the writer leaves its words alone
        // until our tail says we took it.
        let src = unsafe { self.seg.slice(header + 8, len) };
        if let Err(e) = consume(Frag::Queue(src), buf) {
            return Err(self.consume_failed(w, e));
        }
        self.ring_pos[w] = at + record_words(len);
        let l = *self.seg.layout();
        // SYNC: Release orders our copy before the writer's Acquire load of the tail.
        self.seg
            .atomic_u64(l.tail(self.me, w))
            .store(self.ring_pos[w], Ordering::Release);
        self.recv_seq[w] = next_seq(self.recv_seq[w]);
        Ok(true)
    }

    /// Takes the next record from writer `w` (see [`ShmTransport::try_ring_take`]),
    /// waiting for it; now and then checks that `w` is alive and not in another collective.
    pub(super) fn ring_take(
        &mut self,
        w: usize,
        buf: &mut [u8],
        consume: &mut impl FnMut(Frag<'_>, &mut [u8]) -> nix::Result<()>,
    ) -> Result<()> {
        let mut backoff = Backoff::new(self.spin);
        while !self.try_ring_take(w, buf, consume)? {
            if backoff.pause() {
                // A message of another length is named even if its writer has exited
                // since (it ran on past the mismatch).
                self.check_ring_form(w, buf.len())?;
                self.check_alive(w)?;
                self.check_not_in_barrier(w)?;
            }
        }
        Ok(())
    }

    /// The header of the record that writer `w` has put where this rank's next record
    /// from it may begin (at its position, or at the next line's start), if any.
    pub(super) fn ring_record_from(&self, w: usize) -> Option<u64> {
        let pos = self.ring_pos[w];
        let next_line = pos.next_multiple_of(WORDS_PER_LINE as u64);
        // SYNC: Acquire pairs with the writer's Release stores of the headers (what `w`
        // stored before one, its barrier signals, is seen after it). The later position
        // is read first: a record there was stored after any at `pos`, which the second
        // load then sees, so a record at `pos` is never missed for one after it.
        let header = |p: u64| {
            let h = self
                .seg
                .atomic_u64(self.ring_word(w, self.me, p))
                .load(Ordering::Acquire);
            (h >> 32 == lap(p)).then_some(h)
        };
        let later = header(next_line);
        header(pos).or(later)
    }

    /// Fails if writer `w`'s next message to this rank, awaited as `len` bytes, came in
    /// another length: as a record where this rank looks for one of `len` bytes, or, for
    /// a message awaited in the slots, as a record.
    pub(super) fn check_ring_form(&self, w: usize, len: usize) -> Result<()> {
        let length = |h: u64| (h & u64::from(u32::MAX)) as usize;
        if Self::ringed(len) {
            if let Some(h) = self.ring_record_from(w)
                && length(h) != len
            {
                return Err(self.wrong_length(w, len, length(h)));
            }
            if let Some(got) = self.slot_message_from(w) {
                return Err(self.wrong_length(w, len, got));
            }
        } else if let Some(h) = self.ring_record_from(w)
            // The record is a later message only if ours is in the slots: `w` put it
            // there first, so a look after the record's sees it.
            && self.slot_message_from(w).is_none()
        {
            return Err(self.wrong_length(w, len, length(h)));
        }
        Ok(())
    }

    /// The error for a message from writer `w` of `got` bytes where this rank expected
    /// `expect`.
    pub(super) fn wrong_length(&self, w: usize, expect: usize, got: usize) -> Error {
        Error::ShmLayout {
            path: self.seg.path().into(),
            reason: format!(
                "rank {} expected {expect} bytes from rank {} but got {got}; the ranks called \
                 different collectives or counts",
                self.peers[self.me], self.peers[w]
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Transport;

    fn segments(tag: &str) -> (String, Segment, Segment) {
        let path = format!("/dev/shm/topo-run-unit.{}.ring-{tag}", std::process::id());
        let layout = Layout::new(2, 4, 4096);
        let a = Segment::create(&path, layout, 0).expect("create");
        let b = Segment::attach(&path, layout, 0).expect("attach");
        a.reserve_queue(0).expect("queue 0");
        b.reserve_queue(1).expect("queue 1");
        (path, a, b)
    }

    fn ends(a: Segment, b: Segment) -> (ShmTransport, ShmTransport) {
        let node = String::from("n1");
        (
            ShmTransport::new(a, 0, vec![0, 1], node.clone(), 0),
            ShmTransport::new(b, 1, vec![0, 1], node, 0),
        )
    }

    /// A message of `len` bytes for a ring whose head is at `head`: its words are headers
    /// of the next lap (of lengths 0, 8, 16, ...), so that a reader that took what an
    /// earlier lap left in the ring for a header would misread the next record.
    fn decoy(head: u64, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| {
                let word = (lap(head) + 1) << 32 | ((i / 8 * 8) % (RING_MAX + 1)) as u64;
                word.to_ne_bytes()[i % 8]
            })
            .collect()
    }

    // Messages of every ring length, in bursts that fill the ring and wrap it many times,
    // arrive whole and in order, whatever the bytes the earlier laps left behind.
    #[test]
    fn records_of_every_length_wrap_the_ring_and_arrive_in_order() {
        let (path, a, b) = segments("order");
        std::fs::remove_file(&path).expect("unlink");
        let (mut w, mut r) = ends(a, b);
        for burst in 0..400 {
            let lens: Vec<usize> = (0..=burst % 23)
                .map(|i| (burst * 7 + i * 13) % (RING_MAX + 1))
                .collect();
            let mut sent = Vec::new();
            for &len in &lens {
                let m = decoy(w.ring_head[1], len);
                if !w.try_ring_send(1, &m) {
                    break;
                }
                sent.push(m);
            }
            for m in &sent {
                let mut got = vec![0u8; m.len()];
                r.recv(0, &mut got).expect("recv");
                assert_eq!(&got, m, "message of {} bytes", m.len());
            }
        }
        assert!(
            w.ring_head[1] > 50 * RING_WORDS as u64,
            "the ring wrapped: {}",
            w.ring_head[1]
        );
        assert_eq!(w.ring_head[1], r.ring_pos[0]);
    }

    // A lap of 8-byte records whose data words are the very headers the next lap's
    // 16-byte records carry where the data was: after the first record of the next lap,
    // the reader finds nothing where the second will go (the writer zeroed it), not a
    // header.
    #[test]
    fn what_an_earlier_lap_left_is_never_a_header() {
        let (path, a, b) = segments("stale");
        std::fs::remove_file(&path).expect("unlink");
        let (mut w, mut r) = ends(a, b);
        let fake = (2u64 << 32 | 16).to_ne_bytes();
        for _ in 0..RING_WORDS / 2 {
            w.send(&[1], &fake).expect("send");
            let mut got = [0u8; 8];
            r.recv(0, &mut got).expect("recv");
            assert_eq!(got, fake);
        }
        assert_eq!(r.ring_pos[0], RING_WORDS as u64);
        w.send(&[1], &[5u8; 16]).expect("send");
        let mut got = [0u8; 16];
        r.recv(0, &mut got).expect("recv");
        assert_eq!(got, [5u8; 16]);
        assert!(
            !r.try_ring_take(0, &mut got, &mut copy_out).expect("look"),
            "a stale word taken for a header"
        );
    }

    // The ring refuses a record until the reader has taken what it would overwrite.
    #[test]
    fn a_full_ring_waits_for_its_reader() {
        let (path, a, b) = segments("full");
        std::fs::remove_file(&path).expect("unlink");
        let (mut w, mut r) = ends(a, b);
        let mut sent = 0;
        while w.try_ring_send(1, &[sent as u8; 8]) {
            sent += 1;
            assert!(sent <= RING_WORDS / 2, "the ring took more than it holds");
        }
        assert!(sent >= RING_WORDS / 2 - WORDS_PER_LINE, "{sent} records");
        let mut got = [0u8; 8];
        r.recv(0, &mut got).expect("recv");
        assert_eq!(got, [0u8; 8]);
        for k in 1..sent {
            r.recv(0, &mut got).expect("recv");
            assert_eq!(got, [k as u8; 8]);
        }
        assert!(w.try_ring_send(1, &[1; 8]));
    }

    // Whoever uses the queues next (a kept context taken up, a lane claimed again) goes
    // on from the head and tail words: nothing old is taken again, nothing new is lost.
    #[test]
    fn new_ends_go_on_where_the_last_ones_left_off() {
        let (path, a, b) = segments("again");
        let layout = *a.layout();
        let (mut w, mut r) = ends(a, b);
        for k in 0..100u8 {
            w.send(&[1], &[k; 24]).expect("send");
            let mut got = [0u8; 24];
            r.recv(0, &mut got).expect("recv");
        }
        drop((w, r));
        let a = Segment::attach(&path, layout, 0).expect("attach again");
        let b = Segment::attach(&path, layout, 0).expect("attach again");
        std::fs::remove_file(&path).expect("unlink");
        let (mut w, mut r) = ends(a, b);
        assert_eq!(w.ring_head[1], r.ring_pos[0]);
        assert!(w.ring_head[1] > 0);
        let mut got = [0u8; 8];
        assert!(!r.try_ring_take(0, &mut got, &mut copy_out).expect("look"));
        w.send(&[1], &[200; 8]).expect("send");
        r.recv(0, &mut got).expect("recv");
        assert_eq!(got, [200; 8]);
    }

    // A receive whose length differs from the message's is named, whether the record
    // would start where the receive looks or in the next line, or the message went
    // through the slots.
    #[test]
    fn a_record_of_another_length_is_named() {
        for (first, sent, expected) in [
            (0, 16, 8),
            (40, 8, 56),
            (40, 56, 8),
            (0, 100, 8),
            (0, 8, 100),
        ] {
            let (path, a, b) = segments(&format!("len{first}-{sent}-{expected}"));
            std::fs::remove_file(&path).expect("unlink");
            let (mut w, mut r) = ends(a, b);
            if first > 0 {
                w.send(&[1], &vec![1u8; first]).expect("send");
                r.recv(0, &mut vec![0u8; first]).expect("recv");
            }
            w.send(&[1], &vec![2u8; sent]).expect("send");
            let e = r.check_ring_form(0, expected).expect_err("a mismatch");
            assert!(
                e.to_string().contains(&format!(
                    "expected {expected} bytes from rank 0 but got {sent}"
                )),
                "{first} {sent} {expected}: {e}"
            );
            // The message itself, taken at its length, is intact.
            let mut got = vec![0u8; sent];
            r.recv(0, &mut got).expect("recv");
            assert_eq!(got, vec![2u8; sent]);
            assert!(r.check_ring_form(0, expected).is_ok());
        }
    }
}
