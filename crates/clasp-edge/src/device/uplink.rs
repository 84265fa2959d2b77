//! The device's link to the cloud: every cut stream's items numbered and kept until the
//! cloud acknowledges them, and resent when the device connects again after the link broke.
//!
//! The items not yet acknowledged are bounded in bytes ([`LinkOptions::resend_buffer`]):
//! when they fill it the device waits for acknowledgements before it reads on, so a slow or
//! absent cloud holds the device back and nothing is dropped. A lost connection (a failed
//! write, the reader seeing the end or an error) makes the device dial again, for up to
//! [`LinkOptions::reconnect_timeout`]; the cloud's `Welcome` says how many items of each
//! connector it holds, and the device resends the rest in order.

use crate::error::EdgeError;
use crate::protocol::{self, Hello, Item, Outgoing, ToDevice};
use crate::shaper::{LinkShape, LinkWriter};
use clasp_core::Batch;
use clasp_wire::frame::PREAMBLE_LEN;
use clasp_wire::{
    Conn, Deadline, FrameReader, HANDSHAKE_DEADLINE, Opening, Security, WireError, write_frame,
};
use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};
use std::collections::VecDeque;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// How a device reaches the cloud.
#[derive(Clone, Debug)]
pub(super) struct LinkOptions {
    pub(super) join: String,
    pub(super) security: Security,
    pub(super) shape: LinkShape,
    pub(super) connect_timeout: Duration,
    pub(super) reconnect_timeout: Duration,
    pub(super) resend_buffer: usize,
}

/// What the link did, for the device's report.
#[derive(Clone, Debug, Default)]
pub(super) struct LinkCounts {
    /// Records sent per connector (each once, however often resent).
    pub(super) sent: Vec<u64>,
    /// Bytes written: preambles and frames, resent ones included.
    pub(super) bytes: u64,
    /// Data frames sent the first time.
    pub(super) frames: u64,
    /// Connections made again after the link broke.
    pub(super) reconnects: u64,
    /// Data frames sent again after a reconnect.
    pub(super) resent: u64,
}

/// What the cloud said, or why the link is gone.
type Incoming = Result<ToDevice, Lost>;

/// The link broke (the cloud may come back) or the cloud refused us (it will not).
#[derive(Debug)]
enum Lost {
    Broken(String),
    Refused(String),
}

/// One connection: the (shaped) writer and the thread reading the cloud's frames.
struct Connection {
    writer: LinkWriter,
    conn: Conn,
    incoming: Receiver<Incoming>,
}

/// Items of one connector not yet acknowledged: `(seq, encoded frame)`.
type Unacked = VecDeque<(u64, Vec<u8>)>;

/// The device's link to the cloud.
pub(super) struct Uplink {
    opts: LinkOptions,
    hello: Hello,
    peer: String,
    link: Option<Connection>,
    unacked: Vec<Unacked>,
    unacked_bytes: usize,
    next_seq: Vec<u64>,
    counts: LinkCounts,
    frame: Vec<u8>,
}

impl Uplink {
    /// Connects (retrying until the connect timeout), is welcomed and waits for the start.
    pub(super) fn connect(opts: LinkOptions, hello: &Hello) -> Result<Self, EdgeError> {
        let n = hello.connectors.len();
        let mut link = Self {
            peer: format!("the cloud at {}", opts.join),
            opts,
            hello: hello.clone(),
            link: None,
            unacked: vec![VecDeque::new(); n],
            unacked_bytes: 0,
            next_seq: vec![0; n],
            counts: LinkCounts { sent: vec![0; n], ..LinkCounts::default() },
            frame: Vec::new(),
        };
        let timeout = link.opts.connect_timeout;
        let held = link.dial(timeout)?;
        if held.iter().any(|&h| h != 0) {
            return Err(link.protocol(&format!("a first welcome holding items {held:?}")));
        }
        Ok(link)
    }

    fn protocol(&self, problem: &str) -> EdgeError {
        EdgeError::Protocol { peer: self.peer.clone(), problem: problem.to_owned() }
    }

