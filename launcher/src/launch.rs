//! `topo-run [OPTIONS] -- PROGRAM [ARGS]`: discover, check binding, plan, export, exec.

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result};
use topo_hierarchy::{Digest, Job, LevelFilter, LevelName, LocalityString, PLAN_ENV};

use crate::cli::{Discovery, LaunchArgs, RuntimeArgs};
use crate::cpus::{self, CpuMask, NodeTopology, SlurmBinding};
use crate::discover::{self, DiscoveryError, Env, Placement, ProcessEnv};
use crate::env_limit::{TooLarge, check_plan_size};
use crate::input::read_map;
use crate::leftover_shm;
use crate::preload;
use crate::show_cmd;

/// A task is not bound to CPUs (exit code 10).
#[derive(Debug, thiserror::Error)]
#[error(
    "rank {rank} on node {node} is not bound to CPUs ({detail}); topo-run needs each task \
     bound to its own cores to find its place in the node. Fix: srun --cpu-bind=cores \
     (or threads; mpirun: --bind-to core), or pass --allow-unbound to run without intra-node levels"
)]
pub struct Unbound {
    pub rank: u32,
    pub node: String,
    pub detail: String,
}

/// The kernel's CPU mask of this task differs from what Slurm reports (exit code 12).
#[derive(Debug, thiserror::Error)]
#[error(
    "rank {rank} on node {node} runs on CPUs {actual} (sched_getaffinity), but Slurm's \
     SLURM_CPU_BIND_LIST gives local task {local} the CPUs {expected}; something changed the \
     binding after Slurm set it (a wrapper calling taskset or numactl?). Start topo-run \
     directly under srun, or pass --allow-unbound to ignore the binding"
)]
pub struct MaskMismatch {
    pub rank: u32,
    pub node: String,
    pub local: u32,
    pub actual: CpuMask,
    pub expected: CpuMask,
}

/// The program to run cannot be started (exit codes 126 and 127, as in a shell).
#[derive(Debug, thiserror::Error)]
#[error("{program}: {reason}")]
pub struct ExecError {
    pub program: String,
    pub reason: String,
    pub not_found: bool,
}

/// A request the launcher cannot serve (exit code 7, like other level problems).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct LevelsUnsupported(String);

struct Verbose {
    on: bool,
    rank: Option<u32>,
    start: Instant,
}

impl Verbose {
    fn say(&self, msg: impl AsRef<str>) {
        if self.on {
            let who = self.rank.map_or_else(|| "?".to_string(), |r| r.to_string());
            eprintln!(
                "topo-run[{who}] {:>7.2} ms: {}",
                self.start.elapsed().as_secs_f64() * 1e3,
                msg.as_ref()
            );
        }
    }
}

