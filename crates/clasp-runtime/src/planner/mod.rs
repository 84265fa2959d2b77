//! The planner node (CLASP Fig. 5): incoming request queue fed by the sources, a scheduling
//! engine that sends each input request to the worker that owns it, end-to-end chain tracking,
//! runtime statistics aggregated from worker reports, and the registry of workers.
//!
//! - `config`, `error`: [`PlannerConfig`] and [`PlannerError`];
//! - `membership`: accepting and registering workers, their slots and receiving threads;
//! - `ingress`: one thread per [`Input`], paced by its rate, into the incoming queue;
//! - `dispatch`: the scheduling engine that opens a chain per input request and routes it;
//! - `clock`: watermarks and the firing of timers;
//! - `control`: installs, migrations, the run loop and its [`Progress`];
//! - `stall`: the watch that ends a run whose chains stopped completing;
//! - `sinks`: where sink records go ([`SinkOutput`]); `state_dump`: the workers' keyed state;
//! - [`chains`], [`stats`]: completion tracking and the run's statistics; `totals`: read-only
//!   views for observers.

pub mod chains;
mod clock;
mod config;
mod control;
mod dispatch;
mod error;
mod fault;
mod ingress;
mod membership;
mod pace;
mod sinks;
mod stall;
mod state_dump;
pub mod stats;
mod totals;

pub use config::{PlannerConfig, timers_of};
pub use control::{Progress, RunHooks};
pub use error::PlannerError;
pub use fault::{CheckpointBoundary, RecoveryWaitError};
pub use ingress::{Input, InputCounters, ReplayPoint};
pub use membership::{Event, FaultEvent};
use sinks::CutOutput;
pub use sinks::{DiscardSink, JsonLinesSink, SinkOutput};
pub use totals::{Totals, WorkerInfo};

use crate::request::Request;
use crate::routing::{Routing, RoutingPlan};
use crate::wire::{self, Message};
use crate::worker::executor::now_ns;
use chains::Chains;
use clasp_core::sync::{lock, read};
use clasp_core::{Pipeline, WorkerId};
use clock::{Clock, Firing};
use crossbeam_channel::{Receiver, Sender};
use dispatch::DispatchGate;
use ingress::IngressControl;
use membership::{WorkerSlot, spawn_acceptor, spawn_heartbeat_watch};
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Instant;

/// What the planner's threads (acceptor, receivers, ingress, dispatcher) share with it.
struct Shared {
    pipeline: Arc<Pipeline>,
    config: PlannerConfig,
    workers: Mutex<Vec<Option<WorkerSlot>>>,
    routing: RwLock<Arc<Routing>>,
    chains: Mutex<Chains>,
    chains_done: Condvar,
    clock: Mutex<Clock>,
    events: Sender<Event>,
    sink: Mutex<CutOutput>,
    sink_records: AtomicU64,
    sink_error: Mutex<Option<std::io::Error>>,
    stopping: AtomicBool,
    dispatch: DispatchGate,
    /// Each input's source index and the control of its thread.
    ingress: Mutex<Vec<(usize, Arc<IngressControl>)>>,
    /// Bytes of records in the incoming queue.
    queued_bytes: AtomicU64,
    /// Set when the run reached its duration: queued requests are dropped, not dispatched.
    discarding: AtomicBool,
    /// Requests dropped so.
    dropped: AtomicU64,
}

impl Shared {
    /// The routing in force.
    fn routing(&self) -> Arc<Routing> {
        read(&self.routing).clone()
    }

    /// Queues `m` for worker `w`, if it has a slot.
    fn send(&self, w: WorkerId, m: Message) {
        if let Some(Some(slot)) = lock(&self.workers).get(w.index()) {
            slot.link.send(m);
        }
    }

    /// Records a failure to write sink records, and reports the first at once (the run's
    /// result names it again at its end).
    fn output_failed(&self, e: std::io::Error) {
        let mut first = lock(&self.sink_error);
        if first.is_none() {
            tracing::error!("writing sink records failed: {e}; the run's output is incomplete");
            *first = Some(e);
        }
    }

    /// Applies returned credit and wakes the dispatcher when chains completed; starts the
    /// firing of timers that became due.
    fn settle(&self, returns: &[wire::CreditReturn]) {
        let mut chains = lock(&self.chains);
        if chains.settle(returns, now_ns()) > 0 {
            let firing = {
                let mut clock = lock(&self.clock);
                if clock.quiet() { None } else { clock.poll(&mut chains, now_ns()) }
            };
            drop(chains);
            self.chains_done.notify_all();
            if let Some(f) = firing {
                self.start_firing(f);
            }
        }
    }

    /// Starts firings that are due (after a dispatch, a tick or a migration).
    fn poll_clock(&self) {
        if lock(&self.clock).quiet() {
            return;
        }
        let firing = {
            let mut chains = lock(&self.chains);
            let mut clock = lock(&self.clock);
            clock.tick(Instant::now(), now_ns());
            clock.poll(&mut chains, now_ns())
        };
        if let Some(f) = firing {
            self.start_firing(f);
        }
    }

