//! What a worker reports every interval (CLASP Table 2, per worker) and how a window of reports
//! becomes the observed statistics every policy and the estimator read.
//!
//! The runtime's metrics monitor and the simulator's workers produce the same
//! [`WorkerReport`]; the runtime's planner and the simulator aggregate them with the same
//! [`observe`], so a figure from one can be checked against the other.

use crate::stats::{
    EdgeStats, ObservedStats, OperatorStats, STATS_SCHEMA, WorkerOperatorStats, WorkerStats,
};
use crate::{Endpoint, OperatorId, Pipeline, WorkerId};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Latency percentiles of completed chains (µs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
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

impl Latency {
    /// The percentiles of a histogram (all 0 when it is empty).
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Self::default();
        }
        Self {
            p50_us: h.value_at_quantile(0.5),
            p95_us: h.value_at_quantile(0.95),
            p99_us: h.value_at_quantile(0.99),
            max_us: h.max(),
            mean_us: h.mean(),
        }
    }
}

/// The times between consecutive events of an arrival process (µs): how many, their sum and
/// the sum of their squares, so that windows add up and the variability follows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Gaps {
    /// Gaps measured.
    pub count: u64,
    /// Their sum (µs).
    pub sum_us: f64,
    /// The sum of their squares (µs²).
    pub sum_sq_us2: f64,
}

impl Gaps {
    /// Fewest gaps a variability is computed from.
    pub const MIN_COUNT: u64 = 20;

    /// Adds one gap.
    pub fn push(&mut self, gap_us: f64) {
        self.count += 1;
        self.sum_us += gap_us;
        self.sum_sq_us2 += gap_us * gap_us;
    }

    /// The variability over several intervals: each interval's (of those with enough gaps),
    /// weighted by its gaps. Not that of the gaps pooled: a change of the rate between
    /// intervals is no variability of the arrivals.
    pub fn mean_scv<'a>(intervals: impl IntoIterator<Item = &'a Gaps>) -> Option<f64> {
        let (weighted, count) = intervals
            .into_iter()
            .filter_map(|g| Some((g.scv()?, g.count as f64)))
            .fold((0.0, 0.0), |(s, n), (v, c)| (s + v * c, n + c));
        (count > 0.0).then(|| weighted / count)
    }

    /// Variance / mean² of the gaps (0 for a paced process, 1 for a Poisson one), from at
    /// least [`Gaps::MIN_COUNT`] of them.
    pub fn scv(&self) -> Option<f64> {
        if self.count < Self::MIN_COUNT {
            return None;
        }
        scv(self.count, self.sum_us, self.sum_sq_us2)
    }
}

/// One operator's part of a report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpReport {
    /// Requests executed.
    pub processed: u64,
    /// Records in them.
    pub records: u64,
    /// Records emitted.
    pub emitted: u64,
    /// Total execution time (µs).
    pub exec_us: f64,
    /// Total of the squared execution times (µs²), where measured; 0 otherwise.
    #[serde(default)]
    pub exec_sq_us2: f64,
    /// Total queue wait (µs).
    pub wait_us: f64,
    /// Executions that touched state.
    pub touched: u64,
    /// Keys in state now.
    pub state_keys: u64,
    /// Total CPU spent dispatching chained requests (µs), where it is measured (the
    /// simulator); 0 otherwise.
    pub dispatch_us: f64,
    /// Rejected records by reason, cumulative.
    pub rejects: Vec<(String, u64)>,
    /// Records processed per key group in the interval, `(group, records)` for the groups that
    /// had any (keyed operators, where it is measured): how unevenly keys load the groups.
    #[serde(default)]
    pub groups: Vec<(u32, u64)>,
}

