//! topo-run's own communicators: over an application's group, with none of its cached
//! attributes, and with an error handler that aborts the job when MPI fails in
//! topo-run's own communication. The MPI transport, MPI's progress probe and every
//! context make theirs here.

use std::os::raw::c_int;

use mpi::ffi;

/// A communicator of topo-run's own over the group of `parent` (collective over
/// `parent`): made with `MPI_Comm_create`, which copies none of the application's cached
/// attributes (a duplicate would run the program's attribute copy callbacks on a
/// communicator it never made), and given topo-run's error handler in place of the one
/// inherited from `parent`. An application that set `MPI_ERRORS_RETURN` on its
/// communicator would otherwise have topo-run's own calls, which do not check return
/// codes, go on after a failure; with this handler a failure of MPI in topo-run's own
/// communication reports itself and aborts the job with [`crate::ABORT_CODE`].
pub fn private_comm(parent: ffi::MPI_Comm) -> ffi::MPI_Comm {
    // SAFETY: reading constant handles.
    let (mut group, mut comm) = unsafe { (ffi::RSMPI_GROUP_NULL, ffi::RSMPI_COMM_NULL) };
    // SAFETY: `parent` is a live intracommunicator; the group and the new communicator are
    // written to locals, and the group is freed once the communicator holds it.
    unsafe {
        ffi::PMPI_Comm_group(parent, &mut group);
        ffi::PMPI_Comm_create(parent, group, &mut comm);
        ffi::PMPI_Group_free(&mut group);
    }
    set_internal_errhandler(comm);
    comm
}

/// Gives `comm`, a communicator of topo-run's own, the error handler [`internal_error`].
fn set_internal_errhandler(comm: ffi::MPI_Comm) {
    type Fixed = unsafe extern "C" fn(*mut ffi::MPI_Comm, *mut c_int);
    type Variadic = unsafe extern "C" fn(*mut ffi::MPI_Comm, *mut c_int, ...);
    // SAFETY: MPI calls an error handler with exactly the two fixed arguments (the
    // standard's variadic tail carries nothing in C), and on the C ABIs MPI runs on
    // (x86-64 SysV, AArch64 AAPCS64 on Linux) a variadic call passes its fixed arguments
    // as a call to a function without the tail takes them; `internal_error` reads only
    // those two.
    let handler = unsafe { std::mem::transmute::<Fixed, Variadic>(internal_error) };
    // SAFETY: an error handler handle is a pointer (Open MPI) or an integer (MPICH), for
    // which zero is a valid value; MPI overwrites it.
    let mut errhandler: ffi::MPI_Errhandler = unsafe { std::mem::zeroed() };
    // SAFETY: `handler` has the type MPI expects; `errhandler` is a local that MPI writes,
    // then attaches to `comm` (which keeps its own reference) before it is released.
    unsafe {
        ffi::PMPI_Comm_create_errhandler(Some(handler), &mut errhandler);
        ffi::PMPI_Comm_set_errhandler(comm, errhandler);
        ffi::PMPI_Errhandler_free(&mut errhandler);
    }
}

/// The error handler of topo-run's own communicators: MPI failed in topo-run's own
/// communication (a peer died, the network failed). Says so, and aborts the job with
/// [`crate::ABORT_CODE`], as the runtime does for every failed collective: going on would
/// wait for ever or compute with garbage.
unsafe extern "C" fn internal_error(_comm: *mut ffi::MPI_Comm, code: *mut c_int) {
    // SAFETY: MPI passes a valid pointer to the error code.
    let code = if code.is_null() { 0 } else { unsafe { *code } };
    let mut text = [0 as std::os::raw::c_char; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let (mut len, mut rank): (c_int, c_int) = (0, -1);
    // SAFETY: `text` has room for MPI_MAX_ERROR_STRING characters and the NUL; MPI is
    // initialised (it is calling us); world is a constant handle.
    unsafe {
        ffi::PMPI_Error_string(code, text.as_mut_ptr(), &mut len);
        ffi::PMPI_Comm_rank(ffi::RSMPI_COMM_WORLD, &mut rank);
    }
    // SAFETY: MPI wrote a NUL-terminated string; the last byte stays 0 in any case.
    let text = unsafe { std::ffi::CStr::from_ptr(text.as_ptr()) }.to_string_lossy();
    let node = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "this node".into());
    eprintln!(
        "topo-run: rank {rank} on {node}: MPI failed in topo-run's own communication between \
             nodes ({text}): a rank died or the network failed; aborting the job (exit code {})",
        crate::ABORT_CODE
    );
    // SAFETY: MPI is initialised; MPI_Abort does not return.
    unsafe { ffi::PMPI_Abort(ffi::RSMPI_COMM_WORLD, crate::ABORT_CODE) };
    std::process::exit(crate::ABORT_CODE);
}
