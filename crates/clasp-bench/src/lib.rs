//! clasp-bench: every figure clasp reports comes from one of these experiments.
//!
//! Each experiment ([`Experiment`]) is defined once, in [`experiments`]: its settings, tables,
//! charts and notes. An engine runs it: the discrete-event simulator ([`Engine::Sim`], paper
//! scale, [`engine::sim`]), the real runtime on this machine ([`Engine::Runtime`], reduced
//! scale, [`engine::runtime`]), or the edge/cloud runner over emulated WAN links
//! ([`Engine::Edge`], [`engine::edge`]). A run returns a [`report::Output`]: tables written
//! as CSV and markdown, and charts written as PNG ([`plot`]), into one directory.
//!
//! | experiment | paper | engines | what |
//! |---|---|---|---|
//! | `scaling` | Fig. 2–3 | sim, runtime | max throughput and p95 latency by cluster size |
//! | `state-locality` | Fig. 4 | sim, runtime | throughput with local vs remote state access |
//! | `migration` | Fig. 8 | sim, runtime | planner and worker durations of rescalings |
//! | `coefficients` | Fig. 9 | sim, runtime | α, β, γ the estimator converges to |
//! | `placement` | Fig. 10 | sim, runtime | unthrottled throughput per policy |
//! | `worker-count` | Fig. 11–13 | sim, runtime | predicted vs observed optimal worker counts |
//! | `end-to-end` | Fig. 14 | sim, runtime | burst and gradual input under each policy |
//! | `validate` | — | sim, runtime | sim: queueing theory, speed; runtime: sim vs runtime |
//! | `dispatch` | — | runtime | this runtime's α and β |
//! | `wc` | — | runtime | word count words/s |
//! | `edge` | Planner §VI | edge | the edge/cloud cut over emulated WAN links |
//!
//! Settings (`--set KEY=VALUE`) are typed per experiment and engine ([`settings`]).

pub mod engine;
pub mod experiments;
pub mod plot;
pub mod progress;
pub mod report;
pub mod settings;

pub use experiments::Experiment;

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
    /// Devices and the cloud over emulated WAN links (`clasp-edge`).
    Edge,
}

impl Engine {
    /// Every engine.
    pub const ALL: [Self; 3] = [Self::Sim, Self::Runtime, Self::Edge];

    /// The name `--engine` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Sim => "sim",
            Self::Runtime => "runtime",
            Self::Edge => "edge",
        }
    }
}

impl FromStr for Engine {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| format!("unknown engine `{s}`; use sim, runtime or edge"))
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Settings every experiment gets.
#[derive(Clone, Debug)]
pub struct Options {
    /// Simulator, runtime or edge.
    pub engine: Engine,
    /// A reduced version that finishes in about a minute.
    pub quick: bool,
    /// Seed of every random choice.
    pub seed: u64,
    /// Where CSV, PNG and markdown files go.
    pub out: PathBuf,
    /// Experiment settings (`KEY=VALUE`), in the order given (the last of a key wins).
    pub settings: Vec<(String, String)>,
}

impl Options {
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
    /// Bad arguments (reported before anything runs).
    #[error("{0}")]
    Config(String),
    /// An application, its input or its profile is not available.
    #[error(transparent)]
    App(#[from] clasp_apps::AppError),
    /// A `--set` key the experiment does not take.
    #[error(
        "unknown setting `{key}` for `{experiment}` on the {engine} engine{}; it takes: {valid}",
        suggestion.as_ref().map_or(String::new(), |s| format!("; did you mean `{s}`?"))
    )]
    UnknownSetting {
        /// The key given.
        key: String,
        /// The experiment.
        experiment: String,
        /// The engine.
        engine: Engine,
        /// The closest valid key.
        suggestion: Option<String>,
        /// Every valid key.
        valid: String,
    },
    /// A `--set` value the key does not accept.
    #[error("--set {key}={value}: {source}")]
    Setting {
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What is wrong with it.
        #[source]
        source: serde_json::Error,
    },
    /// An experiment's preset does not read back as its settings (a bug, not bad input).
    #[error("settings preset: {0}")]
    Preset(#[source] serde_json::Error),
    /// The experiment failed while running.
    #[error("{0}")]
    Run(String),
    /// The simulator refused a run.
    #[error("simulator: {0}")]
    Sim(#[from] clasp_sim::SimError),
    /// The edge runner failed.
    #[error("edge: {0}")]
    Edge(#[from] clasp_edge::EdgeError),
    /// Writing the results failed.
    #[error("writing {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Writing a table as CSV failed.
    #[error("writing {path}: {source}")]
    Csv {
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: csv::Error,
    },
    /// Drawing or encoding a chart failed.
    #[error("drawing chart {chart}: {source}")]
    Plot {
        /// The chart's name.
        chart: String,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The admin server of a watched run (`--set admin=true`) failed.
    #[error("watching the run: {0}")]
    Admin(#[from] clasp_admin::AdminError),
    /// Scraping the admin server of a watched run failed.
    #[error("scraping the admin server: {0}")]
    Scrape(#[source] std::io::Error),
    /// The bundled chart font does not load (a damaged build, not bad input).
    #[error("the bundled chart font (DejaVu Sans) does not load")]
    Font,
}

/// Runs `opts`'s experiment on its engine (every setting is checked before anything runs).
pub fn run(experiment: Experiment, opts: &Options) -> Result<report::Output, BenchError> {
    experiment.run(opts)
}
