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
//! gets its own context inside that call, which is collective over it; any other
//! intracommunicator of two or more ranks gets one at its first blocking collective
//! (`contexts::set_up_lazily`), its hierarchy the job's restricted to its members. A
//! communicator over the ranks of one freed before takes up, in its creating call, the
//! context its members kept from that one (`contexts::take_up_kept`), and one made after
//! communicators whose first collective was nonblocking gets a new context there (the same
//! exchange carries the members' word for it). Separate contexts
//! keep the collectives of different communicators apart, as MPI requires: nonblocking
//! collectives on two communicators may be started in different orders on different
//! ranks. Everything is torn down at the start of MPI's finalize, however the program
//! calls it (an attribute on `MPI_COMM_SELF`, see [`hook_finalize`]).
//!
//! A context is attached to its communicator with MPI's attribute caching, as PMPI tools
//! do: a keyval whose delete callback drops the context when MPI frees the communicator,
//! however it is freed (`MPI_Comm_disconnect`, or a `PMPI_Comm_free` that the library
//! does not see), so a handle that MPI reuses for a new
//! communicator never inherits an old context. The table is keyed by handle, so that a
//! call finds its context without asking MPI.
//!
//! Under `MPI_THREAD_MULTIPLE` threads may run collectives on different communicators at
//! the same time (MPI forbids it on one). Each context then has a lock of its own (a
//! mutex; below that level a flag), and a call holds the global lock only to find its
//! context and, afterwards, to count it: never while its collective waits for other
//! ranks, which may be waiting for another thread of this process. Progress (Open MPI's
//! engine, the wait and test calls, MPICH's generalized requests) never waits for a
//! context that another thread holds: it advances the others, and that thread advances
//! its own. Contexts are set up lazily then, without the global lock either.
//!
//! This module holds the global and the blocking calls' path ([`run`]); `contexts.rs` a
//! context's life (adopted, deleted with its communicator, torn down at finalize),
//! `requests.rs` the nonblocking collectives in flight, `hooks.rs` the callbacks through
//! which MPI advances them, and `types.rs` the datatype lookups.

mod contexts;
// Unsafe: the state is `Send`, and its lock a flag, by the thread rule of
// MPI_THREAD_SERIALIZED (the one place of the library that asserts it).
#[allow(unsafe_code)]
mod global;
mod handed;
mod hooks;
mod requests;
mod split;
mod types;

pub(crate) use contexts::*;
use global::*;
pub(crate) use handed::{known as handed_known, op_known as handed_op_known};
pub(crate) use hooks::*;
pub(crate) use requests::*;
pub(crate) use split::split;
pub(crate) use types::*;

use std::collections::HashMap;
use std::ffi::c_void;
use std::hash::{BuildHasherDefault, Hasher};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mpi::ffi;
use mpi::topology::SimpleCommunicator;
use topo_hierarchy::settings;
use topo_runtime::serial_lock::{SerialGuard, SerialLock};
use topo_runtime::{KeptKeys, KeptOffer, Pace, Progress, RawRequest, Topo, with_progress_hook};

use crate::abi::{self, GRequest, MPI_Comm, MPI_Datatype, MpixStart, SUCCESS, TypeInfo};
use crate::abi::{keyval_deleted_by, mpix_start};
use crate::classify::{Call, HandOff};
use crate::packed::Finish;
use crate::stats::{self, CommKind, Origin, Stats};

/// Exit code (through `MPI_Abort`) when the plan in the environment is corrupted or does
/// not match MPI: the same as the launcher's "missing or corrupted plan".
pub(crate) const BAD_PLAN_CODE: i32 = 9;

/// topo-run's context for one communicator.
pub(crate) struct Active {
    pub(crate) topo: Topo,
    /// What the communicator is to world (for the statistics).
    pub(crate) kind: CommKind,
    pub(crate) rank: i32,
    pub(crate) size: i32,
}

