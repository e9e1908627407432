//! Generalized requests: the requests the application holds for topo-run's nonblocking
//! collectives. MPI's `MPI_Grequest_start`, or MPICH's `MPIX_Grequest_start`, whose poll
//! and wait functions let MPI's own waits and tests advance them; each completes with
//! the status MPI gives its own nonblocking collectives.

use std::ffi::c_void;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicI32, Ordering};

use mpi::ffi;

use super::{MPI_Request, MPI_Status, SUCCESS, world};

/// The source and tag MPI puts in the status of its own completed nonblocking collectives
/// (learnt by [`learn_collective_status`]).
static COLLECTIVE_SOURCE: AtomicI32 = AtomicI32::new(ffi::MPI_ANY_SOURCE);
static COLLECTIVE_TAG: AtomicI32 = AtomicI32::new(ffi::MPI_ANY_TAG);

/// Asks MPI what status its own nonblocking collectives complete with (an
/// `MPI_Iallreduce` of one int over world: collective), so that ours complete with the
/// same.
pub(crate) fn learn_collective_status() {
    // SAFETY: MPI is initialised; the request and status are locals (a zeroed status is a
    // valid value of the plain C struct).
    unsafe {
        let mut req = ffi::RSMPI_REQUEST_NULL;
        let mut st: MPI_Status = std::mem::zeroed();
        let (one, mut out) = (1 as c_int, 0 as c_int);
        let (one, out) = (&one as *const c_int, &mut out as *mut c_int);
        if ffi::PMPI_Iallreduce(
            one.cast(),
            out.cast(),
            1,
            ffi::RSMPI_INT32_T,
            ffi::RSMPI_SUM,
            world(),
            &mut req,
        ) == SUCCESS
            && ffi::PMPI_Wait(&mut req, &mut st) == SUCCESS
        {
            COLLECTIVE_SOURCE.store(st.MPI_SOURCE, Ordering::Relaxed);
            COLLECTIVE_TAG.store(st.MPI_TAG, Ordering::Relaxed);
        }
    }
}

/// The status of a completed nonblocking collective of ours, as MPI gives for its own:
/// its source and tag, no elements, not cancelled.
/// MPI calls it with a valid status (never `MPI_STATUS_IGNORE`).
extern "C" fn query(_extra: *mut c_void, status: *mut MPI_Status) -> c_int {
    // SAFETY: MPI passes a status it owns, valid for writes.
    unsafe {
        (*status).MPI_SOURCE = COLLECTIVE_SOURCE.load(Ordering::Relaxed);
        (*status).MPI_TAG = COLLECTIVE_TAG.load(Ordering::Relaxed);
        ffi::PMPI_Status_set_elements(status, ffi::RSMPI_UINT8_T, 0);
        ffi::PMPI_Status_set_cancelled(status, 0);
    }
    SUCCESS
}

/// Nothing to free: the library keeps its own state for the request.
extern "C" fn free(_extra: *mut c_void) -> c_int {
    SUCCESS
}

/// A collective cannot be cancelled: `MPI_Cancel` on one of our requests, in flight or
/// complete, fails with `MPI_ERR_REQUEST` (MPI passes it to world's error handler), as it
/// does on Open MPI's own nonblocking collectives.
extern "C" fn cancel(_extra: *mut c_void, _complete: c_int) -> c_int {
    ffi::MPI_ERR_REQUEST as c_int
}

/// The poll function of an extended generalized request (`MPIX_Grequest_start`).
pub(crate) type PollFn = unsafe extern "C" fn(*mut c_void, *mut MPI_Status) -> c_int;
/// The wait function of an extended generalized request.
pub(crate) type WaitFn =
    unsafe extern "C" fn(c_int, *mut *mut c_void, f64, *mut MPI_Status) -> c_int;

/// `MPIX_Grequest_start` (MPICH's extended generalized requests, `mpi_proto.h`): a
/// generalized request with a poll function that MPI calls while it tests the request, and
/// a wait function (never null) that it calls, with the states of every such request it
/// waits on, while it waits.
pub(crate) type MpixStart = unsafe extern "C" fn(
    unsafe extern "C" fn(*mut c_void, *mut MPI_Status) -> c_int,
    unsafe extern "C" fn(*mut c_void) -> c_int,
    unsafe extern "C" fn(*mut c_void, c_int) -> c_int,
    PollFn,
    WaitFn,
    *mut c_void,
    *mut MPI_Request,
) -> c_int;

/// `MPIX_Grequest_start` of the MPI in the process, if it has one (its profiling name
/// first, so that no tool's interception of it runs).
pub(crate) fn mpix_start() -> Option<MpixStart> {
    [c"PMPIX_Grequest_start", c"MPIX_Grequest_start"]
        .iter()
        .find_map(|name| {
            // SAFETY: dlsym with a NUL-terminated name.
            let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
            // SAFETY: MPICH's MPIX_Grequest_start has this signature (mpi_proto.h).
            (!f.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, MpixStart>(f) })
        })
}

/// A generalized request of the library's, started and not yet completed.
#[derive(Debug)]
pub(crate) struct GRequest(MPI_Request);

impl GRequest {
    /// Starts one: with `mpix`, MPICH's extended form with `poll` and `wait`; otherwise
    /// the standard one, which only `complete` completes.
    pub(crate) fn start(mpix: Option<MpixStart>, poll: PollFn, wait: WaitFn) -> GRequest {
        let mut handle = super::request_null();
        // SAFETY: the callbacks are `extern "C"` functions of the right types; `handle` is
        // a local that MPI fills in. Starting a generalized request runs no progress
        // callback of the library's (and one would find the state locked and return).
        unsafe {
            match mpix {
                Some(start) => start(
                    query,
                    free,
                    cancel,
                    poll,
                    wait,
                    std::ptr::null_mut(),
                    &mut handle,
                ),
                None => ffi::PMPI_Grequest_start(
                    Some(query),
                    Some(free),
                    Some(cancel),
                    std::ptr::null_mut(),
                    &mut handle,
                ),
            }
        };
        GRequest(handle)
    }

    /// The handle the application holds.
    pub(crate) fn handle(&self) -> MPI_Request {
        self.0
    }

    /// Completes the request, once (it is consumed). The application may have freed its
    /// handle meanwhile (MPI then frees the request once it completes); only this call
    /// completes it.
    pub(crate) fn complete(self) {
        // SAFETY: a generalized request started by `start` and not completed before.
        unsafe { ffi::PMPI_Grequest_complete(self.0) };
    }
}
