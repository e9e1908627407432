//! The completion calls (`MPI_Wait`, `MPI_Test` and their `all`, `any` and `some` forms)
//! while topo-run's nonblocking collectives are in flight. Their requests are generalized
//! requests that complete when the library says so, and the collectives advance when the
//! library runs: so a wait polls (advance everything, test the application's requests,
//! pause, check the peers now and then) instead of blocking inside MPI, and a test
//! advances everything first. (Inside other MPI calls, Open MPI's progress engine
//! advances them: see `state::register_progress`.)

use std::os::raw::c_int;

use topo_runtime::Pace;

use crate::abi::{self, MPI_Request, SUCCESS};
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

/// A blocking collective handed to MPI: `blocking`, except in an MPI without a progress
/// hook (MPICH) while topo-run's path is on. There MPI would not advance our nonblocking
/// collectives while it blocks, and a peer may need them to advance before it reaches
/// this call (its part of our collective comes first); so the call runs as MPI's
/// nonblocking form (`start`), polled with ours until it completes, as a wait is. Every
/// rank decides alike (a blocking call never matches a nonblocking one in MPI), from what
/// every rank shares: the MPI and whether the path is on.
#[inline]
pub(crate) fn handed(
    blocking: impl FnOnce() -> c_int,
    start: impl FnOnce(*mut MPI_Request) -> c_int,
) -> c_int {
    if !state::polls_handed() || abi::inside() {
        return blocking();
    }
    handed_polled(start)
}

/// [`handed`] where the call runs as MPI's nonblocking form.
fn handed_polled(start: impl FnOnce(*mut MPI_Request) -> c_int) -> c_int {
    let mut req = abi::request_null();
    let rc = start(&mut req);
    if rc != SUCCESS {
        return rc;
    }
    let req = std::cell::Cell::new(req);
    let test = || {
        let mut r = req.get();
        let out = abi::test(&mut r);
        req.set(r);
        out
    };
    let wait = || {
        let mut r = req.get();
        let rc = abi::wait(&mut r);
        req.set(r);
        rc
    };
    // Polled as an entry point: the runtime's own MPI calls inside go straight to MPI.
    abi::entry_rc(None, || Some(poll(test, wait)), wait)
}
