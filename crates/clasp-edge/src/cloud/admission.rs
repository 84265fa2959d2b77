//! Admitting devices: the edge ingress accepts connections, checks each device's preamble and
//! hello against the part the cloud computed for it, and refuses strangers and mismatches.
//! It keeps accepting for the whole run: a device that connects again after its link broke
//! is admitted the same way and handed to its receiver ([`Admitted::rejoins`]).

use super::Cloud;
use crate::device;
use crate::error::EdgeError;
use crate::protocol::{self, CLOUD_IDENTITY, Hello, ToCloud, ToDevice};
use clasp_wire::conn::Timed;
use clasp_wire::frame::PREAMBLE_LEN;
use clasp_wire::{
    Conn, Deadline, Established, FrameReader, HANDSHAKE_DEADLINE, HandshakeGate, Opening, Security,
    auth, write_frame,
};
use crossbeam_channel::{Receiver, Sender};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// A device that joined: its connection, what it said, and the reader of its frames.
pub(super) struct Joined {
    pub(super) index: usize,
    pub(super) hello: Hello,
    pub(super) stream: Conn,
    pub(super) reader: FrameReader,
    pub(super) bytes: u64,
}

/// Every device admitted, and the ingress still accepting.
pub(super) struct Admitted {
    /// The first connection of each device, in file order.
    pub(super) joined: Vec<Joined>,
    /// Per device, its later connections.
    pub(super) rejoins: Vec<Receiver<Joined>>,
    /// Per device, the connection its receiver serves: closed when the device connects
    /// again, so a receiver still reading a link the device gave up on lets it go.
    pub(super) live: Vec<Live>,
    /// The acceptor: told to stop when the run ends.
    pub(super) acceptor: Acceptor,
}

/// The connection a device's receiver serves.
pub(super) type Live = Arc<std::sync::Mutex<Option<Conn>>>;

/// The ingress's accepting thread; it stops when this is dropped.
pub(super) struct Acceptor {
    accepting: Arc<AtomicBool>,
    addr: std::net::SocketAddr,
}

