//! The queue protocol: writing fragments (or single-copy descriptors) into this rank's
//! slots for a set of readers, taking them out of a writer's slots, and the checks that
//! a peer is alive and doing the same collective.

use super::*;

impl ShmTransport {
    pub(super) fn local(&self, rank: u32) -> Result<usize> {
        self.peers
            .binary_search(&rank)
            .map_err(|_| Error::NotLocal {
                rank,
                node: self.node.clone(),
            })
    }

    /// Whether a message of `len` bytes goes as one single-copy descriptor (receivers
    /// accept either form; the sender decides).
    pub(super) fn single_copy_for(&self, len: usize) -> bool {
        self.single_copy.is_some_and(|t| len >= t)
    }

    /// [`ShmTransport::single_copy`] for a message to a rank that is not near.
    pub(super) fn single_copy_far(&self, len: usize) -> bool {
        self.single_copy_for(len.saturating_mul(FAR_DIVISOR))
    }

    /// [`ShmTransport::single_copy`] for a one-way message to readers that are all near (later)
    /// or not.
    pub(super) fn single_copy_one_way(&self, all_near: bool, len: usize) -> bool {
        if all_near {
            self.single_copy_for(len / NEAR_FACTOR)
        } else {
            self.single_copy_far(len)
        }
    }

    /// [`ShmTransport::single_copy_one_way`] for `self.readers`.
    pub(super) fn single_copy_to_readers(&self, len: usize) -> bool {
        self.single_copy_one_way(self.readers.iter().all(|&j| self.near[j]), len)
    }

    /// The slot of this rank's queue that its next entry goes to.
    pub(super) fn write_slot(&self) -> usize {
        (self.written % self.seg.layout().slots as u64) as usize
    }

    /// How many queue entries a message of `len` bytes takes.
    pub(super) fn units(&self, len: usize, single_copy: bool) -> usize {
        if single_copy {
            1
        } else {
            len.div_ceil(self.seg.layout().fragment).max(1)
        }
    }

    /// The part of a `len`-byte message that entry `i` carries.
    pub(super) fn unit_range(
        &self,
        i: usize,
        len: usize,
        single_copy: bool,
    ) -> std::ops::Range<usize> {
        if single_copy {
            return 0..len;
        }
        let f = self.seg.layout().fragment;
        (i * f).min(len)..((i + 1) * f).min(len)
    }

