//! The context an application holds: [`Topo::from_env`] reads the plan, checks it against
//! MPI and across ranks, sets up the node's shared memory, and the collective methods
//! (named as in rsmpi) run the hierarchical algorithms or hand the call to MPI.

use mpi::collective::{CommunicatorCollectives, Operation, Root, SystemOperation};
use mpi::datatype::Equivalence;
use mpi::ffi;
use mpi::raw::{AsRaw, FromRaw};
use mpi::topology::{Communicator, SimpleCommunicator};
use topo_hierarchy::{PLAN_ENV, RankPlan, Settings};

use std::marker::PhantomData;
use std::os::raw::c_int;
use std::sync::Arc;

pub use crate::context::ABORT_CODE;
use crate::context::Exchanges;
use crate::context::{self, Core, Hier, Locked, Shared, abort};
use crate::error::{Error, Result};
use crate::links::Links;
use crate::nonblocking::iallgather::Order;
use crate::plain::{self, MpiCombine};
use crate::private_comm::private_comm;
use crate::reduce::Scratch;
use crate::serial_lock::SerialLock;
use crate::transport::Transport;
use crate::transport::mpi::MpiTransport;
use crate::transport::shm::{Layout, Segment, ShmTransport};
use crate::view::View;
use crate::{allgather, allreduce, barrier, bcast, reduce};
use topo_hierarchy::remap;
use topo_hierarchy::remap::halving::HalvingOrder;
use topo_hierarchy::remap::partition::Placement;
use topo_hierarchy::settings::{AllgatherAlg, AllreduceAlg, BarrierAlg, TopAlg};

/// Where the node segments live (`TOPO_RUN_SHM_DIR`, default `/dev/shm`).
pub const SHM_DIR_ENV: &str = "TOPO_RUN_SHM_DIR";

/// Why the collectives go to MPI's own implementation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fallback {
    /// The program was not started by topo-run.
    NoPlan,
    /// Shared memory could not be set up on some node.
    NoSharedMemory,
}

/// topo-run's collectives for one MPI job (the world communicator).
///
/// Drop it before MPI is finalized (before the `Universe`). Dropping it completes every
/// nonblocking collective still in flight.
pub struct Topo {
    pub(crate) world: SimpleCommunicator,
    pub(crate) core: Shared,
    fallback: Option<Fallback>,
    node: String,
    local: Option<(u32, u32)>,
    /// Whether a progress thread advances this context's collectives.
    thread: bool,
    /// This rank in `world` (asked of MPI once, not on every call).
    rank: i32,
    /// The last reduction of a predefined operation on a predefined type, reused while
    /// calls keep the same pair (see [`MpiCombine::reuse`]).
    combine: Option<MpiCombine>,
    /// Not `Send`: without a progress thread the state's lock is a plain flag, which
    /// relies on one thread using the context (and its requests, also not `Send`).
    _not_send: PhantomData<*const ()>,
}

impl Drop for Topo {
    fn drop(&mut self) {
        self.quiesced().hier = None;
    }
}

impl std::fmt::Debug for Topo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Topo")
            .field("rank", &self.world.rank())
            .field("hierarchical", &self.is_hierarchical())
            .field("fallback", &self.fallback)
            .finish()
    }
}

/// One status word per rank for the init agreements: `MIN` over ranks finds the first
/// rank with a problem.
fn first_failing(world: &SimpleCommunicator, failed: bool) -> Option<u32> {
    let mine = if failed { world.rank() } else { world.size() };
    let first = pmpi_allreduce_i32(world, mine, SystemOperation::min().as_raw());
    (first < world.size()).then_some(first as u32)
}

