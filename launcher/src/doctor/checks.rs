//! The checks of `topo-run doctor`, one function each, and the parsers of what Slurm's
//! tools print (pure, unit-tested).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use topo_hierarchy::Settings;
use topo_hierarchy::settings::{MAX_COMMS_ENV, max_comms};

use super::{Finding, Scope, Status};
use crate::cpus::NodeTopology;
use crate::leftover_shm;

/// How long any one external command (srun, scontrol, sinfo, ldconfig) may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs a command with a time limit; its stdout, or a message naming what went wrong.
pub fn output_of(program: &str, args: &[&str]) -> Result<String, String> {
    let shown = format!("{program} {}", args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("`{shown}` cannot run: {e}"))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() > COMMAND_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`{shown}` did not answer within {} s",
                    COMMAND_TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("`{shown}`: {e}")),
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("`{shown}`: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!("`{shown}` failed ({}): {first}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `scontrol show config`: `Key = Value` lines.
pub fn parse_config(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            let k = k.trim();
            (!k.is_empty() && !k.contains(' ')).then(|| (k.to_string(), v.trim().to_string()))
        })
        .collect()
}

/// `srun --mpi=list`: the plugin names, and the PMIx plugin versions.
pub fn parse_mpi_list(text: &str) -> (Vec<String>, Vec<String>) {
    let mut plugins = Vec::new();
    let mut versions = Vec::new();
    for line in text.lines() {
        if let Some(v) = line.split_once("versions available:").map(|(_, v)| v) {
            versions.extend(
                v.split([',', ' '])
                    .filter(|s| !s.is_empty())
                    .map(String::from),
            );
        } else if line.starts_with(['\t', ' ']) && !line.trim().is_empty() {
            plugins.push(line.trim().to_string());
        }
    }
    (plugins, versions)
}

/// Slurm's version and MPI plugins.
pub fn slurm(config: &Option<BTreeMap<String, String>>) -> Finding {
    let version = match output_of("srun", &["--version"]) {
        Ok(v) => v.trim().to_string(),
        Err(e) => {
            return Finding::new("slurm", Scope::Job, Status::Warn, e).fix(
                "topo-run is started by srun (or mpirun): run doctor where jobs are submitted, \
                 with Slurm's commands on PATH",
            );
        }
    };
    let (plugins, versions) = match output_of("srun", &["--mpi=list"]) {
        Ok(text) => parse_mpi_list(&text),
        Err(e) => {
            return Finding::new("slurm", Scope::Job, Status::Warn, format!("{version}; {e}"))
                .fix("check that slurm.conf is readable ($SLURM_CONF)");
        }
    };
    let default = config
        .as_ref()
        .and_then(|c| c.get("MpiDefault").cloned())
        .unwrap_or_else(|| "unknown".into());
    let text = format!(
        "{version}; MPI plugins: {}{}; MpiDefault={default}",
        plugins.join(", "),
        if versions.is_empty() {
            String::new()
        } else {
            format!(" ({})", versions.join(", "))
        }
    );
    if plugins.iter().any(|p| p == "pmix") {
        Finding::new("slurm", Scope::Job, Status::Ok, text)
    } else {
        Finding::new(
            "slurm",
            Scope::Job,
            Status::Warn,
            format!("{text}; no pmix plugin"),
        )
        .fix(
            "install Slurm's PMIx plugin (Debian: slurm-wlm's mpi_pmix, built with PMIx); \
             without it use srun --mpi=pmi2 or none, and topo-run reads the placement from \
             Slurm's environment",
        )
    }
}

