//! `topo-run doctor`: is this cluster set up the way topo-run needs?
//!
//! On a login node it checks Slurm (version, MPI plugins, binding policy), the network
//! map, PMIx, the MPI libraries and the PMPI library, shared memory and limits, single
//! copy and hwloc's view of the node. Run as a job step (`srun --mpi=pmix topo-run
//! doctor`), each node's first task checks its node, every task checks its binding, and
//! rank 0 gathers every report through PMIx and prints one: a finding shared by every
//! task that made it is printed once, others with the ranks and nodes that made them, and
//! the job-wide findings must agree.
//!
//! Every finding is OK, INFO, WARN (topo-run works, but not as well as it could) or FAIL
//! (topo-run stops, or gives up its own collectives); WARN and FAIL name the fix. Any FAIL
//! makes the exit code 16.

mod checks;
mod probe;

use std::collections::BTreeSet;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use topo_hierarchy::Settings;

use crate::cli::{DoctorArgs, ReportFormat};
use crate::cpus::NodeTopology;
use crate::discover::{Env, ProcessEnv, pmix_available};

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    Ok,
    Info,
    Warn,
    Fail,
}

impl Status {
    fn label(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::Info => "INFO",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        }
    }
}

/// Whether every task of a step must see the same (`Job`), or nodes may differ (`Node`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Job,
    Node,
}

/// One line of the report, and its fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    pub check: String,
    pub scope: Scope,
    pub status: Status,
    pub text: String,
    pub fix: Option<String>,
}

impl Finding {
    pub fn new(check: &str, scope: Scope, status: Status, text: impl Into<String>) -> Self {
        Finding {
            check: check.to_string(),
            scope,
            status,
            text: text.into(),
            fix: None,
        }
    }

    pub fn fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }

    pub fn fix_if(self, cond: bool, fix: impl Into<String>) -> Self {
        if cond { self.fix(fix) } else { self }
    }
}

/// Doctor found at least one FAIL (exit code 16). `quiet` on the tasks of a step whose
/// report rank 0 prints: the message would only repeat it.
#[derive(Debug, thiserror::Error)]
#[error("doctor: {count} check(s) failed; each FAIL line above names the fix")]
pub struct Failed {
    pub count: usize,
    pub quiet: bool,
}

/// The PMIx key under which each task publishes its findings.
const REPORT_KEY: &std::ffi::CStr = c"topo-run.doctor";

/// How long rank 0 waits for the other tasks' reports.
const FENCE_TIMEOUT_S: i32 = 120;

/// This task's place in a job step, if it runs as one.
#[derive(Debug, Clone, Copy)]
struct Task {
    rank: u32,
    local: u32,
}

fn task(env: &dyn Env) -> Option<Task> {
    let num = |names: &[&str]| names.iter().find_map(|n| env.var(n)?.parse::<u32>().ok());
    let rank = num(&["PMIX_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"])?;
    let local = num(&["SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"]).unwrap_or(0);
    Some(Task { rank, local })
}

