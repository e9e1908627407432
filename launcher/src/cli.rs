//! Command-line definition. Every flag has an environment equivalent where that makes sense,
//! and `--help` carries examples.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};

use crate::exit_codes::help_table;

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

const LAUNCH_EXAMPLES: &str = "\
Usage in a job script: replace `mpirun ./app` with
  srun --mpi=pmix topo-run [OPTIONS] -- ./app [ARGS]...

Examples:
  # Every rank gets its plan, then becomes ./app (same PID, signals and exit code)
  srun --mpi=pmix --cpu-bind=cores topo-run -- ./app input.dat

  # Print each rank's plan to stderr before the app starts
  srun --mpi=pmix -N2 -n8 topo-run --show -- ./app

  # Only NUMA, node and leaf-switch groups, with an explicit network map
  srun --mpi=pmix topo-run --levels numa,node,switch1 --network-map net.yaml -- ./app

  # What exactly did each rank receive?
  srun --mpi=pmix -n4 topo-run -- topo-run show --format json

  # No PMIx (srun --mpi=none or pmi2): the rank map comes from Slurm's environment
  srun --mpi=none -n4 topo-run -- ./app

  # An unmodified C/Fortran MPI program: its collectives go through libtopo_preload.so;
  # each node leader prints at MPI_Finalize which calls took topo-run's path
  srun --mpi=pmix topo-run -- env TOPO_RUN_STATS=1 ./app     (or export TOPO_RUN_STATS=1)

  # Where does the program spend its collective time? The same program both ways:
  srun --mpi=pmix topo-run -v --profile topo.json -- ./app
  srun --mpi=pmix topo-run -v --profile native.json --native -- ./app

Environment:
  TOPO_RUN_LEVELS, TOPO_RUN_NETWORK_MAP, TOPO_RUN_ALLOW_UNBOUND, TOPO_RUN_SHOW,
  TOPO_RUN_PRELOAD (auto, 1, 0) and TOPO_RUN_VERBOSE stand in for the options.
  TOPO_RUN_PRELOAD_LIB names the PMPI library (default: libtopo_preload.so beside
  topo-run, or in ../lib/topo-run/ or ../lib/ from it). TOPO_RUN_STATS=1 makes the
  library report its calls at MPI_Finalize. Without a network map, topo-run uses Slurm's
  topology.conf (else topology.yaml) beside $SLURM_CONF if there is one. The program receives TOPO_RUN_PLAN
  (see docs/plan-format.md) and PMIX_MCA_gds=hash.";