/// Runs the launcher. Returns only on error: on success the process becomes the program.
pub fn run(args: &LaunchArgs) -> Result<()> {
    let env = ProcessEnv;
    let mut v = Verbose {
        on: args.job.verbose,
        rank: None,
        start: Instant::now(),
    };
    let settings = args.job.runtime.settings()?;
    let filter = match &args.job.levels {
        Some(list) => LevelFilter::parse(list)?,
        None => LevelFilter::all(),
    };

    // 1. Where every rank runs. With `node` switched off the tasks exchange localities
    // through PMIx, so they need the client.
    let pmix = discover::pmix_available(&env);
    let fast = match args.job.discovery {
        Discovery::Pmix => None,
        Discovery::Slurm => Some(discover::from_slurm_env(&env)),
        Discovery::Auto if !pmix => None,
        Discovery::Auto if !filter.keeps(LevelName::Node) => None,
        Discovery::Auto => {
            discover::slurm_step_of_pmix(&env).then(|| discover::from_slurm_env(&env))
        }
    };
    let (placement, pmix_client) = match fast {
        Some(Ok(p)) => (p, None),
        Some(Err(e)) if args.job.discovery == Discovery::Slurm => return Err(e.into()),
        fast if pmix => {
            if let Some(Err(e)) = fast {
                v.say(format!(
                    "Slurm's environment is not exact ({e}); asking PMIx"
                ));
            }
            let (p, c) = discover::from_pmix()?;
            (p, Some(c))
        }
        _ => (discover::from_slurm_env(&env)?, None),
    };
    v.rank = Some(placement.rank);
    let local_ranks = placement.local_ranks();
    let local = local_ranks
        .iter()
        .position(|&r| r == placement.rank)
        .expect("a rank is on its own node");
    v.say(format!(
        "discovered through {}: rank {} of {}, node {} with {} local rank(s), {} node(s)",
        placement.source.name(),
        placement.rank,
        placement.size(),
        placement.node_name(),
        local_ranks.len(),
        placement.nodes.len()
    ));
    // 2. Where this node's ranks sit inside the node.
    let localities = local_localities(
        &placement,
        local_ranks.len(),
        local,
        args.job.allow_unbound,
        &env,
        &v,
    )?;

    // 3. The network map and the levels.
    let map_path = network_map_path(args.job.network_map.as_deref(), &env);
    let map = match &map_path {
        None => None,
        Some(path) => Some(read_map(path)?),
    };
    v.say(match &map_path {
        Some(p) => format!("network map {}", p.display()),
        None => "no network map: no switch levels".to_string(),
    });
    // With `node` switched off, the groups above the node hold the leaders of other
    // nodes' intra-node groups, so every node's localities are needed. Slurm shares none;
    // the tasks exchange them through PMIx.
    let all_localities = if !filter.keeps(LevelName::Node) && placement.nodes.len() > 1 {
        let Some(client) = &pmix_client else {
            return Err(LevelsUnsupported(format!(
                "--levels {:?} switches off `node` in a job on {} nodes; the groups above \
                 the node then need every node's CPU binding, which topo-run exchanges \
                 through PMIx. Run with srun --mpi=pmix, or keep `node` in the list",
                args.job.levels.as_deref().unwrap_or(""),
                placement.nodes.len()
            ))
            .into());
        };
        let all = exchange_localities(client, placement.size(), &localities[local])?;
        v.say("localities of all ranks exchanged through PMIx");
        Some(all)
    } else {
        None
    };
    // PMIx is finalized before exec.
    drop(pmix_client);

    // 4. The plan: the same pure code as `topo-run plan`.
    let job = build_job(
        &placement,
        &local_ranks,
        &localities,
        all_localities.as_deref(),
    )?;
    let hierarchy = topo_hierarchy::build(&job, map.as_ref(), &filter)?;
    let digest = Digest::of_job(
        &job,
        map.as_ref(),
        &filter,
        &RuntimeArgs::digest_text(&settings),
    );
    let shm = discover::segment_name(&placement.launch_id, placement.node_name());
    let plan = hierarchy.rank_plan(&job, placement.rank, &shm, digest, settings);
    let encoded = plan.encode();
    check_plan_size(placement.rank, &encoded)?;
    v.say(format!("plan: {} bytes", encoded.len()));
    if let Some(format) = args.show {
        let mut err = io::stderr().lock();
        let _ = writeln!(err, "{}", show_cmd::line(&plan, format));
    }

    // Shared memory that jobs killed during their setup left on this node: the node's
    // first task removes what no live process uses.
    if local == 0 {
        reclaim_leftovers(placement.rank, placement.node_name(), &v);
    }

    // 5. The PMPI library, for unmodified MPI programs.
    let mode = preload::mode(
        args.preload,
        args.no_preload,
        std::env::var(preload::MODE_ENV).ok().as_deref(),
    )?;
    let exe = std::env::current_exe().ok();
    let decision = preload::decide(
        mode,
        &args.program[0],
        std::env::var_os(preload::LIB_ENV).as_deref(),
        exe.as_deref(),
        std::env::var_os("PATH").as_deref(),
    )?;
    let ld_preload = match decision {
        preload::Decision::Preload { lib, why } => {
            v.say(format!("preloading {} ({why})", lib.display()));
            Some(preload::ld_preload(
                &lib,
                std::env::var_os("LD_PRELOAD").as_deref(),
            ))
        }
        preload::Decision::Skip { why, warn } => {
            if warn && placement.rank == 0 {
                eprintln!("topo-run: warning: not preloading the PMPI library: {why}");
            }
            if args.profile.is_some() && placement.rank == 0 {
                eprintln!(
                    "topo-run: warning: no profile: the PMPI library that records it is not \
                     preloaded ({why}); --preload loads it"
                );
            }
            v.say(format!("not preloading the PMPI library: {why}"));
            None
        }
    };

    // 6. Export and exec.
    let mut extra: Vec<(&str, OsString)> = Vec::new();
    if let Some(path) = &args.profile {
        // The program may change its directory before MPI_Finalize.
        let path = std::path::absolute(path).unwrap_or_else(|_| path.clone());
        extra.push((topo_profile::PROFILE_ENV, path.into_os_string()));
        if args.job.verbose {
            extra.push(("TOPO_RUN_VERBOSE", "1".into()));
        }
    }
    if args.native {
        extra.push((topo_profile::NATIVE_ENV, "1".into()));
    }
    exec(&args.program, &encoded, ld_preload, &extra)
}

