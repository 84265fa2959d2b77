//! Paper Fig. 10: the throughput each policy's placement reaches on 10 workers under an
//! unthrottled input. Every policy decides from the same spec-derived statistics for an input
//! rate no cluster here sustains, within 10 workers (the baselines then use all ten; CLASP
//! uses the placement the worker-limit search finds), and the placement runs unthrottled.

use super::{Setup, policy_placement, run_static, spec_stats};
use crate::error::SimError;
use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_plan::Policy;
use clasp_plan::autoscaler::UNTHROTTLED_RATE;
use serde::{Deserialize, Serialize};

/// The policies of Fig. 10 (DS2 added).
pub const POLICIES: [Policy; 4] = [Policy::Clasp, Policy::FaasFlow, Policy::Zhang24, Policy::Ds2];

/// One application under one policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlacementRow {
    /// Application.
    pub app: String,
    /// Policy.
    pub policy: String,
    /// Workers its placement uses.
    pub workers: u32,
    /// Throughput (chains/s).
    pub throughput: f64,
    /// Relative to the first policy's (CLASP's) throughput.
    pub ratio: f64,
    /// Remote share of chained requests.
    pub remote_share: f64,
}

/// Runs the experiment for every application and policy (the first policy is the reference).
pub fn run(
    apps: &[Pipeline],
    setup: &Setup,
    policies: &[Policy],
) -> Result<Vec<PlacementRow>, SimError> {
    let workers = setup.sim.max_workers.min(10);
    let mut rows = Vec::new();
    for p in apps {
        let stats = spec_stats(p, setup, UNTHROTTLED_RATE);
        let mut reference = None;
        for &policy in policies {
            let placement = policy_placement(p, setup, &stats, policy, UNTHROTTLED_RATE, workers)?;
            let used = placement.workers;
            let s = run_static(p, setup, placement, RatePattern::unthrottled())?;
            let base = *reference.get_or_insert(s.throughput);
            let calls = s.local_rate + s.remote_rate;
            rows.push(PlacementRow {
                app: p.name.clone(),
                policy: policy.name().to_owned(),
                workers: used,
                throughput: s.throughput,
                ratio: s.throughput / f64::max(base, 1e-9),
                remote_share: if calls > 0.0 { s.remote_rate / calls } else { 0.0 },
            });
        }
    }
    Ok(rows)
}
