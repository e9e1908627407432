//! The C side: MPI constants and queries through the profiling interface (`PMPI_*`), and
//! the wrapper every exported entry point runs in. Every call into MPI made by this
//! library goes to a `PMPI_*` symbol, so it never re-enters its own `MPI_*` exports.

use std::cell::Cell;
use std::ffi::{CStr, c_void};
use std::os::raw::{c_char, c_int};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use mpi::ffi;

use crate::classify::{HandOff, Numeric, OpKind, TypeClass, numeric, type_class};

pub(crate) use ffi::{MPI_Comm, MPI_Datatype, MPI_Op, MPI_Request, MPI_Status};

mod attrs;
mod grequest;
pub(crate) use attrs::{free_keyval, is_keyval, keyval_deleted_by, set_attr};
pub(crate) use grequest::{GRequest, MpixStart, learn_collective_status, mpix_start};

/// `MPI_SUCCESS`.
pub(crate) const SUCCESS: c_int = ffi::MPI_SUCCESS as c_int;
/// `MPI_ERR_INTERN`: what a caught internal failure becomes.
pub(crate) const ERR_INTERN: c_int = ffi::MPI_ERR_INTERN as c_int;

unsafe extern "C" {
    // Defined in consts.c, compiled with mpicc.
    static topo_preload_in_place: *mut c_void;
    static topo_preload_bottom: *mut c_void;
    static topo_preload_combiner_named: c_int;
    static topo_preload_open_mpi: c_int;
    fn topo_preload_packed() -> MPI_Datatype;
    fn topo_preload_comm_f2c(f: c_int) -> MPI_Comm;
    fn topo_preload_type_f2c(f: c_int) -> MPI_Datatype;
    fn topo_preload_op_f2c(f: c_int) -> MPI_Op;
    fn topo_preload_request_c2f(r: MPI_Request) -> c_int;
    fn topo_preload_comm_c2f(c: MPI_Comm) -> c_int;
    fn topo_preload_comm_unusable(c: MPI_Comm) -> c_int;
    fn topo_preload_type_unusable(t: MPI_Datatype) -> c_int;
    fn topo_preload_type_name(t: MPI_Datatype) -> *const c_char;
}

/// The C communicator of Fortran handle `f` (`PMPI_Comm_f2c`, a function in Open MPI and
/// a macro in MPICH).
pub(crate) fn comm_f2c(f: c_int) -> MPI_Comm {
    // SAFETY: a conversion that accepts any integer (an invalid one gives an invalid
    // handle, which MPI then reports where it is used).
    unsafe { topo_preload_comm_f2c(f) }
}

/// The C datatype of Fortran handle `f`.
pub(crate) fn type_f2c(f: c_int) -> MPI_Datatype {
    // SAFETY: as in `comm_f2c`.
    unsafe { topo_preload_type_f2c(f) }
}

/// The C operation of Fortran handle `f`.
pub(crate) fn op_f2c(f: c_int) -> MPI_Op {
    // SAFETY: as in `comm_f2c`.
    unsafe { topo_preload_op_f2c(f) }
}

/// The Fortran handle of request `r` (`PMPI_Request_c2f`).
pub(crate) fn request_c2f(r: MPI_Request) -> c_int {
    // SAFETY: `r` is a request this library just started (a generalized request of MPI's).
    unsafe { topo_preload_request_c2f(r) }
}

/// The Fortran handle of communicator `c` (`PMPI_Comm_c2f`).
pub(crate) fn comm_c2f(c: MPI_Comm) -> c_int {
    // SAFETY: `c` is a communicator MPI just made (or `MPI_COMM_NULL`).
    unsafe { topo_preload_comm_c2f(c) }
}

/// `MPI_PACKED`.
pub(crate) fn packed_type() -> MPI_Datatype {
    // SAFETY: returns a constant handle.
    unsafe { topo_preload_packed() }
}

