//! `topo-run`: the launcher and offline planner of topo-run.
//!
//! Thin by design: parse the command line, run, turn errors into one message and a
//! documented exit code (see `exit_codes`).

mod cli;
mod cpus;
mod discover;
mod exit_codes;
mod launch;
mod plan_cmd;
mod pmix;
mod render;
mod show_cmd;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};

fn run(cli: &Cli) -> anyhow::Result<()> {
    match &cli.command {
        Some(Command::Plan(args)) => plan_cmd::run(args),
        Some(Command::Show(args)) => show_cmd::run(args.format),
        None => launch::run(&cli.launch),
    }
}

/// The exit code for an error: the most specific cause in the chain decides.
fn exit_code(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        if let Some(e) = cause.downcast_ref::<topo_hierarchy::Error>() {
            return exit_codes::for_kind(e.kind());
        }
        if cause.is::<plan_cmd::ReadError>() {
            return exit_codes::INPUT_UNREADABLE;
        }
        if cause.is::<plan_cmd::UsageError>() {
            return exit_codes::USAGE;
        }
        if cause.is::<show_cmd::PlanMissing>() {
            return exit_codes::BAD_PLAN;
        }
        if cause.is::<launch::LevelsUnsupported>() {
            return exit_codes::BAD_LEVELS;
        }
        if cause.is::<launch::Unbound>() {
            return exit_codes::UNBOUND;
        }
        if cause.is::<launch::MaskMismatch>() {
            return exit_codes::MASK_MISMATCH;
        }
        if cause.is::<discover::DiscoveryError>() || cause.is::<pmix::PmixError>() {
            return exit_codes::DISCOVERY;
        }
        if let Some(e) = cause.downcast_ref::<launch::ExecError>() {
            return if e.not_found {
                exit_codes::PROGRAM_NOT_FOUND
            } else {
                exit_codes::PROGRAM_NOT_EXECUTABLE
            };
        }
        if let Some(e) = cause.downcast_ref::<io::Error>()
            && e.kind() == io::ErrorKind::BrokenPipe
        {
            return exit_codes::OK; // `topo-run plan ... | head` is not an error
        }
    }
    exit_codes::INTERNAL
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::from(exit_codes::OK),
        Err(err) => {
            let code = exit_code(&err);
            if code != exit_codes::OK {
                let _ = writeln!(io::stderr(), "topo-run: error: {err:#}");
            }
            ExitCode::from(code)
        }
    }
}
