//! The planner's control: routing installs and migrations, the run loop with its progress
//! intervals and the scaling hook, and the run's summary and observed statistics.

use super::chains::Chains;
use super::dispatch::spawn_dispatcher;
use super::ingress::{IngressControl, IngressThread, Input, Queued, ReplayPoint, spawn_ingress};
use super::membership::Event;
use super::pace::Pace;
use super::stall::StallWatch;
use super::{Planner, PlannerError, stats};
use crate::migration::{self, MigrationDone};
use crate::routing::{Routing, RoutingPlan};
use crate::wire::Message;
use crate::worker::executor::now_ns;
use clasp_core::WorkerId;
use clasp_core::sync::{lock, write};
use crossbeam_channel::RecvTimeoutError;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Whether `plan` places operator shares or key groups on worker `w`.
fn named_in(plan: &RoutingPlan, w: WorkerId) -> bool {
    plan.placement.operators.iter().any(|o| o.shares.iter().any(|s| s.worker == w))
        || plan.keys.owners.iter().any(|owners| owners.contains(&w))
}

/// What a run calls back into, besides its progress.
pub trait RunHooks {
    /// Every interval, after the progress: may change the placement (the scaling loop).
    fn interval(&mut self, planner: &mut Planner, p: &Progress) -> Result<(), PlannerError>;

    /// A failure (a worker lost, a migration failed): `Ok` when it was recovered from and the
    /// run goes on, the error to end the run.
    fn failed(&mut self, _planner: &mut Planner, error: PlannerError) -> Result<(), PlannerError> {
        Err(error)
    }

    /// Every input was read and every chain completed: `true` ends the run, `false` goes on
    /// (a last checkpoint met a failure and the run recovered).
    fn drained(&mut self, _planner: &mut Planner) -> Result<bool, PlannerError> {
        Ok(true)
    }
}

/// The hooks of [`Planner::run`]: a closure per interval.
struct IntervalHook<F>(F);

impl<F: FnMut(&mut Planner, &Progress) -> Result<(), PlannerError>> RunHooks for IntervalHook<F> {
    fn interval(&mut self, planner: &mut Planner, p: &Progress) -> Result<(), PlannerError> {
        (self.0)(planner, p)
    }
}

/// One interval of a run, for live progress.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    /// Seconds since the run started.
    pub t: f64,
    /// Input requests per second entering the planner queue.
    pub input_rate: f64,
    /// The same over the interval's last quarter (0: not measured).
    pub recent_input_rate: f64,
    /// Records per second entering it.
    pub input_records: f64,
    /// Chains completed per second.
    pub throughput: f64,
    /// Median latency of chains completed in the interval (µs).
    pub p50_us: u64,
    /// 75th percentile (µs).
    pub p75_us: u64,
    /// 90th percentile (µs).
    pub p90_us: u64,
    /// 95th percentile (µs).
    pub p95_us: u64,
    /// Planner queue size.
    pub planner_queue: usize,
    /// Queue size of each worker (last report).
    pub worker_queues: Vec<u64>,
    /// Local chained requests per second (all workers).
    pub local_rate: f64,
    /// Remote chained requests per second.
    pub remote_rate: f64,
    /// Workers in the placement.
    pub workers: u32,
    /// Chains in flight.
    pub in_flight: usize,
    /// Input requests since the start.
    pub requests: u64,
    /// Interval length (s).
    pub interval_s: f64,
    /// The gaps between the input requests dispatched in the interval.
    pub arrival_gaps: clasp_core::report::Gaps,
}

/// The planner's counters at the last interval's end, from which the next one's rates come.
#[derive(Clone, Copy, Debug, Default)]
struct Counted {
    requests: u64,
    records: u64,
    completed: u64,
}

