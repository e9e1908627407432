//! A context's life: adopted with its communicator, dropped when MPI deletes the
//! communicator's attribute (the keyval's callbacks), and everything torn down at the
//! start of MPI's finalize.

use super::*;
use mpi::topology::Communicator;
use topo_runtime::ffi::ranks_in;

/// Tears the contexts down and prints the statistics if asked; later calls go to MPI.
pub(crate) fn finalize() {
    // Collective over world, with MPI fully usable: before anything is torn down.
    let native = lock().0.state.as_ref().is_some_and(|st| st.native);
    crate::profile::finish(native);
    let mut g = lock();
    g.0.finalized = true;
    handed::changed();
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
    // The contexts kept for later communicators go too.
    topo_runtime::kept::clear();
    if abi::is_keyval(st.keyval) {
        // MPI deletes the attributes still set (world's) at MPI_Finalize; their callbacks
        // find no state then.
        abi::free_keyval(&mut st.keyval);
    }
    if st.prints_stats {
        let on = if st.node.is_empty() {
            String::new()
        } else {
            format!(" on {}", st.node)
        };
        let mut lines = st.stats.report();
        let lanes = topo_runtime::lane::lane_use();
        if lanes.contexts > 0 {
            lines.push(format!(
                "on the node's lanes: {} communicators; blocking calls: {} on a lane, {} with \
                 none free (their node steps over MPI)",
                lanes.contexts, lanes.on_lane, lanes.over_mpi
            ));
        }
        if topo_runtime::progress_thread::running() {
            let level = if st.multiple {
                "MPI_THREAD_MULTIPLE"
            } else {
                "below MPI_THREAD_MULTIPLE"
            };
            lines.push(format!(
                "the progress thread advanced the nonblocking collectives ({level})"
            ));
        }
        for line in lines {
            eprintln!("topo-run: stats: rank {}{on}: {line}", st.rank);
        }
    }
}

/// Ties the teardown to MPI's own finalize, however the program reaches it: an attribute
/// on `MPI_COMM_SELF` whose delete callback runs [`finalize`]. MPI deletes that
/// communicator's attributes first thing in `MPI_Finalize` (MPI-4.0 §11.2.4), with MPI
/// still fully usable, also where the program calls `PMPI_Finalize` itself (from C or
/// Fortran), which this library does not see. (Where it does see
/// `MPI_Finalize`, the teardown has run already and the callback finds nothing to do.)
pub(super) fn hook_finalize() {
    let keyval = abi::keyval_deleted_by(self_deleted);
    abi::set_attr(abi::comm_self(), keyval, 0);
}

/// MPI is finalizing (it deletes `MPI_COMM_SELF`'s attributes first): topo-run's
/// teardown, with every collective in flight completed, the progress callback removed,
/// the contexts freed and the statistics printed.
pub(super) extern "C" fn self_deleted(
    _comm: MPI_Comm,
    _keyval: c_int,
    _value: *mut c_void,
    _extra: *mut c_void,
) -> c_int {
    abi::own(None, finalize);
    SUCCESS
}

/// Advances everything until no collective of ours is in flight.
pub(super) fn wait_idle(st: &mut State) {
    let mut pace = Pace::new(SPIN);
    let mut check = false;
    while !st.pending.is_empty() {
        st.progress(check);
        check = pace.pause();
    }
}

/// The most contexts (world's and its congruent communicators') a process keeps
/// (`TOPO_RUN_MAX_COMMS`); collectives on further communicators go to MPI.
pub(super) fn max_comms() -> usize {
    settings::max_comms(std::env::var(settings::MAX_COMMS_ENV).ok().as_deref())
}

/// Gives `comm`, just created by the application from `parent`, a context: the one its
/// members kept from the last communicator over them if they all did ([`take_up_kept`]),
/// else a new one if it is congruent to world, or if a member's last new communicator
/// began with a nonblocking collective (collective over `parent`: every rank of it calls
/// this in the same creating call, with `MPI_COMM_NULL` where it is not in `comm`).
pub(crate) fn adopt(parent: MPI_Comm, comm: MPI_Comm) {
    adopt_as(take_up_kept(parent, comm), comm);
}

