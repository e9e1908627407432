//! The library's one global: topo-run's contexts (one per communicator it handles), the
//! nonblocking collectives in flight, the datatype lookups it caches and the statistics;
//! and the callbacks through which MPI reaches it (a communicator's attribute deleted, a
//! turn of Open MPI's progress engine).
//!
//! World's context is set up collectively: in `MPI_Init`/`MPI_Init_thread`, or, when the
//! program initialised MPI without passing through them (Fortran's `MPI_INIT` calls
//! `PMPI_Init` directly), in its first blocking collective call on world (or creation of a
//! communicator congruent to it), which every rank makes; never in a nonblocking one,
//! whose start must not wait for other ranks (until then those go to MPI).
//! A communicator congruent to world (same ranks, same order) that the application creates
//! with `MPI_Comm_dup`, `MPI_Comm_dup_with_info`, `MPI_Comm_split` or `MPI_Comm_create`
//! gets its own context inside that call, which is collective over it. Separate contexts
//! keep the collectives of different communicators apart, as MPI requires: nonblocking
//! collectives on two communicators may be started in different orders on different
//! ranks. Everything is torn down at the start of MPI's finalize, however the program
//! calls it (an attribute on `MPI_COMM_SELF`, see [`hook_finalize`]).
//!
//! A context is attached to its communicator with MPI's attribute caching, as PMPI tools
//! do: a keyval whose delete callback drops the context when MPI frees the communicator,
//! whichever binding frees it (the Fortran 2008 one, which the library does not
//! intercept, or `MPI_Comm_disconnect`), so a handle that MPI reuses for a new
//! communicator never inherits an old context. The table is keyed by handle, so that a
//! call finds its context without asking MPI.

use std::collections::HashMap;
use std::ffi::c_void;
use std::hash::{BuildHasherDefault, Hasher};
use std::mem::ManuallyDrop;
use std::os::raw::c_int;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mpi::ffi;
use mpi::raw::FromRaw;
use mpi::topology::SimpleCommunicator;
use topo_hierarchy::settings;
use topo_runtime::serial_lock::{SerialGuard, SerialLock};
use topo_runtime::{Pace, Progress, RawRequest, Topo, with_progress_hook};

use crate::abi::{self, MPI_Comm, MPI_Datatype, MPI_Request, SUCCESS, TypeInfo};
use crate::classify::{Call, HandOff};
use crate::packed::Finish;
use crate::stats::{self, Stats};

/// Exit code (through `MPI_Abort`) when the plan in the environment is corrupted or does
/// not match MPI: the same as the launcher's "missing or corrupted plan".
pub(crate) const BAD_PLAN_CODE: i32 = 9;

/// topo-run's context for one communicator.
pub(crate) struct Active {
    pub(crate) topo: Topo,
    pub(crate) rank: i32,
    pub(crate) size: i32,
}

/// A nonblocking collective of ours in flight, behind a generalized request.
struct Pending {
    req: RawRequest,
    /// The generalized request the application holds.
    handle: MPI_Request,
    /// What is left at completion (a packed broadcast's or Allgather's unpacking, and the
    /// buffers the collective uses until then).
    unpack: Option<Box<dyn Finish>>,
}

/// Hashes a handle (an address, or a small integer under other ABIs) with one
/// multiplication: the tables below are looked up on every intercepted call, and SipHash,
/// the default, costs tens of nanoseconds there. Handles are not chosen by an adversary.
#[derive(Default)]
struct HandleHasher(u64);

