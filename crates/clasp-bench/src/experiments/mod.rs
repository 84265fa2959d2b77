//! Every experiment, defined once: its settings per engine, its constants, tables, charts
//! and notes; each module runs the experiment on the engines it supports
//! (`<experiment>/sim.rs`, `<experiment>/runtime.rs`, or the edge engine).

pub mod coefficients;
pub mod dispatch;
pub mod edge;
pub mod end_to_end;
pub mod migration;
pub mod placement;
pub mod recovery;
pub mod scaling;
pub mod state_locality;
pub mod validate;
pub mod wc;
pub mod worker_count;

use crate::report::Output;
use crate::{BenchError, Engine, Options};
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// An experiment `clasp bench` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Experiment {
    /// Fig. 2–3: throughput and latency by cluster size.
    Scaling,
    /// Fig. 4: local vs remote state access.
    StateLocality,
    /// Fig. 8: planner and worker durations of rescalings.
    Migration,
    /// Fig. 9: what the online estimator converges to.
    Coefficients,
    /// Fig. 10: unthrottled throughput per policy.
    Placement,
    /// Fig. 11–13: predicted vs observed optimal worker counts.
    WorkerCount,
    /// Fig. 14: burst and gradual input under each policy.
    EndToEnd,
    /// The simulator against queueing theory (sim) or against the runtime (runtime).
    Validate,
    /// This runtime's α and β.
    Dispatch,
    /// Word count throughput on this runtime.
    Wc,
    /// The edge/cloud cut over emulated WAN links.
    Edge,
    /// What checkpoints cost and how long a recovery takes.
    Recovery,
}

impl Experiment {
    /// Every experiment, in the order `clasp bench` lists them.
    pub const ALL: [Self; 12] = [
        Self::Scaling,
        Self::StateLocality,
        Self::Migration,
        Self::Coefficients,
        Self::Placement,
        Self::WorkerCount,
        Self::EndToEnd,
        Self::Validate,
        Self::Dispatch,
        Self::Wc,
        Self::Edge,
        Self::Recovery,
    ];

    /// The name `clasp bench` takes.
    pub fn name(self) -> &'static str {
        match self {
            Self::Scaling => "scaling",
            Self::StateLocality => "state-locality",
            Self::Migration => "migration",
            Self::Coefficients => "coefficients",
            Self::Placement => "placement",
            Self::WorkerCount => "worker-count",
            Self::EndToEnd => "end-to-end",
            Self::Validate => "validate",
            Self::Dispatch => "dispatch",
            Self::Wc => "wc",
            Self::Edge => "edge",
            Self::Recovery => "recovery",
        }
    }

    /// The engines that run it; the first is the default.
    pub fn engines(self) -> &'static [Engine] {
        match self {
            Self::Dispatch | Self::Wc | Self::Recovery => &[Engine::Runtime],
            Self::Edge => &[Engine::Edge],
            _ => &[Engine::Runtime, Engine::Sim],
        }
    }

    /// The engine `clasp bench` uses without `--engine`.
    pub fn default_engine(self) -> Engine {
        self.engines()[0]
    }

    /// Where its files go without `--out`: `out/bench/<experiment>/<engine>`, or
    /// `out/bench/<experiment>` for an experiment with one engine of its own (edge).
    pub fn default_out(self, engine: Engine) -> PathBuf {
        let dir = PathBuf::from("out/bench").join(self.name());
        if engine == Engine::Edge { dir } else { dir.join(engine.name()) }
    }

    /// Runs it on `opts.engine`; every setting is checked before anything runs.
    pub fn run(self, opts: &Options) -> Result<Output, BenchError> {
        if !self.engines().contains(&opts.engine) {
            let on: Vec<&str> = self.engines().iter().map(|e| e.name()).collect();
            let why = match self {
                Self::Dispatch | Self::Wc | Self::Recovery => {
                    " (it measures this runtime's own costs)"
                }
                _ => "",
            };
            return Err(BenchError::Config(format!(
                "`{}` runs only on the {} engine{why}; use --engine {}",
                self.name(),
                on.join(" or "),
                on[0]
            )));
        }
        match self {
            Self::Scaling => scaling::run(opts),
            Self::StateLocality => state_locality::run(opts),
            Self::Migration => migration::run(opts),
            Self::Coefficients => coefficients::run(opts),
            Self::Placement => placement::run(opts),
            Self::WorkerCount => worker_count::run(opts),
            Self::EndToEnd => end_to_end::run(opts),
            Self::Validate => validate::run(opts),
            Self::Dispatch => dispatch::run(opts),
            Self::Wc => wc::run(opts),
            Self::Edge => edge::run(opts),
            Self::Recovery => recovery::run(opts),
        }
    }
}

impl FromStr for Experiment {
    type Err = BenchError;
    fn from_str(s: &str) -> Result<Self, BenchError> {
        Self::ALL.into_iter().find(|e| e.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Self::ALL.iter().map(|e| e.name()).collect();
            let hint = crate::settings::suggest(s, &names)
                .map_or(String::new(), |n| format!("; did you mean `{n}`?"));
            BenchError::Config(format!(
                "unknown experiment `{s}`{hint}; choose one of: {}",
                names.join(", ")
            ))
        })
    }
}

impl fmt::Display for Experiment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An engine the experiment has no implementation for (unreachable through
/// [`Experiment::run`], which checks [`Experiment::engines`] first).
pub(crate) fn unsupported(experiment: Experiment, engine: Engine) -> BenchError {
    BenchError::Config(format!("`{experiment}` does not run on the {engine} engine"))
}

/// The names of the items in order of first appearance.
pub(crate) fn distinct<T>(rows: &[T], name: impl Fn(&T) -> &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        if !out.iter().any(|a| a == name(r)) {
            out.push(name(r).to_owned());
        }
    }
    out
}

/// The value `pick` finds in `rows`, NaN when it finds none (a gap in a chart).
pub(crate) fn lookup<T>(rows: &[T], pick: impl Fn(&T) -> Option<f64>) -> f64 {
    rows.iter().find_map(pick).unwrap_or(f64::NAN)
}

/// Mean of a slice (0 when empty).
pub(crate) fn mean(v: &[f64]) -> f64 {
    if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_unknown_names_list_every_experiment() {
        for e in Experiment::ALL {
            assert_eq!(e.name().parse::<Experiment>().unwrap(), e);
        }
        let err = "scalling".parse::<Experiment>().unwrap_err().to_string();
        assert!(err.contains("did you mean `scaling`?") && err.contains("edge"), "{err}");
    }

    #[test]
    fn an_experiment_on_an_engine_it_lacks_is_refused_before_running() {
        let o = Options {
            engine: Engine::Sim,
            quick: true,
            seed: 1,
            out: "out".into(),
            settings: vec![],
        };
        let e = Experiment::Dispatch.run(&o).unwrap_err().to_string();
        assert!(e.contains("only on the runtime engine"), "{e}");
        let e = Experiment::Edge.run(&o).unwrap_err().to_string();
        assert!(e.contains("--engine edge"), "{e}");
        assert_eq!(Experiment::Edge.default_out(Engine::Edge), PathBuf::from("out/bench/edge"));
        assert_eq!(
            Experiment::Wc.default_out(Engine::Runtime),
            PathBuf::from("out/bench/wc/runtime")
        );
    }
}
