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
//! statistics (`TOPO_RUN_STATS`) count every call, so they always take the lock. The
//! collective profile (`--profile`) counts every call too, but only by its outcome: the
//! remembered decision carries its reason, which the caller gives the profile.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::key;
use crate::abi::MPI_Comm;
use crate::classify::HandOff;

/// Bumped at every change of the tables; 0 is never current.
static EPOCH: AtomicU64 = AtomicU64::new(1);

/// Whether decisions on communicators may be remembered: this process does not count
/// calls for the statistics.
static REMEMBER: AtomicBool = AtomicBool::new(false);
/// Whether a reduction's operation may be decided before entering the library: nothing
/// counts this process's calls (the profile needs the communicator's kind of them).
static REMEMBER_OPS: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The handle and epoch of this thread's last collective handed to MPI for its
    /// communicator's sake, and why.
    static LAST: Cell<(usize, u64, HandOff)> = const { Cell::new((0, 0, HandOff::Inactive)) };
}

/// Why `comm`'s collective goes to MPI, if a reason was already found for this handle.
#[inline]
pub(crate) fn known(comm: MPI_Comm) -> Option<HandOff> {
    known_handle(key(comm))
}

#[inline]
fn known_handle(handle: usize) -> Option<HandOff> {
    let (last, epoch, why) = LAST.with(Cell::get);
    // Acquire: a change made by another thread before this call (ordered by the program,
    // as MPI requires of a communicator freed and created again) is seen.
    (last == handle && epoch == EPOCH.load(Ordering::Acquire)).then_some(why)
}

/// Whether a reduction with `op` goes to MPI for its operation's sake, decided before
/// entering the library in a process that does not count calls. (The others find it on
/// the path, which never sets a communicator up for it either: `state::run_reduction`.)
#[inline]
pub(crate) fn op_known(op: crate::abi::MPI_Op) -> bool {
    REMEMBER_OPS.load(Ordering::Relaxed) && crate::abi::op_kind(op).is_none()
}

/// Notes that `comm`'s collectives go to MPI whatever their arguments, for reason `why`.
/// Called with the global lock held, where the tables say so.
pub(super) fn remember(comm: MPI_Comm, why: HandOff) {
    remember_handle(key(comm), why);
}

fn remember_handle(handle: usize, why: HandOff) {
    if REMEMBER.load(Ordering::Relaxed) {
        let epoch = EPOCH.load(Ordering::Relaxed);
        LAST.with(|l| l.set((handle, epoch, why)));
    }
}

/// Forgets every decision remembered: the tables changed.
pub(super) fn changed() {
    EPOCH.fetch_add(1, Ordering::Release);
}

/// Whether decisions on communicators (`comms`) and operations (`ops`) may be remembered.
pub(super) fn set_remembering(comms: bool, ops: bool) {
    REMEMBER.store(comms, Ordering::Relaxed);
    REMEMBER_OPS.store(ops, Ordering::Relaxed);
    changed();
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test: the flags are the process's.
    #[test]
    fn a_decision_holds_until_the_tables_change_and_only_where_nothing_is_counted() {
        set_remembering(false, false);
        remember_handle(0x10, HandOff::Communicator);
        assert!(
            known_handle(0x10).is_none(),
            "a counting process remembers nothing"
        );

        set_remembering(true, true);
        remember_handle(0x10, HandOff::Communicator);
        assert_eq!(
            known_handle(0x10),
            Some(HandOff::Communicator),
            "with its reason"
        );
        assert!(known_handle(0x20).is_none(), "another handle is asked");
        assert!(
            known_handle(0).is_none(),
            "the empty cache matches no handle"
        );

        changed();
        assert!(
            known_handle(0x10).is_none(),
            "a change of the tables forgets the decision"
        );
        remember_handle(0x20, HandOff::Native);
        assert!(
            known_handle(0x20) == Some(HandOff::Native) && known_handle(0x10).is_none(),
            "one handle per thread"
        );

        // Another thread has a cache of its own; the epoch is shared.
        std::thread::spawn(|| {
            assert!(known_handle(0x20).is_none());
            remember_handle(0x30, HandOff::Communicator);
            assert!(known_handle(0x30).is_some());
            changed();
        })
        .join()
        .expect("thread");
        assert!(
            known_handle(0x20).is_none(),
            "a change made by another thread is seen"
        );
    }
}