/// topo-run: topology-aware MPI collectives on Slurm.
///
/// Started by srun once per task, topo-run finds where every rank runs, checks CPU
/// binding, computes this rank's process groups (cache, NUMA, socket, node, switches),
/// exports them in TOPO_RUN_PLAN and replaces itself with the program.
#[derive(Debug, Parser)]
#[command(
    name = "topo-run",
    version,
    about = ABOUT,
    override_usage = "srun --mpi=pmix topo-run [OPTIONS] [--] PROGRAM [ARGS]...\n       \
                      topo-run plan --job FILE [OPTIONS]\n       \
                      topo-run show [--format text|json]\n       \
                      srun --mpi=pmix topo-run tune [--budget SECONDS] [-o FILE] [OPTIONS]\n       \
                      topo-run doctor [OPTIONS]\n       \
                      topo-run generate man DIR | completion SHELL",
    after_help = format!("{LAUNCH_EXAMPLES}\n\n{}", help_table()),
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub launch: LaunchArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Show the process-group hierarchy of a job offline, without a cluster.
    ///
    /// The job file (YAML or JSON) lists every rank's node and PMIx locality string, or
    /// describes a regular layout (nodes, hardware shape, ranks per node, mapping). See
    /// docs/job-file.md.
    #[command(after_help = format!("{PLAN_EXAMPLES}\n\n{}", help_table()))]
    Plan(Box<PlanArgs>),

    /// Print the plan this process received from topo-run (TOPO_RUN_PLAN), one line.
    ///
    /// Run it as the program: `srun --mpi=pmix topo-run -- topo-run show --format json`.
    #[command(after_help = SHOW_HELP)]
    Show(ShowArgs),

    /// Measure the runtime's algorithms and settings on this machine and write a rules
    /// file for `topo-run --rules`.
    ///
    /// Run it inside an allocation, as a job step like any program: every rank gets its
    /// plan, then runs topo-run-tune (installed beside topo-run). Starting from the
    /// settings given here (the defaults, options, or a rules file with --rules), it tries,
    /// one at a time and against the current choice in the same job: the single-copy
    /// threshold, the fragment size and the slots per queue, and on several nodes the form
    /// of Gatherv and Scatterv (one value each, kept only if it pays overall and hurts at
    /// no size), then per level and message size the broadcast and reduce algorithms, then
    /// the allreduce variant, the allgather algorithm and the alltoall and
    /// Reduce_scatter_block forms, and, where ranks have two or more levels, each
    /// collective's pipeline chunk per message size. It
    /// ends by timing the settings it started from against the tuned ones at every size,
    /// prints that table and keeps it in the file's comments. Rank 0 writes the file.
    #[command(after_help = TUNE_HELP)]
    Tune(Box<TuneArgs>),

    /// Check that this cluster is set up the way topo-run needs, and say how to fix what
    /// is not.
    ///
    /// On a login node: Slurm's version and MPI plugins, its binding policy, the network
    /// map (found, valid, naming every node), PMIx, the MPI libraries and the PMPI library
    /// for each, shared memory and limits, single copy (process_vm_readv between sibling
    /// processes, Yama's ptrace_scope) and hwloc's view of the node. As a job step
    /// (`srun --mpi=pmix topo-run doctor`) also every task's binding, and rank 0 prints
    /// one report of every task's and checks that they agree. Each line is OK, INFO,
    /// WARN (works, but not as well as it could) or FAIL (topo-run stops or gives up its
    /// own collectives); WARN and FAIL lines name the fix.
    #[command(after_help = DOCTOR_HELP)]
    Doctor(Box<DoctorArgs>),

    /// Predict topo-run's collective times, and those of the flat algorithms MPI
    /// libraries use, on a cluster described by a job and a network map.
    ///
    /// Offline, like `plan`: no allocation, no MPI. It runs topo-run's own schedules (the
    /// ones its nonblocking collectives run, built from the job's real plans) and the flat
    /// algorithms (binomial, recursive doubling, ring, Rabenseifner, dissemination, Bruck)
    /// in virtual time over a cost model per link class (L2 to world), and prints each
    /// one's time, its ratio to topo-run's and its traffic per link class. The options
    /// are those of topo-run-simulate (installed beside topo-run):
    /// `topo-run simulate --help` prints them, docs/simulate.md describes the model.
    #[command(disable_help_flag = true, after_help = SIMULATE_HELP)]
    Simulate(SimulateArgs),

    /// Write the man pages or a shell completion script (for installers and packagers).
    ///
    /// The pages and scripts come from this program's own option definitions, so they
    /// always match `--help`. scripts/install.sh runs this.
    #[command(after_help = GENERATE_HELP)]
    Generate(GenerateArgs),
}

const GENERATE_HELP: &str = "\
Examples:
  # topo-run.1, topo-run-plan.1, ... and topo-run.7 (environment, exit codes, files)
  topo-run generate man /usr/local/share/man/man1

  # Completions, for this shell session or an installed tree
  source <(topo-run generate completion bash)
  topo-run generate completion zsh > ~/.zfunc/_topo-run
  topo-run generate completion fish > ~/.config/fish/completions/topo-run.fish";

const DOCTOR_HELP: &str = "\
Examples:
  # On a login node
  topo-run doctor

  # In an allocation: every node and task, and whether they agree
  srun --mpi=pmix -N4 --ntasks-per-node=2 topo-run doctor

  # With the settings and map the jobs will use
  topo-run doctor --slots 16 --network-map /etc/topo-run/net.yaml

  # For monitoring: one JSON object
  topo-run doctor --format json

Exit codes: 0 when nothing failed (warnings allowed), 16 when a check failed.";

