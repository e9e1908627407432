//! Documented exit codes of `topo-run`. Scripts may rely on them; never renumber.

use topo_hierarchy::ErrorKind;

/// Success.
pub const OK: u8 = 0;
/// An unexpected failure (for example, stdout closed while printing).
pub const INTERNAL: u8 = 1;
/// Bad command line (unknown option, bad value, `--rank` out of range).
pub const USAGE: u8 = 2;
/// An input file could not be read.
pub const INPUT_UNREADABLE: u8 = 3;
/// The job description is invalid.
pub const BAD_JOB: u8 = 4;
/// The network map is invalid (syntax, two parents, cycle, mixed children, unknown or
/// duplicate switch).
pub const BAD_NETWORK_MAP: u8 = 5;
/// A node of the job is missing from the network map.
pub const NODE_NOT_IN_MAP: u8 = 6;
/// The level list (`--levels`) is invalid.
pub const BAD_LEVELS: u8 = 7;
/// A locality string is malformed.
pub const BAD_LOCALITY: u8 = 8;
/// The plan in the environment is missing or corrupted.
pub const BAD_PLAN: u8 = 9;

/// A task is not bound to CPUs (and `--allow-unbound` was not given).
pub const UNBOUND: u8 = 10;
/// Discovery failed: not under srun or mpirun, PMIx errors, an incomplete or inconsistent
/// Slurm environment, unusable binding information, no hwloc topology.
pub const DISCOVERY: u8 = 11;
/// The task's CPU mask differs from the one Slurm reports for it.
pub const MASK_MISMATCH: u8 = 12;
/// A runtime setting (`--bcast`, `TOPO_RUN_SLOTS`, ...) is invalid.
pub const BAD_SETTINGS: u8 = 13;
/// `--preload` was given but the PMPI library cannot be found.
pub const PRELOAD_MISSING: u8 = 14;
/// The plan (or the whole environment) is too large to pass to the program through `exec`.
pub const TOO_LARGE: u8 = 15;
/// `topo-run doctor` found at least one problem that stops topo-run (a FAIL).
pub const DOCTOR_FAILED: u8 = 16;
/// `topo-run simulate --model`: the cost model file is invalid.
pub const BAD_MODEL: u8 = 17;
/// The program exists but cannot be executed (as in a shell).
pub const PROGRAM_NOT_EXECUTABLE: u8 = 126;
/// The program was not found (as in a shell).
pub const PROGRAM_NOT_FOUND: u8 = 127;

/// The exit code for an error of the hierarchy model.
pub fn for_kind(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Job | ErrorKind::Hostlist => BAD_JOB,
        ErrorKind::NetworkMap => BAD_NETWORK_MAP,
        ErrorKind::NodeNotInMap => NODE_NOT_IN_MAP,
        ErrorKind::Levels => BAD_LEVELS,
        ErrorKind::Locality => BAD_LOCALITY,
        ErrorKind::Plan => BAD_PLAN,
        ErrorKind::Settings => BAD_SETTINGS,
    }
}

/// Every exit code with its meaning, as `--help`, `topo-run(7)` and docs/exit-codes.md give
/// them (a test keeps the doc in step).
pub const TABLE: &[(u8, &str)] = &[
    (OK, "success"),
    (INTERNAL, "unexpected internal failure"),
    (USAGE, "bad command line (also --rank out of range)"),
    (INPUT_UNREADABLE, "an input file cannot be read"),
    (BAD_JOB, "invalid job description"),
    (BAD_NETWORK_MAP, "invalid network map"),
    (
        NODE_NOT_IN_MAP,
        "a node of the job is missing from the network map",
    ),
    (BAD_LEVELS, "invalid --levels list"),
    (BAD_LOCALITY, "malformed locality string"),
    (BAD_PLAN, "missing or corrupted plan in the environment"),
    (
        UNBOUND,
        "a task is not bound to CPUs (fix: srun --cpu-bind=cores, or --allow-unbound)",
    ),
    (
        DISCOVERY,
        "discovery failed (not under srun/mpirun, PMIx error, bad Slurm environment)",
    ),
    (
        MASK_MISMATCH,
        "a task's CPU mask differs from what Slurm reports for it",
    ),
    (
        BAD_SETTINGS,
        "invalid runtime setting (--bcast, --reduce, --allreduce, TOPO_RUN_SLOTS, ...) or --rules file line",
    ),
    (
        PRELOAD_MISSING,
        "--preload given but libtopo_preload.so not found (set TOPO_RUN_PRELOAD_LIB)",
    ),
    (
        TOO_LARGE,
        "the plan (or the environment) is too large to pass to the program",
    ),
    (
        DOCTOR_FAILED,
        "topo-run doctor found a problem that stops topo-run (a FAIL line names it and the fix)",
    ),
    (
        BAD_MODEL,
        "topo-run simulate: invalid cost model file (the message names the line)",
    ),
    (PROGRAM_NOT_EXECUTABLE, "the program cannot be executed"),
    (PROGRAM_NOT_FOUND, "the program was not found"),
];

/// The table printed in `--help`.
pub fn help_table() -> String {
    let mut text = String::from("Exit codes:\n");
    for (code, meaning) in TABLE {
        text.push_str(&format!("{code:>3}  {meaning}\n"));
    }
    text.push_str("Otherwise the program's own exit status.");
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_documented_once_in_the_docs() {
        let doc = include_str!("../../docs/exit-codes.md");
        for (code, _) in TABLE {
            let row = format!("\n| {code} |");
            assert_eq!(
                doc.matches(&row).count(),
                1,
                "docs/exit-codes.md row {code}"
            );
        }
        let codes: Vec<u8> = TABLE.iter().map(|(c, _)| *c).collect();
        let mut sorted = codes.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(codes, sorted, "codes listed once, in order");
    }
}