/// The locality of each of the node's `n_local` ranks (ascending rank order), `None` for
/// unbound ranks. This task is local rank `local`.
fn local_localities(
    placement: &Placement,
    n_local: usize,
    local: usize,
    allow_unbound: bool,
    env: &dyn Env,
    v: &Verbose,
) -> Result<Vec<Option<LocalityString>>> {
    let rank = placement.rank;
    let node = placement.node_name().to_string();
    let local = local as u32;

    // Open MPI's mpirun hands out locality strings; unbound ranks have none.
    if let Some(strings) = &placement.local_localities {
        let mut out = Vec::with_capacity(strings.len());
        for s in strings {
            out.push(match s {
                Some(s) => Some(LocalityString::parse(s).context("PMIX_LOCALITY_STRING")?),
                None => None,
            });
        }
        if out.iter().any(Option::is_none) {
            return unbound_or_allowed(
                placement,
                allow_unbound,
                "the launcher reports no locality for some local ranks".into(),
                n_local,
            );
        }
        v.say("localities from PMIx");
        return Ok(out);
    }

    let topology = NodeTopology::load().map_err(|e| {
        DiscoveryError::Inconsistent(format!("cannot load the node's hwloc topology: {e}"))
    })?;
    v.say(format!("hwloc topology: {}", topology.summary()));
    let own = cpus::own_mask().context("sched_getaffinity")?;
    let binding = SlurmBinding::parse(
        env.var("SLURM_CPU_BIND_TYPE").as_deref(),
        env.var("SLURM_CPU_BIND_LIST").as_deref(),
    );
    let binding = match binding {
        Ok(b) => b,
        Err(e) if allow_unbound => {
            warn_once(
                placement,
                &format!("{e}; continuing without intra-node levels"),
            );
            return Ok(vec![None; n_local]);
        }
        Err(e) => return Err(DiscoveryError::SlurmEnv(e.to_string()).into()),
    };
    // A task alone on its node that something other than Slurm bound (a wrapper calling
    // taskset or numactl, with or without --cpu-bind): no neighbour plans from its CPUs,
    // so its own give its locality, whatever Slurm says.
    let slurm = binding.mask_of(local);
    if n_local == 1
        && slurm != Some(&own)
        && !topology.is_unbound(&own)
        && let Some(loc) = topology.locality(&own)
    {
        let says = slurm
            .map(|m| format!(" (Slurm says {m})"))
            .unwrap_or_default();
        v.say(format!(
            "alone on the node, bound outside Slurm to CPUs {own}{says}: {loc}"
        ));
        return Ok(vec![Some(loc)]);
    }
    match binding {
        SlurmBinding::None => {
            if topology.is_unbound(&own) {
                unbound_or_allowed(
                    placement,
                    allow_unbound,
                    format!(
                        "its CPUs {own} are the whole node, SLURM_CPU_BIND_TYPE={}",
                        env.var("SLURM_CPU_BIND_TYPE")
                            .unwrap_or_else(|| "(unset)".into())
                    ),
                    n_local,
                )
            } else if allow_unbound {
                warn_once(
                    placement,
                    "the other tasks' CPU binding is unknown (SLURM_CPU_BIND_LIST is not \
                     set); continuing without intra-node levels",
                );
                Ok(vec![None; n_local])
            } else {
                Err(DiscoveryError::SlurmEnv(format!(
                    "rank {rank} on node {node} is bound to CPUs {own}, but Slurm did not say \
                     how the other tasks are bound (SLURM_CPU_BIND_LIST is not set); bind \
                     with srun --cpu-bind=cores, or pass --allow-unbound"
                ))
                .into())
            }
        }
        SlurmBinding::Masks(_) => {
            let expected = binding.mask_of(local).cloned().unwrap_or_default();
            if expected != own {
                let err = MaskMismatch {
                    rank,
                    node,
                    local,
                    actual: own,
                    expected,
                };
                if !allow_unbound {
                    return Err(err.into());
                }
                // Task-specific, so every affected task says it.
                eprintln!("topo-run: warning: {err}; continuing without intra-node levels");
                return Ok(vec![None; n_local]);
            }
            let masks: Vec<&CpuMask> = (0..n_local as u32)
                .map(|l| binding.mask_of(l).expect("masks are never empty"))
                .collect();
            if let Some(l) = masks.iter().position(|m| topology.is_unbound(m)) {
                return unbound_or_allowed(
                    placement,
                    allow_unbound,
                    format!(
                        "local task {l} may run on CPUs {}, the whole node",
                        masks[l]
                    ),
                    n_local,
                );
            }
            let mut out = Vec::with_capacity(masks.len());
            for (l, m) in masks.iter().enumerate() {
                let loc = topology.locality(m).ok_or_else(|| {
                    DiscoveryError::SlurmEnv(format!(
                        "SLURM_CPU_BIND_LIST gives local task {l} the CPUs {m}, none of which \
                         this node has ({})",
                        topology.all_cpus()
                    ))
                })?;
                out.push(Some(loc));
            }
            v.say(format!(
                "localities from SLURM_CPU_BIND_LIST and hwloc; own CPUs {own}: {}",
                out[local as usize]
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            ));
            Ok(out)
        }
    }
}