    /// Receives `buf.len()` bytes from `from` entry by entry (fragments, or one
    /// descriptor: the sender decides), handing each and its part of `buf` to `consume`.
    pub(super) fn take(
        &mut self,
        from: u32,
        buf: &mut [u8],
        mut consume: impl FnMut(Frag<'_>, &mut [u8]) -> nix::Result<()>,
    ) -> Result<()> {
        let w = self.local(from)?;
        if Self::ringed(buf.len()) {
            return self.ring_take(w, buf, &mut consume);
        }
        let mut off = 0;
        loop {
            let mut backoff = Backoff::new(self.spin);
            let n = loop {
                if let Some(n) = self.try_take(w, &mut buf[off..], &mut consume)? {
                    break n;
                }
                if backoff.pause() {
                    // As in `ring_take`: a message of another length first.
                    if off == 0 {
                        self.check_ring_form(w, buf.len())?;
                    }
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
    pub(super) fn consume_failed(&self, w: usize, source: Errno) -> Error {
        match source {
            Errno::ESRCH => self.died(w),
            source => Error::SingleCopy {
                rank: self.peers[w],
                node: self.node.clone(),
                source,
            },
        }
    }

    pub(super) fn check_alive(&self, local: usize) -> Result<()> {
        if is_dead(self.pid(local)) {
            return Err(self.died(local));
        }
        Ok(())
    }

    pub(super) fn died(&self, local: usize) -> Error {
        Error::PeerDied {
            rank: self.peers[local],
            node: self.node.clone(),
            op: "a collective",
        }
    }

    /// Whether every reader has released slot `k` of this rank's queue.
    pub(super) fn drained(&self, k: usize) -> bool {
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
    /// the bytes of `frag`, or with `single_copy` a descriptor of `frag` itself.
    pub(super) fn try_send(&mut self, frag: &[u8], single_copy: bool) -> Result<bool> {
        let l = *self.seg.layout();
        let k = self.write_slot();
        if !self.drained(k) {
            return Ok(false);
        }
        let len = if single_copy {
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
    pub(super) fn try_finish(&mut self) -> bool {
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
    pub(super) fn try_take(
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
            let single_copy = word & layout::SINGLE_COPY != 0;
            let expect = if single_copy {
                rest.len()
            } else {
                rest.len().min(l.fragment)
            };
            // SAFETY (the reads below): the word addressed this slot to us, and the
            // writer leaves the slot and our control line (and, for a descriptor, its
            // buffer) alone until we clear the word below.
            let (len, frag) = if single_copy {
                let mut d = [0u8; layout::DESCRIPTOR];
                unsafe { self.seg.read(l.data(w, k), &mut d) };
                let addr = u64::from_ne_bytes(d[..8].try_into().expect("8 bytes"));
                let len = u64::from_ne_bytes(d[8..].try_into().expect("8 bytes"));
                let pid = self.pid(w);
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
    pub(super) fn one_entry(&self, len: usize) -> bool {
        (1..=self.seg.layout().fragment).contains(&len)
    }

    /// A receive of `buf.len()` bytes from `from` that is one queue entry, taken by
    /// [`ShmTransport::take_one`] when the hint held last time: true if it was.
    pub(super) fn take_small(
        &mut self,
        from: u32,
        buf: &mut [u8],
        consume: impl FnOnce(&[u8], &mut [u8]),
    ) -> Result<bool> {
        if Self::ringed(buf.len()) || !self.one_entry(buf.len()) {
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
    pub(super) fn take_one(
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

    /// The length of the entry that writer `w` has put into a slot as the next message
    /// this rank will take from it (a descriptor's: the whole message's), if it has.
    pub(super) fn slot_message_from(&self, w: usize) -> Option<usize> {
        let l = self.seg.layout();
        let want = next_seq(self.recv_seq[w]);
        (0..l.slots).find_map(|k| {
            // SYNC: Acquire pairs with the writer's Release store of the control word, so
            // that what `w` stored before it (its barrier signals) is seen after it.
            let word = self
                .seg
                .atomic_u64(l.control(w, k, self.me))
                .load(Ordering::Acquire);
            ((word >> 32) as u32 == want).then(|| {
                if word & layout::SINGLE_COPY != 0 {
                    let mut d = [0u8; 8];
                    // SAFETY: the word addressed the slot's descriptor to us; the writer
                    // leaves it alone until we clear the word.
                    unsafe { self.seg.read(l.data(w, k) + 8, &mut d) };
                    u64::from_ne_bytes(d) as usize
                } else {
                    (word & layout::LEN_MASK) as usize
                }
            })
        })
    }

    /// Checks the liveness of local readers that still hold a word in slot `k`.
    pub(super) fn check_readers(&self, k: usize) -> Result<()> {
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
    pub(super) fn waiting_slot(&self) -> usize {
        self.pending.unwrap_or(self.write_slot())
    }

    pub(super) fn set_readers(&mut self, to: &[u32]) -> Result<()> {
        self.readers.clear();
        for &r in to {
            let j = self.local(r)?;
            self.readers.push(j);
        }
        Ok(())
    }

    /// Puts one entry for `self.readers` ([`ShmTransport::try_send`]), waiting for its
    /// slot to be free.
    pub(super) fn put(&mut self, frag: &[u8], single_copy: bool) -> Result<()> {
        let mut backoff = Backoff::new(self.spin);
        while !self.try_send(frag, single_copy)? {
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
    pub(super) fn send_one(&mut self, j: usize, data: &[u8]) -> Result<()> {
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
    pub(super) fn wait_drained(&self, k: usize) -> Result<()> {
        let mut backoff = Backoff::new(self.spin);
        while !self.drained(k) {
            if backoff.pause() {
                self.check_readers(k)?;
            }
        }
        Ok(())
    }

    /// Sends `data` to `self.readers`, as one descriptor if `single_copy`, else in fragments.
    pub(super) fn send_as(&mut self, data: &[u8], single_copy: bool) -> Result<()> {
        if !single_copy && data.len() <= layout::INLINE_MAX {
            // One entry in the readers' control lines, and nothing to wait for after it.
            return self.put(data, false);
        }
        for i in 0..self.units(data.len(), single_copy) {
            self.put(
                &data[self.unit_range(i, data.len(), single_copy)],
                single_copy,
            )?;
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
