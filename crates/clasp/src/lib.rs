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

pub use clasp_core::batch::{Batch, Record};
pub use clasp_core::local::{LocalDriver, LocalOptions};
pub use clasp_core::operator::{
    CollectingEmitter, Context, Emitter, LATE, OpenInfo, Operator, Registry, RegistryError,
    Rejections,
};
pub use clasp_core::source::{Source, SourceError, SourcePosition};
pub use clasp_core::time::{TimeDomain, Timer, TimerUse};
pub use clasp_core::{self as core, Pipeline};

use clap::{Parser, Subcommand};
use std::sync::OnceLock;

/// Elastic stream processing with chained-request-aware scaling and placement.
#[derive(Debug, Parser)]
#[command(name = "clasp", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
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

/// The `clasp` command line with the operators of `registry`: parses the process's arguments,
/// runs the subcommand and returns its exit code.
pub fn main_with(registry: Registry) -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("CLASP_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let _ = REGISTRY.set(registry);
    let cli = Cli::parse();
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
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
