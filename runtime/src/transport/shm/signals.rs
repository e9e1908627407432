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
                self.check_not_sending(w)?;
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

    /// Fails if writer `w`, whose signal this rank has waited for a while, has a message
    /// for this rank that it has not taken: `w` is in a collective other than the barrier
    /// this rank is in (every earlier message from `w` was taken before the barrier).
    pub(super) fn check_not_sending(&self, w: usize) -> Result<()> {
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
    pub(super) fn check_not_in_barrier(&self, w: usize) -> Result<()> {
        let ahead = (0..layout::SIGNAL_ROUNDS)
            .any(|r| self.signal_from[r] == Some(w) && self.reached(w, r, self.signals[r] + 1));
        if ahead {
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
