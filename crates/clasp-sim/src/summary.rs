//! What a simulation reports: totals over the measured period (after the warm-up), a row per
//! statistics interval, and every scaling event.

use clasp_core::placement::Placement;
pub use clasp_core::report::Latency;
pub use clasp_core::stats::ScalingEvent;
use clasp_core::stats::{Coefficients, ObservedStats};
use serde::{Deserialize, Serialize};

/// One statistics interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct IntervalRow {
    /// End of the interval (s).
    pub time_s: f64,
    /// Input requests per second offered to the planner.
    pub input_rate: f64,
    /// Chains completed per second.
    pub throughput: f64,
    /// Workers active at the end of the interval.
    pub workers: u32,
    /// Median latency of the chains completed in the interval (ms).
    pub p50_ms: f64,
    /// 95th percentile of the same (ms).
    pub p95_ms: f64,
    /// Mean planner queue.
    pub planner_queue: f64,
    /// Saturated workers.
    pub saturated: u32,
}

/// Totals of the measured period.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SimSummary {
    /// Pipeline name.
    pub pipeline: String,
    /// Policy name, or `static` for a fixed placement.
    pub policy: String,
    /// Input pattern name.
    pub pattern: String,
    /// Seed of every draw.
    pub seed: u64,
    /// Simulated time (s).
    pub simulated_s: f64,
    /// Of which measured, after the warm-up (s).
    pub measured_s: f64,
    /// Input requests offered in the measured period.
    pub inputs: u64,
    /// Chains completed in the measured period.
    pub completed: u64,
    /// Input requests per second offered.
    pub input_rate: f64,
    /// Chains completed per second.
    pub throughput: f64,
    /// End-to-end latency of the chains completed in the measured period.
    pub latency: Latency,
    /// Mean time a request waited in a worker queue (µs).
    pub mean_queue_wait_us: f64,
    /// Mean chains in flight (dispatched, not complete).
    pub mean_in_flight: f64,
    /// Mean requests queued or running over all workers.
    pub mean_at_workers: f64,
    /// Time-weighted mean of active workers.
    pub mean_workers: f64,
    /// Most workers active at once.
    pub max_workers: u32,
    /// Local chained requests per second.
    pub local_rate: f64,
    /// Remote chained requests per second.
    pub remote_rate: f64,
    /// Requests forwarded because they reached a worker that no longer owned them.
    pub forwarded: u64,
    /// Every rescaling.
    pub scaling_events: Vec<ScalingEvent>,
    /// One row per statistics interval of the whole run.
    pub timeline: Vec<IntervalRow>,
    /// The estimator's coefficients at the end (elastic runs, or a run with an estimator).
    pub coefficients: Option<Coefficients>,
    /// Saturated observations that updated the estimator's α, β, γ.
    #[serde(default)]
    pub estimator_updates: u64,
    /// Statistics of the last window, in the `clasp.stats/1` schema.
    pub stats: ObservedStats,
    /// The placement in force at the end.
    pub placement: Option<Placement>,
    /// Events processed.
    pub events: u64,
}

impl SimSummary {
    /// A human-readable report: throughput, latency, workers over time, scaling events.
    pub fn human(&self) -> String {
        let l = &self.latency;
        let mut out = format!(
            "pipeline `{}`, policy {}, pattern {}, seed {}: {:.1} s simulated ({:.1} s measured), {} events\n",
            self.pipeline,
            self.policy,
            self.pattern,
            self.seed,
            self.simulated_s,
            self.measured_s,
            self.events
        );
        out += &format!(
            "throughput {:.1} chains/s of {:.1} offered; latency p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms, mean {:.2} ms\n",
            self.throughput,
            self.input_rate,
            l.p50_us as f64 / 1e3,
            l.p95_us as f64 / 1e3,
            l.p99_us as f64 / 1e3,
            l.mean_us / 1e3
        );
        out += &format!(
            "workers: mean {:.2}, max {}; chained requests {:.1}/s local, {:.1}/s remote; {} forwarded\n",
            self.mean_workers, self.max_workers, self.local_rate, self.remote_rate, self.forwarded
        );
        if let Some(c) = self.coefficients {
            out += &format!(
                "estimated coefficients: alpha {:.1} us, beta {:.1} us, gamma {:.0} us/s, W {:.0} us/s\n",
                c.alpha, c.beta, c.gamma, c.capacity
            );
        }
        out += &self.workers_over_time();
        if !self.scaling_events.is_empty() {
            out += &format!("\n{} scaling event(s):\n", self.scaling_events.len());
            out += &format!(
                "  {:>8} {:>9} {:<24} {:>11} {:>11} {:>12}\n",
                "time (s)", "workers", "reason", "planner ms", "pause ms", "target (r/s)"
            );
            for e in &self.scaling_events {
                out += &format!(
                    "  {:>8.1} {:>4} -> {:<2} {:<24} {:>11.2} {:>11.2} {:>12.1}\n",
                    e.time_s,
                    e.from_workers,
                    e.to_workers,
                    e.reason,
                    e.planner_ms,
                    e.max_worker_pause_ms,
                    e.target_rate
                );
            }
        }
        out
    }

    /// Workers over time as runs of equal counts: `0–12 s: 1, 12–30 s: 3, ...`.
    pub fn workers_over_time(&self) -> String {
        let mut runs: Vec<(f64, f64, u32)> = Vec::new();
        let mut start = 0.0;
        for r in &self.timeline {
            match runs.last_mut() {
                Some(last) if last.2 == r.workers => last.1 = r.time_s,
                _ => runs.push((start, r.time_s, r.workers)),
            }
            start = r.time_s;
        }
        let parts: Vec<String> =
            runs.iter().map(|(a, b, w)| format!("{a:.0}-{b:.0} s: {w}")).collect();
        format!("workers over time: {}\n", parts.join(", "))
    }
}
