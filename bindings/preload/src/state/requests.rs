//! Nonblocking collectives on topo-run's path: started behind a generalized request,
//! advanced by every progress turn, and completed (with what is to unpack) once their
//! schedule is done.

use super::*;
use crate::abi::MPI_Request;

/// Like [`run`] for a nonblocking collective: `f` starts it. Returns the handle of a
/// generalized request that completes with it, for the application's `MPI_Request`, or
/// `None` if the call was not done.
///
/// A collective that is complete as soon as it has started (a broadcast's root whose
/// message went into the queues, a small one whose data was waiting) completes its
/// generalized request at once: the application's wait then finds it done in MPI, and
/// nothing of ours is left in flight.
pub(crate) fn run_nonblocking(
    call: Call,
    comm: MPI_Comm,
    f: impl FnOnce(
        &mut Active,
        &mut TypeCache<'_>,
    ) -> Result<(RawRequest, Option<Box<dyn Finish>>), HandOff>,
) -> Option<MPI_Request> {
    let g = lock();
    // Never set up here: the setup is collective, and starting a nonblocking collective
    // must not wait for other ranks (MPI-4.0 §6.12). Until a call that every rank makes
    // has set it up, nonblocking collectives go to MPI.
    let (mut g, r) = run_in_context(g, Some(call), comm, f);
    let st = g.0.state.as_mut()?;
    if matches!(r.0, Err(HandOff::Communicator)) {
        match abi::why_no_context(comm) {
            // A new communicator whose first collective is nonblocking.
            Some(None) => st.nonblocking_first = true,
            // One that can have no context (one rank, an intercommunicator): decided now,
            // as its first blocking collective would, alike on every member.
            Some(Some(why)) => st.decline(comm, why),
            None => {}
        }
    }
    let (req, unpack) = st.count(call, r)?;
    st.mark_active(comm);
    let grequest = GRequest::start(st.mpix_start, grequest_poll, grequest_wait);
    let handle = grequest.handle();
    match req.complete() {
        Ok(()) => finish(grequest, unpack),
        Err(req) => {
            st.pending.push(Pending {
                req,
                grequest,
                unpack,
            });
            IN_FLIGHT.store(true, Ordering::Relaxed);
        }
    }
    Some(handle)
}

/// The end of a nonblocking collective of ours that has completed: what is left to do
/// (unpacking), then its generalized request completes.
pub(super) fn finish(grequest: GRequest, unpack: Option<Box<dyn Finish>>) {
    if let Some(packed) = unpack {
        // An error went to the communicator's error handler; the request completes.
        let _ = packed.finish();
    }
    grequest.complete();
}

/// Whether blocking collectives handed to MPI run as MPI's nonblocking form, polled with
/// ours (`completion::handed`).
pub(crate) fn polls_handed() -> bool {
    UNHOOKED.load(Ordering::Relaxed)
}

/// Whether any nonblocking collective of ours is in flight.
pub(crate) fn in_flight() -> bool {
    // Relaxed: the flag is written and read by MPI calls, which never run concurrently at
    // the thread levels where the library is active; the lock orders everything else.
    IN_FLIGHT.load(Ordering::Relaxed)
}

/// Advances every collective in flight once, and completes the requests of finished
/// ones; with `check_peers`, also fails (aborting the job) if a local peer they wait on
/// has died. Returns whether any is still in flight.
pub(crate) fn progress(check_peers: bool) -> bool {
    if let Some(st) = &mut lock().0.state {
        st.progress(check_peers);
    }
    in_flight()
}

/// One turn of Open MPI's progress engine (inside some MPI call of the application's):
/// advances every collective in flight unless another thread holds the state, checking
/// the peers every 50 ms. Returns how many collectives it completed.
pub(crate) fn progress_from_mpi() -> c_int {
    let Some(mut g) = GLOBAL.try_lock() else {
        return 0;
    };
    let Some(st) = &mut g.0.state else {
        return 0;
    };
    let before = st.pending.len();
    let check = st.peer_check.due();
    st.progress(check);
    (before - st.pending.len()) as c_int
}

/// Whether `handle` is the request of one of our collectives still in flight (no lock
/// taken when none is).
pub(crate) fn is_pending(handle: MPI_Request) -> bool {
    in_flight()
        && lock()
            .0
            .state
            .as_ref()
            .is_some_and(|st| st.pending.iter().any(|p| p.grequest.handle() == handle))
}

/// Whether a nonblocking collective of ours is in flight: a copy of `!pending.is_empty()`
/// that every MPI call the library intercepts can read without taking the lock (and
/// while it is held, when the runtime re-enters the library).
pub(super) static IN_FLIGHT: AtomicBool = AtomicBool::new(false);

/// Whether topo-run's path is on in an MPI whose progress engine does not call the library
/// (no Open MPI hook): the same on every rank.
pub(super) static UNHOOKED: AtomicBool = AtomicBool::new(false);

/// Pauses that spin before one of the library's waits yields the core.
pub(crate) const SPIN: u32 = 64;

/// Says every 50 ms that it is time to check the peers, for Open MPI's progress engine,
/// which calls the library many times a microsecond: it reads the clock only every 64th
/// call.
pub(super) struct PeerCheck {
    calls: u32,
    last: Option<Instant>,
}

impl PeerCheck {
    pub(super) fn new() -> Self {
        PeerCheck {
            calls: 0,
            last: None,
        }
    }

    pub(super) fn due(&mut self) -> bool {
        self.calls = self.calls.wrapping_add(1);
        if !self.calls.is_multiple_of(64) {
            return false;
        }
        let now = Instant::now();
        match self.last {
            Some(t) if now.duration_since(t) < Duration::from_millis(50) => false,
            _ => {
                let first = self.last.is_none();
                self.last = Some(now);
                !first
            }
        }
    }
}
