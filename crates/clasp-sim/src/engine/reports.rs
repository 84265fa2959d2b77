//! The end of a statistics interval: worker reports, the scaling controller's turn, and the
//! run's summary.

use super::{Simulation, Timer};
use crate::events::ns_to_s;
use crate::report::{OpReport, Window, WorkerReport, observe};
use crate::routing::Routing;
use crate::summary::{IntervalRow, Latency, SimSummary};
use clasp_core::WorkerId;
use clasp_core::placement::Placement;
use clasp_core::report::Gaps;
use clasp_plan::autoscaler::{Autoscaler, Interval, Step};
use clasp_plan::estimator::Estimator;

impl Simulation<'_> {
    /// A statistics interval ends: workers report, the autoscaler steps.
    pub(super) fn on_tick(&mut self) {
        let now = self.now;
        let secs = ns_to_s(now - self.last_tick).max(1e-9);
        let t = ns_to_s(now);
        let measuring = now > self.warmup;
        let reports = self.collect_reports(secs, measuring);
        let next = (now + self.interval).min(self.end);
        let entered = self.planner.take_interval(now, secs, next);
        let (planner_queue, inputs) = (entered.mean_queue, entered.inputs);
        if measuring {
            self.measured_inputs += inputs;
        }
        let (done, hist) = self.chains.take_interval();
        let tick = Tick {
            time_s: t,
            interval_s: secs,
            inputs,
            recent_inputs: entered.recent_inputs,
            recent_s: entered.recent_s,
            completed: done,
            requests: self.planner.dispatched,
            planner_queue,
            backlog: (self.planner.len() + u64::from(self.chains.in_flight())) as f64,
            workers: self.active,
            arrival_gaps: entered.gaps,
        };
        self.timeline.push(IntervalRow {
            time_s: t,
            input_rate: inputs as f64 / secs,
            throughput: done as f64 / secs,
            workers: self.active,
            p50_ms: if hist.is_empty() { 0.0 } else { hist.value_at_quantile(0.5) as f64 / 1e3 },
            p95_ms: if hist.is_empty() { 0.0 } else { hist.value_at_quantile(0.95) as f64 / 1e3 },
            planner_queue,
            saturated: reports.iter().filter(|r| r.saturated).count() as u32,
        });
        if self.autoscaler.is_some() {
            self.control(interval(&tick, reports.clone()));
        }
        for r in reports {
            self.log.push(t, r);
        }
        if now >= self.warmup && !self.chains.measuring {
            self.chains.measuring = true;
            self.chains.restart_area(now);
        }
        self.estimate(t);
        self.log.forget_before(t - 2.0 * self.cfg.window_s);
        self.last_tick = now;
        if now < self.end {
            self.timers.at(next, Timer::Tick);
        }
    }

    /// Builds every busy or active worker's report, resets its counters and sets its fan-out
    /// overhead for the next interval from the remote destinations it reached in this one.
    pub(super) fn collect_reports(&mut self, secs: f64, measuring: bool) -> Vec<WorkerReport> {
        let mut reports = Vec::new();
        for w in 0..self.workers.len() {
            self.workers[w].flush(self.now);
            let worker = &self.workers[w];
            let busy = worker.counters.ops.iter().any(|o| o.processed > 0);
            if !(worker.active || busy) {
                continue;
            }
            let limits_state = self.state_keys(w as u32);
            let report = self.report(w, secs, &limits_state);
            if measuring {
                self.measured.absorb(&self.workers[w].counters);
            }
            let overhead = self.cfg.costs.gamma * f64::from(report.destinations) / 1e6;
            let worker = &mut self.workers[w];
            worker.counters.clear();
            worker.set_overhead(self.now, overhead);
            self.worker_changed(w);
            reports.push(report);
        }
        reports
    }

    /// Keys held by worker `w` per operator: its key groups' share of `state_keys`.
    pub(super) fn state_keys(&self, w: u32) -> Vec<u64> {
        let groups = u64::from(self.cfg.key_groups);
        (0..self.model.ops.len())
            .map(|o| self.routing.groups_of(o, w) as u64 * self.cfg.state_keys / groups)
            .collect()
    }

    /// Worker `w`'s report of the interval that just ended.
    pub(super) fn report(&self, w: usize, secs: f64, keys: &[u64]) -> WorkerReport {
        let worker = &self.workers[w];
        let c = &worker.counters;
        let ops: Vec<OpReport> = c
            .ops
            .iter()
            .zip(&self.model.ops)
            .zip(keys)
            .map(|((o, m), &state_keys)| OpReport {
                processed: o.processed,
                records: o.processed,
                emitted: o.emitted,
                exec_us: o.exec_us,
                exec_sq_us2: o.exec_sq_us2,
                wait_us: o.wait_us,
                touched: if m.keyed { o.processed } else { 0 },
                state_keys,
                dispatch_us: o.dispatch_us,
                rejects: Vec::new(),
                // The simulator models key skew by its per-worker shares, not per group.
                groups: Vec::new(),
            })
            .collect();
        let mut report = WorkerReport {
            worker: WorkerId(w as u32),
            epoch: u64::from(self.routing.epoch),
            interval_s: secs,
            slots: self.cfg.slots,
            queue: c.queue_area / secs,
            queue_now: u64::from(worker.queued()),
            local: c.local,
            remote: c.remote,
            destinations: c.destination_count(),
            ops,
            edges: c.edges.clone(),
            // A simulated request stands for one record, as in `records` above.
            edge_records: c.edges.clone(),
            saturated: false,
            requested: 0,
        };
        report.saturated = report.queue > self.cfg.saturation_queue
            && report.mean_wait_us() / 1e3 > self.cfg.saturation_wait_ms;
        report
    }

    /// The autoscaler's turn at the end of an interval: its step, executed.
    fn control(&mut self, interval: Interval) {
        let Some(a) = self.autoscaler.as_mut() else { return };
        match a.step(self.p, interval) {
            Step::Rescale(r) => {
                let reason = r.reason.as_str();
                self.begin_migration(r.placement, r.keys, r.migration, reason, r.target_rate);
            }
            Step::Install { placement, .. } => self.install(placement),
            Step::Idle | Step::Unchanged { .. } | Step::HeldBack { .. } | Step::Recommend(_) => {}
        }
    }

    /// Installs a placement that differs only in instance limits: no state or request moves,
    /// each worker takes its new limits at once (as the runtime installs such a plan).
    pub(super) fn install(&mut self, placement: Placement) {
        let keys = self.routing.keys.clone();
        let epoch = self.routing.epoch + 1;
        let Ok(next) = Routing::new(self.p, placement, keys, epoch, self.cfg.max_workers) else {
            return;
        };
        self.previous = Some(std::mem::replace(&mut self.routing, next));
        for w in 0..self.routing.workers() as usize {
            let limits = self.limits(w as u32);
            self.workers[w].set_limits(limits);
            if !self.workers[w].paused && self.start_jobs(w) {
                self.workers[w].reschedule(self.now);
                self.worker_changed(w);
            }
        }
    }

    /// The summary of the run.
    pub(super) fn summary(mut self) -> SimSummary {
        let measured_s = ns_to_s(self.end.saturating_sub(self.warmup)).max(1e-9);
        self.set_active_area();
        let in_flight_area = self.chains.area(self.end);
        let m = &self.measured;
        let processed: u64 = m.ops.iter().map(|o| o.processed).sum();
        let wait: f64 = m.ops.iter().map(|o| o.wait_us).sum();
        let t = ns_to_s(self.end);
        let stats = self.final_stats(t);
        SimSummary {
            pipeline: self.p.name.clone(),
            policy: self
                .autoscaler
                .as_ref()
                .map_or_else(|| "static".to_owned(), |a| a.config().policy.name().to_owned()),
            pattern: self.pattern.name().to_owned(),
            seed: self.cfg.seed,
            simulated_s: t,
            measured_s,
            inputs: self.measured_inputs,
            completed: self.chains.measured,
            input_rate: self.measured_inputs as f64 / measured_s,
            throughput: self.chains.measured as f64 / measured_s,
            latency: Latency::of(&self.chains.total),
            mean_queue_wait_us: if processed > 0 { wait / processed as f64 } else { 0.0 },
            mean_in_flight: in_flight_area / measured_s,
            mean_at_workers: (m.queue_area + m.busy_area) / measured_s,
            mean_workers: self.active_area / t.max(1e-9),
            max_workers: self.max_active,
            local_rate: m.local as f64 / measured_s,
            remote_rate: m.remote as f64 / measured_s,
            forwarded: self.forwarded,
            scaling_events: std::mem::take(&mut self.scaling),
            timeline: std::mem::take(&mut self.timeline),
            coefficients: self
                .autoscaler
                .as_ref()
                .map(Autoscaler::coefficients)
                .or_else(|| self.estimator.as_ref().map(Estimator::coefficients)),
            estimator_updates: self.autoscaler.as_ref().map_or_else(
                || self.estimator.as_ref().map_or(0, Estimator::observations_used),
                Autoscaler::observations_used,
            ),
            stats,
            placement: Some(self.routing.placement.clone()),
            events: self.events,
        }
    }

    pub(super) fn set_active_area(&mut self) {
        self.active_area += f64::from(self.active) * ns_to_s(self.now - self.active_since);
        self.active_since = self.now;
    }

    /// Observed statistics of the last window (the autoscaler's view when there is one).
    pub(super) fn final_stats(&self, t: f64) -> clasp_core::stats::ObservedStats {
        if let Some(a) = &self.autoscaler {
            return a.window_stats(self.p);
        }
        let from = (t - self.cfg.window_s).max(self.window_start);
        let rows: Vec<&IntervalRow> =
            self.timeline.iter().filter(|r| r.time_s > from && r.time_s <= t).collect();
        let inputs: Vec<f64> = rows.iter().map(|r| r.input_rate).collect();
        let completed: Vec<f64> = rows.iter().map(|r| r.throughput).collect();
        let reports: Vec<&WorkerReport> = self.log.window(from + 1e-9, t).collect();
        let window = Window {
            inputs: &inputs,
            completed: &completed,
            planner_queue: rows.iter().map(|r| r.planner_queue).sum::<f64>()
                / rows.len().max(1) as f64,
            workers_used: self.routing.workers(),
            batch_size: 1,
        };
        let mut stats = observe(self.p, &reports, &window);
        for (o, s) in stats.operators.iter_mut().enumerate() {
            s.parallelism = self.routing.total_instances(clasp_core::OperatorId::from(o));
        }
        stats
    }

    /// The worker count in force.
    pub fn active_workers(&self) -> u32 {
        self.active
    }
}

