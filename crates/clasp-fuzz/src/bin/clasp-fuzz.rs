//! `clasp-fuzz [--target NAME] [--inputs N] [--seed S]`: runs fuzz targets on seeded inputs
//! and prints how many each ran and how long it took (and, on the way, every
//! `--progress-every` inputs).

use clap::Parser;
use std::time::Instant;

/// Runs the fuzz targets on seeded inputs.
#[derive(Debug, Parser)]
struct Args {
    /// Only this target (default: every one).
    #[arg(long)]
    target: Option<String>,
    /// Inputs per target.
    #[arg(long, default_value_t = 1_000_000)]
    inputs: u64,
    /// Seed of the inputs.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print how many inputs ran without a crash after every this many.
    #[arg(long, default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    progress_every: u64,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let targets: Vec<_> = clasp_fuzz::TARGETS
        .iter()
        .filter(|t| args.target.as_deref().is_none_or(|o| o == t.name))
        .collect();
    if targets.is_empty() {
        let names: Vec<&str> = clasp_fuzz::TARGETS.iter().map(|t| t.name).collect();
        eprintln!("no target {:?}; targets: {}", args.target, names.join(", "));
        return std::process::ExitCode::FAILURE;
    }
    for t in targets {
        let started = Instant::now();
        let ran = clasp_fuzz::run_reporting(t, args.inputs, args.seed, args.progress_every, |n| {
            if n < args.inputs {
                println!(
                    "{:<14} {n:>12} inputs so far without a crash, {:.1} s",
                    t.name,
                    started.elapsed().as_secs_f64()
                );
            }
        });
        println!(
            "{:<14} {ran:>12} inputs without a crash in {:.1} s",
            t.name,
            started.elapsed().as_secs_f64()
        );
    }
    std::process::ExitCode::SUCCESS
}
