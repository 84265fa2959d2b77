//! `clasp-fuzz [--target NAME] [--inputs N] [--seed S]`: runs fuzz targets on seeded inputs
//! and prints how many each ran and how long it took.

use std::time::Instant;

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1));
    let inputs = match value("--inputs").map(|v| v.parse::<u64>()) {
        None => 1_000_000,
        Some(Ok(n)) => n,
        Some(Err(_)) => {
            eprintln!("--inputs takes a whole number");
            return std::process::ExitCode::FAILURE;
        }
    };
    let seed = value("--seed").and_then(|v| v.parse().ok()).unwrap_or(1);
    let only = value("--target");
    let targets: Vec<_> =
        clasp_fuzz::TARGETS.iter().filter(|t| only.is_none_or(|o| o == t.name)).collect();
    if targets.is_empty() {
        let names: Vec<&str> = clasp_fuzz::TARGETS.iter().map(|t| t.name).collect();
        eprintln!("no target {only:?}; targets: {}", names.join(", "));
        return std::process::ExitCode::FAILURE;
    }
    // A target's own error paths are not crashes: keep their panics (if any) loud, the rest quiet.
    for t in targets {
        let started = Instant::now();
        let ran = clasp_fuzz::run(t, inputs, seed);
        println!(
            "{:<14} {ran:>12} inputs without a crash in {:.1} s",
            t.name,
            started.elapsed().as_secs_f64()
        );
    }
    std::process::ExitCode::SUCCESS
}
