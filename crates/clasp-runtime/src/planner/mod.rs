//! The planner node (CLASP Fig. 5): incoming request queue fed by the sources, a scheduling
//! engine that sends each input request to the worker that owns it, end-to-end chain tracking,
//! runtime statistics aggregated from worker reports, and the registry of workers.

pub mod chains;
pub mod stats;

use crate::metrics::WorkerReport;
use crate::migration::{self, MigrationDone};
use crate::net::{self, Link};
use crate::request::{FULL_CREDIT, Request, split_credit};
use crate::routing::{Routing, RoutingPlan};
use crate::source::{Pacer, RateFn};
use crate::wire::{self, Hello, Message, Role, Welcome, WorkerSettings};
use crate::worker::executor::now_ns;
use chains::Chains;
use clasp_core::input::{InputRecord, LineSource, Next};
use clasp_core::rng::independent_stream;
use clasp_core::{Batch, Endpoint, OperatorId, Pipeline, SourceId, WorkerId};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// Planner settings.
#[derive(Clone, Debug)]
pub struct PlannerConfig {
    /// Address workers join (default loopback, any port).
    pub listen: String,
    /// Settings handed to every worker.
    pub settings: WorkerSettings,
    /// Records per input request.
    pub batch_size: u32,
    /// Most input chains in flight (the dispatcher waits beyond it).
    pub max_in_flight: usize,
    /// Capacity of the planner's incoming request queue.
    pub queue_capacity: usize,
    /// Window over which observed statistics are averaged (s).
    pub stats_window_s: f64,
}

impl Default for PlannerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:0".into(),
            settings: WorkerSettings {
                batch_size: 256,
                key_groups: 1024,
                interval_ms: 1000,
                flush_deadline_us: 100,
                max_frame: wire::DEFAULT_MAX_FRAME,
                seed: 1,
                dispatch_cost: None,
                saturation_queue: 500.0,
                saturation_wait_ms: 100.0,
            },
            batch_size: 256,
            max_in_flight: 10_000,
            queue_capacity: 100_000,
            stats_window_s: 10.0,
        }
    }
}

/// Why the planner failed.
#[derive(Debug, thiserror::Error)]
pub enum PlannerError {
    /// Could not listen.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// A worker disconnected.
    #[error("worker {worker} ({addr}) disconnected: {reason}")]
    WorkerLost {
        /// The worker.
        worker: WorkerId,
        /// Its address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// Workers did not show up in time.
    #[error("timed out waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
    },
    /// The inputs ended but chains stopped completing: their credit never came back.
    #[error(
        "{in_flight} chain(s) still in flight {secs} s after the last one completed, with every input read: their completions were lost (a bug; the run's results are incomplete)"
    )]
    Stalled {
        /// Chains not complete.
        in_flight: usize,
        /// Seconds without a completion.
        secs: u64,
    },
    /// An input could not be read.
    #[error("reading input `{source_name}`: {error}")]
    Input {
        /// The source.
        source_name: String,
        /// The error.
        error: String,
    },
    /// Writing an output failed.
    #[error("writing {what}: {error}")]
    Output {
        /// What.
        what: String,
        /// The error.
        error: std::io::Error,
    },
    /// A plan's key groups differ from the cluster's.
    #[error("the plan has {plan} key groups, the cluster {cluster}")]
    KeyGroups {
        /// The plan's.
        plan: u32,
        /// The cluster's.
        cluster: u32,
    },
    /// A migration failed.
    #[error("migration to epoch {epoch} failed: {reason}")]
    Migration {
        /// The epoch.
        epoch: u64,
        /// Why.
        reason: String,
    },
}

/// What receiver threads tell the planner's control loop.
#[derive(Debug)]
pub enum Event {
    /// A worker joined.
    Joined(WorkerId),
    /// A worker's peer connections.
    Mesh(WorkerId, Vec<WorkerId>),
    /// A worker's metrics.
    Report(Box<WorkerReport>),
    /// A worker finished a migration.
    MigrationDone(MigrationDone),
    /// Part of a state dump from a worker.
    StateLines(WorkerId, OperatorId, Vec<u8>),
    /// A worker's state dump is complete.
    StateDone(WorkerId),
    /// A worker disconnected.
    Lost(WorkerId, String),
}

#[derive(Debug)]
struct WorkerSlot {
    link: Link,
    addr: String,
    pid: u32,
    peers: Vec<WorkerId>,
    left: bool,
    /// Distinguishes a worker from an earlier one with the same id (scale in, then out).
    generation: u64,
}

