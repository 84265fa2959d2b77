//! Folding the planner's reports and the scaling loop's history into the [`Snapshot`].

use super::view::*;
use super::{SERIES_LEN, Snapshot};
use crate::planner::{Planner, Progress};
use crate::scaling::ScalingLoop;
use clasp_core::report::WorkerReport;
use clasp_core::{Endpoint, Pipeline};
use std::collections::BTreeMap;

/// One operator's totals on one worker.
#[derive(Clone, Copy, Debug, Default)]
struct OpTotals {
    requests_in: u64,
    records_in: u64,
    requests_out: u64,
    records_out: u64,
    exec_us: f64,
    wait_us: f64,
    busy_ratio: f64,
    backpressure_ratio: f64,
}

/// The observatory's state: the snapshot and what has been folded in so far.
#[derive(Debug)]
pub(super) struct State {
    pub(super) snapshot: Snapshot,
    /// Operator names by id.
    names: Vec<String>,
    /// For each stream, the operator it leaves (if it leaves one).
    stream_from: Vec<Option<usize>>,
    reports_seen: usize,
    /// By (operator, worker).
    totals: BTreeMap<(usize, u32), OpTotals>,
    /// Each worker's last report and when it arrived.
    latest: BTreeMap<u32, (f64, WorkerReport)>,
    /// Each live worker's chained requests (local, remote) since it joined.
    chained: BTreeMap<u32, (u64, u64)>,
    history_seen: usize,
    events_seen: usize,
    recommendations_seen: usize,
}

impl State {
    pub(super) fn new(p: &Pipeline, snapshot: Snapshot) -> Self {
        Self {
            snapshot,
            names: p.operators.iter().map(|o| o.name.clone()).collect(),
            stream_from: p
                .streams
                .iter()
                .map(|s| match s.from {
                    Endpoint::Operator(o) => Some(o.index()),
                    _ => None,
                })
                .collect(),
            reports_seen: 0,
            totals: BTreeMap::new(),
            latest: BTreeMap::new(),
            chained: BTreeMap::new(),
            history_seen: 0,
            events_seen: 0,
            recommendations_seen: 0,
        }
    }

    pub(super) fn observe(
        &mut self,
        planner: &Planner,
        progress: Option<&Progress>,
        scaler: Option<&ScalingLoop>,
    ) {
        let new = planner.reports.since(self.reports_seen);
        self.reports_seen += new.len();
        for (t, r) in new {
            self.fold(*t, r);
        }
        if let Some(s) = scaler {
            self.scaling(s);
        }
        self.placement(planner);
        self.workers(planner);
        self.counters(planner);
        self.histograms(planner);
        let snap = &mut self.snapshot;
        if let Some(p) = progress {
            snap.planner_queue = p.planner_queue as u64;
            if snap.series.len() == SERIES_LEN {
                snap.series.pop_front();
            }
            snap.series.push_back(SeriesPoint {
                t: p.t,
                input_rate: p.input_rate,
                input_records: p.input_records,
                throughput: p.throughput,
                p50_ms: p.p50_us as f64 / 1e3,
                p95_ms: p.p95_us as f64 / 1e3,
                workers: p.workers,
                desired_workers: snap.autoscaler.desired_workers,
                planner_queue: p.planner_queue as u64,
                local_rate: p.local_rate,
                remote_rate: p.remote_rate,
            });
        }
        snap.operators = self
            .totals
            .iter()
            .map(|(&(op, worker), t)| OperatorWorkerView {
                operator: self.names[op].clone(),
                worker,
                requests_in: t.requests_in,
                records_in: t.records_in,
                requests_out: t.requests_out,
                records_out: t.records_out,
                busy_s: t.exec_us / 1e6,
                queue_wait_s: t.wait_us / 1e6,
                busy_ratio: t.busy_ratio,
                backpressure_ratio: t.backpressure_ratio,
            })
            .collect();
    }

