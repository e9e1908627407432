//! `topo-run plan`: read a job description and a network map, build the hierarchy, print it.

use std::io::{self, BufWriter, Write};

use anyhow::Result;

use crate::cli::{Format, PlanArgs};
use crate::env_limit::check_plan_size;
use crate::planned::plan;
use crate::render;

/// A command-line value that is valid syntax but out of range (exit code 2).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for UsageError {}

/// Runs `topo-run plan`.
pub fn run(args: &PlanArgs) -> Result<()> {
    let planned = plan(args)?;
    let size = planned.hierarchy.size();
    if let Some(r) = args.rank
        && r >= size
    {
        return Err(UsageError(format!(
            "--rank {r} is out of range: the job has {size} ranks (0..{})",
            size - 1
        ))
        .into());
    }
    let ranks: Box<dyn Iterator<Item = u32>> = match args.rank {
        Some(r) => Box::new(std::iter::once(r)),
        None => Box::new(0..size),
    };
    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    match args.format {
        Format::Json => render::json(&planned, ranks, &mut out)?,
        Format::Text => render::text(&planned, args.rank, &mut out)?,
        Format::Dot => render::dot(&planned, &mut out)?,
        Format::Env => {
            for r in ranks {
                let node = planned.job.node_name(planned.job.node_of(r));
                let shm = format!("/topo-run.offline.0.{node}");
                let plan = planned.hierarchy.rank_plan(
                    &planned.job,
                    r,
                    &shm,
                    planned.digest,
                    planned.settings.clone(),
                );
                let encoded = plan.encode();
                // The launcher would refuse this rank (exit 15): say so beside the value.
                if let Err(e) = check_plan_size(r, &encoded) {
                    eprintln!("topo-run: warning: {e}");
                }
                writeln!(out, "TOPO_RUN_PLAN={encoded}")?;
            }
        }
    }
    out.flush()?;
    Ok(())
}
