//! The CLASP paper's experiments in the simulator, as functions returning rows (the caller
//! writes CSVs, tables and plots):
//!
//! | function | paper | what |
//! |---|---|---|
//! | [`scaling::run`] | Fig. 2–3 | max throughput and p95 latency at 1, 5, 10 workers |
//! | [`state_locality::run`] | Fig. 4 | throughput with local vs remote state access |
//! | [`migration::run`] | Fig. 8 | planner and worker durations of 1↔5, 5↔10, 1↔10 |
//! | [`coefficients::run`] | Fig. 9 | the α, β, γ the estimator converges to, 1–10 workers |
//! | [`placement::run`] | Fig. 10 | unthrottled throughput on 10 workers per policy |
//! | [`worker_count::run`] | Fig. 11–13 | predicted vs observed optimal worker counts |
//! | [`end_to_end::run`] | Fig. 14 | burst and gradual inputs under each policy |
//! | [`validation`] | — | the simulator against Erlang C, Pollaczek–Khinchine, Little's law |
//!
//! Each takes the applications (pipelines), an [`Setup`] (the simulated cluster, run lengths,
//! seed) and, where it compares policies, the policies. [`Setup::paper`] is the paper's scale;
//! [`Setup::quick`] shortens every run for a check that finishes in seconds.

pub mod coefficients;
pub mod end_to_end;
pub mod migration;
pub mod placement;
pub mod scaling;
pub mod state_locality;
pub mod validation;
pub mod worker_count;

use crate::config::SimConfig;
use crate::engine::{Deployment, Simulation};
use crate::error::SimError;
use crate::summary::SimSummary;
use crate::{placement_on, plan_config};
use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_core::placement::Placement;
use clasp_core::stats::ObservedStats;
use clasp_plan::autoscaler::UNTHROTTLED_RATE;
use clasp_plan::projection::spec_observation;
use clasp_plan::{PlanInput, Policy};
use serde::{Deserialize, Serialize};

/// The simulated cluster and the lengths of the runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    /// The cluster (its `seed` seeds every run).
    pub sim: SimConfig,
    /// Simulated seconds of a run at a fixed input (after its warm-up).
    pub run_s: f64,
    /// Warm-up seconds of such a run.
    pub warmup_s: f64,
    /// Time scale of the burst and gradual patterns (1: the paper's 5–10 s stages).
    pub pattern_scale: f64,
    /// Input-rate levels of the worker-count experiment (fractions of the maximum).
    pub levels: Vec<f64>,
    /// Load of the scaling experiment's latency runs (fraction of the one-worker maximum).
    pub latency_load: f64,
    /// Chains in flight under an unthrottled input. The reference's 10,000 would make every
    /// chain wait ~10 s at these rates (longer than a run's warm-up); 1,000 still keeps every
    /// worker of a 10-worker cluster busy.
    pub unthrottled_in_flight: u32,
}

impl Setup {
    /// The paper's scale: 10 workers × 10 slots, its coefficients, 400 µs executions, 30 s
    /// runs, ten rate levels.
    pub fn paper(seed: u64) -> Self {
        Self {
            sim: SimConfig { seed, ..SimConfig::default() },
            run_s: 30.0,
            warmup_s: 5.0,
            pattern_scale: 1.0,
            levels: (1..=10).map(|l| f64::from(l) / 10.0).collect(),
            latency_load: 0.5,
            unthrottled_in_flight: 1_000,
        }
    }

    /// Short runs and four rate levels, for checks that finish in seconds.
    pub fn quick(seed: u64) -> Self {
        Self {
            run_s: 6.0,
            warmup_s: 2.0,
            pattern_scale: 0.25,
            levels: vec![0.25, 0.5, 0.75, 1.0],
            ..Self::paper(seed)
        }
    }

    /// The cluster configuration for one run of `run_s` after `warmup_s`.
    pub fn config(&self) -> SimConfig {
        SimConfig {
            duration_s: self.warmup_s + self.run_s,
            warmup_s: self.warmup_s,
            ..self.sim.clone()
        }
    }

    /// A pattern scaled in time by `pattern_scale` (stages shortened, rates kept).
    pub fn pattern(&self, pattern: &RatePattern) -> RatePattern {
        if (self.pattern_scale - 1.0).abs() < 1e-12 || pattern.stages().is_empty() {
            return pattern.clone();
        }
        let text: String = pattern
            .stages()
            .iter()
            .map(|s| format!("{} {}\n", s.duration_s * self.pattern_scale, s.rate))
            .collect();
        RatePattern::trace(&text, pattern.name()).unwrap_or_else(|_| pattern.clone())
    }
}

/// Spec-derived statistics at `rate` with the cluster's true costs (as `clasp plan` makes).
pub fn spec_stats(p: &Pipeline, setup: &Setup, rate: f64) -> ObservedStats {
    spec_observation(p, rate, &plan_config(&setup.sim, setup.sim.max_workers), &setup.sim.costs)
}

/// `policy`'s placement of `p` for `rate` from `stats`, within `max_workers`.
pub fn policy_placement(
    p: &Pipeline,
    setup: &Setup,
    stats: &ObservedStats,
    policy: Policy,
    rate: f64,
    max_workers: u32,
) -> Result<Placement, SimError> {
    let plan = plan_config(&setup.sim, max_workers);
    let input = PlanInput {
        pipeline: p,
        stats,
        target_rate: rate,
        coefficients: setup.sim.costs,
        config: &plan,
        current: None,
    };
    Ok(policy.decide(&input)?.placement)
}

/// Runs `placement` under `pattern` for one run of the setup.
pub fn run_static(
    p: &Pipeline,
    setup: &Setup,
    placement: Placement,
    pattern: RatePattern,
) -> Result<SimSummary, SimError> {
    let mut cfg = setup.config();
    if pattern.rate_at(0.0).is_infinite() {
        cfg.max_in_flight = setup.unthrottled_in_flight;
    }
    Ok(Simulation::from_spec(p, cfg, pattern, Deployment::Static(placement))?.run())
}

/// Runs `policy` elastically under `pattern` for `duration_s` (no measurement warm-up), its
/// first decision after `warmup_requests` inputs.
pub fn run_elastic(
    p: &Pipeline,
    setup: &Setup,
    policy: Policy,
    pattern: RatePattern,
    duration_s: f64,
    warmup_requests: u64,
) -> Result<SimSummary, SimError> {
    let cfg = SimConfig { duration_s, warmup_s: 0.0, ..setup.sim.clone() };
    let autoscaler = crate::autoscaler_config(&setup.sim, policy).with_warmup(warmup_requests);
    Ok(Simulation::from_spec(p, cfg, pattern, Deployment::Elastic(Box::new(autoscaler)))?.run())
}

/// The throughput of CLASP's placement over exactly `workers` workers under unthrottled input.
pub fn max_throughput(p: &Pipeline, setup: &Setup, workers: u32) -> Result<f64, SimError> {
    let stats = spec_stats(p, setup, UNTHROTTLED_RATE);
    let placement = placement_on(p, &stats, &setup.sim, UNTHROTTLED_RATE, workers)?;
    Ok(run_static(p, setup, placement, RatePattern::unthrottled())?.throughput)
}

/// Mean of a slice (0 when empty).
pub(crate) fn mean(v: &[f64]) -> f64 {
    if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 }
}
