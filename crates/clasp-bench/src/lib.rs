//! clasp-bench: every figure clasp reports comes from one of these experiments.
//!
//! An experiment runs on the simulator (`Engine::Sim`, paper scale) or on the real runtime
//! (`Engine::Runtime`, reduced scale on this machine) and returns a [`report::Report`]: tables
//! written as CSV and markdown, and plots written as PNG ([`plot`]), into one output
//! directory ([`report::Output`]).
//!
//! | experiment | paper | what |
//! |---|---|---|
//! | `scaling` | Fig. 2–3 | max throughput and p95 latency at 1, 5, 10 workers |
//! | `state-locality` | Fig. 4 | throughput with local vs remote state access |
//! | `migration` | Fig. 8 | planner and worker durations of 1↔5, 5↔10, 1↔10 |
//! | `coefficients` | Fig. 9 | α, β, γ the estimator converges to on 1–10 workers |
//! | `placement` | Fig. 10 | unthrottled throughput on 10 workers per policy |
//! | `worker-count` | Fig. 11–13 | predicted vs observed optimal worker counts |
//! | `end-to-end` | Fig. 14 | burst and gradual input under each policy |
//! | `validate` | — | sim: the simulator against queueing theory, its speed; runtime: the simulator against the runtime |
//!
//! [`sim`] runs each on the simulator, [`runtime`] on the runtime (most on its emulated
//! testbed, [`runtime::testbed`]).

pub mod plot;
pub mod progress;
pub mod report;
pub mod runtime;
pub mod sim;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// Every experiment, by the name `clasp bench` takes.
pub const EXPERIMENTS: [&str; 8] = [
    "scaling",
    "state-locality",
    "migration",
    "coefficients",
    "placement",
    "worker-count",
    "end-to-end",
    "validate",
];

/// Experiments of this runtime's own costs that only the runtime engine runs.
pub const RUNTIME_ONLY: [&str; 2] = ["dispatch", "wc"];

/// Checks that `name` is an experiment.
pub fn check_experiment(name: &str) -> Result<(), BenchError> {
    if EXPERIMENTS.contains(&name) || RUNTIME_ONLY.contains(&name) {
        Ok(())
    } else {
        Err(BenchError::Config(format!(
            "unknown experiment `{name}`; choose one of: {}; on the runtime also {}; and edge",
            EXPERIMENTS.join(", "),
            RUNTIME_ONLY.join(", ")
        )))
    }
}

/// Where an experiment runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// The discrete-event simulator (`clasp-sim`).
    Sim,
    /// The real runtime on this machine (`clasp-runtime`).
    Runtime,
}

impl FromStr for Engine {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sim" => Ok(Self::Sim),
            "runtime" => Ok(Self::Runtime),
            _ => Err(format!("unknown engine `{s}`; use sim or runtime")),
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Sim => "sim",
            Self::Runtime => "runtime",
        })
    }
}

/// Settings every experiment gets.
#[derive(Clone, Debug)]
pub struct Options {
    /// Simulator or runtime.
    pub engine: Engine,
    /// A reduced version that finishes in under a minute.
    pub quick: bool,
    /// Seed of every random choice.
    pub seed: u64,
    /// Where CSV, PNG and markdown files go.
    pub out: PathBuf,
    /// Extra experiment-specific settings (`KEY=VALUE`).
    pub settings: Vec<(String, String)>,
}

impl Options {
    /// An experiment-specific setting (the last one given wins).
    pub fn setting(&self, key: &str) -> Option<&str> {
        self.settings.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Parses `KEY=VALUE` into a setting.
    pub fn parse_setting(s: &str) -> Result<(String, String), String> {
        match s.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
            _ => Err(format!("`{s}` is not KEY=VALUE")),
        }
    }

    /// The scale's name for reports: `paper` or `quick`.
    pub fn scale(&self) -> &'static str {
        if self.quick { "quick" } else { "paper" }
    }
}

/// Why an experiment could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Bad settings (reported before anything runs).
    #[error("{0}")]
    Config(String),
    /// The experiment failed while running.
    #[error("{0}")]
    Run(String),
    /// Writing the results failed.
    #[error("writing {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
}