    fn refused(&self, reason: String) -> EdgeError {
        EdgeError::Refused {
            addr: self.opts.join.clone(),
            device: self.hello.device.clone(),
            reason,
        }
    }

    /// Opens a connection (retrying until `timeout`), says hello and waits for the welcome
    /// and the start; returns the items the cloud holds per connector.
    fn dial(&mut self, timeout: Duration) -> Result<Vec<u64>, EdgeError> {
        let tcp = connect_retrying(&self.opts.join, timeout)?;
        let me = protocol::device_identity(&self.hello.device);
        let opening = Opening {
            security: &self.opts.security,
            protocol: &protocol::PROTOCOL,
            identity: &me,
            max_frame: protocol::MAX_FRAME,
            deadline: Deadline::after(HANDSHAKE_DEADLINE),
        };
        let expect = |id: &str| {
            if id == protocol::CLOUD_IDENTITY {
                Ok(())
            } else {
                Err(format!("expected the cloud, reached `{}`", clasp_wire::auth::printable(id)))
            }
        };
        let established = clasp_wire::link::dial(tcp, &self.opts.join, &opening, expect).map_err(
            |e| match e {
                WireError::Rejected { reason, .. } => self.refused(reason),
                other => self.protocol(&other.to_string()),
            },
        )?;
        let peer = self.peer.clone();
        let io_err =
            |e: std::io::Error| EdgeError::Protocol { peer: peer.clone(), problem: e.to_string() };
        let conn = established.conn;
        let mut hello = Vec::new();
        clasp_wire::encode(&Outgoing::Hello(&self.hello), &mut hello);
        (&conn).write_all(&hello).map_err(io_err)?;
        conn.set_timeouts(None).map_err(io_err)?;
        self.counts.bytes += (PREAMBLE_LEN + hello.len()) as u64;
        let mut reader = established.reader;
        reader.set_max_frame(protocol::MAX_FRAME);
        let incoming = spawn_reader(conn.try_clone().map_err(io_err)?, reader, self.next_seq.len());
        let writer = LinkWriter::new(conn.try_clone().map_err(io_err)?, self.opts.shape);
        let mut connection = Connection { writer, conn, incoming };
        let held = match self.expect(&mut connection)? {
            ToDevice::Welcome { held } => held,
            other => return Err(self.protocol(&format!("expected Welcome, got {other:?}"))),
        };
        match self.expect(&mut connection)? {
            ToDevice::Start => {}
            other => return Err(self.protocol(&format!("expected Start, got {other:?}"))),
        }
        self.link = Some(connection);
        Ok(held)
    }

    /// The next message on a connection being opened.
    fn expect(&self, c: &mut Connection) -> Result<ToDevice, EdgeError> {
        match c.incoming.recv() {
            Ok(Ok(m)) => Ok(m),
            Ok(Err(Lost::Refused(reason))) => Err(self.refused(reason)),
            Ok(Err(Lost::Broken(problem))) => Err(self.protocol(&problem)),
            Err(_) => Err(self.protocol("the connection closed")),
        }
    }

    /// Connects again after the link broke (`why`), forgets what the cloud holds and resends
    /// the rest; retries until the reconnect timeout.
    fn reconnect(&mut self, why: &str) -> Result<(), EdgeError> {
        let deadline = Instant::now() + self.opts.reconnect_timeout;
        let mut why = why.to_owned();
        loop {
            if let Some(old) = self.link.take() {
                old.conn.close();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(self.protocol(&format!(
                    "the link broke ({why}) and the cloud could not be reached again within {} s",
                    self.opts.reconnect_timeout.as_secs()
                )));
            }
            tracing::warn!(
                "device `{}`: link to the cloud lost ({why}); reconnecting",
                self.hello.device
            );
            let held = match self.dial(left) {
                Ok(held) => held,
                Err(e @ EdgeError::Refused { .. }) => return Err(e),
                Err(e) => {
                    why = e.to_string();
                    std::thread::sleep(Duration::from_millis(50).min(left));
                    continue;
                }
            };
            self.counts.reconnects += 1;
            for (c, &h) in held.iter().enumerate() {
                self.forget(c, h)?;
            }
            match self.resend() {
                Ok(()) => return Ok(()),
                Err(e) => why = e,
            }
        }
    }

