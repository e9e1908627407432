//! How a rank waits for its peers: spin a while, then yield the core (so it progresses
//! when ranks outnumber cores), and now and then check that the peers are alive.

use std::time::{Duration, Instant};

/// How often a waiting rank checks that its peers are alive.
const LIVENESS_PERIOD: Duration = Duration::from_millis(50);

/// Spin, then yield; says when it is time to check on the peer.
pub(crate) struct Backoff {
    round: u32,
    spin: u32,
    last_check: Option<Instant>,
}

impl Backoff {
    pub(crate) fn new(spin: u32) -> Self {
        Backoff {
            round: 0,
            spin,
            last_check: None,
        }
    }

    /// Waits a little. Returns true when the caller should check liveness.
    pub(crate) fn pause(&mut self) -> bool {
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
