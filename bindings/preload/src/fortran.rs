//! The Fortran entry points (gfortran's names, used by `mpif.h` and `use mpi`).
//!
//! Open MPI's Fortran bindings call `PMPI_*` directly, so they never reach the C exports.
//! These symbols take the Fortran calls first: they translate the handles and the
//! Fortran `MPI_IN_PLACE`, try topo-run's path, and otherwise call MPI's own Fortran
//! profiling entry (`pmpi_bcast_`, ...) with the original arguments. `use mpi_f08` calls
//! are not intercepted (they go to MPI's own).

use std::ffi::{CStr, c_void};
use std::os::raw::c_int;
use std::sync::OnceLock;

use crate::abi::{self, MPI_Comm, SUCCESS};
use crate::calls;

type Fint = c_int;

/// The address of a symbol, looked up once per name in the process's global scope: the
/// first definition, which for a common block such as `mpi_fortran_in_place_` may be the
/// program's own copy (a copy relocation) rather than libmpi's. This library defines none
/// of the names it looks up.
fn lookup(cell: &'static OnceLock<usize>, name: &CStr) -> usize {
    *cell.get_or_init(|| {
        // SAFETY: dlsym with a NUL-terminated name.
        unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) as usize }
    })
}

/// Fortran's `MPI_IN_PLACE` (a common block in libmpi), as a buffer address.
fn fortran_in_place() -> usize {
    static CELL: OnceLock<usize> = OnceLock::new();
    lookup(&CELL, c"mpi_fortran_in_place_")
}

/// Fortran's `MPI_BOTTOM`.
fn fortran_bottom() -> usize {
    static CELL: OnceLock<usize> = OnceLock::new();
    lookup(&CELL, c"mpi_fortran_bottom_")
}

/// Whether this MPI's Fortran `MPI_IN_PLACE` and `MPI_BOTTOM` are known here (Open MPI's
/// `mpi_fortran_in_place_` and `mpi_fortran_bottom_`). Other MPI libraries (MPICH) mark
/// them otherwise, so a call with buffers goes to their own Fortran entry, which
/// translates them and calls the C function, which this library serves.
fn sentinels_known() -> bool {
    fortran_in_place() != 0 && fortran_bottom() != 0
}

/// Runs a Fortran entry with buffer arguments: `ours` as [`abi::entry_rc`] does, where
/// the buffers can be read here; `-1` (MPI's own entry) otherwise.
fn buffers_entry(cc: MPI_Comm, ours: impl FnOnce() -> Option<c_int>) -> c_int {
    if !sentinels_known() {
        return -1;
    }
    abi::entry_rc(Some(cc), ours, || -1)
}

/// A Fortran buffer argument as the C API sees it.
fn buffer(p: *const c_void) -> *const c_void {
    match p as usize {
        a if a != 0 && a == fortran_in_place() => abi::in_place(),
        a if a != 0 && a == fortran_bottom() => abi::bottom(),
        _ => p,
    }
}

fn comm(c: *const Fint) -> MPI_Comm {
    // SAFETY: gfortran passes every argument by reference.
    abi::comm_f2c(unsafe { *c })
}

/// Calls MPI's own Fortran entry `name` (looked up once) with the given arguments.
macro_rules! next {
    ($name:literal, fn($($t:ty),* $(,)?), $($arg:expr),* $(,)?) => {{
        static CELL: OnceLock<usize> = OnceLock::new();
        let f = lookup(&CELL, $name);
        if f == 0 {
            eprintln!(
                "topo-run: error: {} not found; the program calls MPI from Fortran but Open MPI's \
                 Fortran library is not loaded",
                $name.to_string_lossy()
            );
            std::process::abort();
        }
        // SAFETY: `f` is the MPI library's Fortran entry of that name, whose C signature is
        // this one (all arguments by reference).
        let f: unsafe extern "C" fn($($t),*) = unsafe { std::mem::transmute(f) };
        // SAFETY: the application's own arguments, passed on.
        unsafe { f($($arg),*) }
    }};
}

/// Sets `*ierr` to `rc`, the code of a call that took topo-run's path: success, or the
/// internal error of a panic, which is returned as is and never retried through MPI (the
/// peers may be inside topo-run's collective by then).
fn set_ierr(ierr: *mut Fint, rc: c_int) {
    if !ierr.is_null() {
        // SAFETY: gfortran passes the error argument by reference.
        unsafe { *ierr = rc as Fint };
    }
}

/// `MPI_BCAST(BUFFER, COUNT, DATATYPE, ROOT, COMM, IERROR)`.
///
/// # Safety
/// As the Fortran `MPI_BCAST`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpi_bcast_(
    buf: *mut c_void,
    count: *const Fint,
    dt: *const Fint,
    root: *const Fint,
    c: *const Fint,
    ierr: *mut Fint,
) {
    let cc = comm(c);
    let ours = buffers_entry(
        cc,
        // SAFETY: the translated arguments of this call (all read by reference).
        || unsafe {
            calls::bcast(
                buffer(buf).cast_mut(),
                *count,
                abi::type_f2c(*dt),
                *root,
                cc,
            )
        },
    );
    if ours != -1 {
        return set_ierr(ierr, ours);
    }
    next!(
        c"pmpi_bcast_",
        fn(*mut c_void, *const Fint, *const Fint, *const Fint, *const Fint, *mut Fint),
        buf,
        count,
        dt,
        root,
        c,
        ierr
    )
}

