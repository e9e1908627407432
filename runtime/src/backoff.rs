//! How a rank waits for its peers: spin a while, then yield the core (so it progresses
//! when ranks outnumber cores), and now and then check that the peers are alive.
//!
//! While it waits, a rank also drives MPI's own progress now and then (an `MPI_Iprobe` on
//! a private communicator that carries no messages), as Open MPI's shared-memory
//! collectives call `opal_progress`: an application may have an MPI operation in flight
//! (a nonblocking collective that MPI runs, a rendezvous send) that a peer is waiting on,
//! and it advances only while this rank is inside MPI.
//!
//! A caller that holds more than one context (the PMPI library keeps one per communicator)
//! installs a progress hook ([`crate::progress_hook`]): every wait then also runs it.

use std::time::{Duration, Instant};

use crate::ffi::comm::{poke_mpi, took_progress};
use crate::progress_hook::run_hook;

/// Spinning waits probe MPI once every this many rounds (a probe costs about as much as
/// a few dozen polls of a queue).
const PROBE_EVERY: u32 = 64;

/// The first pauses of a spinning wait return at once: a peer that is about to answer
/// is seen the moment its line arrives (a `pause` instruction holds the core for tens of
/// nanoseconds, as long as the transfer itself).
const TIGHT: u32 = 32;

/// How often a waiting rank checks that its peers are alive.
pub(crate) const LIVENESS_PERIOD: Duration = Duration::from_millis(50);

/// The pacing every wait shares: spin `spin` rounds, then yield the core on each pause,
/// and say every `LIVENESS_PERIOD` of yielding that it is time to check the peers. The
/// clock is read only once the wait yields: a short wait (most collectives' on a quiet
/// node) never reads it.
#[derive(Debug)]
pub struct Pace {
    round: u32,
    spin: u32,
    last_check: Option<Instant>,
}

impl Pace {
    /// A wait that spins `spin` rounds before it yields.
    pub fn new(spin: u32) -> Self {
        Pace {
            round: 0,
            spin,
            last_check: None,
        }
    }

    /// Whether the next pause returns at once (see `TIGHT`).
    pub fn tight(&self) -> bool {
        self.round < self.spin.min(TIGHT)
    }

    /// Whether the wait still spins (the next pause will not yield).
    pub fn spinning(&self) -> bool {
        self.round < self.spin
    }

    /// Waits a little: spins while [`Pace::spinning`], else yields the core. Returns true
    /// when the caller should check that its peers are alive.
    pub fn pause(&mut self) -> bool {
        if self.round < self.spin.min(TIGHT) {
            self.round += 1;
            return false;
        }
        if self.round < self.spin {
            std::hint::spin_loop();
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

/// A runtime wait: [`Pace`], plus the progress hook on every pause and MPI's own progress
/// now and then.
pub(crate) struct Backoff(Pace);

impl Backoff {
    pub(crate) fn new(spin: u32) -> Self {
        Backoff(Pace::new(spin))
    }

    /// Waits a little. Returns true when the caller should check liveness.
    pub(crate) fn pause(&mut self) -> bool {
        if self.0.tight() {
            return self.0.pause();
        }
        run_hook();
        let spinning = self.0.spinning();
        let check = self.0.pause();
        // A wait whose own MPI requests were just tested has driven MPI's progress already:
        // another probe would only add a pass of MPI's progress engine (a poll of every
        // network interface) to each round.
        if probes(spinning, self.0.round, took_progress()) {
            poke_mpi();
        }
        check
    }
}

/// Whether a pause probes MPI: every pause once the wait yields, every `PROBE_EVERY`th
/// while it spins, but none where this round's tests of the wait's own MPI requests drove
/// MPI's progress already (`progressed`).
fn probes(spinning: bool, round: u32, progressed: bool) -> bool {
    (!spinning || round.is_multiple_of(PROBE_EVERY)) && !progressed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::progress_hook::{hooked, with_progress_hook};

    #[test]
    fn pauses_call_the_hook_while_installed_never_recursively() {
        let mut calls = 0;
        let mut nested = false;
        let mut hook = || {
            calls += 1;
            // A wait inside the hook does not call it again.
            nested |= hooked();
            Backoff::new(0).pause();
        };
        with_progress_hook(&mut hook, || {
            assert!(hooked());
            // The first TIGHT pauses only poll; every later one calls the hook.
            let mut b = Backoff::new(TIGHT + 4);
            for _ in 0..TIGHT + 10 {
                b.pause();
            }
        });
        assert!(!hooked());
        Backoff::new(0).pause();
        assert_eq!(calls, 10);
        assert!(!nested);
    }

    #[test]
    fn a_round_that_tested_mpi_requests_does_not_probe_as_well() {
        assert!(probes(false, 1, false));
        assert!(!probes(false, 1, true));
        assert!(probes(true, PROBE_EVERY, false) && !probes(true, PROBE_EVERY + 1, false));
        assert!(!probes(true, PROBE_EVERY, true));
        // A pause takes the mark, so that it spares one probe only.
        crate::ffi::comm::note_progress();
        Backoff::new(0).pause();
        assert!(!crate::ffi::comm::took_progress());
        crate::ffi::comm::note_progress();
        assert!(crate::ffi::comm::took_progress() && !crate::ffi::comm::took_progress());
    }

    #[test]
    fn a_wait_that_may_not_spin_never_polls_tight() {
        let p = Pace::new(0);
        assert!(!p.tight() && !p.spinning());
        let mut p = Pace::new(3);
        for _ in 0..3 {
            assert!(p.tight());
            p.pause();
        }
        assert!(!p.tight() && !p.spinning());
    }

    #[test]
    fn the_hook_is_removed_when_the_call_unwinds() {
        let mut hook = || {};
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            with_progress_hook(&mut hook, || panic!("inside"))
        }));
        assert!(r.is_err());
        assert!(!hooked());
    }
}
