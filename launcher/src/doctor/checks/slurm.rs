//! The checks of Slurm: its version and MPI plugins, how it binds tasks, where its
//! configuration and the network map are, and the parsers of what its tools print.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::super::{Finding, Scope, Status};
use super::output_of;

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