/// Where sink records go.
pub trait SinkOutput: Send {
    /// Records `batch` reaching sink `sink` (named `name`).
    fn write(&mut self, name: &str, batch: &Batch) -> std::io::Result<()>;

    /// Writes out anything buffered; called when a run ends.
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Writes sink records as JSON lines `{"sink":…,"key":…,"value":…}`.
#[derive(Debug)]
pub struct JsonLinesSink<W: Write + Send>(pub W);

impl<W: Write + Send> SinkOutput for JsonLinesSink<W> {
    fn write(&mut self, name: &str, batch: &Batch) -> std::io::Result<()> {
        let sink = serde_json::to_string(name).map_err(std::io::Error::other)?;
        for r in batch.iter() {
            let key = serde_json::to_string(&clasp_core::state::key_to_text(r.key))
                .map_err(std::io::Error::other)?;
            let value = serde_json::to_string(&clasp_core::state::key_to_text(r.value))
                .map_err(std::io::Error::other)?;
            writeln!(self.0, "{{\"sink\":{sink},\"key\":{key},\"value\":{value}}}")?;
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Counts sink records and discards them.
#[derive(Debug, Default)]
pub struct DiscardSink;

impl SinkOutput for DiscardSink {
    fn write(&mut self, _: &str, _: &Batch) -> std::io::Result<()> {
        Ok(())
    }
}

struct Shared {
    pipeline: Arc<Pipeline>,
    config: PlannerConfig,
    workers: Mutex<Vec<Option<WorkerSlot>>>,
    routing: RwLock<Arc<Routing>>,
    chains: Mutex<Chains>,
    chains_done: Condvar,
    events: Sender<Event>,
    sink: Mutex<Box<dyn SinkOutput>>,
    sink_records: AtomicU64,
    sink_error: Mutex<Option<std::io::Error>>,
    stopping: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    fn routing(&self) -> Arc<Routing> {
        self.routing.read().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn send(&self, w: WorkerId, m: Message) {
        if let Some(Some(slot)) = lock(&self.workers).get(w.index()) {
            slot.link.send(m);
        }
    }

    fn settle(&self, returns: &[wire::CreditReturn]) {
        if lock(&self.chains).settle(returns) > 0 {
            self.chains_done.notify_all();
        }
    }
}

/// A running planner.
pub struct Planner {
    shared: Arc<Shared>,
    events: Receiver<Event>,
    addr: SocketAddr,
    /// Every worker report received, with when it arrived.
    pub reports: stats::ReportLog,
    /// Completed migrations.
    pub migrations: Vec<stats::MigrationRecord>,
    origin: Instant,
    origin_ns: u64,
    inputs: Arc<InputCounters>,
    report_seq: u64,
}

impl std::fmt::Debug for Planner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Planner").field("addr", &self.addr).finish_non_exhaustive()
    }
}

/// Counts of what entered the planner.
#[derive(Debug, Default)]
pub struct InputCounters {
    /// Input requests queued.
    pub requests: AtomicU64,
    /// Records in them.
    pub records: AtomicU64,
    /// Requests queued per second since the start.
    pub per_second: Mutex<Vec<u64>>,
}

/// One input of a run.
pub struct Input {
    /// The source it feeds.
    pub source: SourceId,
    /// Its records.
    pub reader: Box<dyn LineSource>,
    /// How fast (requests/s over time).
    pub rate: RateFn,
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Input").field("source", &self.source).finish_non_exhaustive()
    }
}

/// A request waiting in the planner's incoming queue.
struct Queued {
    source: SourceId,
    batch: Batch,
    /// When the oldest record's chain started, if before the planner read it.
    origin_ns: Option<u64>,
}

/// One interval of a run, for live progress.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    /// Seconds since the run started.
    pub t: f64,
    /// Input requests per second entering the planner queue.
    pub input_rate: f64,
    /// Records per second entering it.
    pub input_records: f64,
    /// Chains completed per second.
    pub throughput: f64,
    /// Median latency of chains completed in the interval (µs).
    pub p50_us: u64,
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
}

impl Planner {
    /// Starts listening for workers.
    pub fn start(
        pipeline: Pipeline,
        config: PlannerConfig,
        sink: Box<dyn SinkOutput>,
    ) -> Result<Self, PlannerError> {
        let listener = TcpListener::bind(&config.listen)
            .map_err(|source| PlannerError::Listen { addr: config.listen.clone(), source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| PlannerError::Listen { addr: config.listen.clone(), source })?;
        let pipeline = Arc::new(pipeline);
        let groups = config.settings.key_groups.max(1);
        let empty = RoutingPlan {
            epoch: 0,
            placement: clasp_core::placement::Placement::single_worker(&pipeline, &[]),
            keys: clasp_core::placement::KeyAssignment {
                groups,
                owners: vec![Vec::new(); pipeline.operators.len()],
            },
        };
        let (events_tx, events) = crossbeam_channel::unbounded();
        let origin_ns = now_ns();
        let shared = Arc::new(Shared {
            routing: RwLock::new(Arc::new(Routing::new(&pipeline, empty))),
            pipeline,
            config,
            workers: Mutex::new(Vec::new()),
            chains: Mutex::new(Chains::new(origin_ns)),
            chains_done: Condvar::new(),
            events: events_tx,
            sink: Mutex::new(sink),
            sink_records: AtomicU64::new(0),
            sink_error: Mutex::new(None),
            stopping: AtomicBool::new(false),
        });
        spawn_acceptor(shared.clone(), listener);
        Ok(Self {
            shared,
            events,
            addr,
            reports: stats::ReportLog::default(),
            migrations: Vec::new(),
            origin: Instant::now(),
            origin_ns,
            inputs: Arc::default(),
            report_seq: 0,
        })
    }

    /// The address workers join.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The pipeline.
    pub fn pipeline(&self) -> &Pipeline {
        &self.shared.pipeline
    }

    /// The routing in force.
    pub fn routing(&self) -> Arc<Routing> {
        self.shared.routing()
    }

    /// Ids of the connected workers.
    pub fn workers(&self) -> Vec<WorkerId> {
        lock(&self.shared.workers)
            .iter()
            .enumerate()
            .filter(|(_, s)| s.as_ref().is_some_and(|s| !s.left))
            .map(|(i, _)| WorkerId::from(i))
            .collect()
    }

    /// Waits until workers `0..n` have joined and are all connected to each other.
    pub fn wait_for_workers(&mut self, n: usize, timeout: Duration) -> Result<(), PlannerError> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.mesh_complete(n) {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(PlannerError::Timeout {
                    what: format!("{n} workers to join and connect (have {:?})", self.workers()),
                });
            }
            match self.events.recv_timeout(left.min(Duration::from_millis(100))) {
                Ok(e) => self.handle_event(e)?,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => unreachable!("the planner holds a sender"),
            }
        }
    }

