//! Barrier signals: each local rank counts its passes of each barrier round in a line of
//! its own, and waits for the count of the rank it hears from in that round.

use super::*;

impl ShmTransport {
    /// Counts one more pass of barrier round `round` in this rank's signal line and
    /// returns the count.
    pub(super) fn raise(&mut self, round: usize, from: usize) -> u64 {
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
    pub(super) fn await_signal(&self, w: usize, round: usize, n: u64) -> Result<()> {
        let mut backoff = Backoff::new(self.spin);
        while !self.reached(w, round, n) {
            if backoff.pause() {
                self.check_alive(w)?;
                self.check_not_sending(w, round, n)?;
            }
        }
        Ok(())
    }

    /// Whether local rank `w` has passed barrier round `round` `n` times.
    pub(super) fn reached(&self, w: usize, round: usize, n: u64) -> bool {
        // SYNC: Acquire pairs with `w`'s Release store in `raise`.
        self.seg
            .atomic_u64(self.seg.layout().signal(w, round))
            .load(Ordering::Acquire)
            >= n
    }

    /// Fails if writer `w`, whose signal (`n` passes of barrier round `round`) this rank
    /// has waited for a while, has a message for this rank that it has not taken, and has
    /// still not passed the round: `w` is in a collective other than the barrier this rank
    /// is in (every earlier message from `w` was taken before the barrier). A `w` that
    /// passed the barrier and sent its next message since this rank last looked at its
    /// signal is not one: the signal is read again after the message is seen.
    pub(super) fn check_not_sending(&self, w: usize, round: usize, n: u64) -> Result<()> {
        if self.has_message_from(w) && !self.reached(w, round, n) {
            return Err(self.mismatch(w, "a barrier", "another collective"));
        }
        Ok(())
    }

    /// Whether writer `w` has put the next message this rank will take from it.
    pub(super) fn has_message_from(&self, w: usize) -> bool {
        self.slot_message_from(w).is_some() || self.ring_record_from(w).is_some()
    }

    /// Fails if writer `w`, whose message this rank has waited for a while, has passed a
    /// barrier round more often than this rank, in a round where this rank waits for `w`
    /// (their counts move together), and the message has still not come: `w` is in a
    /// barrier while this rank waits for data (which `w` would have sent before the
    /// barrier). A `w` that sent the message and entered the barrier since this rank last
    /// looked for the message is not one: the message is looked for again after the
    /// signal is seen.
    pub(super) fn check_not_in_barrier(&self, w: usize) -> Result<()> {
        let ahead = (0..layout::SIGNAL_ROUNDS)
            .any(|r| self.signal_from[r] == Some(w) && self.reached(w, r, self.signals[r] + 1));
        if ahead && !self.has_message_from(w) {
            return Err(self.mismatch(w, "another collective", "a barrier"));
        }
        Ok(())
    }

    pub(super) fn mismatch(&self, w: usize, mine: &str, theirs: &str) -> Error {
        Error::Mismatch {
            reason: format!(
                "rank {} waits in {mine} while rank {} is in {theirs}; the ranks called \
                 different collectives",
                self.peers[self.me], self.peers[w]
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::Transport;

    /// Two local ranks of one node in this process, over a segment already unlinked.
    fn pair(tag: &str) -> (ShmTransport, ShmTransport) {
        let path = format!("/dev/shm/topo-run-unit.{}.{tag}", std::process::id());
        let layout = Layout::new(2, 4, 4096);
        let a = Segment::create(&path, layout, 0).expect("create");
        let b = Segment::attach(&path, layout, 0).expect("attach");
        a.reserve_queue(0).expect("queue 0");
        b.reserve_queue(1).expect("queue 1");
        a.unlink().expect("unlink");
        let node = String::from("n1");
        (
            ShmTransport::new(a, 0, vec![0, 1], node.clone(), 0),
            ShmTransport::new(b, 1, vec![0, 1], node, 0),
        )
    }

    // Rank 0 waits in barrier round 0 for rank 1's first pass; it read the signal before
    // rank 1 raised it, and looks at rank 1's messages after rank 1 raised it and sent its
    // next message: rank 1 is one collective ahead, not in another one.
    #[test]
    fn a_peer_past_the_barrier_that_sent_its_next_message_is_no_mismatch() {
        let (r0, mut r1) = pair("past");
        assert!(!r0.reached(1, 0, 1));
        r1.raise(0, 0);
        r1.send(&[0], &[7u8; 8]).expect("send");
        assert!(r0.check_not_sending(1, 0, 1).is_ok());
        // Before it raised, the same message means another collective.
        let (r0, mut r1) = pair("other");
        r1.send(&[0], &[7u8; 8]).expect("send");
        let e = r0.check_not_sending(1, 0, 1).expect_err("a mismatch");
        assert!(
            e.to_string().contains("called different collectives"),
            "{e}"
        );
    }

    // Rank 0 waits for a message from rank 1 after a barrier round they share; it looked
    // for the message before rank 1 sent it, and at rank 1's signal after rank 1 sent it
    // and entered the next barrier: the message is there, no mismatch.
    #[test]
    fn a_peer_in_the_next_barrier_that_sent_the_awaited_message_is_no_mismatch() {
        let (mut r0, mut r1) = pair("sent");
        r0.raise(0, 1);
        r1.raise(0, 0);
        r1.send(&[0], &[7u8; 8]).expect("send");
        r1.raise(0, 0);
        assert!(r0.check_not_in_barrier(1).is_ok());
        // Without the message, rank 1 is in a barrier while rank 0 waits for data.
        let (mut r0, mut r1) = pair("barrier");
        r0.raise(0, 1);
        r1.raise(0, 0);
        r1.raise(0, 0);
        let e = r0.check_not_in_barrier(1).expect_err("a mismatch");
        assert!(
            e.to_string().contains("called different collectives"),
            "{e}"
        );
    }
}
