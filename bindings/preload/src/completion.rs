//! The completion calls (`MPI_Wait`, `MPI_Test` and their `all`, `any` and `some` forms)
//! while topo-run's nonblocking collectives are in flight. Their requests are generalized
//! requests that complete when the library says so, and the collectives advance only when
//! the library runs: so a wait polls (advance everything, test the application's
//! requests, pause) instead of blocking inside MPI, and a test advances everything first.

use std::os::raw::c_int;

use crate::abi::SUCCESS;
use crate::state::{self, Waiter};

/// A wait: `None` (block in MPI) when nothing of ours is in flight; otherwise polls
/// `test` (the test form of the call, returning its code and whether it completed) until
/// it fails or completes, and returns its code.
pub(crate) fn wait(mut test: impl FnMut() -> (c_int, bool)) -> Option<c_int> {
    if !state::in_flight() {
        return None;
    }
    let mut w = Waiter::new();
    loop {
        state::progress(w.check());
        let (rc, done) = test();
        if rc != SUCCESS || done {
            return Some(rc);
        }
        w.pause();
    }
}

/// Before a test: advances topo-run's collectives in flight.
pub(crate) fn test() {
    crate::abi::entry(
        None,
        || {
            if state::in_flight() {
                state::progress(false);
            }
            false
        },
        || SUCCESS,
    );
}
