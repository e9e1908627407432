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

/// The table printed in `--help` and kept in step with docs/exit-codes.md.
pub const HELP_TABLE: &str = "\
Exit codes:
  0  success
  1  unexpected internal failure
  2  bad command line (also --rank out of range)
  3  an input file cannot be read
  4  invalid job description
  5  invalid network map
  6  a node of the job is missing from the network map
  7  invalid --levels list
  8  malformed locality string
  9  missing or corrupted plan in the environment
 10  a task is not bound to CPUs (fix: srun --cpu-bind=cores, or --allow-unbound)
 11  discovery failed (not under srun/mpirun, PMIx error, bad Slurm environment)
 12  a task's CPU mask differs from what Slurm reports for it
 13  invalid runtime setting (--bcast, --reduce, --allreduce, TOPO_RUN_SLOTS, ...) or --rules file line
 14  --preload given but libtopo_preload.so not found (set TOPO_RUN_PRELOAD_LIB)
 15  the plan (or the environment) is too large to pass to the program
126  the program cannot be executed
127  the program was not found
Otherwise the program's own exit status.";
