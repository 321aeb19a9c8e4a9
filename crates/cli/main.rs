//! `llmprof`: profile LLM inference on NVIDIA GPUs.
//!
//! The binary only parses flags into validated configs and calls the library crates; see
//! ARCHITECTURE.md for the map.

mod alloc;
mod analyze_cmd;
mod args;
mod capture_cmd;
mod diff_cmd;
mod export_cmd;
mod ingest_cmd;
mod ranks_cmd;
mod show;
mod site_cmd;
mod table;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = args::Cli::parse();
    alloc::configure(match cli.command {
        args::Command::Ingest(_) | args::Command::Capture(_) => alloc::Heaps::Few,
        _ => alloc::Heaps::Many,
    });
    let result = match cli.command {
        args::Command::Ingest(a) => a.into_config().and_then(ingest_cmd::run),
        args::Command::Merge(a) => ranks_cmd::merge(a),
        args::Command::Show(a) => show::run(a.into_config()),
        args::Command::Analyze(a) => analyze_cmd::run(a),
        args::Command::Diff(a) => diff_cmd::run(a),
        args::Command::Export(a) => export_cmd::run(a),
        args::Command::Check(a) => diff_cmd::check(a),
        args::Command::Site(args::SiteCommand::Build(a)) => site_cmd::build(a),
        args::Command::Capture(a) => capture_cmd::run(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // A closed pipe (`llmprof show run | head`) is not an error.
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) {
                return ExitCode::SUCCESS;
            }
            if let Some(i) = e.downcast_ref::<capture_cmd::Interrupted>() {
                eprintln!("llmprof: {i}");
                return ExitCode::from(130);
            }
            eprintln!("error: {e:#}");
            if e.downcast_ref::<diff_cmd::BadBudget>().is_some() {
                return ExitCode::from(2);
            }
            ExitCode::FAILURE
        }
    }
}
