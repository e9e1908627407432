//! `topo-run tune`: a launch whose program is the tuner, `topo-run-tune`, installed beside
//! `topo-run` (or in `../libexec/topo-run/` from it).

use std::ffi::OsString;

use crate::cli::{LaunchArgs, TuneArgs};
use crate::plan_cmd::UsageError;

/// The tuner's file name.
pub const TUNER: &str = "topo-run-tune";

/// Runs the launch with the tuner as its program. Returns only on error.
pub fn run(args: &TuneArgs) -> anyhow::Result<()> {
    for (name, value) in [("--min", &args.min), ("--max", &args.max)] {
        topo_hierarchy::settings::parse_bytes(value)
            .map_err(|e| UsageError(format!("{name}: {e}")))?;
    }
    for op in args.ops.split(',') {
        let known = ["alltoall", "reduce-scatter"].contains(&op)
            || op.parse::<topo_hierarchy::settings::Collective>().is_ok();
        if !known {
            return Err(UsageError(format!(
                "--ops: unknown collective {op:?}; use bcast, reduce, allreduce, allgather, \
                 alltoall, reduce-scatter"
            ))
            .into());
        }
    }
    // Bad settings are named before anything is looked for.
    args.job.runtime.settings()?;
    let tuner = crate::helper::find(TUNER)?;
    let mut program: Vec<OsString> = vec![tuner.into()];
    program.extend(
        [
            "--budget".to_string(),
            args.budget.to_string(),
            "--ops".into(),
            args.ops.clone(),
            "--min".into(),
            args.min.clone(),
            "--max".into(),
            args.max.clone(),
            "--output".into(),
        ]
        .map(OsString::from),
    );
    program.push(args.output.clone().into());
    let launch = LaunchArgs {
        job: args.job.clone(),
        show: None,
        preload: false,
        no_preload: true,
        profile: None,
        native: false,
        program,
    };
    crate::launch::run(&launch)
}
