//! The library's one global and its lock.

use super::*;

pub(super) struct Global {
    pub(super) state: Option<State>,
    pub(super) finalized: bool,
}

/// The state behind the global lock.
pub(super) struct Shared(pub(super) Global);

// SAFETY: `Topo`, `RawRequest` and `Progress` are not `Send` only because of the `Rc`s
// that tie a context to its requests. All of them live here, and are only used with the
// global lock held (progress hooks run inside such a use, on the same thread). The
// library is only active at thread levels up to MPI_THREAD_SERIALIZED, where MPI calls
// never run concurrently anyway.
unsafe impl Send for Shared {}

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

pub(super) fn lock() -> SerialGuard<'static, Shared> {
    if SERIAL_NEXT.load(Ordering::Relaxed) {
        SERIAL_NEXT.store(false, Ordering::Relaxed);
        // SAFETY: below MPI_THREAD_MULTIPLE the program makes one MPI call at a time,
        // ordered by its own synchronisation between threads, and MPI runs the library's
        // callbacks (attribute deletion, progress) inside such calls: no two threads use
        // the state at once. Nobody holds the lock here: this thread is about to take
        // it, and no other thread is in an MPI call.
        unsafe { GLOBAL.make_serial() };
    }
    let mut g = GLOBAL.lock();
    if ANY_DELETED.load(Ordering::Relaxed) && ANY_DELETED.swap(false, Ordering::Acquire) {
        let ids = std::mem::take(&mut *DELETED.lock().unwrap_or_else(|p| p.into_inner()));
        for id in ids {
            forget_id(&mut g, id);
        }
    }
    g
}