/// Whether Slurm binds tasks, from its `TaskPlugin` and `TaskPluginParam`.
pub fn binding_policy(config: &Option<BTreeMap<String, String>>) -> Finding {
    let Some(config) = config else {
        return Finding::new(
            "binding",
            Scope::Job,
            Status::Warn,
            "Slurm's configuration cannot be read (scontrol show config), so the binding \
             policy is unknown",
        )
        .fix("run doctor where `scontrol show config` works, or inside an allocation");
    };
    let plugin = config.get("TaskPlugin").cloned().unwrap_or_default();
    let param = config.get("TaskPluginParam").cloned().unwrap_or_default();
    let text = format!("TaskPlugin={plugin}, TaskPluginParam={param}");
    if !plugin.contains("affinity") && !plugin.contains("cgroup") {
        return Finding::new(
            "binding",
            Scope::Job,
            Status::Fail,
            format!("{text}: Slurm cannot bind tasks, and topo-run stops unbound tasks (exit 10)"),
        )
        .fix(
            "set TaskPlugin=task/affinity,task/cgroup in slurm.conf (users can meanwhile \
             run with topo-run --allow-unbound, without intra-node levels)",
        );
    }
    if !plugin.contains("affinity") {
        return Finding::new(
            "binding",
            Scope::Job,
            Status::Warn,
            format!("{text}: task/cgroup confines jobs to their cores but binds no task"),
        )
        .fix("add task/affinity: TaskPlugin=task/affinity,task/cgroup");
    }
    if param.to_ascii_lowercase().split(',').any(|p| p == "none") {
        return Finding::new(
            "binding",
            Scope::Job,
            Status::Warn,
            format!("{text}: tasks are not bound unless srun asks"),
        )
        .fix(
            "job scripts need srun --cpu-bind=cores, or set TaskPluginParam=Cores in \
             slurm.conf",
        );
    }
    Finding::new(
        "binding",
        Scope::Job,
        Status::Ok,
        format!("{text}: tasks are bound by default"),
    )
}

/// Where Slurm's configuration is: `$SLURM_CONF`, else what scontrol reports, else the
/// usual place.
pub fn slurm_conf(config: &Option<BTreeMap<String, String>>) -> PathBuf {
    std::env::var_os("SLURM_CONF")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| config.as_ref()?.get("SLURM_CONF").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/etc/slurm/slurm.conf"))
}

/// The network map (given, or Slurm's beside slurm.conf): found, valid, and naming every
/// node of the cluster (`nodes`, when sinfo could list them).
pub fn network_map(
    given: Option<&Path>,
    slurm_conf: &Path,
    nodes: &Result<Vec<String>, String>,
) -> Finding {
    let path = match given {
        Some(p) => p.to_path_buf(),
        None => match crate::launch::slurm_map_beside(slurm_conf) {
            Some(p) => p,
            None => {
                let dir = slurm_conf.parent().unwrap_or(Path::new("/"));
                return Finding::new(
                    "network map",
                    Scope::Job,
                    Status::Warn,
                    format!(
                        "no topology.conf or topology.yaml in {}: jobs get no switch levels",
                        dir.display()
                    ),
                )
                .fix(
                    "describe the switches in topology.conf beside slurm.conf \
                     (TopologyPlugin=topology/tree), or give jobs --network-map FILE",
                );
            }
        },
    };
    let map = match crate::input::read_map(&path) {
        Ok(m) => m,
        Err(e) => {
            return Finding::new(
                "network map",
                Scope::Job,
                Status::Fail,
                format!("{}: {e:#}; every job that uses it stops", path.display()),
            )
            .fix("correct the file (docs/network-map.md); the message names the line or switch");
        }
    };
    let head = format!("{}: {} switches", path.display(), map.switch_count());
    match nodes {
        Ok(nodes) => {
            let missing: Vec<&String> = nodes.iter().filter(|n| map.leaf_of(n).is_none()).collect();
            if missing.is_empty() {
                Finding::new(
                    "network map",
                    Scope::Job,
                    Status::Ok,
                    format!("{head}; all {} nodes of the cluster are in it", nodes.len()),
                )
            } else {
                let shown: Vec<&str> = missing.iter().take(8).map(|s| s.as_str()).collect();
                Finding::new(
                    "network map",
                    Scope::Job,
                    Status::Fail,
                    format!(
                        "{head}; {} of the cluster's {} nodes are missing from it ({}{}): jobs \
                         on them stop (exit 6)",
                        missing.len(),
                        nodes.len(),
                        shown.join(", "),
                        if missing.len() > shown.len() {
                            ", ..."
                        } else {
                            ""
                        }
                    ),
                )
                .fix("add those nodes under their leaf switch")
            }
        }
        Err(e) => Finding::new(
            "network map",
            Scope::Job,
            Status::Warn,
            format!("{head}; the cluster's nodes cannot be listed to compare ({e})"),
        )
        .fix("run doctor where sinfo works"),
    }
}