    /// Adds one report to the totals.
    fn fold(&mut self, t: f64, r: &WorkerReport) {
        let mut out = vec![0u64; self.names.len()];
        for (from, n) in self.stream_from.iter().zip(&r.edges) {
            if let Some(o) = from.filter(|o| *o < out.len()) {
                out[o] += n;
            }
        }
        let available_us = r.interval_s.max(1e-9) * 1e6 * f64::from(r.slots.max(1));
        for (o, op) in r.ops.iter().enumerate().take(self.names.len()) {
            let hosted = op.processed > 0 || out[o] > 0;
            if !hosted && !self.totals.contains_key(&(o, r.worker.0)) {
                continue;
            }
            let e = self.totals.entry((o, r.worker.0)).or_default();
            e.requests_in += op.processed;
            e.records_in += op.records;
            e.records_out += op.emitted;
            e.requests_out += out[o];
            e.exec_us += op.exec_us;
            e.wait_us += op.wait_us;
            e.busy_ratio = op.exec_us / available_us;
            let spent = op.exec_us + op.wait_us;
            e.backpressure_ratio = if spent > 0.0 { op.wait_us / spent } else { 0.0 };
        }
        let c = &mut self.snapshot.counters;
        c.local_requests += r.local;
        c.remote_requests += r.remote;
        let w = self.chained.entry(r.worker.0).or_default();
        w.0 += r.local;
        w.1 += r.remote;
        let w = self.snapshot.chained.entry(r.worker.0).or_default();
        w.0 += r.local;
        w.1 += r.remote;
        self.latest.insert(r.worker.0, (t, r.clone()));
    }

    fn scaling(&mut self, s: &ScalingLoop) {
        let a = s.autoscaler();
        let snap = &mut self.snapshot;
        let history = a.coefficient_history();
        snap.coefficients
            .history
            .extend_from_slice(&history[self.history_seen.min(history.len())..]);
        self.history_seen = history.len();
        snap.coefficients.current = Some(a.coefficients());
        snap.coefficients.observations = a.observations_used();
        for e in &s.events[self.events_seen.min(s.events.len())..] {
            snap.events.push(EventView {
                kind: "rescale".into(),
                time_s: e.time_s,
                reason: e.reason.clone(),
                target_rate: e.target_rate,
                from_workers: e.from_workers,
                to_workers: e.to_workers,
                planner_ms: Some(e.planner_ms),
                max_worker_pause_ms: Some(e.max_worker_pause_ms),
                keys_moved: e.keys_moved,
                bytes_moved: e.bytes_moved,
            });
            snap.counters.rescalings += 1;
            snap.counters.keys_moved += e.keys_moved;
            snap.counters.bytes_moved += e.bytes_moved;
        }
        self.events_seen = s.events.len();
        for (t, r) in &s.recommendations[self.recommendations_seen.min(s.recommendations.len())..] {
            snap.events.push(EventView {
                kind: "recommendation".into(),
                time_s: *t,
                reason: r.reason.as_str().into(),
                target_rate: r.target_rate,
                from_workers: r.from,
                to_workers: r.to,
                ..EventView::default()
            });
            snap.counters.recommendations += 1;
        }
        self.recommendations_seen = s.recommendations.len();
        snap.events.sort_by(|a, b| a.time_s.total_cmp(&b.time_s));
        let v = &mut snap.autoscaler;
        v.desired_workers = snap.events.last().map_or(a.placement().workers, |e| e.to_workers);
        v.held_back = a.held_back();
        v.rescaling = a.rescaling();
        v.pending_scale_in = a.pending_scale_in().map(|(since, trigger)| PendingView {
            since_s: since,
            reason: trigger.reason.as_str().into(),
            target_rate: trigger.target_rate,
        });
    }