/// A nonblocking collective of ours in flight, behind a generalized request.
struct Pending {
    req: RawRequest,
    /// The generalized request the application holds.
    grequest: GRequest,
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

/// A context, with the datatype lookups of its calls, behind its lock (see the module's
/// doc): the one place a collective reaches it.
pub(crate) struct Held {
    active: Active,
    /// Predefined datatype handle -> what it is (predefined handles live until finalize).
    types: ByHandle<TypeInfo>,
}

/// A context and the attribute value that ties it to its communicator.
struct Entry {
    id: u64,
    held: Arc<Slot>,
    /// Advances the context's nonblocking collectives without its lock.
    progress: Progress,
    /// Whether the context has a shared-memory segment (counted against
    /// `TOPO_RUN_MAX_COMMS`).
    segment: bool,
    /// What the communicator is to world (its context's `Active::kind`, kept here so that
    /// it is read without the context's lock).
    kind: CommKind,
    /// Whether all of the communicator's ranks are on this node (read without the
    /// context's lock, as `kind`).
    one_node: bool,
    /// When the communicators created from this one offer their kept contexts.
    offers: Offers,
    /// The world ranks of the communicator's ranks, once a split of it needed them (not
    /// for world and its duplicates, whose ranks are world's).
    world_ranks: Option<Arc<[u32]>>,
}

/// When the calls that create communicators from a context's communicator exchange the
/// members' kept contexts (`contexts::take_up_kept`): at every call while some rank offers
/// one; after an exchange where none did, the next 1, 2, 4, ... up to [`Offers::MAX_GAP`]
/// calls skip it, so that a program that makes communicators without collectives on them
/// pays the exchange rarely. Derived only from the exchanges' outcomes and the count of
/// creating calls, which are the same on every rank of the communicator.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Offers {
    /// Creating calls left to skip.
    skip: u32,
    /// The last gap.
    gap: u32,
}

impl Offers {
    /// The longest run of creating calls without an exchange.
    pub(crate) const MAX_GAP: u32 = 64;

    /// Whether this creating call exchanges the offers (else it counts one skipped).
    pub(crate) fn exchange_now(&mut self) -> bool {
        if self.skip == 0 {
            return true;
        }
        self.skip -= 1;
        false
    }

    /// After an exchange: whether some rank offered a kept context.
    pub(crate) fn exchanged(&mut self, any_offer: bool) {
        self.gap = if any_offer {
            0
        } else {
            (self.gap * 2).clamp(1, Self::MAX_GAP)
        };
        self.skip = self.gap;
    }
}

