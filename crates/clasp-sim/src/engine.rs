//! The discrete-event engine: a cluster of simulated workers fed by the planner, run against
//! an input pattern under a fixed placement or a scaling controller.
//!
//! One event at a time, in time order: an input arrives at the planner, a request reaches a
//! worker, an execution finishes (its chained requests leave for their workers and its chain
//! may complete), a statistics interval ends (workers report; the controller may decide), a
//! migration advances. Every random draw comes from a generator derived from the seed, and
//! equal-time events are ordered by kind and insertion, so a seed determines the whole run.

use crate::chains::Chains;
use crate::config::{Arrivals, ServiceDist, SimConfig};
use crate::controller::{Controller, ControllerConfig, Sample};
use crate::error::SimError;
use crate::events::{DelayLine, Delivery, Nanos, Req, Timers, ns_to_s, s_to_ns, us_to_ns};
use crate::migration::Migration;
use crate::model::{EdgeModel, Model};
use crate::planner::Planner;
use crate::report::{OpReport, ReportLog, Window, WorkerReport, observe};
use crate::routing::Routing;
use crate::summary::{IntervalRow, Latency, ScalingEvent, SimSummary};
use crate::worker::{Counters, Job, Phase, Worker};
use clasp_core::pattern::RatePattern;
use clasp_core::placement::Placement;
use clasp_core::rng::{SeededRng, independent_stream};
use clasp_core::{Pipeline, WorkerId};
use clasp_plan::estimator::{Estimator, EstimatorConfig, Observation};
use clasp_plan::keys::{assign_keys, remap_workers};
use clasp_plan::parallelism::initial_allocation;
use rand::{Rng, RngExt, SeedableRng};
use rand_distr::weighted::WeightedIndex;
use rand_distr::{Exp1, LogNormal};

/// How operators are placed during a run.
#[derive(Clone, Debug)]
pub enum Deployment {
    /// One placement for the whole run.
    Static(Placement),
    /// One worker to start with (all operators, slots split by Eq. 12), then a scaling
    /// controller with a policy.
    Elastic(Box<ControllerConfig>),
}

/// A rare event.
#[derive(Debug)]
pub(crate) enum Timer {
    /// The next input reaches the planner.
    Arrival,
    /// A statistics interval ends.
    Tick,
    /// A migration plan reaches the workers.
    PlanArrives,
    /// Migration data reaches a worker (index into the migration's messages).
    Data(usize),
    /// A scheduled rescaling is due (index into the schedule).
    Rescale(usize),
}

/// Most chains an unthrottled input may keep in flight (it dispatches up to the limit).
const UNTHROTTLED_IN_FLIGHT: u32 = 1_000_000;

/// A simulation, ready to run.
#[derive(Debug)]
pub struct Simulation<'p> {
    pub(crate) p: &'p Pipeline,
    pub(crate) model: Model,
    pub(crate) cfg: SimConfig,
    pattern: RatePattern,
    pub(crate) now: Nanos,
    end: Nanos,
    warmup: Nanos,
    interval: Nanos,
    last_tick: Nanos,
    pub(crate) workers: Vec<Worker>,
    pub(crate) local: DelayLine,
    pub(crate) remote: DelayLine,
    pub(crate) timers: Timers<Timer>,
    pub(crate) routing: Routing,
    pub(crate) previous: Option<Routing>,
    planner: Planner,
    chains: Chains,
    pub(crate) rng: SeededRng,
    arrival_rng: SeededRng,
    worker_min: (Nanos, usize),
    worker_min_stale: bool,
    done: Vec<Job>,
    pub(crate) controller: Option<Controller>,
    pub(crate) migration: Option<Migration>,
    pub(crate) log: ReportLog,
    timeline: Vec<IntervalRow>,
    pub(crate) scaling: Vec<ScalingEvent>,
    measured: Counters,
    measured_inputs: u64,
    pub(crate) forwarded: u64,
    events: u64,
    active: u32,
    max_active: u32,
    active_area: f64,
    active_since: Nanos,
    /// Start of the statistics window the controller may use (s): the end of the last
    /// migration.
    pub(crate) window_start: f64,
    /// Placements to move to at given times, whatever the deployment.
    schedule: Vec<(f64, Placement)>,
    /// An estimator fed every saturated report when no controller runs.
    estimator: Option<Estimator>,
}