/// `MPI_IN_PLACE`.
pub(crate) fn in_place() -> *const c_void {
    // SAFETY: a constant initialised at load time and never written.
    unsafe { topo_preload_in_place }
}

/// `MPI_BOTTOM`.
pub(crate) fn bottom() -> *const c_void {
    // SAFETY: as in `in_place`.
    unsafe { topo_preload_bottom }
}

thread_local! {
    /// Set while this thread runs inside the library. MPI calls made from in here (the
    /// runtime's own, through rsmpi) that land on our exports go straight to `PMPI_*`.
    static INSIDE: Cell<bool> = const { Cell::new(false) };
}

/// Runs an exported entry point: `ours` may take topo-run's path (it returns `true` if it
/// did); otherwise, or when the library is re-entered from inside itself, `native` hands
/// the call to MPI. A panic never crosses the C boundary: it is reported, passed to the
/// error handler of `comm`, and returns `MPI_ERR_INTERN`.
#[inline]
pub(crate) fn entry(
    comm: Option<MPI_Comm>,
    ours: impl FnOnce() -> bool,
    native: impl FnOnce() -> c_int,
) -> c_int {
    entry_rc(comm, || ours().then_some(SUCCESS), native)
}

/// Runs the library's own part of an entry point (setup, teardown, bookkeeping), which
/// has nothing to hand to MPI, as [`entry`] runs topo-run's path.
pub(crate) fn own(comm: Option<MPI_Comm>, f: impl FnOnce()) {
    entry(
        comm,
        || {
            f();
            true
        },
        || SUCCESS,
    );
}

/// Whether this thread is inside one of the library's entry points (the runtime's own MPI
/// calls, which go straight to MPI).
pub(crate) fn inside() -> bool {
    INSIDE.with(Cell::get)
}

/// Like [`entry`], for calls whose own path returns an MPI return code (`None`: hand the
/// call to MPI).
#[inline]
pub(crate) fn entry_rc(
    comm: Option<MPI_Comm>,
    ours: impl FnOnce() -> Option<c_int>,
    native: impl FnOnce() -> c_int,
) -> c_int {
    if INSIDE.with(Cell::get) {
        return native();
    }
    INSIDE.with(|i| i.set(true));
    let r = catch_unwind(AssertUnwindSafe(ours));
    INSIDE.with(|i| i.set(false));
    match r {
        Ok(Some(rc)) => rc,
        Ok(None) => native(),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            eprintln!(
                "topo-run: internal error in the PMPI library: {what}; please report it \
                 (run without topo-run's collectives with TOPO_RUN_PRELOAD=0)"
            );
            let comm = comm.unwrap_or_else(world);
            // SAFETY: `comm` is the caller's communicator (or world); MPI validates it.
            unsafe { ffi::PMPI_Comm_call_errhandler(comm, ERR_INTERN) };
            ERR_INTERN
        }
    }
}

/// `MPI_ERR_REQUEST`, passed to `comm`'s error handler (which may abort) and returned.
pub(crate) fn request_error(comm: MPI_Comm) -> c_int {
    let code = ffi::MPI_ERR_REQUEST as c_int;
    // SAFETY: `comm` is a valid communicator.
    unsafe { ffi::PMPI_Comm_call_errhandler(comm, code) };
    code
}

/// A private communicator over `MPI_COMM_SELF` (no attributes of the program's copied)
/// whose errors return instead of calling any handler: for the library's own probes
/// (`committed`). Free it with [`free_comm`].
pub(crate) fn quiet_self() -> MPI_Comm {
    // SAFETY: reading a constant handle; MPI is initialised, and the call is local to
    // this process.
    let c = topo_runtime::private_comm(unsafe { ffi::RSMPI_COMM_SELF });
    // SAFETY: the library's own live communicator.
    unsafe { ffi::PMPI_Comm_set_errhandler(c, ffi::RSMPI_ERRORS_RETURN) };
    c
}

