//! The runtime's one FFI module: every call it makes into MPI's C API, into libc and into
//! Open MPI's progress engine. Each function here is safe to call; what makes the call
//! beneath it sound is written beside it (`// SAFETY:`).
//!
//! - `comm`: topo-run's own communicators and the few MPI collectives the setup runs
//!   before a context exists;
//! - `p2p`: the MPI transport's nonblocking messages, tested to completion;
//! - `native`: the nonblocking collectives handed to MPI, tied to the request's scope;
//! - `opal`: Open MPI's progress engine (`opal_progress_register`).

pub(crate) mod comm;
pub(crate) mod native;
pub(crate) mod opal;
pub(crate) mod p2p;

pub use comm::{private_comm, ranks_in};

/// Lets this thread sleep as long as asked (a timer slack of 1 us, not the default 50):
/// the progress thread's short naps are what lets it share a core with the computation.
pub(crate) fn tight_timer_slack() {
    // SAFETY: prctl with PR_SET_TIMERSLACK takes one integer and affects this thread only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1000 as libc::c_ulong) };
}