/// Sends `rank`'s message to everyone (fixed 1 KiB, truncated).
fn share_message(world: &SimpleCommunicator, rank: u32, mine: &str) -> String {
    let mut buf = [0u8; 1024];
    if world.rank() as u32 == rank {
        let n = mine.len().min(buf.len());
        buf[..n].copy_from_slice(&mine.as_bytes()[..n]);
    }
    pmpi_bcast(world, rank, &mut buf);
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

// The agreements at init call the profiling entry points (`PMPI_*`), not rsmpi's
// collectives, because the PMPI library sets this context up from inside its own
// `MPI_Init`, where `MPI_Bcast` and `MPI_Allreduce` are its own.

/// A communicator of topo-run's own over `comm`'s group (collective over `comm`; see
/// [`private_comm`]).
fn private(comm: &SimpleCommunicator) -> SimpleCommunicator {
    // SAFETY: a live intracommunicator just made for topo-run, never world or self, and
    // owned by the returned value alone (which frees it).
    unsafe { SimpleCommunicator::from_raw(private_comm(comm.as_raw())) }
}

/// `PMPI_Bcast` of `buf` from `root` over `comm`.
fn pmpi_bcast(comm: &SimpleCommunicator, root: u32, buf: &mut [u8]) {
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

/// `PMPI_Allgather` of two `u32` per rank over `comm`: rank r's pair at `2r` and `2r + 1`.
fn pmpi_allgather_u32<const N: usize>(comm: &SimpleCommunicator, mine: [u32; N]) -> Vec<u32> {
    let mut all = vec![0u32; N * comm.size() as usize];
    // SAFETY: `N` `u32` in, `N` per rank out into a buffer of `N * size` of them; the
    // buffers are distinct and the handles live.
    unsafe {
        ffi::PMPI_Allgather(
            mine.as_ptr().cast(),
            N as i32,
            ffi::RSMPI_UINT32_T,
            all.as_mut_ptr().cast(),
            N as i32,
            ffi::RSMPI_UINT32_T,
            comm.as_raw(),
        );
    }
    all
}

/// `PMPI_Allreduce` of one `i32` with `op` over `comm`.
fn pmpi_allreduce_i32(comm: &SimpleCommunicator, mine: i32, op: ffi::MPI_Op) -> i32 {
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

impl Topo {
    /// Sets up topo-run's collectives for `world` (call after MPI is initialised, on every
    /// rank). Collective: every rank gets the same outcome.
    ///
    /// Without a plan (not started by topo-run) the collectives go to MPI, and rank 0
    /// prints one warning. A plan that does not match MPI, or ranks planned from different
    /// inputs, is an error on every rank. Shared memory that cannot be set up (for example
    /// a full /dev/shm) gives a warning and MPI's collectives.
    pub fn from_env(world: &SimpleCommunicator) -> Result<Topo> {
        Self::from_env_instance(world, 0)
    }

    /// Like [`Topo::from_env`], for a communicator congruent to world (same ranks in the
    /// same order), as context number `instance` of this process: a context per
    /// communicator keeps their collectives apart. Contexts that live at the same time
    /// need different numbers, the same on every rank of a node; 0 is [`Topo::from_env`]'s.
    pub fn from_env_instance(world: &SimpleCommunicator, instance: u32) -> Result<Topo> {
        Self::init(world, instance, None)
    }

    /// Like [`Topo::from_env_instance`], with `settings` (the `key:value` pairs a plan
    /// stores, as `topo-run --rules` would write them) in place of the plan's own: for
    /// measuring several settings in one job, as `topo-run tune` does. Every rank must pass
    /// the same pairs; a rank that does not gets [`Error::SettingsDiffer`], on every rank.
    /// Without a plan this is [`Topo::from_env_instance`] (MPI's collectives).
    pub fn from_env_with_settings(
        world: &SimpleCommunicator,
        instance: u32,
        settings: &[(String, String)],
    ) -> Result<Topo> {
        Self::init(world, instance, Some(settings))
    }

    fn init(
        world: &SimpleCommunicator,
        instance: u32,
        settings_override: Option<&[(String, String)]>,
    ) -> Result<Topo> {
        crate::marker::keep();
        crate::backoff::enable_mpi_progress();
        let world = private(world);
        let text = std::env::var(PLAN_ENV).ok();
        let local = text.as_deref().map(|t| Self::read_plan(&world, t));
        // Agree on the plans: rank 0's digest against everyone's.
        let mut d0 = [0u8; 33];
        if let Some(Ok((plan, _))) = &local {
            d0[..32].copy_from_slice(plan.digest.to_string().as_bytes());
            d0[32] = 1;
        }
        pmpi_bcast(&world, 0, &mut d0);
        let problem = match &local {
            None if d0[32] == 0 => None,
            None => Some(format!(
                "rank {} on {} has no topo-run plan but rank 0 has one; start every rank \
                 with topo-run",
                world.rank(),
                hostname()
            )),
            Some(Err(e)) => Some(format!("rank {}: {e}", world.rank())),
            Some(Ok((plan, _)))
                if d0[32] == 0 || d0[..32] != *plan.digest.to_string().as_bytes() =>
            {
                Some(
                    Error::DigestMismatch {
                        rank: plan.rank,
                        node: plan.node.clone(),
                        digest: plan.digest.to_string(),
                        digest0: String::from_utf8_lossy(&d0[..32]).into_owned(),
                    }
                    .to_string(),
                )
            }
            Some(Ok(_)) => None,
        };
        if let Some(rank) = first_failing(&world, problem.is_some()) {
            let message = share_message(&world, rank, problem.as_deref().unwrap_or(""));
            return Err(match local {
                Some(Err(e)) if rank == world.rank() as u32 => e,
                _ => Error::Remote { rank, message },
            });
        }
        let Some(Ok((plan, mut settings))) = local else {
            if world.rank() == 0 {
                eprintln!(
                    "topo-run: warning: {PLAN_ENV} is not set, so the program was not started \
                     by topo-run; collectives use MPI's own (run `srun --mpi=pmix topo-run ./app`)"
                );
            }
            return Ok(Topo::new(
                world,
                None,
                Some(Fallback::NoPlan),
                hostname(),
                None,
            ));
        };
        if let Some(pairs) = settings_override {
            // Every rank has a plan here; the same pairs everywhere give the same outcome.
            Self::agree_on_settings(&world, pairs)?;
            settings = Settings::from_pairs(pairs).map_err(Error::Settings)?;
        }
        let mut view = View::from_plan(&plan);
        // Pipelining is a job-wide choice: on if any rank has more than one level.
        view.pipeline = pmpi_allreduce_i32(
            &world,
            i32::from(view.pipeline),
            SystemOperation::max().as_raw(),
        ) != 0;
        let mut shm = match Self::setup_shm(&world, &plan, &settings, instance) {
            Ok(shm) => shm,
            Err(reason) => {
                if world.rank() == 0 {
                    eprintln!(
                        "topo-run: warning: {reason}; collectives use MPI's own for this run"
                    );
                }
                let local = Some((plan.local_rank, plan.local_size));
                return Ok(Topo::new(
                    world,
                    None,
                    Some(Fallback::NoSharedMemory),
                    plan.node,
                    local,
                ));
            }
        };
        Self::setup_single_copy(&world, &settings, shm.as_mut());
        if let Some(t) = shm.as_mut() {
            t.check_near()?;
        }
        let net = MpiTransport::new(private(&world));
        let node_label = plan.peers.first().copied().unwrap_or(plan.rank);
        let switch_label = view.switch_label().unwrap_or(u32::MAX);
        let (network, exchanges) =
            Self::setup_exchanges(&world, &mut settings, &view, node_label, switch_label);
        let links = Links::new(&view, plan.peers.clone(), shm, net);
        let hier = Hier {
            network_view: view.over_network(&network),
            view,
            settings,
            links,
            scratch: Scratch::default(),
            exchanges,
        };
        let local = Some((plan.local_rank, plan.local_size));
        Ok(Topo::new(
            world,
            Some(Box::new(hier)),
            None,
            plan.node,
            local,
        ))
    }

    fn new(
        world: SimpleCommunicator,
        hier: Option<Box<Hier>>,
        fallback: Option<Fallback>,
        node: String,
        local: Option<(u32, u32)>,
    ) -> Topo {
        let thread = hier.as_ref().map(|h| {
            let s = &h.settings;
            // `--spin 0` says ranks outnumber cores: a progress thread would only compete
            // with them, and there it stalls collectives for tens of milliseconds (the
            // lock holder starves behind yielding waiters; docs/runtime.md).
            static WARNED: std::sync::atomic::AtomicBool =
                std::sync::atomic::AtomicBool::new(false);
            if s.progress_thread
                && s.spin == 0
                && world.rank() == 0
                && !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                eprintln!(
                    "topo-run: warning: --progress-thread is ignored with --spin 0 (ranks \
                     outnumber cores, so the thread would only compete with them)"
                );
            }
            s.progress_thread && s.spin > 0
        });
        let threaded = thread == Some(true);
        let state = Core::new(hier, world.rank(), node.clone());
        let core = Arc::new(if threaded {
            SerialLock::new(state)
        } else {
            // SAFETY: without a progress thread the state is reached only through this
            // context, its requests and `Progress` handles (none of them `Send`), and
            // this thread's MPI progress hook: one thread. (The PMPI library, which moves
            // contexts between threads under MPI_THREAD_SERIALIZED, has the program's own
            // ordering of its MPI calls between such uses.)
            unsafe { SerialLock::new_serial(state) }
        });
        if let Some(thread) = thread {
            crate::mpi_hook::track(&core);
            if thread {
                crate::progress_thread::track(&core);
            }
        }
        Topo {
            rank: world.rank(),
            world,
            core,
            fallback,
            node,
            local,
            thread: threaded,
            combine: None,
            _not_send: PhantomData,
        }
    }

    /// The shared state, after every nonblocking collective in flight has completed (a
    /// blocking call must not overtake them).
    fn quiesced(&self) -> Locked<'_> {
        let mut core = context::lock(&self.core);
        if let Err(e) = core.quiesce() {
            // Named after the nonblocking collective that failed.
            core.fail(e);
        }
        core
    }

    /// Checks that every rank passed the same settings pairs: a hash of rank 0's against
    /// everyone's.
    fn agree_on_settings(world: &SimpleCommunicator, pairs: &[(String, String)]) -> Result<()> {
        use std::hash::{Hash, Hasher};
        // `DefaultHasher::new` has fixed keys: the same text hashes alike in every process.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        pairs.hash(&mut h);
        let mine = h.finish().to_le_bytes();
        let mut first = mine;
        pmpi_bcast(world, 0, &mut first);
        match first_failing(world, mine != first) {
            None => Ok(()),
            Some(rank) => Err(Error::SettingsDiffer { rank }),
        }
    }

    fn read_plan(world: &SimpleCommunicator, text: &str) -> Result<(RankPlan, Settings)> {
        let plan = RankPlan::decode(text).map_err(Error::Plan)?;
        for (what, p, m) in [
            ("rank", plan.rank, world.rank() as u32),
            ("size", plan.size, world.size() as u32),
        ] {
            if p != m {
                return Err(Error::PlanMismatch {
                    what,
                    plan: p,
                    mpi: m,
                });
            }
        }
        let settings = Settings::from_pairs(&plan.settings).map_err(Error::Settings)?;
        Ok((plan, settings))
    }

    /// Creates (leader) or attaches (others) the node's segment, with two agreements over
    /// MPI so that every rank sees the same outcome; the leader removes the name once all
    /// have attached. `Err` is the message of the first rank that failed.
    fn setup_shm(
        world: &SimpleCommunicator,
        plan: &RankPlan,
        s: &Settings,
        instance: u32,
    ) -> std::result::Result<Option<ShmTransport>, String> {
        let alone = plan.local_size == 1;
        let dir = std::env::var(SHM_DIR_ENV).unwrap_or_else(|_| "/dev/shm".into());
        let mut path = format!(
            "{}/{}",
            dir.trim_end_matches('/'),
            plan.shm_name.trim_start_matches('/')
        );
        if instance > 0 {
            path.push_str(&format!(".c{instance}"));
        }
        let layout = Layout::new(
            plan.local_size as usize,
            s.slots as usize,
            s.fragment as usize,
        );
        let leader = plan.local_rank == 0;
        let fail_all = |e: Option<&Error>| -> std::result::Result<(), String> {
            let mine = e.map(|e| format!("rank {} on {}: {e}", plan.rank, plan.node));
            match first_failing(world, mine.is_some()) {
                Some(r) => Err(share_message(world, r, mine.as_deref().unwrap_or(""))),
                None => Ok(()),
            }
        };
        // Agreement 1: every node leader has created its segment.
        let created = match (alone, leader) {
            (false, true) => Segment::create(&path, layout, plan.node_plan).map(Some),
            _ => Ok(None),
        };
        let unlink_on_err = |seg: &Option<Segment>| {
            if let Some(seg) = seg {
                let _ = seg.unlink();
            }
        };
        if let Err(msg) = fail_all(created.as_ref().err()) {
            if let Ok(seg) = &created {
                unlink_on_err(seg);
            }
            return Err(msg);
        }
        // Agreement 2: every local rank has attached and reserved its queue.
        let attached = match created {
            Ok(Some(seg)) => Ok(Some(seg)),
            _ if alone => Ok(None),
            _ => Segment::attach(&path, layout, plan.node_plan).map(Some),
        }
        .and_then(|seg| match &seg {
            Some(s) => s.reserve_queue(plan.local_rank as usize).map(|()| seg),
            None => Ok(None),
        });
        let seg = match attached {
            Ok(seg) => {
                if let Err(msg) = fail_all(None) {
                    if leader {
                        unlink_on_err(&seg);
                    }
                    return Err(msg);
                }
                seg
            }
            Err(e) => {
                if leader {
                    let _ = std::fs::remove_file(&path);
                }
                return Err(fail_all(Some(&e)).err().unwrap_or_else(|| e.to_string()));
            }
        };
        // Everyone has attached: the name can go, so a crash leaves nothing behind.
        // Agreement 3: the leaders have removed it (if one could not, every rank of the
        // job learns it, and all use MPI's collectives alike).
        let removed = match &seg {
            Some(seg) if leader => {
                if crate::fault::hit("shm-unlink") {
                    Err(seg.unlink_error(nix::errno::Errno::EIO))
                } else {
                    seg.unlink()
                }
            }
            _ => Ok(()),
        };
        fail_all(removed.as_ref().err())?;
        Ok(seg.map(|seg| {
            let mut t = ShmTransport::new(
                seg,
                plan.local_rank as usize,
                plan.peers.clone(),
                plan.node.clone(),
                s.spin,
            );
            t.set_near(plan.near_peers());
            t
        }))
    }

    /// Turns on single-copy transfers if the settings ask for them and every rank can
    /// read its local peers' memory (agreed over MPI, so all ranks decide alike); else
    /// rank 0 warns once and large messages go through the queues.
    fn setup_single_copy(world: &SimpleCommunicator, s: &Settings, shm: Option<&mut ShmTransport>) {
        if s.single_copy == 0 {
            return;
        }
        let mine = shm.as_ref().and_then(|t| t.probe_single_copy().err());
        match first_failing(world, mine.is_some()) {
            None => {
                if let Some(t) = shm {
                    t.set_single_copy(Some(s.single_copy as usize));
                }
            }
            Some(r) => {
                let reason = share_message(world, r, mine.as_deref().unwrap_or(""));
                if world.rank() == 0 {
                    eprintln!(
                        "topo-run: warning: single-copy transfers are not possible ({reason}; \
                         process_vm_readv needs ranks of the same user and a ptrace policy \
                         that allows it); large messages go through the shared-memory \
                         queues (set TOPO_RUN_SINGLE_COPY=0 to silence this)"
                    );
                }
            }
        }
    }

    /// Why collectives go to MPI's own implementation, if they do.
    pub fn fallback(&self) -> Option<&Fallback> {
        self.fallback.as_ref()
    }

    /// The size from which node-local messages are copied once, straight from the
    /// sender's buffer (`None`: every message goes through the shared-memory queues).
    pub fn single_copy(&self) -> Option<usize> {
        let core = context::lock(&self.core);
        core.hier.as_ref()?.links.shm.as_ref()?.single_copy()
    }

    /// How many other ranks of this node share this rank's nearest cache or memory (its
    /// lowest group inside the node, unless the check at setup found the node's report
    /// wrong), and the one-way cache-line time that check measured, if it ran. `None`
    /// without shared memory.
    pub fn near_peers(&self) -> Option<(usize, Option<f64>)> {
        let core = context::lock(&self.core);
        let t = core.hier.as_ref()?.links.shm.as_ref()?;
        let me = t.local_index();
        let near = (0..t.peers().len())
            .filter(|&j| j != me && t.is_near(j))
            .count();
        Some((near, t.checked_line_ns()))
    }

    /// Measures how long a cache line takes between this node's cores: the node's first
    /// local rank bounces one with each other local rank in turn (`batches` batches of
    /// `rounds` round trips) and gets, per peer, its world rank and the median one-way
    /// time in nanoseconds (half a round trip). Every other rank gets an empty list, as do
    /// all ranks when the collectives go to MPI's own. Collective: every rank of the world
    /// calls it, with the same arguments. With ranks bound to cores of their own, this is
    /// the floor under any handoff between two ranks, so under every tree edge of a small
    /// message.
    pub fn cache_line_transfer(&mut self, batches: usize, rounds: u32) -> Result<Vec<(u32, f64)>> {
        self.local_pairs_in_turn(|shm, peer, _| {
            let mut t = shm.ping_pong(peer, batches.max(1), rounds.max(1))?;
            t.sort_by(f64::total_cmp);
            Ok(t.get(t.len() / 2).copied())
        })
    }

    /// Measures topo-run's own shared-memory path between this node's first local rank
    /// and each other local rank in turn, as a collective's step uses it (the queues, or
    /// single copy where the message is large enough): per peer, its world rank and the
    /// one-way time of `bytes`, half the median of `iters` round trips, in microseconds.
    /// Every other rank gets an empty list, as do all ranks when the collectives go to
    /// MPI's own. Collective: every rank of the world calls it, with the same arguments.
    pub fn queue_transfer(&mut self, bytes: usize, iters: usize) -> Result<Vec<(u32, f64)>> {
        let mut buf = vec![0u8; bytes];
        self.local_pairs_in_turn(|shm, peer, leads| {
            let warm = iters / 10 + 2;
            let mut round_trips = Vec::with_capacity(iters);
            for i in 0..warm + iters.max(1) {
                let t0 = std::time::Instant::now();
                if leads {
                    shm.send(&[peer], &buf)?;
                    shm.recv(peer, &mut buf)?;
                } else {
                    shm.recv(peer, &mut buf)?;
                    shm.send(&[peer], &buf)?;
                }
                if i >= warm {
                    round_trips.push(t0.elapsed().as_secs_f64() * 1e6);
                }
            }
            round_trips.sort_by(f64::total_cmp);
            Ok(leads.then(|| round_trips[round_trips.len() / 2] / 2.0))
        })
    }

    /// Runs `measure` for the node's first local rank and each other local rank in turn
    /// (every rank of the world meets in a barrier before each pair, so that no other pair
    /// of the node shares the cores): both ranks of the pair call it with their transport,
    /// the other's world rank and whether they lead (the first local rank). The leader's
    /// values come back with the other's world rank. Collective over the world.
    fn local_pairs_in_turn(
        &mut self,
        mut measure: impl FnMut(&mut ShmTransport, u32, bool) -> Result<Option<f64>>,
    ) -> Result<Vec<(u32, f64)>> {
        let mut core = self.quiesced();
        let mut shm = core.hier.as_mut().and_then(|h| h.links.shm.as_mut());
        let (me, peers) = shm
            .as_ref()
            .map_or((0, Vec::new()), |s| (s.local_index(), s.peers().to_vec()));
        let most = pmpi_allreduce_i32(
            &self.world,
            peers.len() as i32,
            SystemOperation::max().as_raw(),
        );
        let mut out = Vec::new();
        for j in 1..most.max(1) as usize {
            // SAFETY: a live communicator; every rank makes the same calls.
            unsafe { ffi::PMPI_Barrier(self.world.as_raw()) };
            let Some(shm) = shm
                .as_deref_mut()
                .filter(|_| j < peers.len() && (me == 0 || me == j))
            else {
                continue;
            };
            let leads = me == 0;
            let peer = peers[if leads { j } else { 0 }];
            if let Some(v) = measure(shm, peer, leads)?.filter(|_| leads) {
                out.push((peer, v));
            }
        }
        Ok(out)
    }

    /// Whether the hierarchical path is active.
    pub fn is_hierarchical(&self) -> bool {
        context::lock(&self.core).hier.is_some()
    }

    /// Whether a progress thread advances this context's nonblocking collectives
    /// (`--progress-thread`, unless `--spin 0` turned it off).
    pub fn has_progress_thread(&self) -> bool {
        self.thread
    }

    /// The world communicator topo-run works on: a communicator of its own over the
    /// application's group ([`private_comm`]).
    pub fn world(&self) -> &SimpleCommunicator {
        &self.world
    }

    fn abort(&self, op: &'static str, e: Error) -> ! {
        abort(self.world.rank(), &self.node, op, e)
    }

    /// Gathers every rank's `send` into `recv` on every rank, rank r's at
    /// `recv[r * send.len()..]` (rsmpi: `CommunicatorCollectives::all_gather_into`).
    /// `recv` holds `size * send.len()` elements.
    pub fn all_gather_into<T: Equivalence + Copy + 'static>(&mut self, send: &[T], recv: &mut [T]) {
        // `raw_all_gather` refuses a `recv` of the wrong length, which MPI then reports.
        if plain::is_plain::<T>()
            && self.raw_all_gather(Some(plain::bytes(send)), plain::bytes_mut(recv))
        {
            return;
        }
        drop(self.quiesced());
        self.world.all_gather_into(send, recv)
    }

    /// Allgather in place: `buf` holds `size` blocks and this rank's is already at its
    /// place, `buf[rank * len..(rank + 1) * len]` (as `MPI_IN_PLACE` asks); on return it
    /// holds every rank's.
    pub fn all_gather_in_place<T: Equivalence + Copy + 'static>(&mut self, buf: &mut [T]) {
        if plain::is_plain::<T>() && self.raw_all_gather(None, plain::bytes_mut(buf)) {
            return;
        }
        drop(self.quiesced());
        // rsmpi has no in-place Allgather: gather a copy of this rank's block.
        let size = self.world.size() as usize;
        let len = buf.len() / size;
        let at = self.world.rank() as usize * len;
        let own = buf[at..at + len].to_vec();
        self.world.all_gather_into(&own[..], buf)
    }

    /// Broadcasts `buf` from `root` (rsmpi: `Root::broadcast_into`).
    pub fn broadcast_into<T: Equivalence + Copy + 'static>(&mut self, root: i32, buf: &mut [T]) {
        if plain::is_plain::<T>() && self.raw_broadcast(root, plain::bytes_mut(buf)) {
            return;
        }
        drop(self.quiesced());
        self.world.process_at_rank(root).broadcast_into(buf)
    }

    /// Reduces everyone's `send` into `recv` at this rank, the root
    /// (rsmpi: `Root::reduce_into_root`).
    pub fn reduce_into_root<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: O,
    ) {
        assert_eq!(
            send.len(),
            recv.len(),
            "reduce_into_root: send and receive lengths differ"
        );
        self.reduce_impl(self.rank, Some(send), Some(recv), op);
    }

    /// Like [`Topo::reduce_into_root`], with the root's contribution in `buf` (in place).
    pub fn reduce_into_root_in_place<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        buf: &mut [T],
        op: O,
    ) {
        self.reduce_impl(self.rank, None, Some(buf), op);
    }

    /// Contributes `send` to a reduction whose result goes to `root`
    /// (rsmpi: `Root::reduce_into`).
    pub fn reduce_into<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        root: i32,
        send: &[T],
        op: O,
    ) {
        assert_ne!(
            root, self.rank,
            "reduce_into is for non-root ranks; the root calls reduce_into_root"
        );
        self.reduce_impl(root, Some(send), None, op);
    }

    fn reduce_impl<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        root: i32,
        send: Option<&[T]>,
        mut recv: Option<&mut [T]>,
        op: O,
    ) {
        if plain::is_plain::<T>() && plain::commutes(&op) {
            let combine = MpiCombine::reuse::<T, O>(&op, &mut self.combine);
            let r = recv.as_deref_mut().map(plain::bytes_mut);
            if self.raw_reduce(root, send.map(plain::bytes), r, &combine) {
                return;
            }
        }
        drop(self.quiesced());
        let p = self.world.process_at_rank(root);
        match (send, recv) {
            (Some(s), Some(r)) => p.reduce_into_root(s, r, op),
            (None, Some(r)) => {
                let s = r.to_vec();
                p.reduce_into_root(&s[..], r, op)
            }
            (Some(s), None) => p.reduce_into(s, op),
            (None, None) => {}
        }
    }

    /// Reduces everyone's `send` into every rank's `recv` (rsmpi:
    /// `CommunicatorCollectives::all_reduce_into`).
    pub fn all_reduce_into<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        send: &[T],
        recv: &mut [T],
        op: O,
    ) {
        assert_eq!(
            send.len(),
            recv.len(),
            "all_reduce_into: send and receive lengths differ"
        );
        self.all_reduce_impl(Some(send), recv, op);
    }

    /// Like [`Topo::all_reduce_into`], with this rank's contribution in `buf` (in place).
    pub fn all_reduce_in_place<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        buf: &mut [T],
        op: O,
    ) {
        self.all_reduce_impl(None, buf, op);
    }

    fn all_reduce_impl<T: Equivalence + Copy + 'static, O: Operation>(
        &mut self,
        send: Option<&[T]>,
        recv: &mut [T],
        op: O,
    ) {
        if plain::is_plain::<T>() && plain::commutes(&op) {
            let combine = MpiCombine::reuse::<T, O>(&op, &mut self.combine);
            if self.raw_all_reduce(send.map(plain::bytes), plain::bytes_mut(recv), &combine) {
                return;
            }
        }
        drop(self.quiesced());
        match send {
            Some(s) => self.world.all_reduce_into(s, recv, op),
            None => {
                let s = recv.to_vec();
                self.world.all_reduce_into(&s[..], recv, op)
            }
        }
    }

    /// Returns once every rank has called it (rsmpi: `Communicator::barrier`).
    pub fn barrier(&mut self) {
        if !self.raw_barrier() {
            self.world.barrier();
        }
    }

    // Byte-level entry points, for callers that hold raw MPI buffers (the PMPI library).
    // Each runs the hierarchical algorithm and returns `true`, or returns `false` without
    // doing anything when the collectives go to MPI's own (see [`Topo::fallback`]); the
    // caller then hands the call to MPI. A failure (a dead peer) aborts the job, as in
    // the typed methods. Ranks are world ranks; every rank must make the same calls in
    // the same order, as MPI requires of collectives.

    /// Gathers every rank's block into `recv` (rank r's at `r * len`, `len =
    /// recv.len() / size`); `send` is `None` when this rank's block is in place already.
    pub fn raw_all_gather(&mut self, send: Option<&[u8]>, recv: &mut [u8]) -> bool {
        let size = self.world.size() as usize;
        if !recv.len().is_multiple_of(size) || send.is_some_and(|b| b.len() * size != recv.len()) {
            return false;
        }
        let exchange = self.exchange_for(recv.len());
        if let Some((alg, true)) = exchange {
            // Bruck's and the ring's sends and receives go to different ranks, maybe over
            // different links: they run as their schedule, waited for.
            mpi::request::scope(|scope| self.sched_all_gather(scope, alg, send, recv).wait());
            return true;
        }
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        let rank = self.world.rank() as u32;
        let len = recv.len() / size;
        let doubling = exchange.and_then(|(alg, _)| h.exchanges.get(alg)?.doubling_peers(len));
        let result = match doubling {
            Some(peers) => allgather::recursive_doubling(&mut h.links, rank, peers, send, recv),
            _ => {
                // (The flat exchanges have gone above; only the hierarchical form is left.)
                let top = match h.settings.allgather_for(recv.len(), size) {
                    AllgatherAlg::Hierarchical(top) => top,
                    _ => TopAlg::RecursiveDoubling,
                };
                allgather::allgather(&h.view, &mut h.links, &h.settings, top, send, recv)
            }
        };
        if let Err(e) = result {
            self.abort("MPI_Allgather", e);
        }
        true
    }

    /// Which flat exchange an Allgather of `total` gathered bytes runs: `None` for the
    /// hierarchical form, else the settings' algorithm (`rd`: recursive doubling, or Bruck
    /// for a job whose size is not a power of two; `ring`) and whether it must run as a
    /// schedule ([`Exchange::needs_schedule`]). Local: the peers were worked out at setup
    /// ([`Topo::setup_exchanges`]), so starting a nonblocking Allgather waits for nobody.
    pub(crate) fn exchange_for(&self, total: usize) -> Option<(AllgatherAlg, bool)> {
        let core = context::lock(&self.core);
        let h = core.hier.as_ref()?;
        let alg = h.settings.allgather_for(total, self.world.size() as usize);
        let e = h.exchanges.get(alg)?;
        Some((alg, e.needs_schedule()))
    }

    /// What a context learns of the other ranks at setup (collective over `world`): every
    /// rank learns every rank's node and leaf switch and whether it reaches the network
    /// (one `PMPI_Allgather` of three `u32`), and keeps the ranks that reach the network
    /// (for [`View::over_network`]) and its own peers in each flat Allgather exchange the
    /// settings may choose: `O(log n)` rank numbers for recursive doubling and Bruck, the
    /// ring's order for the ring. So no collective has to learn about the other ranks
    /// when it starts.
    fn setup_exchanges(
        world: &SimpleCommunicator,
        settings: &mut Settings,
        view: &View,
        node_label: u32,
        switch_label: u32,
    ) -> (Vec<u32>, Exchanges) {
        let mut exchanges = Exchanges::default();
        let reaches = u32::from(view.reaches_network());
        let labels = pmpi_allgather_u32(world, [node_label, switch_label, reaches]);
        let reaching: Vec<u32> = (0..world.size() as u32)
            .filter(|&r| labels[3 * r as usize + 2] != 0)
            .collect();
        let network = View::meeting_order(&reaching, |r| {
            Some(labels[3 * r as usize + 1]).filter(|&l| l != u32::MAX)
        });
        // The built-in Allreduce rules depend on the job's nodes (each named by its leader)
        // and ranks.
        settings.nodes = labels
            .iter()
            .step_by(3)
            .copied()
            .collect::<std::collections::BTreeSet<u32>>()
            .len() as u32;
        settings.ranks = world.size() as u32;
        let mut algs = settings.flat_allgather_algs(world.size() as usize);
        let allreduce = settings.flat_allreduce_algs();
        if allreduce.contains(&AllreduceAlg::Ring) && !algs.contains(&AllgatherAlg::Ring) {
            algs.push(AllgatherAlg::Ring);
        }
        let flat_barrier = settings.barrier_alg() == BarrierAlg::Flat;
        if algs.is_empty() && allreduce.is_empty() && !flat_barrier {
            return (network, exchanges);
        }
        // Each rank's node is named by its leader, and the leader knows the switch.
        let node_of: Vec<u32> = labels.iter().step_by(3).copied().collect();
        let switch_of: Vec<u32> = node_of
            .iter()
            .map(|&l| labels.get(3 * l as usize + 1).copied().unwrap_or(u32::MAX))
            .collect();
        let place = Placement::with_switches(&node_of, &switch_of);
        let rank = world.rank() as u32;
        for alg in algs {
            if let Some(slot) = exchanges.slot(alg) {
                *slot = Order::new(alg, &place).and_then(|o| o.exchange(rank));
            }
        }
        if allreduce.iter().any(|a| a.uses_halving_order()) {
            exchanges.halving = HalvingOrder::new(&place).peers(rank);
        }
        if flat_barrier {
            exchanges.dissemination =
                remap::dissemination_peers(&remap::interleaved_positions(&place), rank);
        }
        (network, exchanges)
    }

    /// Broadcasts the bytes of `buf` from `root`.
    pub fn raw_broadcast(&mut self, root: i32, buf: &mut [u8]) -> bool {
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        if let Err(e) = bcast::bcast(&h.view, &mut h.links, &h.settings, root as u32, buf) {
            self.abort("MPI_Bcast", e);
        }
        true
    }

    /// Reduces with `op` into `recv` at `root`. `send` is `None` in place (the root's
    /// contribution is in `recv`); `recv` is `None` on the other ranks.
    pub fn raw_reduce(
        &mut self,
        root: i32,
        send: Option<&[u8]>,
        recv: Option<&mut [u8]>,
        op: &MpiCombine,
    ) -> bool {
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        let (view, settings) = (&h.view, &h.settings);
        let r = reduce::reduce(
            view,
            &mut h.links,
            settings,
            root as u32,
            send,
            recv,
            op,
            &mut h.scratch,
        );
        if let Err(e) = r {
            self.abort("MPI_Reduce", e);
        }
        true
    }

    /// Reduces with `op` into every rank's `recv`; `send` is `None` in place.
    pub fn raw_all_reduce(
        &mut self,
        send: Option<&[u8]>,
        recv: &mut [u8],
        op: &MpiCombine,
    ) -> bool {
        let flat = {
            let core = context::lock(&self.core);
            core.hier
                .as_ref()
                .is_some_and(|h| h.allreduce_is_flat(recv.len()))
        };
        if flat {
            // The flat forms' sends and receives go to different ranks over different
            // links: they run as their schedule, waited for.
            self.flat_all_reduce(send, recv, *op);
            return true;
        }
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        let view = allreduce::view_for(&h.view, &h.network_view, &h.settings, recv.len());
        let settings = &h.settings;
        let r = allreduce::allreduce(view, &mut h.links, settings, send, recv, op, &mut h.scratch);
        if let Err(e) = r {
            self.abort("MPI_Allreduce", e);
        }
        true
    }

    /// Returns once every rank has called it.
    pub fn raw_barrier(&mut self) -> bool {
        let flat = {
            let core = context::lock(&self.core);
            core.hier.as_ref().is_some_and(|h| h.barrier_is_flat())
        };
        if flat {
            // Its signals go to different ranks over different links: it runs as its
            // schedule, waited for.
            self.immediate_barrier().wait();
            return true;
        }
        let mut core = self.quiesced();
        let Some(h) = &mut core.hier else {
            return false;
        };
        if let Err(e) = barrier::barrier(&h.network_view, &mut h.links, &h.settings) {
            self.abort("MPI_Barrier", e);
        }
        true
    }

    /// The node this rank runs on (from the plan, else the host name).
    pub fn node(&self) -> &str {
        &self.node
    }

    /// This rank's index on its node and the number of ranks there, from the plan
    /// (`None` without a plan).
    pub fn local(&self) -> Option<(u32, u32)> {
        self.local
    }
}

fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "this node".into())
}