/// topo-run's path of `MPI_REDUCE` (to `root`) and `MPI_ALLREDUCE` (without one) on
/// communicator `cc`: MPI's code, or -1 to hand the call to MPI.
///
/// # Safety
/// The arguments of the Fortran call, all passed by reference.
unsafe fn reduction(
    send: *const c_void,
    recv: *mut c_void,
    count: *const Fint,
    dt: *const Fint,
    op: *const Fint,
    root: Option<*const Fint>,
    cc: MPI_Comm,
) -> c_int {
    buffers_entry(
        cc,
        // SAFETY: the translated arguments of this call (all read by reference).
        || unsafe {
            let (send, recv) = (buffer(send), buffer(recv).cast_mut());
            let (count, dt, op) = (*count, abi::type_f2c(*dt), abi::op_f2c(*op));
            match root {
                Some(root) => calls::reduce(send, recv, count, dt, op, *root, cc),
                None => calls::allreduce(send, recv, count, dt, op, cc),
            }
            .then_some(SUCCESS)
        },
    )
}

/// `MPI_REDUCE(SENDBUF, RECVBUF, COUNT, DATATYPE, OP, ROOT, COMM, IERROR)`.
///
/// # Safety
/// As the Fortran `MPI_REDUCE`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn mpi_reduce_(
    send: *const c_void,
    recv: *mut c_void,
    count: *const Fint,
    dt: *const Fint,
    op: *const Fint,
    root: *const Fint,
    c: *const Fint,
    ierr: *mut Fint,
) {
    // SAFETY: the arguments of this call.
    let ours = unsafe { reduction(send, recv, count, dt, op, Some(root), comm(c)) };
    if ours != -1 {
        return set_ierr(ierr, ours);
    }
    next!(
        c"pmpi_reduce_",
        fn(
            *const c_void,
            *mut c_void,
            *const Fint,
            *const Fint,
            *const Fint,
            *const Fint,
            *const Fint,
            *mut Fint,
        ),
        send,
        recv,
        count,
        dt,
        op,
        root,
        c,
        ierr
    )
}

/// `MPI_ALLREDUCE(SENDBUF, RECVBUF, COUNT, DATATYPE, OP, COMM, IERROR)`.
///
/// # Safety
/// As the Fortran `MPI_ALLREDUCE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpi_allreduce_(
    send: *const c_void,
    recv: *mut c_void,
    count: *const Fint,
    dt: *const Fint,
    op: *const Fint,
    c: *const Fint,
    ierr: *mut Fint,
) {
    // SAFETY: the arguments of this call.
    let ours = unsafe { reduction(send, recv, count, dt, op, None, comm(c)) };
    if ours != -1 {
        return set_ierr(ierr, ours);
    }
    next!(
        c"pmpi_allreduce_",
        fn(
            *const c_void,
            *mut c_void,
            *const Fint,
            *const Fint,
            *const Fint,
            *const Fint,
            *mut Fint,
        ),
        send,
        recv,
        count,
        dt,
        op,
        c,
        ierr
    )
}

/// `MPI_BARRIER(COMM, IERROR)`.
///
/// # Safety
/// As the Fortran `MPI_BARRIER`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpi_barrier_(c: *const Fint, ierr: *mut Fint) {
    let cc = comm(c);
    let ours = abi::entry_rc(Some(cc), || calls::barrier(cc).then_some(SUCCESS), || -1);
    if ours != -1 {
        return set_ierr(ierr, ours);
    }
    next!(c"pmpi_barrier_", fn(*const Fint, *mut Fint), c, ierr)
}

/// `MPI_FINALIZE(IERROR)`: topo-run's teardown (and statistics), then MPI's.
///
/// # Safety
/// As the Fortran `MPI_FINALIZE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpi_finalize_(ierr: *mut Fint) {
    crate::exports::teardown();
    next!(c"pmpi_finalize_", fn(*mut Fint), ierr)
}

/// `MPI_COMM_DUP(COMM, NEWCOMM, IERROR)`: MPI's, then a context for the duplicate of a
/// communicator congruent to world, as the C `MPI_Comm_dup`.
///
/// # Safety
/// As the Fortran `MPI_COMM_DUP`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpi_comm_dup_(c: *const Fint, newcomm: *mut Fint, ierr: *mut Fint) {
    next!(
        c"pmpi_comm_dup_",
        fn(*const Fint, *mut Fint, *mut Fint),
        c,
        newcomm,
        ierr
    );
    // SAFETY: gfortran passes the error argument by reference; MPI wrote it.
    let ok = ierr.is_null() || unsafe { *ierr } == SUCCESS;
    if ok && !newcomm.is_null() {
        let new = comm(newcomm);
        crate::exports::adopt_created(comm(c), new);
    }
}

/// `MPI_COMM_FREE(COMM, IERROR)`: drops the communicator's context, then MPI frees it, as
/// the C `MPI_Comm_free`.
///
/// # Safety
/// As the Fortran `MPI_COMM_FREE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpi_comm_free_(c: *mut Fint, ierr: *mut Fint) {
    if !c.is_null() {
        let cc = comm(c);
        crate::exports::forget(&cc);
    }
    next!(c"pmpi_comm_free_", fn(*mut Fint, *mut Fint), c, ierr)
}