/// Frees a communicator the library made itself.
pub(crate) fn free_comm(mut comm: MPI_Comm) {
    // SAFETY: a handle from `quiet_self`, freed once, before MPI_Finalize.
    unsafe { ffi::PMPI_Comm_free(&mut comm) };
}

/// Whether `dt` is committed, so that MPI can pack it: an empty `PMPI_Pack` fails with
/// `MPI_ERR_TYPE` on a datatype that is not (MPI has no direct query), reported on
/// `quiet` (from [`quiet_self`]) rather than to the program.
pub(crate) fn committed(dt: MPI_Datatype, quiet: MPI_Comm) -> bool {
    let (mut byte, mut pos) = (0u8, 0 as c_int);
    // SAFETY: zero elements from and into local storage; MPI only checks the arguments.
    let rc = unsafe {
        ffi::PMPI_Pack(
            (&raw const byte).cast(),
            0,
            dt,
            (&raw mut byte).cast(),
            0,
            &mut pos,
            quiet,
        )
    };
    rc == SUCCESS
}

/// `MPI_COMM_WORLD`.
pub(crate) fn world() -> MPI_Comm {
    // SAFETY: reading a constant handle.
    unsafe { ffi::RSMPI_COMM_WORLD }
}

/// `comm`, borrowed as an rsmpi communicator that is never freed.
pub(crate) fn borrowed(
    comm: MPI_Comm,
) -> std::mem::ManuallyDrop<mpi::topology::SimpleCommunicator> {
    use mpi::raw::FromRaw;
    // SAFETY: `comm` is a live intracommunicator; the wrapper is never dropped, so rsmpi
    // never frees it, and it does not outlive the call that uses it.
    std::mem::ManuallyDrop::new(unsafe { mpi::topology::SimpleCommunicator::from_raw(comm) })
}

/// `MPI_UNDEFINED`.
pub(crate) fn undefined() -> c_int {
    // SAFETY: reading a constant.
    unsafe { ffi::RSMPI_UNDEFINED }
}

/// `MPI_DATATYPE_NULL`.
#[inline(always)]
pub(crate) fn datatype_null() -> MPI_Datatype {
    // SAFETY: reading a constant handle.
    unsafe { ffi::RSMPI_DATATYPE_NULL }
}

/// `MPI_COMM_NULL`.
pub(crate) fn comm_null() -> MPI_Comm {
    // SAFETY: reading a constant handle.
    unsafe { ffi::RSMPI_COMM_NULL }
}

/// Whether the MPI library is Open MPI (its `mpi.h` defines `OPEN_MPI`).
pub(crate) fn open_mpi() -> bool {
    // SAFETY: a constant initialised at load time and never written.
    unsafe { topo_preload_open_mpi != 0 }
}

/// The tag of the library's `MPI_Comm_create_group` calls (any valid tag: they run inside a
/// call that every rank of the parent makes, below `MPI_THREAD_MULTIPLE`, so none of the
/// program's can be in progress on the same ranks).
const CREATE_GROUP_TAG: c_int = 7_411;

