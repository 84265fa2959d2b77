//! `coefficients` (paper Fig. 9): the α, β, γ (and W̄) the online estimator (Eq. 2–4)
//! converges to, fed the saturated workers' reports, beside the true costs it never sees.

mod runtime;
mod sim;

use crate::engine::runtime::testbed::TestbedSettings;
use crate::engine::sim::{ClusterSettings, PAPER_APPS};
use crate::report::Output;
use crate::settings::values::{Count, Policies, Time, WorkerCounts};
use crate::{BenchError, Engine, Experiment, Options};
use clasp_plan::Policy;
use serde::{Deserialize, Serialize};

pub use runtime::native_estimator;
pub use sim::{CoefficientRow, SATURATING_IN_FLIGHT, initial_estimator, rows as sim_rows};

/// The paper's estimates (Faasm, Fig. 9), the note under both engines' results.
const PAPER_NOTE: &str = "Paper (Faasm, Fig. 9): alpha about 38.5 us, beta about 275 us, gamma about 51,500 us/s, W about 850,000 us/s; per application within about +-5 %, learnt within about 5 minutes.";

/// The placements whose runs feed the runtime's estimator, on each worker count above one.
pub const RUNTIME_POLICIES: [Policy; 3] = [Policy::Clasp, Policy::FaasFlow, Policy::Zhang24];

/// The simulator's cluster preset: long runs (600 s, quick 120 s), since the estimator needs
/// many saturated reports from differing workers.
pub fn sim_cluster(quick: bool) -> ClusterSettings {
    ClusterSettings {
        run: Time::from_secs(if quick { 120.0 } else { 600.0 }),
        ..ClusterSettings::preset(quick, if quick { &["wc", "sd"] } else { &PAPER_APPS })
    }
}

/// `coefficients`' own settings on the runtime.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeSettings {
    /// Worker counts the runs visit.
    pub workers: WorkerCounts<10>,
    /// Placements run on every worker count above one.
    pub policies: Policies,
    /// Inputs of the dispatch measurement of α and β that starts the experiment.
    pub dispatch_inputs: Count<1, 100_000_000>,
}

impl RuntimeSettings {
    /// 1–4 workers, every policy (quick: 1–2, CLASP and FaaSFlow).
    pub fn preset(quick: bool) -> Self {
        Self {
            workers: WorkerCounts(if quick { vec![1, 2] } else { vec![1, 2, 3, 4] }),
            policies: Policies(RUNTIME_POLICIES[..if quick { 2 } else { 3 }].to_vec()),
            dispatch_inputs: Count(super::dispatch::QUICK_INPUTS),
        }
    }
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        Self::preset(false)
    }
}

/// The runtime's testbed preset: WC and SYN (quick: WC), 16 s measured per run (quick 4 s)
/// so that one report per worker per second still gives the estimator enough.
pub fn testbed(quick: bool) -> TestbedSettings {
    TestbedSettings {
        run: Time::from_secs(if quick { 4.0 } else { 16.0 }),
        ..TestbedSettings::preset(quick, if quick { &["wc"] } else { &["wc", "syn"] })
    }
}

/// Runs `coefficients` on `o.engine`.
pub fn run(o: &Options) -> Result<Output, BenchError> {
    match o.engine {
        Engine::Sim => sim::run(o),
        Engine::Runtime => runtime::run(o),
        Engine::Edge => Err(super::unsupported(Experiment::Coefficients, o.engine)),
    }
}