/// The cluster's node names (`sinfo -h -N -o %N`), each once.
pub fn cluster_nodes() -> Result<Vec<String>, String> {
    let text = output_of("sinfo", &["-h", "-N", "-o", "%N"])?;
    let mut nodes: Vec<String> = text.lines().map(|l| l.trim().to_string()).collect();
    nodes.retain(|n| !n.is_empty());
    nodes.sort();
    nodes.dedup();
    Ok(nodes)
}

/// The PMIx library topo-run links, against Slurm's PMIx plugin.
pub fn pmix() -> Finding {
    let version = crate::pmix::library_version();
    Finding::new(
        "pmix",
        Scope::Node,
        Status::Ok,
        format!("the PMIx library topo-run uses: {version}"),
    )
}

/// The MPI libraries of the linker cache (`ldconfig -p`), by ABI.
pub fn parse_ldconfig(text: &str) -> Vec<(String, String)> {
    let mut found: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        let Some((name, path)) = line.split_once(" => ") else {
            continue;
        };
        let soname = name.split_whitespace().next().unwrap_or("");
        if matches!(soname, "libmpi.so.40" | "libmpi.so.12" | "libmpich.so.12")
            && !found.iter().any(|(s, _)| s == soname)
        {
            found.push((soname.to_string(), path.trim().to_string()));
        }
    }
    // MPICH installs both names for its one library: keep the ABI's own.
    if found.iter().any(|(s, _)| s == "libmpi.so.12") {
        found.retain(|(s, _)| s != "libmpich.so.12");
    }
    found
}

/// Which MPI an ABI's soname stands for.
fn abi_name(soname: &str) -> &'static str {
    match soname {
        "libmpi.so.40" => "Open MPI 4/5",
        _ => "MPICH ABI (MPICH, Intel MPI, MVAPICH, Cray MPICH)",
    }
}

