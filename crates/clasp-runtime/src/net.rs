//! Connections between nodes: one TCP connection per pair, used in both directions, with a
//! dedicated sending thread and receiving thread on blocking sockets (the per-request path
//! never touches an async runtime).
//!
//! The sending thread drains its queue into one buffer and writes it in one call, so messages
//! produced while a write is under way travel together: batching per destination comes from
//! the load itself, and an idle link writes at once. A flush deadline can make an idle sender
//! wait a little to fill its buffer.

use crate::wire::{self, FrameReader, Hello, Limits, Message, PROTOCOL, WireError};
use clasp_wire::conn::Timed;
use clasp_wire::{
    Conn, Deadline, Established, HANDSHAKE_DEADLINE, HandshakeGate, Opening, Security, auth,
};
use crossbeam_channel::{Receiver, Sender, TryRecvError};
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Bytes and messages a link has written.
#[derive(Debug, Default)]
pub struct LinkCounters {
    /// Bytes written.
    pub bytes: AtomicU64,
    /// Messages written.
    pub messages: AtomicU64,
}

/// The sending side of a connection.
#[derive(Clone, Debug)]
pub struct Link {
    tx: Sender<Message>,
    /// Counters of what was written.
    pub counters: Arc<LinkCounters>,
}

impl Link {
    /// A link whose messages wait in the returned queue until a sender thread drains it
    /// (so messages can be sent before the connection is up).
    pub fn pending() -> (Self, Receiver<Message>) {
        let (tx, rx) = crossbeam_channel::unbounded();
        (Self { tx, counters: Arc::default() }, rx)
    }

    /// Queues a message; false when the connection is gone.
    #[inline]
    pub fn send(&self, m: Message) -> bool {
        self.tx.send(m).is_ok()
    }

    /// Messages queued and not yet written.
    pub fn backlog(&self) -> usize {
        self.tx.len()
    }
}

fn io_err(peer: &str) -> impl FnOnce(std::io::Error) -> WireError + '_ {
    move |source| WireError::Io { peer: peer.to_owned(), source }
}

/// Connects to `addr`, proves the cluster secret and this node's identity (that of `hello`),
/// checks that the peer proves `expect`, and introduces this node with `hello`.
pub fn connect(
    addr: &str,
    hello: &Hello,
    security: &Security,
    expect: &str,
    max_frame: u32,
) -> Result<(Conn, FrameReader), WireError> {
    let target: SocketAddr =
        addr.to_socket_addrs().map_err(io_err(addr))?.next().ok_or_else(|| {
            WireError::Protocol { peer: addr.into(), message: "no such address".into() }
        })?;
    let tcp = connect_retrying(target).map_err(io_err(addr))?;
    let me = wire::worker_identity(hello.worker);
    let opening = Opening {
        security,
        protocol: &PROTOCOL,
        identity: &me,
        max_frame,
        deadline: Deadline::after(HANDSHAKE_DEADLINE),
    };
    let link = clasp_wire::link::dial(tcp, addr, &opening, |theirs| {
        if theirs == expect {
            Ok(())
        } else {
            Err(format!("dialed {expect}, reached `{}`", auth::printable(theirs)))
        }
    })?;
    let mut buf = Vec::new();
    wire::encode(&Message::Hello(hello.clone()), &mut buf);
    (&link.conn).write_all(&buf).map_err(io_err(addr))?;
    link.conn.set_timeouts(None).map_err(io_err(addr))?;
    Ok((link.conn, link.reader))
}

/// Peers may start a moment after the planner tells us about them.
fn connect_retrying(target: SocketAddr) -> std::io::Result<TcpStream> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpStream::connect_timeout(&target, Duration::from_secs(2)) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() < deadline => {
                tracing::debug!("connect {target}: {e}; retrying");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => return Err(e),
        }
    }
}

/// An accepted connection that proved a worker identity and introduced itself.
#[derive(Debug)]
pub struct Accepted {
    /// The connection.
    pub conn: Conn,
    /// Its introduction, which agrees with the identity proved.
    pub hello: Hello,
    /// Reads its next frames.
    pub reader: FrameReader,
}

/// Answers an accepted connection as `me`: checks its preamble, its proof of the cluster
/// secret and of a worker identity, and reads its `Hello`, which must name the worker it
/// proved to be — all within [`HANDSHAKE_DEADLINE`]. A peer of another version, or whose
/// `Hello` names a worker id beyond [`wire::MAX_WORKERS`] or another worker than it proved, is
/// told why before the connection closes.
pub fn accept(
    tcp: TcpStream,
    security: &Security,
    me: &str,
    max_frame: u32,
) -> Result<Accepted, WireError> {
    let opening = Opening {
        security,
        protocol: &PROTOCOL,
        identity: me,
        max_frame,
        deadline: Deadline::after(HANDSHAKE_DEADLINE),
    };
    let link =
        clasp_wire::link::answer(tcp, &opening, |theirs| {
            match wire::parse_worker_identity(theirs) {
                Some(_) => Ok(()),
                None => Err(format!("`{}` is not a worker identity", auth::printable(theirs))),
            }
        })?;
    let Established { conn, mut reader, identity, deadline } = link;
    let peer = reader.peer().to_owned();
    let claimed = wire::parse_worker_identity(&identity).expect("admitted above");
    let mut timed = Timed::new(&conn, deadline);
    let hello = match reader.read_message(&mut timed, &Limits::handshake()) {
        Ok(Some(Message::Hello(h))) => h,
        Ok(Some(other)) => {
            return Err(WireError::Protocol {
                peer,
                message: format!("expected Hello, got {}", other.name()),
            });
        }
        Ok(None) => {
            return Err(WireError::Protocol { peer, message: "closed before Hello".into() });
        }
        Err(e) => {
            if let WireError::Invalid { .. } = e {
                reject(&conn, &e.to_string());
            }
            return Err(e);
        }
    };
    if hello.worker != claimed {
        let reason = format!(
            "the Hello names worker {:?}, the connection proved `{identity}`",
            hello.worker.map(|w| w.0)
        );
        reject(&conn, &reason);
        return Err(WireError::Auth { peer, reason });
    }
    conn.set_timeouts(None).map_err(io_err(&peer))?;
    Ok(Accepted { conn, hello, reader })
}

