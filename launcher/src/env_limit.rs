//! What `exec` can pass: the kernel's limit on one environment string, and each rank's
//! plan checked against it (exit code 15).

use topo_hierarchy::PLAN_ENV;

/// The kernel's limit for one environment string (`MAX_ARG_STRLEN`, 32 pages), including
/// the name, the `=` and the terminating NUL.
const MAX_ENV_STRING: usize = 32 * 4096;

/// The plan, or the program's whole environment and arguments, is too large for `exec`
/// (exit code 15).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct TooLarge(pub String);

/// Fails if `TOPO_RUN_PLAN=plan` cannot be passed through `exec` (`MAX_ENV_STRING`).
pub fn check_plan_size(rank: u32, plan: &str) -> std::result::Result<(), TooLarge> {
    let bytes = PLAN_ENV.len() + 1 + plan.len() + 1;
    if bytes > MAX_ENV_STRING {
        return Err(TooLarge(format!(
            "rank {rank}'s plan takes {bytes} bytes, more than the {MAX_ENV_STRING} bytes the \
             kernel allows for one environment string; its groups' members form no regular \
             ranges (check with: topo-run plan --job ... --format env); place ranks in \
             blocks (srun --distribution=block) or drop levels with --levels"
        )));
    }
    Ok(())
}
