//! `topo-run`: the launcher and offline planner of topo-run.
//!
//! Thin by design: parse the command line, run, turn errors into one message and a
//! documented exit code (see `exit_codes`).

#![deny(unsafe_code)]

mod cli;
mod cpus;
mod discover;
mod doctor;
mod elf;
mod env_limit;
mod exit_codes;
mod generate_cmd;
mod helper;
mod input;
mod launch;
mod leftover_shm;
mod mistyped;
mod plan_cmd;
mod planned;
// Unsafe: the PMIx client library's C API (the launcher's one FFI module).
#[allow(unsafe_code)]
mod pmix;
mod preload;
mod render;
mod show_cmd;
mod simulate_cmd;
mod tune_cmd;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};

fn run(cli: &Cli) -> anyhow::Result<()> {
    match &cli.command {
        Some(Command::Plan(args)) => plan_cmd::run(args),
        Some(Command::Show(args)) => show_cmd::run(args.format),
        Some(Command::Tune(args)) => tune_cmd::run(args),
        Some(Command::Generate(args)) => generate_cmd::run(args),
        Some(Command::Doctor(args)) => doctor::run(args),
        Some(Command::Simulate(args)) => simulate_cmd::run(&args.args),
        None => {
            let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
            mistyped::check(&cli.launch.program, &args)?;
            launch::run(&cli.launch)
        }
    }
}

/// The exit code for an error: the most specific cause in the chain decides.
fn exit_code(err: &anyhow::Error) -> u8 {
    for cause in err.chain() {
        if let Some(e) = cause.downcast_ref::<topo_hierarchy::Error>() {
            return exit_codes::for_kind(e.kind());
        }
        // Error types that map to one code each.
        let simple = [
            (cause.is::<input::ReadError>(), exit_codes::INPUT_UNREADABLE),
            (cause.is::<plan_cmd::UsageError>(), exit_codes::USAGE),
            (cause.is::<preload::BadMode>(), exit_codes::USAGE),
            (
                cause.is::<preload::LibMissing>(),
                exit_codes::PRELOAD_MISSING,
            ),
            (cause.is::<show_cmd::PlanMissing>(), exit_codes::BAD_PLAN),
            (cause.is::<doctor::Failed>(), exit_codes::DOCTOR_FAILED),
            (
                cause.is::<helper::HelperMissing>(),
                exit_codes::PROGRAM_NOT_FOUND,
            ),
            (
                cause.is::<launch::LevelsUnsupported>(),
                exit_codes::BAD_LEVELS,
            ),
            (cause.is::<launch::Unbound>(), exit_codes::UNBOUND),
            (cause.is::<env_limit::TooLarge>(), exit_codes::TOO_LARGE),
            (
                cause.is::<launch::MaskMismatch>(),
                exit_codes::MASK_MISMATCH,
            ),
            (
                cause.is::<discover::DiscoveryError>(),
                exit_codes::DISCOVERY,
            ),
            (cause.is::<pmix::PmixError>(), exit_codes::DISCOVERY),
        ];
        if let Some(&(_, code)) = simple.iter().find(|(hit, _)| *hit) {
            return code;
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
            let quiet = err
                .downcast_ref::<doctor::Failed>()
                .is_some_and(|f| f.quiet);
            if code != exit_codes::OK && !quiet {
                let _ = writeln!(io::stderr(), "topo-run: error: {err:#}");
            }
            ExitCode::from(code)
        }
    }
}