pub fn run(args: &DoctorArgs) -> anyhow::Result<()> {
    if args.probe_hold {
        return probe::hold();
    }
    if let Some(words) = &args.probe_read {
        return probe::read(words);
    }
    let env = ProcessEnv;
    let task = task(&env);
    let node = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into());
    let findings = match task {
        Some(t) if t.local != 0 => task_findings(),
        _ => node_findings(args, task.is_some()),
    };
    let Some(task) = task else {
        let title = format!(
            "topo-run doctor on {node} (not in a job step; `srun --mpi=pmix topo-run doctor` \
             also checks the tasks of a step)"
        );
        return finish(args.format, &title, &findings);
    };
    if pmix_available(&env) {
        match exchange(&node, &findings) {
            Ok(Some(all)) => {
                let (merged, ranks, nodes) = merge(&all);
                let title =
                    format!("topo-run doctor in a job step: {ranks} task(s) on {nodes} node(s)");
                return finish(args.format, &title, &merged);
            }
            Ok(None) => return fail_quietly_if_any(&findings), // rank 0 reports
            Err(e) => {
                if task.rank == 0 {
                    let mut mine = findings.clone();
                    mine.push(
                        Finding::new(
                            "agreement",
                            Scope::Job,
                            Status::Warn,
                            format!("the tasks' reports could not be gathered: {e:#}"),
                        )
                        .fix("run doctor as srun --mpi=pmix topo-run doctor"),
                    );
                    let title = format!("topo-run doctor, rank 0 on {node}");
                    return finish(args.format, &title, &mine);
                }
                return fail_quietly_if_any(&findings);
            }
        }
    }
    // No PMIx: rank 0 reports in full, the other tasks only what is wrong where they are.
    if task.rank == 0 {
        let mut mine = findings;
        mine.push(
            Finding::new(
                "agreement",
                Scope::Job,
                Status::Warn,
                "not checked: without a PMIx server the tasks cannot compare their reports",
            )
            .fix("run doctor as srun --mpi=pmix topo-run doctor"),
        );
        let title = format!("topo-run doctor, rank 0 on {node}");
        return finish(args.format, &title, &mine);
    }
    let bad: Vec<Finding> = findings
        .iter()
        .filter(|f| f.status >= Status::Warn)
        .cloned()
        .collect();
    if !bad.is_empty() {
        let mut out = String::new();
        for f in &bad {
            render(&mut out, f, &format!("rank {} on {node}: ", task.rank));
        }
        eprint!("{out}");
    }
    fail_quietly_if_any(&findings)
}

/// What every task checks about itself.
fn task_findings() -> Vec<Finding> {
    vec![checks::task_binding(&NodeTopology::load())]
}

/// The whole list, for a login node or a node's first task (`in_step`).
fn node_findings(args: &DoctorArgs, in_step: bool) -> Vec<Finding> {
    let mut out = Vec::new();
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    out.push(Finding::new(
        "version",
        Scope::Job,
        Status::Info,
        format!("topo-run {} ({exe})", env!("CARGO_PKG_VERSION")),
    ));
    let settings = match args.runtime.settings() {
        Ok(pairs) => {
            let settings = Settings::from_pairs(&pairs).unwrap_or_default();
            let shown = if pairs.is_empty() {
                "the defaults".to_string()
            } else {
                crate::cli::RuntimeArgs::digest_text(&pairs)
            };
            out.push(Finding::new(
                "settings",
                Scope::Job,
                Status::Info,
                format!("runtime settings: {shown}"),
            ));
            settings
        }
        Err(e) => {
            out.push(
                Finding::new(
                    "settings",
                    Scope::Job,
                    Status::Fail,
                    format!("{e:#}: every launch stops (exit 13)"),
                )
                .fix("correct the option, variable or rules file line (docs/runtime.md)"),
            );
            Settings::default()
        }
    };
    let config = checks::output_of("scontrol", &["show", "config"])
        .ok()
        .map(|t| checks::parse_config(&t));
    out.push(checks::slurm(&config));
    out.push(checks::binding_policy(&config));
    let conf = checks::slurm_conf(&config);
    out.push(checks::network_map(
        args.network_map.as_deref(),
        &conf,
        &checks::cluster_nodes(),
    ));
    out.push(checks::pmix());
    out.extend(checks::mpi_and_preload());
    let topo = NodeTopology::load();
    let ranks = topo.as_ref().map_or(1, |t| t.all_cpus().0.len().max(1)) as u64;
    out.push(checks::shared_memory(&settings, ranks, true));
    out.push(checks::leftovers(args.remove_leftovers));
    out.push(checks::limits(&settings, ranks));
    out.push(checks::single_copy());
    out.push(checks::hwloc(&topo));
    if in_step {
        out.push(checks::task_binding(&topo));
    }
    out
}

