//! Simulated failures, for the tests of topo-run's error paths: `TOPO_RUN_FAULT` holds a
//! comma-separated list of points, and the code at each listed point fails as if the
//! system (or a bug) had made it fail. Unset in production; reading it costs one check
//! of a cached value.
//!
//! | point | effect |
//! |---|---|
//! | `shm-unlink` | the node leader cannot remove its segment's name after setup |
//! | `no-single-copy` | this rank cannot read its node peers' memory (as where Yama's `ptrace_scope` forbids `process_vm_readv`) |
//! | `panic:CALL` | the PMPI library's `CALL` (for example `MPI_Reduce`) panics on entry |
//! | `no-communicator` | MPI has no room for a context's own communicators (MPICH's 2,048 per process) when a context is set up by `Topo::for_comm` (not world's, nor a congruent communicator's at its creation) |
//! | `mpi-error` | MPI reports an error on a context's own network communicator as it is set up (as for a failed peer or link): its error handler runs |

use std::sync::OnceLock;

/// The variable that lists the points.
pub const FAULT_ENV: &str = "TOPO_RUN_FAULT";

fn points() -> &'static [String] {
    static POINTS: OnceLock<Vec<String>> = OnceLock::new();
    POINTS.get_or_init(|| {
        std::env::var(FAULT_ENV)
            .map(|v| parse(&v))
            .unwrap_or_default()
    })
}

fn parse(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect()
}

/// Whether the failure at `point` is to be simulated.
pub fn hit(point: &str) -> bool {
    points().iter().any(|p| p == point)
}

/// Panics at `call`'s entry if `panic:CALL` is listed.
pub fn maybe_panic(call: &str) {
    if points()
        .iter()
        .any(|p| p.strip_prefix("panic:") == Some(call))
    {
        panic!("simulated internal error ({FAULT_ENV}=panic:{call})");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_are_split_and_trimmed() {
        assert_eq!(
            parse(" shm-unlink, panic:MPI_Reduce,,"),
            ["shm-unlink", "panic:MPI_Reduce"]
        );
        assert!(parse("").is_empty());
    }
}
