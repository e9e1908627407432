//! topo-run's own communicators: over an application's group, with none of its cached
//! attributes, and with an error handler that aborts the job when MPI fails in
//! topo-run's own communication. The MPI transport, MPI's progress probe and every
//! context make theirs here. And the few MPI calls a context's setup makes before it has
//! a transport: small collectives over `PMPI_*`, MPI's thread level, the progress probe.

use std::cell::Cell;
use std::os::raw::c_int;
use std::sync::OnceLock;

use mpi::ffi;
use mpi::raw::{AsRaw, FromRaw};
use mpi::topology::{Communicator, SimpleCommunicator};

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

/// Like [`private_comm`], or `None` on every member where MPI has no room for another
/// communicator on some member (MPICH allows 2,048 per process, and each context of
/// topo-run's uses two): MPI's error returns instead of calling `parent`'s handler, and
/// the members agree on the outcome (collective over `parent`).
pub(crate) fn try_private(parent: &SimpleCommunicator) -> Option<SimpleCommunicator> {
    let p = parent.as_raw();
    // SAFETY: reading constant handles; an error handler handle is a pointer (Open MPI) or
    // an integer (MPICH), for which zero is a valid value; MPI overwrites it.
    let (mut group, mut comm, mut old) = unsafe {
        (
            ffi::RSMPI_GROUP_NULL,
            ffi::RSMPI_COMM_NULL,
            std::mem::zeroed::<ffi::MPI_Errhandler>(),
        )
    };
    // SAFETY: `parent` is a live intracommunicator; the group, the new communicator and the
    // handler are written to locals. `parent`'s own handler is put back before this
    // returns (MPI keeps a reference while it is attached, so ours is released).
    let rc = unsafe {
        ffi::PMPI_Comm_get_errhandler(p, &mut old);
        ffi::PMPI_Comm_set_errhandler(p, ffi::RSMPI_ERRORS_RETURN);
        ffi::PMPI_Comm_group(p, &mut group);
        let rc = ffi::PMPI_Comm_create(p, group, &mut comm);
        ffi::PMPI_Group_free(&mut group);
        ffi::PMPI_Comm_set_errhandler(p, old);
        ffi::PMPI_Errhandler_free(&mut old);
        rc
    };
    let failed = rc != ffi::MPI_SUCCESS as c_int || crate::fault::hit("no-communicator");
    let any = pmpi_allreduce_i32(
        parent,
        i32::from(failed),
        // SAFETY: a constant handle.
        unsafe { ffi::RSMPI_MAX },
    );
    if any != 0 {
        if rc == ffi::MPI_SUCCESS as c_int {
            // SAFETY: the communicator just made, freed once.
            unsafe { ffi::PMPI_Comm_free(&mut comm) };
        }
        return None;
    }
    set_internal_errhandler(comm);
    // SAFETY: a live intracommunicator just made for topo-run, owned by the returned value
    // alone (which frees it).
    Some(unsafe { SimpleCommunicator::from_raw(comm) })
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

/// A communicator of topo-run's own over `comm`'s group (collective over `comm`; see
/// [`private_comm`]).
pub(crate) fn private(comm: &SimpleCommunicator) -> SimpleCommunicator {
    // SAFETY: a live intracommunicator just made for topo-run, never world or self, and
    // owned by the returned value alone (which frees it).
    unsafe { SimpleCommunicator::from_raw(private_comm(comm.as_raw())) }
}

/// `PMPI_Bcast` of `buf` from `root` over `comm`.
pub(crate) fn pmpi_bcast(comm: &SimpleCommunicator, root: u32, buf: &mut [u8]) {
    // SAFETY: `buf` is valid for `buf.len()` bytes (at most 1 KiB here) and every rank
    // passes the same length; the communicator handle is live.
    unsafe {
        ffi::PMPI_Bcast(
            buf.as_mut_ptr().cast(),
            buf.len() as c_int,
            ffi::RSMPI_UINT8_T,
            root as c_int,
            comm.as_raw(),
        );
    }
}

/// `PMPI_Allgather` of `mine.len()` `u32` per rank over `comm` (every rank passes as
/// many): rank r's at `r * mine.len()..`.
pub(crate) fn pmpi_allgather_u32(comm: &SimpleCommunicator, mine: &[u32]) -> Vec<u32> {
    let n = mine.len();
    let mut all = vec![0u32; n * comm.size() as usize];
    // SAFETY: `n` `u32` in, `n` per rank out into a buffer of `n * size` of them; the
    // buffers are distinct and the handles live.
    unsafe {
        ffi::PMPI_Allgather(
            mine.as_ptr().cast(),
            n as c_int,
            ffi::RSMPI_UINT32_T,
            all.as_mut_ptr().cast(),
            n as c_int,
            ffi::RSMPI_UINT32_T,
            comm.as_raw(),
        );
    }
    all
}

/// This process's rank in `MPI_COMM_WORLD` and its size.
pub(crate) fn world_rank_size() -> (u32, u32) {
    let (mut rank, mut size): (c_int, c_int) = (0, 0);
    // SAFETY: MPI is initialised; world is a constant handle; each call writes one int.
    unsafe {
        ffi::PMPI_Comm_rank(ffi::RSMPI_COMM_WORLD, &mut rank);
        ffi::PMPI_Comm_size(ffi::RSMPI_COMM_WORLD, &mut size);
    }
    (rank as u32, size as u32)
}

/// The `MPI_COMM_WORLD` rank of each rank of `comm`, in `comm`'s order (local: no
/// communication).
pub(crate) fn world_ranks(comm: &SimpleCommunicator) -> Vec<u32> {
    // SAFETY: reading a constant handle.
    ranks_in(comm.as_raw(), unsafe { ffi::RSMPI_COMM_WORLD })
}

/// The rank in `other` of each rank of `comm`, in `comm`'s order (local: no
/// communication). Every rank of `comm` must be in `other` (a communicator made from
/// `other`, or `other` world).
pub fn ranks_in(comm: ffi::MPI_Comm, other: ffi::MPI_Comm) -> Vec<u32> {
    let mut n: c_int = 0;
    // SAFETY: a live communicator; writes one int.
    unsafe { ffi::PMPI_Comm_size(comm, &mut n) };
    let ranks: Vec<c_int> = (0..n).collect();
    let mut out = vec![0 as c_int; n.max(0) as usize];
    // SAFETY: live communicator handles; each group made here is freed here; `ranks` and
    // `out` hold `n` ints each, `comm`'s size.
    unsafe {
        let (mut mine, mut theirs) = (ffi::RSMPI_GROUP_NULL, ffi::RSMPI_GROUP_NULL);
        ffi::PMPI_Comm_group(comm, &mut mine);
        ffi::PMPI_Comm_group(other, &mut theirs);
        ffi::PMPI_Group_translate_ranks(mine, n, ranks.as_ptr(), theirs, out.as_mut_ptr());
        ffi::PMPI_Group_free(&mut mine);
        ffi::PMPI_Group_free(&mut theirs);
    }
    out.into_iter().map(|r| r as u32).collect()
}

/// `PMPI_Allreduce` of one `i32` with `op` over `comm`.
pub(crate) fn pmpi_allreduce_i32(comm: &SimpleCommunicator, mine: i32, op: ffi::MPI_Op) -> i32 {
    let mut out = 0i32;
    // SAFETY: one `i32` in, one out, distinct locations; the handles are live constants.
    unsafe {
        ffi::PMPI_Allreduce(
            (&mine as *const i32).cast(),
            (&mut out as *mut i32).cast(),
            1,
            ffi::RSMPI_INT32_T,
            op,
            comm.as_raw(),
        );
    }
    out
}

/// `PMPI_Barrier` over `comm`.
pub(crate) fn pmpi_barrier(comm: &SimpleCommunicator) {
    // SAFETY: a live communicator; every rank makes the same calls.
    unsafe { ffi::PMPI_Barrier(comm.as_raw()) };
}

/// Runs `comm`'s error handler with `MPI_ERR_OTHER` (the fault injection `mpi-error`).
pub(crate) fn call_errhandler(comm: &SimpleCommunicator) {
    // SAFETY: a live communicator; MPI runs its error handler with the code.
    unsafe { ffi::PMPI_Comm_call_errhandler(comm.as_raw(), ffi::MPI_ERR_OTHER as c_int) };
}

/// A private communicator over `MPI_COMM_SELF` for the progress probes, once MPI is known to be
/// initialised ([`enable_mpi_progress`]); unset in tests without MPI.
static PROBE_COMM: OnceLock<ProbeComm> = OnceLock::new();

struct ProbeComm(ffi::MPI_Comm);

// SAFETY: an MPI communicator handle is a process-wide value; it is only read after it is
// set, and MPI itself decides which threads may call it.
unsafe impl Send for ProbeComm {}
// SAFETY: as for `Send`; the handle is never written after it is set.
unsafe impl Sync for ProbeComm {}

/// Lets waits drive MPI's progress from now on. Call it with MPI initialised, from the
/// thread that calls MPI; later calls do nothing.
pub(crate) fn enable_mpi_progress() {
    PROBE_COMM.get_or_init(|| {
        // SAFETY: reading a constant handle; MPI is initialised (the caller's contract).
        // The communicator (local: over MPI_COMM_SELF) lives until MPI_Finalize.
        ProbeComm(private_comm(unsafe { ffi::RSMPI_COMM_SELF }))
    });
}

thread_local! {
    /// Whether MPI's progress engine ran on this thread (a test of topo-run's own requests
    /// that found them incomplete) since a wait last asked ([`took_progress`]).
    static PROGRESSED: Cell<bool> = const { Cell::new(false) };
}

/// Notes that MPI's progress engine just ran on this thread: an `MPI_Test` or
/// `MPI_Testall` that did not complete its requests (Open MPI's and MPICH's both progress
/// then).
pub(crate) fn note_progress() {
    PROGRESSED.set(true);
}

/// Whether MPI's progress engine ran on this thread since the last call ([`note_progress`]);
/// a wait that has just tested its own requests need not probe as well.
pub(crate) fn took_progress() -> bool {
    PROGRESSED.replace(false)
}

/// Drives MPI's progress engine once, if [`enable_mpi_progress`] was called.
pub(crate) fn poke_mpi() {
    if let Some(ProbeComm(comm)) = PROBE_COMM.get() {
        let mut flag: c_int = 0;
        // SAFETY: `comm` is the live private duplicate made by `enable_mpi_progress`, on
        // which nothing is ever sent, so the probe matches nothing and only progresses.
        unsafe {
            ffi::PMPI_Iprobe(
                ffi::RSMPI_ANY_SOURCE,
                ffi::RSMPI_ANY_TAG,
                *comm,
                &mut flag,
                ffi::RSMPI_STATUS_IGNORE,
            )
        };
    }
}

/// Whether MPI was initialised with `MPI_THREAD_MULTIPLE` (false before it is).
pub(crate) fn thread_multiple() -> bool {
    let mut init: c_int = 0;
    let mut level: c_int = 0;
    // SAFETY: MPI_Initialized may be called at any time; MPI_Query_thread once MPI is
    // initialised. Both write one int.
    unsafe {
        ffi::PMPI_Initialized(&mut init);
        if init == 0 {
            return false;
        }
        ffi::PMPI_Query_thread(&mut level);
    }
    // SAFETY: reading a constant.
    level == unsafe { ffi::RSMPI_THREAD_MULTIPLE }
}
