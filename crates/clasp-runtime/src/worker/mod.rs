//! A worker node: incoming request queue, executor pool, local scheduling engine, state server
//! (one keyed store per operator) and metrics monitor (CLASP Fig. 5).
//!
//! Threads: one per executor slot; per peer (planner included) one sending and one receiving
//! thread; an acceptor for peer connections; the metrics monitor; and the control loop, which
//! handles routing changes, migrations, state dumps and shutdown.

pub mod executor;
mod monitor;
pub mod scheduler;

use crate::metrics::ExecCounters;
use crate::migration::{self, MigrationData, MigrationDone, MigrationOrder, StateGroup};
use crate::net::{self, Link};
use crate::request::Request;
use crate::routing::{Routing, RoutingPlan};
use crate::wire::{Hello, Message, Role, Welcome, WireError, WorkerSettings};
use clasp_core::operator::Rejections;
use clasp_core::rng::{SeededRng, independent_stream};
use clasp_core::state::{DetachedGroup, StateStore};
use clasp_core::{DynOperator, KeyGroup, OperatorId, Pipeline, Registry, WorkerId};
use crossbeam_channel::{Receiver, Sender};
use executor::Target;
use scheduler::Scheduler;
use std::collections::HashMap;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

/// Most workers a cluster may have (sizes the destination bitsets of the metrics).
pub const MAX_WORKERS: usize = 4096;

/// How a worker starts.
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// Executor slots (default 10).
    pub slots: u32,
    /// Address to accept peer connections on.
    pub listen: String,
    /// Id to ask the planner for (it must be free).
    pub id: Option<WorkerId>,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self { slots: 10, listen: "127.0.0.1:0".into(), id: None }
    }
}

/// Why a worker stopped.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// Connection trouble.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// Could not listen.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The pipeline's functions could not be built.
    #[error("{0}")]
    Registry(#[from] clasp_core::operator::RegistryError),
    /// The planner went away before telling the worker to stop.
    #[error("lost the planner: {0}")]
    PlannerLost(String),
}

/// State every thread of a worker shares.
pub struct WorkerShared {
    /// This worker.
    pub me: WorkerId,
    /// The pipeline.
    pub pipeline: Arc<Pipeline>,
    /// Settings from the planner.
    pub settings: WorkerSettings,
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
    peers: RwLock<Vec<Option<Link>>>,
    pending_peers: Mutex<HashMap<WorkerId, Receiver<Message>>>,
    /// Link to the planner.
    pub planner: Link,
    /// One per executor.
    pub counters: Vec<Arc<ExecCounters>>,
    rejects: Mutex<Vec<Rejections>>,
    held: Mutex<Vec<Request>>,
    stopping: AtomicBool,
    /// A report the planner asked for (its request number), picked up by the monitor.
    report_now: AtomicU64,
    /// Remote workers reached in the current second (emulated fan-out cost is charged once
    /// per destination per second); cleared by the monitor every second.
    pub fanout_reached: Box<[AtomicU64]>,
}

impl std::fmt::Debug for WorkerShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerShared").field("me", &self.me).finish_non_exhaustive()
    }
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(PoisonError::into_inner)
}

fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(PoisonError::into_inner)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl WorkerShared {
    /// The routing of the current epoch.
    pub fn routing(&self) -> Arc<Routing> {
        read(&self.routing).clone()
    }

    /// Queues a message for peer `w`.
    pub fn send_to_peer(&self, w: WorkerId, m: Message) {
        let link = read(&self.peers).get(w.index()).and_then(Clone::clone);
        match link {
            Some(l) => {
                if !l.send(m) {
                    tracing::error!("worker {}: link to {w} is closed; message dropped", self.me);
                }
            }
            None => tracing::error!("worker {}: no link to {w}; message dropped", self.me),
        }
    }

    /// The link to `w`, created (pending its connection) if new.
    fn ensure_link(&self, w: WorkerId) -> Link {
        let mut peers = write(&self.peers);
        if peers.len() <= w.index() {
            peers.resize(w.index() + 1, None);
        }
        if let Some(l) = &peers[w.index()] {
            return l.clone();
        }
        let (link, rx) = Link::pending();
        peers[w.index()] = Some(link.clone());
        lock(&self.pending_peers).insert(w, rx);
        link
    }

    fn drop_link(&self, w: WorkerId) {
        if let Some(slot) = write(&self.peers).get_mut(w.index()) {
            *slot = None;
        }
        lock(&self.pending_peers).remove(&w);
    }

    /// Adds an executor's rejected-record tally.
    pub fn record_rejects(&self, op: OperatorId, r: &Rejections) {
        lock(&self.rejects)[op.index()].merge(r);
    }

    /// Accepts requests that arrived from the planner or a peer: requests routed under a newer
    /// epoch wait until this worker has it; those routed under an older epoch are re-routed
    /// (forwarded when they belong elsewhere now); the rest are queued.
    fn admit(&self, reqs: Vec<Request>, rng: &mut SeededRng) {
        let mut routing = self.routing();
        let mut local = Vec::with_capacity(reqs.len());
        for r in reqs {
            let Some(r) = self.hold_if_ahead(r, &mut routing) else { continue };
            if r.epoch == routing.epoch {
                local.push(r);
            } else {
                for (w, part) in migration::reroute(r, &routing, self.me, rng) {
                    if w == self.me {
                        local.push(part);
                    } else {
                        self.send_to_peer(w, Message::Request(part));
                    }
                }
            }
        }
        if !local.is_empty() {
            self.sched.push_many(local);
        }
    }

    /// Holds `r` if its epoch is ahead of this worker's routing; otherwise returns it, with
    /// `routing` at least as new as its epoch. [`Self::install`] publishes the epoch and then
    /// drains `held` under its lock, so the epoch is checked again under that lock: a request
    /// checked against a routing that an install replaced meanwhile would otherwise be held
    /// after the drain, and its chain would never complete.
    fn hold_if_ahead(&self, r: Request, routing: &mut Arc<Routing>) -> Option<Request> {
        if r.epoch <= routing.epoch {
            return Some(r);
        }
        let mut held = lock(&self.held);
        if r.epoch > self.epoch.load(Ordering::Acquire) {
            held.push(r);
            return None;
        }
        drop(held);
        *routing = self.routing();
        Some(r)
    }

    /// Installs a routing and returns the requests held for it.
    fn install(&self, plan: RoutingPlan) -> (Arc<Routing>, Vec<Request>) {
        let routing = Arc::new(Routing::new(&self.pipeline, plan));
        for w in 0..routing.workers() {
            if WorkerId(w) != self.me {
                self.ensure_link(WorkerId(w));
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

/// What the control loop reacts to.
#[derive(Debug)]
enum Control {
    Planner(Message),
    Data(Box<MigrationData>),
    PeerUp(WorkerId),
    PeerDown(WorkerId, String),
    PlannerDown(String),
}

/// Joins the planner at `join` and runs until told to stop.
pub fn run(join: &str, registry: &Registry, opts: &WorkerOptions) -> Result<(), WorkerError> {
    let listener = TcpListener::bind(&opts.listen)
        .map_err(|source| WorkerError::Listen { addr: opts.listen.clone(), source })?;
    let listen = listener
        .local_addr()
        .map_err(|source| WorkerError::Listen { addr: opts.listen.clone(), source })?;
    let hello = Hello {
        role: Role::Worker,
        worker: opts.id,
        slots: opts.slots,
        listen: listen.to_string(),
        pid: std::process::id(),
    };
    let (stream, mut reader) = net::connect(join, &hello, crate::wire::DEFAULT_MAX_FRAME)?;
    let welcome = match reader.read_message(
        &mut stream.try_clone().map_err(|source| WireError::Io { peer: join.into(), source })?,
    )? {
        Some(Message::Welcome(w)) => *w,
        Some(Message::Reject(reason)) => {
            return Err(WireError::Rejected { peer: join.into(), reason }.into());
        }
        other => {
            return Err(WireError::Protocol {
                peer: join.into(),
                message: format!(
                    "expected Welcome, got {:?}",
                    other.as_ref().map(net::message_name)
                ),
            }
            .into());
        }
    };
    let (planner_link, planner_rx) = Link::pending();
    let shared = match build_shared(welcome.clone(), registry, opts.slots, planner_link.clone()) {
        Ok(s) => s,
        Err(e) => {
            let (mut s, msg) = (stream, Message::Reject(e.to_string()));
            let mut buf = Vec::new();
            crate::wire::encode(&msg, &mut buf);
            let _ = std::io::Write::write_all(&mut s, &buf);
            return Err(e);
        }
    };
    let (control_tx, control_rx) = crossbeam_channel::unbounded();
    let flush = Duration::ZERO;
    let send_stream =
        stream.try_clone().map_err(|source| WireError::Io { peer: join.into(), source })?;
    net::spawn_sender(
        format!("w{}-to-planner", shared.me),
        send_stream,
        planner_rx,
        planner_link.counters.clone(),
        flush,
    );
    spawn_peer_receiver(&shared, None, stream, reader, control_tx.clone());
    spawn_acceptor(shared.clone(), listener, control_tx.clone());
    for (w, addr) in &welcome.peers {
        shared.ensure_link(*w);
        if *w < shared.me {
            connect_peer(shared.clone(), *w, addr.clone(), control_tx.clone());
        }
    }
    let executors: Vec<_> = (0..opts.slots.max(1) as usize)
        .map(|i| {
            let s = shared.clone();
            std::thread::Builder::new()
                .name(format!("w{}-exec{i}", s.me))
                .spawn(move || executor::run(s, i))
                .expect("spawn executor")
        })
        .collect();
    let monitor = monitor::spawn(shared.clone());
    let result = control_loop(&shared, &control_rx, &control_tx);
    shared.stopping.store(true, Ordering::Release);
    shared.sched.shutdown();
    for e in executors {
        let _ = e.join();
    }
    let _ = monitor.join();
    shared.planner.send(Message::Shutdown);
    result
}

fn build_shared(
    w: Welcome,
    registry: &Registry,
    slots: u32,
    planner: Link,
) -> Result<Arc<WorkerShared>, WorkerError> {
    let pipeline = Arc::new(w.pipeline);
    let ops = registry.instantiate_all(&pipeline)?;
    let groups = w.settings.key_groups.max(1);
    let stores = pipeline
        .operators
        .iter()
        .zip(&ops)
        .map(|(o, imp)| imp.new_store(if o.stateful { groups } else { 1 }))
        .collect();
    let n_ops = pipeline.operators.len();
    let routing = w.routing.clone().unwrap_or_else(|| RoutingPlan {
        epoch: 0,
        placement: clasp_core::placement::Placement::single_worker(&pipeline, &[]),
        keys: clasp_core::placement::KeyAssignment { groups, owners: vec![Vec::new(); n_ops] },
    });
    let routing = Arc::new(Routing::new(&pipeline, routing));
    let counters = (0..slots.max(1))
        .map(|_| Arc::new(ExecCounters::new(n_ops, pipeline.streams.len(), MAX_WORKERS)))
        .collect();
    let shared = Arc::new(WorkerShared {
        me: w.worker,
        targets: executor::port_targets(&pipeline),
        sched: Scheduler::new(vec![0; n_ops]),
        epoch: AtomicU64::new(routing.epoch),
        routing: RwLock::new(routing.clone()),
        peers: RwLock::new(Vec::new()),
        pending_peers: Mutex::new(HashMap::new()),
        planner,
        counters,
        rejects: Mutex::new(vec![Rejections::default(); n_ops]),
        held: Mutex::new(Vec::new()),
        stopping: AtomicBool::new(false),
        report_now: AtomicU64::new(0),
        fanout_reached: (0..MAX_WORKERS / 64).map(|_| AtomicU64::new(0)).collect(),
        settings: w.settings,
        ops,
        stores,
        pipeline,
    });
    shared.sched.resume(shared.limits(&routing));
    Ok(shared)
}

/// Reads one connection (the planner's when `peer` is `None`).
fn spawn_peer_receiver(
    shared: &Arc<WorkerShared>,
    peer: Option<WorkerId>,
    stream: TcpStream,
    reader: crate::wire::FrameReader,
    control: Sender<Control>,
) {
    let s = shared.clone();
    let mut rng = independent_stream(shared.settings.seed, u64::from(shared.me.0) << 16 | 0xfeed);
    let name = match peer {
        Some(p) => format!("w{}-from-{p}", shared.me),
        None => format!("w{}-from-planner", shared.me),
    };
    let control_close = control.clone();
    let stopping = shared.clone();
    net::spawn_receiver(
        name,
        stream,
        reader,
        move |batch| {
            let mut reqs = Vec::new();
            for m in batch.drain(..) {
                match m {
                    Message::Request(r) => reqs.push(r),
                    Message::Requests(rs) => reqs.extend(rs),
                    Message::MigrationData(d) => {
                        let _ = control.send(Control::Data(d));
                    }
                    Message::Shutdown if peer.is_some() => return false,
                    other => {
                        if peer.is_none() {
                            let _ = control.send(Control::Planner(other));
                        } else {
                            tracing::warn!(
                                "worker {}: unexpected {} from a peer",
                                s.me,
                                net::message_name(&other)
                            );
                        }
                    }
                }
            }
            if !reqs.is_empty() {
                s.admit(reqs, &mut rng);
            }
            true
        },
        move |why| {
            if stopping.stopping.load(Ordering::Acquire) {
                return;
            }
            let reason = why.map_or_else(|| "connection closed".to_owned(), |e| e.to_string());
            let _ = control_close.send(match peer {
                Some(p) => Control::PeerDown(p, reason),
                None => Control::PlannerDown(reason),
            });
        },
    );
}

/// Starts the sending thread of an established peer connection.
fn attach_peer(
    shared: &Arc<WorkerShared>,
    w: WorkerId,
    stream: TcpStream,
    reader: crate::wire::FrameReader,
    control: &Sender<Control>,
) {
    let link = shared.ensure_link(w);
    let Some(rx) = lock(&shared.pending_peers).remove(&w) else {
        tracing::warn!("worker {}: second connection from {w} ignored", shared.me);
        return;
    };
    let send = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("worker {}: cannot use connection to {w}: {e}", shared.me);
            return;
        }
    };
    let flush = Duration::ZERO;
    net::spawn_sender(format!("w{}-to-{w}", shared.me), send, rx, link.counters.clone(), flush);
    spawn_peer_receiver(shared, Some(w), stream, reader, control.clone());
    let _ = control.send(Control::PeerUp(w));
}

fn connect_peer(shared: Arc<WorkerShared>, w: WorkerId, addr: String, control: Sender<Control>) {
    std::thread::spawn(move || {
        let hello = Hello {
            role: Role::Worker,
            worker: Some(shared.me),
            slots: shared.counters.len() as u32,
            listen: String::new(),
            pid: std::process::id(),
        };
        match net::connect(&addr, &hello, shared.settings.max_frame) {
            Ok((stream, reader)) => attach_peer(&shared, w, stream, reader, &control),
            Err(e) => {
                let _ = control.send(Control::PeerDown(w, e.to_string()));
            }
        }
    });
}

fn spawn_acceptor(shared: Arc<WorkerShared>, listener: TcpListener, control: Sender<Control>) {
    std::thread::Builder::new()
        .name(format!("w{}-accept", shared.me))
        .spawn(move || {
            for stream in listener.incoming() {
                if shared.stopping.load(Ordering::Acquire) {
                    return;
                }
                let Ok(mut stream) = stream else { continue };
                let (shared, control) = (shared.clone(), control.clone());
                // Handshakes run off the accept loop so a silent peer cannot block it.
                std::thread::spawn(move || match net::accept(&mut stream, shared.settings.max_frame) {
                    Ok((hello, reader)) => match (hello.role, hello.worker) {
                        (Role::Worker, Some(w)) if w != shared.me => {
                            attach_peer(&shared, w, stream, reader, &control);
                        }
                        _ => tracing::error!(
                            "worker {}: refused a connection that is not from a peer worker ({hello:?})",
                            shared.me
                        ),
                    },
                    Err(e) => tracing::error!("worker {}: rejected connection: {e}", shared.me),
                });
            }
        })
        .expect("spawn acceptor");
}

fn connected_peers(shared: &WorkerShared) -> Vec<WorkerId> {
    let pending = lock(&shared.pending_peers);
    read(&shared.peers)
        .iter()
        .enumerate()
        .filter(|(w, l)| l.is_some() && !pending.contains_key(&WorkerId::from(*w)))
        .map(|(w, _)| WorkerId::from(w))
        .collect()
}

fn control_loop(
    shared: &Arc<WorkerShared>,
    rx: &Receiver<Control>,
    tx: &Sender<Control>,
) -> Result<(), WorkerError> {
    let mut early: Vec<MigrationData> = Vec::new();
    let mut rng = independent_stream(shared.settings.seed, u64::from(shared.me.0) << 16 | 0xc0de);
    while let Ok(event) = rx.recv() {
        match event {
            Control::Planner(Message::Shutdown) => return Ok(()),
            Control::Planner(Message::Install(plan)) => {
                let (routing, held) = shared.install(*plan);
                shared.sched.resume(shared.limits(&routing));
                shared.admit(held, &mut rng);
            }
            Control::Planner(Message::Migrate(order)) => {
                migrate(shared, *order, rx, &mut early, &mut rng)
            }
            Control::Planner(Message::PeerJoined { worker, addr }) => {
                shared.ensure_link(worker);
                if worker < shared.me {
                    connect_peer(shared.clone(), worker, addr, tx.clone());
                }
            }
            Control::Planner(Message::PeerLeft(w)) => shared.drop_link(w),
            Control::Planner(Message::DumpState) => dump_state(shared),
            Control::Planner(Message::ReportNow(n)) => {
                shared.report_now.store(n, Ordering::Release)
            }
            Control::Planner(other) => {
                tracing::warn!(
                    "worker {}: unexpected {} from the planner",
                    shared.me,
                    net::message_name(&other)
                );
            }
            Control::Data(d) => early.push(*d),
            Control::PeerUp(w) => {
                tracing::debug!("worker {}: connected to worker {w}", shared.me);
                shared.planner.send(Message::MeshReady(connected_peers(shared)));
            }
            Control::PeerDown(w, why) => {
                tracing::warn!("worker {}: connection to worker {w} lost: {why}", shared.me);
            }
            Control::PlannerDown(why) => return Err(WorkerError::PlannerLost(why)),
        }
    }
    Ok(())
}

/// This worker's side of a migration (see [`crate::migration`]).
///
/// Outgoing key groups are detached in O(1) per group while paused and encoded afterwards; a
/// worker that expects nothing resumes before encoding. Incoming groups are staged as they
/// arrive and decoded on first access or right after resuming, so a receiver's pause is the
/// wait for its senders' messages. The completion goes to the planner once the worker has
/// resumed and sent what it owes; decoding staged groups goes on after it.
fn migrate(
    shared: &Arc<WorkerShared>,
    order: MigrationOrder,
    rx: &Receiver<Control>,
    early: &mut Vec<MigrationData>,
    rng: &mut SeededRng,
) {
    let started = Instant::now();
    let me = shared.me;
    shared.sched.pause_and_drain();
    let (routing, held) = shared.install(order.routing);
    let mut queued = shared.sched.take_all();
    queued.extend(held);
    let (mut keep, mut to_peer) = route_queued(queued, &routing, me, rng);
    let mut done = MigrationDone { epoch: order.epoch, worker: me, ..MigrationDone::default() };
    let outgoing: Vec<_> = order
        .part
        .send_to
        .iter()
        .map(|t| {
            let groups: Vec<_> = t
                .groups
                .iter()
                .flat_map(|gm| gm.groups.iter().map(move |&g| (gm.operator, g)))
                .map(|(op, g)| (op, g, shared.stores[op.index()].detach_group(g)))
                .collect();
            (t.peer, groups, to_peer.remove(&t.peer).unwrap_or_default())
        })
        .collect();
    let expected = order.part.receive_from.clone();
    let mut resumed = false;
    if expected.is_empty() {
        shared.sched.push_many(std::mem::take(&mut keep));
        shared.sched.resume(shared.limits(&routing));
        done.pause_us = started.elapsed().as_micros() as u64;
        resumed = true;
    }
    let emptied = ship(shared, order.epoch, outgoing, &mut done);
    // Requests for peers the plan does not name (routed under an older epoch) are forwarded.
    for (w, reqs) in to_peer {
        shared.send_to_peer(w, Message::Requests(reqs));
    }
    let wait_started = Instant::now();
    let arrived = await_peers(shared, order.epoch, &expected, rx, early, &mut done);
    done.wait_us = wait_started.elapsed().as_micros() as u64;
    done.waited_for = expected;
    let mut staged = Vec::new();
    let mut migrated = Vec::new();
    for d in arrived {
        for g in d.groups {
            shared.stores[g.op.index()].stage_group(g.group, g.bytes, g.keys as usize);
            staged.push((g.op, g.group, d.from));
        }
        migrated.extend(d.requests);
    }
    if !resumed {
        // Requests handed over were queued before anything that reached this worker directly
        // under the new epoch: they go first, so each key keeps its order.
        shared.sched.push_front_many(migrated);
        shared.sched.push_many(keep);
        shared.sched.resume(shared.limits(&routing));
        done.pause_us = started.elapsed().as_micros() as u64;
    } else {
        shared.sched.push_front_many(migrated);
    }
    shared.planner.send(Message::MigrationDone(done));
    drop(emptied);
    for (op, g, from) in staged {
        if let Err(e) = shared.stores[op.index()].import_staged(g) {
            tracing::error!(
                "worker {me}: state of {g} of {op} from {from} is invalid and was dropped: {e}"
            );
        }
    }
}

/// What one peer is owed: its key groups, detached from this worker's stores, and the queued
/// requests that now belong to it.
type Owed = (WorkerId, Vec<(OperatorId, KeyGroup, Box<dyn DetachedGroup>)>, Vec<Request>);

/// Encodes and sends what each peer is owed, one message per peer. The receivers wait for
/// exactly this, so the peers are shared out over as many threads as the machine has cores.
/// Returns the emptied groups' entries, to be freed once this worker no longer holds anyone up.
fn ship(
    shared: &WorkerShared,
    epoch: u64,
    outgoing: Vec<Owed>,
    done: &mut MigrationDone,
) -> Vec<Box<dyn DetachedGroup>> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from).min(outgoing.len());
    if threads <= 1 {
        return outgoing.into_iter().flat_map(|o| ship_to_peer(shared, epoch, o, done)).collect();
    }
    let mut shares: Vec<Vec<Owed>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, o) in outgoing.into_iter().enumerate() {
        shares[i % threads].push(o);
    }
    type Shipped = (Vec<Box<dyn DetachedGroup>>, MigrationDone);
    let results: Vec<Shipped> = std::thread::scope(|scope| {
        let handles: Vec<_> = shares
            .into_iter()
            .map(|share| {
                scope.spawn(move || {
                    let mut part = MigrationDone::default();
                    let emptied =
                        share.into_iter().flat_map(|o| ship_to_peer(shared, epoch, o, &mut part));
                    (emptied.collect(), part)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a migration sender panicked")).collect()
    });
    let mut emptied = Vec::new();
    for (groups, part) in results {
        emptied.extend(groups);
        done.keys_sent += part.keys_sent;
        done.bytes_sent += part.bytes_sent;
        done.requests_sent += part.requests_sent;
        done.error = done.error.take().or(part.error);
    }
    emptied
}

/// Encodes and sends one peer's message; returns its emptied groups.
fn ship_to_peer(
    shared: &WorkerShared,
    epoch: u64,
    owed: Owed,
    done: &mut MigrationDone,
) -> Vec<Box<dyn DetachedGroup>> {
    let (peer, groups, requests) = owed;
    let mut state = Vec::with_capacity(groups.len());
    for (op, g, detached) in &groups {
        let mut bytes = Vec::new();
        match detached.encode(*g, &mut bytes) {
            Ok(keys) => {
                done.keys_sent += keys as u64;
                done.bytes_sent += bytes.len() as u64;
                state.push(StateGroup { op: *op, group: *g, keys: keys as u32, bytes });
            }
            Err(e) => done.error = Some(format!("encoding {g} of {op}: {e}")),
        }
    }
    done.requests_sent += requests.len() as u64;
    let data = MigrationData { epoch, from: shared.me, groups: state, requests };
    shared.send_to_peer(peer, Message::MigrationData(Box::new(data)));
    groups.into_iter().map(|(_, _, detached)| detached).collect()
}

/// Queued requests under the new routing: those this worker keeps, and those for each peer.
fn route_queued(
    queued: Vec<Request>,
    routing: &Routing,
    me: WorkerId,
    rng: &mut SeededRng,
) -> (Vec<Request>, HashMap<WorkerId, Vec<Request>>) {
    let mut keep = Vec::new();
    let mut to_peer: HashMap<WorkerId, Vec<Request>> = HashMap::new();
    for r in queued {
        for (w, part) in migration::reroute(r, routing, me, rng) {
            if w == me {
                keep.push(part);
            } else {
                to_peer.entry(w).or_default().push(part);
            }
        }
    }
    (keep, to_peer)
}

/// Waits for the migration messages of every peer in `expected` (some may have arrived
/// early); a lost peer or a timeout is recorded in `done`.
fn await_peers(
    shared: &Arc<WorkerShared>,
    epoch: u64,
    expected: &[WorkerId],
    rx: &Receiver<Control>,
    early: &mut Vec<MigrationData>,
    done: &mut MigrationDone,
) -> Vec<MigrationData> {
    let (mut arrived, rest): (Vec<_>, Vec<_>) = early.drain(..).partition(|d| d.epoch == epoch);
    *early = rest;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !expected.iter().all(|w| arrived.iter().any(|d| d.from == *w)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Control::Data(d)) if d.epoch == epoch => arrived.push(*d),
            Ok(Control::Data(d)) => early.push(*d),
            Ok(Control::PeerUp(_)) => {
                shared.planner.send(Message::MeshReady(connected_peers(shared)));
            }
            Ok(Control::PeerDown(w, why)) if expected.contains(&w) => {
                done.error = Some(format!("worker {w} was lost during the migration: {why}"));
                break;
            }
            Ok(other) => tracing::debug!("worker {}: during migration: {other:?}", shared.me),
            Err(_) => {
                let missing: Vec<String> = expected
                    .iter()
                    .filter(|w| !arrived.iter().any(|d| d.from == **w))
                    .map(ToString::to_string)
                    .collect();
                done.error =
                    Some(format!("no migration data from {} after 60 s", missing.join(", ")));
                break;
            }
        }
    }
    arrived
}

fn dump_state(shared: &WorkerShared) {
    for o in shared.pipeline.operators.iter().filter(|o| o.stateful) {
        let mut lines = Vec::new();
        if let Err(e) = shared.stores[o.id.index()].dump_json(&o.name, &mut lines) {
            tracing::error!("worker {}: dumping state of `{}`: {e}", shared.me, o.name);
        }
        // Chunks stay well under the frame limit.
        let mut start = 0;
        while start < lines.len() {
            let mut end = (start + (8 << 20)).min(lines.len());
            while end < lines.len() && lines[end - 1] != b'\n' {
                end += 1;
            }
            shared
                .planner
                .send(Message::StateLines { operator: o.id, lines: lines[start..end].to_vec() });
            start = end;
        }
    }
    shared.planner.send(Message::StateDone);
}
