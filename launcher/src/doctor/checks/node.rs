//! The checks of the node: shared memory and leftover segments, limits, single copy,
//! hwloc's view and the task's binding.

use std::path::Path;

use topo_hierarchy::Settings;
use topo_hierarchy::settings::{
    KEPT_SEGMENTS, LANE_BOARD_BYTES, LANES_ENV, MAX_COMMS_ENV, lanes_wanted, max_comms,
};

use super::super::{Finding, Scope, Status};
use crate::cpus::NodeTopology;
use crate::leftover_shm;

/// The shared-memory directory: there, writable, and large enough for one node's segment
/// with one rank per hardware thread. Only `reserve` callers (one per node) try to reserve
/// that much.
pub fn shared_memory(settings: &Settings, ranks: u64, reserve: bool) -> Finding {
    let dir = leftover_shm::shm_dir();
    let need = settings.segment_bound(ranks);
    // The PMPI library gives every communicator a context of its own, each with a
    // segment, up to TOPO_RUN_MAX_COMMS of them live, and keeps the segments of up to
    // KEPT_SEGMENTS dropped ones for later contexts over the same ranks; further contexts
    // share the node's lanes (TOPO_RUN_LANES segments of world's size and a board).
    let comms = max_comms(std::env::var(MAX_COMMS_ENV).ok().as_deref());
    let lanes = lanes_wanted(std::env::var(LANES_ENV).ok().as_deref());
    let board = if lanes > 0 { LANE_BOARD_BYTES } else { 0 };
    let all = need
        .saturating_mul((comms + KEPT_SEGMENTS + lanes) as u64)
        .saturating_add(board);
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
         (the PMPI library's most live contexts with a segment, {MAX_COMMS_ENV}) with \
         {KEPT_SEGMENTS} kept for later ones and {lanes} lanes for any number more \
         ({LANES_ENV}) up to {}",
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
                "{text}: a program with that many communicators gets MPI's own \
                 collectives on those that do not fit"
            ),
        )
        .fix(format!(
            "{fix_size}, or lower {MAX_COMMS_ENV} to what fits ({}; contexts beyond it \
             share the lanes)",
            (size.saturating_sub(board) / need.max(1))
                .saturating_sub((KEPT_SEGMENTS + lanes) as u64)
                .max(1)
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
    let probe = super::super::probe::siblings_can_read();
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
