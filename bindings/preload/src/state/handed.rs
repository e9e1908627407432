//! Calls handed to MPI without the library's lock: each thread remembers the last
//! communicator whose collective the state found declined (or the path off), and answers
//! its next collective on the same handle at once, as long as nothing in the tables has
//! changed since. A hand-off then costs a thread-local read and an atomic load (the library
//! adds about 10 ns to MPI's call: `benchmarks/handoff.c`, docs/preload.md) instead of
//! the lock, the lookups and the statistics (about 70 ns).
//!
//! The tables change under the global lock, and every change of what a handle means
//! bumps [`EPOCH`]: a context attached or dropped, a communicator declined or forgotten,
//! a deletion queued for later (its handle may be reused before the lock is taken
//! again), finalize. A decision depends only on the communicator, never on the call's
//! arguments (those are checked later, on the path). Node leaders that print the
//! statistics (`TOPO_RUN_STATS`) count every call, so they always take the lock.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::key;
use crate::abi::MPI_Comm;

/// Bumped at every change of the tables; 0 is never current.
static EPOCH: AtomicU64 = AtomicU64::new(1);

/// Whether decisions may be remembered: this process does not count calls for the
/// statistics.
static REMEMBER: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The handle and epoch of this thread's last collective handed to MPI for its
    /// communicator's sake.
    static LAST: Cell<(usize, u64)> = const { Cell::new((0, 0)) };
}

/// Whether `comm`'s collective goes to MPI for a reason already found for this handle.
#[inline]
pub(crate) fn known(comm: MPI_Comm) -> bool {
    known_handle(key(comm))
}

#[inline]
fn known_handle(handle: usize) -> bool {
    let (last, epoch) = LAST.with(Cell::get);
    // Acquire: a change made by another thread before this call (ordered by the program,
    // as MPI requires of a communicator freed and created again) is seen.
    last == handle && epoch == EPOCH.load(Ordering::Acquire)
}

/// Whether a reduction with `op` goes to MPI for its operation's sake, decided before
/// entering the library in a process that does not count calls. (The others find it on
/// the path, which never sets a communicator up for it either: `state::run_reduction`.)
#[inline]
pub(crate) fn op_known(op: crate::abi::MPI_Op) -> bool {
    REMEMBER.load(Ordering::Relaxed) && crate::abi::op_kind(op).is_none()
}

/// Notes that `comm`'s collectives go to MPI whatever their arguments. Called with the
/// global lock held, where the tables say so.
pub(super) fn remember(comm: MPI_Comm) {
    remember_handle(key(comm));
}

fn remember_handle(handle: usize) {
    if REMEMBER.load(Ordering::Relaxed) {
        let epoch = EPOCH.load(Ordering::Relaxed);
        LAST.with(|l| l.set((handle, epoch)));
    }
}

/// Forgets every decision remembered: the tables changed.
pub(super) fn changed() {
    EPOCH.fetch_add(1, Ordering::Release);
}

/// Whether decisions may be remembered (not while this process counts calls).
pub(super) fn set_remembering(on: bool) {
    REMEMBER.store(on, Ordering::Relaxed);
    changed();
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test: the flags are the process's.
    #[test]
    fn a_decision_holds_until_the_tables_change_and_only_where_nothing_is_counted() {
        set_remembering(false);
        remember_handle(0x10);
        assert!(!known_handle(0x10), "a counting process remembers nothing");

        set_remembering(true);
        remember_handle(0x10);
        assert!(known_handle(0x10));
        assert!(!known_handle(0x20), "another handle is asked");
        assert!(!known_handle(0), "the empty cache matches no handle");

        changed();
        assert!(
            !known_handle(0x10),
            "a change of the tables forgets the decision"
        );
        remember_handle(0x20);
        assert!(
            known_handle(0x20) && !known_handle(0x10),
            "one handle per thread"
        );

        // Another thread has a cache of its own; the epoch is shared.
        std::thread::spawn(|| {
            assert!(!known_handle(0x20));
            remember_handle(0x30);
            assert!(known_handle(0x30));
            changed();
        })
        .join()
        .expect("thread");
        assert!(
            !known_handle(0x20),
            "a change made by another thread is seen"
        );
    }
}