/// Publishes this task's findings and, on rank 0, collects every task's: `(rank, node,
/// findings)`. Other ranks get `None`.
#[allow(clippy::type_complexity)]
fn exchange(
    node: &str,
    findings: &[Finding],
) -> anyhow::Result<Option<Vec<(u32, String, Vec<Finding>)>>> {
    let client = crate::pmix::Client::init()?;
    let size = client
        .get_u32(crate::pmix::Who::Job, pmix_sys::PMIX_JOB_SIZE)?
        .ok_or_else(|| anyhow::anyhow!("PMIx gives no job size"))?;
    let mine = serde_json::to_string(&(node, findings))?;
    client.put_global(REPORT_KEY, &mine)?;
    client.fence_collect(FENCE_TIMEOUT_S)?;
    if client.rank() != 0 {
        return Ok(None);
    }
    let mut all = Vec::with_capacity(size as usize);
    for r in 0..size {
        let text = client
            .get_string(crate::pmix::Who::Rank(r), REPORT_KEY)?
            .ok_or_else(|| anyhow::anyhow!("rank {r} published no report"))?;
        let (node, findings): (String, Vec<Finding>) = serde_json::from_str(&text)?;
        all.push((r, node, findings));
    }
    Ok(Some(all))
}

/// One report from every task's: a finding shared by all the tasks that made its check
/// is kept once; any other carries its ranks and nodes in its text. Adds the agreement
/// finding. Returns the report, the number of tasks and of nodes.
fn merge(all: &[(u32, String, Vec<Finding>)]) -> (Vec<Finding>, usize, usize) {
    // Distinct findings in first-seen order, each with the tasks that made it.
    let mut distinct: Vec<(Finding, Vec<u32>)> = Vec::new();
    for (rank, _, findings) in all {
        for f in findings {
            match distinct.iter_mut().find(|(g, _)| g == f) {
                Some((_, ranks)) => ranks.push(*rank),
                None => distinct.push((f.clone(), vec![*rank])),
            }
        }
    }
    let node_of = |r: u32| {
        all.iter()
            .find(|(x, _, _)| *x == r)
            .map(|(_, n, _)| n.as_str())
    };
    let mut differ_job = BTreeSet::new();
    let mut differ_node = BTreeSet::new();
    let mut out = Vec::new();
    for (f, ranks) in &distinct {
        let makers: BTreeSet<u32> = distinct
            .iter()
            .filter(|(g, _)| g.check == f.check)
            .flat_map(|(_, r)| r.iter().copied())
            .collect();
        let mut f = f.clone();
        if ranks.len() < makers.len() {
            let nodes: BTreeSet<&str> = ranks.iter().filter_map(|&r| node_of(r)).collect();
            let nodes: Vec<&str> = nodes.into_iter().collect();
            f.text = format!("[rank {} on {}] {}", ranges(ranks), nodes.join(","), f.text);
            match f.scope {
                Scope::Job => differ_job.insert(f.check.clone()),
                Scope::Node => differ_node.insert(f.check.clone()),
            };
        }
        out.push(f);
    }
    let nodes: BTreeSet<&str> = all.iter().map(|(_, n, _)| n.as_str()).collect();
    let agreement = if !differ_job.is_empty() {
        Finding::new(
            "agreement",
            Scope::Job,
            Status::Fail,
            format!(
                "the tasks disagree on {}: they would compute different plans or settings",
                differ_job.into_iter().collect::<Vec<_>>().join(", ")
            ),
        )
        .fix("install the same topo-run everywhere and give every task the same environment")
    } else if !differ_node.is_empty() {
        Finding::new(
            "agreement",
            Scope::Job,
            Status::Info,
            format!(
                "all {} tasks answered; nodes differ on {} (see the lines marked with ranks)",
                all.len(),
                differ_node.into_iter().collect::<Vec<_>>().join(", ")
            ),
        )
    } else {
        Finding::new(
            "agreement",
            Scope::Job,
            Status::Ok,
            format!("all {} tasks answered, and agree", all.len()),
        )
    };
    out.push(agreement);
    (out, all.len(), nodes.len())
}

/// `0-3,5,7-8`.
fn ranges(ranks: &[u32]) -> String {
    let mut sorted = ranks.to_vec();
    sorted.sort_unstable();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            sorted[i].to_string()
        } else {
            format!("{}-{}", sorted[i], sorted[j])
        });
        i = j + 1;
    }
    parts.join(",")
}

fn render(out: &mut String, f: &Finding, prefix: &str) {
    let _ = writeln!(
        out,
        "{prefix}{:<5} {:<14} {}",
        f.status.label(),
        f.check,
        f.text
    );
    if let Some(fix) = &f.fix {
        let _ = writeln!(out, "{prefix}{:<5} {:<14} fix: {fix}", "", "");
    }
}

