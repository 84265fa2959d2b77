//! `placement` (paper Fig. 10): the unthrottled throughput of each policy's placement on ten
//! workers. Every policy decides from the same spec-derived statistics for an input rate no
//! cluster here sustains, within the cluster's workers, and its placement runs unthrottled.

mod runtime;
mod sim;

use crate::engine::runtime::testbed::TestbedSettings;
use crate::engine::sim::ClusterSettings;
use crate::report::Output;
use crate::settings::values::{Count, Policies};
use crate::{BenchError, Engine, Experiment, Options};
use clasp_plan::Policy;
use serde::{Deserialize, Serialize};

pub use sim::{PlacementRow, rows as sim_rows};

/// The policies of Fig. 10 (DS2 added).
pub const POLICIES: [Policy; 4] = [Policy::Clasp, Policy::FaasFlow, Policy::Zhang24, Policy::Ds2];

/// The paper's finding, under both engines' results.
const PAPER_NOTE: &str = "Paper (Faasm, 10 workers): CLASP beats FaaSFlow and Zhang24 on every application; FaaSFlow loses most on WC (its split operator emits ten chained requests per request), Zhang24 through fan-out to nearly every worker.";

/// `placement`'s own settings on the simulator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimSettings {
    /// The policies; the first is the reference of the ratios.
    pub policies: Policies,
}

impl Default for SimSettings {
    fn default() -> Self {
        Self { policies: Policies(POLICIES.to_vec()) }
    }
}

/// `placement`'s own settings on the runtime.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeSettings {
    /// Workers of the cluster.
    pub workers: Count<1, 16>,
    /// The policies; the first is the reference of the ratios.
    pub policies: Policies,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        Self { workers: Count(10), policies: Policies(POLICIES.to_vec()) }
    }
}

/// The simulator's cluster preset: the paper's applications (quick: WC and NWM).
pub fn sim_cluster(quick: bool) -> ClusterSettings {
    let apps: &[&str] = if quick { &["wc", "nwm"] } else { &crate::engine::sim::PAPER_APPS };
    ClusterSettings::preset(quick, apps)
}

/// The runtime's testbed preset: WC, SD, NWM, SYN (quick: WC).
pub fn testbed(quick: bool) -> TestbedSettings {
    TestbedSettings::preset(quick, if quick { &["wc"] } else { &["wc", "sd", "nwm", "syn"] })
}

/// Per policy other than `first`: the range of its throughput relative to `first`'s, over
/// `ratios` (policy, ratio) of one regime.
fn ratio_notes(ratios: &[(String, f64)], first: &str, regime: Option<&str>) -> Vec<String> {
    let policies = super::distinct(ratios, |r| &r.0);
    policies
        .iter()
        .filter(|p| p.as_str() != first)
        .map(|pol| {
            let mine: Vec<f64> = ratios.iter().filter(|r| &r.0 == pol).map(|r| r.1).collect();
            let lo = mine.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = mine.iter().copied().fold(0.0, f64::max);
            let regime = regime.map_or(String::new(), |r| format!("{r} costs, "));
            format!("{regime}{pol}: {:.0}-{:.0} % of {first}'s throughput.", 100.0 * lo, 100.0 * hi)
        })
        .collect()
}

/// Runs `placement` on `o.engine`.
pub fn run(o: &Options) -> Result<Output, BenchError> {
    match o.engine {
        Engine::Sim => sim::run(o),
        Engine::Runtime => runtime::run(o),
        Engine::Edge => Err(super::unsupported(Experiment::Placement, o.engine)),
    }
}