impl<'p> Simulation<'p> {
    /// A simulation of `p` under `pattern` with the model derived from the spec's hints.
    pub fn from_spec(
        p: &'p Pipeline,
        cfg: SimConfig,
        pattern: RatePattern,
        deployment: Deployment,
    ) -> Result<Self, SimError> {
        let model = Model::from_spec(p, &cfg);
        Self::new(p, model, cfg, pattern, deployment)
    }

    /// A simulation of `p` (compiled into `model`) under `pattern`. Every check happens here:
    /// a simulation that is built runs.
    pub fn new(
        p: &'p Pipeline,
        model: Model,
        cfg: SimConfig,
        pattern: RatePattern,
        deployment: Deployment,
    ) -> Result<Self, SimError> {
        cfg.validate()?;
        if model.ops.len() != p.operators.len() || model.streams != p.streams.len() {
            return Err(SimError::Config("the model is not of this pipeline".into()));
        }
        let unthrottled = pattern.rate_at(0.0).is_infinite();
        if unthrottled && cfg.max_in_flight > UNTHROTTLED_IN_FLIGHT {
            return Err(SimError::Config(format!(
                "an unthrottled input dispatches up to max_in_flight chains; {} is more than {UNTHROTTLED_IN_FLIGHT}",
                cfg.max_in_flight
            )));
        }
        let (placement, controller) = match deployment {
            Deployment::Static(placement) => (placement, None),
            Deployment::Elastic(c) => {
                if c.plan.max_workers > cfg.max_workers {
                    return Err(SimError::Config(format!(
                        "the controller may use {} workers, the cluster has {}",
                        c.plan.max_workers, cfg.max_workers
                    )));
                }
                (
                    initial_placement(p, &model, cfg.slots),
                    Some(Controller::new(*c, p.operators.len())?),
                )
            }
        };
        let keys = assign_keys(p, &placement, cfg.key_groups, None);
        let routing = Routing::new(p, placement, keys, 0, cfg.max_workers)?;
        let counters = Counters::new(p.operators.len(), p.streams.len(), cfg.max_workers as usize);
        let workers = (0..cfg.max_workers)
            .map(|w| Worker::new(w, cfg.slots, cfg.cores(), counters.clone(), cfg.seed))
            .collect();
        let interval = s_to_ns(cfg.interval_s).max(1);
        let warmup = cfg.warmup_s.min(cfg.duration_s);
        let mut sim = Self {
            p,
            model,
            pattern,
            now: 0,
            end: s_to_ns(cfg.duration_s),
            warmup: interval * s_to_ns(warmup).div_ceil(interval),
            interval,
            last_tick: 0,
            workers,
            local: DelayLine::new(us_to_ns(cfg.local_delay_us)),
            remote: DelayLine::new(us_to_ns(cfg.remote_delay_us)),
            timers: Timers::default(),
            routing,
            previous: None,
            planner: Planner::new(cfg.planner_queue, cfg.max_in_flight, unthrottled),
            chains: Chains::default(),
            rng: independent_stream(cfg.seed, 0x6469_7370),
            arrival_rng: independent_stream(cfg.seed, 0x6172_7276),
            worker_min: (Nanos::MAX, 0),
            worker_min_stale: false,
            done: Vec::new(),
            controller,
            migration: None,
            log: ReportLog::default(),
            timeline: Vec::new(),
            scaling: Vec::new(),
            measured: counters,
            measured_inputs: 0,
            forwarded: 0,
            events: 0,
            active: 0,
            max_active: 0,
            active_area: 0.0,
            active_since: 0,
            window_start: 0.0,
            schedule: Vec::new(),
            estimator: None,
            cfg,
        };
        sim.start();
        Ok(sim)
    }

