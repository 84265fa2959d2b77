//! Runtime statistics: worker reports aggregated into the observed-statistics schema that the
//! planning core reads, migration records, and the run summary.

use super::chains::Chains;
use crate::migration::MigrationDone;
pub use clasp_core::report::ReportLog;
use clasp_core::report::{self, Window, WorkerReport};
use clasp_core::stats::ObservedStats;
use clasp_core::{Pipeline, WorkerId};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// One migration, as measured by the planner and the workers.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MigrationRecord {
    /// When it finished (s since the run started).
    pub time_s: f64,
    /// The epoch migrated to.
    pub epoch: u64,
    /// Plan issued → every completion received (ms).
    pub planner_ms: f64,
    /// Longest worker pause: plan received → resumed (ms).
    pub max_worker_pause_ms: f64,
    /// Key groups moved.
    pub groups: u64,
    /// State bytes moved.
    pub bytes: u64,
    /// Keys moved.
    pub keys: u64,
    /// Queued requests moved.
    pub requests: u64,
    /// Per worker.
    pub workers: Vec<MigrationDone>,
}

impl MigrationRecord {
    /// Summarizes the completions of one migration.
    pub fn new(
        time_s: f64,
        epoch: u64,
        planner: Duration,
        groups: u64,
        done: Vec<MigrationDone>,
    ) -> Self {
        Self {
            time_s,
            epoch,
            planner_ms: planner.as_secs_f64() * 1e3,
            max_worker_pause_ms: done.iter().map(|d| d.pause_us as f64 / 1e3).fold(0.0, f64::max),
            groups,
            bytes: done.iter().map(|d| d.bytes_sent).sum(),
            keys: done.iter().map(|d| d.keys_sent).sum(),
            requests: done.iter().map(|d| d.requests_sent).sum(),
            workers: done,
        }
    }
}

/// Per-operator totals of a run.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct OperatorSummary {
    /// Operator name.
    pub name: String,
    /// Requests executed.
    pub processed: u64,
    /// Records processed.
    pub records: u64,
    /// Records emitted.
    pub emitted: u64,
    /// Mean execution time per request (µs).
    pub mean_exec_us: f64,
    /// Keys in state at the last report.
    pub state_keys: u64,
    /// Rejected records by reason.
    pub rejected: Vec<(String, u64)>,
}

pub use clasp_core::report::Latency;

/// What a run did.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RunSummary {
    /// Wall time (s).
    pub duration_s: f64,
    /// Input requests.
    pub input_requests: u64,
    /// Input records.
    pub input_records: u64,
    /// Chains completed.
    pub completed: u64,
    /// Completed chains per second of run time.
    pub throughput: f64,
    /// Input records per second of run time (of completed work).
    pub records_per_s: f64,
    /// End-to-end latency of completed chains.
    pub latency: Latency,
    /// Records that reached sinks.
    pub sink_records: u64,
    /// Per operator.
    pub operators: Vec<OperatorSummary>,
    /// Local chained requests.
    pub local_requests: u64,
    /// Remote chained requests.
    pub remote_requests: u64,
    /// Migrations.
    pub migrations: Vec<MigrationRecord>,
    /// Input records skipped because they exceed the frame limit.
    #[serde(default)]
    pub oversized_records: u64,
    /// Input requests dropped from the incoming queue when the run was stopped at its
    /// duration.
    #[serde(default)]
    pub dropped_requests: u64,
    /// Chains still in flight when the run stopped waiting for them (at its duration, after
    /// the drain grace).
    #[serde(default)]
    pub abandoned_chains: u64,
    /// The run was stopped by a signal: its results are partial.
    #[serde(default)]
    pub interrupted: bool,
}

