//! `topo-run show`: decode the plan this process received and print its part, one line.
//! Also the line `topo-run --show` prints for each rank before exec.

use std::io::{self, Write};

use anyhow::{Context, Result};
use serde::Serialize;
use topo_hierarchy::{PLAN_ENV, RankPlan, ranges};

use crate::cli::ShowFormat;

/// The plan variable is missing (exit code 9, like a corrupted plan).
#[derive(Debug, thiserror::Error)]
#[error(
    "{PLAN_ENV} is not set: this program was not started by topo-run; run it as \
     `srun --mpi=pmix topo-run -- PROGRAM`"
)]
pub struct PlanMissing;

#[derive(Serialize)]
struct JsonGroup<'a> {
    level: String,
    members: &'a [u32],
}

#[derive(Serialize)]
struct JsonPlan<'a> {
    rank: u32,
    size: u32,
    node: &'a str,
    groups: Vec<JsonGroup<'a>>,
}

/// `{"rank":r,"size":N,"node":"...","groups":[{"level":..,"members":[..]},..]}`
pub fn json_line(plan: &RankPlan) -> String {
    let doc = JsonPlan {
        rank: plan.rank,
        size: plan.size,
        node: &plan.node,
        groups: plan
            .groups
            .iter()
            .map(|g| JsonGroup {
                level: g.level.to_string(),
                members: &g.members,
            })
            .collect(),
    };
    serde_json::to_string(&doc).expect("a plan always serializes")
}

/// `rank 0/4 on node1 (local 0/2): numa [0-1] | node [0,2] | world [0,2]`
pub fn text_line(plan: &RankPlan) -> String {
    let groups = if plan.groups.is_empty() {
        "no groups".to_string()
    } else {
        plan.groups
            .iter()
            .map(|g| format!("{} [{}]", g.level, ranges::encode(&g.members)))
            .collect::<Vec<_>>()
            .join(" | ")
    };
    format!(
        "rank {}/{} on {} (local {}/{}): {groups}",
        plan.rank, plan.size, plan.node, plan.local_rank, plan.local_size
    )
}

pub fn line(plan: &RankPlan, format: ShowFormat) -> String {
    match format {
        ShowFormat::Text => text_line(plan),
        ShowFormat::Json => json_line(plan),
    }
}

/// Runs `topo-run show`.
pub fn run(format: ShowFormat) -> Result<()> {
    let text = std::env::var(PLAN_ENV).map_err(|_| PlanMissing)?;
    let plan = RankPlan::decode(&text).with_context(|| {
        format!("the plan in {PLAN_ENV} is invalid; it must be passed unchanged from topo-run")
    })?;
    let mut out = io::stdout().lock();
    writeln!(out, "{}", line(&plan, format))?;
    out.flush()?;
    Ok(())
}