fn unbound_or_allowed(
    placement: &Placement,
    allow_unbound: bool,
    detail: String,
    n: usize,
) -> Result<Vec<Option<LocalityString>>> {
    if allow_unbound {
        warn_once(
            placement,
            &format!(
                "tasks are not bound to CPUs ({detail}); continuing without intra-node levels"
            ),
        );
        Ok(vec![None; n])
    } else {
        Err(Unbound {
            rank: placement.rank,
            node: placement.node_name().to_string(),
            detail,
        }
        .into())
    }
}

/// Warnings about the whole step come from rank 0 only, not from every task.
/// Removes the segments that jobs which died during their setup left in this node's
/// shared-memory directory ([`leftover_shm`]), saying so on stderr when it removed any.
fn reclaim_leftovers(rank: u32, node: &str, v: &Verbose) {
    let dir = leftover_shm::shm_dir();
    let (removed, failed) = leftover_shm::remove(&dir);
    if !removed.is_empty() {
        let bytes: u64 = removed.iter().map(|l| l.bytes).sum();
        eprintln!(
            "topo-run: rank {rank} on {node}: removed {} shared-memory file(s) ({:.1} MiB) that \
             jobs which died left in {}",
            removed.len(),
            bytes as f64 / f64::from(1u32 << 20),
            dir.display()
        );
    }
    for (l, why) in &failed {
        v.say(format!("could not remove {}: {why}", l.path.display()));
    }
    v.say(format!(
        "{}: {} left-over segment(s) removed",
        dir.display(),
        removed.len()
    ));
}

fn warn_once(placement: &Placement, msg: &str) {
    if placement.rank == 0 {
        eprintln!("topo-run: warning: {msg}");
    }
}

/// `--network-map`/`TOPO_RUN_NETWORK_MAP`, else Slurm's map beside `$SLURM_CONF`.
fn network_map_path(flag: Option<&Path>, env: &dyn Env) -> Option<PathBuf> {
    if let Some(p) = flag {
        return Some(p.to_path_buf());
    }
    slurm_map_beside(Path::new(&env.var("SLURM_CONF")?))
}