struct State {
    /// Contexts by communicator handle; the delete callback of `keyval` removes an entry
    /// when MPI frees its communicator.
    contexts: ByHandle<Entry>,
    /// Communicators that will not get a context (no room for one, shared memory that
    /// could not be set up, one rank, an intercommunicator), by handle, with the id of the
    /// attribute that ties the entry to the communicator as a context's does, and the
    /// reason its calls go to MPI (for the statistics).
    declined: ByHandle<(u64, HandOff)>,
    /// The handle of each entry of `contexts` and `declined` by its id, for the delete
    /// callback, which knows only the id (an entry under that handle with another id is
    /// a later communicator's).
    by_id: ByHandle<usize>,
    /// The attribute key of contexts (`MPI_KEYVAL_INVALID` while the path is off).
    keyval: c_int,
    /// How many contexts with a segment this process may hold (`TOPO_RUN_MAX_COMMS`, read
    /// once: the environment is not read again at every creating call).
    max_comms: usize,
    /// The plan's part of the keys of kept contexts (read once).
    kept_keys: Option<KeptKeys>,
    /// The id of the next context.
    next_id: u64,
    /// Whether the last new communicator this rank saw (one with neither a context nor a
    /// decision) got a nonblocking collective first, which goes to MPI: the communicators
    /// created next then get their contexts in their creating calls, where the members say
    /// so to each other (`contexts::take_up_kept`). Cleared by a new communicator whose
    /// first collective is blocking, which sets it up.
    nonblocking_first: bool,
    /// Whether topo-run's path is on for this run (world has a hierarchical context).
    on: bool,
    /// Whether MPI's own collectives were asked for (`TOPO_RUN_NATIVE`): the path is off.
    native: bool,
    /// The number of the next context this process creates (world's is 0).
    next_instance: u32,
    /// Nonblocking collectives whose generalized requests are not complete yet.
    pending: Vec<Pending>,
    /// Contexts of communicators freed while collectives were in flight on them, kept
    /// (and advanced) until those complete, then dropped by the next collective call.
    retired: Vec<Entry>,
    /// The contexts that have started a nonblocking collective and were not idle when last
    /// looked at: all that progress has to advance (a program may hold a thousand
    /// contexts, most of them idle).
    active: Vec<Progress>,
    stats: Stats,
    /// MPI runs at `MPI_THREAD_MULTIPLE`: calls hold the global lock only briefly.
    multiple: bool,
    rank: i32,
    size: i32,
    /// Node leaders print the statistics.
    leader: bool,
    /// Whether this process prints the statistics at finalize (a node leader, with
    /// `TOPO_RUN_STATS` set), and so counts every call.
    prints_stats: bool,
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

/// Sets topo-run's context up (collective over world). Called with MPI initialised.
pub(crate) fn init() {
    let mut g = lock();
    if g.0.state.is_none() && !g.0.finalized {
        g.0.state = Some(State::new());
    }
}

impl State {
    fn new() -> State {
        let (rank, size) = abi::world_rank_size();
        let mut st = State {
            contexts: ByHandle::default(),
            declined: ByHandle::default(),
            by_id: ByHandle::default(),
            keyval: ffi::MPI_KEYVAL_INVALID as c_int,
            max_comms: max_comms(),
            kept_keys: KeptKeys::from_env(),
            next_id: 1,
            nonblocking_first: false,
            on: false,
            native: false,
            next_instance: 1,
            pending: Vec::new(),
            retired: Vec::new(),
            active: Vec::new(),
            stats: Stats::default(),
            multiple: abi::thread_multiple(),
            rank,
            size,
            leader: rank == 0,
            prints_stats: false,
            node: String::new(),
            peer_check: PeerCheck::new(),
            hooked: false,
            mpix_start: None,
            quiet: None,
        };
        if !st.multiple {
            SERIAL_NEXT.store(true, Ordering::Relaxed);
        }
        hook_finalize();
        // This library's own callback advances the contexts and completes their requests.
        topo_runtime::mpi_hook::manual();
        let profiling = crate::profile::start();
        st.native = native();
        let world = SimpleCommunicator::world();
        match Topo::from_env(&world) {
            // MPI's own collectives asked for: the path stays off.
            _ if st.native => {}
            Ok(topo) => {
                st.node = topo.node().to_string();
                if let Some((local, _)) = topo.local() {
                    st.leader = local == 0;
                }
                // A job of one rank: every communicator has one rank, MPI's own calls.
                if topo.is_hierarchical() && size > 1 {
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
                    let kind = CommKind::World;
                    st.attach(
                        abi::world(),
                        Active {
                            topo,
                            kind,
                            rank,
                            size,
                        },
                    );
                }
            }
            Err(e) => setup_failed(rank, &e),
        }
        // The statistics count every call of the ranks that print them, and the profile
        // every call of every rank.
        st.prints_stats =
            st.leader && stats::wanted(std::env::var(stats::STATS_ENV).ok().as_deref());
        handed::set_remembering(!st.prints_stats, !st.prints_stats && !profiling);
        st
    }

    /// Remembers that `comm` gets no context, tied to it by an attribute (so that a handle
    /// MPI reuses for a new communicator is asked again).
    fn decline(&mut self, comm: MPI_Comm, why: HandOff) {
        let id = self.next_id;
        self.next_id += 1;
        abi::set_attr(comm, self.keyval, id as usize);
        if let Some((stale, _)) = self.declined.insert(key(comm), (id, why)) {
            self.by_id.remove(&(stale as usize));
        }
        self.by_id.insert(id as usize, key(comm));
        handed::changed();
    }

    /// Gives `comm` the context `active`, tied to it by an attribute. A stale entry under
    /// this handle (its communicator freed unseen) goes first.
    fn attach(&mut self, comm: MPI_Comm, active: Active) {
        self.drop_context(key(comm));
        handed::changed();
        let id = self.next_id;
        self.next_id += 1;
        abi::set_attr(comm, self.keyval, id as usize);
        let progress = active.topo.progress_handle();
        let segment = active.topo.has_segment();
        let kind = active.kind;
        let one_node = active
            .topo
            .local()
            .is_some_and(|(_, local)| local as i32 == active.size);
        let held = Held {
            active,
            types: ByHandle::default(),
        };
        let held = Arc::new(slot(held, self.multiple));
        self.by_id.insert(id as usize, key(comm));
        self.contexts.insert(
            key(comm),
            Entry {
                id,
                held,
                progress,
                segment,
                kind,
                one_node,
                offers: Offers::default(),
                world_ranks: None,
            },
        );
    }