/// A new communicator of `parent`'s ranks `ranks` (in that order; none: this rank is in
/// none), with `parent`'s error handler, as `MPI_Comm_split` gives it (MPICH's
/// create_group does not): MPI's return code and the new communicator (`MPI_COMM_NULL`
/// for no ranks). Every rank of `parent` calls it, each with its own group's `ranks`
/// (disjoint groups, the same `ranks` on the ranks of one group), and the same `by_create`:
/// `MPI_Comm_create` (collective over `parent`), else `MPI_Comm_create_group` (over the
/// group only).
pub(crate) fn create_group(
    parent: MPI_Comm,
    ranks: &[c_int],
    by_create: bool,
) -> (c_int, MPI_Comm) {
    if ranks.is_empty() && !by_create {
        return (SUCCESS, comm_null());
    }
    // SAFETY: reading constant handles; an error handler handle is a pointer (Open MPI) or
    // an integer (MPICH), for which zero is a valid value; MPI overwrites it.
    let (mut all, mut some, mut comm, mut handler) = unsafe {
        (
            ffi::RSMPI_GROUP_NULL,
            ffi::RSMPI_GROUP_EMPTY,
            ffi::RSMPI_COMM_NULL,
            std::mem::zeroed::<ffi::MPI_Errhandler>(),
        )
    };
    // SAFETY: `parent` is a live intracommunicator and `ranks` valid ranks of it (`len`
    // ints); the groups made here are freed here (never `MPI_GROUP_EMPTY`); MPI writes the
    // new communicator to a local. The handler fetched is released once set on the new
    // communicator.
    unsafe {
        if !ranks.is_empty() {
            ffi::PMPI_Comm_group(parent, &mut all);
            ffi::PMPI_Group_incl(all, ranks.len() as c_int, ranks.as_ptr(), &mut some);
            ffi::PMPI_Group_free(&mut all);
        }
        let rc = if by_create {
            ffi::PMPI_Comm_create(parent, some, &mut comm)
        } else {
            ffi::PMPI_Comm_create_group(parent, some, CREATE_GROUP_TAG, &mut comm)
        };
        if !ranks.is_empty() {
            ffi::PMPI_Group_free(&mut some);
        }
        if rc == SUCCESS
            && comm != ffi::RSMPI_COMM_NULL
            && ffi::PMPI_Comm_get_errhandler(parent, &mut handler) == SUCCESS
        {
            ffi::PMPI_Comm_set_errhandler(comm, handler);
            ffi::PMPI_Errhandler_free(&mut handler);
        }
        (rc, comm)
    }
}

/// The number of ranks of `comm` (the local group's, for an intercommunicator).
pub(crate) fn comm_size(comm: MPI_Comm) -> usize {
    let mut n: c_int = 0;
    // SAFETY: a live communicator; writes one int.
    unsafe { ffi::PMPI_Comm_size(comm, &mut n) };
    n.max(0) as usize
}

/// `PMPI_Allreduce` with `MPI_MAX` of two ints over `comm`.
pub(crate) fn allreduce_max_2(comm: MPI_Comm, mine: [c_int; 2]) -> [c_int; 2] {
    let mut agreed: [c_int; 2] = [0; 2];
    // SAFETY: two ints in, two out, distinct buffers; `comm` is live.
    unsafe {
        ffi::PMPI_Allreduce(
            mine.as_ptr().cast(),
            agreed.as_mut_ptr().cast(),
            2,
            ffi::RSMPI_INT32_T,
            ffi::RSMPI_MAX,
            comm,
        );
    }
    agreed
}

/// `MAX` over `comm` of every rank's `mine`, through `PMPI_Iallreduce`, calling `poll`
/// between tests until it completes (so that collectives of the library's own that a peer
/// may wait for advance meanwhile). `None` if MPI reports an error.
pub(crate) fn allreduce_max_polled<const N: usize>(
    comm: MPI_Comm,
    mine: [c_int; N],
    mut poll: impl FnMut(),
) -> Option<[c_int; N]> {
    let mut out = [0 as c_int; N];
    let mut req = request_null();
    // SAFETY: `mine` and `out` are locals that outlive the request (it completes, or fails,
    // before this returns); `comm` is live.
    let rc = unsafe {
        ffi::PMPI_Iallreduce(
            mine.as_ptr().cast(),
            out.as_mut_ptr().cast(),
            N as c_int,
            ffi::RSMPI_INT32_T,
            ffi::RSMPI_MAX,
            comm,
            &mut req,
        )
    };
    if rc != SUCCESS {
        return None;
    }
    loop {
        let (rc, done) = test(&mut req);
        if rc != SUCCESS {
            return None;
        }
        if done {
            return Some(out);
        }
        poll();
    }
}