impl Planner {
    /// Handles one event from the receiver threads.
    pub(super) fn handle_event(&mut self, e: Event) -> Result<(), PlannerError> {
        match e {
            Event::Joined(w) => tracing::info!("worker {w} joined"),
            Event::Mesh(w, peers) => {
                if let Some(Some(s)) = lock(&self.shared.workers).get_mut(w.index()) {
                    s.peers = peers;
                }
            }
            Event::Report(r) => self.reports.push(self.origin.elapsed().as_secs_f64(), *r),
            Event::Lost(w, reason) if !self.holds_work(w) => {
                // A worker with nothing placed on it (a joiner that misbehaved, or a spare)
                // leaves without taking the run down.
                tracing::warn!("worker {w} dropped ({reason}); it held no work");
                self.retire(w);
            }
            Event::Lost(w, reason) => {
                let addr = lock(&self.shared.workers)
                    .get_mut(w.index())
                    .and_then(Option::as_mut)
                    .map_or_else(String::new, |s| {
                        // Gone: what is saved after the failure is asked of the others only.
                        s.left = true;
                        format!("{}, pid {}", s.addr, s.pid)
                    });
                return Err(PlannerError::WorkerLost { worker: w, addr, reason });
            }
            Event::MigrationDone(d) => {
                tracing::warn!("unexpected migration report from {}", d.worker)
            }
            Event::StateLines(..) | Event::StateDone(_) => {}
            Event::Fault(f) => self.fault_inbox.push(f),
        }
        Ok(())
    }

    /// Whether worker `w` has operator shares or key groups in the routing in force, or is
    /// still leaving by a migration.
    fn holds_work(&self, w: WorkerId) -> bool {
        self.leaving.contains(&w) || named_in(self.shared.routing().plan(), w)
    }

    /// Makes `plan` the routing of the planner and every worker, without moving anything (for
    /// the first placement, when no state exists yet).
    pub fn install(&self, plan: RoutingPlan) -> Result<(), PlannerError> {
        self.check_groups(&plan)?;
        *write(&self.shared.routing) = Arc::new(Routing::new(&self.shared.pipeline, plan.clone()));
        for w in self.workers() {
            self.shared.send(w, Message::Install(Box::new(plan.clone())));
        }
        Ok(())
    }

    fn check_groups(&self, plan: &RoutingPlan) -> Result<(), PlannerError> {
        let cluster = self.shared.config.settings.key_groups;
        if plan.keys.groups == cluster {
            Ok(())
        } else {
            Err(PlannerError::KeyGroups { plan: plan.keys.groups, cluster })
        }
    }

    /// Moves to a new placement by the migration protocol and waits for every worker involved
    /// (see [`crate::migration`]). Workers of the new placement must have joined.
    pub fn migrate(
        &mut self,
        plan: RoutingPlan,
        parts: &clasp_core::placement::MigrationPlan,
    ) -> Result<stats::MigrationRecord, PlannerError> {
        self.check_groups(&plan)?;
        self.hold_firings();
        let result = self.migrate_now(plan, parts);
        lock(&self.shared.clock).resume();
        self.shared.poll_clock();
        result
    }

    /// Holds new firings of timers back and waits for the one running, so that no timer
    /// fires while key groups move.
    fn hold_firings(&self) {
        lock(&self.shared.clock).pause();
        let mut chains = lock(&self.shared.chains);
        loop {
            let firing = {
                let mut clock = lock(&self.shared.clock);
                clock.poll(&mut chains, now_ns());
                clock.is_firing()
            };
            if !firing {
                return;
            }
            chains = clasp_core::sync::wait_timeout(
                &self.shared.chains_done,
                chains,
                Duration::from_millis(20),
            );
        }
    }