    /// Forgets that the communicator under `handle` was declined.
    fn undecline(&mut self, handle: usize) {
        if let Some((id, _)) = self.declined.remove(&handle) {
            self.by_id.remove(&(id as usize));
            handed::changed();
        }
    }

    /// Whether this process has as many contexts with a segment as it may keep
    /// (`TOPO_RUN_MAX_COMMS`; those of freed communicators with collectives still in
    /// flight included, those of a rank alone on its node, which have none, left out).
    fn segments_full(&self) -> bool {
        let live = self.contexts.values().chain(&self.retired);
        live.filter(|e| e.segment).count() >= self.max_comms
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
        self.by_id.remove(&(e.id as usize));
        handed::changed();
        if e.progress.is_idle() {
            return;
        }
        self.retired.push(e);
    }

    /// Handles to advance the contexts other than `comm`'s that have collectives in flight
    /// (those of freed communicators included).
    #[inline(always)]
    fn busy_others(&self, comm: MPI_Comm) -> Vec<Progress> {
        if self.active.is_empty() {
            return Vec::new();
        }
        self.busy_others_of(comm)
    }

    /// [`State::busy_others`] where some context has collectives in flight.
    #[inline(never)]
    fn busy_others_of(&self, comm: MPI_Comm) -> Vec<Progress> {
        let mine = self.contexts.get(&key(comm)).map(|e| &e.progress);
        self.active
            .iter()
            .filter(|p| !mine.is_some_and(|m| m.same(p)) && !p.is_idle())
            .cloned()
            .collect()
    }

    /// Notes that `comm`'s context has started a nonblocking collective: progress
    /// advances it until it is idle.
    fn mark_active(&mut self, comm: MPI_Comm) {
        let Some(e) = self.contexts.get(&key(comm)) else {
            return;
        };
        if !self.active.iter().any(|p| p.same(&e.progress)) {
            self.active.push(e.progress.clone());
        }
    }

    /// Advances the collectives of every context that has some in flight, and completes
    /// the generalized requests of those that are done.
    fn progress(&mut self, check_peers: bool) {
        for p in &self.active {
            p.poll();
            if check_peers {
                p.check_peers();
            }
        }
        // A context another thread holds counts as busy (`Progress::is_idle`): kept.
        self.active.retain(|p| !p.is_idle());
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
            finish(p.grequest, p.unpack);
        }
        IN_FLIGHT.store(!self.pending.is_empty(), Ordering::Relaxed);
    }
}

