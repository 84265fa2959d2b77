//! Connections between nodes: one TCP connection per pair, used in both directions, with a
//! dedicated sending thread and receiving thread on blocking sockets (the per-request path
//! never touches an async runtime).
//!
//! The sending thread drains its queue into one buffer and writes it in one call, so messages
//! produced while a write is under way travel together: batching per destination comes from
//! the load itself, and an idle link writes at once. A flush deadline can make an idle sender
//! wait a little to fill its buffer.

use crate::wire::{self, FrameReader, Hello, Limits, Message, PROTOCOL, WireError};
use crossbeam_channel::{Receiver, Sender, TryRecvError};
use std::io::Write;
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
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

/// Connects to `addr`, introduces this node with `hello`, and checks the peer's preamble.
pub fn connect(
    addr: &str,
    hello: &Hello,
    max_frame: u32,
) -> Result<(TcpStream, FrameReader), WireError> {
    let target: SocketAddr =
        addr.to_socket_addrs().map_err(io_err(addr))?.next().ok_or_else(|| {
            WireError::Protocol { peer: addr.into(), message: "no such address".into() }
        })?;
    let mut stream = connect_retrying(target).map_err(io_err(addr))?;
    stream.set_nodelay(true).map_err(io_err(addr))?;
    let mut buf = PROTOCOL.preamble().to_vec();
    wire::encode(&Message::Hello(hello.clone()), &mut buf);
    stream.write_all(&buf).map_err(io_err(addr))?;
    let mut reader = stream.try_clone().map_err(io_err(addr))?;
    PROTOCOL.read_preamble(&mut reader, addr)?;
    Ok((stream, FrameReader::new(addr, max_frame)))
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

/// Checks an accepted connection's preamble, answers with ours, and reads its `Hello`. A
/// peer of another version, or whose `Hello` names a worker id beyond [`wire::MAX_WORKERS`],
/// is told why before the connection closes.
pub fn accept(stream: &mut TcpStream, max_frame: u32) -> Result<(Hello, FrameReader), WireError> {
    let peer = stream.peer_addr().map_or_else(|_| "?".to_owned(), |a| a.to_string());
    stream.set_nodelay(true).map_err(io_err(&peer))?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(io_err(&peer))?;
    if let Err(e) = PROTOCOL.read_preamble(stream, &peer) {
        if let WireError::Version { .. } = e {
            let mut buf = PROTOCOL.preamble().to_vec();
            wire::encode(&Message::Reject(e.to_string()), &mut buf);
            let _ = stream.write_all(&buf);
        }
        return Err(e);
    }
    PROTOCOL.write_preamble(stream).map_err(io_err(&peer))?;
    let mut reader = FrameReader::new(peer.clone(), max_frame);
    let hello = match reader.read_message(stream, &Limits::handshake()) {
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
                reject(stream, &e.to_string());
            }
            return Err(e);
        }
    };
    stream.set_read_timeout(None).map_err(io_err(&peer))?;
    Ok((hello, reader))
}

/// Tells the peer why its connection is refused (the connection closes when it is dropped).
pub fn reject(stream: &mut TcpStream, reason: &str) {
    let mut buf = Vec::new();
    wire::encode(&Message::Reject(reason.into()), &mut buf);
    let _ = stream.write_all(&buf);
}

/// Starts the thread that writes `rx`'s messages to `stream`.
pub fn spawn_sender(
    name: String,
    mut stream: TcpStream,
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
                let deadline = Instant::now() + flush_deadline;
                while buf.len() < (64 << 10) && !shutdown {
                    match rx.try_recv() {
                        Ok(m) => {
                            shutdown = matches!(m, Message::Shutdown);
                            wire::encode(&m, &mut buf);
                            count += 1;
                        }
                        Err(TryRecvError::Empty) if Instant::now() < deadline => {
                            std::thread::yield_now();
                        }
                        Err(_) => break,
                    }
                }
                if let Err(e) = stream.write_all(&buf) {
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
                    let _ = stream.flush();
                    return;
                }
            }
            let _ = stream.shutdown(std::net::Shutdown::Write);
        })
        .expect("spawn sender thread")
}

/// Starts the thread that reads frames from `stream` and hands each read's worth of messages
/// to `handle` (which returns false to stop). Every message is checked against `limits`, at
/// the epoch `epoch` returns when the read's messages are decoded; the first that is not, or
/// any undecodable frame, closes the connection (logged). `on_close` learns why the
/// connection ended (`None` for a clean close).
pub fn spawn_receiver(
    name: String,
    mut stream: TcpStream,
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
                            let _ = stream.shutdown(std::net::Shutdown::Both);
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
                match reader.fill(&mut stream) {
                    Ok(true) => {}
                    Ok(false) => break reader.end_of_stream().err(),
                    Err(e) => break Some(e),
                }
            };
            on_close(result);
        })
        .expect("spawn receiver thread")
}