/// The MPI libraries present and, for each, whether a PMPI library serves it.
pub fn mpi_and_preload() -> Vec<Finding> {
    let cache = output_of("ldconfig", &["-p"]).or_else(|_| output_of("/sbin/ldconfig", &["-p"]));
    let mpis = match &cache {
        Ok(text) => parse_ldconfig(text),
        Err(_) => Vec::new(),
    };
    let mut out = Vec::new();
    out.push(if mpis.is_empty() {
        Finding::new(
            "mpi",
            Scope::Node,
            Status::Warn,
            match cache {
                Ok(_) => "no MPI library (libmpi.so.40, libmpi.so.12) in the linker cache".into(),
                Err(e) => e,
            },
        )
        .fix("install Open MPI (Debian: openmpi-bin libopenmpi3) on every node")
    } else {
        let list: Vec<String> = mpis
            .iter()
            .map(|(s, p)| format!("{} ({s} at {p})", abi_name(s)))
            .collect();
        Finding::new("mpi", Scope::Node, Status::Ok, list.join("; "))
    });

    let lib_env = std::env::var_os(crate::preload::LIB_ENV);
    let exe = std::env::current_exe().ok();
    let looked = crate::preload::candidates(lib_env.as_deref(), exe.as_deref());
    let lib = looked.iter().find(|p| p.is_file());
    let served = lib.and_then(|l| crate::preload::built_against(l));
    match (lib, &served) {
        (None, _) => out.push(
            Finding::new(
                "pmpi library",
                Scope::Node,
                Status::Warn,
                format!(
                    "{} not found (looked at {}): unmodified MPI programs keep MPI's own \
                     collectives",
                    crate::preload::LIB_NAME,
                    looked
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
            .fix(format!(
                "install it with scripts/install.sh (PREFIX/lib/topo-run/), or set {} to it",
                crate::preload::LIB_ENV
            )),
        ),
        (Some(lib), None) => out.push(
            Finding::new(
                "pmpi library",
                Scope::Node,
                Status::Fail,
                format!(
                    "{} names no MPI library: it is not topo-run's PMPI library",
                    lib.display()
                ),
            )
            .fix("reinstall topo-run"),
        ),
        (Some(lib), Some(needs)) => {
            let present = mpis.iter().any(|(s, _)| s == needs);
            out.push(if present || mpis.is_empty() {
                Finding::new(
                    "pmpi library",
                    Scope::Node,
                    Status::Ok,
                    format!(
                        "{} serves {} programs ({needs})",
                        lib.display(),
                        abi_name(needs)
                    ),
                )
            } else {
                Finding::new(
                    "pmpi library",
                    Scope::Node,
                    Status::Warn,
                    format!(
                        "{} was built against {needs}, which this node does not have",
                        lib.display()
                    ),
                )
                .fix("build topo-run against the MPI installed here")
            });
        }
    }
    for (soname, _) in mpis.iter().filter(|(s, _)| Some(s) != served.as_ref()) {
        out.push(Finding::new(
            "pmpi library",
            Scope::Node,
            Status::Info,
            format!(
                "programs built with the {} ({soname}) run with their own collectives: \
                 topo-run has no PMPI library for that ABI",
                abi_name(soname)
            ),
        ));
    }
    out
}

/// The shared-memory directory: there, writable, and large enough for one node's segment
/// with one rank per hardware thread. Only `reserve` callers (one per node) try to reserve
/// that much.
pub fn shared_memory(settings: &Settings, ranks: u64, reserve: bool) -> Finding {
    let dir = leftover_shm::shm_dir();
    let need = settings.segment_bound(ranks);
    // The PMPI library gives every communicator congruent to world a context of its own,
    // each with a segment, up to TOPO_RUN_MAX_COMMS of them.
    let comms = max_comms(std::env::var(MAX_COMMS_ENV).ok().as_deref());
    let all = need.saturating_mul(comms as u64);
    let fix_size = format!(
        "make {} larger (for /dev/shm: mount -o remount,size=... /dev/shm, or the \
         node image's tmpfs size), or use fewer --slots / a smaller --fragment",
        dir.display()
    );
    let stat = match nix::sys::statvfs::statvfs(&dir) {
        Ok(s) => s,
        Err(e) => {
            return Finding::new(
                "shared memory",
                Scope::Node,
                Status::Fail,
                format!("{}: {e}; collectives fall back to MPI's own", dir.display()),
            )
            .fix("mount a tmpfs on /dev/shm (or point TOPO_RUN_SHM_DIR at one)");
        }
    };
    let size = stat.blocks() as u64 * stat.fragment_size() as u64;
    let text = format!(
        "{}: {} in all; a segment for {ranks} ranks per node takes up to {}, and {comms} \
         (the PMPI library's most contexts, {MAX_COMMS_ENV}) up to {}",
        dir.display(),
        human(size),
        human(need),
        human(all)
    );
    if size < need {
        return Finding::new(
            "shared memory",
            Scope::Node,
            Status::Fail,
            format!("{text}: too small, collectives would fall back to MPI's own"),
        )
        .fix(fix_size);
    }
    if reserve && let Err(e) = try_reserve(&dir, need) {
        return Finding::new(
            "shared memory",
            Scope::Node,
            Status::Fail,
            format!("{text}, but reserving it failed: {e}"),
        )
        .fix(fix_size);
    }
    if size < all {
        return Finding::new(
            "shared memory",
            Scope::Node,
            Status::Warn,
            format!(
                "{text}: a program with that many communicators congruent to world gets \
                 MPI's own collectives on those that do not fit"
            ),
        )
        .fix(format!(
            "{fix_size}, or lower {MAX_COMMS_ENV} to what fits ({})",
            size / need.max(1)
        ));
    }
    Finding::new("shared memory", Scope::Node, Status::Ok, text)
}

/// Segments that jobs which died during their setup left in the shared-memory directory
/// (see [`crate::leftover_shm`]); with `remove`, removes them.
pub fn leftovers(remove: bool) -> Finding {
    let dir = leftover_shm::shm_dir();
    let (found, failed) = if remove {
        leftover_shm::remove(&dir)
    } else {
        (leftover_shm::find(&dir), Vec::new())
    };
    let list = |v: &mut dyn Iterator<Item = &leftover_shm::Leftover>| {
        let mut names: Vec<String> = v
            .map(|l| {
                l.path
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        if names.len() > 4 {
            let more = names.len() - 3;
            names.truncate(3);
            names.push(format!("and {more} more"));
        }
        names.join(", ")
    };
    let bytes = |v: &mut dyn Iterator<Item = &leftover_shm::Leftover>| {
        human(v.map(|l| l.bytes).sum::<u64>())
    };
    if !failed.is_empty() {
        let why = failed.first().map_or(String::new(), |(_, w)| w.clone());
        return Finding::new(
            "leftovers",
            Scope::Node,
            Status::Warn,
            format!(
                "{}: {} file(s) left by jobs that died could not be removed ({why}): {}",
                dir.display(),
                failed.len(),
                list(&mut failed.iter().map(|(l, _)| l))
            ),
        )
        .fix(format!(
            "remove them as their owner or root: rm {}/topo-run.*",
            dir.display()
        ));
    }
    match (found.is_empty(), remove) {
        (true, _) => Finding::new(
            "leftovers",
            Scope::Node,
            Status::Ok,
            format!("{}: no segments left by jobs that died", dir.display()),
        ),
        (false, true) => Finding::new(
            "leftovers",
            Scope::Node,
            Status::Info,
            format!(
                "{}: removed {} file(s) ({}) left by jobs that died: {}",
                dir.display(),
                found.len(),
                bytes(&mut found.iter()),
                list(&mut found.iter())
            ),
        ),
        (false, false) => Finding::new(
            "leftovers",
            Scope::Node,
            Status::Warn,
            format!(
                "{}: {} file(s) ({}) left by jobs that died during their setup, which no \
             process uses: {}",
                dir.display(),
                found.len(),
                bytes(&mut found.iter()),
                list(&mut found.iter())
            ),
        )
        .fix(
            "remove them with topo-run doctor --remove-leftovers (the next launch on this \
             node removes them too)",
        ),
    }
}

/// Creates a file of `bytes` in `dir` the way the runtime creates a segment, then removes it.
fn try_reserve(dir: &Path, bytes: u64) -> Result<(), String> {
    use nix::fcntl::{OFlag, open, posix_fallocate};
    use nix::sys::stat::Mode;
    let path = dir.join(format!("topo-run.doctor.{}", std::process::id()));
    let fd = open(
        &path,
        OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )
    .map_err(|e| format!("creating {}: {}", path.display(), e.desc()))?;
    let result =
        posix_fallocate(&fd, 0, bytes as i64).map_err(|e| format!("{} bytes: {}", bytes, e.desc()));
    let _ = std::fs::remove_file(&path);
    result
}

/// The limits that matter: file size (a segment is a file) and open files (MPI's TCP
/// transport opens one per peer).
pub fn limits(settings: &Settings, ranks: u64) -> Finding {
    use nix::sys::resource::{Resource, getrlimit};
    let need = settings.segment_bound(ranks);
    let show = |v: u64| {
        if v == nix::sys::resource::RLIM_INFINITY {
            "unlimited".to_string()
        } else {
            v.to_string()
        }
    };
    let (fsize, _) = getrlimit(Resource::RLIMIT_FSIZE).unwrap_or((u64::MAX, u64::MAX));
    let (nofile, _) = getrlimit(Resource::RLIMIT_NOFILE).unwrap_or((u64::MAX, u64::MAX));
    let text = format!(
        "file size: {}, open files: {}",
        if fsize == nix::sys::resource::RLIM_INFINITY {
            "unlimited".into()
        } else {
            human(fsize)
        },
        show(nofile)
    );
    if fsize < need {
        return Finding::new(
            "limits",
            Scope::Node,
            Status::Fail,
            format!("{text}: a segment of {} cannot be created", human(need)),
        )
        .fix("raise the file size limit (ulimit -f unlimited; limits.conf fsize)");
    }
    if nofile < 1024 {
        return Finding::new(
            "limits",
            Scope::Node,
            Status::Warn,
            format!("{text}: few open files for MPI's connections between ranks"),
        )
        .fix("raise the open-files limit (ulimit -n; limits.conf nofile) to 4096 or more");
    }
    Finding::new("limits", Scope::Node, Status::Ok, text)
}

/// What Yama's `ptrace_scope` value means for single copy.
pub fn ptrace_scope_meaning(scope: Option<u32>) -> (&'static str, bool) {
    match scope {
        None => ("no Yama ptrace policy", true),
        Some(0) => ("Yama ptrace_scope 0 (classic)", true),
        Some(1) => ("Yama ptrace_scope 1 (only a process's descendants)", false),
        Some(2) => ("Yama ptrace_scope 2 (administrators only)", false),
        Some(_) => ("Yama ptrace_scope 3 (no attach at all)", false),
    }
}

/// Single copy: whether one rank may read a sibling rank's memory.
pub fn single_copy() -> Finding {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok());
    let (policy, allows) = ptrace_scope_meaning(scope);
    let seccomp = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Seccomp:").map(|v| v.trim().to_string()))
        });
    let policy = match seccomp.as_deref() {
        Some("0") => format!("{policy}, no seccomp filter"),
        Some("1") => format!("{policy}, seccomp strict mode"),
        Some("2") => format!("{policy}, a seccomp filter"),
        _ => policy.to_string(),
    };
    let probe = super::probe::siblings_can_read();
    let fix = "sysctl kernel.yama.ptrace_scope=0 on the nodes (1 forbids reads between \
               sibling ranks), and no seccomp filter that blocks process_vm_readv";
    match probe {
        Ok(()) => Finding::new(
            "single copy",
            Scope::Node,
            if allows { Status::Ok } else { Status::Warn },
            format!("{policy}; process_vm_readv between sibling processes works"),
        )
        .fix_if(!allows, fix),
        Err(e) => Finding::new(
            "single copy",
            Scope::Node,
            Status::Warn,
            format!(
                "{policy}; process_vm_readv between sibling processes fails ({e}): large \
                 messages go through the shared-memory queues, which is slower"
            ),
        )
        .fix(fix),
    }
}

/// hwloc's view of the node.
pub fn hwloc(topo: &Result<NodeTopology, String>) -> Finding {
    match topo {
        Ok(t) => Finding::new("hwloc", Scope::Node, Status::Ok, t.summary()),
        Err(e) => Finding::new(
            "hwloc",
            Scope::Node,
            Status::Fail,
            format!("hwloc cannot read this node's topology: {e}"),
        )
        .fix("check that /sys is mounted in the job's environment (or set HWLOC_XMLFILE)"),
    }
}

/// Inside a job step: whether this task is bound.
pub fn task_binding(topo: &Result<NodeTopology, String>) -> Finding {
    let (Ok(topo), Ok(mask)) = (topo, crate::cpus::own_mask()) else {
        return Finding::new(
            "task binding",
            Scope::Node,
            Status::Warn,
            "cannot compare this task's CPU mask with the node's",
        );
    };
    let all = topo.all_cpus().0.len();
    if topo.is_unbound(&mask) {
        Finding::new(
            "task binding",
            Scope::Node,
            Status::Fail,
            format!(
                "a task is not bound (its mask holds all {all} CPUs): topo-run stops it (exit 10)"
            ),
        )
        .fix("srun --cpu-bind=cores (or TaskPluginParam=Cores), or topo-run --allow-unbound")
    } else {
        Finding::new(
            "task binding",
            Scope::Node,
            Status::Ok,
            format!(
                "every task is bound (to {} of the node's {all} CPUs)",
                mask.0.len()
            ),
        )
    }
}

/// Bytes, readably.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_slurms_answers() {
        let list = "MPI plugin types are...\n\tpmix\n\tnone\n\tcray_shasta\n\tpmi2\n\
                    specific pmix plugin versions available: pmix_v4\n";
        let (plugins, versions) = parse_mpi_list(list);
        assert_eq!(plugins, ["pmix", "none", "cray_shasta", "pmi2"]);
        assert_eq!(versions, ["pmix_v4"]);

        let conf = "Configuration data as of 2026-11-25T08:00:00\nMpiDefault              = pmix\n\
                    TaskPlugin              = task/affinity\nTaskPluginParam         = (null type)\n\
                    SLURM_CONF              = /etc/slurm/slurm.conf\n\nCgroup Support Configuration:\n";
        let c = parse_config(conf);
        assert_eq!(c["TaskPlugin"], "task/affinity");
        assert_eq!(c["TaskPluginParam"], "(null type)");
        assert_eq!(c["SLURM_CONF"], "/etc/slurm/slurm.conf");
        assert!(!c.contains_key("Configuration data as of 2026-11-25T08:00:00"));
    }

    #[test]
    fn binding_policies() {
        let with = |plugin: &str, param: &str| {
            let mut c = BTreeMap::new();
            c.insert("TaskPlugin".to_string(), plugin.to_string());
            c.insert("TaskPluginParam".to_string(), param.to_string());
            binding_policy(&Some(c)).status
        };
        assert_eq!(with("task/affinity", "(null type)"), Status::Ok);
        assert_eq!(with("task/affinity,task/cgroup", "Cores"), Status::Ok);
        assert_eq!(with("task/affinity", "None"), Status::Warn);
        assert_eq!(with("task/affinity", "none,Verbose"), Status::Warn);
        assert_eq!(with("task/cgroup", "(null type)"), Status::Warn);
        assert_eq!(with("task/none", "(null type)"), Status::Fail);
        assert_eq!(binding_policy(&None).status, Status::Warn);
    }

    #[test]
    fn finds_mpi_libraries_in_the_linker_cache() {
        let text = "1234 libs found in cache `/etc/ld.so.cache'\n\
            \tlibmpich.so.12 (libc6,x86-64) => /lib/x86_64-linux-gnu/libmpich.so.12\n\
            \tlibmpi.so.40 (libc6,x86-64) => /lib/x86_64-linux-gnu/libmpi.so.40\n\
            \tlibmpi.so.12 (libc6,x86-64) => /lib/x86_64-linux-gnu/libmpi.so.12\n\
            \tlibmpi_mpifh.so.40 (libc6,x86-64) => /lib/x86_64-linux-gnu/libmpi_mpifh.so.40\n\
            \tlibmpi.so.40 (libc6) => /lib32/libmpi.so.40\n";
        let found = parse_ldconfig(text);
        let names: Vec<&str> = found.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(names, ["libmpi.so.40", "libmpi.so.12"]);
        assert_eq!(found[0].1, "/lib/x86_64-linux-gnu/libmpi.so.40");
        let mpich_only = "\tlibmpich.so.12 (libc6,x86-64) => /usr/lib/libmpich.so.12\n";
        assert_eq!(parse_ldconfig(mpich_only)[0].0, "libmpich.so.12");
    }

    #[test]
    fn ptrace_scopes() {
        assert!(ptrace_scope_meaning(None).1);
        assert!(ptrace_scope_meaning(Some(0)).1);
        for s in [1, 2, 3] {
            assert!(!ptrace_scope_meaning(Some(s)).1, "{s}");
        }
    }

    #[test]
    fn a_missing_map_warns_and_a_map_missing_nodes_fails() {
        let dir = std::env::temp_dir().join(format!("doctor-map-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let conf = dir.join("slurm.conf");
        let nodes = Ok(vec![
            "node1".to_string(),
            "node2".to_string(),
            "node9".to_string(),
        ]);
        let f = network_map(None, &conf, &nodes);
        assert_eq!(f.status, Status::Warn, "{f:?}");
        assert!(f.text.contains("no topology.conf or topology.yaml"));
        std::fs::write(
            dir.join("topology.conf"),
            "SwitchName=leaf1 Nodes=node[1-2]\n",
        )
        .unwrap();
        let f = network_map(None, &conf, &nodes);
        assert_eq!(f.status, Status::Fail, "{f:?}");
        assert!(
            f.text.contains("1 of the cluster's 3 nodes are missing") && f.text.contains("node9")
        );
        let f = network_map(None, &conf, &Ok(vec!["node2".to_string()]));
        assert_eq!(f.status, Status::Ok, "{f:?}");
        std::fs::write(
            dir.join("topology.conf"),
            "SwitchName=leaf1 Switches=nowhere\n",
        )
        .unwrap();
        assert_eq!(network_map(None, &conf, &nodes).status, Status::Fail);
        // Slurm 23.11's topology.yaml, when there is no topology.conf.
        std::fs::remove_file(dir.join("topology.conf")).unwrap();
        let yaml = include_str!("../../../slurm/maps/topology.yaml");
        std::fs::write(dir.join("topology.yaml"), yaml).unwrap();
        let two = Ok(vec!["node1".to_string(), "node2".to_string()]);
        let f = network_map(None, &conf, &two);
        assert_eq!(f.status, Status::Ok, "{f:?}");
        assert!(f.text.contains("topology.yaml"), "{}", f.text);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sizes_read_well() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(16 * 1024), "16.0 KiB");
        assert_eq!(human(3 << 30), "3.0 GiB");
    }
}
