//! The workers of the cluster: accepting and registering them, their slots, the threads that
//! receive their messages, and retiring them.

use super::{Planner, PlannerError, Shared};
use crate::metrics::WorkerReport;
use crate::migration::MigrationDone;
use crate::net::{self, Link};
use crate::wire::{
    self, CheckpointMarked, CheckpointWritten, Limits, MAX_WORKERS, Message, PLANNER_IDENTITY,
    Restored, Role, Welcome,
};
use clasp_core::sync::{lock, read};
use clasp_core::{Batch, OperatorId, WorkerId};
use clasp_wire::Conn;
use crossbeam_channel::RecvTimeoutError;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

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
    /// A worker disconnected, or stopped sending heartbeats.
    Lost(WorkerId, String),
    /// A checkpoint or recovery message from a worker.
    Fault(FaultEvent),
}

/// What workers answer to checkpoints and recoveries.
#[derive(Debug)]
pub enum FaultEvent {
    /// Marked its groups for a checkpoint.
    Marked(WorkerId, CheckpointMarked),
    /// Wrote its groups of a checkpoint.
    Written(Box<CheckpointWritten>),
    /// Rolled back (recovery number).
    RolledBack(WorkerId, u64),
    /// Restored its groups.
    Restored(Restored),
}

/// A registered worker: its link, what it announced, and the peers it reported.
#[derive(Debug)]
pub(super) struct WorkerSlot {
    pub(super) link: Link,
    pub(super) addr: String,
    pub(super) pid: u32,
    pub(super) peers: Vec<WorkerId>,
    pub(super) left: bool,
    /// Distinguishes a worker from an earlier one with the same id (scale in, then out).
    pub(super) generation: u64,
    /// When anything last arrived from it (ns since the Unix epoch).
    pub(super) heard: Arc<AtomicU64>,
    /// While set, its sink records are dropped: they were sent before a rollback it has not
    /// confirmed yet.
    pub(super) muted: Arc<AtomicBool>,
    /// Reported lost (once).
    pub(super) lost: bool,
}

impl Planner {
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

    /// The operating-system process id worker `w` announced.
    pub fn worker_pid(&self, w: WorkerId) -> Option<u32> {
        lock(&self.shared.workers).get(w.index()).and_then(Option::as_ref).map(|s| s.pid)
    }

    /// The address worker `w` accepts peer connections on.
    pub fn worker_addr(&self, w: WorkerId) -> Option<String> {
        lock(&self.shared.workers).get(w.index()).and_then(Option::as_ref).map(|s| s.addr.clone())
    }

    /// Stops worker `w` (it must hold no state and no placement).
    pub fn retire(&mut self, w: WorkerId) {
        self.leaving.retain(|x| *x != w);
        // Marked first: the worker may close its connection as soon as it reads Shutdown.
        if let Some(Some(s)) = lock(&self.shared.workers).get_mut(w.index()) {
            s.left = true;
        }
        for other in self.workers() {
            self.shared.send(other, Message::PeerLeft(w));
        }
        // Told first that it leaves, the worker runs what is still on its way to it.
        self.shared.send(w, Message::PeerLeft(w));
        self.shared.send(w, Message::Shutdown);
    }

    /// Tells every worker to stop.
    pub fn shutdown(&mut self) {
        self.shared.stopping.store(true, Ordering::Release);
        for w in self.workers() {
            self.shared.send(w, Message::Shutdown);
        }
        let _ = lock(&self.shared.sink).write("", &Batch::new());
    }
}

/// Reports a worker lost when nothing arrived from it for `timeout` (workers send heartbeats
/// a few times a second, so a stopped process is noticed although its connection stays open).
pub(super) fn spawn_heartbeat_watch(shared: Arc<Shared>, timeout: Duration) {
    std::thread::Builder::new()
        .name("planner-heartbeats".into())
        .spawn(move || {
            let step = (timeout / 10).max(Duration::from_millis(10));
            while !shared.stopping.load(Ordering::Acquire) {
                std::thread::sleep(step);
                let now = crate::worker::executor::now_ns();
                let mut lost = Vec::new();
                for (i, s) in lock(&shared.workers).iter_mut().enumerate() {
                    let Some(s) = s.as_mut().filter(|s| !s.left && !s.lost) else { continue };
                    let silent =
                        Duration::from_nanos(now.saturating_sub(s.heard.load(Ordering::Relaxed)));
                    if silent >= timeout {
                        s.lost = true;
                        lost.push((WorkerId::from(i), silent));
                    }
                }
                for (w, silent) in lost {
                    let why = format!("no heartbeat for {:.1} s", silent.as_secs_f64());
                    let _ = shared.events.send(Event::Lost(w, why));
                    shared.chains_done.notify_all();
                }
            }
        })
        .expect("spawn heartbeat watch");
}

