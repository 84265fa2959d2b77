//! `validate`: on the simulator, the simulator against queueing theory (Erlang C,
//! Pollaczek–Khinchine, Little's law, the throughput cap) and its speed; on the runtime, the
//! simulator against the runtime on configurations both can run.

pub mod queueing;
mod runtime;
mod sim;

use crate::engine::runtime::testbed::TestbedSettings;
use crate::report::Output;
use crate::settings::values::{Count, Loads, Positive, Time};
use crate::{BenchError, Engine, Experiment, Options};
use serde::{Deserialize, Serialize};

pub use runtime::{BOUND, Check as RuntimeCheck, Delays};

/// `validate`'s settings on the simulator (it simulates single queues: no cluster settings).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimSettings {
    /// Arrivals per M/M/c run.
    pub customers: Positive,
    /// Independent runs averaged per M/M/c row.
    pub seeds: Count<1, 100>,
    /// Simulated time of the speed run.
    pub speed_run: Time,
}

impl SimSettings {
    /// 500,000 arrivals, 4 seeds, 600 s of speed run (quick: 300,000 and 60 s).
    pub fn preset(quick: bool) -> Self {
        Self {
            customers: Positive(if quick { 300_000.0 } else { 500_000.0 }),
            seeds: Count(4),
            speed_run: Time::from_secs(if quick { 60.0 } else { 600.0 }),
        }
    }
}

impl Default for SimSettings {
    fn default() -> Self {
        Self::preset(false)
    }
}

/// `validate`'s own settings on the runtime.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeSettings {
    /// Workers of CLASP's placement, the same in both.
    pub workers: Count<1, 8>,
    /// Loads of the latency comparisons (fractions of the runtime's maximum).
    pub loads: Loads,
    /// Inputs of the dispatch measurement of α and β that starts the experiment.
    pub dispatch_inputs: Count<1, 100_000_000>,
}

impl RuntimeSettings {
    /// Two workers, loads 0.3 and 0.7 (quick: 0.5).
    pub fn preset(quick: bool) -> Self {
        Self {
            workers: Count(2),
            loads: Loads(if quick { vec![0.5] } else { vec![0.3, 0.7] }),
            dispatch_inputs: Count(super::dispatch::QUICK_INPUTS),
        }
    }
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        Self::preset(false)
    }
}

/// The runtime's testbed preset: SYN and WC (quick: SYN). Its `both` regimes are native and
/// the paper's α and β emulated without the fan-out cost (see [`runtime`]).
pub fn testbed(quick: bool) -> TestbedSettings {
    TestbedSettings::preset(quick, if quick { &["syn"] } else { &["syn", "wc"] })
}

/// Runs `validate` on `o.engine`.
pub fn run(o: &Options) -> Result<Output, BenchError> {
    match o.engine {
        Engine::Sim => sim::run(o),
        Engine::Runtime => runtime::run(o),
        Engine::Edge => Err(super::unsupported(Experiment::Validate, o.engine)),
    }
}
