//! A worker node: incoming request queue, executor pool, local scheduling engine, state server
//! (one keyed store per operator) and metrics monitor (CLASP Fig. 5).
//!
//! Threads: one per executor slot; per peer (planner included) one sending and one receiving
//! thread; an acceptor for peer connections; the metrics monitor; and the control loop, which
//! handles routing changes, migrations, state dumps and shutdown.
//!
//! - `bootstrap`: joining the planner and starting the threads ([`run`]);
//! - `mesh`: the links to the planner and the peers, and the threads receiving from them;
//! - `control`: the control loop and what the planner asks of the worker;
//! - `migrate`: the worker's side of a migration, and `background` for what it leaves behind;
//! - [`executor`], [`scheduler`], `monitor`: running requests, the queue, the metrics.

mod background;
mod bootstrap;
mod checkpoint;
mod control;
pub mod executor;
mod fanout;
mod gate;
mod mesh;
mod migrate;
mod monitor;
mod peers;
pub mod scheduler;
mod timing;

pub use bootstrap::{WorkerError, WorkerOptions, run};

use crate::metrics::ExecCounters;
use crate::migration;
use crate::net::Link;
use crate::request::Request;
use crate::routing::{Routing, RoutingPlan};
use crate::wire::{Message, WorkerSettings};
use clasp_core::operator::Rejections;
use clasp_core::rng::SeededRng;
use clasp_core::state::StateStore;
use clasp_core::sync::{lock, read, write};
use clasp_core::{DynOperator, OperatorId, Pipeline, WorkerId};
use executor::Target;
use scheduler::Scheduler;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// Most workers a cluster may have (sizes the destination bitsets of the metrics); worker ids
/// received beyond it are refused at decode.
pub const MAX_WORKERS: usize = crate::wire::MAX_WORKERS as usize;

/// How often a worker tells the planner it is alive.
pub const HEARTBEAT: std::time::Duration = std::time::Duration::from_millis(200);

/// State every thread of a worker shares.
pub struct WorkerShared {
    /// This worker.
    pub me: WorkerId,
    /// The pipeline.
    pub pipeline: Arc<Pipeline>,
    /// Settings from the planner.
    pub settings: WorkerSettings,
    /// The cluster secret and TLS of its links.
    pub security: clasp_wire::Security,
    /// Operator implementations, by operator id.
    pub ops: Vec<Box<dyn DynOperator>>,
    /// Keyed state, by operator id (stateless operators have an empty one-group store).
    pub stores: Vec<Box<dyn StateStore>>,
    /// Output ports of every operator.
    pub targets: Vec<Vec<Target>>,
    /// The incoming request queue.
    pub sched: Scheduler,
    /// Current routing epoch (checked by executors before each request).
    pub epoch: AtomicU64,
    routing: RwLock<Arc<Routing>>,
    peers: peers::PeerLinks,
    /// The threads writing to the planner and the peers, joined before the worker exits so
    /// nothing it queued for them is lost.
    senders: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Link to the planner.
    pub planner: Link,
    /// One per executor.
    pub counters: Vec<Arc<ExecCounters>>,
    rejects: Mutex<Vec<Rejections>>,
    held: Mutex<Vec<Request>>,
    stopping: AtomicBool,
    /// A report the planner asked for (its request number), picked up by the monitor.
    report_now: AtomicU64,
    /// Remote workers reached in the current second (the emulated fan-out cost is charged
    /// per destination per second); cleared by the monitor every second.
    pub fanout_reached: Box<[AtomicU64]>,
    /// The stretch of emulated executions that spends the fan-out cost, as f64 bits
    /// ([`fanout`]).
    pub fanout_stretch: AtomicU64,
    /// The last recovery this worker rolled back for: executors discard outputs they
    /// buffered under an earlier one. Written only under `send_gate`.
    pub generation: AtomicU64,
    /// Held (shared) by executors while they send, and exclusively by a rollback while it
    /// raises `generation`, so nothing buffered before a rollback is sent after it.
    pub send_gate: RwLock<()>,
    /// Requests of epochs below this are dropped (they are from before a rollback).
    pub floor: AtomicU64,
    /// The checkpoint boundaries this worker marked: requests of a later cut wait in
    /// `cut_held` before they touch keyed state. Raised only under `cut_held`'s lock.
    pub marked_cut: AtomicU64,
    cut_held: Mutex<checkpoint::CutHold>,
    /// The checkpoint store, once opened (its location and itself).
    store: Mutex<Option<(String, Arc<dyn crate::fault::store::CheckpointStore>)>>,
}