impl Hasher for HandleHasher {
    fn finish(&self) -> u64 {
        // The table indexes by the low bits: fold the well-mixed high ones onto them.
        self.0 ^ (self.0 >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn write_usize(&mut self, n: usize) {
        // Fibonacci hashing: the product's high bits mix every bit of the handle.
        self.0 = (n as u64 ^ self.0).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A table keyed by MPI handles.
type ByHandle<V> = HashMap<usize, V, BuildHasherDefault<HandleHasher>>;

/// A context and the attribute value that ties it to its communicator.
struct Entry {
    id: u64,
    active: Active,
}

struct State {
    /// Contexts by communicator handle; the delete callback of `keyval` removes an entry
    /// when MPI frees its communicator.
    contexts: ByHandle<Entry>,
    /// The attribute key of contexts (`MPI_KEYVAL_INVALID` while the path is off).
    keyval: c_int,
    /// The id of the next context.
    next_id: u64,
    /// Whether topo-run's path is on for this run (world has a hierarchical context).
    on: bool,
    /// The number of the next context this process creates (world's is 0).
    next_instance: u32,
    /// Nonblocking collectives whose generalized requests are not complete yet.
    pending: Vec<Pending>,
    /// Contexts of communicators freed while collectives were in flight on them, kept
    /// (and advanced) until those complete, then dropped by the next collective call.
    retired: Vec<Active>,
    /// Predefined datatype handle -> what it is (predefined handles live until finalize).
    types: ByHandle<TypeInfo>,
    stats: Stats,
    rank: i32,
    size: i32,
    /// Node leaders print the statistics.
    leader: bool,
    node: String,
    /// When Open MPI's progress engine last had the peers checked.
    peer_check: PeerCheck,
    /// Whether `progress_from_mpi` is registered with Open MPI's progress engine.
    hooked: bool,
    /// Without that hook, MPICH's `MPIX_Grequest_start`, if the MPI has it: requests that
    /// MPI's own waits and tests advance through [`grequest_poll`].
    mpix_start: Option<MpixStart>,
    /// The library's own communicator for probes whose errors must not reach the
    /// program (`abi::quiet_self`; set while the path is on).
    quiet: Option<MPI_Comm>,
}

struct Global {
    state: Option<State>,
    finalized: bool,
}

/// The state behind the global lock.
struct Shared(Global);

// SAFETY: `Topo`, `RawRequest` and `Progress` are not `Send` only because of the `Rc`s
// that tie a context to its requests. All of them live here, and are only used with the
// global lock held (progress hooks run inside such a use, on the same thread). The
// library is only active at thread levels up to MPI_THREAD_SERIALIZED, where MPI calls
// never run concurrently anyway.
unsafe impl Send for Shared {}

/// The library's state. Its lock is a mutex until MPI is initialised below
/// `MPI_THREAD_MULTIPLE`, then a plain flag (`SERIAL_NEXT`): the per-call cost of a
/// mutex is a full fence at each end of every intercepted call (docs/runtime.md).
static GLOBAL: SerialLock<Shared> = SerialLock::new(Shared(Global {
    state: None,
    finalized: false,
}));

/// Set once MPI is known to run below `MPI_THREAD_MULTIPLE`: the next [`lock`] turns
/// `GLOBAL` into a flag (not while it is held, as it is where this is learnt).
static SERIAL_NEXT: AtomicBool = AtomicBool::new(false);

fn lock() -> SerialGuard<'static, Shared> {
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

/// Sets topo-run's context up (collective over world). Called with MPI initialised.
pub(crate) fn init() {
    let mut g = lock();
    if g.0.state.is_none() && !g.0.finalized {
        g.0.state = Some(State::new());
    }
}

/// `comm`, borrowed as an rsmpi communicator that is never freed.
fn borrowed(comm: MPI_Comm) -> ManuallyDrop<SimpleCommunicator> {
    // SAFETY: `comm` is a live intracommunicator; the wrapper is never dropped, so rsmpi
    // never frees it, and it does not outlive the call that uses it.
    ManuallyDrop::new(unsafe { SimpleCommunicator::from_raw(comm) })
}

impl State {
    fn new() -> State {
        let (rank, size) = abi::world_rank_size();
        let mut st = State {
            contexts: ByHandle::default(),
            keyval: ffi::MPI_KEYVAL_INVALID as c_int,
            next_id: 1,
            on: false,
            next_instance: 1,
            pending: Vec::new(),
            retired: Vec::new(),
            types: ByHandle::default(),
            stats: Stats::default(),
            rank,
            size,
            leader: rank == 0,
            node: String::new(),
            peer_check: PeerCheck::new(),
            hooked: false,
            mpix_start: None,
            quiet: None,
        };
        if abi::thread_multiple() {
            if rank == 0 {
                eprintln!(
                    "topo-run: warning: MPI_THREAD_MULTIPLE: threads may run collectives on \
                     different communicators at once, which topo-run's single shared-memory \
                     stream cannot order; collectives use MPI's own for this run"
                );
            }
            return st;
        }
        SERIAL_NEXT.store(true, Ordering::Relaxed);
        hook_finalize();
        // This library's own callback advances the contexts and completes their requests.
        topo_runtime::mpi_hook::manual();
        let world = SimpleCommunicator::world();
        match Topo::from_env(&world) {
            Ok(topo) => {
                st.node = topo.node().to_string();
                if let Some((local, _)) = topo.local() {
                    st.leader = local == 0;
                }
                if topo.is_hierarchical() {
                    abi::learn_collective_status();
                    st.hooked = register_progress();
                    if !st.hooked {
                        st.mpix_start = mpix_start();
                    }
                    if !st.hooked && rank == 0 {
                        let mut waits = String::from("the wait and test calls");
                        if st.mpix_start.is_some() {
                            waits += " (also MPI's own, through MPICH's MPIX_Grequest_start)";
                        }
                        if topo.has_progress_thread() {
                            waits += " and in the progress thread";
                        }
                        eprintln!(
                            "topo-run: warning: this MPI library has no progress hook \
                             (Open MPI's opal_progress_register): nonblocking collectives \
                             of topo-run's advance only in {waits}"
                        );
                    }
                    st.quiet = Some(abi::quiet_self());
                    st.keyval = context_keyval();
                    st.on = true;
                    UNHOOKED.store(!st.hooked, Ordering::Relaxed);
                    st.attach(abi::world(), Active { topo, rank, size });
                }
            }
            Err(e) => setup_failed(rank, &e),
        }
        st
    }

    /// Gives `comm` the context `active`, tied to it by an attribute.
    fn attach(&mut self, comm: MPI_Comm, active: Active) {
        let id = self.next_id;
        self.next_id += 1;
        // SAFETY: `comm` is live; the value is an integer stored in the attribute's
        // pointer, never dereferenced.
        unsafe { ffi::PMPI_Comm_set_attr(comm, self.keyval, id as usize as *mut c_void) };
        self.contexts.insert(key(comm), Entry { id, active });
    }

    /// Takes the context under `handle` off its communicator (which MPI is freeing, or
    /// whose handle MPI reuses). Collectives still in flight on it complete normally, as
    /// MPI lets them after `MPI_Comm_free`: the context is kept, advanced with the others,
    /// and dropped once they have. It is never waited for here: freeing a communicator
    /// must not wait for a rank that has not started its collective yet.
    fn drop_context(&mut self, handle: usize) {
        let Some(e) = self.contexts.remove(&handle) else {
            return;
        };
        if e.active.topo.progress_handle().is_idle() {
            return;
        }
        self.retired.push(e.active);
    }

    /// Handles to advance the contexts other than `comm`'s that have collectives in flight
    /// (those of freed communicators included).
    fn busy_others(&self, comm: MPI_Comm) -> Vec<Progress> {
        if self.pending.is_empty() {
            return Vec::new();
        }
        self.contexts
            .iter()
            .filter(|(k, _)| **k != key(comm))
            .map(|(_, e)| &e.active.topo)
            .chain(self.retired.iter().map(|a| &a.topo))
            .map(Topo::progress_handle)
            .filter(|p| !p.is_idle())
            .collect()
    }

    /// Advances every context's collectives and completes the generalized requests of
    /// those that are done.
    fn progress(&mut self, check_peers: bool) {
        for topo in self
            .contexts
            .values()
            .map(|e| &e.active.topo)
            .chain(self.retired.iter().map(|a| &a.topo))
        {
            let p = topo.progress_handle();
            p.poll();
            if check_peers {
                p.check_peers();
            }
        }
        let mut i = 0;
        while i < self.pending.len() {
            if !self.pending[i].req.is_complete() {
                i += 1;
                continue;
            }
            let p = self.pending.swap_remove(i);
            if p.req.complete().is_err() {
                unreachable!("checked complete above");
            }
            // SAFETY: the generalized request started for this collective, completed
            // only here, once, as it leaves `pending`.
            unsafe { finish(p.handle, p.unpack) };
        }
        IN_FLIGHT.store(!self.pending.is_empty(), Ordering::Relaxed);
    }
}

fn key(comm: MPI_Comm) -> usize {
    comm.0 as usize
}

fn setup_failed(rank: i32, e: &topo_runtime::Error) -> ! {
    eprintln!(
        "topo-run: rank {rank}: error: cannot set up topo-run's collectives: {e}; \
         aborting the job (exit code {BAD_PLAN_CODE})"
    );
    world_abort(BAD_PLAN_CODE);
}

fn world_abort(code: i32) -> ! {
    // SAFETY: MPI is initialised; MPI_Abort does not return.
    unsafe { ffi::PMPI_Abort(abi::world(), code) };
    std::process::exit(code)
}

/// Tears the contexts down and prints the statistics if asked; later calls go to MPI.
pub(crate) fn finalize() {
    let mut g = lock();
    g.0.finalized = true;
    UNHOOKED.store(false, Ordering::Relaxed);
    let Some(mut st) = g.0.state.take() else {
        return;
    };
    // Collectives still in flight are the application's error; finish them so that no
    // rank is left waiting for this one.
    wait_idle(&mut st);
    if st.hooked {
        unregister_progress();
    }
    if let Some(quiet) = st.quiet.take() {
        abi::free_comm(quiet);
    }
    st.contexts.clear();
    st.retired.clear();
    if st.keyval != ffi::MPI_KEYVAL_INVALID as c_int {
        // MPI deletes the attributes still set (world's) at MPI_Finalize; their callbacks
        // find no state then.
        // SAFETY: the keyval this library created.
        unsafe { ffi::PMPI_Comm_free_keyval(&mut st.keyval) };
    }
    if st.leader && stats::wanted(std::env::var(stats::STATS_ENV).ok().as_deref()) {
        let on = if st.node.is_empty() {
            String::new()
        } else {
            format!(" on {}", st.node)
        };
        for line in st.stats.report() {
            eprintln!("topo-run: stats: rank {}{on}: {line}", st.rank);
        }
    }
}

/// Ties the teardown to MPI's own finalize, however the program reaches it: an attribute
/// on `MPI_COMM_SELF` whose delete callback runs [`finalize`]. MPI deletes that
/// communicator's attributes first thing in `MPI_Finalize` (MPI-4.0 §11.2.4), with MPI
/// still fully usable, also where the program calls `PMPI_Finalize` itself or finalizes
/// through the `mpi_f08` bindings, which this library does not see. (Where it does see
/// `MPI_Finalize`, the teardown has run already and the callback finds nothing to do.)
fn hook_finalize() {
    let keyval = keyval_deleted_by(self_deleted);
    // SAFETY: MPI_COMM_SELF is a constant handle; the value is never dereferenced.
    unsafe { ffi::PMPI_Comm_set_attr(ffi::RSMPI_COMM_SELF, keyval, std::ptr::null_mut()) };
}

/// MPI is finalizing (it deletes `MPI_COMM_SELF`'s attributes first): topo-run's
/// teardown, with every collective in flight completed, the progress callback removed,
/// the contexts freed and the statistics printed.
unsafe extern "C" fn self_deleted(
    _comm: MPI_Comm,
    _keyval: c_int,
    _value: *mut c_void,
    _extra: *mut c_void,
) -> c_int {
    abi::entry(
        None,
        || {
            finalize();
            true
        },
        || SUCCESS,
    )
}

/// Advances everything until no collective of ours is in flight.
fn wait_idle(st: &mut State) {
    let mut pace = Pace::new(SPIN);
    let mut check = false;
    while !st.pending.is_empty() {
        st.progress(check);
        check = pace.pause();
    }
}

/// The most contexts (world's and its congruent communicators') a process keeps
/// (`TOPO_RUN_MAX_COMMS`); collectives on further communicators go to MPI.
fn max_comms() -> usize {
    settings::max_comms(std::env::var(settings::MAX_COMMS_ENV).ok().as_deref())
}

/// Gives `comm`, just created by the application, its own context if it is congruent to
/// world (collective over `comm`: every rank of it calls this in the same creating call).
pub(crate) fn adopt(comm: MPI_Comm) {
    if !abi::congruent_to_world(comm) {
        return;
    }
    let mut g = lock();
    // Every rank of world is in this call: the place to set world's context up if MPI
    // was initialised without our MPI_Init (Fortran).
    let Some(st) = state_for(&mut g.0, abi::world()) else {
        return;
    };
    if !st.on {
        return;
    }
    // Agree over `comm`: whether every rank has room, and a context number no rank uses.
    let mine: [c_int; 2] = [
        c_int::from(st.contexts.len() >= max_comms()),
        st.next_instance as c_int,
    ];
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
    if agreed[0] != 0 {
        return;
    }
    let instance = agreed[1] as u32;
    st.next_instance = instance + 1;
    match Topo::from_env_instance(&borrowed(comm), instance) {
        Ok(topo) if topo.is_hierarchical() => {
            let (rank, size) = (st.rank, st.size);
            // A stale entry under this handle (freed unseen) goes first.
            st.drop_context(key(comm));
            st.attach(comm, Active { topo, rank, size });
        }
        Ok(_) => {}
        Err(e) => setup_failed(st.rank, &e),
    }
}

/// Drops `comm`'s context (the application is about to free it), after its collectives
/// in flight have completed.
pub(crate) fn forget_comm(comm: MPI_Comm) {
    let mut g = lock();
    let Some(st) = &mut g.0.state else {
        return;
    };
    if key(comm) == key(abi::world()) || !st.contexts.contains_key(&key(comm)) {
        return;
    }
    st.drop_context(key(comm));
}

/// The delete callback of context `id`'s attribute: MPI is freeing its communicator.
pub(crate) fn context_deleted(id: u64) {
    match GLOBAL.try_lock() {
        Some(mut g) => forget_id(&mut g, id),
        // Freed while the library holds its state (it frees no application communicator
        // itself, so another thread's doing): dropped at the next lock.
        None => defer_deleted(id),
    }
}

/// Queues context `id` to be dropped at the next lock: its communicator was freed where
/// the state could not be touched.
pub(crate) fn defer_deleted(id: u64) {
    DELETED.lock().unwrap_or_else(|p| p.into_inner()).push(id);
    ANY_DELETED.store(true, Ordering::Release);
}

/// Ids of contexts whose communicators were freed while the state could not be touched.
static DELETED: Mutex<Vec<u64>> = Mutex::new(Vec::new());
/// Whether `DELETED` may hold ids.
static ANY_DELETED: AtomicBool = AtomicBool::new(false);

/// Drops context `id` (its communicator is being freed), if it is still there.
fn forget_id(g: &mut Shared, id: u64) {
    let Some(st) = &mut g.0.state else {
        return;
    };
    if let Some(handle) = st
        .contexts
        .iter()
        .find(|(_, e)| e.id == id)
        .map(|(&h, _)| h)
    {
        st.drop_context(handle);
    }
}

/// The global state, set up if MPI was initialised without our `MPI_Init` (Fortran) and
/// this is a call on world, the first that every rank makes.
fn state_for(g: &mut Global, comm: MPI_Comm) -> Option<&mut State> {
    if g.state.is_none() {
        if g.finalized || !abi::mpi_running() || key(comm) != key(abi::world()) {
            return None;
        }
        g.state = Some(State::new());
    }
    g.state.as_mut()
}

/// Runs `call` on topo-run's path if it can take it: `f` gets the communicator's context
/// and returns `Err` with the reason to hand the call to MPI. While other contexts have
/// collectives in flight, every wait inside `f` advances them too.
pub(crate) fn run<T>(
    call: Call,
    comm: MPI_Comm,
    f: impl FnOnce(&mut Active, &mut Lookup<'_>) -> Result<T, HandOff>,
) -> Option<T> {
    let mut g = lock();
    let st = state_for(&mut g.0, comm)?;
    st.run(call, comm, f)
}

impl State {
    /// [`run`], with the state locked.
    fn run<T>(
        &mut self,
        call: Call,
        comm: MPI_Comm,
        f: impl FnOnce(&mut Active, &mut Lookup<'_>) -> Result<T, HandOff>,
    ) -> Option<T> {
        // Contexts of freed communicators go once nothing of theirs is in flight: here, in
        // a call of the program's, not in a progress callback inside MPI (dropping one
        // frees its communicators).
        if !self.retired.is_empty() {
            self.retired.retain(|a| !a.topo.progress_handle().is_idle());
        }
        let r = if !self.on {
            Err(HandOff::Inactive)
        } else {
            let others = self.busy_others(comm);
            match self.contexts.get_mut(&key(comm)).map(|e| &mut e.active) {
                None => Err(HandOff::Communicator),
                Some(active) => {
                    let mut look = Lookup {
                        types: &mut self.types,
                        quiet: self.quiet,
                    };
                    topo_runtime::fault::maybe_panic(call.name());
                    if others.is_empty() {
                        f(active, &mut look)
                    } else {
                        let mut hook = || others.iter().for_each(Progress::poll);
                        with_progress_hook(&mut hook, || f(active, &mut look))
                    }
                }
            }
        };
        match &r {
            Ok(_) => self.stats.ours(call),
            Err(why) => self.stats.handed(call, *why),
        }
        r.ok()
    }
}

/// Like [`run`] for a nonblocking collective: `f` starts it, and `request` receives a
/// generalized request that completes with it. Returns whether the call was done.
///
/// A collective that is complete as soon as it has started (a broadcast's root whose
/// message went into the queues, a small one whose data was waiting) completes its
/// generalized request at once: the application's wait then finds it done in MPI, and
/// nothing of ours is left in flight.
///
/// # Safety
/// `request` is the application's `MPI_Request *` argument.
pub(crate) unsafe fn run_nonblocking(
    call: Call,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    f: impl FnOnce(
        &mut Active,
        &mut Lookup<'_>,
    ) -> Result<(RawRequest, Option<Box<dyn Finish>>), HandOff>,
) -> bool {
    if request.is_null() {
        return false;
    }
    let mut g = lock();
    // Never set up here: the setup is collective, and starting a nonblocking collective
    // must not wait for other ranks (MPI-4.0 §6.12). Until a call that every rank makes
    // has set it up, nonblocking collectives go to MPI.
    let Some(st) = g.0.state.as_mut() else {
        return false;
    };
    let Some((req, unpack)) = st.run(call, comm, f) else {
        return false;
    };
    let mut handle = abi::request_null();
    // SAFETY: the callbacks are `extern "C"` functions of the right types; `handle` is a
    // local that MPI fills in. Starting a generalized request runs no progress callback
    // of ours (and one would find the state locked and return).
    unsafe {
        match st.mpix_start {
            Some(start) => start(
                abi::grequest_query,
                abi::grequest_free,
                abi::grequest_cancel,
                grequest_poll,
                grequest_wait,
                std::ptr::null_mut(),
                &mut handle,
            ),
            None => ffi::PMPI_Grequest_start(
                Some(abi::grequest_query),
                Some(abi::grequest_free),
                Some(abi::grequest_cancel),
                std::ptr::null_mut(),
                &mut handle,
            ),
        };
        *request = handle;
    }
    match req.complete() {
        // SAFETY: the generalized request just started for this collective.
        Ok(()) => unsafe { finish(handle, unpack) },
        Err(req) => {
            st.pending.push(Pending {
                req,
                handle,
                unpack,
            });
            IN_FLIGHT.store(true, Ordering::Relaxed);
        }
    }
    true
}

/// The end of a nonblocking collective of ours that has completed: what is left to do
/// (unpacking), then its generalized request `handle` completes.
///
/// # Safety
/// `handle` is the generalized request started for the collective, not completed before
/// (the application cannot free it while it is in flight).
unsafe fn finish(handle: MPI_Request, unpack: Option<Box<dyn Finish>>) {
    if let Some(packed) = unpack {
        // An error went to the communicator's error handler; the request completes.
        let _ = packed.finish();
    }
    // SAFETY: per the contract.
    unsafe { ffi::PMPI_Grequest_complete(handle) };
}

/// Whether a nonblocking collective of ours is in flight: a copy of `!pending.is_empty()`
/// that every MPI call the library intercepts can read without taking the lock (and
/// while it is held, when the runtime re-enters the library).
static IN_FLIGHT: AtomicBool = AtomicBool::new(false);

/// Whether topo-run's path is on in an MPI whose progress engine does not call the library
/// (no Open MPI hook): the same on every rank.
static UNHOOKED: AtomicBool = AtomicBool::new(false);

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
            .is_some_and(|st| st.pending.iter().any(|p| p.handle == handle))
}

/// Pauses that spin before one of the library's waits yields the core.
pub(crate) const SPIN: u32 = 64;

/// Says every 50 ms that it is time to check the peers, for Open MPI's progress engine,
/// which calls the library many times a microsecond: it reads the clock only every 64th
/// call.
struct PeerCheck {
    calls: u32,
    last: Option<Instant>,
}

impl PeerCheck {
    fn new() -> Self {
        PeerCheck {
            calls: 0,
            last: None,
        }
    }

    fn due(&mut self) -> bool {
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

/// Cached datatype lookups, for the closure of [`run`].
pub(crate) struct Lookup<'a> {
    types: &'a mut ByHandle<TypeInfo>,
    quiet: Option<MPI_Comm>,
}

impl Lookup<'_> {
    /// Whether MPI can pack `dt` (it is committed); see `abi::committed`.
    pub(crate) fn committed(&self, dt: MPI_Datatype) -> bool {
        self.quiet.is_some_and(|q| abi::committed(dt, q))
    }

    /// What `dt` is (predefined types are cached; derived ones are asked each time, since
    /// their handles are freed and reused).
    pub(crate) fn datatype(&mut self, dt: MPI_Datatype) -> TypeInfo {
        if let Some(t) = self.types.get(&(dt.0 as usize)) {
            return *t;
        }
        let t = abi::type_info(dt);
        if matches!(t, TypeInfo::Plain { .. }) {
            self.types.insert(dt.0 as usize, t);
        }
        t
    }
}

// The callbacks through which MPI reaches the state.

/// A new attribute key for topo-run's contexts (its callbacks below).
pub(crate) fn context_keyval() -> c_int {
    keyval_deleted_by(context_deleted_callback)
}

/// The delete callback of an attribute key.
type DeleteFn = unsafe extern "C" fn(MPI_Comm, c_int, *mut c_void, *mut c_void) -> c_int;

/// A new attribute key whose attributes are never copied to duplicates and call `delete`
/// when MPI deletes them.
fn keyval_deleted_by(delete: DeleteFn) -> c_int {
    let mut keyval: c_int = ffi::MPI_KEYVAL_INVALID as c_int;
    // SAFETY: the callbacks have the signatures MPI expects; MPI writes the new key.
    unsafe {
        ffi::PMPI_Comm_create_keyval(
            Some(context_no_copy),
            Some(delete),
            &mut keyval,
            std::ptr::null_mut(),
        )
    };
    keyval
}

/// A communicator's context attribute is not copied to its duplicates (a duplicate gets a
/// context of its own, in `MPI_Comm_dup`).
unsafe extern "C" fn context_no_copy(
    _old: MPI_Comm,
    _keyval: c_int,
    _extra: *mut c_void,
    _value_in: *mut c_void,
    _value_out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    if !flag.is_null() {
        // SAFETY: MPI passes a valid `int *`.
        unsafe { *flag = 0 };
    }
    SUCCESS
}

/// MPI is freeing a communicator that has a context of ours (through any binding, the
/// `mpi_f08` one and `MPI_Comm_disconnect` included): the context goes with it.
unsafe extern "C" fn context_deleted_callback(
    _comm: MPI_Comm,
    _keyval: c_int,
    value: *mut c_void,
    _extra: *mut c_void,
) -> c_int {
    // As an entry point: MPI calls made while the context is torn down (rsmpi freeing its
    // duplicates through `MPI_Comm_free`) go straight to MPI. Called from inside the
    // library, the context is dropped at the library's next call instead.
    let id = value as u64;
    abi::entry(
        None,
        || {
            context_deleted(id);
            true
        },
        || {
            defer_deleted(id);
            SUCCESS
        },
    )
}

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
unsafe extern "C" fn mpi_progress() -> c_int {
    if !in_flight() {
        return 0;
    }
    abi::entry_rc(None, || Some(progress_from_mpi()), || 0)
}

/// `MPIX_Grequest_start` (MPICH's extended generalized requests, `mpi_proto.h`): a
/// generalized request with a poll function that MPI calls while it tests the request, and
/// a wait function (never null) that it calls, with the states of every such request it
/// waits on, while it waits.
type MpixStart = unsafe extern "C" fn(
    unsafe extern "C" fn(*mut c_void, *mut ffi::MPI_Status) -> c_int,
    unsafe extern "C" fn(*mut c_void) -> c_int,
    unsafe extern "C" fn(*mut c_void, c_int) -> c_int,
    unsafe extern "C" fn(*mut c_void, *mut ffi::MPI_Status) -> c_int,
    unsafe extern "C" fn(c_int, *mut *mut c_void, f64, *mut ffi::MPI_Status) -> c_int,
    *mut c_void,
    *mut MPI_Request,
) -> c_int;

/// `MPIX_Grequest_start` of the MPI in the process, if it has one (its profiling name
/// first, so that no tool's interception of it runs).
fn mpix_start() -> Option<MpixStart> {
    [c"PMPIX_Grequest_start", c"MPIX_Grequest_start"]
        .iter()
        .find_map(|name| {
            // SAFETY: dlsym with a NUL-terminated name.
            let f = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
            // SAFETY: MPICH's MPIX_Grequest_start has this signature (mpi_proto.h).
            (!f.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, MpixStart>(f) })
        })
}

/// The poll function of our extended generalized requests: MPI calls it while it waits on
/// or tests one of them (a wait that does not pass through this library, such as a
/// Fortran `MPI_WAIT` or a library's `PMPI_Wait`); it advances every collective in flight
/// and completes the requests of those that are done.
unsafe extern "C" fn grequest_poll(_extra: *mut c_void, _status: *mut ffi::MPI_Status) -> c_int {
    if in_flight() {
        abi::entry_rc(None, || Some(progress_from_mpi()), || 0);
    }
    SUCCESS
}

/// The wait function of our extended generalized requests: one turn, as
/// [`grequest_poll`]; MPI calls it again until its requests have completed.
unsafe extern "C" fn grequest_wait(
    _count: c_int,
    _states: *mut *mut c_void,
    _timeout: f64,
    status: *mut ffi::MPI_Status,
) -> c_int {
    // SAFETY: as MPI calls the poll function.
    unsafe { grequest_poll(std::ptr::null_mut(), status) }
}