/// Options of `topo-run doctor`.
#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// The network map to check instead of Slurm's topology.conf or topology.yaml beside
    /// $SLURM_CONF.
    #[arg(long, value_name = "FILE", env = "TOPO_RUN_NETWORK_MAP")]
    pub network_map: Option<PathBuf>,

    /// Output format: `text` (a line per finding, then `fix:` lines) or `json` (one
    /// object: title, findings with check, scope, status, text and fix, and the counts).
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = ReportFormat::Text)]
    pub format: ReportFormat,

    /// Remove the shared-memory segments that jobs which died during their setup left in
    /// /dev/shm (or TOPO_RUN_SHM_DIR): files named topo-run.* that no live process holds.
    /// Without it, doctor only lists them. The next launch on a node removes them too.
    #[arg(long)]
    pub remove_leftovers: bool,

    /// (Internal) the first process of the single-copy probe.
    #[arg(long, hide = true)]
    pub probe_hold: bool,

    /// (Internal) the second process of the single-copy probe.
    #[arg(long, hide = true, num_args = 2, value_names = ["PID", "ADDRESS"])]
    pub probe_read: Option<Vec<String>>,

    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

/// Options of `topo-run generate`.
#[derive(Debug, clap::Args)]
pub struct GenerateArgs {
    #[command(subcommand)]
    pub what: Generate,
}

/// What `topo-run generate` writes.
#[derive(Debug, Subcommand)]
pub enum Generate {
    /// Man pages, into DIR (created if missing); prints the paths written. The section 7
    /// page goes into DIR too: move it to man7/ when installing.
    Man {
        /// Directory to write the pages into.
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
    /// A completion script for SHELL, on stdout.
    Completion {
        /// bash, zsh, fish, elvish or powershell.
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
}

const SIMULATE_HELP: &str = "\
Examples:
  # What the hierarchy gains on your cluster (a job file as for topo-run plan)
  topo-run simulate --job job.yaml --network-map /etc/slurm/topology.conf

  # Your own link costs; only the allreduce, at 8 bytes and 1 MiB
  topo-run simulate --print-model > site.model     # the defaults, to edit
  topo-run simulate --job job.yaml --model site.model --ops allreduce --sizes 8,1M

  # Machine-readable
  topo-run simulate --job job.yaml --format json > prediction.json

Exit codes as topo-run's; 17: invalid cost model.";

const TUNE_HELP: &str = "\
Examples:
  # Ten minutes on one node, bound as the applications will be
  srun --mpi=pmix -N1 --ntasks-per-node=64 --cpu-bind=cores topo-run tune --budget 600 -o site.rules

  # Then, in every job script (or TOPO_RUN_RULES=site.rules in a module file)
  srun --mpi=pmix topo-run --rules site.rules -- ./app

  # Start from a rules file, tune only the broadcast, up to 1 MiB
  srun --mpi=pmix topo-run tune --rules site.rules --ops bcast --max 1M -o site2.rules

Tune where the jobs run: the same node type, ranks per node and binding, and several
nodes if jobs span switches (each level present is tuned). With more ranks than cores
pass --spin 0, as the jobs would. The budget bounds the whole run; what it cannot reach
keeps its current setting. Output: progress lines on stderr, the comparison table on
stdout, the file from rank 0 (docs/runtime.md, \"Tuning\").

Exit codes: as for a launch (see topo-run --help); 1 if the tuner fails (its message
says why), 127 if topo-run-tune is not installed beside topo-run.";

/// Arguments of `topo-run simulate`: passed on to topo-run-simulate as they are.
#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// The simulator's options (`topo-run simulate --help`).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "OPTIONS"
    )]
    pub args: Vec<std::ffi::OsString>,
}

/// Options of `topo-run tune`.
#[derive(Debug, clap::Args)]
pub struct TuneArgs {
    /// Seconds the whole run may take; measurements are spread over it.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub budget: u64,

    /// The rules file to write (by rank 0; replaced if it exists).
    #[arg(long, short, value_name = "FILE", default_value = "topo-run.rules")]
    pub output: PathBuf,

