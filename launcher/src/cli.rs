//! Command-line definition. Every flag has an environment equivalent where that makes sense,
//! and `--help` carries examples.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::exit_codes::HELP_TABLE;

const ABOUT: &str = "Topology-aware MPI collectives on Slurm.";

const PLAN_EXAMPLES: &str = "\
Examples:
  # The paper's example: 3 nodes x 36 ranks, 16 nodes per leaf switch
  topo-run plan --job examples/jobs/paper.yaml --network-map examples/maps/paper.yaml

  # One rank's groups as JSON, only NUMA and node levels
  topo-run plan --job job.yaml --levels numa,node --rank 0 --format json

  # A picture of the hierarchy
  topo-run plan --job job.yaml --network-map /etc/slurm/topology.conf --format dot | dot -Tpng -o plan.png

  # The exact TOPO_RUN_PLAN value rank 5 would receive
  topo-run plan --job job.yaml --rank 5 --format env";

/// topo-run: topology-aware MPI collectives on Slurm.
#[derive(Debug, Parser)]
#[command(name = "topo-run", version, about = ABOUT, after_help = HELP_TABLE)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show the process-group hierarchy of a job offline, without a cluster.
    ///
    /// The job file (YAML or JSON) lists every rank's node and PMIx locality string, or
    /// describes a regular layout (nodes, hardware shape, ranks per node, mapping). See
    /// docs/job-file.md.
    #[command(after_help = format!("{PLAN_EXAMPLES}\n\n{HELP_TABLE}"))]
    Plan(PlanArgs),
}

#[derive(Debug, clap::Args)]
pub struct PlanArgs {
    /// Job description file (YAML or JSON): a `ranks:` list or a `layout:`.
    #[arg(long, value_name = "FILE")]
    pub job: PathBuf,

    /// Network map: topo-run YAML, Slurm topology.conf or Slurm topology.yaml (detected
    /// from the content). Without a map there are no switch levels.
    #[arg(long, value_name = "FILE", env = "TOPO_RUN_NETWORK_MAP")]
    pub network_map: Option<PathBuf>,

    /// Keep only these levels, comma-separated: core, l1, l2, l3, numa, socket, node,
    /// switch1..switchN (`switch` for all), world. `world` is always kept.
    #[arg(long, value_name = "LIST", env = "TOPO_RUN_LEVELS")]
    pub levels: Option<String>,

    /// Print only this rank's plan.
    #[arg(long, value_name = "R")]
    pub rank: Option<u32>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A readable picture: nodes, sockets, NUMA nodes, groups and their leaders.
    Text,
    /// `{"version":1,"size":N,"levels":[..],"ranks":[{"rank":0,"node":..,"groups":[..]},..]}`.
    Json,
    /// Graphviz; render with `dot -Tpng`.
    Dot,
    /// The `TOPO_RUN_PLAN=...` line each selected rank would receive.
    Env,
}