/// Slurm's switch tree beside its `slurm.conf`: `topology.conf`, else `topology.yaml`
/// (Slurm 23.11 and later).
pub fn slurm_map_beside(slurm_conf: &Path) -> Option<PathBuf> {
    let dir = slurm_conf.parent()?;
    ["topology.conf", "topology.yaml"]
        .map(|name| dir.join(name))
        .into_iter()
        .find(|p| p.is_file())
}

/// How long the locality exchange waits for the other tasks.
const FENCE_TIMEOUT_S: i32 = 60;

/// The PMIx key under which each task publishes its locality ("" when unbound).
const LOCALITY_KEY: &std::ffi::CStr = c"topo-run.locality";

/// Publishes this rank's locality (`mine`) and collects every rank's of the job's `size`
/// (`PMIx_Put`, `PMIx_Fence`).
fn exchange_localities(
    client: &crate::pmix::Client,
    size: u32,
    mine: &Option<LocalityString>,
) -> Result<Vec<Option<LocalityString>>> {
    let mine = mine.as_ref().map(ToString::to_string).unwrap_or_default();
    client.put_global(LOCALITY_KEY, &mine)?;
    client.fence_collect(FENCE_TIMEOUT_S)?;
    let mut all = Vec::with_capacity(size as usize);
    for r in 0..size {
        let text = client
            .get_string(crate::pmix::Who::Rank(r), LOCALITY_KEY)?
            .ok_or_else(|| {
                DiscoveryError::Inconsistent(format!("rank {r} published no locality"))
            })?;
        all.push(if text.is_empty() {
            None
        } else {
            Some(
                LocalityString::parse(&text)
                    .with_context(|| format!("locality of rank {r} from PMIx"))?,
            )
        });
    }
    Ok(all)
}

/// The job as the pure model sees it: every rank's node, and the localities of this
/// node's ranks, or of all ranks when they were exchanged (`all`). Other nodes' bindings
/// do not affect this rank's plan while the `node` level is kept, because the groups
/// above the node then hold the lowest rank of each node.
fn build_job(
    placement: &Placement,
    local_ranks: &[u32],
    localities: &[Option<LocalityString>],
    all: Option<&[Option<LocalityString>]>,
) -> Result<Job> {
    let mut job = Job::new();
    let ids: Vec<u32> = placement
        .nodes
        .iter()
        .map(|n| job.intern_node(n))
        .collect::<topo_hierarchy::Result<_>>()?;
    let mut next_local = 0;
    for r in 0..placement.size() {
        let loc = match all {
            Some(all) => all[r as usize].clone(),
            None if local_ranks.get(next_local) == Some(&r) => {
                next_local += 1;
                localities[next_local - 1].clone()
            }
            None => None,
        };
        let loc = loc.map(|l| job.intern_locality(l));
        job.push_interned(ids[placement.rank_node[r as usize] as usize], loc)?;
    }
    Ok(job)
}

/// Replaces this process with the program, with the plan in its environment.
fn exec(
    program: &[OsString],
    plan: &str,
    ld_preload: Option<OsString>,
    extra: &[(&str, OsString)],
) -> Result<()> {
    let (prog, args) = program
        .split_first()
        .expect("the command line requires a program");
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .env(PLAN_ENV, plan)
        // Open MPI's MPI_Init fails after another PMIx client ran in this process image
        // unless the shared-memory data store is bypassed.
        .env("PMIX_MCA_gds", "hash");
    if let Some(p) = ld_preload {
        cmd.env("LD_PRELOAD", p);
    }
    cmd.envs(extra.iter().map(|(k, v)| (k, v)));
    let err = cmd.exec();
    let name = prog.to_string_lossy().into_owned();
    if err.raw_os_error() == Some(nix::errno::Errno::E2BIG as i32) {
        return Err(TooLarge(format!(
            "{name}: the arguments and environment are too large for exec (E2BIG): the plan \
             takes {} bytes; shorten the environment or the command line",
            plan.len()
        ))
        .into());
    }
    Err(match err.kind() {
        io::ErrorKind::NotFound => ExecError {
            reason: if name.contains('/') {
                "No such file or directory".into()
            } else {
                "command not found".into()
            },
            program: name,
            not_found: true,
        },
        _ => ExecError {
            program: name,
            reason: err.to_string(),
            not_found: false,
        },
    }
    .into())
}