/// Accepts worker connections; each handshake runs on its own thread.
pub(super) fn spawn_acceptor(shared: Arc<Shared>, listener: TcpListener) {
    let stopping = shared.clone();
    net::accept_loop(
        "planner-accept",
        listener,
        move || stopping.stopping.load(Ordering::Acquire),
        move |tcp| {
            let c = &shared.config;
            match net::accept(tcp, &c.security, PLANNER_IDENTITY, c.settings.max_frame) {
                Ok(a) if a.hello.role == Role::Worker => register(&shared, a),
                Ok(a) => tracing::error!(
                    "planner: refused a connection from a non-worker at {} ({:?})",
                    a.reader.peer(),
                    a.hello
                ),
                Err(e) => tracing::error!("planner: rejected connection: {e}"),
            }
        },
    );
}

/// Admits a joining worker: assigns its id, welcomes it, introduces it to the others.
fn register(shared: &Arc<Shared>, accepted: net::Accepted) {
    let net::Accepted { conn: stream, hello, reader } = accepted;
    let (link, rx) = Link::pending();
    let heard = Arc::new(AtomicU64::new(crate::worker::executor::now_ns()));
    let muted = Arc::new(AtomicBool::new(false));
    let (id, peers, generation) = {
        let mut ws = lock(&shared.workers);
        let free = |i: usize| ws.get(i).is_none_or(|s| s.as_ref().is_none_or(|s| s.left));
        let id = match hello.worker {
            Some(w) if free(w.index()) => w.index(),
            Some(w) => {
                drop(ws);
                reject(&stream, &format!("worker id {w} is already in use"));
                return;
            }
            None => match (0..MAX_WORKERS as usize).find(|&i| free(i)) {
                Some(i) => i,
                None => {
                    drop(ws);
                    let full = format!("the cluster has its maximum of {MAX_WORKERS} workers");
                    reject(&stream, &full);
                    return;
                }
            },
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
            heard: heard.clone(),
            muted: muted.clone(),
            lost: false,
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
            cut: lock(&shared.chains).cut(),
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
    spawn_worker_receiver(shared.clone(), id, generation, stream, reader, (heard, muted));
    let _ = shared.events.send(Event::Joined(id));
    if peers.is_empty() {
        let _ = shared.events.send(Event::Mesh(id, Vec::new()));
    }
}

fn reject(stream: &Conn, reason: &str) {
    let from = stream.peer_addr().map_or_else(|_| "?".into(), |a| a.to_string());
    tracing::error!("planner: refused a worker at {from}: {reason}");
    net::reject(stream, reason);
}

/// Numbers worker connections, so a closing connection is not taken for a newer worker that
/// reused its id.
static GENERATION: AtomicU64 = AtomicU64::new(0);

fn spawn_worker_receiver(
    shared: Arc<Shared>,
    id: WorkerId,
    generation: u64,
    stream: Conn,
    reader: wire::FrameReader,
    (heard, muted): (Arc<AtomicU64>, Arc<AtomicBool>),
) {
    let closing = shared.clone();
    // Reports and migration completions on this connection must be worker `id`'s own.
    let limits =
        Limits::new(&shared.pipeline, shared.config.settings.key_groups, 0).from_worker(id);
    let routing = shared.clone();
    net::spawn_receiver(
        format!("planner-from-{id}"),
        stream,
        reader,
        limits,
        move || read(&routing.routing).epoch,
        move |batch| {
            heard.store(crate::worker::executor::now_ns(), Ordering::Relaxed);
            for m in batch.drain(..) {
                match m {
                    Message::Credits(c) => shared.settle(&c),
                    Message::Sink { sink, cut, batch } => {
                        // Checked under the sink's lock: a recovery mutes, then drops the
                        // output's epoch under it.
                        let mut out = lock(&shared.sink);
                        if muted.load(Ordering::Acquire) {
                            continue;
                        }
                        shared.sink_records.fetch_add(batch.len() as u64, Ordering::Relaxed);
                        let name = &shared.pipeline.sinks[sink.index()].name;
                        if let Err(e) = out.write_cut(name, batch, cut) {
                            drop(out);
                            shared.output_failed(e);
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
                    Message::Heartbeat => {}
                    Message::CheckpointMarked(m) => {
                        let _ = shared.events.send(Event::Fault(FaultEvent::Marked(id, m)));
                    }
                    Message::CheckpointWritten(w) => {
                        let _ = shared.events.send(Event::Fault(FaultEvent::Written(w)));
                    }
                    Message::RolledBack(n) => {
                        muted.store(false, Ordering::Release);
                        let _ = shared.events.send(Event::Fault(FaultEvent::RolledBack(id, n)));
                    }
                    Message::Restored(r) => {
                        let _ = shared.events.send(Event::Fault(FaultEvent::Restored(r)));
                    }
                    other => {
                        tracing::warn!("planner: unexpected {} from worker {id}", other.name())
                    }
                }
            }
            true
        },
        move |why| {
            let left = {
                let mut ws = lock(&closing.workers);
                match ws.get_mut(id.index()).and_then(Option::as_mut) {
                    Some(s) if !s.left && s.generation == generation && !s.lost => {
                        s.lost = true;
                        false
                    }
                    _ => true,
                }
            };
            if closing.stopping.load(Ordering::Acquire) || left {
                return;
            }
            let reason = why.map_or_else(|| "connection closed".to_owned(), |e| e.to_string());
            let _ = closing.events.send(Event::Lost(id, reason));
            closing.chains_done.notify_all();
        },
    );
}
