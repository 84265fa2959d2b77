//! Links to the peers: the planner and every other worker, one connection each, with the
//! threads that receive from them and the acceptor of peer connections.

use super::WorkerShared;
use super::control::Control;
use crate::net;
use crate::wire::{self, FrameReader, Hello, Limits, Message, Role};
use clasp_core::WorkerId;
use clasp_core::rng::independent_stream;
use clasp_core::sync::lock;
use clasp_wire::Conn;
use crossbeam_channel::Sender;
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Reads one connection (the planner's when `peer` is `None`).
pub(super) fn spawn_peer_receiver(
    shared: &Arc<WorkerShared>,
    peer: Option<WorkerId>,
    stream: Conn,
    reader: FrameReader,
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
    let limits = Limits::new(&shared.pipeline, shared.settings.key_groups, 0);
    // A peer's migration data must be its own.
    let limits = match peer {
        Some(p) => limits.from_worker(p),
        None => limits,
    };
    let epoch = shared.clone();
    let ended = Arc::new(AtomicBool::new(false));
    let ended_close = ended.clone();
    net::spawn_receiver(
        name,
        stream,
        reader,
        limits,
        move || epoch.epoch.load(Ordering::Acquire),
        move |batch| {
            let mut reqs = Vec::new();
            let mut more = true;
            for m in batch.drain(..) {
                match m {
                    Message::Request(r) => reqs.push(r),
                    Message::Requests(rs) => reqs.extend(rs),
                    Message::MigrationData(d) => {
                        let _ = control.send(Control::Data(d));
                    }
                    Message::Shutdown if peer.is_some() => {
                        // The peer's last message: it will send nothing more.
                        more = false;
                        break;
                    }
                    other => {
                        if peer.is_none() {
                            let _ = control.send(Control::Planner(other));
                        } else {
                            tracing::warn!(
                                "worker {}: unexpected {} from a peer",
                                s.me,
                                other.name()
                            );
                        }
                    }
                }
            }
            if !reqs.is_empty() {
                s.admit(reqs, &mut rng);
            }
            if !more && let Some(p) = peer {
                // Told once what came before is admitted.
                ended.store(true, Ordering::Release);
                let _ = control.send(Control::PeerDone(p));
            }
            more
        },
        move |why| {
            if stopping.stopping.load(Ordering::Acquire) || ended_close.load(Ordering::Acquire) {
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
    stream: Conn,
    reader: FrameReader,
    control: &Sender<Control>,
) {
    let Some((link, rx)) = shared.peers.connect(w) else {
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
    let sender =
        net::spawn_sender(format!("w{}-to-{w}", shared.me), send, rx, link.counters.clone(), flush);
    lock(&shared.senders).push(sender);
    spawn_peer_receiver(shared, Some(w), stream, reader, control.clone());
    let _ = control.send(Control::PeerUp(w));
}

/// Connects to peer `w` at `addr` in the background (the worker with the higher id connects).
pub(super) fn connect_peer(
    shared: Arc<WorkerShared>,
    w: WorkerId,
    addr: String,
    control: Sender<Control>,
) {
    std::thread::spawn(move || {
        let hello = Hello {
            role: Role::Worker,
            worker: Some(shared.me),
            slots: shared.counters.len() as u32,
            listen: String::new(),
            pid: std::process::id(),
        };
        let expect = wire::worker_identity(Some(w));
        match net::connect(&addr, &hello, &shared.security, &expect, shared.settings.max_frame) {
            Ok((stream, reader)) => attach_peer(&shared, w, stream, reader, &control),
            Err(e) => {
                let _ = control.send(Control::PeerDown(w, e.to_string()));
            }
        }
    });
}

/// Accepts peer connections; each handshake runs on its own thread.
pub(super) fn spawn_acceptor(
    shared: Arc<WorkerShared>,
    listener: TcpListener,
    control: Sender<Control>,
) {
    let stopping = shared.clone();
    let me = wire::worker_identity(Some(shared.me));
    net::accept_loop(
        &format!("w{}-accept", shared.me),
        listener,
        move || stopping.stopping.load(Ordering::Acquire),
        move |tcp| match net::accept(tcp, &shared.security, &me, shared.settings.max_frame) {
            Ok(a) => match (a.hello.role, a.hello.worker) {
                (Role::Worker, Some(w)) if w != shared.me => {
                    attach_peer(&shared, w, a.conn, a.reader, &control);
                }
                _ => tracing::error!(
                    "worker {}: refused a connection from {} that is not from a peer worker ({:?})",
                    shared.me,
                    a.reader.peer(),
                    a.hello
                ),
            },
            Err(e) => tracing::error!("worker {}: rejected connection: {e}", shared.me),
        },
    );
}