impl Acceptor {
    /// Stops accepting.
    fn stop(&self) {
        if self.accepting.swap(false, Ordering::AcqRel) {
            // Wake the acceptor so it sees it should stop.
            let _ = TcpStream::connect(self.addr);
        }
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Cloud {
    /// The hello each device of the plan must send, in device order.
    pub(super) fn expected_hellos(&self) -> Result<Vec<Hello>, EdgeError> {
        self.devices
            .devices
            .iter()
            .map(|d| {
                device::plan(&self.p, &self.devices, &self.model, self.opts.mode, &d.id)
                    .map(|x| x.hello)
            })
            .collect()
    }

    /// Admits every device of the devices file, refusing strangers and mismatched parts;
    /// welcomes each (holding none of its items yet).
    pub(super) fn admit(&self) -> Result<Admitted, EdgeError> {
        let (tx, rx) = crossbeam_channel::unbounded::<Result<Joined, String>>();
        let listen_error = |error| EdgeError::Listen { addr: self.addr.to_string(), error };
        let listener = self
            .listener
            .as_ref()
            .ok_or_else(|| listen_error(std::io::Error::other("no listener: the uplink is Kafka")))?
            .try_clone()
            .map_err(listen_error)?;
        let expected = self.expected_hellos()?;
        let expected = Arc::new(expected);
        let accepting = Arc::new(AtomicBool::new(true));
        let acceptor = Acceptor { accepting: accepting.clone(), addr: self.addr };
        let security = self.opts.security.clone();
        spawn_acceptor(listener, expected.clone(), security, tx, accepting);
        let mut joined: Vec<Option<Joined>> = (0..expected.len()).map(|_| None).collect();
        let deadline = Instant::now() + self.opts.join_timeout;
        while joined.iter().any(Option::is_none) {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(Ok(j)) => {
                    let i = j.index;
                    let welcome = ToDevice::Welcome { held: vec![0; j.hello.connectors.len()] };
                    let mut s = &j.stream;
                    if write_frame(&mut s, &welcome, &mut Vec::new()).is_ok() {
                        // A device connecting again before the start replaces its first link.
                        if let Some(old) = joined[i].replace(j) {
                            old.stream.close();
                        }
                    }
                }
                Ok(Err(why)) => tracing::warn!("edge ingress: refused a connection: {why}"),
                Err(_) => {
                    acceptor.stop();
                    let missing: Vec<&str> = expected
                        .iter()
                        .zip(&joined)
                        .filter(|(_, j)| j.is_none())
                        .map(|(h, _)| h.device.as_str())
                        .collect();
                    return Err(EdgeError::JoinTimeout {
                        seconds: self.opts.join_timeout.as_secs(),
                        missing: missing.join(", "),
                    });
                }
            }
        }
        let joined: Vec<Joined> = joined.into_iter().flatten().collect();
        let live: Vec<Live> = joined
            .iter()
            .map(|j| Arc::new(std::sync::Mutex::new(j.stream.try_clone().ok())))
            .collect();
        let (senders, rejoins): (Vec<Sender<Joined>>, Vec<Receiver<Joined>>) =
            (0..expected.len()).map(|_| crossbeam_channel::unbounded()).unzip();
        let shared = live.clone();
        std::thread::Builder::new()
            .name("edge-rejoin".into())
            .spawn(move || {
                for j in rx {
                    match j {
                        Ok(j) => {
                            if let Some(old) = clasp_core::sync::lock(&shared[j.index]).take() {
                                old.close();
                            }
                            let _ = senders[j.index].send(j);
                        }
                        Err(why) => tracing::warn!("edge ingress: refused a connection: {why}"),
                    }
                }
            })
            .expect("spawn the edge rejoin thread");
        Ok(Admitted { joined, rejoins, live, acceptor })
    }
}

/// Refuses a device with `reason`.
fn refuse(stream: &Conn, reason: &str) {
    tracing::warn!("edge ingress: refused a device: {reason}");
    let mut s = stream;
    let _ = write_frame(&mut s, &ToDevice::Reject(reason.to_owned()), &mut Vec::new());
}

/// Accepts connections until told to stop; each is handshaken on its own thread, with at
/// most [`clasp_wire::conn::MAX_PENDING_HANDSHAKES`] under way (more are closed at once).
fn spawn_acceptor(
    listener: TcpListener,
    expected: Arc<Vec<Hello>>,
    security: Security,
    tx: Sender<Result<Joined, String>>,
    accepting: Arc<AtomicBool>,
) {
    let security = Arc::new(security);
    let gate = HandshakeGate::default();
    std::thread::Builder::new()
        .name("edge-accept".into())
        .spawn(move || {
            for stream in listener.incoming() {
                if !accepting.load(Ordering::Acquire) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let Some(permit) = gate.try_enter() else {
                    let from = stream.peer_addr().map_or_else(|_| "?".into(), |a| a.to_string());
                    let _ = tx.send(Err(format!(
                        "{from}: {} connections are handshaking; closed this one",
                        gate.max()
                    )));
                    continue;
                };
                let (expected, tx, security) = (expected.clone(), tx.clone(), security.clone());
                std::thread::spawn(move || {
                    let _ = tx.send(handshake(stream, &expected, &security));
                    drop(permit);
                });
            }
        })
        .expect("spawn the edge acceptor");
}

/// Runs a device's handshake — its proof of the cluster secret and of a device identity, then
/// its hello, which must name the device it proved to be — and checks its part against the
/// cloud's, all within [`HANDSHAKE_DEADLINE`].
fn handshake(tcp: TcpStream, expected: &[Hello], security: &Security) -> Result<Joined, String> {
    let opening = Opening {
        security,
        protocol: &protocol::PROTOCOL,
        identity: CLOUD_IDENTITY,
        max_frame: protocol::MAX_FRAME,
        deadline: Deadline::after(HANDSHAKE_DEADLINE),
    };
    let admit = |id: &str| match id.strip_prefix("device:") {
        Some(_) => Ok(()),
        None => Err(format!("`{}` is not a device identity", auth::printable(id))),
    };
    let link = clasp_wire::link::answer(tcp, &opening, admit).map_err(|e| e.to_string())?;
    let Established { conn: stream, mut reader, identity, deadline } = link;
    let peer = reader.peer().to_owned();
    let handshake_bytes = reader.consumed();
    // No connector exists before the hello.
    let hello = match reader
        .read_message(&mut Timed::new(&stream, deadline), &protocol::Limits::default())
    {
        Ok(Some(ToCloud::Hello(h))) => h,
        Ok(_) => return Err(format!("{peer}: the first frame is not a hello")),
        Err(e) => return Err(e.to_string()),
    };
    if identity != protocol::device_identity(&hello.device) {
        let reason = format!(
            "the hello names device `{}`, the connection proved `{}`",
            auth::printable(&hello.device),
            auth::printable(&identity)
        );
        refuse(&stream, &reason);
        return Err(format!("{peer}: {reason}"));
    }
    if let Err(reason) = check_hello(&hello, expected) {
        refuse(&stream, &reason);
        return Err(format!("{peer}: {reason}"));
    }
    stream.set_timeouts(None).map_err(|e| format!("{peer}: {e}"))?;
    let index = expected.iter().position(|h| h.device == hello.device).expect("checked");
    let bytes = PREAMBLE_LEN as u64 + reader.consumed() - handshake_bytes;
    Ok(Joined { index, hello, stream, reader, bytes })
}

/// Why a device's hello does not match the part the cloud expects of it, if it does not.
fn check_hello(hello: &Hello, expected: &[Hello]) -> Result<(), String> {
    let Some(want) = expected.iter().find(|h| h.device == hello.device) else {
        let ids: Vec<&str> = expected.iter().map(|h| h.device.as_str()).collect();
        return Err(format!(
            "unknown device `{}`; the cloud's devices file declares: {}",
            hello.device,
            ids.join(", ")
        ));
    };
    if hello.pipeline != want.pipeline {
        return Err(format!(
            "device `{}` runs pipeline `{}`, the cloud runs `{}`",
            hello.device, hello.pipeline, want.pipeline
        ));
    }
    if hello.mode != want.mode {
        return Err(format!(
            "device `{}` runs in mode `{}`, the cloud in `{}`: start both with the same --all-cloud setting",
            hello.device, hello.mode, want.mode
        ));
    }
    if hello.operators != want.operators || hello.connectors != want.connectors {
        return Err(format!(
            "device `{}` computed another part (operators {:?}, connectors {:?}) than the cloud (operators {:?}, connectors {:?}): give devices and cloud the same pipeline and devices file",
            hello.device, hello.operators, hello.connectors, want.operators, want.connectors
        ));
    }
    Ok(())
}