    fn mesh_complete(&self, n: usize) -> bool {
        let ws = lock(&self.shared.workers);
        (0..n).all(|i| {
            ws.get(i).and_then(Option::as_ref).is_some_and(|s| {
                !s.left && (0..n).filter(|&j| j != i).all(|j| s.peers.contains(&WorkerId::from(j)))
            })
        })
    }

    /// Handles one event from the receiver threads.
    fn handle_event(&mut self, e: Event) -> Result<(), PlannerError> {
        match e {
            Event::Joined(w) => tracing::info!("worker {w} joined"),
            Event::Mesh(w, peers) => {
                if let Some(Some(s)) = lock(&self.shared.workers).get_mut(w.index()) {
                    s.peers = peers;
                }
            }
            Event::Report(r) => self.reports.push(self.origin.elapsed().as_secs_f64(), *r),
            Event::Lost(w, reason) => {
                let addr = lock(&self.shared.workers)
                    .get(w.index())
                    .and_then(Option::as_ref)
                    .map_or_else(String::new, |s| format!("{}, pid {}", s.addr, s.pid));
                return Err(PlannerError::WorkerLost { worker: w, addr, reason });
            }
            Event::MigrationDone(d) => {
                tracing::warn!("unexpected migration report from {}", d.worker)
            }
            Event::StateLines(..) | Event::StateDone(_) => {}
        }
        Ok(())
    }

    /// Makes `plan` the routing of the planner and every worker, without moving anything (for
    /// the first placement, when no state exists yet).
    pub fn install(&self, plan: RoutingPlan) -> Result<(), PlannerError> {
        self.check_groups(&plan)?;
        *self.shared.routing.write().unwrap_or_else(PoisonError::into_inner) =
            Arc::new(Routing::new(&self.shared.pipeline, plan.clone()));
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
        let issued = Instant::now();
        let epoch = plan.epoch;
        let involved: Vec<WorkerId> = parts.workers.iter().map(|p| p.worker).collect();
        *self.shared.routing.write().unwrap_or_else(PoisonError::into_inner) =
            Arc::new(Routing::new(&self.shared.pipeline, plan.clone()));
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
        self.migrations.push(record.clone());
        Ok(record)
    }

