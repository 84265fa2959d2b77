//! `state-locality` (paper Fig. 4): unthrottled throughput with state on the executing
//! worker against every execution of a stateful operator taking `remote_state_time` longer
//! (state read from a remote server; the paper measured 400 → 1,400 µs). Applications
//! without state are skipped.

mod runtime;
mod sim;

use crate::engine::runtime::testbed::TestbedSettings;
use crate::engine::sim::{ClusterSettings, PAPER_APPS};
use crate::report::Output;
use crate::settings::values::{Count, Time};
use crate::{BenchError, Engine, Experiment, Options};
use serde::{Deserialize, Serialize};

pub use sim::{StateLocalityRow, rows as sim_rows};

/// The paper's extra execution time of a remote state access (1,400 − 400 µs).
pub const PAPER_REMOTE_STATE_US: f64 = 1_000.0;

/// The paper's local/remote ratios: WC (90 % of executions touch state) and PL (20 %).
const PAPER_RATIOS: [(&str, f64); 2] = [("wc", 3.5), ("pl", 1.5)];

/// The paper's note under both engines' figures.
const PAPER_NOTE: &str = "Paper (Faasm, 10 workers): the gap widens with the share of executions that access state (WC 90 %: x3.5; PL 20 %: x1.5).";

/// `state-locality`'s own settings on the simulator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimSettings {
    /// Extra execution time of a stateful operator reading remote state.
    pub remote_state_time: Time,
}

impl Default for SimSettings {
    fn default() -> Self {
        Self { remote_state_time: Time::from_micros(PAPER_REMOTE_STATE_US) }
    }
}

/// `state-locality`'s own settings on the runtime.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeSettings {
    /// Workers of the cluster.
    pub workers: Count<1, 16>,
    /// Extra execution time of a stateful operator reading remote state.
    pub remote_state_time: Time,
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        Self { workers: Count(10), remote_state_time: Time::from_micros(PAPER_REMOTE_STATE_US) }
    }
}

/// The applications: the paper's six (quick: WC and PL).
fn apps(quick: bool) -> &'static [&'static str] {
    if quick { &["wc", "pl"] } else { &PAPER_APPS }
}

/// The simulator's cluster preset.
pub fn sim_cluster(quick: bool) -> ClusterSettings {
    ClusterSettings::preset(quick, apps(quick))
}

/// The runtime's testbed preset.
pub fn testbed(quick: bool) -> TestbedSettings {
    TestbedSettings::preset(quick, apps(quick))
}

/// The notes comparing WC's and PL's local/remote ratio with the paper's: `(app, ratio,
/// state share, label)` per row, `label` naming the regime where there is one.
fn paper_notes<'a>(
    rows: impl Iterator<Item = (&'a str, f64, f64, Option<&'a str>)>,
) -> Vec<String> {
    let mut out: Vec<String> = rows
        .filter_map(|(app, ratio, share, regime)| {
            let (_, paper) = PAPER_RATIOS.iter().find(|(a, _)| *a == app)?;
            let regime = regime.map_or(String::new(), |r| format!(", {r} costs"));
            Some(format!(
                "{}{regime}: local state x{ratio:.2} the remote throughput (paper x{paper}); {:.0} % of executions touch state.",
                app.to_uppercase(),
                100.0 * share
            ))
        })
        .collect();
    out.push(PAPER_NOTE.into());
    out
}

/// Runs `state-locality` on `o.engine`.
pub fn run(o: &Options) -> Result<Output, BenchError> {
    match o.engine {
        Engine::Sim => sim::run(o),
        Engine::Runtime => runtime::run(o),
        Engine::Edge => Err(super::unsupported(Experiment::StateLocality, o.engine)),
    }
}