/// What a worker reports every interval: CLASP Table 2 plus what the baselines need.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerReport {
    /// The reporting worker.
    pub worker: WorkerId,
    /// Placement epoch when the report was taken.
    pub epoch: u64,
    /// Interval length (s).
    pub interval_s: f64,
    /// Executor slots.
    pub slots: u32,
    /// Q_w: mean queue size over the interval (time average).
    pub queue: f64,
    /// Queue size at the end of the interval.
    pub queue_now: u64,
    /// Local chained requests dispatched.
    pub local: u64,
    /// Remote chained requests dispatched.
    pub remote: u64,
    /// δ_w: distinct remote workers reached.
    pub destinations: u32,
    /// Per operator (indexed by `OperatorId`).
    pub ops: Vec<OpReport>,
    /// Chained requests per stream (indexed by `StreamId`).
    pub edges: Vec<u64>,
    /// Records those chained requests carried, per stream (indexed by `StreamId`).
    pub edge_records: Vec<u64>,
    /// Whether the worker was saturated in the interval.
    pub saturated: bool,
    /// The planner's request number when asked for (`ReportNow`), 0 for periodic reports.
    pub requested: u64,
}

impl WorkerReport {
    /// Σ_o N_{w,o} τ̄_{w,o}: execution load (µs per second).
    pub fn exec_load(&self) -> f64 {
        self.ops.iter().map(|o| o.exec_us).sum::<f64>() / self.interval_s.max(1e-9)
    }

    /// Mean queue wait of the requests finished in the interval (µs).
    pub fn mean_wait_us(&self) -> f64 {
        let n: u64 = self.ops.iter().map(|o| o.processed).sum();
        if n == 0 { 0.0 } else { self.ops.iter().map(|o| o.wait_us).sum::<f64>() / n as f64 }
    }

    /// Operator `op`'s part.
    pub fn op(&self, op: OperatorId) -> Option<&OpReport> {
        self.ops.get(op.index())
    }

    /// The report as one row of Table 2 (rates per second of this interval).
    pub fn worker_stats(&self, p: &Pipeline) -> WorkerStats {
        let secs = self.interval_s.max(1e-9);
        WorkerStats {
            worker: self.worker.0,
            slots: self.slots,
            queue: self.queue,
            queue_wait_ms: self.mean_wait_us() / 1e3,
            local_rate: self.local as f64 / secs,
            remote_rate: self.remote as f64 / secs,
            remote_destinations: f64::from(self.destinations),
            exec_load: self.exec_load(),
            saturated: self.saturated,
            operators: operator_rows(p, &[self], secs),
        }
    }
}

/// Every report, with the time it was taken (s since the start).
#[derive(Clone, Debug, Default)]
pub struct ReportLog {
    entries: Vec<(f64, WorkerReport)>,
}

impl ReportLog {
    /// Adds a report.
    pub fn push(&mut self, t: f64, r: WorkerReport) {
        self.entries.push((t, r));
    }

    /// Reports taken in `[from, to]`.
    pub fn window(&self, from: f64, to: f64) -> impl Iterator<Item = &WorkerReport> {
        let start = self.entries.partition_point(|(t, _)| *t < from);
        self.entries[start..].iter().take_while(move |(t, _)| *t <= to).map(|(_, r)| r)
    }

    /// Drops reports taken before `t`.
    pub fn forget_before(&mut self, t: f64) {
        let keep = self.entries.partition_point(|(x, _)| *x < t);
        self.entries.drain(..keep);
    }

    /// All reports.
    pub fn all(&self) -> &[(f64, WorkerReport)] {
        &self.entries
    }

    /// Reports from position `index` on (positions count from the first report kept).
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
}

/// Per-operator rows of one worker over its reports.
fn operator_rows(p: &Pipeline, mine: &[&WorkerReport], secs: f64) -> Vec<WorkerOperatorStats> {
    p.operators
        .iter()
        .map(|o| {
            let processed: u64 = mine.iter().filter_map(|r| r.op(o.id)).map(|x| x.processed).sum();
            let exec: f64 = mine.iter().filter_map(|r| r.op(o.id)).map(|x| x.exec_us).sum();
            WorkerOperatorStats {
                name: o.name.clone(),
                processed_rate: processed as f64 / secs,
                exec_time_us: if processed > 0 { exec / processed as f64 } else { 0.0 },
            }
        })
        .collect()
}

