//! How a worker starts: it joins the planner, builds its operators, stores and routing from
//! the welcome, connects to its peers and starts its threads, then runs the control loop until
//! told to stop.

use super::control::control_loop;
use super::mesh::{connect_peer, spawn_acceptor, spawn_peer_receiver};
use super::peers::PeerLinks;
use super::scheduler::Scheduler;
use super::{MAX_WORKERS, WorkerShared, executor, monitor};
use crate::metrics::ExecCounters;
use crate::net::{self, Link};
use crate::routing::{Routing, RoutingPlan};
use crate::wire::{Hello, Limits, Message, PLANNER_IDENTITY, Role, Welcome, WireError};
use clasp_core::operator::Rejections;
use clasp_core::sync::lock;
use clasp_core::{Registry, WorkerId};
use clasp_wire::Security;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// How a worker starts.
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// Executor slots (default 10).
    pub slots: u32,
    /// Address to accept peer connections on.
    pub listen: String,
    /// Id to ask the planner for (it must be free).
    pub id: Option<WorkerId>,
    /// The cluster secret and TLS, for the planner and the peers alike.
    pub security: Security,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        Self { slots: 10, listen: "127.0.0.1:0".into(), id: None, security: Security::insecure() }
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
    let max_frame = crate::wire::DEFAULT_MAX_FRAME;
    let (stream, mut reader) =
        net::connect(join, &hello, &opts.security, PLANNER_IDENTITY, max_frame)?;
    let welcome = match reader.read_message(&mut &stream, &Limits::handshake())? {
        Some(Message::Welcome(w)) => *w,
        Some(Message::Reject(reason)) => {
            return Err(WireError::Rejected { peer: join.into(), reason }.into());
        }
        other => {
            return Err(WireError::Protocol {
                peer: join.into(),
                message: format!("expected Welcome, got {:?}", other.as_ref().map(Message::name)),
            }
            .into());
        }
    };
    let (planner_link, planner_rx) = Link::pending();
    let built = build_shared(welcome.clone(), registry, opts, planner_link.clone());
    let shared = match built {
        Ok(s) => s,
        Err(e) => {
            net::reject(&stream, &e.to_string());
            return Err(e);
        }
    };
    let (control_tx, control_rx) = crossbeam_channel::unbounded();
    let flush = Duration::ZERO;
    let send_stream =
        stream.try_clone().map_err(|source| WireError::Io { peer: join.into(), source })?;
    let to_planner = net::spawn_sender(
        format!("w{}-to-planner", shared.me),
        send_stream,
        planner_rx,
        planner_link.counters.clone(),
        flush,
    );
    lock(&shared.senders).push(to_planner);
    spawn_peer_receiver(&shared, None, stream, reader, control_tx.clone());
    spawn_acceptor(shared.clone(), listener, control_tx.clone());
    for (w, addr) in &welcome.peers {
        shared.peers.ensure(*w);
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
    let heartbeat = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name(format!("w{}-heartbeat", shared.me))
            .spawn(move || {
                while !shared.stopping.load(Ordering::Acquire) {
                    std::thread::sleep(super::HEARTBEAT);
                    shared.planner.send(Message::Heartbeat);
                }
            })
            .expect("spawn heartbeat")
    };
    let result = control_loop(&shared, &control_rx, &control_tx);
    shared.stopping.store(true, Ordering::Release);
    shared.sched.shutdown();
    for e in executors {
        let _ = e.join();
    }
    let _ = monitor.join();
    let _ = heartbeat.join();
    for op in &shared.ops {
        op.close();
    }
    // Each link's last message: its sending thread writes what is queued before it and ends.
    for w in shared.peers.connected() {
        shared.send_to_peer(w, Message::Shutdown);
    }
    shared.planner.send(Message::Shutdown);
    let senders = std::mem::take(&mut *lock(&shared.senders));
    for s in senders {
        let _ = s.join();
    }
    result
}

fn build_shared(
    w: Welcome,
    registry: &Registry,
    opts: &WorkerOptions,
    planner: Link,
) -> Result<Arc<WorkerShared>, WorkerError> {
    let slots = opts.slots;
    let pipeline = Arc::new(w.pipeline);
    let mut ops = registry.instantiate_all(&pipeline)?;
    let groups = w.settings.key_groups.max(1);
    clasp_core::registry::open_all(&mut ops, &pipeline, Some(w.worker.0), groups)?;
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
    let counted: Vec<u32> =
        pipeline.operators.iter().map(|o| if o.stateful { groups } else { 0 }).collect();
    let counters = (0..slots.max(1))
        .map(|_| Arc::new(ExecCounters::new(n_ops, pipeline.streams.len(), MAX_WORKERS, &counted)))
        .collect();
    let shared = Arc::new(WorkerShared {
        me: w.worker,
        targets: executor::port_targets(&pipeline),
        sched: Scheduler::new(vec![0; n_ops]),
        epoch: AtomicU64::new(routing.epoch),
        routing: RwLock::new(routing.clone()),
        peers: PeerLinks::default(),
        senders: Mutex::new(Vec::new()),
        planner,
        counters,
        rejects: Mutex::new(vec![Rejections::default(); n_ops]),
        held: Mutex::new(Vec::new()),
        stopping: AtomicBool::new(false),
        report_now: AtomicU64::new(0),
        fanout_reached: (0..MAX_WORKERS / 64).map(|_| AtomicU64::new(0)).collect(),
        fanout_stretch: AtomicU64::new(0),
        generation: AtomicU64::new(0),
        send_gate: RwLock::new(()),
        floor: AtomicU64::new(0),
        marked_cut: AtomicU64::new(w.cut),
        cut_held: Mutex::default(),
        store: Mutex::new(None),
        settings: w.settings,
        security: opts.security.clone(),
        ops,
        stores,
        pipeline,
    });
    shared.sched.resume(shared.limits(&routing));
    Ok(shared)
}
