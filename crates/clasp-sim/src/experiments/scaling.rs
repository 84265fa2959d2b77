//! Paper Fig. 2–3: how throughput and latency change with the number of workers.
//!
//! For every application, CLASP's placement over exactly 1, 5 and 10 workers runs under an
//! unthrottled input: its throughput is the maximum, reported relative to one worker (Fig. 2).
//! Then each runs at a fixed input of `Setup::latency_load` of the one-worker maximum (the
//! paper uses the maximum itself; here the worker's CPU is the bottleneck, so at the maximum
//! its queue never settles and queueing, not placement, decides the latency), and its p95
//! end-to-end latency is reported relative to one worker (Fig. 3).

use super::{Setup, max_throughput, run_static, spec_stats};
use crate::error::SimError;
use crate::placement_on;
use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use serde::{Deserialize, Serialize};

/// Worker counts compared.
pub const WORKERS: [u32; 3] = [1, 5, 10];

/// One application at one worker count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScalingRow {
    /// Application (pipeline name).
    pub app: String,
    /// Workers.
    pub workers: u32,
    /// Throughput under unthrottled input (chains/s).
    pub max_throughput: f64,
    /// Relative to one worker.
    pub throughput_ratio: f64,
    /// Input rate of the latency run (chains/s).
    pub latency_rate: f64,
    /// p95 end-to-end latency at that rate (ms).
    pub p95_ms: f64,
    /// Relative to one worker.
    pub latency_ratio: f64,
}

/// Runs the experiment for every application.
pub fn run(apps: &[Pipeline], setup: &Setup) -> Result<Vec<ScalingRow>, SimError> {
    let mut rows = Vec::new();
    for p in apps {
        rows.extend(app(p, setup)?);
    }
    Ok(rows)
}

fn app(p: &Pipeline, setup: &Setup) -> Result<Vec<ScalingRow>, SimError> {
    let counts: Vec<u32> = WORKERS.into_iter().filter(|&w| w <= setup.sim.max_workers).collect();
    let maxima =
        counts.iter().map(|&w| max_throughput(p, setup, w)).collect::<Result<Vec<f64>, _>>()?;
    let rate = setup.latency_load * maxima[0];
    let stats = spec_stats(p, setup, rate);
    let mut p95 = Vec::new();
    for &w in &counts {
        let placement = placement_on(p, &stats, &setup.sim, rate, w)?;
        let s = run_static(p, setup, placement, RatePattern::constant(rate))?;
        p95.push(s.latency.p95_us as f64 / 1e3);
    }
    Ok(counts
        .iter()
        .enumerate()
        .map(|(i, &workers)| ScalingRow {
            app: p.name.clone(),
            workers,
            max_throughput: maxima[i],
            throughput_ratio: maxima[i] / maxima[0].max(1e-9),
            latency_rate: rate,
            p95_ms: p95[i],
            latency_ratio: p95[i] / p95[0].max(1e-9),
        })
        .collect())
}