    /// Activates the first placement's workers and schedules the first events.
    fn start(&mut self) {
        for w in 0..self.routing.workers() as usize {
            self.set_active(w, true);
            let limits = self.limits(w as u32);
            self.workers[w].set_limits(limits);
        }
        if self.warmup == 0 {
            self.chains.measuring = true;
        }
        self.timers.at(self.interval.min(self.end), Timer::Tick);
        if self.planner.unthrottled {
            self.try_dispatch();
        } else if let Some(t) = self.next_arrival(0) {
            self.timers.at(t, Timer::Arrival);
        }
    }

    /// Moves to each placement at its time (s) with a migration, as if a controller had
    /// decided it (workers relabelled to move as little as possible); a rescaling due while
    /// another migration runs waits for it. For migration experiments.
    pub fn with_rescales(mut self, schedule: Vec<(f64, Placement)>) -> Self {
        for (i, (t, _)) in schedule.iter().enumerate() {
            self.timers.at(s_to_ns(*t), Timer::Rescale(i));
        }
        self.schedule = schedule;
        self
    }

    /// Feeds every saturated worker report to an estimator with `cfg` (a run with a
    /// controller feeds its own); the summary reports its coefficients. For estimator
    /// experiments on a fixed placement.
    pub fn with_estimator(mut self, cfg: EstimatorConfig) -> Self {
        self.estimator = Some(Estimator::new(cfg));
        self
    }

    /// A scheduled rescaling is due: migrate, or wait for the running migration to end.
    fn scheduled_rescale(&mut self, i: usize) {
        if self.migration.is_some() {
            self.timers.at(self.now + us_to_ns(1_000.0), Timer::Rescale(i));
            return;
        }
        let placement = remap_workers(&self.routing.placement, self.schedule[i].1.clone());
        let rate = self.pattern.rate_at(ns_to_s(self.now));
        self.begin_migration(placement, "scheduled", rate);
    }

    /// Feeds this interval's saturated reports to the stand-alone estimator.
    fn estimate(&mut self, t: f64) {
        let Some(est) = self.estimator.as_mut() else { return };
        for r in self.log.window(t, t).filter(|r| r.saturated) {
            est.observe(r.worker.0, &Observation::from(&r.worker_stats(self.p)));
        }
    }

    /// Per-operator instance limits of worker `w` under the current routing.
    pub(crate) fn limits(&self, w: u32) -> Vec<u32> {
        (0..self.model.ops.len())
            .map(|o| {
                let n = self.routing.instances(o, w);
                if self.model.ops[o].one_at_a_time { n.min(1) } else { n }
            })
            .collect()
    }

    /// Marks worker `w` active or not, keeping the time-weighted worker count.
    pub(crate) fn set_active(&mut self, w: usize, active: bool) {
        if self.workers[w].active == active {
            return;
        }
        self.active_area += f64::from(self.active) * ns_to_s(self.now - self.active_since);
        self.active_since = self.now;
        self.workers[w].active = active;
        if active {
            self.active += 1;
            self.max_active = self.max_active.max(self.active);
        } else {
            self.active -= 1;
        }
    }

    /// Runs to the end and reports.
    pub fn run(mut self) -> SimSummary {
        loop {
            let (t, next) = self.next_event();
            if t > self.end {
                break;
            }
            self.now = t;
            self.events += 1;
            match next {
                Next::Timer => {
                    let (_, timer) = self.timers.pop().expect("a timer is due");
                    self.on_timer(timer);
                }
                Next::Remote => {
                    let d = self.remote.pop().expect("a delivery is due");
                    self.on_delivery(d);
                }
                Next::Local => {
                    let d = self.local.pop().expect("a delivery is due");
                    self.on_delivery(d);
                }
                Next::Worker(w) => self.on_worker(w),
            }
        }
        self.now = self.end;
        self.summary()
    }

    /// The earliest event: timers first, then remote and local deliveries, then workers.
    #[inline]
    fn next_event(&mut self) -> (Nanos, Next) {
        let mut best = (Nanos::MAX, Next::Timer);
        if let Some(t) = self.timers.next_due() {
            best = (t, Next::Timer);
        }
        if let Some(t) = self.remote.next_due()
            && t < best.0
        {
            best = (t, Next::Remote);
        }
        if let Some(t) = self.local.next_due()
            && t < best.0
        {
            best = (t, Next::Local);
        }
        let (t, w) = self.worker_min();
        if t < best.0 {
            best = (t, Next::Worker(w));
        }
        best
    }

