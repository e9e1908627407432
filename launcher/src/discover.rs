//! Discovery: where every rank of the job runs, as seen by one task.
//!
//! Two sources, behind one result type ([`Placement`]):
//! - PMIx (`srun --mpi=pmix`, Open MPI's `mpirun`): rank, size and the rank → node map
//!   from `PMIx_Resolve_nodes`/`PMIx_Resolve_peers`, and locality strings when the
//!   server provides them;
//! - Slurm's environment (`srun --mpi=none` or `pmi2`): the map follows from the step's
//!   node list, tasks per node and distribution, where that is exact.
//!
//! The planning code downstream is the same pure code as `topo-run plan`.

use std::collections::HashMap;

use topo_hierarchy::hostlist;

use crate::pmix::{self, PmixError, Who};

/// What discovery could not find out, or found inconsistent (exit code 11).
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error(
        "not started by a PMIx or Slurm launcher (neither PMIX_RANK nor SLURM_PROCID is set); \
         run it as `srun --mpi=pmix topo-run [OPTIONS] -- PROGRAM`"
    )]
    NoLauncher,
    #[error("PMIx: {0}")]
    Pmix(#[from] PmixError),
    #[error("PMIx server did not provide {0}")]
    PmixMissing(&'static str),
    #[error("Slurm environment: {0}")]
    SlurmEnv(String),
    #[error("inconsistent rank map: {0}")]
    Inconsistent(String),
}

/// Which source the placement came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Pmix,
    SlurmEnv,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Pmix => "pmix",
            Source::SlurmEnv => "slurm-env",
        }
    }
}

/// Where every rank runs, from one task's point of view.
#[derive(Debug, Clone)]
pub struct Placement {
    pub source: Source,
    /// This task's rank.
    pub rank: u32,
    /// Node names; `rank_node` indexes into it.
    pub nodes: Vec<String>,
    /// The node of every rank, in rank order.
    pub rank_node: Vec<u32>,
    /// Locality strings of this node's ranks (ascending rank order), when the launcher
    /// provides them (Open MPI's `mpirun` does, Slurm does not). `None` entries are
    /// unbound ranks.
    pub local_localities: Option<Vec<Option<String>>>,
    /// Identifies this launch among all that may run on a node at once, for the
    /// shared-memory segment name (raw; the user of the name sanitizes it): the PMIx
    /// namespace, unique per launch (`slurm.pmix.JOB.STEP` under srun, one per mpirun),
    /// or Slurm's `JOB.STEP` without PMIx.
    pub launch_id: String,
}

impl Placement {
    pub fn size(&self) -> u32 {
        self.rank_node.len() as u32
    }

    /// This task's node.
    pub fn node(&self) -> u32 {
        self.rank_node[self.rank as usize]
    }

    pub fn node_name(&self) -> &str {
        &self.nodes[self.node() as usize]
    }

    /// The ranks on this task's node, ascending.
    pub fn local_ranks(&self) -> Vec<u32> {
        let me = self.node();
        (0..self.size())
            .filter(|&r| self.rank_node[r as usize] == me)
            .collect()
    }
}

