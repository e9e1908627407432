//! The callbacks through which MPI advances topo-run's collectives: Open MPI's progress
//! engine, and MPICH's extended generalized requests.

use super::*;

/// Asks Open MPI's progress engine to call `mpi_progress` in every turn, as it does its
/// own nonblocking collectives: every MPI call that waits (`MPI_Recv`, `MPI_Probe`, a
/// collective MPI runs, ...) then advances topo-run's too. Returns whether it could.
pub(crate) fn register_progress() -> bool {
    topo_runtime::mpi_hook::register(mpi_progress)
}

/// Undoes [`register_progress`] (before `MPI_Finalize`).
pub(crate) fn unregister_progress() {
    topo_runtime::mpi_hook::unregister(mpi_progress);
}

/// Called by Open MPI's progress engine, inside MPI calls: advances topo-run's
/// collectives in flight, unless this thread is inside the library already (the runtime's
/// own MPI calls) or nothing is in flight.
pub(super) extern "C" fn mpi_progress() -> c_int {
    if !in_flight() {
        return 0;
    }
    abi::entry_rc(None, || Some(progress_from_mpi()), || 0)
}

/// The poll function of our extended generalized requests: MPI calls it while it waits on
/// or tests one of them (a wait that does not pass through this library, such as a
/// Fortran `MPI_WAIT` or a library's `PMPI_Wait`); it advances every collective in flight
/// and completes the requests of those that are done.
pub(super) extern "C" fn grequest_poll(
    _extra: *mut c_void,
    _status: *mut ffi::MPI_Status,
) -> c_int {
    if in_flight() {
        abi::entry_rc(None, || Some(progress_from_mpi()), || 0);
    }
    SUCCESS
}

/// The wait function of our extended generalized requests: one turn, as
/// [`grequest_poll`]; MPI calls it again until its requests have completed.
pub(super) extern "C" fn grequest_wait(
    _count: c_int,
    _states: *mut *mut c_void,
    _timeout: f64,
    status: *mut ffi::MPI_Status,
) -> c_int {
    grequest_poll(std::ptr::null_mut(), status)
}
