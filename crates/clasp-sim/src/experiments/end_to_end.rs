//! Paper Fig. 14: each policy driving the cluster through a burst and a gradual input.
//!
//! The maximum rate of both patterns is the application's maximum throughput with CLASP on
//! ten workers; the patterns are seeded, so every policy sees the same input. Each policy
//! starts on one worker, takes its first decision after the paper's 10,000 requests (or the
//! requests of the pattern's first 5 s, if fewer: the simulated applications are slower than
//! the paper's), scales with the simulated controller (the paper's triggers), and is
//! measured over the whole run: throughput, median and p95 end-to-end latency, workers used
//! (time-weighted mean) and scaling steps. Ratios are relative to the first policy (CLASP).

use super::{Setup, max_throughput, run_elastic};
use crate::error::SimError;
use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_plan::Policy;
use serde::{Deserialize, Serialize};

/// The policies of Fig. 14 (DS2 added).
pub const POLICIES: [Policy; 6] = [
    Policy::Clasp,
    Policy::FaasFlow,
    Policy::FaasFlowSp,
    Policy::Zhang24,
    Policy::Zhang24Sp,
    Policy::Ds2,
];

/// One application, pattern and policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndToEndRow {
    /// Application.
    pub app: String,
    /// `burst` or `gradual`.
    pub pattern: String,
    /// Policy.
    pub policy: String,
    /// Maximum rate of the pattern (chains/s).
    pub max_rate: f64,
    /// Chains completed per second.
    pub throughput: f64,
    /// Median latency (ms).
    pub p50_ms: f64,
    /// 95th percentile latency (ms).
    pub p95_ms: f64,
    /// Time-weighted mean of workers in use.
    pub mean_workers: f64,
    /// Rescalings.
    pub scaling_steps: usize,
    /// Throughput of the first policy over this one's.
    pub reference_throughput_ratio: f64,
    /// Median latency of the first policy relative to this one's, minus one (−0.76: 76 % lower).
    pub reference_p50_change: f64,
}

/// Runs the experiment for every application, both patterns and every policy.
pub fn run(
    apps: &[Pipeline],
    setup: &Setup,
    policies: &[Policy],
) -> Result<Vec<EndToEndRow>, SimError> {
    let mut rows = Vec::new();
    for p in apps {
        let max_rate = max_throughput(p, setup, setup.sim.max_workers.min(10))?;
        let seed = setup.sim.seed;
        let patterns = [
            ("burst", RatePattern::burst(max_rate, seed)),
            ("gradual", RatePattern::gradual(max_rate, seed)),
        ];
        for (name, pattern) in patterns {
            rows.extend(one(p, setup, policies, name, &setup.pattern(&pattern), max_rate)?);
        }
    }
    Ok(rows)
}

fn one(
    p: &Pipeline,
    setup: &Setup,
    policies: &[Policy],
    name: &str,
    pattern: &RatePattern,
    max_rate: f64,
) -> Result<Vec<EndToEndRow>, SimError> {
    let duration = pattern.duration().unwrap_or(setup.run_s);
    // The paper's 10,000 requests, or what the first 5 s of the pattern offer if fewer.
    let warmup = pattern.volume_until(5.0 * setup.pattern_scale).clamp(100.0, 10_000.0) as u64;
    let mut rows: Vec<EndToEndRow> = Vec::new();
    for &policy in policies {
        let s = run_elastic(p, setup, policy, pattern.clone(), duration, warmup)?;
        let (p50, p95) = (s.latency.p50_us as f64 / 1e3, s.latency.p95_us as f64 / 1e3);
        let (ref_thr, ref_p50) =
            rows.first().map_or((s.throughput, p50), |r| (r.throughput, r.p50_ms));
        rows.push(EndToEndRow {
            app: p.name.clone(),
            pattern: name.to_owned(),
            policy: policy.name().to_owned(),
            max_rate,
            throughput: s.throughput,
            p50_ms: p50,
            p95_ms: p95,
            mean_workers: s.mean_workers,
            scaling_steps: s.scaling_events.len(),
            reference_throughput_ratio: ref_thr / s.throughput.max(1e-9),
            reference_p50_change: ref_p50 / p50.max(1e-9) - 1.0,
        });
    }
    Ok(rows)
}