/// An environment to read variables from (the process's own, or a test's).
pub trait Env {
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
#[derive(Debug)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

impl Env for HashMap<String, String> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

/// Whether a PMIx server is there to talk to.
pub fn pmix_available(env: &dyn Env) -> bool {
    env.var("PMIX_RANK").is_some() && env.var("PMIX_NAMESPACE").is_some()
}

/// Whether this task is a task of a plain `srun --mpi=pmix` step, whose placement Slurm's
/// environment describes as PMIx would: Slurm's PMIx namespace, the same rank in both, and
/// not a heterogeneous step. (Under `mpirun` inside an allocation, the processes inherit
/// the Slurm variables of the daemon that started them, which describe other tasks.)
pub fn slurm_step_of_pmix(env: &dyn Env) -> bool {
    let ns = env.var("PMIX_NAMESPACE").unwrap_or_default();
    ns.starts_with("slurm.pmix.")
        && env.var("PMIX_RANK").is_some()
        && env.var("PMIX_RANK") == env.var("SLURM_PROCID")
        && env.var("SLURM_HET_SIZE").is_none()
        && env.var("SLURM_PACK_SIZE").is_none()
}

/// Discovers the placement through PMIx. The client is returned so that the caller
/// decides when to finalize (before exec).
pub fn from_pmix() -> Result<(Placement, pmix::Client), DiscoveryError> {
    let client = pmix::Client::init()?;
    let rank = client.rank();
    let size = client
        .get_u32(Who::Job, pmix_sys::PMIX_JOB_SIZE)?
        .ok_or(DiscoveryError::PmixMissing("PMIX_JOB_SIZE"))?;
    if size == 0 || rank >= size {
        return Err(DiscoveryError::Inconsistent(format!(
            "rank {rank} in a job of {size} ranks"
        )));
    }
    let nodes = client.resolve_nodes()?;
    if nodes.is_empty() {
        return Err(DiscoveryError::PmixMissing(
            "a node list (PMIx_Resolve_nodes)",
        ));
    }
    const UNSET: u32 = u32::MAX;
    let mut rank_node = vec![UNSET; size as usize];
    for (i, node) in nodes.iter().enumerate() {
        for r in client.resolve_peers(node)? {
            let slot = rank_node.get_mut(r as usize).ok_or_else(|| {
                DiscoveryError::Inconsistent(format!(
                    "PMIx_Resolve_peers({node}) lists rank {r}, but the job has {size} ranks"
                ))
            })?;
            if *slot != UNSET {
                return Err(DiscoveryError::Inconsistent(format!(
                    "rank {r} is listed on both {} and {node}",
                    nodes[*slot as usize]
                )));
            }
            *slot = i as u32;
        }
    }
    if let Some(r) = rank_node.iter().position(|&n| n == UNSET) {
        return Err(DiscoveryError::Inconsistent(format!(
            "rank {r} is on none of the nodes {}",
            nodes.join(",")
        )));
    }
    let mut placement = Placement {
        source: Source::Pmix,
        rank,
        nodes,
        rank_node,
        local_localities: None,
        launch_id: client.nspace(),
    };
    let mut locs = Vec::new();
    for r in placement.local_ranks() {
        // Unbound processes get no string, or an empty one (Open MPI's mpirun).
        let loc = client.get_string(Who::Rank(r), pmix_sys::PMIX_LOCALITY_STRING)?;
        locs.push(loc.filter(|s| !s.is_empty()));
    }
    if locs.iter().any(Option::is_some) {
        placement.local_localities = Some(locs);
    }
    Ok((placement, client))
}

fn slurm_var(env: &dyn Env, name: &str) -> Result<String, DiscoveryError> {
    env.var(name)
        .ok_or_else(|| DiscoveryError::SlurmEnv(format!("{name} is not set")))
}

fn slurm_num(env: &dyn Env, name: &str) -> Result<u32, DiscoveryError> {
    let v = slurm_var(env, name)?;
    v.trim()
        .parse()
        .map_err(|_| DiscoveryError::SlurmEnv(format!("{name}={v:?} is not a number")))
}

/// Discovers the placement from Slurm's task environment alone.
pub fn from_slurm_env(env: &dyn Env) -> Result<Placement, DiscoveryError> {
    if env.var("SLURM_PROCID").is_none() {
        return Err(DiscoveryError::NoLauncher);
    }
    let rank = slurm_num(env, "SLURM_PROCID")?;
    let size = match env.var("SLURM_STEP_NUM_TASKS") {
        Some(_) => slurm_num(env, "SLURM_STEP_NUM_TASKS")?,
        None => slurm_num(env, "SLURM_NTASKS")?,
    };
    let local_id = slurm_num(env, "SLURM_LOCALID")?;
    let me = slurm_var(env, "SLURMD_NODENAME")?;
    let nodelist = slurm_var(env, "SLURM_STEP_NODELIST")?;
    let nodes = hostlist::expand(&nodelist)
        .map_err(|e| DiscoveryError::SlurmEnv(format!("SLURM_STEP_NODELIST={nodelist:?}: {e}")))?;
    let tpn = slurm_var(env, "SLURM_STEP_TASKS_PER_NODE")?;
    let counts = parse_tasks_per_node(&tpn)
        .map_err(|e| DiscoveryError::SlurmEnv(format!("SLURM_STEP_TASKS_PER_NODE={tpn:?}: {e}")))?;
    if counts.len() != nodes.len() {
        return Err(DiscoveryError::SlurmEnv(format!(
            "SLURM_STEP_TASKS_PER_NODE={tpn:?} has {} entries for {} nodes",
            counts.len(),
            nodes.len()
        )));
    }
    let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
    if total != u64::from(size) || rank >= size {
        return Err(DiscoveryError::SlurmEnv(format!(
            "SLURM_STEP_TASKS_PER_NODE={tpn:?} adds up to {total} tasks, but the step has \
             {size} and this is rank {rank}"
        )));
    }
    let dist = env.var("SLURM_DISTRIBUTION");
    let plane = env.var("SLURM_DIST_PLANESIZE");
    let rank_node = distribute(&counts, dist.as_deref(), plane.as_deref())?;
    // Under srun --mpi=pmix the PMIx namespace names the step, as on the PMIx path, so
    // both paths name the segment alike.
    let launch_id = match env.var("PMIX_NAMESPACE") {
        Some(ns) if slurm_step_of_pmix(env) => ns,
        _ => format!(
            "{}.{}",
            slurm_var(env, "SLURM_JOB_ID")?,
            env.var("SLURM_STEP_ID")
                .or_else(|| env.var("SLURM_STEPID"))
                .ok_or_else(|| DiscoveryError::SlurmEnv(
                    "neither SLURM_STEP_ID nor SLURM_STEPID is set (is this task started by \
                     srun?)"
                        .into()
                ))?
        ),
    };
    let placement = Placement {
        source: Source::SlurmEnv,
        rank,
        nodes,
        rank_node,
        local_localities: None,
        launch_id,
    };
    // Cross-check what we derived with what Slurm told this task.
    let local_pos = placement.local_ranks().iter().position(|&r| r == rank);
    if placement.node_name() != me || local_pos != Some(local_id as usize) {
        return Err(DiscoveryError::SlurmEnv(format!(
            "the rank map derived from the distribution {:?} puts rank {rank} on {} as local \
             task {}, but Slurm started it on {me} as local task {local_id}; run with \
             srun --mpi=pmix so that PMIx provides the map",
            dist.as_deref().unwrap_or("block"),
            placement.node_name(),
            local_pos.map_or("?".to_string(), |p| p.to_string())
        )));
    }
    Ok(placement)
}

/// Parses Slurm's `2(x3),1` form into one count per node.
pub fn parse_tasks_per_node(text: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let (count, times) = match part.split_once("(x") {
            Some((c, rest)) => {
                let t = rest
                    .strip_suffix(')')
                    .ok_or_else(|| format!("{part:?} lacks a closing parenthesis"))?;
                (c, t)
            }
            None => (part, "1"),
        };
        let count: u32 = count
            .parse()
            .map_err(|_| format!("{part:?} is not a task count"))?;
        let times: u32 = times
            .parse()
            .ok()
            .filter(|&t| t > 0 && t <= hostlist::MAX_HOSTS as u32)
            .ok_or_else(|| format!("{part:?} has a bad repeat count"))?;
        if out.len() + times as usize > hostlist::MAX_HOSTS {
            return Err("too many nodes".into());
        }
        out.extend(std::iter::repeat_n(count, times as usize));
    }
    Ok(out)
}

