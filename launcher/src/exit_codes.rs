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

/// The exit code for an error of the hierarchy model.
pub fn for_kind(kind: ErrorKind) -> u8 {
    match kind {
        ErrorKind::Job | ErrorKind::Hostlist => BAD_JOB,
        ErrorKind::NetworkMap => BAD_NETWORK_MAP,
        ErrorKind::NodeNotInMap => NODE_NOT_IN_MAP,
        ErrorKind::Levels => BAD_LEVELS,
        ErrorKind::Locality => BAD_LOCALITY,
        ErrorKind::Plan => BAD_PLAN,
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
  9  missing or corrupted plan in the environment";