    fn placement(&mut self, planner: &Planner) {
        let routing = planner.routing();
        let plan = routing.plan();
        if plan.epoch == 0 {
            return;
        }
        let operators = plan
            .placement
            .operators
            .iter()
            .map(|o| {
                let owners = plan.keys.owners.get(o.operator.index());
                OperatorPlacementView {
                    operator: self.names.get(o.operator.index()).cloned().unwrap_or_default(),
                    parallelism: o.shares.iter().map(|s| s.instances).sum(),
                    shares: o
                        .shares
                        .iter()
                        .map(|s| ShareView {
                            worker: s.worker.0,
                            fraction: s.fraction,
                            instances: s.instances,
                            key_groups: owners
                                .map_or(0, |g| g.iter().filter(|w| **w == s.worker).count() as u32),
                        })
                        .collect(),
                }
            })
            .collect();
        self.snapshot.placement = Some(PlacementView {
            epoch: plan.epoch,
            workers: plan.placement.workers,
            key_groups: plan.keys.groups,
            operators,
        });
        if self.snapshot.autoscaler.desired_workers == 0 {
            self.snapshot.autoscaler.desired_workers = plan.placement.workers;
        }
    }

    fn workers(&mut self, planner: &Planner) {
        let capacity = self.snapshot.coefficients.current.map_or(0.0, |c| c.capacity);
        self.snapshot.workers = planner
            .worker_info()
            .into_iter()
            .map(|w| {
                let mut v = WorkerView {
                    id: w.id.0,
                    addr: w.addr,
                    pid: w.pid,
                    capacity_us_per_s: capacity,
                    ..WorkerView::default()
                };
                if let Some((t, r)) = self.latest.get(&w.id.0) {
                    let secs = r.interval_s.max(1e-9);
                    v.slots = r.slots;
                    v.load_us_per_s = r.exec_load();
                    v.utilization = if capacity > 0.0 { v.load_us_per_s / capacity } else { 0.0 };
                    v.queue = r.queue;
                    v.queue_now = r.queue_now;
                    v.state_keys = r.ops.iter().map(|o| o.state_keys).sum();
                    v.local_rate = r.local as f64 / secs;
                    v.remote_rate = r.remote as f64 / secs;
                    v.destinations = r.destinations;
                    v.saturated = r.saturated;
                    v.reported_at_s = *t;
                }
                if let Some((local, remote)) = self.chained.get(&w.id.0) {
                    (v.local_requests, v.remote_requests) = (*local, *remote);
                }
                v
            })
            .collect();
        // A worker that left keeps no row: its totals stay in the operator rows.
        let live: Vec<u32> = self.snapshot.workers.iter().map(|w| w.id).collect();
        self.latest.retain(|w, _| live.contains(w));
        // A worker id reused after a scale-in starts its own count.
        self.chained.retain(|w, _| live.contains(w));
    }

    fn counters(&mut self, planner: &Planner) {
        let t = planner.totals();
        let c = &mut self.snapshot.counters;
        c.elapsed_s = planner.elapsed_s();
        c.input_requests = t.input_requests;
        c.input_records = t.input_records;
        c.completed = t.completed;
        c.in_flight = t.in_flight;
        c.sink_records = t.sink_records;
    }

    fn histograms(&mut self, planner: &Planner) {
        let h = planner.latency_histogram();
        let snap = &mut self.snapshot;
        snap.latency = Buckets {
            bounds_s: LATENCY_BOUNDS_S.to_vec(),
            cumulative: LATENCY_BOUNDS_S
                .iter()
                .map(|b| if h.is_empty() { 0 } else { h.count_between(0, (b * 1e6) as u64) })
                .collect(),
            count: h.len(),
            sum_s: if h.is_empty() { 0.0 } else { h.mean() * h.len() as f64 / 1e6 },
        };
        let m = &planner.migrations;
        snap.migration_durations =
            Buckets::of(&MIGRATION_BOUNDS_S, m.iter().map(|r| r.planner_ms / 1e3));
        snap.migration_pauses = Buckets::of(
            &MIGRATION_BOUNDS_S,
            m.iter().flat_map(|r| r.workers.iter().map(|w| w.pause_us as f64 / 1e6)),
        );
    }
}