    /// The worker whose next execution finishes first.
    #[inline]
    fn worker_min(&mut self) -> (Nanos, usize) {
        if self.worker_min_stale {
            let mut best = (Nanos::MAX, 0);
            for (i, w) in self.workers.iter().enumerate() {
                if w.next < best.0 {
                    best = (w.next, i);
                }
            }
            self.worker_min = best;
            self.worker_min_stale = false;
        }
        self.worker_min
    }

    /// Worker `w`'s next finishing time changed.
    #[inline]
    pub(crate) fn worker_changed(&mut self, w: usize) {
        let t = self.workers[w].next;
        if t < self.worker_min.0 {
            self.worker_min = (t, w);
        } else if self.worker_min.1 == w {
            self.worker_min_stale = true;
        }
    }

    fn on_timer(&mut self, timer: Timer) {
        match timer {
            Timer::Arrival => {
                self.planner.offer(self.now);
                self.try_dispatch();
                if let Some(t) = self.next_arrival(self.now) {
                    self.timers.at(t, Timer::Arrival);
                }
            }
            Timer::Tick => self.on_tick(),
            Timer::PlanArrives => self.plan_arrives(),
            Timer::Data(i) => self.data_arrives(i),
            Timer::Rescale(i) => self.scheduled_rescale(i),
        }
    }

    /// When the input after one arriving at `from` arrives, if the pattern offers another.
    fn next_arrival(&mut self, from: Nanos) -> Option<Nanos> {
        match self.cfg.arrivals {
            Arrivals::Paced => {
                let due = self.pattern.due_time(self.planner.next_paced)?;
                self.planner.next_paced += 1;
                Some(s_to_ns(due).max(from))
            }
            Arrivals::Poisson => self.next_poisson(ns_to_s(from)).map(|t| s_to_ns(t).max(from)),
        }
    }

    /// The next point of a Poisson process whose rate follows the pattern's stages (restarted
    /// at every stage boundary, which memorylessness allows).
    fn next_poisson(&mut self, mut t: f64) -> Option<f64> {
        loop {
            let rate = self.pattern.rate_at(t);
            let stage_end = self.pattern.stage_at(t).map(|s| s.end_s());
            if rate <= 0.0 {
                t = stage_end?;
                continue;
            }
            let next = t + self.arrival_rng.sample::<f64, _>(Exp1) / rate;
            match stage_end {
                Some(end) if next >= end => t = end,
                _ => return Some(next),
            }
        }
    }

    /// Dispatches queued inputs while the in-flight limit allows.
    fn try_dispatch(&mut self) {
        while self.chains.in_flight() < self.planner.max_in_flight && self.planner.take(self.now) {
            self.dispatch_input();
        }
    }

    /// Sends one input to the workers its source's streams lead to.
    fn dispatch_input(&mut self) {
        let now = self.now;
        let sources = &self.model.sources;
        let s = if sources.len() == 1 {
            0
        } else {
            WeightedIndex::new(sources.iter().map(|s| s.weight)).map_or(0, |w| self.rng.sample(w))
        };
        let entries = &self.model.sources[s].entries;
        let chain = self.chains.open(now, entries.len() as u32);
        if entries.is_empty() {
            self.chains.close(chain, now);
            return;
        }
        let groups = u64::from(self.cfg.key_groups);
        for &op in entries {
            let o = usize::from(op);
            let group = if self.routing.keyed(o) {
                let shares = &self.model.ops[o].worker_shares;
                self.routing.draw_group(o, shares, groups as u32, &mut self.rng)
            } else {
                0
            };
            let to = self.routing.destination(o, group, &mut self.rng);
            self.remote.send(now, to, Req { chain, op, group, enqueued: now });
        }
    }

