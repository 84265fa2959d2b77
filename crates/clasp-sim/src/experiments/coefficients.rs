//! Paper Fig. 9: the coefficients α, β, γ (and W̄) the online estimator converges to.
//!
//! For every application and every worker count `n` in `1..=10`, CLASP's placement over
//! exactly `n` workers runs unthrottled with enough chains in flight to saturate the workers
//! (the reference's 10,000), and every saturated worker report of the run feeds one estimator
//! (Eq. 2–4) that starts away from the truth. Its final values are reported beside the
//! simulated machines' true costs, which the estimator never sees. With one worker no request
//! is remote, so β and γ are not identifiable and the estimator keeps its starting values
//! (`updates` is 0).

use super::{Setup, spec_stats};
use crate::engine::{Deployment, Simulation};
use crate::error::SimError;
use crate::placement_on;
use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_core::stats::Coefficients;
use clasp_plan::EstimatorConfig;
use clasp_plan::autoscaler::UNTHROTTLED_RATE;
use serde::{Deserialize, Serialize};

/// Chains in flight: enough for every worker's queue to exceed the saturation threshold.
pub const SATURATING_IN_FLIGHT: u32 = 10_000;

/// One application on one worker count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoefficientRow {
    /// Application.
    pub app: String,
    /// Workers.
    pub workers: u32,
    /// Estimated α (µs per local chained request).
    pub alpha: f64,
    /// Estimated β (µs per remote chained request).
    pub beta: f64,
    /// Estimated γ (µs/s per remote destination).
    pub gamma: f64,
    /// Estimated W̄ (µs/s).
    pub capacity: f64,
    /// Saturated observations that updated α, β, γ.
    pub updates: u64,
    /// Throughput of the run (chains/s).
    pub throughput: f64,
}

/// The estimator's starting point: the paper's initial values (α 100, β 1,000, γ 100,000),
/// away from the simulated truth, and W̄ at the reference's 880,000.
pub fn initial_estimator() -> EstimatorConfig {
    EstimatorConfig {
        local_scale: 100.0,
        remote_scale: 1_000.0,
        destinations_scale: 100_000.0,
        ..EstimatorConfig::default()
    }
}

/// Runs the experiment for every application and worker count `1..=max_workers` (at most 10).
pub fn run(
    apps: &[Pipeline],
    setup: &Setup,
    estimator: &EstimatorConfig,
) -> Result<Vec<CoefficientRow>, SimError> {
    let mut rows = Vec::new();
    for p in apps {
        for n in 1..=setup.sim.max_workers.min(10) {
            rows.push(one(p, setup, estimator, n)?);
        }
    }
    Ok(rows)
}

fn one(
    p: &Pipeline,
    setup: &Setup,
    estimator: &EstimatorConfig,
    workers: u32,
) -> Result<CoefficientRow, SimError> {
    let stats = spec_stats(p, setup, UNTHROTTLED_RATE);
    let placement = placement_on(p, &stats, &setup.sim, UNTHROTTLED_RATE, workers)?;
    let cfg = crate::SimConfig { max_in_flight: SATURATING_IN_FLIGHT, ..setup.config() };
    let s =
        Simulation::from_spec(p, cfg, RatePattern::unthrottled(), Deployment::Static(placement))?
            .with_estimator(estimator.clone())
            .run();
    let nan = f64::NAN;
    let c =
        s.coefficients.unwrap_or(Coefficients { alpha: nan, beta: nan, gamma: nan, capacity: nan });
    Ok(CoefficientRow {
        app: p.name.clone(),
        workers,
        alpha: c.alpha,
        beta: c.beta,
        gamma: c.gamma,
        capacity: c.capacity,
        updates: s.estimator_updates,
        throughput: s.throughput,
    })
}