/// What the simulator measures over one statistics interval, before it becomes rates.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tick {
    /// End of the interval (s).
    pub time_s: f64,
    /// Length of the interval (s).
    pub interval_s: f64,
    /// Input requests that entered the planner.
    pub inputs: u64,
    /// Those that entered in the interval's last quarter.
    pub recent_inputs: u64,
    /// Length of that quarter (s; 0: not measured).
    pub recent_s: f64,
    /// Chains completed.
    pub completed: u64,
    /// Input requests dispatched so far.
    pub requests: u64,
    /// Mean planner queue.
    pub planner_queue: f64,
    /// Inputs queued at the planner or in flight at the end of the interval.
    pub backlog: f64,
    /// Workers active.
    pub workers: u32,
    /// The gaps between the inputs dispatched in the interval.
    pub arrival_gaps: Gaps,
}

/// One interval of the simulator as the autoscaler takes it (the simulator's counterpart of
/// `clasp_runtime::scaling::interval`).
pub fn interval(tick: &Tick, reports: Vec<WorkerReport>) -> Interval {
    let secs = tick.interval_s.max(1e-9);
    Interval {
        t: tick.time_s,
        interval_s: tick.interval_s,
        input_rate: tick.inputs as f64 / secs,
        recent_input_rate: if tick.recent_s > 0.0 {
            tick.recent_inputs as f64 / tick.recent_s
        } else {
            0.0
        },
        throughput: tick.completed as f64 / secs,
        requests: tick.requests,
        planner_queue: tick.planner_queue,
        backlog: tick.backlog,
        workers: tick.workers,
        arrival_gaps: tick.arrival_gaps,
        reports,
    }
}
