//! The plan of a job described in files: the job, the network map, the hierarchy and the
//! settings, as `topo-run plan` prints them (the launcher plans each rank from its own
//! discovery instead).

use anyhow::{Context, Result};
use topo_hierarchy::{Digest, Hierarchy, Job, LevelFilter, NetworkMap};

use crate::cli::{PlanArgs, RuntimeArgs};
use crate::input::{open, read_map};

/// Everything `topo-run plan` computes before printing.
pub struct Planned {
    pub job: Job,
    pub map: Option<NetworkMap>,
    pub hierarchy: Hierarchy,
    pub digest: Digest,
    /// The runtime settings written into each rank's plan.
    pub settings: Vec<(String, String)>,
}

/// Reads the inputs and builds the hierarchy.
pub fn plan(args: &PlanArgs) -> Result<Planned> {
    let settings = args.runtime.settings()?;
    let filter = match &args.levels {
        Some(list) => LevelFilter::parse(list)?,
        None => LevelFilter::all(),
    };
    let job = topo_hierarchy::job_from_reader(open(&args.job, "job description")?)
        .with_context(|| format!("{}", args.job.display()))?;
    let map = match &args.network_map {
        None => None,
        Some(path) => Some(read_map(path)?),
    };
    let hierarchy = topo_hierarchy::build(&job, map.as_ref(), &filter)?;
    let digest = Digest::of_job(
        &job,
        map.as_ref(),
        &filter,
        &RuntimeArgs::digest_text(&settings),
    );
    Ok(Planned {
        job,
        map,
        hierarchy,
        digest,
        settings,
    })
}
