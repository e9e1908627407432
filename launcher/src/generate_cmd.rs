//! `topo-run generate`: man pages and shell completions, generated from the command-line
//! definition itself, so that they cannot drift from `--help`.
//!
//! `topo-run(1)` and one page per subcommand come from `clap_mangen`; `topo-run(7)`
//! (environment variables, exit codes, files) is written here from the same sources: the
//! options' `env` names and help, the few variables that have no option, and
//! `exit_codes::TABLE`.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::CommandFactory;
use roff::{Roff, bold, italic, roman};

use crate::cli::{Cli, Generate, GenerateArgs};
use crate::exit_codes;

/// Variables read by topo-run's parts that no option stands for, with their meaning.
pub const OTHER_VARIABLES: &[(&str, &str)] = &[
    (
        "TOPO_RUN_PRELOAD",
        "auto (default), 1/yes/on or 0/no/off: preload the PMPI library into MPI programs \
         that do not call topo-runtime themselves, always, or never (--preload and \
         --no-preload win over it).",
    ),
    (
        "TOPO_RUN_PRELOAD_LIB",
        "Path of libtopo_preload.so. Default: beside topo-run, else in ../lib/topo-run/ or \
         ../lib/ from it.",
    ),
    (
        "TOPO_RUN_STATS",
        "1: the PMPI library's node leaders report at MPI_Finalize how many calls took \
         topo-run's path and why the others went to MPI.",
    ),
    (
        "TOPO_RUN_MAX_COMMS",
        "The PMPI library's most live contexts with a shared-memory segment of their own per \
         process (one per communicator it serves; default 16). Further communicators' \
         contexts share the node's lanes (TOPO_RUN_LANES).",
    ),
    (
        "TOPO_RUN_LANES",
        "Lanes per node (default 2, at most 64): segments the size of world's that the PMPI \
         library's contexts beyond TOPO_RUN_MAX_COMMS share, one claimed per blocking \
         collective, so any number of live communicators fits in a fixed amount of shared \
         memory. 0: none, and collectives on those communicators are MPI's own.",
    ),
    (
        "TOPO_RUN_SHM_DIR",
        "Where the runtime creates its node segments (default /dev/shm).",
    ),
    (
        "TOPO_RUN_PLAN",
        "Written by the launcher for the program: this rank's process groups and settings \
         (docs/plan-format.md). Never set or edit it by hand.",
    ),
    (
        "TOPO_RUN_FAULT",
        "For topo-run's own tests only: failures to simulate (docs/runtime.md).",
    ),
];

/// Files topo-run reads or creates, for `topo-run(7)`.
const FILES: &[(&str, &str)] = &[
    (
        "$SLURM_CONF/../topology.conf, topology.yaml",
        "Slurm's switch tree, the default network map when --network-map is not given.",
    ),
    (
        "PREFIX/lib/topo-run/libtopo_preload.so",
        "The PMPI library preloaded into unmodified MPI programs.",
    ),
    (
        "PREFIX/libexec/topo-run/topo-run-tune",
        "The measuring program that topo-run tune starts.",
    ),
    (
        "/dev/shm/topo-run.JOB.STEP.NODE",
        "A node's shared-memory segment while a program runs; removed by the node leader \
         as soon as every local rank has opened it.",
    ),
    (
        "*.rules",
        "Rules files written by topo-run tune and read with --rules or TOPO_RUN_RULES.",
    ),
    (
        "PREFIX/share/modulefiles/topo-run/VERSION, PREFIX/share/lmod/topo-run/VERSION.lua",
        "Module files (Tcl, and Lua for Lmod) written by scripts/install.sh for its prefix.",
    ),
];

pub fn run(args: &GenerateArgs) -> anyhow::Result<()> {
    match &args.what {
        Generate::Man { dir } => {
            fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            for page in man_pages(dir)? {
                println!("{}", page.display());
            }
            Ok(())
        }
        Generate::Completion { shell } => {
            // Into memory first: clap_complete panics on a write error, and a closed pipe
            // (`| head`) is not one worth a panic.
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "topo-run", &mut script);
            let mut out = io::stdout().lock();
            out.write_all(&script)?;
            out.flush()?;
            Ok(())
        }
    }
}

/// Writes every page into `dir`; returns their paths.
fn man_pages(dir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let cmd = Cli::command();
    clap_mangen::generate_to(cmd, dir).context("writing the man pages")?;
    let seven = dir.join("topo-run.7");
    fs::write(&seven, page_seven()).with_context(|| format!("writing {}", seven.display()))?;
    let mut pages: Vec<PathBuf> = fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("topo-run") && (name.ends_with(".1") || name.ends_with(".7"))
        })
        .collect();
    pages.sort();
    Ok(pages)
}