/// Why `comm` can have no context (an intercommunicator, or one rank), `Some(None)` for an
/// intracommunicator of at least two ranks; `None` for a null or unusable handle (the
/// collective's own call then reports it).
pub(crate) fn why_no_context(comm: MPI_Comm) -> Option<Option<HandOff>> {
    // SAFETY: reading a constant handle, and comparing `comm` with constants.
    if comm == unsafe { ffi::RSMPI_COMM_NULL } || unsafe { topo_preload_comm_unusable(comm) } != 0 {
        return None;
    }
    let (mut inter, mut size) = (0 as c_int, 0 as c_int);
    // SAFETY: `comm` is a usable communicator handle (checked above); each call writes one
    // int.
    let ok = unsafe {
        ffi::PMPI_Comm_test_inter(comm, &mut inter) == SUCCESS
            && ffi::PMPI_Comm_size(comm, &mut size) == SUCCESS
    };
    ok.then_some(if inter != 0 {
        Some(HandOff::Intercommunicator)
    } else if size < 2 {
        Some(HandOff::OneRank)
    } else {
        None
    })
}

/// `MPI_Abort` over world with `code`; does not return.
pub(crate) fn abort(code: c_int) -> ! {
    // SAFETY: MPI is initialised; MPI_Abort does not return.
    unsafe { ffi::PMPI_Abort(world(), code) };
    std::process::exit(code)
}