    /// Writes every item not yet acknowledged again, in order per connector.
    fn resend(&mut self) -> Result<(), String> {
        let Some(link) = self.link.as_mut() else { return Err("no connection".into()) };
        let mut frames = 0;
        let mut bytes = 0;
        for queue in &self.unacked {
            for (_, frame) in queue {
                link.writer.write_all(frame).map_err(|e| e.to_string())?;
                frames += 1;
                bytes += frame.len() as u64;
            }
        }
        link.writer.flush().map_err(|e| e.to_string())?;
        self.counts.resent += frames;
        self.counts.bytes += bytes;
        Ok(())
    }

    /// The cloud holds the first `held` items of connector `c`: they need not be kept.
    fn forget(&mut self, c: usize, held: u64) -> Result<(), EdgeError> {
        if held > self.next_seq[c] {
            return Err(self.protocol(&format!(
                "the cloud says it holds {held} items of connector {c}, {} were sent",
                self.next_seq[c]
            )));
        }
        let queue = &mut self.unacked[c];
        while queue.front().is_some_and(|(seq, _)| *seq < held) {
            if let Some((_, frame)) = queue.pop_front() {
                self.unacked_bytes -= frame.len();
            }
        }
        Ok(())
    }

    /// Handles one message from the cloud while data flows.
    fn handle(&mut self, m: Incoming) -> Result<Option<Vec<u64>>, EdgeError> {
        match m {
            Ok(ToDevice::Ack { connector, held }) => {
                self.forget(usize::from(connector), held)?;
                Ok(None)
            }
            Ok(ToDevice::Done { received }) => Ok(Some(received)),
            Ok(other) => Err(self.protocol(&format!("unexpected {other:?}"))),
            Err(Lost::Refused(reason)) => Err(self.refused(reason)),
            Err(Lost::Broken(why)) => {
                self.reconnect(&why)?;
                Ok(None)
            }
        }
    }

    /// Takes in the acknowledgements that arrived, without waiting.
    fn poll(&mut self) -> Result<(), EdgeError> {
        loop {
            let Some(link) = &self.link else { return Ok(()) };
            match link.incoming.try_recv() {
                Ok(m) => {
                    if let Some(received) = self.handle(m)? {
                        return Err(self.protocol(&format!("Done {received:?} before End")));
                    }
                }
                Err(TryRecvError::Empty) => return Ok(()),
                Err(TryRecvError::Disconnected) => self.reconnect("the connection closed")?,
            }
        }
    }

    /// Waits for one message from the cloud (an acknowledgement, or `Done`).
    fn wait(&mut self) -> Result<Option<Vec<u64>>, EdgeError> {
        let Some(link) = &self.link else {
            self.reconnect("no connection")?;
            return Ok(None);
        };
        match link.incoming.recv_timeout(Duration::from_secs(1)) {
            Ok(m) => self.handle(m),
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => {
                self.reconnect("the connection closed")?;
                Ok(None)
            }
        }
    }

    /// Sends one item of connector `c`: `records`, with the connector's `watermark` after
    /// them. Waits first while the items not yet acknowledged fill the resend buffer.
    pub(super) fn data(
        &mut self,
        c: usize,
        origin_ns: u64,
        watermark: Option<u64>,
        records: &Batch,
    ) -> Result<(), EdgeError> {
        self.poll()?;
        let seq = self.next_seq[c];
        let connector = u16::try_from(c).map_err(|_| self.protocol("over 65,536 connectors"))?;
        let item = Item { seq, origin_ns, watermark, records };
        let mut frame = Vec::new();
        clasp_wire::encode(&Outgoing::Data { connector, item }, &mut frame);
        // One item larger than the buffer still goes, alone.
        while self.unacked_bytes > 0 && self.unacked_bytes + frame.len() > self.opts.resend_buffer {
            if let Some(received) = self.wait()? {
                return Err(self.protocol(&format!("Done {received:?} before End")));
            }
        }
        self.next_seq[c] += 1;
        self.counts.sent[c] += records.len() as u64;
        self.counts.frames += 1;
        self.counts.bytes += frame.len() as u64;
        let written = match self.link.as_mut() {
            Some(link) => link.writer.write_all(&frame).map_err(|e| e.to_string()),
            None => Err("no connection".into()),
        };
        self.unacked_bytes += frame.len();
        self.unacked[c].push_back((seq, frame));
        match written {
            Ok(()) => Ok(()),
            // The reconnect resends it with the rest.
            Err(why) => self.reconnect(&format!("sending: {why}")),
        }
    }

