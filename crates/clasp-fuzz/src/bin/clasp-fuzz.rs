//! `clasp-fuzz [--target NAME] [--inputs N] [--seed S]`: runs fuzz targets on seeded inputs
//! and prints how many each ran and how long it took.

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
        let ran = clasp_fuzz::run(t, args.inputs, args.seed);
        println!(
            "{:<14} {ran:>12} inputs without a crash in {:.1} s",
            t.name,
            started.elapsed().as_secs_f64()
        );
    }
    std::process::ExitCode::SUCCESS
}