    /// A request reaches worker `d.to`.
    fn on_delivery(&mut self, d: Delivery) {
        let w = d.to as usize;
        let worker = &mut self.workers[w];
        if worker.paused {
            worker.held.push(d.req);
            return;
        }
        if !worker.active || !self.routing.owns(d.to, usize::from(d.req.op), d.req.group) {
            self.forward(d.req);
            return;
        }
        worker.enqueue(self.now, d.req);
        if self.start_jobs(w) {
            self.workers[w].reschedule(self.now);
            self.worker_changed(w);
        }
    }

    /// Sends a request that reached the wrong worker to its owner under the current routing.
    pub(crate) fn forward(&mut self, req: Req) {
        let o = usize::from(req.op);
        let to = self.routing.destination(o, req.group, &mut self.rng);
        self.forwarded += 1;
        self.remote.send(self.now, to, req);
    }

    /// Starts executions on worker `w` while slots and instance limits allow.
    pub(crate) fn start_jobs(&mut self, w: usize) -> bool {
        let mut started = false;
        let now = self.now;
        let (alpha, beta) = (self.cfg.costs.alpha, self.cfg.costs.beta);
        let groups = self.cfg.key_groups;
        while let Some(op) = self.workers[w].pick() {
            let worker = &mut self.workers[w];
            let req = worker.pop(now, op);
            let m = &self.model.ops[op];
            let exec_us = draw_service(m.exec_us, self.cfg.service, &mut worker.rng);
            let seed = worker.rng.next_u64();
            let (mut local, mut remote) = (0u32, 0u32);
            for_each_child(&self.model, &self.routing, op, seed, groups, |_, to, _| {
                if to == w as u32 {
                    local += 1;
                } else {
                    remote += 1;
                }
            });
            let dispatch_us = alpha * f64::from(local) + beta * f64::from(remote);
            let (sleep, work_us) = if m.sleeps {
                (us_to_ns(exec_us), dispatch_us)
            } else {
                (0, exec_us + dispatch_us)
            };
            let job = Job {
                req,
                seed,
                epoch: self.routing.epoch,
                exec_us,
                dispatch_us,
                work_us,
                started: now,
                wait_us: (now - req.enqueued) as f64 / 1e3,
                phase: Phase::Cpu(0.0),
            };
            worker.admit(now, job, sleep);
            started = true;
        }
        started
    }

    /// Executions finish on worker `w`.
    fn on_worker(&mut self, w: usize) {
        let now = self.now;
        let mut done = std::mem::take(&mut self.done);
        self.workers[w].finish_due(now, &mut done);
        for job in &done {
            self.finish_job(w, job);
        }
        done.clear();
        self.done = done;
        if self.workers[w].paused && self.workers[w].running() == 0 {
            self.drained(w);
        }
        self.start_jobs(w);
        self.workers[w].reschedule(now);
        self.worker_changed(w);
    }

    /// Counts a finished execution and sends its chained requests.
    fn finish_job(&mut self, w: usize, job: &Job) {
        let now = self.now;
        let routing = match &self.previous {
            Some(prev) if prev.epoch == job.epoch => prev,
            _ => &self.routing,
        };
        let op = usize::from(job.req.op);
        let worker = &mut self.workers[w];
        let c = &mut worker.counters;
        let (local, remote) = (&mut self.local, &mut self.remote);
        let mut sent = 0u32;
        for_each_child(&self.model, routing, op, job.seed, self.cfg.key_groups, |e, to, group| {
            sent += 1;
            c.edges[usize::from(e.stream)] += 1;
            let req = Req { chain: job.req.chain, op: e.to, group, enqueued: now };
            if to == w as u32 {
                c.local += 1;
                local.send(now, to, req);
            } else {
                c.remote += 1;
                c.reached(to);
                remote.send(now, to, req);
            }
        });
        let oc = &mut c.ops[op];
        oc.processed += 1;
        oc.emitted += u64::from(sent);
        oc.exec_us += job.exec_us;
        oc.wait_us += job.wait_us;
        oc.dispatch_us += job.dispatch_us;
        if self.chains.finish_request(job.req.chain, sent, now) {
            self.try_dispatch();
        }
    }