    /// Sends a firing to every worker hosting its operator, its chain's credit split among them.
    fn start_firing(&self, f: Firing) {
        let routing = self.routing();
        let hosts: Vec<WorkerId> =
            (0..routing.workers()).map(WorkerId).filter(|w| routing.hosts(f.op, *w)).collect();
        if hosts.is_empty() {
            self.settle(&[wire::CreditReturn {
                chain: f.chain,
                credit: crate::request::FULL_CREDIT,
                done_ns: now_ns(),
            }]);
            return;
        }
        let shares = crate::request::split_credit(crate::request::FULL_CREDIT, hosts.len());
        for (w, credit) in hosts.into_iter().zip(shares) {
            let mut req = Request::new(f.op, 0, f.chain, routing.epoch, clasp_core::Batch::new());
            req.cut = f.cut;
            req.credit = credit;
            req.time = wire::ChainTime::Fire(f.fire);
            self.send(w, Message::Request(req));
        }
    }
}

/// Intervals whose arrival gaps a planner keeps for [`Planner::observed`].
const ARRIVAL_INTERVALS: usize = 4096;

/// A running planner.
pub struct Planner {
    shared: Arc<Shared>,
    events: Receiver<Event>,
    addr: SocketAddr,
    /// Every worker report received, with when it arrived.
    pub reports: stats::ReportLog,
    /// Completed migrations.
    pub migrations: Vec<stats::MigrationRecord>,
    /// Per interval, its end (s since `origin`) and the gaps between the input requests
    /// dispatched in it; the newest [`ARRIVAL_INTERVALS`].
    arrivals: std::collections::VecDeque<(f64, clasp_core::report::Gaps)>,
    origin: Instant,
    origin_ns: u64,
    inputs: Arc<InputCounters>,
    report_seq: u64,
    /// Checkpoint and recovery answers not yet waited for.
    fault_inbox: Vec<FaultEvent>,
    /// The run's queue, while a run is on (a recovery empties it).
    queue: Option<Receiver<ingress::Queued>>,
    /// Each source's position when the run started (where a recovery without a checkpoint
    /// rewinds it to).
    start_positions: Vec<Option<ReplayPoint>>,
    /// The sources' watermarks where a resumed job's next run starts (see
    /// [`Planner::resume_watermarks`]).
    resumed_watermarks: Vec<Option<u64>>,
    /// Called once a migration's orders went out, with the running workers and their
    /// process ids (fault injection).
    migration_hook: Option<MigrationHook>,
    /// Workers a migration took everything off that are not retired yet: until then they
    /// still send their state and forward what was routed to them, so losing one is losing
    /// work although the routing in force no longer names it.
    leaving: Vec<WorkerId>,
}

/// See [`Planner::set_migration_hook`].
pub type MigrationHook = Box<dyn FnMut(&[(WorkerId, u32)]) + Send>;

impl std::fmt::Debug for Planner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Planner").field("addr", &self.addr).finish_non_exhaustive()
    }
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
        let clock = Clock::new(&pipeline, &config.timers);
        let shared = Arc::new(Shared {
            routing: RwLock::new(Arc::new(Routing::new(&pipeline, empty))),
            pipeline,
            config,
            workers: Mutex::new(Vec::new()),
            chains: Mutex::new(Chains::new(origin_ns)),
            chains_done: Condvar::new(),
            clock: Mutex::new(clock),
            events: events_tx,
            sink: Mutex::new(CutOutput::new(sink)),
            sink_records: AtomicU64::new(0),
            sink_error: Mutex::new(None),
            stopping: AtomicBool::new(false),
            dispatch: DispatchGate::default(),
            ingress: Mutex::new(Vec::new()),
            queued_bytes: AtomicU64::new(0),
            discarding: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
        });
        spawn_acceptor(shared.clone(), listener);
        if let Some(timeout) = shared.config.heartbeat_timeout {
            spawn_heartbeat_watch(shared.clone(), timeout);
        }
        Ok(Self {
            shared,
            events,
            addr,
            reports: stats::ReportLog::default(),
            migrations: Vec::new(),
            arrivals: Default::default(),
            origin: Instant::now(),
            origin_ns,
            inputs: Arc::default(),
            report_seq: 0,
            fault_inbox: Vec::new(),
            queue: None,
            start_positions: Vec::new(),
            resumed_watermarks: Vec::new(),
            migration_hook: None,
            leaving: Vec::new(),
        })
    }

    /// The address workers join.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The cluster secret and TLS of its links (workers started by this process use them).
    pub fn security(&self) -> &clasp_wire::Security {
        &self.shared.config.security
    }

    /// The pipeline.
    pub fn pipeline(&self) -> &Pipeline {
        &self.shared.pipeline
    }

    /// The routing in force.
    pub fn routing(&self) -> Arc<Routing> {
        self.shared.routing()
    }

    /// The next run's sources start with these watermarks (by source): those of the checkpoint
    /// a job resumes from, whose positions the inputs were sent to.
    pub fn resume_watermarks(&mut self, watermarks: Vec<Option<u64>>) {
        self.resumed_watermarks = watermarks;
    }

    /// Calls `hook` every time a migration's orders went out (to cause a failure during it).
    pub fn set_migration_hook(&mut self, hook: MigrationHook) {
        self.migration_hook = Some(hook);
    }

    /// The connected workers and their process ids.
    pub fn worker_pids(&self) -> Vec<(WorkerId, u32)> {
        self.workers().into_iter().filter_map(|w| Some((w, self.worker_pid(w)?))).collect()
    }
}
