//! The progress thread (opt-in: `topo-run --progress-thread`, or the setting
//! `TOPO_RUN_PROGRESS=thread`): one thread per process that advances the nonblocking
//! collectives of every context while the application computes, so that they complete
//! without test or wait calls.
//!
//! - It only tries each context's lock: a context that is running a call of its own is
//!   making progress already, and the application never waits for the thread.
//! - Under `MPI_THREAD_MULTIPLE` it runs every step of a schedule. Otherwise it runs only
//!   the steps that make no MPI call (shared-memory transfers and the combines that
//!   topo-run computes itself); the network steps wait for the application's next MPI
//!   call (MPI's progress engine, [`crate::mpi_hook`]) or its test or wait.
//! - With nothing in flight it sleeps (parked) until a nonblocking collective starts.
//!   While something is in flight and nothing moves, it spins briefly, then yields its
//!   core, then polls every [`SLEEP`]: a rank that computes on the same core loses little.
//! - A failure it meets (a dead peer) is kept and reported, with the usual message and
//!   exit code, by the application's next call into the context.

use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use crate::context::{Core, Shared, try_lock};

/// Turns without progress that spin before the thread yields its core.
const SPIN: u32 = 256;
/// Turns without progress that yield before the thread sleeps between turns.
const YIELD: u32 = 1024;
/// The pause between turns once nothing has moved for a while.
pub const SLEEP: Duration = Duration::from_micros(20);

struct Helper {
    contexts: Mutex<Vec<Weak<Mutex<Core>>>>,
    thread: std::thread::Thread,
}

static HELPER: OnceLock<Helper> = OnceLock::new();

/// Adds a context to the thread's list, starting the thread with the first one.
pub(crate) fn track(core: &Shared) {
    let helper = HELPER.get_or_init(|| {
        let handle = std::thread::Builder::new()
            .name("topo-run-progress".into())
            .spawn(|| run(wait_for_helper()))
            .expect("the progress thread could not be started");
        Helper {
            contexts: Mutex::new(Vec::new()),
            thread: handle.thread().clone(),
        }
    });
    let mut list = helper
        .contexts
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    list.retain(|w| w.strong_count() > 0);
    list.push(Arc::downgrade(core));
}

/// The helper, once `track` has published it (the thread starts before it is).
fn wait_for_helper() -> &'static Helper {
    loop {
        if let Some(h) = HELPER.get() {
            return h;
        }
        std::thread::yield_now();
    }
}

/// Wakes the thread: a nonblocking collective has started. Cheap when the thread is
/// running or absent.
pub(crate) fn kick() {
    if let Some(h) = HELPER.get() {
        h.thread.unpark();
    }
}

/// Whether the progress thread runs in this process.
pub fn running() -> bool {
    HELPER.get().is_some()
}

fn run(helper: &'static Helper) -> ! {
    let mut quiet = 0u32;
    let mut last = 0u64;
    loop {
        let contexts: Vec<Shared> = helper
            .contexts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter_map(Weak::upgrade)
            .collect();
        let mut busy = false;
        let mut moves = 0u64;
        for c in &contexts {
            // A context held by its caller is making progress by itself; if the caller
            // started a collective meanwhile, its kick unparks us below.
            if let Some(mut core) = try_lock(c)
                && core.has_schedules()
            {
                moves = moves.wrapping_add(core.advance_from_thread());
                busy |= core.has_schedules();
            }
        }
        // The contexts' owners drop their hierarchy before MPI is finalized; the thread's
        // references only keep the emptied state alive a moment longer.
        drop(contexts);
        if !busy {
            quiet = 0;
            std::thread::park();
            continue;
        }
        if moves != last {
            last = moves;
            quiet = 0;
            continue;
        }
        quiet = quiet.saturating_add(1);
        if quiet < SPIN {
            std::hint::spin_loop();
        } else if quiet < SPIN + YIELD {
            std::thread::yield_now();
        } else {
            std::thread::sleep(SLEEP);
        }
    }
}