/// `PMPI_Test` of `req`: MPI's code, and whether it completed.
pub(crate) fn test(req: &mut MPI_Request) -> (c_int, bool) {
    let mut flag = 0;
    // SAFETY: `req` is a request handle MPI checks (an active one, or null).
    let rc = unsafe { ffi::PMPI_Test(req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
    (rc, flag != 0)
}

/// `PMPI_Wait` for `req`: MPI's code.
pub(crate) fn wait(req: &mut MPI_Request) -> c_int {
    // SAFETY: as in `test`.
    unsafe { ffi::PMPI_Wait(req, ffi::RSMPI_STATUS_IGNORE) }
}

/// `MPI_COMM_SELF`.
pub(crate) fn comm_self() -> MPI_Comm {
    // SAFETY: reading a constant handle.
    unsafe { ffi::RSMPI_COMM_SELF }
}

/// `MPI_REQUEST_NULL`.
pub(crate) fn request_null() -> MPI_Request {
    // SAFETY: reading a constant handle.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}

/// Whether MPI is initialised and not yet finalised.
pub(crate) fn mpi_running() -> bool {
    let (mut init, mut fin) = (0, 0);
    // SAFETY: both may be called at any time, from any thread.
    unsafe {
        ffi::PMPI_Initialized(&mut init);
        ffi::PMPI_Finalized(&mut fin);
    }
    init != 0 && fin == 0
}

/// Whether MPI was initialised with `MPI_THREAD_MULTIPLE`.
pub(crate) fn thread_multiple() -> bool {
    let mut level = 0;
    // SAFETY: called after initialisation; writes one int.
    unsafe {
        ffi::PMPI_Query_thread(&mut level);
        level == ffi::RSMPI_THREAD_MULTIPLE
    }
}

/// This rank in world and the world size.
pub(crate) fn world_rank_size() -> (i32, i32) {
    let (mut r, mut s) = (0, 0);
    // SAFETY: called after initialisation; writes one int each.
    unsafe {
        ffi::PMPI_Comm_rank(world(), &mut r);
        ffi::PMPI_Comm_size(world(), &mut s);
    }
    (r, s)
}

/// Whether `comm` is `MPI_COMM_WORLD` or an intracommunicator congruent to it (same
/// group, same order: a duplicate). A null or invalid handle is not.
pub(crate) fn congruent_to_world(comm: MPI_Comm) -> bool {
    // SAFETY: reading constant handles.
    let (null, ident, congruent) =
        unsafe { (ffi::RSMPI_COMM_NULL, ffi::RSMPI_IDENT, ffi::RSMPI_CONGRUENT) };
    // SAFETY: compares the handle with constants; nothing is dereferenced.
    if comm == null || unsafe { topo_preload_comm_unusable(comm) } != 0 {
        return false;
    }
    let mut result = 0;
    // SAFETY: `comm` is a non-null handle the application passed to a collective; MPI
    // validates it (an invalid one is the application's error either way).
    let rc = unsafe { ffi::PMPI_Comm_compare(comm, world(), &mut result) };
    rc == SUCCESS && (result == ident || result == congruent)
}

/// What the library needs to know of a datatype.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TypeInfo {
    /// A predefined type without gaps: its size in bytes, its class and what it holds.
    Plain {
        size: usize,
        class: TypeClass,
        numeric: Option<Numeric>,
    },
    /// A derived type, or a predefined one whose extent differs from its size.
    Derived,
    /// `MPI_DATATYPE_NULL` or a handle MPI rejects.
    Invalid,
}

/// The standard name of the predefined datatype `dt`, found by its handle (never by
/// `MPI_Type_get_name`: a program may rename a predefined type); empty for a handle that
/// is not one of those the library classifies.
pub(crate) fn predefined_name(dt: MPI_Datatype) -> &'static str {
    // SAFETY: compares the handle with MPI's constants; returns a static string or null.
    let name = unsafe { topo_preload_type_name(dt) };
    if name.is_null() {
        return "";
    }
    // SAFETY: a NUL-terminated string literal of consts.c, which lives for the program.
    unsafe { CStr::from_ptr(name) }.to_str().unwrap_or("")
}

/// Looks `dt` up through `PMPI_Type_get_envelope`, `_size` and `_get_extent`, and
/// [`predefined_name`].
pub(crate) fn type_info(dt: MPI_Datatype) -> TypeInfo {
    // SAFETY: compares the handle with constants; nothing is dereferenced.
    if unsafe { topo_preload_type_unusable(dt) } != 0 {
        return TypeInfo::Invalid;
    }
    let (mut ni, mut na, mut nd, mut combiner) = (0, 0, 0, 0);
    // SAFETY: `dt` is a non-null handle from the application; the outputs are ints.
    let rc = unsafe { ffi::PMPI_Type_get_envelope(dt, &mut ni, &mut na, &mut nd, &mut combiner) };
    if rc != SUCCESS {
        return TypeInfo::Invalid;
    }
    // SAFETY: a constant initialised at load time and never written.
    if combiner != unsafe { topo_preload_combiner_named } {
        return TypeInfo::Derived;
    }
    let mut size: c_int = 0;
    let (mut lb, mut extent, mut tlb, mut textent) = (0, 0, 0, 0);
    // SAFETY: `dt` is a valid predefined datatype (its envelope was read); every output
    // points at a local of the right type.
    unsafe {
        ffi::PMPI_Type_size(dt, &mut size);
        ffi::PMPI_Type_get_extent(dt, &mut lb, &mut extent);
        ffi::PMPI_Type_get_true_extent(dt, &mut tlb, &mut textent);
    }
    let name = predefined_name(dt);
    let class = type_class(name);
    let gaps =
        size <= 0 || lb != 0 || tlb != 0 || extent != size as ffi::MPI_Aint || textent != extent;
    match class {
        // Value-index pairs go to MPI whatever their layout; the size is not used.
        TypeClass::Pair => TypeInfo::Plain {
            size: 0,
            class,
            numeric: None,
        },
        _ if gaps => TypeInfo::Derived,
        _ => TypeInfo::Plain {
            size: size as usize,
            class,
            numeric: numeric(name),
        },
    }
}

/// The predefined operation `op` is, if it is one topo-run reduces with.
pub(crate) fn op_kind(op: MPI_Op) -> Option<OpKind> {
    // SAFETY: reading constant handles.
    let known = unsafe {
        [
            ffi::RSMPI_MAX,
            ffi::RSMPI_MIN,
            ffi::RSMPI_SUM,
            ffi::RSMPI_PROD,
            ffi::RSMPI_LAND,
            ffi::RSMPI_BAND,
            ffi::RSMPI_LOR,
            ffi::RSMPI_BOR,
            ffi::RSMPI_LXOR,
            ffi::RSMPI_BXOR,
        ]
    };
    known.iter().position(|&k| k == op).map(|i| OpKind::ALL[i])
}

/// The datatype a call unpacks with at completion: the application's handle, or a
/// duplicate of it that this value frees (a nonblocking call keeps one, since the
/// application may free its handle before the call completes).
#[derive(Debug)]
pub(crate) struct KeptType {
    dt: MPI_Datatype,
    owned: bool,
}

impl KeptType {
    /// `dt` itself, or with `duplicate` a duplicate of it; `None` if MPI cannot
    /// duplicate it.
    pub(crate) fn new(dt: MPI_Datatype, duplicate: bool) -> Option<KeptType> {
        if !duplicate {
            return Some(KeptType { dt, owned: false });
        }
        let mut dup = dt;
        // SAFETY: duplicating the application's valid datatype into a local handle.
        if unsafe { ffi::PMPI_Type_dup(dt, &mut dup) } != SUCCESS {
            return None;
        }
        Some(KeptType {
            dt: dup,
            owned: true,
        })
    }

    /// The handle to unpack with.
    pub(crate) fn handle(&self) -> MPI_Datatype {
        self.dt
    }
}

impl Drop for KeptType {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: the duplicate made in `new`, freed once, here.
            unsafe { ffi::PMPI_Type_free(&mut self.dt) };
        }
    }
}