/// Gives `comm`, just created, a context as `adoption` says: none more if it has the one
/// its members kept; one now if they asked for it (or if it is congruent to world); else
/// none before its first blocking collective.
pub(super) fn adopt_as(adoption: Adoption, comm: MPI_Comm) {
    match adoption {
        Adoption::TakenUp => return,
        // (One congruent to world is set up below in any case.)
        Adoption::SetUpNow if !abi::congruent_to_world(comm) => {
            set_up_at_creation(comm);
            return;
        }
        Adoption::SetUpNow | Adoption::Neither => {}
    }
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
    // Under MPI_THREAD_MULTIPLE the setup must not hold the global lock: it runs as the
    // lazy one does (the state locked anew for each look), here in the creating call,
    // which every member makes, so that a communicator whose collectives are all
    // nonblocking (mpi4py's duplicates often) has its context from the start.
    if st.multiple {
        drop(g);
        set_up_lazily(&mut Relock, comm, Origin::New);
        return;
    }
    // Agree over `comm`: whether every rank has room for a segment, and a context number
    // no rank uses.
    let full = st.segments_full() || !Topo::room_for_another();
    let mine: [c_int; 2] = [c_int::from(full), st.next_instance as c_int];
    let agreed = abi::allreduce_max_2(comm, mine);
    if agreed[0] != 0 {
        return;
    }
    let instance = agreed[1] as u32;
    st.next_instance = instance + 1;
    match Topo::from_env_instance(&abi::borrowed(comm), instance) {
        Ok(topo) if topo.is_hierarchical() => {
            let (rank, size) = (st.rank, st.size);
            let kind = CommKind::Duplicate;
            st.stats.context(origin_of(&topo));
            st.attach(
                comm,
                Active {
                    topo,
                    kind,
                    rank,
                    size,
                },
            );
        }
        Ok(_) => {}
        Err(e) => setup_failed(st.rank, &e),
    }
}

/// In the call that created `comm` from `parent` (collective over `parent`): gives `comm`
/// the context its members kept from the last communicator over the same members in the
/// same order (`topo_runtime::kept`), if every member kept the same one; says whether it
/// did. A program that makes and frees the same communicators again and again (BLACS
/// around every operation) pays one allgather of ours over `parent` for each, instead of
/// the agreements over MPI of a setup at the first collective. Only where `parent` has a
/// context of ours (the same on all its members): the members learn each other's offers
/// through it, at the creating calls that `Offers` does not skip. Takes up nothing else: a
/// context that must be made anew is made as before, at its first blocking collective;
/// or, if a member says that its last new communicator began with a nonblocking
/// collective (`State::nonblocking_first`), in this call ([`Adoption::SetUpNow`]): a
/// communicator whose collectives are all nonblocking (mpi4py's often are) could not get
/// one later, since starting a nonblocking collective must not wait for a setup.
fn take_up_kept(parent: MPI_Comm, comm: MPI_Comm) -> Adoption {
    let mut g = lock();
    let Some(st) = g.0.state.as_mut() else {
        return Adoption::Neither;
    };
    let Some(e) = st.contexts.get_mut(&key(parent)) else {
        return Adoption::Neither;
    };
    let world_order = matches!(e.kind, CommKind::World | CommKind::Duplicate);
    if !st.on || !e.offers.exchange_now() {
        return Adoption::Neither;
    }
    let wish = u32::from(st.nonblocking_first);
    // What this rank offers: the context it kept for `comm`, on the node's lanes if it has
    // no room for another segment (as the setup at the first collective would choose).
    let (in_parent, offer) = if matches!(abi::why_no_context(comm), Some(None)) {
        let in_parent = ranks_in(comm, parent);
        let members = if world_order {
            in_parent.clone()
        } else {
            ranks_in(comm, abi::world())
        };
        let offer = st.kept_keys.map(|k| k.offer(&members, st.segments_full()));
        (in_parent, offer.unwrap_or_default())
    } else {
        (Vec::new(), KeptOffer::default())
    };
    let id = offer.id();
    // A row per rank of `parent`: the kept context's id (two words), the wish.
    const ROW: usize = 3;
    let mine = [id as u32, (id >> 32) as u32, wish];
    let mut all = vec![0u32; ROW * abi::comm_size(parent)];
    let (mut g, (outcome, _)) = run_in_context(g, None, parent, |a, _| {
        a.topo.all_gather_into(&mine, &mut all);
        Ok(())
    });
    let Some(st) = g.0.state.as_mut() else {
        return Adoption::Neither;
    };
    if let Some(e) = st.contexts.get_mut(&key(parent)) {
        e.offers.exchanged(all.iter().any(|&w| w != 0));
    }
    if outcome.is_err() {
        return Adoption::Neither;
    }
    let row = |p: u32| &all[ROW * p as usize..ROW * p as usize + ROW];
    // Every member decides from the members' rows alone, so all decide alike.
    let kept_by_all = id != 0 && in_parent.iter().all(|&p| row(p)[..2] == mine[..2]);
    if kept_by_all && let Some(topo) = offer.take_up() {
        let active = active_for(comm, topo);
        st.attach(comm, active);
        st.stats.context(Origin::KeptAtCreation);
        return Adoption::TakenUp;
    }
    // (A kept context not taken up goes back with `offer`, here.)
    if in_parent.iter().any(|&p| row(p)[2] != 0) {
        return Adoption::SetUpNow;
    }
    Adoption::Neither
}