impl RunSummary {
    /// Totals of a finished run.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        p: &Pipeline,
        duration_s: f64,
        input_requests: u64,
        input_records: u64,
        chains: &Chains,
        sink_records: u64,
        reports: &ReportLog,
        migrations: &[MigrationRecord],
    ) -> Self {
        let mut operators: Vec<OperatorSummary> = p
            .operators
            .iter()
            .map(|o| OperatorSummary { name: o.name.clone(), ..Default::default() })
            .collect();
        let mut exec_us = vec![0.0; operators.len()];
        let (mut local, mut remote) = (0, 0);
        let mut last_rejects: Vec<Vec<(WorkerId, Reasons)>> = vec![Vec::new(); operators.len()];
        let mut last_keys: Vec<Vec<(WorkerId, u64)>> = vec![Vec::new(); operators.len()];
        for (_, r) in reports.all() {
            local += r.local;
            remote += r.remote;
            for (o, op) in r.ops.iter().enumerate().take(operators.len()) {
                let s = &mut operators[o];
                s.processed += op.processed;
                s.records += op.records;
                s.emitted += op.emitted;
                exec_us[o] += op.exec_us;
                // Rejections and state sizes are cumulative per worker: keep the latest.
                upsert(&mut last_rejects[o], r.worker, op.rejects.clone());
                upsert(&mut last_keys[o], r.worker, op.state_keys);
            }
        }
        for (o, s) in operators.iter_mut().enumerate() {
            s.mean_exec_us = if s.processed > 0 { exec_us[o] / s.processed as f64 } else { 0.0 };
            s.state_keys = last_keys[o].iter().map(|(_, k)| k).sum();
            let mut by_reason: Vec<(String, u64)> = Vec::new();
            for (_, rs) in &last_rejects[o] {
                for (reason, n) in rs {
                    match by_reason.iter_mut().find(|(r, _)| r == reason) {
                        Some((_, m)) => *m += n,
                        None => by_reason.push((reason.clone(), *n)),
                    }
                }
            }
            s.rejected = by_reason;
        }
        let latency = Latency::of(&chains.total);
        let secs = duration_s.max(1e-9);
        Self {
            duration_s,
            input_requests,
            input_records,
            completed: chains.completed,
            throughput: chains.completed as f64 / secs,
            records_per_s: input_records as f64 / secs,
            latency,
            sink_records,
            operators,
            local_requests: local,
            remote_requests: remote,
            migrations: migrations.to_vec(),
            oversized_records: 0,
            dropped_requests: 0,
            abandoned_chains: 0,
            interrupted: false,
        }
    }

    /// Total rejected records.
    pub fn rejected(&self) -> u64 {
        self.operators.iter().flat_map(|o| &o.rejected).map(|(_, n)| n).sum()
    }
}

/// Rejected records by reason.
type Reasons = Vec<(String, u64)>;

fn upsert<T>(v: &mut Vec<(WorkerId, T)>, w: WorkerId, value: T) {
    match v.iter_mut().find(|(x, _)| *x == w) {
        Some((_, old)) => *old = value,
        None => v.push((w, value)),
    }
}

/// Observed statistics over the reports of the last `window_s` seconds (the shared
/// aggregation of [`clasp_core::report::observe`]), with the planner's input and completion
/// rates per second.
#[allow(clippy::too_many_arguments)]
pub fn observe(
    p: &Pipeline,
    reports: &ReportLog,
    now: f64,
    window_s: f64,
    inputs_per_second: &[u64],
    completed_per_second: &[u64],
    batch_size: u32,
    workers_used: u32,
) -> ObservedStats {
    let from = (now - window_s).max(0.0);
    let seconds = |v: &[u64]| -> Vec<f64> {
        let (a, b) = (from.floor() as usize, (now.floor() as usize).min(v.len()));
        if b <= a { Vec::new() } else { v[a..b].iter().map(|x| *x as f64).collect() }
    };
    let (inputs, completed) = (seconds(inputs_per_second), seconds(completed_per_second));
    let window = Window {
        inputs: &inputs,
        completed: &completed,
        planner_queue: 0.0,
        workers_used,
        batch_size,
    };
    let in_window: Vec<&WorkerReport> = reports.window(from, now).collect();
    report::observe(p, &in_window, &window)
}
