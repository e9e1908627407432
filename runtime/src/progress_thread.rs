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
//! - While something is in flight and nothing moves, it spins briefly, then polls every
//!   [`SLEEP`]. With nothing in flight it naps ([`NAP`] at a time) while the program
//!   has used nonblocking collectives lately ([`ACTIVE`]), else it blocks until one
//!   starts. A collective of at least [`KICK_BYTES`] wakes it at once; a smaller one
//!   wakes it only from the block, so that back-to-back small collectives, which the
//!   program's own calls complete in microseconds, pay for no wake-up (a thread that
//!   shares the program's core cannot start sooner than the scheduler lets it anyway).
//! - A failure it meets (a dead peer) is kept and reported, with the usual message and
//!   exit code, by the application's next call into the context.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use crate::context::{ContextState, Shared, try_lock};
use crate::serial_lock::SerialLock;

/// Turns without progress that spin before the thread sleeps between turns.
const SPIN: u32 = 64;
/// The pause between turns once nothing has moved for a while.
pub const SLEEP: Duration = Duration::from_micros(20);
/// How long the thread naps between looks while nothing is in flight.
pub const NAP: Duration = Duration::from_millis(1);
/// How long after the last collective in flight the thread keeps napping rather than
/// blocking.
pub const ACTIVE: Duration = Duration::from_millis(100);
/// Collectives of at least this many bytes wake the thread when they start.
pub const KICK_BYTES: usize = 64 << 10;

struct Helper {
    contexts: Mutex<Vec<Weak<SerialLock<ContextState>>>>,
    thread: std::thread::Thread,
    /// The thread is blocked until a collective starts (not napping).
    blocked: AtomicBool,
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
            blocked: AtomicBool::new(false),
        }
    });
    let mut list = helper
        .contexts
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    list.retain(|w| w.strong_count() > 0);
    // A kept context taken up again is tracked already.
    if !list
        .iter()
        .any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(core)))
    {
        list.push(Arc::downgrade(core));
    }
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

/// A nonblocking collective of `bytes` has started and is in flight: wakes the thread if
/// it is blocked, or if the collective is large. Nothing when the thread is absent.
pub(crate) fn kick(bytes: usize) {
    if let Some(h) = HELPER.get()
        && (bytes >= KICK_BYTES || h.blocked.load(Ordering::SeqCst))
    {
        h.thread.unpark();
    }
}

/// Whether the progress thread runs in this process.
pub fn running() -> bool {
    HELPER.get().is_some()
}

fn run(helper: &'static Helper) -> ! {
    crate::ffi::tight_timer_slack();
    let mut quiet = 0u32;
    let mut last = 0u64;
    let mut last_busy = Instant::now();
    loop {
        let contexts = live(helper);
        let mut busy = false;
        let mut moves = 0u64;
        for c in &contexts {
            // A context held by its caller is making progress by itself; a collective it
            // starts meanwhile is seen at the next turn (or, if we block, by its kick).
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
            if last_busy.elapsed() < ACTIVE {
                std::thread::park_timeout(NAP);
            } else {
                // Announce the block, then look once more: a collective that started
                // before the announcement is seen now, one after it unparks us.
                helper.blocked.store(true, Ordering::SeqCst);
                if !any_schedules(helper) {
                    std::thread::park();
                }
                helper.blocked.store(false, Ordering::SeqCst);
            }
            continue;
        }
        last_busy = Instant::now();
        if moves != last {
            last = moves;
            quiet = 0;
            continue;
        }
        quiet = quiet.saturating_add(1);
        if quiet < SPIN {
            std::hint::spin_loop();
        } else {
            std::thread::sleep(SLEEP);
        }
    }
}

/// Whether any context that nobody holds has a schedule in flight. (A holder that starts
/// a collective kicks the thread after it lets go, and sees it blocked.)
fn any_schedules(helper: &Helper) -> bool {
    live(helper)
        .iter()
        .any(|c| try_lock(c).is_some_and(|core| core.has_schedules()))
}

/// The contexts still alive.
fn live(helper: &Helper) -> Vec<Shared> {
    helper
        .contexts
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter_map(Weak::upgrade)
        .collect()
}
