//! Runtime statistics: worker reports aggregated into the observed-statistics schema that the
//! planning core reads, migration records, and the run summary.

use super::chains::Chains;
use crate::metrics::WorkerReport;
use crate::migration::MigrationDone;
use clasp_core::stats::{
    EdgeStats, ObservedStats, OperatorStats, STATS_SCHEMA, WorkerOperatorStats, WorkerStats,
};
use clasp_core::{Endpoint, Pipeline, WorkerId};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// Every report received, in arrival order, with its arrival time (s since the run started).
#[derive(Debug, Default)]
pub struct ReportLog {
    entries: Vec<(f64, WorkerReport)>,
}

impl ReportLog {
    /// Adds a report.
    pub fn push(&mut self, t: f64, r: WorkerReport) {
        self.entries.push((t, r));
    }

    /// Reports that arrived in `[from, to]`.
    pub fn window(&self, from: f64, to: f64) -> impl Iterator<Item = &WorkerReport> {
        self.entries.iter().filter(move |(t, _)| *t >= from && *t <= to).map(|(_, r)| r)
    }

    /// The last report of each worker that reported in the last 3 s.
    pub fn latest_per_worker(&self) -> Vec<&WorkerReport> {
        let now = self.entries.last().map_or(0.0, |(t, _)| *t);
        let mut latest: Vec<&WorkerReport> = Vec::new();
        for (t, r) in self.entries.iter().rev() {
            if now - t > 3.0 {
                break;
            }
            if !latest.iter().any(|l| l.worker == r.worker) {
                latest.push(r);
            }
        }
        latest.sort_by_key(|r| r.worker);
        latest
    }

    /// All reports.
    pub fn all(&self) -> impl Iterator<Item = &(f64, WorkerReport)> {
        self.entries.iter()
    }

    /// Reports from position `index` on (positions count from the first report).
    pub fn since(&self, index: usize) -> &[(f64, WorkerReport)] {
        &self.entries[index.min(self.entries.len())..]
    }