    /// A statistics interval ends: workers report, the controller looks.
    fn on_tick(&mut self) {
        let now = self.now;
        let secs = ns_to_s(now - self.last_tick).max(1e-9);
        let t = ns_to_s(now);
        let measuring = now > self.warmup;
        let reports = self.collect_reports(secs, measuring);
        let (planner_queue, inputs) = self.planner.take_interval(now, secs);
        if measuring {
            self.measured_inputs += inputs;
        }
        let (done, hist) = self.chains.take_interval();
        let sample = Sample {
            time_s: t,
            interval_s: secs,
            input_rate: inputs as f64 / secs,
            throughput: done as f64 / secs,
            requests: self.planner.dispatched,
            planner_queue,
            workers: self.active,
        };
        self.timeline.push(IntervalRow {
            time_s: t,
            input_rate: sample.input_rate,
            throughput: sample.throughput,
            workers: self.active,
            p50_ms: if hist.is_empty() { 0.0 } else { hist.value_at_quantile(0.5) as f64 / 1e3 },
            p95_ms: if hist.is_empty() { 0.0 } else { hist.value_at_quantile(0.95) as f64 / 1e3 },
            planner_queue,
            saturated: reports.iter().filter(|r| r.saturated).count() as u32,
        });
        for r in reports {
            self.log.push(t, r);
        }
        if now >= self.warmup && !self.chains.measuring {
            self.chains.measuring = true;
            self.chains.restart_area(now);
        }
        self.control(t, sample);
        self.estimate(t);
        self.log.forget_before(t - 2.0 * self.cfg.window_s);
        self.last_tick = now;
        if now < self.end {
            self.timers.at((now + self.interval).min(self.end), Timer::Tick);
        }
    }

    /// Builds every busy or active worker's report, resets its counters and sets its fan-out
    /// overhead for the next interval from the remote destinations it reached in this one.
    fn collect_reports(&mut self, secs: f64, measuring: bool) -> Vec<WorkerReport> {
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
    fn state_keys(&self, w: u32) -> Vec<u64> {
        let groups = u64::from(self.cfg.key_groups);
        (0..self.model.ops.len())
            .map(|o| self.routing.groups_of(o, w) as u64 * self.cfg.state_keys / groups)
            .collect()
    }

    /// Worker `w`'s report of the interval that just ended.
    fn report(&self, w: usize, secs: f64, keys: &[u64]) -> WorkerReport {
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
                wait_us: o.wait_us,
                touched: if m.keyed { o.processed } else { 0 },
                state_keys,
                dispatch_us: o.dispatch_us,
                rejects: Vec::new(),
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
            saturated: false,
            requested: 0,
        };
        report.saturated = report.queue > self.cfg.saturation_queue
            && report.mean_wait_us() / 1e3 > self.cfg.saturation_wait_ms;
        report
    }

    /// The controller's turn at the end of an interval: reports to the estimator, the sample
    /// to the triggers, and a decision when one fires.
    fn control(&mut self, t: f64, sample: Sample) {
        let Some(ctrl) = self.controller.as_mut() else { return };
        let reports: Vec<&WorkerReport> = self.log.window(t, t).collect();
        let parallelism: Vec<u32> =
            self.p.operators.iter().map(|o| self.routing.total_instances(o.id)).collect();
        ctrl.observe_interval(self.p, &reports, sample, &parallelism);
        let Some(trigger) = ctrl.trigger(&sample, self.migration.is_some()) else { return };
        let from = (t - self.cfg.window_s).max(self.window_start);
        let unthrottled = self.planner.unthrottled;
        let current = &self.routing.placement;
        let Some(step) = ctrl.decide(self.p, &self.log, (from, t), current, trigger, unthrottled)
        else {
            return;
        };
        if step.migrate {
            self.begin_migration(step.placement, step.reason.as_str(), step.target_rate);
        } else {
            self.install(step.placement);
        }
    }

