//! `migration` (paper Fig. 8): how long a rescaling's migration takes, for the planner (plan
//! issued → every worker done) and for the workers (plan received → resumed).

mod runtime;
mod sim;

use crate::engine::sim::{ClusterSettings, PAPER_APPS};
use crate::report::Output;
use crate::settings::values::{Count, Fraction, Positive, Time};
use crate::{BenchError, Engine, Experiment, Options};
use serde::{Deserialize, Serialize};

pub use sim::{MigrationRow, MigrationSetup, SEQUENCE, StateSize, rows as sim_rows};

/// The paper's figures under both engines' results.
const PAPER_NOTE: &str = "Paper (Faasm, Fig. 8): planner typically 10-20 ms, up to ~70 ms; worker pauses mostly within 10 ms; scaling up takes longer than scaling down.";

/// `migration`'s own settings on the simulator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimSettings {
    /// Input rate, a fraction of the one-worker maximum.
    pub load: Fraction,
    /// Input rate in chains/s (instead of `load`).
    pub rate: Option<Positive>,
    /// Time on one worker before the first transition (the state fills up).
    pub fill: Time,
    /// Time between transitions.
    pub gap: Time,
    /// Runs per application, seeds S, S+1, …
    pub repeats: Count<1, 100>,
}

impl SimSettings {
    /// The paper's 100 s fill, 10 s gaps, 5 runs (quick: 10 s, 2 s, 1 run).
    pub fn preset(quick: bool) -> Self {
        Self {
            load: Fraction(0.5),
            rate: None,
            fill: Time::from_secs(if quick { 10.0 } else { 100.0 }),
            gap: Time::from_secs(if quick { 2.0 } else { 10.0 }),
            repeats: Count(if quick { 1 } else { 5 }),
        }
    }
}

impl Default for SimSettings {
    fn default() -> Self {
        Self::preset(false)
    }
}

/// `migration`'s settings on the runtime.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeSettings {
    /// Distinct word-count keys loaded before the transitions.
    pub keys: Count<1, 10_000_000>,
    /// Runs of every transition sequence, seeds S, S+1, …
    pub repeats: Count<1, 100>,
    /// Requests queued at the workers when each transition starts (0: a moderate input,
    /// nothing queued): counting is slowed down and the input unthrottled until the queues
    /// hold this many.
    pub queued: Count<0, 1_000_000>,
}

impl RuntimeSettings {
    /// 40,000 keys, 3 runs (quick: 1), nothing queued.
    pub fn preset(quick: bool) -> Self {
        Self { keys: Count(40_000), repeats: Count(if quick { 1 } else { 3 }), queued: Count(0) }
    }
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        Self::preset(false)
    }
}

/// The simulator's cluster preset: the paper's applications (quick: WC and SD).
pub fn sim_cluster(quick: bool) -> ClusterSettings {
    ClusterSettings::preset(quick, if quick { &["wc", "sd"] } else { &PAPER_APPS })
}

/// Runs `migration` on `o.engine`.
pub fn run(o: &Options) -> Result<Output, BenchError> {
    match o.engine {
        Engine::Sim => sim::run(o),
        Engine::Runtime => runtime::run(o),
        Engine::Edge => Err(super::unsupported(Experiment::Migration, o.engine)),
    }
}