    /// Collectives to tune, comma-separated: bcast, reduce, allreduce, allgather (an
    /// allgather's sizes are the whole gathered result), alltoall and reduce-scatter
    /// (Reduce_scatter_block; their sizes are the whole of one rank's blocks, their rules
    /// take one block).
    #[arg(
        long,
        value_name = "LIST",
        default_value = "bcast,reduce,allreduce,allgather,alltoall,reduce-scatter"
    )]
    pub ops: String,

    /// Smallest message measured, in bytes (K, M suffixes).
    #[arg(long, value_name = "BYTES", default_value = "4")]
    pub min: String,

    /// Largest message measured, in bytes (sizes go up by factors of 4 from 4 bytes).
    #[arg(long, value_name = "BYTES", default_value = "16M")]
    pub max: String,

    #[command(flatten)]
    pub job: JobArgs,
}

const SHOW_HELP: &str = "\
JSON form, one line per rank (groups shortened here):
  {\"rank\":0,\"size\":4,\"node\":\"node1\",\"groups\":[{\"level\":\"node\",..},..]}

Exit codes: 0 success, 9 TOPO_RUN_PLAN missing or corrupted.";

/// Options of the launcher (`topo-run [OPTIONS] -- PROGRAM`).
#[derive(Debug, clap::Args)]
pub struct LaunchArgs {
    /// Each rank prints its plan to stderr, one line, before the program starts.
    #[arg(
        long,
        value_enum,
        value_name = "FORMAT",
        env = "TOPO_RUN_SHOW",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "text"
    )]
    pub show: Option<ShowFormat>,

    /// Always preload topo-run's PMPI library (libtopo_preload.so), so that the
    /// program's collectives (Bcast, Reduce, Allreduce, Barrier, Allgather(v), Gather(v),
    /// Scatter(v), Alltoall(v), Reduce_scatter(_block), Scan, Exscan and their nonblocking
    /// forms) take topo-run's path. Default (TOPO_RUN_PRELOAD=auto): preload into
    /// dynamically linked MPI programs built against the library's MPI that do not call
    /// topo-runtime themselves, and into Python programs that use mpi4py.
    /// TOPO_RUN_PRELOAD=1 is the same as this option.
    #[arg(long, overrides_with = "no_preload")]
    pub preload: bool,

    /// Never preload the PMPI library: the program's collectives are MPI's own
    /// (TOPO_RUN_PRELOAD=0).
    #[arg(long, overrides_with = "preload")]
    pub no_preload: bool,

    /// Profile the program's collective calls through the PMPI library: per call and
    /// communicator kind the calls, their sizes, their time and how many took topo-run's
    /// path. Rank 0 writes FILE (JSON, docs/profile.md) at MPI_Finalize; with -v it also
    /// prints a table.
    #[arg(long, value_name = "FILE", env = "TOPO_RUN_PROFILE")]
    pub profile: Option<PathBuf>,

    /// Load the PMPI library but leave every collective to MPI's own (TOPO_RUN_NATIVE=1):
    /// with --profile, a profile of MPI's collectives to compare with topo-run's.
    #[arg(long, env = "TOPO_RUN_NATIVE", value_parser = clap::builder::FalseyValueParser::new())]
    pub native: bool,

    // Last among the options: its runtime settings have their own help heading.
    #[command(flatten)]
    pub job: JobArgs,

    /// The program to run and its arguments, passed through untouched (no shell).
    #[arg(
        value_name = "PROGRAM",
        trailing_var_arg = true,
        allow_hyphen_values = true,
        required = true,
        num_args = 1..
    )]
    pub program: Vec<OsString>,
}

/// What every launch needs, a program's or the tuner's: where the ranks' placement comes
/// from, the levels, the network map and the runtime settings.
#[derive(Debug, Clone, clap::Args)]
pub struct JobArgs {
    /// Keep only these levels, comma-separated: core, l1, l2, l3, numa, socket, node,
    /// switch1..switchN (`switch` for all), world. `world` is always kept.
    #[arg(long, value_name = "LIST", env = "TOPO_RUN_LEVELS")]
    pub levels: Option<String>,

