//! The completion calls (`MPI_Wait`, `MPI_Test` and their `all`, `any` and `some` forms)
//! while topo-run's nonblocking collectives are in flight. Their requests are generalized
//! requests that complete when the library says so, and the collectives advance when the
//! library runs: so a wait polls (advance everything, test the application's requests,
//! pause, check the peers now and then) instead of blocking inside MPI, and a test
//! advances everything first. (Inside other MPI calls, Open MPI's progress engine
//! advances them: see `state::register_progress`.)

use std::os::raw::c_int;

use crate::abi::SUCCESS;
use topo_runtime::Pace;

use crate::state::{self, SPIN};

/// A wait: `None` (block in MPI) when nothing of ours is in flight; otherwise
/// [`poll`]s.
pub(crate) fn wait(
    test: impl FnMut() -> (c_int, bool),
    block: impl FnOnce() -> c_int,
) -> Option<c_int> {
    state::in_flight().then(|| poll(test, block))
}

/// Polls `test` (the test form of a wait, returning its code and whether it completed)
/// until it fails or completes, and returns its code. Once nothing of ours is in flight
/// any more, the rest is `block` (the wait itself, in MPI).
pub(crate) fn poll(
    mut test: impl FnMut() -> (c_int, bool),
    block: impl FnOnce() -> c_int,
) -> c_int {
    let mut pace = Pace::new(SPIN);
    let mut check = false;
    loop {
        if !state::progress(check) {
            return block();
        }
        let (rc, done) = test();
        if rc != SUCCESS || done {
            return rc;
        }
        check = pace.pause();
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