/// The rows of every worker that reported in `window`.
fn worker_rows(p: &Pipeline, window: &[&WorkerReport]) -> (Vec<WorkerStats>, f64) {
    let mut ids: Vec<WorkerId> = window.iter().map(|r| r.worker).collect();
    ids.sort();
    ids.dedup();
    let mut span = 0.0f64;
    let rows = ids
        .into_iter()
        .map(|w| {
            let mine: Vec<&WorkerReport> =
                window.iter().copied().filter(|r| r.worker == w).collect();
            let secs: f64 = mine.iter().map(|r| r.interval_s).sum::<f64>().max(1e-9);
            span = span.max(secs);
            let n = mine.len() as f64;
            WorkerStats {
                worker: w.0,
                slots: mine[0].slots,
                queue: mine.iter().map(|r| r.queue).sum::<f64>() / n,
                queue_wait_ms: mine.iter().map(|r| r.mean_wait_us()).sum::<f64>() / n / 1e3,
                local_rate: mine.iter().map(|r| r.local).sum::<u64>() as f64 / secs,
                remote_rate: mine.iter().map(|r| r.remote).sum::<u64>() as f64 / secs,
                remote_destinations: mine.iter().map(|r| f64::from(r.destinations)).sum::<f64>()
                    / n,
                exec_load: mine.iter().map(|r| r.exec_load() * r.interval_s).sum::<f64>() / secs,
                saturated: mine.iter().filter(|r| r.saturated).count() * 2 > mine.len(),
                operators: operator_rows(p, &mine, secs),
            }
        })
        .collect();
    (rows, span)
}

/// What [`observe`] needs besides the reports.
#[derive(Clone, Copy, Debug)]
pub struct Window<'a> {
    /// Input requests per second entering the planner, one entry per interval of the window.
    pub inputs: &'a [f64],
    /// Chains completed per second, one entry per interval of the window.
    pub completed: &'a [f64],
    /// Mean planner queue over the window.
    pub planner_queue: f64,
    /// Workers in use.
    pub workers_used: u32,
    /// Records per input request.
    pub batch_size: u32,
}

/// Aggregates `reports` (one window) into observed statistics: Table 2 summed over workers for
/// N_o and E, rate-weighted for τ̄_o, per-worker rows for the estimator.
pub fn observe(p: &Pipeline, reports: &[&WorkerReport], w: &Window<'_>) -> ObservedStats {
    let n_ops = p.operators.len();
    let mut totals = vec![OpReport::default(); n_ops];
    let mut edges = vec![0u64; p.streams.len()];
    let mut edge_records = vec![0u64; p.streams.len()];
    let mut keys = vec![0u64; n_ops];
    for r in reports {
        for (t, op) in totals.iter_mut().zip(&r.ops) {
            t.processed += op.processed;
            t.records += op.records;
            t.emitted += op.emitted;
            t.exec_us += op.exec_us;
            t.exec_sq_us2 += op.exec_sq_us2;
            t.wait_us += op.wait_us;
            t.touched += op.touched;
        }
        for (e, n) in edges.iter_mut().zip(&r.edges) {
            *e += n;
        }
        for (e, n) in edge_records.iter_mut().zip(&r.edge_records) {
            *e += n;
        }
    }
    let (workers, span) = worker_rows(p, reports);
    for row in &workers {
        if let Some(last) = reports.iter().rev().find(|r| r.worker.0 == row.worker) {
            for (k, op) in keys.iter_mut().zip(&last.ops) {
                *k += op.state_keys;
            }
        }
    }
    let secs = span.max(1e-9);
    let operators = p
        .operators
        .iter()
        .map(|o| operator_stats(o.name.clone(), &totals[o.id.index()], keys[o.id.index()], secs))
        .collect();
    let edges = p
        .streams
        .iter()
        .filter_map(|s| match (s.from, s.to) {
            (Endpoint::Operator(a), Endpoint::Operator(b)) => Some(EdgeStats {
                from: p.operator(a).name.clone(),
                to: p.operator(b).name.clone(),
                rate: edges[s.id.index()] as f64 / secs,
                records_rate: edge_records[s.id.index()] as f64 / secs,
            }),
            _ => None,
        })
        .collect();
    let mean = |v: &[f64]| if v.is_empty() { 0.0 } else { v.iter().sum::<f64>() / v.len() as f64 };
    ObservedStats {
        schema: STATS_SCHEMA.into(),
        pipeline: p.name.clone(),
        window_s: if reports.is_empty() { 0.0 } else { secs },
        input_rate: mean(w.inputs),
        throughput: mean(w.completed),
        planner_queue: w.planner_queue,
        batch_size: w.batch_size,
        workers_used: w.workers_used,
        operators,
        edges,
        workers,
        coefficients: None,
        saturated_per_worker_rate: None,
        arrival_scv: None,
    }
}

