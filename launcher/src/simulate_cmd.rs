//! `topo-run simulate`: runs the simulator, `topo-run-simulate`, installed beside
//! `topo-run` (or in `../libexec/topo-run/` from it), with the same arguments. It needs
//! no allocation and no MPI; docs/simulate.md describes it. `--calibrate` is an MPI job
//! step: it runs as a launch whose program is the simulator, so that its ranks have a
//! plan and measure topo-run's own shared memory.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use clap::Parser;

use crate::cli::{JobArgs, LaunchArgs};

/// The simulator's file name.
pub const SIMULATOR: &str = "topo-run-simulate";

/// The job's options as the environment sets them (`TOPO_RUN_*`), for `--calibrate`.
#[derive(Parser)]
struct EnvJob {
    #[command(flatten)]
    job: JobArgs,
}

/// Replaces this process with the simulator, or with a launch of it for `--calibrate`.
/// Returns only on error.
pub fn run(args: &[OsString]) -> anyhow::Result<()> {
    let simulator = crate::helper::find(SIMULATOR)?;
    // Outside a job step the simulator itself says what --calibrate needs.
    let in_step = ["PMIX_RANK", "SLURM_PROCID"]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
    if in_step
        && args
            .iter()
            .any(|a| a == "--calibrate" || a.to_string_lossy().starts_with("--calibrate="))
    {
        let mut job = EnvJob::try_parse_from(["topo-run"])?.job;
        if let Some(map) = network_map(args) {
            job.network_map = Some(map);
        }
        let mut program = vec![simulator.into_os_string()];
        program.extend(args.iter().cloned());
        let launch = LaunchArgs {
            job,
            show: None,
            preload: false,
            no_preload: true,
            profile: None,
            native: false,
            program,
        };
        return crate::launch::run(&launch);
    }
    let err = Command::new(&simulator).args(args).exec();
    Err(anyhow::Error::new(err).context(format!("cannot run {}", simulator.display())))
}

/// The simulator's `--network-map FILE` (or `--network-map=FILE`): the calibration's
/// classes between nodes, and the plan's switch levels.
fn network_map(args: &[OsString]) -> Option<PathBuf> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let a = a.to_string_lossy();
        if a == "--network-map" {
            return it.next().map(PathBuf::from);
        }
        if let Some(v) = a.strip_prefix("--network-map=") {
            return Some(PathBuf::from(v));
        }
    }
    None
}
