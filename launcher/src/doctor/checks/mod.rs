//! The checks of `topo-run doctor`, one function each, and the parsers of what Slurm's
//! tools print (pure, unit-tested): `slurm.rs` Slurm and the network map, `mpi.rs` PMIx
//! and the MPI libraries, `node.rs` the node (shared memory, limits, single copy,
//! binding); this file runs the external commands they ask.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod mpi;
mod node;
mod slurm;
#[cfg(test)]
mod tests;

pub use mpi::*;
pub use node::*;
pub use slurm::*;

/// How long any one external command (srun, scontrol, sinfo, ldconfig) may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(20);

/// Runs a command with a time limit; its stdout, or a message naming what went wrong.
pub fn output_of(program: &str, args: &[&str]) -> Result<String, String> {
    let shown = format!("{program} {}", args.join(" "));
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("`{shown}` cannot run: {e}"))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() > COMMAND_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "`{shown}` did not answer within {} s",
                    COMMAND_TIMEOUT.as_secs()
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("`{shown}`: {e}")),
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("`{shown}`: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!("`{shown}` failed ({}): {first}", out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}
