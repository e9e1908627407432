//! The library's one global and its lock.

use super::*;

pub(super) struct Global {
    pub(super) state: Option<State>,
    pub(super) finalized: bool,
}

/// The state behind the global lock.
pub(super) struct Shared(pub(super) Global);

// SAFETY: `Topo`, `RawRequest` and `Progress` are not `Send` because a context's lock in
// the runtime is a plain flag where one thread at a time uses it. Below
// MPI_THREAD_MULTIPLE that holds here: all of them live in this state and are used with
// the global lock held (progress hooks run inside such a use, on the same thread), by MPI
// calls that never run concurrently. Under MPI_THREAD_MULTIPLE the runtime makes every
// context's lock a mutex (`topo_runtime::Topo`'s setup asks MPI's thread level), and a
// context leaves the global lock only behind its own (`slot`), a mutex too.
unsafe impl Send for Shared {}

/// A context behind its own lock (see `state`'s doc).
pub(crate) type Slot = SerialLock<Held>;

// SAFETY: as `Shared`'s: a context leaves the global lock only behind its slot's lock,
// which is a mutex under MPI_THREAD_MULTIPLE (threads hold it one after the other) and a
// flag taken with the global lock held below that level.
unsafe impl Send for Held {}

/// `held` behind a lock of its own: a mutex under `MPI_THREAD_MULTIPLE` (`multiple`), else
/// a flag.
pub(super) fn slot(held: Held, multiple: bool) -> Slot {
    if multiple {
        SerialLock::new(held)
    } else {
        // SAFETY: below MPI_THREAD_MULTIPLE the slot is only locked with the global lock
        // held (`State::run`), by MPI calls that never run concurrently.
        unsafe { SerialLock::new_serial(held) }
    }
}

/// The library's state. Its lock is a mutex until MPI is initialised below
/// `MPI_THREAD_MULTIPLE`, then a plain flag (`SERIAL_NEXT`): the per-call cost of a
/// mutex is a full fence at each end of every intercepted call (docs/runtime.md).
pub(super) static GLOBAL: SerialLock<Shared> = SerialLock::new(Shared(Global {
    state: None,
    finalized: false,
}));

/// Set once MPI is known to run below `MPI_THREAD_MULTIPLE`: the next [`lock`] turns
/// `GLOBAL` into a flag (not while it is held, as it is where this is learnt).
pub(super) static SERIAL_NEXT: AtomicBool = AtomicBool::new(false);

/// Takes the global lock, first dropping what communicators freed unseen left.
///
/// Inlined, its rare parts out of line and the guard never lent out: built in a function
/// of its own and handed back through memory, the guard's last field went out as a byte
/// and came back in a word, a load that stalls on the store.
#[inline(always)]
pub(super) fn lock() -> SerialGuard<'static, Shared> {
    if SERIAL_NEXT.load(Ordering::Relaxed) {
        make_serial();
    }
    if ANY_DELETED.load(Ordering::Relaxed) {
        forget_deleted();
    }
    GLOBAL.lock()
}

/// The global lock becomes a flag ([`SERIAL_NEXT`]).
#[cold]
#[inline(never)]
fn make_serial() {
    SERIAL_NEXT.store(false, Ordering::Relaxed);
    // SAFETY: below MPI_THREAD_MULTIPLE the program makes one MPI call at a time,
    // ordered by its own synchronisation between threads, and MPI runs the library's
    // callbacks (attribute deletion, progress) inside such calls: no two threads use
    // the state at once. Nobody holds the lock here: this thread is about to take
    // it, and no other thread is in an MPI call.
    unsafe { GLOBAL.make_serial() };
}

/// Forgets the communicators whose deletion callbacks queued their ids (under the lock,
/// which it lets go again: the caller takes it next).
#[cold]
#[inline(never)]
fn forget_deleted() {
    if ANY_DELETED.swap(false, Ordering::Acquire) {
        let mut g = GLOBAL.lock();
        let ids = std::mem::take(&mut *DELETED.lock().unwrap_or_else(|p| p.into_inner()));
        for id in ids {
            forget_id(&mut g, id);
        }
    }
}
