//! Setting a context up: the plan read and checked against MPI and across ranks, the
//! node's shared memory and single copy, and the helpers that talk to MPI directly
//! while no context exists yet.

use super::*;
use crate::lane::Lane;
use crate::transport::shm::lanes::{self, Pool};

/// One status word per rank for the init agreements: `MIN` over ranks finds the first
/// rank with a problem.
pub(super) fn first_failing(world: &SimpleCommunicator, failed: bool) -> Option<u32> {
    let mine = if failed { world.rank() } else { world.size() };
    let first = pmpi_allreduce_i32(world, mine, SystemOperation::min().as_raw());
    (first < world.size()).then_some(first as u32)
}

/// Whether every rank succeeded: `Err` is the message of the first rank that failed
/// (`e`, this rank's failure), the same on every rank.
fn fail_all(
    world: &SimpleCommunicator,
    plan: &RankPlan,
    e: Option<&Error>,
) -> std::result::Result<(), String> {
    let mine = e.map(|e| format!("rank {} on {}: {e}", plan.rank, plan.node));
    match first_failing(world, mine.is_some()) {
        Some(r) => Err(share_message(world, r, mine.as_deref().unwrap_or(""))),
        None => Ok(()),
    }
}

/// Where the node's segment of context `instance` lives (`TOPO_RUN_SHM_DIR`).
fn segment_path(plan: &RankPlan, instance: u32) -> String {
    let dir = std::env::var(SHM_DIR_ENV).unwrap_or_else(|_| "/dev/shm".into());
    let mut path = format!(
        "{}/{}",
        dir.trim_end_matches('/'),
        plan.shm_name.trim_start_matches('/')
    );
    if instance > 0 {
        path.push_str(&format!(".c{instance}"));
    }
    path
}

/// The layout of the node's segment in `plan` with settings `s`.
fn node_layout(plan: &RankPlan, s: &Settings) -> Layout {
    Layout::new(
        plan.local_size as usize,
        s.slots as usize,
        s.fragment as usize,
    )
}

/// The plan in `text`, decoded once per process: every context's setup reads it, and a
/// program that makes communicators in a loop would decode it each time (about 2 us).
pub(super) fn decode_plan(text: &str) -> Result<std::sync::Arc<RankPlan>> {
    type Last = Option<(String, std::sync::Arc<RankPlan>)>;
    static LAST: std::sync::Mutex<Last> = std::sync::Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((t, plan)) = &*last
        && t == text
    {
        return Ok(plan.clone());
    }
    let plan = std::sync::Arc::new(RankPlan::decode(text).map_err(Error::Plan)?);
    *last = Some((text.to_string(), plan.clone()));
    Ok(plan)
}