    /// Hands what was written to the link now rather than when a buffer fills.
    pub(super) fn flush(&mut self) -> Result<(), EdgeError> {
        let flushed = match self.link.as_mut() {
            Some(link) => link.writer.flush().map_err(|e| e.to_string()),
            None => Err("no connection".into()),
        };
        match flushed {
            Ok(()) => Ok(()),
            Err(why) => self.reconnect(&format!("sending: {why}")),
        }
    }

    /// Sends `End`, waits for the cloud's `Done` (connecting again as often as the link
    /// breaks), says `Bye` and closes; returns what the link did.
    pub(super) fn finish(mut self) -> Result<LinkCounts, EdgeError> {
        let sent = self.counts.sent.clone();
        let mut end = Vec::new();
        clasp_wire::encode(&Outgoing::End { sent: &sent }, &mut end);
        let mut reconnects = self.counts.reconnects;
        self.send_end(&end)?;
        let received = loop {
            if self.counts.reconnects != reconnects {
                // A new connection: the cloud has what was resent, End follows again.
                reconnects = self.counts.reconnects;
                self.send_end(&end)?;
            }
            if let Some(received) = self.wait()? {
                break received;
            }
        };
        if received != sent {
            return Err(self.protocol(&format!(
                "the cloud received {received:?} records per connector, {sent:?} were sent"
            )));
        }
        if let Some(mut link) = self.link.take() {
            // The data is in; a link lost now loses nothing.
            let _ = write_frame(&mut link.writer, &Outgoing::Bye, &mut self.frame);
            let _ = link.writer.finish();
            link.conn.finish();
        }
        Ok(std::mem::take(&mut self.counts))
    }

    fn send_end(&mut self, end: &[u8]) -> Result<(), EdgeError> {
        let written = match self.link.as_mut() {
            Some(link) => link
                .writer
                .write_all(end)
                .and_then(|()| link.writer.flush())
                .map_err(|e| e.to_string()),
            None => Err("no connection".into()),
        };
        self.counts.bytes += end.len() as u64;
        match written {
            Ok(()) => Ok(()),
            Err(why) => self.reconnect(&format!("sending End: {why}")),
        }
    }
}

impl Drop for Uplink {
    /// Closes the connection, which also ends its reader thread's wait.
    fn drop(&mut self) {
        if let Some(link) = &self.link {
            link.conn.close();
        }
    }
}

/// Reads the cloud's frames on a thread of its own until the connection ends.
fn spawn_reader(conn: Conn, mut reader: FrameReader, connectors: usize) -> Receiver<Incoming> {
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::Builder::new()
        .name("edge-uplink-reader".into())
        .spawn(move || {
            let limits = protocol::Limits { connectors };
            loop {
                let m = match reader.read_message::<ToDevice, _>(&mut &conn, &limits) {
                    Ok(Some(ToDevice::Reject(reason))) => Err(Lost::Refused(reason)),
                    Ok(Some(m)) => Ok(m),
                    Ok(None) => Err(Lost::Broken("the cloud closed the connection".into())),
                    Err(e) => Err(Lost::Broken(e.to_string())),
                };
                let last = m.is_err();
                if tx.send(m).is_err() || last {
                    return;
                }
            }
        })
        .expect("spawn the uplink reader");
    rx
}

/// Connects to `addr`, retrying every 100 ms until `timeout`.
fn connect_retrying(addr: &str, timeout: Duration) -> Result<TcpStream, EdgeError> {
    let deadline = Instant::now() + timeout;
    loop {
        match TcpStream::connect(addr) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() >= deadline => {
                return Err(EdgeError::Unreachable { addr: addr.to_owned(), error: e.to_string() });
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}