    /// Number of reports.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no report arrived yet.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

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
    pub fn new(time_s: f64, epoch: u64, planner: Duration, done: Vec<MigrationDone>) -> Self {
        Self {
            time_s,
            epoch,
            planner_ms: planner.as_secs_f64() * 1e3,
            max_worker_pause_ms: done.iter().map(|d| d.pause_us as f64 / 1e3).fold(0.0, f64::max),
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

/// Latency percentiles (µs).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Latency {
    /// Median.
    pub p50_us: u64,
    /// 95th percentile.
    pub p95_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// Largest.
    pub max_us: u64,
    /// Mean.
    pub mean_us: f64,
}

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
        let h = &chains.total;
        let latency = if chains.completed == 0 {
            Latency::default()
        } else {
            Latency {
                p50_us: h.value_at_quantile(0.5),
                p95_us: h.value_at_quantile(0.95),
                p99_us: h.value_at_quantile(0.99),
                max_us: h.max(),
                mean_us: h.mean(),
            }
        };
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

/// Aggregates the reports of the last `window_s` seconds into observed statistics (Table 2,
/// summed over workers for N_o and E, rate-weighted for τ̄_o).
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
    let window: Vec<&WorkerReport> = reports.window(from, now).collect();
    let mut workers: Vec<WorkerStats> = Vec::new();
    let mut op_exec = vec![0.0; p.operators.len()];
    let mut op_wait = vec![0.0; p.operators.len()];
    let mut op_processed = vec![0u64; p.operators.len()];
    let mut op_records = vec![0u64; p.operators.len()];
    let mut op_emitted = vec![0u64; p.operators.len()];
    let mut op_touched = vec![0u64; p.operators.len()];
    let mut op_keys = vec![0u64; p.operators.len()];
    let mut edges = vec![0u64; p.streams.len()];
    let mut span = 0.0f64;
    for r in &window {
        for (o, op) in r.ops.iter().enumerate().take(p.operators.len()) {
            op_exec[o] += op.exec_us;
            op_wait[o] += op.wait_us;
            op_processed[o] += op.processed;
            op_records[o] += op.records;
            op_emitted[o] += op.emitted;
            op_touched[o] += op.touched;
        }
        for (e, n) in r.edges.iter().enumerate().take(edges.len()) {
            edges[e] += n;
        }
    }
    // Per worker: mean of its interval rates in the window.
    let mut ids: Vec<WorkerId> = window.iter().map(|r| r.worker).collect();
    ids.sort();
    ids.dedup();
    for w in ids {
        let mine: Vec<&&WorkerReport> = window.iter().filter(|r| r.worker == w).collect();
        let secs: f64 = mine.iter().map(|r| r.interval_s).sum::<f64>().max(1e-9);
        span = span.max(secs);
        let n = mine.len() as f64;
        let last = mine.last().expect("non-empty");
        for (o, op) in last.ops.iter().enumerate().take(p.operators.len()) {
            op_keys[o] += op.state_keys;
        }
        workers.push(WorkerStats {
            worker: w.0,
            slots: last.slots,
            queue: mine.iter().map(|r| r.queue).sum::<f64>() / n,
            queue_wait_ms: mine.iter().map(|r| r.mean_wait_us()).sum::<f64>() / n / 1e3,
            local_rate: mine.iter().map(|r| r.local).sum::<u64>() as f64 / secs,
            remote_rate: mine.iter().map(|r| r.remote).sum::<u64>() as f64 / secs,
            remote_destinations: mine.iter().map(|r| f64::from(r.destinations)).sum::<f64>() / n,
            exec_load: mine.iter().map(|r| r.exec_load() * r.interval_s).sum::<f64>() / secs,
            saturated: mine.iter().filter(|r| r.saturated).count() * 2 > mine.len(),
            operators: p
                .operators
                .iter()
                .map(|o| {
                    let processed: u64 =
                        mine.iter().filter_map(|r| r.op(o.id)).map(|x| x.processed).sum();
                    let exec: f64 = mine.iter().filter_map(|r| r.op(o.id)).map(|x| x.exec_us).sum();
                    WorkerOperatorStats {
                        name: o.name.clone(),
                        processed_rate: processed as f64 / secs,
                        exec_time_us: if processed > 0 { exec / processed as f64 } else { 0.0 },
                    }
                })
                .collect(),
        });
    }
    let secs = span.max(1e-9);
    let operators = p
        .operators
        .iter()
        .map(|o| {
            let i = o.id.index();
            let n = op_processed[i];
            OperatorStats {
                name: o.name.clone(),
                processed_rate: n as f64 / secs,
                records_rate: op_records[i] as f64 / secs,
                exec_time_us: if n > 0 { op_exec[i] / n as f64 } else { 0.0 },
                queue_wait_us: if n > 0 { op_wait[i] / n as f64 } else { 0.0 },
                state_touch_fraction: if n > 0 { op_touched[i] as f64 / n as f64 } else { 0.0 },
                state_keys: op_keys[i],
                selectivity: if op_records[i] > 0 {
                    op_emitted[i] as f64 / op_records[i] as f64
                } else {
                    0.0
                },
                ..OperatorStats::default()
            }
        })
        .collect();
    let edges = p
        .streams
        .iter()
        .filter_map(|s| match (s.from, s.to) {
            (Endpoint::Operator(a), Endpoint::Operator(b)) => Some(EdgeStats {
                from: p.operator(a).name.clone(),
                to: p.operator(b).name.clone(),
                rate: edges[s.id.index()] as f64 / secs,
            }),
            _ => None,
        })
        .collect();
    let per_second_mean = |v: &[u64]| -> f64 {
        let (a, b) = (from.floor() as usize, (now.floor() as usize).min(v.len()));
        if b <= a { 0.0 } else { v[a..b].iter().sum::<u64>() as f64 / (b - a) as f64 }
    };
    ObservedStats {
        schema: STATS_SCHEMA.into(),
        pipeline: p.name.clone(),
        window_s: secs,
        input_rate: per_second_mean(inputs_per_second),
        throughput: per_second_mean(completed_per_second),
        planner_queue: 0.0,
        batch_size,
        workers_used,
        operators,
        edges,
        workers,
        coefficients: None,
        saturated_per_worker_rate: None,
    }
}