/// Assigns ranks to nodes as Slurm's task distribution does: `block` (the default),
/// `cyclic` or `plane=N`. Anything else (`arbitrary`, a hostfile) has no exact answer
/// from the environment.
pub fn distribute(
    counts: &[u32],
    dist: Option<&str>,
    plane_size: Option<&str>,
) -> Result<Vec<u32>, DiscoveryError> {
    let total: usize = counts.iter().map(|&c| c as usize).sum();
    let node_dist = dist
        .map(|d| d.split(':').next().unwrap_or(""))
        .unwrap_or("block");
    let chunk = match node_dist {
        "block" | "" => None,
        "cyclic" => Some(1),
        d if d.starts_with("plane") => {
            let n = d
                .strip_prefix("plane=")
                .map(str::to_string)
                .or_else(|| plane_size.map(str::to_string))
                .and_then(|s| s.parse::<u32>().ok())
                .filter(|&n| n > 0)
                .ok_or_else(|| {
                    DiscoveryError::SlurmEnv(format!(
                        "distribution {d:?} without a valid plane size"
                    ))
                })?;
            Some(n)
        }
        other => {
            return Err(DiscoveryError::SlurmEnv(format!(
                "the task distribution {other:?} does not determine the rank map from the \
                 environment; run with srun --mpi=pmix so that PMIx provides it"
            )));
        }
    };
    let mut out = Vec::with_capacity(total);
    match chunk {
        None => {
            for (node, &c) in counts.iter().enumerate() {
                out.extend(std::iter::repeat_n(node as u32, c as usize));
            }
        }
        Some(chunk) => {
            let mut left = counts.to_vec();
            while out.len() < total {
                for (node, l) in left.iter_mut().enumerate() {
                    let take = (*l).min(chunk);
                    out.extend(std::iter::repeat_n(node as u32, take as usize));
                    *l -= take;
                }
            }
            // Ranks are numbered in assignment order, so `out` is already rank → node.
        }
    }
    Ok(out)
}

