//! The cache-line probe: how long a line takes between two local ranks, which tells
//! whether they share a cache whatever the node reports (and so which messages go by
//! single copy), and the round trips `topo-run simulate --calibrate` times.

use super::*;

/// A cache line that takes longer than this (nanoseconds, one way) between two ranks
/// says they do not share a cache, whatever the node reports: on the dev cluster's VM, a
/// line takes 27 ns between hardware threads of one core, 35-58 ns between cores sharing
/// an L3 and 120-240 ns between cores on different dies, while the guest reports one L3.
pub const NEAR_LINE_NS: f64 = 100.0;

/// The cache-line times [`ShmTransport::check_near`] measured in this process, by the
/// partner's PID. Both partners keep the result, so both skip the next measurement.
pub(super) static LINE_TIMES: std::sync::Mutex<Vec<(i32, f64)>> = std::sync::Mutex::new(Vec::new());

/// The cache-line time this process keeps for the partner process `pid`, if any.
fn kept_line_time(pid: i32) -> Option<f64> {
    LINE_TIMES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .find(|&&(p, _)| p == pid)
        .map(|&(_, ns)| ns)
}

impl ShmTransport {
    /// Whether [`ShmTransport::check_near`] would time the line to this rank's partner
    /// here: `spin` is on, the partner exists, the plan puts both in one group, and this
    /// process has no time kept for the partner's process.
    pub fn needs_line_time(&self) -> bool {
        self.partner_to_time()
            .is_some_and(|(_, pid)| kept_line_time(pid).is_none())
    }

    /// The partner whose line [`ShmTransport::check_near`] checks (the local rank whose
    /// index differs in the last bit) and its PID, if there is one to check.
    fn partner_to_time(&self) -> Option<(usize, i32)> {
        let partner = self.me ^ 1;
        if self.spin == 0 || partner >= self.peers.len() || !self.near[partner] {
            return None;
        }
        Some((partner, self.pid(partner)))
    }

    /// Checks the node's report of what its ranks share against the machine: this rank
    /// and its partner (the local rank whose index differs in the last bit), if the plan
    /// puts them in one group, time a cache line between them ([`ShmTransport::line_time`],
    /// the fastest of 5 x 32 round trips, well under a millisecond). If it takes more than
    /// [`NEAR_LINE_NS`], the report is wrong (a virtual machine's, typically) and this rank
    /// treats every peer as far. Both partners call it; nothing happens with `spin` 0
    /// (ranks outnumber cores, so the time would be the scheduler's). Returns the time
    /// used.
    ///
    /// A process times the line to a partner process once: later contexts (the PMPI
    /// library makes one per communicator) take the time kept, unless `measure`, the
    /// leader's for both. Both partners must pass the same `measure`, which is why it is
    /// agreed rather than read here: contexts set up at the same time by several threads
    /// (`MPI_THREAD_MULTIPLE`) may find a time kept in one partner's process and not yet
    /// in the other's, and a partner that measured alone would wait for ever. The caller
    /// agrees over the context's members whether any of them
    /// [`ShmTransport::needs_line_time`].
    pub fn check_near(&mut self, measure: bool) -> Result<Option<f64>> {
        let Some((partner, pid)) = self.partner_to_time() else {
            return Ok(None);
        };
        let peer = self.peers[partner];
        let ns = match kept_line_time(pid) {
            // Both use the leader's kept time: contexts that measured at the same time may
            // have left different times kept in the two processes, and partners that
            // judged their line differently would take different paths.
            Some(kept) if !measure => self.share_line_time(peer, kept)?,
            _ => self.line_time(peer, 5, 32)?,
        };
        let mut kept = LINE_TIMES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        kept.retain(|&(p, _)| p != pid);
        kept.push((pid, ns));
        drop(kept);
        if ns > NEAR_LINE_NS {
            self.near.fill(false);
        }
        self.checked_ns = Some(ns);
        Ok(Some(ns))
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
    pub(super) fn wait_probe(&self, p: usize, done: impl Fn(u64) -> bool) -> Result<u64> {
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
        self.share_line_time(peer, t.iter().copied().fold(f64::INFINITY, f64::min))
    }

    /// Hands the leader's (the lower local index's) `ns` to the other rank, so that both
    /// return the same time: both call it, each naming the other, once their probe lines
    /// are free (after [`ShmTransport::ping_pong`], or in a new segment). A rank naming
    /// itself gets 0.
    pub fn share_line_time(&self, peer: u32, ns: f64) -> Result<f64> {
        let p = self.local(peer)?;
        if p == self.me {
            return Ok(0.0);
        }
        // Bit 31 marks the result (in nanoseconds, below 2^31), apart from round numbers.
        const RESULT: u64 = 1 << 31;
        let tag = (p.max(self.me) as u64) << 32 | RESULT;
        let mine = self.seg.atomic_u64(self.seg.layout().probe(self.me));
        // The leader sends the result and waits until the other echoes it (so that
        // neither line is used again before both know it).
        if self.me < p {
            let code = (ns.round().max(0.0) as u64).min(RESULT - 1);
            // SYNC: Release/Acquire with the other side's wait; the value is the message.
            mine.store(tag | code, Ordering::Release);
            self.wait_probe(p, |v| v == tag | code)?;
            // The value sent, so that both judge the same number.
            Ok(code as f64)
        } else {
            let v = self.wait_probe(p, |v| v & !(RESULT - 1) == tag)?;
            // SYNC: as above.
            mine.store(v, Ordering::Release);
            Ok((v & (RESULT - 1)) as f64)
        }
    }
}
