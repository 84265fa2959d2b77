//! clasp as a library: a crate of its own operators depends on `clasp`, registers them by name
//! in a [`Registry`] and hands it to [`main_with`], which is the whole `clasp` command line
//! (`run`, `planner`, `worker`, `plan`, `sim`, …) with those operators available to spec files.
//! Worker processes (`clasp run --processes`, `clasp worker` on other hosts) run the same
//! binary, so they have the operators too. See `docs/operators.md`.
//!
//! ```no_run
//! use clasp::{Batch, Context, Operator};
//!
//! #[derive(Clone)]
//! struct Upper;
//! impl Operator for Upper {
//!     type State = ();
//!     fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
//!         for r in input.iter() {
//!             ctx.emit(r.key, &r.value.to_ascii_uppercase());
//!         }
//!     }
//! }
//!
//! fn main() -> std::process::ExitCode {
//!     let mut registry = clasp::bundled_registry();
//!     registry.register_operator("upper", Upper);
//!     clasp::main_with(registry)
//! }
//! ```

mod cmd;
mod config;
mod logging;
mod report_error;

pub use clasp_core::batch::{Batch, Record};
pub use clasp_core::local::{LocalDriver, LocalOptions};
pub use clasp_core::operator::{
    CollectingEmitter, Context, Emitter, LATE, OpenInfo, Operator, Registry, RegistryError,
    Rejections,
};
pub use clasp_core::source::{Source, SourceError, SourcePosition};
pub use clasp_core::time::{TimeDomain, Timer, TimerUse};
pub use clasp_core::{self as core, Pipeline};
/// The Kafka connectors (cargo feature `kafka`).
#[cfg(feature = "kafka")]
pub use clasp_kafka as kafka;

use clap::{CommandFactory, Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::OnceLock;

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
    /// Print the admin server's bearer token, derived from the cluster secret.
    AdminToken(cmd::admin_token::Args),
}

/// The registry this command line runs with (installed by [`main_with`]).
static REGISTRY: OnceLock<Registry> = OnceLock::new();

fn registry() -> &'static Registry {
    REGISTRY.get_or_init(clasp_apps::registry)
}

/// The bundled applications' operators, event-time functions and inputs, to extend with one's
/// own (or start from [`Registry::new`] for none of them).
pub fn bundled_registry() -> Registry {
    clasp_apps::registry()
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

/// The `clasp` command line with the operators of `registry`: parses the process's arguments
/// (over the settings file and `CLASP_*` variables), runs the subcommand and returns its exit
/// code.
pub fn main_with(registry: Registry) -> std::process::ExitCode {
    let fail = |e: anyhow::Error| {
        eprintln!("error: {}", report_error::chain(&e));
        std::process::ExitCode::FAILURE
    };
    let _ = REGISTRY.set(registry);
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
        Command::AdminToken(args) => cmd::admin_token::run(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}