/// The node's shared-memory segment name for a launch: `/topo-run.LAUNCH.NODE`, with both
/// parts sanitized; a launch id that would make the name longer than a file name may be
/// is replaced by its hash.
pub fn segment_name(launch_id: &str, node: &str) -> String {
    let node = sanitize(node);
    let mut launch = sanitize(launch_id);
    // NAME_MAX is 255; room is kept for the runtime's ".cN" and temporary suffixes.
    if launch.len() + node.len() > 180 {
        let h = launch_id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        launch = format!("h{h:016x}");
    }
    format!("/topo-run.{launch}.{}", &node[..node.len().min(120)])
}

/// Keeps `[A-Za-z0-9._-]`, for names that end up in a shared-memory segment name.
pub fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn only_a_plain_srun_pmix_task_counts_as_described_by_slurm() {
        let base = [
            ("PMIX_NAMESPACE", "slurm.pmix.7.0"),
            ("PMIX_RANK", "3"),
            ("SLURM_PROCID", "3"),
        ];
        assert!(slurm_step_of_pmix(&env(&base)));
        // mpirun inside an allocation: the process inherits its daemon's Slurm rank.
        let mpirun = [
            ("PMIX_NAMESPACE", "1649410049"),
            ("PMIX_RANK", "3"),
            ("SLURM_PROCID", "0"),
        ];
        assert!(!slurm_step_of_pmix(&env(&mpirun)));
        let mut other = base.to_vec();
        other[2] = ("SLURM_PROCID", "0");
        assert!(!slurm_step_of_pmix(&env(&other)));
        let mut het = base.to_vec();
        het.push(("SLURM_HET_SIZE", "2"));
        assert!(!slurm_step_of_pmix(&env(&het)));
        // The namespace names the segment on both paths.
        let mut full = env(&base);
        for (k, v) in [
            ("SLURMD_NODENAME", "n1"),
            ("SLURM_STEP_NODELIST", "n[1-2]"),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x2)"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_LOCALID", "1"),
            ("SLURM_JOB_ID", "7"),
            ("SLURM_STEP_ID", "0"),
        ] {
            full.insert(k.into(), v.into());
        }
        full.insert("SLURM_PROCID".into(), "1".into());
        full.insert("PMIX_RANK".into(), "1".into());
        assert_eq!(from_slurm_env(&full).unwrap().launch_id, "slurm.pmix.7.0");
    }

    #[test]
    fn segment_names_are_unique_per_launch() {
        // Two mpirun launches in one allocation (same SLURM_JOB_ID, no SLURM_STEP_ID) have
        // different PMIx namespaces, so different names.
        let a = segment_name("prterun-vm-4242@1", "node1");
        let b = segment_name("prterun-vm-4243@1", "node1");
        assert_ne!(a, b);
        assert_eq!(a, "/topo-run.prterun-vm-4242_1.node1");
        assert_eq!(
            segment_name("slurm.pmix.7.3", "vm"),
            "/topo-run.slurm.pmix.7.3.vm"
        );
        // A very long namespace still gives a valid, unique file name.
        let long = "x".repeat(400);
        let (l1, l2) = (
            segment_name(&long, "n"),
            segment_name(&format!("{long}y"), "n"),
        );
        assert_ne!(l1, l2);
        assert!(l1.len() < 200, "{l1}");
        assert!(segment_name("j", &"n".repeat(300)).len() < 200);
    }

    #[test]
    fn tasks_per_node() {
        assert_eq!(parse_tasks_per_node("2(x3),1").unwrap(), vec![2, 2, 2, 1]);
        assert_eq!(parse_tasks_per_node("4").unwrap(), vec![4]);
        for bad in ["", "x", "2(x", "2(x0)", "2(xq)", "-1"] {
            assert!(parse_tasks_per_node(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn distributions() {
        assert_eq!(distribute(&[2, 2], None, None).unwrap(), vec![0, 0, 1, 1]);
        assert_eq!(
            distribute(&[3, 2], Some("cyclic"), None).unwrap(),
            vec![0, 1, 0, 1, 0]
        );
        assert_eq!(
            distribute(&[2, 2], Some("block:cyclic"), None).unwrap(),
            vec![0, 0, 1, 1]
        );
        assert_eq!(
            distribute(&[3, 3], Some("plane=2"), None).unwrap(),
            vec![0, 0, 1, 1, 0, 1]
        );
        assert_eq!(
            distribute(&[3, 3], Some("plane"), Some("2")).unwrap(),
            vec![0, 0, 1, 1, 0, 1]
        );
        assert!(distribute(&[2, 2], Some("arbitrary"), None).is_err());
        assert!(distribute(&[2, 2], Some("plane"), None).is_err());
    }

    #[test]
    fn slurm_env_gives_the_rank_map_and_checks_it() {
        let base = [
            ("SLURM_PROCID", "3"),
            ("SLURM_NTASKS", "4"),
            ("SLURM_LOCALID", "1"),
            ("SLURMD_NODENAME", "node2"),
            ("SLURM_STEP_NODELIST", "node[1-2]"),
            ("SLURM_STEP_TASKS_PER_NODE", "2(x2)"),
            ("SLURM_JOB_ID", "7"),
            ("SLURM_STEP_ID", "0"),
        ];
        let p = from_slurm_env(&env(&base)).unwrap();
        assert_eq!(p.rank_node, vec![0, 0, 1, 1]);
        assert_eq!(p.local_ranks(), vec![2, 3]);
        assert_eq!(p.node_name(), "node2");

        // Cyclic: rank 3 is the second task of node2.
        let mut cyc = env(&base);
        cyc.insert("SLURM_DISTRIBUTION".into(), "cyclic".into());
        assert_eq!(from_slurm_env(&cyc).unwrap().rank_node, vec![0, 1, 0, 1]);

        // The task was started elsewhere than the derived map says.
        let mut wrong = env(&base);
        wrong.insert("SLURMD_NODENAME".into(), "node1".into());
        let err = from_slurm_env(&wrong).unwrap_err().to_string();
        assert!(err.contains("started it on node1"), "{err}");

        let mut short = env(&base);
        short.insert("SLURM_STEP_TASKS_PER_NODE".into(), "2".into());
        assert!(from_slurm_env(&short).is_err());

        assert!(matches!(
            from_slurm_env(&env(&[])),
            Err(DiscoveryError::NoLauncher)
        ));
    }
}