fn operator_stats(name: String, t: &OpReport, keys: u64, secs: f64) -> OperatorStats {
    let n = t.processed;
    let per = |x: f64| if n > 0 { x / n as f64 } else { 0.0 };
    OperatorStats {
        name,
        processed_rate: n as f64 / secs,
        records_rate: t.records as f64 / secs,
        exec_time_us: per(t.exec_us),
        exec_time_scv: scv(n, t.exec_us, t.exec_sq_us2),
        queue_wait_us: per(t.wait_us),
        state_touch_fraction: per(t.touched as f64),
        state_keys: keys,
        selectivity: if t.records > 0 { t.emitted as f64 / t.records as f64 } else { 0.0 },
        ..OperatorStats::default()
    }
}

/// The squared coefficient of variation of `n` execution times from their total and the total
/// of their squares; `None` where the squares were not measured.
fn scv(n: u64, total: f64, squares: f64) -> Option<f64> {
    if n < 2 || total <= 0.0 || squares <= 0.0 {
        return None;
    }
    let mean = total / n as f64;
    Some((squares / n as f64 / (mean * mean) - 1.0).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_tell_paced_from_poisson_arrivals() {
        let mut paced = Gaps::default();
        for _ in 0..100 {
            paced.push(250.0);
        }
        assert_eq!(paced.scv(), Some(0.0));
        // Exponential gaps by inversion of evenly spaced quantiles: variance / mean² → 1.
        let mut poisson = Gaps::default();
        let n = 100_000;
        for i in 0..n {
            poisson.push(-(1.0 - (i as f64 + 0.5) / n as f64).ln() * 250.0);
        }
        let scv = poisson.scv().expect("enough gaps");
        assert!((scv - 1.0).abs() < 0.01, "{scv}");
        let mut few = Gaps::default();
        few.push(1.0);
        assert_eq!(few.scv(), None, "one gap is no variability");
        // A paced input that doubles its rate between two intervals is still paced.
        let mut faster = Gaps::default();
        for _ in 0..100 {
            faster.push(125.0);
        }
        assert_eq!(Gaps::mean_scv([&paced, &faster, &few]), Some(0.0));
        let w = Gaps::mean_scv([&paced, &poisson]).expect("measured");
        assert!((w - scv * 100_000.0 / 100_100.0).abs() < 1e-12, "weighted by gaps: {w}");
        assert_eq!(Gaps::mean_scv([&few]), None);
    }

    fn pipeline(name: &str) -> Pipeline {
        let path =
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../pipelines").join(name);
        crate::spec::load(&path).unwrap()
    }

    fn report(worker: u32, processed: u64, saturated: bool) -> WorkerReport {
        WorkerReport {
            worker: WorkerId(worker),
            interval_s: 1.0,
            slots: 10,
            queue: 600.0,
            local: 10 * processed,
            remote: processed,
            destinations: 1,
            ops: vec![
                OpReport {
                    processed,
                    records: processed,
                    emitted: 11 * processed,
                    exec_us: 400.0 * processed as f64,
                    wait_us: 2e5 * processed as f64,
                    ..OpReport::default()
                },
                OpReport {
                    processed: 10 * processed,
                    records: 10 * processed,
                    exec_us: 4000.0 * processed as f64,
                    state_keys: 7,
                    touched: 10 * processed,
                    ..OpReport::default()
                },
            ],
            edges: vec![0, 11 * processed],
            edge_records: vec![0, 11 * processed],
            saturated,
            ..WorkerReport::default()
        }
    }

    #[test]
    fn observe_sums_workers_and_averages_intervals() {
        let p = pipeline("wc.toml");
        let (a, b, c) = (report(0, 100, true), report(1, 300, true), report(0, 300, false));
        let window = Window {
            inputs: &[400.0, 500.0],
            completed: &[390.0, 410.0],
            planner_queue: 3.0,
            workers_used: 2,
            batch_size: 1,
        };
        let s = observe(&p, &[&a, &b, &c], &window);
        // Worker 0 reported twice: the window spans 2 s, so N_split = 700 / 2.
        assert_eq!(s.operators[0].processed_rate, 350.0);
        assert_eq!(s.operators[0].exec_time_us, 400.0);
        assert_eq!(s.operators[1].processed_rate, 3500.0);
        assert_eq!(s.operators[1].state_keys, 14);
        assert_eq!((s.edges[0].rate, s.edges[0].records_rate), (7700.0 / 2.0, 7700.0 / 2.0));
        assert_eq!((s.input_rate, s.throughput, s.workers_used), (450.0, 400.0, 2));
        assert_eq!(s.workers.len(), 2);
        let w0 = &s.workers[0];
        assert_eq!((w0.local_rate, w0.remote_rate, w0.saturated), (2000.0, 200.0, false));
        assert_eq!(w0.exec_load, (400.0 * 400.0 + 4000.0 * 400.0) / 2.0);
        assert!((w0.queue_wait_ms - (2e5 / 11.0) / 1e3).abs() < 1e-9);
        let row = b.worker_stats(&p);
        assert!(row.saturated && row.exec_load == 300.0 * 4400.0);
    }

    #[test]
    fn execution_time_variability_is_pooled_over_the_window() {
        // Worker 0 ran 2 requests of 100 and 300 µs, worker 1 two of 200 µs: mean 200 µs,
        // variance (100² + 100² + 0 + 0) / 4 = 5,000 µs², so 5,000 / 200² = 1/8.
        let p = pipeline("wc.toml");
        let ran = |worker: u32, times: [f64; 2]| {
            let mut r = report(worker, 2, false);
            r.ops[0].exec_us = times.iter().sum();
            r.ops[0].exec_sq_us2 = times.iter().map(|t| t * t).sum();
            r
        };
        let (a, b) = (ran(0, [100.0, 300.0]), ran(1, [200.0, 200.0]));
        let window = Window {
            inputs: &[4.0],
            completed: &[4.0],
            planner_queue: 0.0,
            workers_used: 2,
            batch_size: 1,
        };
        let s = observe(&p, &[&a, &b], &window);
        let scv = s.operators[0].exec_time_scv.expect("measured");
        assert!((scv - 0.125).abs() < 1e-12, "{scv}");
        assert_eq!(s.operators[1].exec_time_scv, None, "no squares reported");
    }

    #[test]
    fn the_log_returns_windows_and_forgets() {
        let mut log = ReportLog::default();
        for t in 1..=5 {
            log.push(f64::from(t), report(0, 1, false));
        }
        assert_eq!(log.window(2.0, 4.0).count(), 3);
        log.forget_before(3.0);
        assert_eq!(log.all().len(), 3);
    }
}