    /// Network map: topo-run YAML, Slurm topology.conf or topology.yaml. Default: Slurm's
    /// topology.conf (else topology.yaml) beside $SLURM_CONF if one exists, else no switch
    /// levels.
    #[arg(long, value_name = "FILE", env = "TOPO_RUN_NETWORK_MAP")]
    pub network_map: Option<PathBuf>,

    /// Run even if tasks are not bound to CPUs, without intra-node levels (one warning).
    #[arg(long, env = "TOPO_RUN_ALLOW_UNBOUND", value_parser = clap::builder::FalseyValueParser::new())]
    pub allow_unbound: bool,

    /// Where the placement of ranks comes from. `auto` (default): from Slurm's task
    /// environment when it determines the placement exactly (a plain srun step with a
    /// block, cyclic or plane distribution, `node` kept), which skips PMIx_Init (about
    /// 18 ms per launch); otherwise through PMIx. `pmix`: always through PMIx when it is
    /// there. `slurm`: from Slurm's environment only.
    #[arg(
        long,
        value_enum,
        value_name = "SOURCE",
        env = "TOPO_RUN_DISCOVERY",
        default_value = "auto"
    )]
    pub discovery: Discovery,

    /// Explain discovery and planning on stderr, with timings.
    #[arg(short, long, env = "TOPO_RUN_VERBOSE", value_parser = clap::builder::FalseyValueParser::new())]
    pub verbose: bool,

    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

/// The runtime settings (`topo-run` and `topo-run plan`): algorithms, queue geometry,
/// pipelining and the wait policy. They go into every rank's plan and its digest.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Runtime settings")]
pub struct RuntimeArgs {
    /// A rules file (a machine's tuned settings, `topo-run-rules 1`; see
    /// docs/runtime.md, "Rules files"). Options and variables given here as well come
    /// first: their values win, and their algorithm rules are tried before the file's.
    #[arg(long, value_name = "FILE", env = "TOPO_RUN_RULES")]
    pub rules: Option<std::path::PathBuf>,

    /// Broadcast algorithm rules for the runtime, e.g. `numa=knomial:4,node=flat`
    /// (`[SCOPE][>MEMBERS][<BYTES]=flat|binomial|knomial:K|scatter-allgather`; SCOPE is a
    /// level, intra, inter or *; `>MEMBERS`: groups of more than MEMBERS ranks).
    #[arg(long, value_name = "RULES", env = "TOPO_RUN_BCAST")]
    pub bcast: Option<String>,

    /// Reduce algorithm rules, e.g. `intra=flat,inter<64K=knomial:4` (flat, binomial,
    /// knomial:K, reduce-scatter-gather). Default: inside a node flat below 512 bytes and in
    /// groups of two, else knomial:4 below 4K and reduce-scatter-gather from there;
    /// binomial between nodes.
    #[arg(long, value_name = "RULES", env = "TOPO_RUN_REDUCE")]
    pub reduce: Option<String>,

    /// Allreduce rules: `rb` (reduce, then bcast), `rab:rd` / `rab:ring` (reduce, allreduce
    /// among the top group, bcast), or over every rank in the hierarchy's order `ring`,
    /// `rabenseifner` (the default on more than one node from 64K; from 4K with 16 ranks or
    /// more, as `rabenseifner:64K`: in pieces of 64 KiB that overlap) or `rd` (recursive
    /// doubling: the default for small messages with up to 32 ranks per node), by size, e.g.
    /// `<64K=rab:rd,*=rabenseifner:256K`.
    #[arg(long, value_name = "RULES", env = "TOPO_RUN_ALLREDUCE")]
    pub allreduce: Option<String>,

    /// Allgather rules by the gathered size: `rd` (recursive doubling over the job with
    /// TopoMPI's rank remapping; Bruck's exchange, remapped, for jobs whose size is not a
    /// power of two), `ring` (a ring over the job in node-major order), `hier:rd` (= `hier`)
    /// or `hier:ring` (up the hierarchy, an exchange among the top group by recursive
    /// doubling or ring, then down), e.g. `<1M=rd,*=ring`.
    #[arg(long, value_name = "RULES", env = "TOPO_RUN_ALLGATHER")]
    pub allgather: Option<String>,