/// How [`reduce_u64_to_0`] combines the ranks' values.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Combine {
    Sum,
    Max,
}

/// `PMPI_Reduce` of every rank's `mine` (the same length on all) to rank 0 of `comm`:
/// the result there, `None` on the other ranks or if MPI reports an error.
pub(crate) fn reduce_u64_to_0(comm: MPI_Comm, mine: &[u64], how: Combine) -> Option<Vec<u64>> {
    let mut out = vec![0u64; mine.len()];
    let n = c_int::try_from(mine.len()).ok()?;
    let mut rank: c_int = 0;
    // SAFETY: `mine` and `out` hold `n` 64-bit integers each and are distinct; `comm` is
    // a live intracommunicator.
    let rc = unsafe {
        ffi::PMPI_Comm_rank(comm, &mut rank);
        let op = match how {
            Combine::Sum => ffi::RSMPI_SUM,
            Combine::Max => ffi::RSMPI_MAX,
        };
        ffi::PMPI_Reduce(
            mine.as_ptr().cast(),
            out.as_mut_ptr().cast(),
            n,
            ffi::RSMPI_UINT64_T,
            op,
            0,
            comm,
        )
    };
    (rc == SUCCESS && rank == 0).then_some(out)
}

/// Whether this rank is the first of its node in `MPI_COMM_WORLD` (collective over world:
/// `PMPI_Comm_split_type` with `MPI_COMM_TYPE_SHARED`).
pub(crate) fn first_on_node() -> bool {
    // SAFETY: reading a constant handle.
    let mut node = unsafe { ffi::RSMPI_COMM_NULL };
    // SAFETY: world is live; `node` receives a new communicator, freed below.
    let rc = unsafe {
        ffi::PMPI_Comm_split_type(
            world(),
            ffi::MPI_COMM_TYPE_SHARED as c_int,
            0,
            ffi::RSMPI_INFO_NULL,
            &mut node,
        )
    };
    if rc != SUCCESS {
        return world_rank_size().0 == 0;
    }
    let mut rank: c_int = 0;
    // SAFETY: `node` is the communicator just made.
    unsafe { ffi::PMPI_Comm_rank(node, &mut rank) };
    free_comm(node);
    rank == 0
}