    fn migrate_now(
        &mut self,
        plan: RoutingPlan,
        parts: &clasp_core::placement::MigrationPlan,
    ) -> Result<stats::MigrationRecord, PlannerError> {
        let issued = Instant::now();
        let epoch = plan.epoch;
        let involved: Vec<WorkerId> = parts.workers.iter().map(|p| p.worker).collect();
        let old = self.shared.routing();
        for w in self.workers() {
            if named_in(old.plan(), w) && !named_in(&plan, w) && !self.leaving.contains(&w) {
                self.leaving.push(w);
            }
        }
        *write(&self.shared.routing) = Arc::new(Routing::new(&self.shared.pipeline, plan.clone()));
        for part in &parts.workers {
            let order =
                migration::MigrationOrder { epoch, routing: plan.clone(), part: part.clone() };
            self.shared.send(part.worker, Message::Migrate(Box::new(order)));
        }
        for w in self.workers() {
            if !involved.contains(&w) {
                self.shared.send(w, Message::Install(Box::new(plan.clone())));
            }
        }
        if let Some(mut hook) = self.migration_hook.take() {
            hook(&self.worker_pids());
            self.migration_hook = Some(hook);
        }
        let mut done: Vec<MigrationDone> = Vec::new();
        while done.len() < involved.len() {
            match self.events.recv_timeout(Duration::from_secs(90)) {
                Ok(Event::MigrationDone(d)) if d.epoch == epoch => {
                    if let Some(reason) = &d.error {
                        return Err(PlannerError::Migration {
                            epoch,
                            reason: format!("worker {}: {reason}", d.worker),
                        });
                    }
                    done.push(d);
                }
                Ok(other) => self.handle_event(other)?,
                Err(_) => {
                    return Err(PlannerError::Migration {
                        epoch,
                        reason: "no completion from every worker within 90 s".into(),
                    });
                }
            }
        }
        let record = stats::MigrationRecord::new(
            self.origin.elapsed().as_secs_f64(),
            epoch,
            issued.elapsed(),
            parts.moved_groups() as u64,
            done,
        );
        tracing::info!(
            "migration to epoch {epoch} done in {:.1} ms: {} key groups, {} keys ({} bytes) and {} queued requests moved; worst worker pause {:.1} ms",
            record.planner_ms,
            record.groups,
            record.keys,
            record.bytes,
            record.requests,
            record.max_worker_pause_ms
        );
        self.migrations.push(record.clone());
        Ok(record)
    }

    /// Runs the inputs through the cluster until they are exhausted and every chain completed;
    /// the inputs stop once `duration` passed, and with `stop_at_duration` the run too. `progress` is called every interval; `control` may change the
    /// placement between intervals (the scaling controller).
    pub fn run(
        &mut self,
        inputs: Vec<Input>,
        duration: Option<Duration>,
        progress: impl FnMut(&Progress),
        control: impl FnMut(&mut Planner, &Progress) -> Result<(), PlannerError>,
    ) -> Result<stats::RunSummary, PlannerError> {
        self.run_with(inputs, duration, progress, &mut IntervalHook(control))
    }