/// What [`take_up_kept`] did for a new communicator.
pub(super) enum Adoption {
    /// It has the context its members kept.
    TakenUp,
    /// It gets a new context now, in its creating call ([`set_up_at_creation`]).
    SetUpNow,
    /// Nothing yet: congruent to world, it gets one now anyway; else at its first blocking
    /// collective.
    Neither,
}

/// Sets `comm`'s context up in the call that created it (every member is in that call),
/// as at a first blocking collective.
fn set_up_at_creation(comm: MPI_Comm) {
    drop(set_up(lock(), comm, Origin::NewAtCreation));
}

/// [`set_up_lazily`] with the global lock `g` held throughout below
/// `MPI_THREAD_MULTIPLE`, and without it at that level (locked anew for each look, so that
/// the setup's waits for the other members hold no global lock). Returns the global lock.
pub(super) fn set_up(
    mut g: SerialGuard<'static, Shared>,
    comm: MPI_Comm,
    new: Origin,
) -> SerialGuard<'static, Shared> {
    let Some(st) = g.0.state.as_mut() else {
        return g;
    };
    if st.multiple {
        drop(g);
        set_up_lazily(&mut Relock, comm, new);
        return lock();
    }
    set_up_lazily(&mut &mut *st, comm, new);
    g
}

/// Reaches the state during a context's setup: held throughout (below
/// `MPI_THREAD_MULTIPLE`), or locked anew for each look ([`Relock`]), so that the setup's
/// waits for the other members hold no global lock.
pub(super) trait Access {
    /// Runs `f` on the state (`None` once it is gone: MPI is finalizing).
    fn with<R>(&mut self, f: impl FnOnce(&mut State) -> R) -> Option<R>;
}

impl Access for &mut State {
    fn with<R>(&mut self, f: impl FnOnce(&mut State) -> R) -> Option<R> {
        Some(f(self))
    }
}

/// The state, locked for each look (under `MPI_THREAD_MULTIPLE`).
pub(super) struct Relock;

impl Access for Relock {
    fn with<R>(&mut self, f: impl FnOnce(&mut State) -> R) -> Option<R> {
        lock().0.state.as_mut().map(f)
    }
}

