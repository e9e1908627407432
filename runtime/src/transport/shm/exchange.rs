//! Exchanges (`sendrecv`): both ranks send and receive at once, by the queues or, for
//! large messages between ranks that do not share a cache, by single copy.

use super::*;

impl ShmTransport {
    /// Whether an exchange of `len` bytes with local rank `j` goes by single copy. Both
    /// ranks copy in parallel there, so between ranks that share a cache the queues stay
    /// faster than the system calls of single copy up to a larger size (4x the
    /// threshold); between far ones, where every fragment's line crosses the dies twice,
    /// single copy wins from half the threshold (docs/runtime.md). Both partners decide
    /// alike: they agree on who is near ([`ShmTransport::check_near`]).
    pub(super) fn exchange_single_copy(&self, len: usize, j: usize) -> bool {
        if self.near[j] {
            self.single_copy_for(len / SENDRECV_FACTOR)
        } else {
            self.single_copy_far(len)
        }
    }

    /// Sends `data` to `to` while taking `buf.len()` bytes from `from` into `buf` through
    /// `consume`.
    pub(super) fn exchange(
        &mut self,
        to: u32,
        data: &[u8],
        from: u32,
        buf: &mut [u8],
        consume: &mut impl FnMut(Frag<'_>, &mut [u8]) -> nix::Result<()>,
    ) -> Result<()> {
        let (ring_out, ring_in) = (Self::ringed(data.len()), Self::ringed(buf.len()));
        if !ring_out && !ring_in && self.one_entry(data.len()) && self.one_entry(buf.len()) {
            // One entry each way: ours goes first (it waits for nothing but a free slot,
            // which the partner frees without us), then the partner's is taken.
            let j = self.local(to)?;
            if !self.exchange_single_copy(data.len(), j) {
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
        let (j, w) = (self.readers[0], self.local(from)?);
        let single_copy = !ring_out && self.exchange_single_copy(data.len(), j);
        // A message through the ring is one record.
        let ns = if ring_out {
            1
        } else {
            self.units(data.len(), single_copy)
        };
        let (mut si, mut got, mut finished) = (0, 0, false);
        // An empty message still takes one entry.
        let mut recv_done = false;
        let mut backoff = Backoff::new(self.spin);
        while si < ns || !recv_done || !finished {
            let mut progress = false;
            let sent = si < ns
                && if ring_out {
                    self.try_ring_send(j, data)
                } else {
                    self.try_send(
                        &data[self.unit_range(si, data.len(), single_copy)],
                        single_copy,
                    )?
                };
            if sent {
                si += 1;
                progress = true;
            }
            if !recv_done && ring_in {
                recv_done = self.try_ring_take(w, buf, consume)?;
                progress |= recv_done;
            } else if !recv_done && let Some(n) = self.try_take(w, &mut buf[got..], consume)? {
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
                self.check_alive(j)?;
                self.check_readers(self.waiting_slot())?;
            }
        }
        Ok(())
    }
}
