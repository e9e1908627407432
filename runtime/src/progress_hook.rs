//! The progress hook: a caller that holds more than one context (the PMPI library keeps
//! one per communicator) installs a closure with [`with_progress_hook`], and every wait
//! inside the call then also runs it, so that the nonblocking collectives of the other
//! contexts advance too, as MPI's progress rule asks.
//!
//! The closure is borrowed for the extent of the call and kept in a thread-local as a raw
//! pointer: this module erases its lifetime, and puts the previous value back when the
//! call returns or unwinds.

use std::cell::Cell;

thread_local! {
    /// The hook installed by [`with_progress_hook`] on this thread, if any.
    static HOOK: Cell<Option<*mut (dyn FnMut() + 'static)>> = const { Cell::new(None) };
}

/// Runs `f` with `hook` called whenever a wait inside it pauses (and in place of blocking
/// MPI point-to-point calls, which become polled). The hook must not wait itself.
pub fn with_progress_hook<R>(hook: &mut dyn FnMut(), f: impl FnOnce() -> R) -> R {
    struct Restore(Option<*mut (dyn FnMut() + 'static)>);
    impl Drop for Restore {
        fn drop(&mut self) {
            HOOK.with(|h| h.set(self.0));
        }
    }
    // SAFETY: only the trait object's lifetime bound changes. The pointer lives in the
    // thread-local no longer than this call: `Restore` puts the previous value back when
    // `f` returns or unwinds, and `hook` outlives the call.
    let hook: *mut (dyn FnMut() + 'static) = unsafe { std::mem::transmute(hook) };
    let _restore = Restore(HOOK.with(|h| h.replace(Some(hook))));
    f()
}

/// Whether a progress hook is installed on this thread.
pub(crate) fn hooked() -> bool {
    HOOK.with(|h| h.get().is_some())
}

/// Calls the progress hook, if any (never recursively: it is taken out while it runs).
pub(crate) fn run_hook() {
    let Some(hook) = HOOK.with(|h| h.take()) else {
        return;
    };
    struct Restore(*mut (dyn FnMut() + 'static));
    impl Drop for Restore {
        fn drop(&mut self) {
            HOOK.with(|h| h.set(Some(self.0)));
        }
    }
    let _restore = Restore(hook);
    // SAFETY: installed by `with_progress_hook`, whose caller keeps it alive and
    // unaliased until the call returns; we are inside that call on the same thread.
    unsafe { (*hook)() };
}