    /// Installs a placement that differs only in instance limits: no state or request moves,
    /// each worker takes its new limits at once (as the runtime installs such a plan).
    fn install(&mut self, placement: Placement) {
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
    fn summary(mut self) -> SimSummary {
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
                .controller
                .as_ref()
                .map_or_else(|| "static".to_owned(), |c| c.config().policy.name().to_owned()),
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
                .controller
                .as_ref()
                .map(Controller::coefficients)
                .or_else(|| self.estimator.as_ref().map(Estimator::coefficients)),
            estimator_updates: self.controller.as_ref().map_or_else(
                || self.estimator.as_ref().map_or(0, Estimator::observations_used),
                Controller::observations_used,
            ),
            stats,
            placement: Some(self.routing.placement.clone()),
            events: self.events,
        }
    }

    fn set_active_area(&mut self) {
        self.active_area += f64::from(self.active) * ns_to_s(self.now - self.active_since);
        self.active_since = self.now;
    }

    /// Observed statistics of the last window (the controller's view when there is one).
    fn final_stats(&self, t: f64) -> clasp_core::stats::ObservedStats {
        let from = (t - self.cfg.window_s).max(self.window_start);
        if let Some(c) = &self.controller {
            return c.statistics(self.p, &self.log, (from, t), &self.routing.placement);
        }
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

/// Which queue the next event comes from.
#[derive(Clone, Copy, Debug)]
enum Next {
    Timer,
    Remote,
    Local,
    Worker(usize),
}

/// One worker running everything, its slots split over the operators in proportion to their
/// demand per input (Eq. 12).
fn initial_placement(p: &Pipeline, model: &Model, slots: u32) -> Placement {
    let demand: Vec<f64> =
        model.requests_per_input().iter().zip(&model.ops).map(|(n, o)| n * o.exec_us).collect();
    Placement::single_worker(p, &initial_allocation(&demand, slots))
}

/// Draws one execution time around `mean` (µs).
#[inline]
pub(crate) fn draw_service(mean: f64, dist: ServiceDist, rng: &mut SeededRng) -> f64 {
    match dist {
        ServiceDist::Deterministic => mean,
        ServiceDist::Exponential => rng.sample::<f64, _>(Exp1) * mean,
        // ln X ~ N(μ, σ²) with σ² = ln(1 + cv²) and μ = ln(mean) − σ²/2.
        ServiceDist::LogNormal { cv } => {
            LogNormal::from_mean_cv(mean, cv).map_or(mean, |d| rng.sample(d))
        }
    }
}

/// Every chained request an execution of `op` with `seed` sends: the edge, the destination
/// worker and the key group. The same seed and routing always give the same requests, so an
/// execution is priced at its start and sends at its end without storing them.
#[inline]
pub(crate) fn for_each_child(
    model: &Model,
    routing: &Routing,
    op: usize,
    seed: u64,
    groups: u32,
    mut f: impl FnMut(&EdgeModel, u32, u16),
) {
    let edges = &model.ops[op].edges;
    if edges.is_empty() {
        return;
    }
    let mut rng = SeededRng::seed_from_u64(seed);
    for e in edges {
        let whole = e.mean.trunc();
        let frac = e.mean - whole;
        let mut n = whole as u32;
        if frac > 0.0 && rng.random::<f64>() < frac {
            n += 1;
        }
        let to = usize::from(e.to);
        let keyed = routing.keyed(to);
        for _ in 0..n {
            let group = if keyed {
                routing.draw_group(to, &model.ops[to].worker_shares, groups, &mut rng)
            } else {
                0
            };
            let dest = routing.destination(to, group, &mut rng);
            f(e, dest, group);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_draws_have_their_means() {
        let mut rng = SeededRng::seed_from_u64(9);
        let n = 200_000;
        for dist in [ServiceDist::Exponential, ServiceDist::LogNormal { cv: 0.5 }] {
            let mean: f64 =
                (0..n).map(|_| draw_service(400.0, dist, &mut rng)).sum::<f64>() / n as f64;
            assert!((mean - 400.0).abs() < 4.0, "{dist}: {mean}");
        }
        assert_eq!(draw_service(400.0, ServiceDist::Deterministic, &mut rng), 400.0);
    }
}