    /// Runs the inputs through the cluster until they are exhausted and every chain completed,
    /// or `duration` passed. `progress` is called every interval; `control` may change the
    /// placement between intervals (the scaling controller).
    pub fn run(
        &mut self,
        inputs: Vec<Input>,
        duration: Option<Duration>,
        mut progress: impl FnMut(&Progress),
        mut control: impl FnMut(&mut Planner, &Progress) -> Result<(), PlannerError>,
    ) -> Result<stats::RunSummary, PlannerError> {
        let started = Instant::now();
        self.origin = started;
        self.origin_ns = now_ns();
        *lock(&self.shared.chains) = Chains::new(self.origin_ns);
        let (queue_tx, queue_rx) =
            crossbeam_channel::bounded::<Queued>(self.shared.config.queue_capacity);
        let stop = Arc::new(AtomicBool::new(false));
        let input_errors: Arc<Mutex<Option<PlannerError>>> = Arc::default();
        let ingress: Vec<_> = inputs
            .into_iter()
            .map(|input| {
                spawn_ingress(
                    self.shared.clone(),
                    input,
                    queue_tx.clone(),
                    stop.clone(),
                    self.inputs.clone(),
                    started,
                    input_errors.clone(),
                )
            })
            .collect();
        drop(queue_tx);
        let queue_probe = queue_rx.clone();
        let dispatcher = spawn_dispatcher(self.shared.clone(), queue_rx);
        let interval = Duration::from_millis(self.shared.config.settings.interval_ms.max(10));
        let mut next_tick = started + interval;
        let mut last_tick = started;
        let mut last_requests = 0;
        let mut last_records = 0;
        let mut last_completed = 0;
        let mut stall = StallWatch::default();
        loop {
            let now = Instant::now();
            if now >= next_tick {
                let elapsed = now.duration_since(last_tick);
                last_tick = now;
                let p = self.progress(
                    started,
                    elapsed,
                    queue_probe.len(),
                    &mut last_requests,
                    &mut last_records,
                    &mut last_completed,
                );
                progress(&p);
                control(self, &p)?;
                // Ticks missed during a long step (a migration) are skipped, not caught up.
                next_tick = Instant::now() + interval;
            }
            if duration.is_some_and(|d| started.elapsed() >= d) {
                stop.store(true, Ordering::Release);
            }
            let inputs_done = ingress.iter().all(|h| h.is_finished());
            let (in_flight, completed) = {
                let c = lock(&self.shared.chains);
                (c.in_flight(), c.completed)
            };
            let drained = inputs_done && dispatcher.is_finished();
            if drained && in_flight == 0 {
                break;
            }
            if let Some(secs) = stall.stalled(drained, completed) {
                stop.store(true, Ordering::Release);
                return Err(PlannerError::Stalled { in_flight, secs });
            }
            let wait =
                next_tick.saturating_duration_since(Instant::now()).min(Duration::from_millis(20));
            match self.events.recv_timeout(wait) {
                Ok(e) => {
                    if let Err(err) = self.handle_event(e) {
                        stop.store(true, Ordering::Release);
                        self.shared.chains_done.notify_all();
                        return Err(err);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => unreachable!("the planner holds a sender"),
            }
        }
        for h in ingress {
            let _ = h.join();
        }
        let _ = dispatcher.join();
        self.final_reports()?;
        // Every chain completed, so every sink record has arrived (workers send a chain's
        // records before its credit).
        if let Err(e) = lock(&self.shared.sink).flush() {
            lock(&self.shared.sink_error).get_or_insert(e);
        }
        if let Some(e) = lock(&input_errors).take() {
            return Err(e);
        }
        if let Some(error) = lock(&self.shared.sink_error).take() {
            return Err(PlannerError::Output { what: "sink records".into(), error });
        }
        Ok(self.summary(started.elapsed()))
    }

    /// Asks every worker for the metrics of its current interval and waits for them, so the
    /// summary covers the whole run.
    fn final_reports(&mut self) -> Result<(), PlannerError> {
        self.report_seq += 1;
        let seq = self.report_seq;
        let mut waiting = self.workers();
        for &w in &waiting {
            self.shared.send(w, Message::ReportNow(seq));
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while !waiting.is_empty() {
            match self.events.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(Event::Report(r)) => {
                    if r.requested == seq {
                        waiting.retain(|w| *w != r.worker);
                    }
                    self.reports.push(self.origin.elapsed().as_secs_f64(), *r);
                }
                Ok(other) => self.handle_event(other)?,
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
        last_requests: &mut u64,
        last_records: &mut u64,
        last_completed: &mut u64,
    ) -> Progress {
        let secs = interval.as_secs_f64();
        let requests = self.inputs.requests.load(Ordering::Relaxed);
        let records = self.inputs.records.load(Ordering::Relaxed);
        let (completed, hist, in_flight) = {
            let mut c = lock(&self.shared.chains);
            (c.completed, c.take_interval(), c.in_flight())
        };
        let latest = self.reports.latest_per_worker();
        let p = Progress {
            t: started.elapsed().as_secs_f64(),
            input_rate: (requests - *last_requests) as f64 / secs,
            input_records: (records - *last_records) as f64 / secs,
            throughput: (completed - *last_completed) as f64 / secs,
            p50_us: hist.value_at_quantile(0.5),
            p95_us: hist.value_at_quantile(0.95),
            planner_queue,
            worker_queues: latest.iter().map(|r| r.queue_now).collect(),
            local_rate: latest.iter().map(|r| r.local as f64 / r.interval_s).sum(),
            remote_rate: latest.iter().map(|r| r.remote as f64 / r.interval_s).sum(),
            workers: self.shared.routing().workers(),
            in_flight,
            requests,
            interval_s: secs,
        };
        *last_requests = requests;
        *last_records = records;
        *last_completed = completed;
        p
    }

    fn summary(&self, elapsed: Duration) -> stats::RunSummary {
        let c = lock(&self.shared.chains);
        stats::RunSummary::new(
            &self.shared.pipeline,
            elapsed.as_secs_f64(),
            self.inputs.requests.load(Ordering::Relaxed),
            self.inputs.records.load(Ordering::Relaxed),
            &c,
            self.shared.sink_records.load(Ordering::Relaxed),
            &self.reports,
            &self.migrations,
        )
    }

    /// Observed statistics over the last `window_s` seconds of reports.
    pub fn observed(&self, window_s: f64) -> clasp_core::stats::ObservedStats {
        let now = self.origin.elapsed().as_secs_f64();
        let per_second = lock(&self.inputs.per_second).clone();
        let completed = lock(&self.shared.chains).per_second.clone();
        stats::observe(
            &self.shared.pipeline,
            &self.reports,
            now,
            window_s,
            &per_second,
            &completed,
            self.shared.config.batch_size,
            self.shared.routing().workers(),
        )
    }

    /// Collects every worker's keyed state: `(worker, operator, JSON line)` per key.
    pub fn collect_state(&mut self) -> Result<Vec<(WorkerId, OperatorId, Vec<u8>)>, PlannerError> {
        let workers = self.workers();
        for &w in &workers {
            self.shared.send(w, Message::DumpState);
        }
        let mut lines = Vec::new();
        let mut done = 0;
        while done < workers.len() {
            match self.events.recv_timeout(Duration::from_secs(60)) {
                Ok(Event::StateLines(w, op, text)) => lines.extend(
                    text.split(|b| *b == b'\n')
                        .filter(|l| !l.is_empty())
                        .map(|l| (w, op, l.to_vec())),
                ),
                Ok(Event::StateDone(_)) => done += 1,
                Ok(other) => self.handle_event(other)?,
                Err(_) => return Err(PlannerError::Timeout { what: "state dumps".into() }),
            }
        }
        Ok(lines)
    }

    /// Writes every worker's keyed state as JSON lines, by operator (pipeline order), each
    /// operator's lines sorted.
    pub fn dump_state(&mut self, out: &mut dyn Write) -> Result<usize, PlannerError> {
        let mut lines = self.collect_state()?;
        lines.sort_unstable_by(|a, b| (a.1, &a.2).cmp(&(b.1, &b.2)));
        for (_, _, l) in &lines {
            out.write_all(l)
                .and_then(|()| out.write_all(b"\n"))
                .map_err(|error| PlannerError::Output { what: "state dump".into(), error })?;
        }
        Ok(lines.len())
    }

    /// The operating-system process id worker `w` announced.
    pub fn worker_pid(&self, w: WorkerId) -> Option<u32> {
        lock(&self.shared.workers).get(w.index()).and_then(Option::as_ref).map(|s| s.pid)
    }

    /// The address worker `w` accepts peer connections on.
    pub fn worker_addr(&self, w: WorkerId) -> Option<String> {
        lock(&self.shared.workers).get(w.index()).and_then(Option::as_ref).map(|s| s.addr.clone())
    }

    /// Tells every worker to stop.
    pub fn shutdown(&mut self) {
        self.shared.stopping.store(true, Ordering::Release);
        for w in self.workers() {
            self.shared.send(w, Message::Shutdown);
        }
        let _ = self.shared.sink.lock().map(|mut s| {
            let _ = s.write("", &Batch::new());
        });
    }

    /// Stops worker `w` (it must hold no state and no placement).
    pub fn retire(&mut self, w: WorkerId) {
        // Marked first: the worker may close its connection as soon as it reads Shutdown.
        if let Some(Some(s)) = lock(&self.shared.workers).get_mut(w.index()) {
            s.left = true;
        }
        self.shared.send(w, Message::Shutdown);
        for other in self.workers() {
            self.shared.send(other, Message::PeerLeft(w));
        }
    }
}

fn spawn_acceptor(shared: Arc<Shared>, listener: TcpListener) {
    std::thread::Builder::new()
        .name("planner-accept".into())
        .spawn(move || {
            for stream in listener.incoming() {
                if shared.stopping.load(Ordering::Acquire) {
                    return;
                }
                let Ok(mut stream) = stream else { continue };
                let shared = shared.clone();
                std::thread::spawn(move || {
                    match net::accept(&mut stream, shared.config.settings.max_frame) {
                        Ok((hello, reader)) if hello.role == Role::Worker => {
                            register(&shared, hello, stream, reader)
                        }
                        Ok((hello, _)) => tracing::error!(
                            "planner: refused a connection from a non-worker ({hello:?})"
                        ),
                        Err(e) => tracing::error!("planner: rejected connection: {e}"),
                    }
                });
            }
        })
        .expect("spawn planner acceptor");
}

/// Admits a joining worker: assigns its id, welcomes it, introduces it to the others.
fn register(shared: &Arc<Shared>, hello: Hello, stream: TcpStream, reader: wire::FrameReader) {
    let (link, rx) = Link::pending();
    let (id, peers, generation) = {
        let mut ws = lock(&shared.workers);
        let free = |i: usize| ws.get(i).is_none_or(|s| s.as_ref().is_none_or(|s| s.left));
        let id = match hello.worker {
            Some(w) if free(w.index()) => w.index(),
            Some(w) => {
                drop(ws);
                reject(stream, &format!("worker id {w} is already in use"));
                return;
            }
            None => (0..).find(|&i| free(i)).expect("a free id exists"),
        };
        let peers: Vec<(WorkerId, String)> = ws
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                s.as_ref().filter(|s| !s.left).map(|s| (WorkerId::from(i), s.addr.clone()))
            })
            .collect();
        if ws.len() <= id {
            ws.resize_with(id + 1, || None);
        }
        let generation = GENERATION.fetch_add(1, Ordering::Relaxed);
        ws[id] = Some(WorkerSlot {
            link: link.clone(),
            addr: hello.listen.clone(),
            pid: hello.pid,
            peers: Vec::new(),
            left: false,
            generation,
        });
        let id = WorkerId::from(id);
        // Queued before the lock is released: once the slot is visible, other threads send to
        // it (a worker joining at the same time announces itself with `PeerJoined`, `install`
        // sends the routing), and the worker must read its Welcome first.
        let welcome = Welcome {
            worker: id,
            pipeline: (*shared.pipeline).clone(),
            settings: shared.config.settings.clone(),
            peers: peers.clone(),
            routing: Some(shared.routing().plan().clone()),
        };
        link.send(Message::Welcome(Box::new(welcome)));
        (id, peers, generation)
    };
    let Ok(send_stream) = stream.try_clone() else { return };
    net::spawn_sender(
        format!("planner-to-{id}"),
        send_stream,
        rx,
        link.counters.clone(),
        Duration::ZERO,
    );
    for (w, _) in &peers {
        shared.send(*w, Message::PeerJoined { worker: id, addr: hello.listen.clone() });
    }
    spawn_worker_receiver(shared.clone(), id, generation, stream, reader);
    let _ = shared.events.send(Event::Joined(id));
    if peers.is_empty() {
        let _ = shared.events.send(Event::Mesh(id, Vec::new()));
    }
}

fn reject(mut stream: TcpStream, reason: &str) {
    tracing::error!("planner: refused a worker: {reason}");
    let mut buf = Vec::new();
    wire::encode(&Message::Reject(reason.into()), &mut buf);
    let _ = stream.write_all(&buf);
}

/// Numbers worker connections, so a closing connection is not taken for a newer worker that
/// reused its id.
static GENERATION: AtomicU64 = AtomicU64::new(0);

fn spawn_worker_receiver(
    shared: Arc<Shared>,
    id: WorkerId,
    generation: u64,
    stream: TcpStream,
    reader: wire::FrameReader,
) {
    let closing = shared.clone();
    net::spawn_receiver(
        format!("planner-from-{id}"),
        stream,
        reader,
        move |batch| {
            for m in batch.drain(..) {
                match m {
                    Message::Credits(c) => shared.settle(&c),
                    Message::Sink { sink, batch } => {
                        shared.sink_records.fetch_add(batch.len() as u64, Ordering::Relaxed);
                        let name = &shared.pipeline.sinks[sink.index()].name;
                        if let Err(e) = lock(&shared.sink).write(name, &batch) {
                            lock(&shared.sink_error).get_or_insert(e);
                        }
                    }
                    Message::Report(r) => {
                        let _ = shared.events.send(Event::Report(r));
                    }
                    Message::MigrationDone(d) => {
                        let _ = shared.events.send(Event::MigrationDone(d));
                    }
                    Message::MeshReady(p) => {
                        let _ = shared.events.send(Event::Mesh(id, p));
                    }
                    Message::StateLines { operator, lines } => {
                        let _ = shared.events.send(Event::StateLines(id, operator, lines));
                    }
                    Message::StateDone => {
                        let _ = shared.events.send(Event::StateDone(id));
                    }
                    Message::Shutdown => return false,
                    other => tracing::warn!(
                        "planner: unexpected {} from worker {id}",
                        net::message_name(&other)
                    ),
                }
            }
            true
        },
        move |why| {
            let left = lock(&closing.workers)
                .get(id.index())
                .and_then(Option::as_ref)
                .is_none_or(|s| s.left || s.generation != generation);
            if closing.stopping.load(Ordering::Acquire) || left {
                return;
            }
            let reason = why.map_or_else(|| "connection closed".to_owned(), |e| e.to_string());
            let _ = closing.events.send(Event::Lost(id, reason));
            closing.chains_done.notify_all();
        },
    );
}

fn spawn_ingress(
    shared: Arc<Shared>,
    mut input: Input,
    queue: Sender<Queued>,
    stop: Arc<AtomicBool>,
    counters: Arc<InputCounters>,
    started: Instant,
    errors: Arc<Mutex<Option<PlannerError>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name(format!("planner-ingress-{}", input.source))
        .spawn(move || {
            let source = &shared.pipeline.sources[input.source.index()];
            let batch_size = shared.config.batch_size.max(1) as usize;
            let mut pacer = Pacer::new(std::mem::replace(&mut input.rate, Box::new(|_| None)));
            let mut rec = InputRecord::default();
            loop {
                let mut batch = Batch::with_capacity(batch_size, batch_size * 64);
                let mut origin_ns: Option<u64> = None;
                while batch.len() < batch_size {
                    match input.reader.next_record(&mut rec) {
                        Ok(Next::Record) => {
                            let key =
                                if rec.keyed { &rec.key[..] } else { source.key_of(&rec.value) };
                            batch.push(key, &rec.value);
                            if let Some(o) = rec.origin_ns {
                                origin_ns = Some(origin_ns.map_or(o, |m| m.min(o)));
                            }
                        }
                        Ok(Next::Idle) if batch.is_empty() => {
                            if stop.load(Ordering::Acquire) {
                                return;
                            }
                        }
                        Ok(Next::Idle | Next::End) => break,
                        Err(e) => {
                            lock(&errors).get_or_insert(PlannerError::Input {
                                source_name: source.name.clone(),
                                error: e.to_string(),
                            });
                            return;
                        }
                    }
                }
                if batch.is_empty() {
                    return;
                }
                loop {
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    let wait = pacer.wait(started.elapsed().as_secs_f64());
                    if wait <= 0.0 {
                        break;
                    }
                    std::thread::sleep(Duration::from_secs_f64(wait.min(0.05)));
                }
                pacer.take();
                let n = batch.len() as u64;
                let mut item = Queued { source: input.source, batch, origin_ns };
                // A full queue holds the source back (unthrottled input retries).
                loop {
                    match queue.send_timeout(item, Duration::from_millis(50)) {
                        Ok(()) => break,
                        Err(crossbeam_channel::SendTimeoutError::Timeout(back)) => {
                            if stop.load(Ordering::Acquire) {
                                return;
                            }
                            item = back;
                        }
                        Err(crossbeam_channel::SendTimeoutError::Disconnected(_)) => return,
                    }
                }
                counters.requests.fetch_add(1, Ordering::Relaxed);
                counters.records.fetch_add(n, Ordering::Relaxed);
                let second = started.elapsed().as_secs() as usize;
                let mut ps = lock(&counters.per_second);
                if ps.len() <= second {
                    ps.resize(second + 1, 0);
                }
                ps[second] += 1;
            }
        })
        .expect("spawn ingress")
}

/// Entry points of each source: (operator, input port) per stream, or a sink.
fn entries(p: &Pipeline) -> Vec<Vec<Endpoint>> {
    p.sources
        .iter()
        .map(|s| p.source_outputs(s.id).iter().map(|&st| p.stream(st).to).collect())
        .collect()
}

/// How long chains may go without completing once every input was read.
const STALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Notices a run whose inputs are all dispatched but whose chains stopped completing, so that
/// a lost completion ends the run with an error instead of waiting forever.
#[derive(Debug, Default)]
struct StallWatch {
    completed: u64,
    since: Option<Instant>,
}

impl StallWatch {
    /// Seconds without a completion since the inputs were drained, once over the timeout.
    fn stalled(&mut self, drained: bool, completed: u64) -> Option<u64> {
        if !drained || completed != self.completed {
            self.completed = completed;
            self.since = None;
            return None;
        }
        let since = *self.since.get_or_insert_with(Instant::now);
        (since.elapsed() >= STALL_TIMEOUT).then(|| since.elapsed().as_secs())
    }
}

fn spawn_dispatcher(shared: Arc<Shared>, queue: Receiver<Queued>) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name("planner-dispatch".into())
        .spawn(move || {
            let p = shared.pipeline.clone();
            let entries = entries(&p);
            let not_a_worker = WorkerId(u32::MAX);
            let mut rng = independent_stream(shared.config.settings.seed, 0xd15);
            let mut parts: Vec<(WorkerId, Request)> = Vec::new();
            while let Ok(item) = queue.recv() {
                let chain = {
                    let mut c = lock(&shared.chains);
                    while c.in_flight() >= shared.config.max_in_flight {
                        if shared.stopping.load(Ordering::Acquire) {
                            return;
                        }
                        c = shared
                            .chains_done
                            .wait_timeout(c, Duration::from_millis(50))
                            .unwrap_or_else(PoisonError::into_inner)
                            .0;
                    }
                    c.open(item.origin_ns.unwrap_or_else(now_ns))
                };
                let routing = shared.routing();
                let outs = &entries[item.source.index()];
                let mut records = Some(item.batch);
                let shares: Vec<u64> = split_credit(FULL_CREDIT, outs.len()).collect();
                let mut leftover = 0;
                for (i, (end, share)) in outs.iter().zip(shares).enumerate() {
                    match *end {
                        Endpoint::Operator(op) => {
                            let stream = p.source_outputs(item.source)[i];
                            let port =
                                p.inputs(op).iter().position(|s| *s == stream).unwrap_or(0) as u16;
                            let batch = take_or_clone(&mut records, i + 1 == outs.len());
                            let mut req = Request::new(op, port, chain, routing.epoch, batch);
                            req.credit = share;
                            parts.extend(migration::reroute(req, &routing, not_a_worker, &mut rng));
                        }
                        Endpoint::Sink(s) => {
                            let batch = take_or_clone(&mut records, i + 1 == outs.len());
                            shared.sink_records.fetch_add(batch.len() as u64, Ordering::Relaxed);
                            if let Err(e) =
                                lock(&shared.sink).write(&p.sinks[s.index()].name, &batch)
                            {
                                lock(&shared.sink_error).get_or_insert(e);
                            }
                            leftover += share;
                        }
                        Endpoint::Source(_) => leftover += share,
                    }
                }
                for (w, req) in parts.drain(..) {
                    shared.send(w, Message::Request(req));
                }
                if leftover > 0 {
                    shared.settle(&[wire::CreditReturn {
                        chain,
                        credit: leftover,
                        done_ns: now_ns(),
                    }]);
                }
            }
        })
        .expect("spawn dispatcher")
}

/// The batch itself for its last use, a copy before that.
fn take_or_clone(slot: &mut Option<Batch>, last: bool) -> Batch {
    if last { slot.take().unwrap_or_default() } else { slot.clone().unwrap_or_default() }
}