    /// Alltoall rules by the size of one block: `spread` (one message per pair of nodes,
    /// each node's pairs dealt out over its ranks, which gather their node's blocks for the
    /// nodes they carry and hand on what they receive; the default on more than one node
    /// while that message, block x (ranks per node)^2, is below 32K), `aggregated` (every
    /// rank's blocks go up the hierarchy to the top group, whose members exchange one
    /// message per pair, then down) or `pairwise` (every rank sends each other rank its
    /// block straight), e.g. `<256=spread,*=pairwise`.
    #[arg(long, value_name = "RULES", env = "TOPO_RUN_ALLTOALL")]
    pub alltoall: Option<String>,

    /// MPI_Reduce_scatter_block rules by the size of one block: `halving` (recursive
    /// halving over every rank in the hierarchy's order, its heavy steps inside the nodes;
    /// the default while the whole contribution is below 256 KiB, but on one node of at
    /// most 2 ranks), `root` (the hierarchical Reduce to rank 0, then the hierarchical
    /// Scatter from it; the default on one node of at most 2 ranks), `leaders` (the whole
    /// contribution reduced to the top group's members, a ring reduce-scatter among them of
    /// the blocks under each, then a Scatter down from each; the default beyond on nodes of
    /// at most 2 ranks) or `allreduce` (the Allreduce of the whole contribution, of which
    /// each rank keeps its block; the default beyond on nodes of more), e.g.
    /// `<4K=halving,*=allreduce`. MPI_Reduce_scatter takes `allreduce` where the rules give
    /// it for the blocks' mean size, else `halving`.
    #[arg(long, value_name = "RULES", env = "TOPO_RUN_REDUCE_SCATTER")]
    pub reduce_scatter: Option<String>,

    /// How MPI_Gatherv and MPI_Scatterv go: `leaders` (first each rank's length, then the
    /// blocks, through the node leaders as Gather and Scatter: one message per node between
    /// nodes; the default on more than one node with more than 2 ranks per node) or
    /// `direct` (straight between the root and every rank, all at once; the default
    /// elsewhere).
    #[arg(long, value_name = "ALG", env = "TOPO_RUN_ROOTED_V")]
    pub rooted_v: Option<String>,

    /// Slots per shared-memory queue (default 8).
    #[arg(long, value_name = "N", env = "TOPO_RUN_SLOTS")]
    pub slots: Option<String>,

    /// Bytes per shared-memory slot, a multiple of 64 (default 128K).
    #[arg(long, value_name = "BYTES", env = "TOPO_RUN_FRAGMENT")]
    pub fragment: Option<String>,

    /// Pipeline chunk: larger messages move through the levels in pieces of this size. One
    /// size, or comma-separated rules `[COLLECTIVE][<BYTES]=CHUNK` tried in order, e.g.
    /// `bcast<128K=16K,allreduce=1M,256K` (defaults: docs/runtime.md).
    #[arg(long, value_name = "BYTES|RULES", env = "TOPO_RUN_CHUNK")]
    pub chunk: Option<String>,

    /// Busy-wait rounds before a waiting rank yields its core (default 1024; 0 when ranks
    /// outnumber cores).
    #[arg(long, value_name = "N", env = "TOPO_RUN_SPIN")]
    pub spin: Option<String>,

    /// Messages of at least this size are copied once, straight from the sender's buffer
    /// (`process_vm_readv`), instead of through the queues; 0 turns that off (default 16K;
    /// 64K with `--spin 0`).
    /// Among ranks that share their nearest cache or memory (their lowest group inside the
    /// node), from twice this size, and a reduce's partial results stay in the queues.
    #[arg(long, value_name = "BYTES", env = "TOPO_RUN_SINGLE_COPY")]
    pub single_copy: Option<String>,

    /// What advances nonblocking collectives while the program computes: `none` (its own
    /// MPI calls, tests and waits) or `thread` (also a progress thread per process).
    #[arg(long, value_name = "MODE", env = "TOPO_RUN_PROGRESS")]
    pub progress: Option<String>,