/// Sends `rank`'s message to everyone (fixed 1 KiB, truncated).
pub(super) fn share_message(world: &SimpleCommunicator, rank: u32, mine: &str) -> String {
    let mut buf = [0u8; 1024];
    if world.rank() as u32 == rank {
        let n = mine.len().min(buf.len());
        buf[..n].copy_from_slice(&mine.as_bytes()[..n]);
    }
    pmpi_bcast(world, rank, &mut buf);
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
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
        Self::init(world, instance, None, Scope::World)
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
        Self::init(world, instance, Some(settings), Scope::World)
    }

    /// Sets a context up over `world`, which is world or congruent to it, or (another
    /// `scope`) any intracommunicator, whose plan is then the job's restricted to its
    /// members (`comm.rs`).
    pub(super) fn init(
        world: &SimpleCommunicator,
        instance: u32,
        settings_override: Option<&[(String, String)]>,
        scope: Scope,
    ) -> Result<Topo> {
        let restricted = scope != Scope::World;
        let on_lanes = scope == Scope::Lanes;
        crate::marker::keep();
        crate::ffi::comm::enable_mpi_progress();
        let text = std::env::var(PLAN_ENV).ok();
        let local = text
            .as_deref()
            .map(|t| Self::read_plan(world, t, restricted));
        // A context other than world's (with the plan's settings) takes up the one its
        // members kept from the last communicator over them, if they all kept the same one
        // (`crate::kept`); else it is set up anew, to be kept in its turn.
        let reusable = instance > 0 && settings_override.is_none();
        let key = match &local {
            Some(Ok((plan, _))) if reusable => Some(reuse::key(
                &crate::ffi::comm::world_ranks(world),
                plan,
                on_lanes,
            )),
            _ => None,
        };
        if reusable && let Some(k) = reuse::take_up(world, key) {
            return Ok(Topo::from_kept(k));
        }
        // A context over another communicator than world's may find MPI out of room for
        // its communicators (MPICH's 2,048 per process): then it is not set up, on every
        // member, and its collectives stay MPI's.
        let world = if restricted {
            crate::ffi::comm::try_private(world).ok_or(Error::NoCommunicator)?
        } else {
            private(world)
        };
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
        let plan = if restricted {
            Self::restricted_plan(&world, &plan)?
        } else {
            plan
        };
        let mut view = View::from_plan(&plan);
        // Pipelining is a job-wide choice: on if any rank has more than one level.
        view.pipeline = pmpi_allreduce_i32(
            &world,
            i32::from(view.pipeline),
            SystemOperation::max().as_raw(),
        ) != 0;
        let (shm, lane) = if on_lanes {
            (Ok(None), Self::setup_lane(&world, &plan, &settings))
        } else {
            (Self::setup_shm(&world, &plan, &settings, instance), None)
        };
        let mut shm = match shm {
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
        // The node's lanes, set up with world's own context for the contexts beyond the
        // cap (`crate::lane`).
        let lanes = (scope == Scope::World && instance == 0 && settings_override.is_none())
            .then(|| Self::setup_lanes(&world, &plan, &settings));
        if !on_lanes {
            Self::setup_single_copy(&world, &settings, shm.as_mut());
        }
        if let Some(pool) = lanes {
            let single_copy = shm.as_ref().is_some_and(|t| t.single_copy().is_some());
            crate::lane::install(pool.map(|pool| crate::lane::NodeLanes { pool, single_copy }));
        }
        // Whether the partners time their cache line afresh: agreed, so that both do
        // (`ShmTransport::check_near`). Skipped with `spin` 0 (the same on every rank),
        // where nothing is timed, and on the lanes, whose queues are not the context's.
        if settings.spin > 0 && !on_lanes {
            let need = shm.as_ref().is_some_and(|t| t.needs_line_time());
            let measure =
                pmpi_allreduce_i32(&world, i32::from(need), SystemOperation::max().as_raw()) != 0;
            if let Some(t) = shm.as_mut() {
                t.check_near(measure)?;
            }
        }
        let net = if restricted {
            crate::ffi::comm::try_private(&world).ok_or(Error::NoCommunicator)?
        } else {
            private(&world)
        };
        let net = MpiTransport::new(net);
        let node_label = plan.peers.first().copied().unwrap_or(plan.rank);
        let switch_label = view.switch_label().unwrap_or(u32::MAX);
        let (network, exchanges) =
            Self::setup_exchanges(&world, &mut settings, &view, node_label, switch_label);
        let links = Links::new(&view, plan.peers.clone(), shm, net);
        let hier = HierarchicalPath {
            network_view: view.over_network(&network),
            scan_view: crate::scan::network_in_order(&view, &network),
            view,
            settings,
            links,
            scratch: Scratch::default(),
            exchanges,
            lane,
            subtrees: None,
            scan_in_order: None,
            reduced: Vec::new(),
            gathered: Vec::new(),
        };
        let local = Some((plan.local_rank, plan.local_size));
        let mut topo = Topo::new(world, Some(Box::new(hier)), None, plan.node, local);
        topo.lineage = key.map(|k| (k, reuse::id(k, instance)));
        Ok(topo)
    }

    pub(super) fn new(
        world: SimpleCommunicator,
        hier: Option<Box<HierarchicalPath>>,
        fallback: Option<Fallback>,
        node: String,
        local: Option<(u32, u32)>,
    ) -> Topo {
        let thread = hier.as_ref().map(|h| {
            let s = &h.settings;
            // `--spin 0` says ranks outnumber cores: a progress thread would only compete
            // with them, and there it stalls collectives for tens of milliseconds (the
            // lock holder starves behind yielding waiters; docs/runtime.md).
            let ignored = (s.spin == 0).then_some(
                "with --spin 0 (ranks outnumber cores, so the thread would only compete with them)",
            );
            static WARNED: std::sync::atomic::AtomicBool =
                std::sync::atomic::AtomicBool::new(false);
            if let Some(why) = ignored
                && s.progress_thread
                // World's rank 0: every context has a rank 0 of its own.
                && crate::ffi::comm::world_rank_size().0 == 0
                && !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed)
            {
                eprintln!("topo-run: warning: --progress-thread is ignored {why}");
            }
            s.progress_thread && ignored.is_none()
        });
        // Under MPI_THREAD_MULTIPLE the PMPI library moves contexts between threads that
        // run at once (the program's), so the state's lock must be a mutex then too.
        let threaded = thread == Some(true);
        let state = ContextState::new(hier, world.rank(), node.clone());
        let core = context::shared(state, threaded || crate::ffi::comm::thread_multiple());
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
            lineage: None,
            earlier: 0,
            _not_send: PhantomData,
        }
    }

    /// Checks that every rank passed the same settings pairs: a hash of rank 0's against
    /// everyone's.
    pub(super) fn agree_on_settings(
        world: &SimpleCommunicator,
        pairs: &[(String, String)],
    ) -> Result<()> {
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

    /// Reads this rank's plan and checks it against MPI: against `world`'s rank and size,
    /// or with `restricted` (a context over any communicator) against `MPI_COMM_WORLD`'s.
    pub(super) fn read_plan(
        world: &SimpleCommunicator,
        text: &str,
        restricted: bool,
    ) -> Result<(RankPlan, Settings)> {
        let plan = RankPlan::clone(&*decode_plan(text)?);
        let (rank, size) = if restricted {
            crate::ffi::comm::world_rank_size()
        } else {
            (world.rank() as u32, world.size() as u32)
        };
        for (what, p, m) in [("rank", plan.rank, rank), ("size", plan.size, size)] {
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
    pub(super) fn setup_shm(
        world: &SimpleCommunicator,
        plan: &RankPlan,
        s: &Settings,
        instance: u32,
    ) -> std::result::Result<Option<ShmTransport>, String> {
        let alone = plan.local_size == 1;
        let path = segment_path(plan, instance);
        let layout = node_layout(plan, s);
        let leader = plan.local_rank == 0;
        let fail_all = |e: Option<&Error>| fail_all(world, plan, e);
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

    /// Sets up the node's lanes (`transport::shm::lanes`) beside world's segment: the
    /// number the ranks ask for (`TOPO_RUN_LANES`, the smallest over the job), created by
    /// each node leader, attached and reserved by the others, and their names removed at
    /// once. Collective; every rank gets a pool, or none (rank 0 says why). A job without
    /// lanes still runs: contexts beyond the cap then hand their collectives to MPI.
    pub(super) fn setup_lanes(
        world: &SimpleCommunicator,
        plan: &RankPlan,
        s: &Settings,
    ) -> Option<Pool> {
        let wanted = lanes::lanes_wanted(std::env::var(lanes::LANES_ENV).ok().as_deref());
        let n = pmpi_allreduce_i32(world, wanted as i32, SystemOperation::min().as_raw());
        if n <= 0 {
            return None;
        }
        let alone = plan.local_size == 1;
        let leader = plan.local_rank == 0;
        let prefix = segment_path(plan, 0);
        let layout = node_layout(plan, s);
        let warn = |msg: String| {
            if world.rank() == 0 {
                eprintln!(
                    "topo-run: warning: the node's lanes could not be set up ({msg}); \
                     communicators beyond {} use MPI's collectives",
                    topo_hierarchy::settings::MAX_COMMS_ENV
                );
            }
        };
        let created = match (alone, leader) {
            (false, true) => Pool::create(&prefix, layout, plan.node_plan, n as usize).map(Some),
            _ => Ok(None),
        };
        if let Err(msg) = fail_all(world, plan, created.as_ref().err()) {
            if let Ok(Some(p)) = &created {
                let _ = p.unlink();
            }
            warn(msg);
            return None;
        }
        let mut pool = created.ok().flatten();
        let attached = (|| {
            if alone {
                return Ok(());
            }
            let p = match pool.take() {
                Some(p) => p,
                None => Pool::attach(&prefix, layout, plan.node_plan)?,
            };
            let reserved = p.reserve(plan.local_rank as usize);
            pool = Some(p);
            reserved
        })();
        let outcome = fail_all(world, plan, attached.as_ref().err());
        // Everyone has attached (or the pool is given up): the names go now, so a crash
        // leaves nothing behind.
        if leader
            && let Some(p) = &pool
            && let Err(e) = p.unlink()
        {
            eprintln!("topo-run: warning: rank {}: {e}", plan.rank);
        }
        match outcome {
            Ok(()) => pool,
            Err(msg) => {
                warn(msg);
                None
            }
        }
    }

    /// A context's part in its node's lanes (collective over `world`, the context's
    /// communicator): its node leader claims a record on the board, and the members learn
    /// it and each other's PIDs. `None` where the rank is alone on its node, or where the
    /// node has no pool or no free record: the node's steps then go over MPI.
    pub(super) fn setup_lane(
        world: &SimpleCommunicator,
        plan: &RankPlan,
        s: &Settings,
    ) -> Option<Lane> {
        let lanes = crate::lane::current().filter(|l| l.pool.lanes() > 0);
        let members = plan.local_size as usize;
        let leader = plan.local_rank == 0;
        let record = match &lanes {
            Some(l) if leader && members > 1 => l.pool.claim_record(members),
            _ => None,
        };
        let mine = [
            record.map_or(u32::MAX, |r| r as u32),
            std::process::id(),
            u32::from(lanes.is_some()),
        ];
        let all = pmpi_allgather_u32(world, &mine);
        let row = |p: u32| &all[p as usize * 3..p as usize * 3 + 3];
        let every = plan.peers.iter().all(|&p| row(p)[2] == 1);
        let chosen = plan.peers.first().map_or(u32::MAX, |&p| row(p)[0]);
        if !every || chosen == u32::MAX || members < 2 {
            // A record nobody else will use goes back.
            if let (Some(l), Some(r)) = (&lanes, record) {
                l.pool.abandon_record(r);
            }
            return None;
        }
        let pids = plan.peers.iter().map(|&p| row(p)[1] as i32).collect();
        let single_copy = (s.single_copy > 0).then_some(s.single_copy as usize);
        Some(Lane::new(
            lanes?,
            chosen as usize,
            plan.local_rank as usize,
            plan.peers.clone(),
            pids,
            plan.near_peers(),
            single_copy,
            plan.node.clone(),
            s.spin,
        ))
    }

    /// Turns on single-copy transfers if the settings ask for them and every rank can
    /// read its local peers' memory (agreed over MPI, so all ranks decide alike); else
    /// rank 0 warns once and large messages go through the queues.
    pub(super) fn setup_single_copy(
        world: &SimpleCommunicator,
        s: &Settings,
        shm: Option<&mut ShmTransport>,
    ) {
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
}