    /// [`Planner::run`] with every hook: failures may be recovered from, and the end of the
    /// input may be acted on (a last checkpoint).
    pub fn run_with(
        &mut self,
        inputs: Vec<Input>,
        duration: Option<Duration>,
        mut progress: impl FnMut(&Progress),
        hooks: &mut dyn RunHooks,
    ) -> Result<stats::RunSummary, PlannerError> {
        let started = Instant::now();
        self.origin = started;
        self.origin_ns = now_ns();
        *lock(&self.shared.chains) = Chains::new(self.origin_ns);
        let watermarks = std::mem::take(&mut self.resumed_watermarks);
        *lock(&self.shared.clock) = super::clock::Clock::restarted(
            &self.shared.pipeline,
            &self.shared.config.timers,
            &watermarks,
        );
        self.shared.discarding.store(false, Ordering::Release);
        self.shared.dropped.store(0, Ordering::Release);
        let (queue_tx, queue_rx) =
            crossbeam_channel::bounded::<Queued>(self.shared.config.queue_capacity);
        let stop = Arc::new(AtomicBool::new(false));
        let input_errors: Arc<Mutex<Option<PlannerError>>> = Arc::default();
        let controls: Vec<Arc<IngressControl>> =
            inputs.iter().map(|_| Arc::new(IngressControl::default())).collect();
        let mut by_source = vec![None; self.shared.pipeline.sources.len()];
        for (i, control) in inputs.iter().zip(&controls) {
            let watermark = watermarks.get(i.source.index()).copied().flatten();
            let start = ReplayPoint { position: i.reader.position(), watermark };
            if watermark.is_some() {
                // A resumed source goes on from its checkpoint's watermark.
                control.release(Some(start.clone()));
            }
            if let Some(slot) = by_source.get_mut(i.source.index()) {
                *slot = Some(start);
            }
        }
        self.start_positions = by_source.clone();
        self.shared.dispatch.set_positions(by_source);
        *lock(&self.shared.ingress) =
            inputs.iter().map(|i| i.source.index()).zip(controls.iter().cloned()).collect();
        let ingress: Vec<_> = inputs
            .into_iter()
            .zip(&controls)
            .map(|(input, control)| {
                spawn_ingress(IngressThread {
                    shared: self.shared.clone(),
                    input,
                    queue: queue_tx.clone(),
                    stop: stop.clone(),
                    counters: self.inputs.clone(),
                    started,
                    errors: input_errors.clone(),
                    control: control.clone(),
                })
            })
            .collect();
        drop(queue_tx);
        self.queue = Some(queue_rx.clone());
        let queue_probe = queue_rx.clone();
        let dispatcher = spawn_dispatcher(self.shared.clone(), queue_rx);
        let interval = Duration::from_millis(self.shared.config.settings.interval_ms.max(10));
        let mut pace = Pace::new(started, interval);
        let mut counted = Counted::default();
        let mut stall = StallWatch::default();
        let (halt_stop, halt_shared) = (stop.clone(), self.shared.clone());
        let halt = |e: PlannerError| {
            halt_stop.store(true, Ordering::Release);
            halt_shared.chains_done.notify_all();
            Err(e)
        };
        // When the run reached its duration: it drops what is queued and waits for the chains
        // in flight for at most the drain grace.
        let mut stopped_at: Option<Instant> = None;
        loop {
            let now = Instant::now();
            pace.observe(now, || self.counters());
            if pace.ask_reports(now) {
                // They arrive before the interval ends.
                self.ask_reports(&self.workers());
            }
            if pace.due(now) {
                let (requests, completed) = self.counters();
                let (elapsed, recent_input_rate) = pace.end(now, requests, completed);
                let p = self.progress(
                    started,
                    elapsed,
                    queue_probe.len(),
                    recent_input_rate,
                    &mut counted,
                );
                progress(&p);
                if let Err(e) = hooks.interval(self, &p) {
                    hooks.failed(self, e).or_else(&halt)?;
                }
                pace.restart(Instant::now(), p.input_rate);
            }
            let interrupted = self.shared.config.interrupt.load(Ordering::Acquire);
            let ended = duration.is_some_and(|d| started.elapsed() >= d);
            if ended || interrupted {
                stop.store(true, Ordering::Release);
            }
            if stopped_at.is_none() && (interrupted || ended && self.shared.config.stop_at_duration)
            {
                self.shared.discarding.store(true, Ordering::Release);
                self.shared.chains_done.notify_all();
                stopped_at = Some(Instant::now());
            }
            let inputs_done =
                ingress.iter().zip(&controls).all(|(h, c)| c.ended() || h.is_finished());
            let gate = &self.shared.dispatch;
            let taken =
                gate.dispatched.load(Ordering::Acquire) + gate.discarded.load(Ordering::Acquire);
            let all_taken = queue_probe.is_empty()
                && (taken >= self.inputs.requests.load(Ordering::Acquire)
                    || dispatcher.is_finished());
            let (in_flight, completed) = {
                let c = lock(&self.shared.chains);
                (c.in_flight(), c.completed)
            };
            let drained = inputs_done && all_taken;
            if drained {
                let last = lock(&self.shared.chains).next_id().checked_sub(1);
                lock(&self.shared.clock).inputs_ended(last);
            }
            self.shared.poll_clock();
            if drained && in_flight == 0 && lock(&self.shared.clock).finished() {
                match hooks.drained(self) {
                    Ok(true) => break,
                    Ok(false) => continue,
                    Err(e) => hooks.failed(self, e).or_else(&halt)?,
                }
                continue;
            }
            let grace = self.shared.config.drain_grace;
            if drained && stopped_at.is_some_and(|t| t.elapsed() >= grace) {
                break;
            }
            if let Some(secs) = stall.stalled(drained, completed) {
                stop.store(true, Ordering::Release);
                return Err(PlannerError::Stalled { in_flight, secs });
            }
            let wait = pace.wait(Instant::now()).min(Duration::from_millis(20));
            match self.events.recv_timeout(wait) {
                Ok(e) => {
                    if let Err(err) = self.handle_event(e) {
                        hooks.failed(self, err).or_else(&halt)?;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => unreachable!("the planner holds a sender"),
            }
        }
        stop.store(true, Ordering::Release);
        for h in ingress {
            let _ = h.join();
        }
        self.queue = None;
        lock(&self.shared.ingress).clear();
        let _ = dispatcher.join();
        self.final_reports()?;
        // Every chain completed, so every sink record has arrived (workers send a chain's
        // records before its credit).
        if let Err(e) = lock(&self.shared.sink).flush() {
            self.shared.output_failed(e);
        }
        if let Some(e) = lock(&input_errors).take() {
            return Err(e);
        }
        if let Some(error) = lock(&self.shared.sink_error).take() {
            return Err(PlannerError::Output { what: "sink records".into(), error });
        }
        let mut summary = self.summary(started.elapsed());
        summary.dropped_requests = self.shared.dropped.load(Ordering::Relaxed);
        summary.interrupted = self.shared.config.interrupt.load(Ordering::Acquire);
        Ok(summary)
    }

    /// Input requests and completed chains so far.
    fn counters(&self) -> (u64, u64) {
        let requests = self.inputs.requests.load(Ordering::Relaxed);
        (requests, lock(&self.shared.chains).completed)
    }

    /// Asks `workers` for the metrics of their current interval, without waiting; returns the
    /// number their reports answer with.
    fn ask_reports(&mut self, workers: &[WorkerId]) -> u64 {
        self.report_seq += 1;
        for &w in workers {
            self.shared.send(w, Message::ReportNow(self.report_seq));
        }
        self.report_seq
    }

    /// Asks every worker for the metrics of its current interval and waits for them, so the
    /// summary covers the whole run.
    fn final_reports(&mut self) -> Result<(), PlannerError> {
        let workers = self.workers();
        self.collect_reports(workers)
    }

    /// Asks `workers` for the metrics of their current interval and waits for them (before a
    /// worker is retired, so its last interval is counted).
    pub fn collect_reports(&mut self, mut waiting: Vec<WorkerId>) -> Result<(), PlannerError> {
        let seq = self.ask_reports(&waiting);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !waiting.is_empty() {
            match self.events.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(Event::Report(r)) => {
                    if r.requested == seq {
                        waiting.retain(|w| *w != r.worker);
                    }
                    self.reports.push(self.origin.elapsed().as_secs_f64(), *r);
                }
                Ok(other) => {
                    self.handle_event(other)?;
                    // A worker dropped meanwhile reports no more.
                    let members = self.workers();
                    waiting.retain(|w| members.contains(w));
                }
                Err(_) => {
                    return Err(PlannerError::Timeout {
                        what: format!("final reports of {waiting:?}"),
                    });
                }
            }
        }
        Ok(())
    }

    fn progress(
        &mut self,
        started: Instant,
        interval: Duration,
        planner_queue: usize,
        recent_input_rate: f64,
        last: &mut Counted,
    ) -> Progress {
        let secs = interval.as_secs_f64();
        let requests = self.inputs.requests.load(Ordering::Relaxed);
        let records = self.inputs.records.load(Ordering::Relaxed);
        let (completed, hist, in_flight, arrival_gaps) = {
            let mut c = lock(&self.shared.chains);
            (c.completed, c.take_interval(), c.in_flight(), c.take_gaps())
        };
        let latest = self.reports.latest_per_worker();
        let p = Progress {
            t: started.elapsed().as_secs_f64(),
            input_rate: (requests - last.requests) as f64 / secs,
            recent_input_rate,
            input_records: (records - last.records) as f64 / secs,
            throughput: (completed - last.completed) as f64 / secs,
            p50_us: hist.value_at_quantile(0.5),
            p75_us: hist.value_at_quantile(0.75),
            p90_us: hist.value_at_quantile(0.9),
            p95_us: hist.value_at_quantile(0.95),
            planner_queue,
            worker_queues: latest.iter().map(|r| r.queue_now).collect(),
            local_rate: latest.iter().map(|r| r.local as f64 / r.interval_s).sum(),
            remote_rate: latest.iter().map(|r| r.remote as f64 / r.interval_s).sum(),
            workers: self.shared.routing().workers(),
            in_flight,
            requests,
            interval_s: secs,
            arrival_gaps,
        };
        if self.arrivals.len() >= super::ARRIVAL_INTERVALS {
            self.arrivals.pop_front();
        }
        self.arrivals.push_back((self.origin.elapsed().as_secs_f64(), arrival_gaps));
        *last = Counted { requests, records, completed };
        p
    }

    /// The summary of what a run that failed got through so far (its results are partial).
    pub fn partial_summary(&self) -> stats::RunSummary {
        let mut summary = self.summary(self.origin.elapsed());
        summary.dropped_requests = self.shared.dropped.load(Ordering::Relaxed);
        summary.interrupted = self.shared.config.interrupt.load(Ordering::Acquire);
        summary
    }

    /// Writes out the sink records buffered so far (after a failure; a run that completes
    /// flushes them itself).
    pub fn flush_output(&self) -> Result<(), PlannerError> {
        if let Some(error) = lock(&self.shared.sink_error).take() {
            return Err(PlannerError::Output { what: "sink records".into(), error });
        }
        lock(&self.shared.sink)
            .flush()
            .map_err(|error| PlannerError::Output { what: "sink records".into(), error })
    }

    fn summary(&self, elapsed: Duration) -> stats::RunSummary {
        let c = lock(&self.shared.chains);
        let mut summary = stats::RunSummary::new(
            &self.shared.pipeline,
            elapsed.as_secs_f64(),
            self.inputs.requests.load(Ordering::Relaxed),
            self.inputs.records.load(Ordering::Relaxed),
            &c,
            self.shared.sink_records.load(Ordering::Relaxed),
            &self.reports,
            &self.migrations,
        );
        summary.oversized_records = self.inputs.oversized.load(Ordering::Relaxed);
        // Counted with the completions, under the same lock: together they account for
        // every chain opened.
        summary.abandoned_chains = c.in_flight() as u64;
        summary
    }

    /// Observed statistics over the last `window_s` seconds of reports.
    pub fn observed(&self, window_s: f64) -> clasp_core::stats::ObservedStats {
        let now = self.origin.elapsed().as_secs_f64();
        let per_second = lock(&self.inputs.per_second).clone();
        let completed = lock(&self.shared.chains).per_second.clone();
        let mut observed = stats::observe(
            &self.shared.pipeline,
            &self.reports,
            now,
            window_s,
            &per_second,
            &completed,
            self.shared.config.batch_size,
            self.shared.routing().workers(),
        );
        let recent = self.arrivals.iter().filter(|(t, _)| *t > now - window_s);
        observed.arrival_scv = clasp_core::report::Gaps::mean_scv(recent.map(|(_, g)| g));
        observed
    }
}