/// The first line of `MPI_Get_library_version`.
pub(crate) fn library_version() -> String {
    let mut buf = vec![0 as std::os::raw::c_char; ffi::MPI_MAX_LIBRARY_VERSION_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: `buf` holds MPI_MAX_LIBRARY_VERSION_STRING characters and a NUL.
    let rc = unsafe { ffi::PMPI_Get_library_version(buf.as_mut_ptr(), &mut len) };
    if rc != SUCCESS {
        return String::new();
    }
    let bytes: Vec<u8> = buf[..len.clamp(0, buf.len() as c_int - 1) as usize]
        .iter()
        .map(|&c| c as u8)
        .collect();
    let text = String::from_utf8_lossy(&bytes);
    text.lines().next().unwrap_or("").trim().to_string()
}

/// The sizes of the predefined datatypes the profile met last, by handle (a handle of 0
/// marks a free entry): a predefined type's handle is never freed, so its size never
/// changes. Used by one thread at a time only ([`size_cache`]).
static SIZES: [(AtomicUsize, AtomicU64); 8] =
    [const { (AtomicUsize::new(0), AtomicU64::new(0)) }; 8];
/// Whether [`bytes_of`] may use [`SIZES`]: set by the profile below
/// `MPI_THREAD_MULTIPLE`, where one thread at a time is in MPI (an entry is two words,
/// which two threads could tear).
static SIZES_ON: AtomicBool = AtomicBool::new(false);

/// Lets [`bytes_of`] keep the predefined types' sizes (`on`: below
/// `MPI_THREAD_MULTIPLE`).
pub(crate) fn size_cache(on: bool) {
    SIZES_ON.store(on, Ordering::Relaxed);
}

/// The bytes of `count` elements of `dt` (0 for a negative count or an unusable handle),
/// for the profile. A predefined type's size is looked up once and kept ([`SIZES`]).
#[inline]
pub(crate) fn bytes_of(count: c_int, dt: MPI_Datatype) -> u64 {
    if count <= 0 {
        return 0;
    }
    let key = dt.0 as usize;
    let slot = &SIZES[slot_of(key)];
    if SIZES_ON.load(Ordering::Relaxed) && key != 0 && slot.0.load(Ordering::Relaxed) == key {
        return count as u64 * slot.1.load(Ordering::Relaxed);
    }
    bytes_of_looked_up(count, dt, slot)
}

/// The entry of [`SIZES`] for a datatype handle.
#[inline(always)]
fn slot_of(key: usize) -> usize {
    (key >> 3 ^ key >> 9) & 7
}

/// Whether `dt` is a predefined datatype that [`bytes_of`] met (its size is kept, and
/// never changes).
pub(crate) fn predefined(dt: MPI_Datatype) -> bool {
    let key = dt.0 as usize;
    let slot = &SIZES[slot_of(key)];
    SIZES_ON.load(Ordering::Relaxed) && key != 0 && slot.0.load(Ordering::Relaxed) == key
}

#[inline(never)]
fn bytes_of_looked_up(count: c_int, dt: MPI_Datatype, slot: &(AtomicUsize, AtomicU64)) -> u64 {
    // SAFETY: compares the handle with constants; nothing is dereferenced.
    if unsafe { topo_preload_type_unusable(dt) } != 0 {
        return 0;
    }
    let mut size: c_int = 0;
    // SAFETY: a handle that is not MPI_DATATYPE_NULL; writes one int.
    unsafe { ffi::PMPI_Type_size(dt, &mut size) };
    let size = size.max(0) as u64;
    // SAFETY: compares the handle with MPI's constants (a derived type, which is not one,
    // pays those comparisons only: no string is read).
    if SIZES_ON.load(Ordering::Relaxed) && !unsafe { topo_preload_type_name(dt) }.is_null() {
        slot.0.store(dt.0 as usize, Ordering::Relaxed);
        slot.1.store(size, Ordering::Relaxed);
    }
    count as u64 * size
}