/// Whether `TOPO_RUN_NATIVE` asks for MPI's own collectives (`1`, `yes`, `true`, `on`).
fn native() -> bool {
    stats::wanted(std::env::var(topo_profile::NATIVE_ENV).ok().as_deref())
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
    abi::abort(code)
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
    f: impl FnOnce(&mut Active, &mut TypeCache<'_>) -> Result<T, HandOff>,
) -> Option<T> {
    run_setting_up(call, comm, None, f)
}

/// [`run`] for a reduction with `op`. One whose operation topo-run does not run
/// (user-defined, `MPI_MINLOC`, `MPI_REPLACE`, ...) never sets its communicator up (a
/// first blocking collective otherwise does): processes that do not count calls hand it
/// to MPI before entering the library (`handed::op_known`), and every rank must decide
/// alike whether to set up; the operation is the same on all, as MPI requires.
pub(crate) fn run_reduction<T>(
    call: Call,
    comm: MPI_Comm,
    op: ffi::MPI_Op,
    f: impl FnOnce(&mut Active, &mut TypeCache<'_>) -> Result<T, HandOff>,
) -> Option<T> {
    let not_new = abi::op_kind(op).is_none().then_some(HandOff::Operation);
    run_setting_up(call, comm, not_new, f)
}

/// [`run`], where a new communicator is set up unless `not_new` gives the reason to hand
/// the call to MPI instead.
fn run_setting_up<T>(
    call: Call,
    comm: MPI_Comm,
    not_new: Option<HandOff>,
    f: impl FnOnce(&mut Active, &mut TypeCache<'_>) -> Result<T, HandOff>,
) -> Option<T> {
    let mut g = lock();
    let st = state_for(&mut g.0, comm)?;
    if !st.is_new(comm) {
        let (mut g, r) = run_in_context(g, Some(call), comm, f);
        return g.0.state.as_mut()?.count(call, r);
    }
    if let Some(why) = not_new {
        return st.count::<T>(call, (Err(why), CommKind::Other));
    }
    // A new communicator whose first collective is blocking (see `nonblocking_first`),
    // set up before the lock is taken again for the call. (The guard is not moved
    // through `set_up` and back on the common path: a guard that goes through memory
    // is loaded in one piece from the stores of its parts, which stalls.)
    set_up_first(g, comm);
    let (mut g, r) = run_in_context(lock(), Some(call), comm, f);
    g.0.state.as_mut()?.count(call, r)
}

/// Sets up `comm`, whose first collective is blocking.
#[cold]
#[inline(never)]
fn set_up_first(mut g: SerialGuard<'static, Shared>, comm: MPI_Comm) {
    if let Some(st) = g.0.state.as_mut() {
        st.nonblocking_first = false;
    }
    drop(set_up(g, comm, Origin::New));
}

/// Runs `f` on `comm`'s context: with the global lock `g` held throughout below
/// `MPI_THREAD_MULTIPLE`, and let go while `f` runs at it (the module's doc). Returns the
/// global lock (taken anew at `MPI_THREAD_MULTIPLE`) and the outcome, not yet counted.
/// `call` names the program's call for the fault injection (`None`: the library's own).
/// Inlined: a guard moved into a function and back goes through memory, where a load
/// that spans two stores stalls on them.
#[inline(always)]
fn run_in_context<T>(
    mut g: SerialGuard<'static, Shared>,
    call: Option<Call>,
    comm: MPI_Comm,
    f: impl FnOnce(&mut Active, &mut TypeCache<'_>) -> Result<T, HandOff>,
) -> (SerialGuard<'static, Shared>, (Result<T, HandOff>, CommKind)) {
    let Some(st) = g.0.state.as_mut() else {
        return (g, (Err(HandOff::Inactive), CommKind::Other));
    };
    if !st.multiple {
        let r = st.run(call, comm, f);
        return (g, r);
    }
    let (held, others) = match st.begin(comm) {
        Ok(begun) => begun,
        Err(why) => return (g, (Err(why), CommKind::Other)),
    };
    let quiet = st.quiet;
    drop(g);
    let r = run_held(&held, &others, quiet, call, f);
    drop(held);
    (lock(), r)
}

impl State {
    /// Whether `comm` is a communicator the library has not decided about yet: the first
    /// blocking collective on it sets it up (every member is in that call).
    fn is_new(&self, comm: MPI_Comm) -> bool {
        self.on
            && !self.contexts.contains_key(&key(comm))
            && !self.declined.contains_key(&key(comm))
    }

    /// The context of `comm` and handles to advance the others that have collectives in
    /// flight, or the reason to hand the call to MPI. Drops the contexts of freed
    /// communicators that have nothing in flight any more: here, in a call of the
    /// program's, not in a progress callback inside MPI (dropping one frees its
    /// communicators).
    fn begin(&mut self, comm: MPI_Comm) -> Result<(Arc<Slot>, Vec<Progress>), HandOff> {
        self.find(comm)
            .map(|(e, others)| (Arc::clone(&e.held), others))
    }

    /// What [`State::begin`] gives, borrowed: the entry itself.
    fn find(&mut self, comm: MPI_Comm) -> Result<(&Entry, Vec<Progress>), HandOff> {
        self.ready(comm)?;
        let others = self.busy_others(comm);
        self.entry(comm).map(|e| (e, others))
    }

    /// Drops the retired contexts that are idle now, and says why every call goes to MPI
    /// if topo-run's path is off.
    #[inline(always)]
    fn ready(&mut self, comm: MPI_Comm) -> Result<(), HandOff> {
        if !self.retired.is_empty() {
            self.retired.retain(|e| !e.progress.is_idle());
        }
        if !self.on {
            let why = if self.native {
                HandOff::Native
            } else if self.size < 2 {
                HandOff::OneRank
            } else {
                HandOff::Inactive
            };
            handed::remember(comm, why);
            return Err(why);
        }
        Ok(())
    }

    /// `comm`'s context, or why its calls go to MPI.
    #[inline(always)]
    fn entry(&self, comm: MPI_Comm) -> Result<&Entry, HandOff> {
        match self.contexts.get(&key(comm)) {
            // Neither a context nor declined: a nonblocking call before the first
            // blocking one, which sets the communicator up; not remembered.
            None => Err(match self.declined.get(&key(comm)) {
                Some(&(_, why)) => {
                    handed::remember(comm, why);
                    why
                }
                None => HandOff::Communicator,
            }),
            Some(e) => Ok(e),
        }
    }

    /// [`run`], with the state locked throughout (below `MPI_THREAD_MULTIPLE`, where
    /// nothing else can be in the library meanwhile).
    fn run<T>(
        &mut self,
        call: Option<Call>,
        comm: MPI_Comm,
        f: impl FnOnce(&mut Active, &mut TypeCache<'_>) -> Result<T, HandOff>,
    ) -> (Result<T, HandOff>, CommKind) {
        let quiet = self.quiet;
        // The pieces of `find` one by one: its result, a context and a vector in an enum
        // returned through memory, was loaded in one piece from the stores of its parts,
        // which stalls (a few nanoseconds of every call).
        if let Err(why) = self.ready(comm) {
            return (Err(why), CommKind::Other);
        }
        let others = self.busy_others(comm);
        match self.entry(comm) {
            Ok(e) => run_held(&e.held, &others, quiet, call, f),
            Err(why) => (Err(why), CommKind::Other),
        }
    }

    /// Counts a call's outcome in the statistics; returns its value if it took the path.
    fn count<T>(&mut self, call: Call, (r, kind): (Result<T, HandOff>, CommKind)) -> Option<T> {
        match &r {
            Ok(_) => self.stats.ours(call),
            Err(why) => self.stats.handed(call, *why),
        }
        crate::profile::note_outcome(kind, r.as_ref().err().copied());
        self.stats.on(kind, r.is_ok());
        r.ok()
    }
}

/// Runs `f` on the context in `held`, with `others` advanced by every wait inside it.
fn run_held<T>(
    held: &Slot,
    others: &[Progress],
    quiet: Option<MPI_Comm>,
    call: Option<Call>,
    f: impl FnOnce(&mut Active, &mut TypeCache<'_>) -> Result<T, HandOff>,
) -> (Result<T, HandOff>, CommKind) {
    let mut held = held.lock();
    let Held { active, types } = &mut *held;
    let kind = active.kind;
    let mut types = TypeCache { types, quiet };
    if let Some(call) = call {
        topo_runtime::fault::maybe_panic(call.name());
    }
    let r = if others.is_empty() {
        f(active, &mut types)
    } else {
        let mut hook = || others.iter().for_each(Progress::poll);
        with_progress_hook(&mut hook, || f(active, &mut types))
    };
    (r, kind)
}

#[cfg(test)]
mod tests {
    use super::Offers;

    /// Which of `n` creating calls exchange, with `any` saying whether an exchange found an
    /// offer.
    fn exchanges(n: usize, mut any: impl FnMut(usize) -> bool) -> Vec<usize> {
        let mut o = Offers::default();
        let mut at = Vec::new();
        for call in 0..n {
            if o.exchange_now() {
                at.push(call);
                o.exchanged(any(call));
            }
        }
        at
    }

    #[test]
    fn offers_back_off_while_nobody_offers_and_resume_at_once() {
        // Never an offer: gaps of 1, 2, 4, ... 64, then every 65th call.
        let at = exchanges(400, |_| false);
        assert_eq!(&at[..8], &[0, 2, 5, 10, 19, 36, 69, 134]);
        assert!(
            at.windows(2)
                .all(|w| w[1] - w[0] <= Offers::MAX_GAP as usize + 1)
        );
        // Always an offer (a loop that uses each communicator): every call.
        assert_eq!(exchanges(50, |_| true), (0..50).collect::<Vec<_>>());
        // An offer found after a quiet spell brings the exchange back to every call.
        let at = exchanges(200, |call| call >= 69);
        assert!(at.contains(&69) && (70..200).all(|c| at.contains(&c)));
    }
}
