//! The library's one global: topo-run's context for the job, the lookups it caches
//! (communicators congruent to world, datatypes) and the statistics.
//!
//! The context is set up collectively: in `MPI_Init`/`MPI_Init_thread`, or, when the
//! program initialised MPI without passing through them (Fortran's `MPI_INIT` calls
//! `PMPI_Init` directly), in its first collective call on a communicator congruent to
//! world, which every rank makes. It is torn down in `MPI_Finalize`.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use topo_runtime::Topo;

use crate::abi::{self, MPI_Comm, MPI_Datatype, TypeInfo};
use crate::classify::{Call, HandOff};
use crate::stats::{self, Stats};

/// Exit code (through `MPI_Abort`) when the plan in the environment is corrupted or does
/// not match MPI: the same as the launcher's "missing or corrupted plan".
pub(crate) const BAD_PLAN_CODE: i32 = 9;

/// topo-run's path, when it is on.
pub(crate) struct Active {
    pub(crate) topo: Topo,
    pub(crate) rank: i32,
    pub(crate) size: i32,
}

struct State {
    active: Option<Active>,
    /// Communicator handle -> congruent to world. Entries go when the application frees
    /// the communicator, since MPI may reuse the handle.
    comms: HashMap<usize, bool>,
    /// Predefined datatype handle -> what it is (predefined handles live until finalize).
    types: HashMap<usize, TypeInfo>,
    stats: Stats,
    rank: i32,
    /// Node leaders print the statistics.
    leader: bool,
    node: String,
}

struct Global {
    state: Option<State>,
    finalized: bool,
}

/// The state behind the global lock.
struct Shared(Global);

// SAFETY: `Topo` is not `Send` only because of the `Rc` it shares with nonblocking
// requests. This library makes no requests: the `Rc` is never cloned, and every use of
// the context happens with the global mutex held. The library is only active at thread
// levels up to MPI_THREAD_SERIALIZED, where MPI calls never run concurrently anyway.
unsafe impl Send for Shared {}

static GLOBAL: Mutex<Shared> = Mutex::new(Shared(Global {
    state: None,
    finalized: false,
}));

fn lock() -> MutexGuard<'static, Shared> {
    // A panic while the lock was held was already reported; the counters stay usable.
    GLOBAL.lock().unwrap_or_else(|p| p.into_inner())
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
            active: None,
            comms: HashMap::new(),
            types: HashMap::new(),
            stats: Stats::default(),
            rank,
            leader: rank == 0,
            node: String::new(),
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
        let world = mpi::topology::SimpleCommunicator::world();
        match Topo::from_env(&world) {
            Ok(topo) => {
                st.node = topo.node().to_string();
                if let Some((local, _)) = topo.local() {
                    st.leader = local == 0;
                }
                if topo.is_hierarchical() {
                    st.active = Some(Active { topo, rank, size });
                }
            }
            Err(e) => {
                eprintln!(
                    "topo-run: rank {rank}: error: cannot set up topo-run's collectives: {e}; \
                     aborting the job (exit code {BAD_PLAN_CODE})"
                );
                world_abort(BAD_PLAN_CODE);
            }
        }
        st
    }
}

fn world_abort(code: i32) -> ! {
    // SAFETY: MPI is initialised; MPI_Abort does not return.
    unsafe { mpi::ffi::PMPI_Abort(abi::world(), code) };
    std::process::exit(code)
}

/// Tears the context down and prints the statistics if asked; later calls go to MPI.
pub(crate) fn finalize() {
    let mut g = lock();
    g.0.finalized = true;
    let Some(st) = g.0.state.take() else {
        return;
    };
    drop(st.active);
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

/// Forgets `comm` (the application is about to free it).
pub(crate) fn forget_comm(comm: MPI_Comm) {
    if let Some(st) = &mut lock().0.state {
        st.comms.remove(&(comm.0 as usize));
    }
}

/// Runs `call` on topo-run's path if it can take it: `f` gets the context and returns
/// `Err` with the reason to hand the call to MPI. Returns whether the call was done.
pub(crate) fn run(
    call: Call,
    comm: MPI_Comm,
    f: impl FnOnce(&mut Active, &mut Lookup<'_>) -> Result<(), HandOff>,
) -> bool {
    let mut g = lock();
    let g = &mut g.0;
    if g.state.is_none() {
        // MPI was initialised without our MPI_Init (Fortran): set up now, in the first
        // call that every rank makes, one on a communicator congruent to world.
        if g.finalized || !abi::mpi_running() || !abi::congruent_to_world(comm) {
            return false;
        }
        g.state = Some(State::new());
    }
    let st = g.state.as_mut().expect("set above");
    let r = match &mut st.active {
        None => Err(HandOff::Inactive),
        Some(active) => {
            let congruent = *st
                .comms
                .entry(comm.0 as usize)
                .or_insert_with(|| abi::congruent_to_world(comm));
            if congruent {
                f(
                    active,
                    &mut Lookup {
                        types: &mut st.types,
                    },
                )
            } else {
                Err(HandOff::Communicator)
            }
        }
    };
    match r {
        Ok(()) => st.stats.ours(call),
        Err(why) => st.stats.handed(call, why),
    }
    r.is_ok()
}

/// Cached datatype lookups, for the closure of [`run`].
pub(crate) struct Lookup<'a> {
    types: &'a mut HashMap<usize, TypeInfo>,
}

impl Lookup<'_> {
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
