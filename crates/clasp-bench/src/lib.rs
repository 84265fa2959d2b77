//! clasp-bench: every figure clasp reports comes from one of these experiments.
//!
//! An experiment runs on the simulator (`Engine::Sim`, paper scale) or on the real runtime
//! (`Engine::Runtime`, reduced scale on this machine) and returns a [`report::Report`]: tables
//! written as CSV and markdown, and plots written as PNG, into one output directory.

pub mod plot;
pub mod report;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

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
    /// An experiment-specific setting.
    pub fn setting(&self, key: &str) -> Option<&str> {
        self.settings.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
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
