//! Progress inside MPI: Open MPI's progress engine (`opal_progress`) runs registered
//! callbacks in every turn, inside every MPI call that waits or tests. Registering one
//! makes topo-run's nonblocking collectives advance while the program sits in its own MPI
//! calls (`MPI_Recv`, `MPI_Probe`, a collective MPI runs), as Open MPI's own nonblocking
//! collectives do.
//!
//! Rust programs get this by themselves: every context with a hierarchy joins a per-thread
//! list, and one callback, registered once, advances the contexts of the thread that is
//! inside MPI. The PMPI library keeps its own callback (it also completes the generalized
//! requests it hands out) and turns the automatic one off with [`manual`].
//!
//! Other MPI libraries have no such engine: there, the collectives advance inside
//! topo-run's calls only.

use std::cell::RefCell;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use crate::backoff::LIVENESS_PERIOD;
use crate::context::{ContextState, Shared, try_lock};
use crate::serial_lock::SerialLock;

pub use crate::ffi::opal::{Callback, register, unregister};

/// Set by [`manual`]: the contexts do not register the automatic callback.
static MANUAL: AtomicBool = AtomicBool::new(false);
/// Whether the automatic callback is registered.
static REGISTERED: AtomicBool = AtomicBool::new(false);

/// Turns the automatic callback off for this process (the PMPI library's own callback
/// does the work). Call it before the first context is set up.
pub fn manual() {
    MANUAL.store(true, Ordering::Relaxed);
}

thread_local! {
    /// The contexts of this thread that the callback advances, each with its busy flag.
    static CONTEXTS: RefCell<Vec<Tracked>> = const { RefCell::new(Vec::new()) };
    /// When the callback last checked the peers.
    static LAST_CHECK: RefCell<Option<Instant>> = const { RefCell::new(None) };
}

/// A context the callback advances, and its flag that says it may have collectives in
/// flight (`ContextState::busy_flag`): the callback runs in every turn of MPI's progress engine,
/// inside every MPI call the program makes, so an idle context costs it one load, not the
/// atomic updates of taking a reference and the lock.
struct Tracked {
    core: Weak<SerialLock<ContextState>>,
    busy: Arc<AtomicBool>,
}

/// Adds a context of this thread to the callback's list, registering the callback first
/// if it is not yet.
pub(crate) fn track(core: &Shared) {
    if MANUAL.load(Ordering::Relaxed) {
        return;
    }
    let busy = crate::context::lock(core).busy_flag();
    CONTEXTS.with(|c| {
        let mut list = c.borrow_mut();
        list.retain(|t| t.core.strong_count() > 0);
        // A kept context taken up again on the thread that tracks it already.
        if list
            .iter()
            .any(|t| std::ptr::eq(t.core.as_ptr(), Arc::as_ptr(core)))
        {
            return;
        }
        list.push(Tracked {
            core: Arc::downgrade(core),
            busy,
        });
    });
    if !REGISTERED.swap(true, Ordering::AcqRel) && !register(advance) {
        // Not Open MPI: nothing to register with.
        REGISTERED.store(false, Ordering::Release);
    }
}

/// The automatic callback: advances this thread's contexts that have collectives in
/// flight. A context that is itself running a call (this turn comes from inside it) is
/// left alone. A dead peer aborts the job, naming it.
extern "C" fn advance() -> c_int {
    CONTEXTS.with(|c| {
        let Ok(list) = c.try_borrow() else {
            return 0;
        };
        // Nothing in flight (the common case inside the program's own MPI calls): one
        // load per context, no clock reading, nothing else.
        let mut check = None;
        for t in list.iter() {
            // Relaxed: the flag is set under the context's lock before a collective starts
            // (on this thread, which made the context); a stale `true` costs a look.
            if !t.busy.load(Ordering::Relaxed) {
                continue;
            }
            let Some(core) = t.core.upgrade() else {
                continue;
            };
            if let Some(mut core) = try_lock(&core)
                && core.settle()
            {
                let check = *check.get_or_insert_with(liveness_due);
                core.advance_from_mpi(check);
                core.settle();
            }
        }
        0
    })
}

/// Whether the peers are due for a liveness check (as often as a waiting rank checks).
fn liveness_due() -> bool {
    LAST_CHECK.with(|t| {
        let mut t = t.borrow_mut();
        let due = t.is_none_or(|last| last.elapsed() >= LIVENESS_PERIOD);
        if due {
            *t = Some(Instant::now());
        }
        due
    })
}
