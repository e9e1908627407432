//! `topo-run simulate`: runs the simulator, `topo-run-simulate`, installed beside
//! `topo-run` (or in `../libexec/topo-run/` from it), with the same arguments. It needs
//! no allocation and no MPI; docs/simulate.md describes it.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The simulator's file name.
pub const SIMULATOR: &str = "topo-run-simulate";

/// Replaces this process with the simulator. Returns only on error.
pub fn run(args: &[OsString]) -> anyhow::Result<()> {
    let simulator = crate::helper::find(SIMULATOR)?;
    let err = Command::new(&simulator).args(args).exec();
    Err(anyhow::Error::new(err).context(format!("cannot run {}", simulator.display())))
}