/// Tells the peer why its connection is refused (the connection closes when it is dropped).
pub fn reject(conn: &Conn, reason: &str) {
    let mut buf = Vec::new();
    wire::encode(&Message::Reject(reason.into()), &mut buf);
    let _ = (&*conn).write_all(&buf);
}

/// Runs `handshake` on its own thread for each connection `listener` accepts while
/// `stopping` is false, with at most [`clasp_wire::conn::MAX_PENDING_HANDSHAKES`] under way:
/// connections beyond the cap are closed at once (logged), so a flood of silent connections
/// costs a bounded number of threads and buffers.
pub fn accept_loop(
    name: &str,
    listener: TcpListener,
    stopping: impl Fn() -> bool + Send + 'static,
    handshake: impl Fn(TcpStream) + Send + Sync + 'static,
) {
    let gate = HandshakeGate::default();
    let handshake = Arc::new(handshake);
    let label = name.to_owned();
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            for stream in listener.incoming() {
                if stopping() {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let Some(permit) = gate.try_enter() else {
                    let from = stream.peer_addr().map_or_else(|_| "?".into(), |a| a.to_string());
                    tracing::warn!(
                        "{label}: {} connections are handshaking; closed the one from {from}",
                        gate.max()
                    );
                    continue;
                };
                let handshake = handshake.clone();
                let spawned =
                    std::thread::Builder::new().name(format!("{label}-hs")).spawn(move || {
                        handshake(stream);
                        drop(permit);
                    });
                if let Err(e) = spawned {
                    tracing::error!("{label}: cannot start a handshake thread: {e}");
                }
            }
        })
        .expect("spawn an acceptor");
}

/// Starts the thread that writes `rx`'s messages to `stream`.
pub fn spawn_sender(
    name: String,
    stream: Conn,
    rx: Receiver<Message>,
    counters: Arc<LinkCounters>,
    flush_deadline: Duration,
) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let mut buf: Vec<u8> = Vec::with_capacity(256 << 10);
            while let Ok(first) = rx.recv() {
                let mut count = 1u64;
                // Shutdown is a link's last message, wherever it falls in a write.
                let mut shutdown = matches!(first, Message::Shutdown);
                wire::encode(&first, &mut buf);
                release_batches(first);
                let deadline = Instant::now() + flush_deadline;
                while buf.len() < (64 << 10) && !shutdown {
                    match rx.try_recv() {
                        Ok(m) => {
                            shutdown = matches!(m, Message::Shutdown);
                            wire::encode(&m, &mut buf);
                            release_batches(m);
                            count += 1;
                        }
                        Err(TryRecvError::Empty) if Instant::now() < deadline => {
                            std::thread::yield_now();
                        }
                        Err(_) => break,
                    }
                }
                if let Err(e) = (&stream).write_all(&buf) {
                    tracing::debug!("{name}: write failed: {e}");
                    return;
                }
                counters.bytes.fetch_add(buf.len() as u64, Ordering::Relaxed);
                counters.messages.fetch_add(count, Ordering::Relaxed);
                buf.clear();
                if buf.capacity() > (4 << 20) {
                    buf.shrink_to(256 << 10);
                }
                if shutdown {
                    return;
                }
            }
            stream.finish();
        })
        .expect("spawn sender thread")
}

/// Gives the batches of sent requests back for decoding to reuse (see
/// [`clasp_core::batch::Batch::release`]).
fn release_batches(m: Message) {
    if let Message::Requests(requests) = m {
        clasp_core::batch::Batch::release_all(requests.into_iter().map(|r| r.batch));
    }
}

/// Starts the thread that reads frames from `stream` and hands each read's worth of messages
/// to `handle` (which returns false to stop). Every message is checked against `limits`, at
/// the epoch `epoch` returns when the read's messages are decoded; the first that is not, or
/// any undecodable frame, closes the connection (logged). `on_close` learns why the
/// connection ended (`None` for a clean close).
pub fn spawn_receiver(
    name: String,
    stream: Conn,
    mut reader: FrameReader,
    mut limits: Limits,
    epoch: impl Fn() -> u64 + Send + 'static,
    mut handle: impl FnMut(&mut Vec<Message>) -> bool + Send + 'static,
    on_close: impl FnOnce(Option<WireError>) + Send + 'static,
) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            let mut batch = Vec::with_capacity(256);
            let result = loop {
                limits.epoch = epoch();
                loop {
                    match reader.next_buffered(&limits) {
                        Ok(Some(m)) => batch.push(m),
                        Ok(None) => break,
                        Err(e) => {
                            tracing::error!("{name}: {e}; closing the connection");
                            stream.close();
                            if !batch.is_empty() {
                                handle(&mut batch);
                            }
                            on_close(Some(e));
                            return;
                        }
                    }
                }
                if !batch.is_empty() {
                    if !handle(&mut batch) {
                        break None;
                    }
                    batch.clear();
                }
                match reader.fill(&mut &stream) {
                    Ok(true) => {}
                    Ok(false) => break reader.end_of_stream().err(),
                    Err(e) => break Some(e),
                }
            };
            if let Some(e) = &result {
                tracing::warn!("{name}: {e}; closing the connection");
                stream.close();
            }
            on_close(result);
        })
        .expect("spawn receiver thread")
}