impl std::fmt::Debug for WorkerShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerShared").field("me", &self.me).finish_non_exhaustive()
    }
}

impl WorkerShared {
    /// The routing of the current epoch.
    pub fn routing(&self) -> Arc<Routing> {
        read(&self.routing).clone()
    }

    /// Queues a message for peer `w`.
    pub fn send_to_peer(&self, w: WorkerId, m: Message) {
        let link = self.peers.get(w);
        match link {
            Some(l) => {
                if !l.send(m) {
                    tracing::error!("worker {}: link to {w} is closed; message dropped", self.me);
                }
            }
            None => tracing::error!("worker {}: no link to {w}; message dropped", self.me),
        }
    }

    /// Adds an executor's rejected-record tally.
    pub fn record_rejects(&self, op: OperatorId, r: &Rejections) {
        lock(&self.rejects)[op.index()].merge(r);
    }

    /// Accepts requests that arrived from the planner or a peer: requests routed under a newer
    /// epoch wait until this worker has it; those routed under an older epoch are re-routed
    /// (forwarded when they belong elsewhere now); the rest are queued.
    ///
    /// The routing stays read-locked until the requests are queued or held: an install waits
    /// for it, so a migration that takes the queue out after installing finds every request
    /// checked against the old routing in it, and none lands in the queue afterwards to run
    /// against a key group that was detached meanwhile.
    fn admit(&self, reqs: Vec<Request>, rng: &mut SeededRng) {
        let mut forward: Vec<(WorkerId, Request)> = Vec::new();
        {
            let routing = read(&self.routing);
            let mut local = Vec::with_capacity(reqs.len());
            let mut ahead = Vec::new();
            let floor = self.floor.load(Ordering::Acquire);
            for r in reqs {
                if r.epoch < floor {
                    // From before a rollback.
                    continue;
                }
                if r.time.fire().is_some() {
                    // Timers fire where the planner sent them, on the groups held there (no
                    // firing is sent while a migration runs).
                    local.push(r);
                } else if r.epoch > routing.epoch {
                    ahead.push(r);
                } else if r.epoch == routing.epoch {
                    local.push(r);
                } else {
                    for (w, part) in migration::reroute(r, &routing, self.me, rng) {
                        if w == self.me {
                            local.push(part);
                        } else {
                            forward.push((w, part));
                        }
                    }
                }
            }
            if !ahead.is_empty() {
                // Drained by the install of their epoch, which cannot have happened yet.
                lock(&self.held).extend(ahead);
            }
            if !local.is_empty() {
                self.sched.push_many(local);
            }
        }
        for (w, part) in forward {
            self.send_to_peer(w, Message::Request(part));
        }
    }

    /// Installs a routing and returns the requests held for it.
    fn install(&self, plan: RoutingPlan) -> (Arc<Routing>, Vec<Request>) {
        let routing = Arc::new(Routing::new(&self.pipeline, plan));
        for w in 0..routing.workers() {
            if WorkerId(w) != self.me {
                self.peers.ensure(WorkerId(w));
            }
        }
        *write(&self.routing) = routing.clone();
        self.epoch.store(routing.epoch, Ordering::Release);
        let held = {
            let mut h = lock(&self.held);
            let (ready, later): (Vec<_>, Vec<_>) =
                h.drain(..).partition(|r| r.epoch <= routing.epoch);
            *h = later;
            ready
        };
        (routing, held)
    }

    /// Concurrent executions allowed per operator: the plan's instances on this worker, and
    /// one for ordered stateful operators so each key's records run in arrival order.
    fn limits(&self, routing: &Routing) -> Vec<u32> {
        self.pipeline
            .operators
            .iter()
            .map(|o| {
                let n = routing.instances(o.id, self.me);
                if o.ordered { n.min(1) } else { n }
            })
            .collect()
    }
}