/// Prints the report and its summary; an error (exit 16) if anything failed.
fn finish(format: ReportFormat, title: &str, findings: &[Finding]) -> anyhow::Result<()> {
    let count = |s| findings.iter().filter(|f| f.status == s).count();
    let (ok, info, warn, fail) = (
        count(Status::Ok),
        count(Status::Info),
        count(Status::Warn),
        count(Status::Fail),
    );
    let mut out = String::new();
    match format {
        ReportFormat::Text => {
            let _ = writeln!(out, "{title}");
            for f in findings {
                render(&mut out, f, "");
            }
            let _ = writeln!(
                out,
                "doctor: {ok} OK, {info} info, {warn} warning(s), {fail} failure(s)"
            );
        }
        ReportFormat::Json => {
            let doc = serde_json::json!({
                "title": title,
                "findings": findings,
                "ok": ok,
                "info": info,
                "warnings": warn,
                "failures": fail,
            });
            let _ = writeln!(out, "{doc}");
        }
    }
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(out.as_bytes())?;
    stdout.flush()?;
    fail_if_any(findings)
}

fn fail_if_any(findings: &[Finding]) -> anyhow::Result<()> {
    failed(findings, false)
}

fn fail_quietly_if_any(findings: &[Finding]) -> anyhow::Result<()> {
    failed(findings, true)
}

fn failed(findings: &[Finding], quiet: bool) -> anyhow::Result<()> {
    match findings.iter().filter(|f| f.status == Status::Fail).count() {
        0 => Ok(()),
        count => Err(Failed { count, quiet }.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(check: &str, scope: Scope, status: Status, text: &str) -> Finding {
        Finding::new(check, scope, status, text)
    }

    #[test]
    fn merging_keeps_shared_findings_once_and_marks_the_others() {
        let same = f("version", Scope::Job, Status::Info, "topo-run 0.1.0");
        let shm = |t: &str| f("shared memory", Scope::Node, Status::Ok, t);
        let bound = f("task binding", Scope::Node, Status::Ok, "bound");
        let all = vec![
            (
                0,
                "n1".to_string(),
                vec![same.clone(), shm("24 GiB"), bound.clone()],
            ),
            (1, "n1".to_string(), vec![bound.clone()]),
            (
                2,
                "n2".to_string(),
                vec![same.clone(), shm("1 GiB"), bound.clone()],
            ),
            (3, "n2".to_string(), vec![bound.clone()]),
        ];
        let (merged, ranks, nodes) = merge(&all);
        assert_eq!((ranks, nodes), (4, 2));
        let texts: Vec<&str> = merged.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(texts[0], "topo-run 0.1.0");
        assert_eq!(texts[1], "[rank 0 on n1] 24 GiB");
        assert_eq!(texts[2], "bound");
        assert_eq!(texts[3], "[rank 2 on n2] 1 GiB");
        let last = merged.last().unwrap();
        assert_eq!(
            (last.check.as_str(), last.status),
            ("agreement", Status::Info)
        );

        // A job-wide difference is a failure.
        let other = f("version", Scope::Job, Status::Info, "topo-run 0.0.9");
        let all = vec![
            (0, "n1".to_string(), vec![same]),
            (1, "n2".to_string(), vec![other]),
        ];
        let (merged, _, _) = merge(&all);
        let last = merged.last().unwrap();
        assert_eq!(last.status, Status::Fail);
        assert!(last.text.contains("disagree on version"), "{}", last.text);
        assert!(fail_if_any(&merged).is_err());
    }

    #[test]
    fn rank_lists_read_as_ranges() {
        assert_eq!(ranges(&[5, 0, 1, 2, 3, 7, 8]), "0-3,5,7-8");
        assert_eq!(ranges(&[4]), "4");
    }

    #[test]
    fn tasks_are_known_by_their_environment() {
        let mut env = std::collections::HashMap::new();
        assert!(task(&env).is_none());
        env.insert("SLURM_PROCID".to_string(), "3".to_string());
        env.insert("SLURM_LOCALID".to_string(), "1".to_string());
        let t = task(&env).unwrap();
        assert_eq!((t.rank, t.local), (3, 1));
    }
}
