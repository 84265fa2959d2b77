//! The `clasp` command: one binary, one subcommand per task.

mod cmd;
mod config;
mod logging;

use clap::{CommandFactory, Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;

/// Elastic stream processing with chained-request-aware scaling and placement.
#[derive(Debug, Parser)]
#[command(name = "clasp", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Settings file (TOML, docs/config.md) for `run`, `planner` and `worker`; also
    /// `CLASP_CONFIG`. Flags and `CLASP_*` variables override it.
    #[arg(long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    logging: logging::LogArgs,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a pipeline on a cluster (embedded by default), elastically under a policy.
    Run(cmd::run::Args),
    /// Run the planner of a cluster whose workers join with `clasp worker --join`.
    Planner(cmd::run::Args),
    /// Run a worker that joins a planner.
    Worker(cmd::worker::Args),
    /// Validate a pipeline spec and describe it.
    Check(cmd::check::Args),
    /// Plan workers, placement and parallelism for a pipeline at an input rate.
    Plan(cmd::plan::Args),
    /// Cut a pipeline between edge devices and the cloud (edgecut).
    Cut(cmd::cut::Args),
    /// Write a seeded input file for an application (or profile the application on one).
    Gen(cmd::r#gen::Args),
    /// Run a pipeline in the discrete-event simulator of a cluster.
    Sim(cmd::sim::Args),
    /// Run a pipeline cut between edge devices and the cloud: a device, the cloud, or both.
    Edge(Box<cmd::edge::Args>),
    /// Run one of the CLASP paper's experiments: CSV, PNG and markdown into one directory.
    Bench(cmd::bench::Args),
    /// Show the effective settings of `run`, `planner` or `worker` and where each came from.
    Config(cmd::config::Args),
}

/// Parses the command line with the config file's and the environment's settings layered
/// under it.
fn parse(argv: Vec<OsString>) -> anyhow::Result<Cli> {
    let first = Cli::parse_from(&argv);
    let mut root = Cli::command();
    root.build();
    let matches = root.clone().get_matches_from(&argv);
    let Some((sub, sub_matches)) = matches.subcommand() else { return Ok(first) };
    if !config::CONFIGURED.contains(&sub) {
        return Ok(first);
    }
    let env = |k: &str| std::env::var(k).ok();
    let file = config::config_file(first.config.as_ref(), &env)?;
    let layered = config::layer(&root, sub, argv, sub_matches, file.as_ref(), &env)?;
    Ok(Cli::parse_from(layered.argv))
}

/// A closed standard output (`clasp plan ... | head -1`) ends the command quietly: printing
/// to it panics with this message in the standard library, and a reader that has gone away
/// wants no more output, nor an error about it.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or("");
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info);
    }));
}

fn main() -> std::process::ExitCode {
    let fail = |e: anyhow::Error| {
        eprintln!("error: {e:#}");
        std::process::ExitCode::FAILURE
    };
    let cli = match parse(std::env::args_os().collect()) {
        Ok(cli) => cli,
        Err(e) => return fail(e),
    };
    if let Err(e) = cli.logging.init() {
        return fail(e);
    }
    quiet_on_closed_stdout();
    let result = match cli.command {
        Command::Run(args) => cmd::run::run(&args),
        Command::Planner(args) => cmd::run::run_planner(&args),
        Command::Worker(args) => cmd::worker::run(&args),
        Command::Check(args) => cmd::check::run(&args),
        Command::Plan(args) => cmd::plan::run(&args),
        Command::Cut(args) => cmd::cut::run(&args),
        Command::Gen(args) => cmd::r#gen::run(&args),
        Command::Sim(args) => cmd::sim::run(&args),
        Command::Edge(args) => cmd::edge::run(&args),
        Command::Bench(args) => cmd::bench::run(&args),
        Command::Config(args) => cmd::config::run(&args, cli.config.as_ref()),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}