/// At the first blocking collective on `comm`, which has no context (one the library did
/// not see created, or one not congruent to world): gives it one, the job's hierarchy
/// restricted to its members (`Topo::for_comm`), when every member has room for it and
/// none has a collective of the library's in flight. (Setting up blocks inside MPI, where
/// this rank would not advance a collective a peer may be waiting for; so the members
/// first agree, through a nonblocking allreduce polled with the library's progress.) With
/// collectives in flight somewhere, the call goes to MPI and the next one tries again; a
/// communicator that cannot have a context is remembered, tied to it by an attribute.
/// `new` is how the statistics count a context set up anew.
pub(super) fn set_up_lazily(st: &mut impl Access, comm: MPI_Comm, new: Origin) {
    match abi::why_no_context(comm) {
        None => return,
        Some(Some(why)) => {
            st.with(|st| st.decline(comm, why));
            return;
        }
        Some(None) => {}
    }
    // Under MPI_THREAD_MULTIPLE with Open MPI's progress hook, the setup's waits inside
    // MPI advance every collective in flight (the global lock is not held meanwhile), so
    // collectives in flight do not hold the setup back.
    let Some(mine) = st.with(|st| {
        [
            c_int::from(!(st.pending.is_empty() || st.multiple && st.hooked)),
            c_int::from(st.segments_full()),
            c_int::from(!topo_runtime::lane::available()),
            c_int::from(!Topo::room_for_another()),
        ]
    }) else {
        return;
    };
    let agreed = abi::allreduce_max_polled(comm, mine, || {
        st.with(|st| st.progress(false));
    });
    let Some([busy, full, no_lanes, no_comms]) = agreed else {
        st.with(|st| st.decline(comm, HandOff::Communicator));
        return;
    };
    // A member without room for another segment: the context goes on the node's lanes,
    // which any number of contexts share (`topo_runtime::lane`), if every member has them.
    // A member that may not take more of MPI's communicators: none.
    if full != 0 && no_lanes != 0 || no_comms != 0 {
        st.with(|st| st.decline(comm, HandOff::NoRoom));
        return;
    }
    if busy != 0 {
        return;
    }
    let made = if full != 0 {
        Topo::for_comm_on_lanes(&abi::borrowed(comm))
    } else {
        Topo::for_comm(&abi::borrowed(comm))
    };
    match made {
        Ok(topo) if topo.is_hierarchical() => {
            let origin = match origin_of(&topo) {
                Origin::New => new,
                kept => kept,
            };
            let active = active_for(comm, topo);
            st.with(|st| {
                st.attach(comm, active);
                st.stats.context(origin);
            });
        }
        Ok(_) => {
            st.with(|st| st.decline(comm, HandOff::Communicator));
        }
        // MPI out of communicators (on every member alike): the calls stay MPI's.
        Err(topo_runtime::Error::NoCommunicator) => {
            st.with(|st| st.decline(comm, HandOff::NoRoom));
        }
        Err(e) => setup_failed(abi::world_rank_size().0, &e),
    }
}

/// Whether `topo`, just made for a communicator, was set up anew or taken up.
fn origin_of(topo: &Topo) -> Origin {
    if topo.earlier_contexts() > 0 {
        Origin::Kept
    } else {
        Origin::New
    }
}

/// `comm`'s context `topo`, with the kind of communicator it is for the statistics.
fn active_for(comm: MPI_Comm, topo: Topo) -> Active {
    active_as(topo, abi::congruent_to_world(comm))
}

/// A communicator's context `topo`, congruent to world or not as the caller knows.
pub(super) fn active_as(topo: Topo, congruent: bool) -> Active {
    let (rank, size) = (topo.world().rank(), topo.world().size());
    let node = topo.local().is_some_and(|(_, local)| local as i32 == size);
    let kind = if congruent {
        CommKind::Duplicate
    } else if node {
        CommKind::Node
    } else {
        CommKind::Split
    };
    Active {
        topo,
        kind,
        rank,
        size,
    }
}

/// Drops `comm`'s context (the application is about to free it), after its collectives
/// in flight have completed.
pub(crate) fn forget_comm(comm: MPI_Comm) {
    let mut g = lock();
    let Some(st) = &mut g.0.state else {
        return;
    };
    st.undecline(key(comm));
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
    handed::changed();
}

/// Drops context `id` (its communicator is being freed), if it is still there.
pub(super) fn forget_id(g: &mut Shared, id: u64) {
    let Some(st) = &mut g.0.state else {
        return;
    };
    let Some(&handle) = st.by_id.get(&(id as usize)) else {
        return;
    };
    if st.declined.get(&handle).is_some_and(|d| d.0 == id) {
        st.undecline(handle);
    }
    if st.contexts.get(&handle).is_some_and(|e| e.id == id) {
        st.drop_context(handle);
    }
}

/// A new attribute key for topo-run's contexts (its callbacks below).
pub(crate) fn context_keyval() -> c_int {
    keyval_deleted_by(context_deleted_callback)
}

/// MPI is freeing a communicator that has a context of ours (through any binding,
/// `PMPI_Comm_free` and `MPI_Comm_disconnect` included): the context goes with it.
pub(super) extern "C" fn context_deleted_callback(
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

/// Ids of contexts whose communicators were freed while the state could not be touched.
pub(super) static DELETED: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// Whether `DELETED` may hold ids.
pub(super) static ANY_DELETED: AtomicBool = AtomicBool::new(false);
