//! `topo-run tune`: a launch whose program is the tuner, `topo-run-tune`, installed beside
//! `topo-run` (or in `../libexec/topo-run/` from it).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::cli::{LaunchArgs, TuneArgs};
use crate::plan_cmd::UsageError;

/// The tuner's file name.
pub const TUNER: &str = "topo-run-tune";

/// The tuner is not installed where topo-run looks for it.
#[derive(Debug, thiserror::Error)]
#[error(
    "{TUNER} not found (looked in {}); install it beside topo-run (cargo build --release \
     builds both into target/release)",
    .looked.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
)]
pub struct TunerMissing {
    /// Where it was looked for.
    pub looked: Vec<PathBuf>,
}

/// Where the tuner may be, for the launcher at `exe`.
pub fn candidates(exe: &Path) -> Vec<PathBuf> {
    let Some(dir) = exe.parent() else {
        return Vec::new();
    };
    vec![dir.join(TUNER), dir.join("../libexec/topo-run").join(TUNER)]
}

/// Runs the launch with the tuner as its program. Returns only on error.
pub fn run(args: &TuneArgs) -> anyhow::Result<()> {
    for (name, value) in [("--min", &args.min), ("--max", &args.max)] {
        topo_hierarchy::settings::parse_bytes(value)
            .map_err(|e| UsageError(format!("{name}: {e}")))?;
    }
    for op in args.ops.split(',') {
        if !["bcast", "reduce", "allreduce"].contains(&op) {
            return Err(UsageError(format!(
                "--ops: unknown collective {op:?}; use bcast, reduce, allreduce"
            ))
            .into());
        }
    }
    // Bad settings are named before anything is looked for.
    args.job.runtime.settings()?;
    let exe = std::env::current_exe()?;
    let looked = candidates(&exe);
    let Some(tuner) = looked.iter().find(|p| p.is_file()).cloned() else {
        return Err(TunerMissing { looked }.into());
    };
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
        program,
    };
    crate::launch::run(&launch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tuner_is_looked_for_beside_topo_run_and_in_libexec() {
        let c = candidates(Path::new("/opt/topo-run/bin/topo-run"));
        assert_eq!(
            c,
            [
                PathBuf::from("/opt/topo-run/bin/topo-run-tune"),
                PathBuf::from("/opt/topo-run/bin/../libexec/topo-run/topo-run-tune"),
            ]
        );
    }
}