/// Every variable an option stands for, with the option's help, from the command-line
/// definition (subcommands included); the first definition of a name wins.
pub fn option_variables() -> BTreeMap<String, (String, String)> {
    fn walk(cmd: &clap::Command, out: &mut BTreeMap<String, (String, String)>) {
        for arg in cmd.get_arguments() {
            let Some(env) = arg.get_env() else { continue };
            let option = arg
                .get_long()
                .map(|l| format!("--{l}"))
                .unwrap_or_else(|| arg.get_id().to_string());
            let help = arg
                .get_long_help()
                .or(arg.get_help())
                .map(|h| h.to_string())
                .unwrap_or_default();
            out.entry(env.to_string_lossy().into_owned())
                .or_insert((option, help));
        }
        for sub in cmd.get_subcommands() {
            walk(sub, out);
        }
    }
    let mut out = BTreeMap::new();
    walk(&Cli::command(), &mut out);
    out
}

/// `topo-run(7)`: the environment, exit codes and files.
fn page_seven() -> String {
    let version = env!("CARGO_PKG_VERSION");
    let mut r = Roff::new();
    r.control("TH", ["TOPO-RUN", "7", "", &format!("topo-run {version}")]);
    r.control("SH", ["NAME"]);
    r.text([roman(
        "topo-run - environment variables, exit codes and files of topo-run",
    )]);
    r.control("SH", ["DESCRIPTION"]);
    r.text([
        roman("topo-run makes the MPI collectives of programs started with "),
        bold("srun --mpi=pmix topo-run -- PROGRAM"),
        roman(" follow the machine's hierarchy. See "),
        bold("topo-run"),
        roman("(1) for the options and subcommands. Options win over variables."),
    ]);
    r.control("SH", ["ENVIRONMENT"]);
    r.text([roman("Variables that stand for an option:")]);
    for (name, (option, help)) in option_variables() {
        r.control("TP", []);
        r.text([bold(name)]);
        r.text([roman(format!("({option}) {}", one_paragraph(&help)))]);
    }
    r.control("PP", []);
    r.text([roman("Variables without an option:")]);
    for (name, meaning) in OTHER_VARIABLES {
        r.control("TP", []);
        r.text([bold(*name)]);
        r.text([roman(*meaning)]);
    }
    r.control("PP", []);
    r.text([
        roman("The launcher also sets "),
        bold("PMIX_MCA_gds=hash"),
        roman(" for the program."),
    ]);
    r.control("SH", ["EXIT STATUS"]);
    for (code, meaning) in exit_codes::TABLE {
        r.control("TP", []);
        r.text([bold(code.to_string())]);
        r.text([roman(*meaning)]);
    }
    r.control("PP", []);
    r.text([roman(
        "When the launcher succeeds it becomes the program (same PID), so the exit status \
         is the program's own. A program whose collective fails is aborted with \
         MPI_Abort and status 20.",
    )]);
    r.control("SH", ["FILES"]);
    for (path, meaning) in FILES {
        r.control("TP", []);
        r.text([italic(*path)]);
        r.text([roman(*meaning)]);
    }
    r.control("SH", ["SEE ALSO"]);
    r.text([
        bold("topo-run"),
        roman("(1), "),
        bold("topo-run-plan"),
        roman("(1), "),
        bold("topo-run-tune"),
        roman("(1), "),
        bold("topo-run-doctor"),
        roman("(1), "),
        bold("srun"),
        roman("(1), and the documentation in PREFIX/share/doc/topo-run."),
    ]);
    r.render()
}

/// Help text as one paragraph: roff would otherwise keep clap's line breaks.
fn one_paragraph(help: &str) -> String {
    help.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_seven_lists_every_variable_and_exit_code() {
        let page = page_seven();
        for name in option_variables().keys() {
            assert!(page.contains(name.as_str()), "{name}");
        }
        for (name, _) in OTHER_VARIABLES {
            assert!(page.contains(name), "{name}");
        }
        for (code, _) in exit_codes::TABLE {
            assert!(page.contains(&format!("\n.TP\n\\fB{code}\\fR")), "{code}");
        }
        for must in ["TOPO_RUN_LEVELS", "TOPO_RUN_RULES", "TOPO_RUN_PROGRESS"] {
            assert!(option_variables().contains_key(must), "{must}");
        }
    }

    #[test]
    fn every_variable_is_in_the_docs() {
        let docs = [
            include_str!("../../README.md"),
            include_str!("../../docs/launcher.md"),
            include_str!("../../docs/runtime.md"),
            include_str!("../../docs/preload.md"),
        ]
        .concat();
        let names = option_variables().into_keys();
        for name in names.chain(OTHER_VARIABLES.iter().map(|(n, _)| n.to_string())) {
            assert!(docs.contains(&name), "the docs do not describe {name}");
        }
    }
}