    /// How MPI_Barrier's top group meets: `dissemination` (the default; everyone leaves one
    /// transfer after the last arrival) or `root-first` (its first member waits for the
    /// others, then releases them: a broadcast from it right after the barrier, as in
    /// OSU's loop, finds its data waiting; each barrier costs one transfer more); or `flat`
    /// (a dissemination over every rank with the nodes interleaved, the default with 5 to
    /// 32 ranks per node on more than one node from 16 ranks).
    #[arg(long, value_name = "ALG", env = "TOPO_RUN_BARRIER")]
    pub barrier: Option<String>,

    /// Short for `--progress thread` (and it wins over `--progress` and
    /// `TOPO_RUN_PROGRESS`): a thread per process advances nonblocking collectives while
    /// the program computes. Worth it with a free core (or hardware thread) per rank; do
    /// not use it when ranks outnumber cores (collectives stall); see docs/runtime.md.
    #[arg(long)]
    pub progress_thread: bool,
}

impl RuntimeArgs {
    /// The settings given on the command line, in the environment and in the rules file,
    /// validated, as the `key:value` pairs stored in the plan.
    pub fn settings(&self) -> anyhow::Result<Vec<(String, String)>> {
        let thread = self.progress_thread.then(|| "thread".to_string());
        let pairs: Vec<(String, String)> = [
            ("progress", thread.as_ref().or(self.progress.as_ref())),
            ("slots", self.slots.as_ref()),
            ("fragment", self.fragment.as_ref()),
            ("chunk", self.chunk.as_ref()),
            ("spin", self.spin.as_ref()),
            ("single-copy", self.single_copy.as_ref()),
            ("barrier", self.barrier.as_ref()),
            ("bcast", self.bcast.as_ref()),
            ("reduce", self.reduce.as_ref()),
            ("allreduce", self.allreduce.as_ref()),
            ("allgather", self.allgather.as_ref()),
            ("alltoall", self.alltoall.as_ref()),
            ("reduce-scatter", self.reduce_scatter.as_ref()),
            ("rooted-v", self.rooted_v.as_ref()),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| (k.to_string(), v.clone())))
        .collect();
        topo_hierarchy::Settings::from_pairs(&pairs)?;
        let Some(path) = &self.rules else {
            return Ok(pairs);
        };
        let text = crate::input::read_text(path, "rules file")?;
        let file = topo_hierarchy::RulesFile::parse(&text)
            .with_context(|| format!("rules file {}", path.display()))?;
        let merged = topo_hierarchy::rules_file::merge(&pairs, &file.pairs());
        topo_hierarchy::Settings::from_pairs(&merged)
            .with_context(|| format!("rules file {} with the options", path.display()))?;
        Ok(merged)
    }

    /// The settings as the digest covers them: `key:value,...`.
    pub fn digest_text(pairs: &[(String, String)]) -> String {
        pairs
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = ShowFormat::Text)]
    pub format: ShowFormat,
}

/// How `topo-run doctor` prints its report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// One line per finding (OK, INFO, WARN, FAIL), a `fix:` line under each problem.
    Text,
    /// One JSON object.
    Json,
}

/// Where the launcher learns the placement of ranks (`--discovery`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Discovery {
    /// Slurm's environment when it is exact, else PMIx.
    Auto,
    /// PMIx when it is there.
    Pmix,
    /// Slurm's environment only.
    Slurm,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShowFormat {
    /// `rank 0/4 on node1 (local 0/2): numa [0-1] | node [0,2]`
    Text,
    /// One object per line, `{"rank":0,"size":4,"node":"node1","groups":[..]}`; a group
    /// is `{"level":"node","members":[0,1]}`.
    Json,
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

    #[command(flatten)]
    pub runtime: RuntimeArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A readable picture: nodes, sockets, NUMA nodes, groups and their leaders.
    Text,
    /// `{"version":1,"size":N,"levels":[..],"ranks":[..]}`; a rank is
    /// `{"rank":0,"node":..,"groups":[..]}`.
    Json,
    /// Graphviz; render with `dot -Tpng`.
    Dot,
    /// The `TOPO_RUN_PLAN=...` line each selected rank would receive.
    Env,
}
