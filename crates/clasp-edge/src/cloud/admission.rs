//! Admitting devices: the edge ingress accepts connections, checks each device's preamble and
//! hello against the part the cloud computed for it, and refuses strangers and mismatches.

use super::Cloud;
use crate::device;
use crate::error::EdgeError;
use crate::protocol::{self, Hello, ToCloud, ToDevice};
use clasp_wire::frame::PREAMBLE_LEN;
use clasp_wire::{FrameReader, write_frame};
use crossbeam_channel::Sender;
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A device that joined: its connection, what it said, and the reader of its frames.
pub(super) struct Joined {
    pub(super) index: usize,
    pub(super) hello: Hello,
    pub(super) stream: TcpStream,
    pub(super) reader: FrameReader,
    pub(super) bytes: u64,
}

impl Cloud {
    /// Admits every device of the devices file, refusing strangers and mismatched parts.
    pub(super) fn admit(&self) -> Result<Vec<Joined>, EdgeError> {
        let (tx, rx) = crossbeam_channel::unbounded::<Result<Joined, String>>();
        let listener = self
            .listener
            .try_clone()
            .map_err(|error| EdgeError::Listen { addr: self.addr.to_string(), error })?;
        let expected: Vec<Hello> = self
            .devices
            .devices
            .iter()
            .map(|d| {
                device::plan(&self.p, &self.devices, &self.model, self.opts.mode, &d.id)
                    .map(|x| x.hello)
            })
            .collect::<Result<_, _>>()?;
        let expected = Arc::new(expected);
        let accepting = Arc::new(AtomicBool::new(true));
        spawn_acceptor(listener, expected.clone(), tx, accepting.clone());
        let mut joined: Vec<Option<Joined>> = (0..expected.len()).map(|_| None).collect();
        let deadline = Instant::now() + self.opts.join_timeout;
        while joined.iter().any(Option::is_none) {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(Ok(j)) => {
                    let i = j.index;
                    if joined[i].is_some() {
                        refuse(
                            &j.stream,
                            &format!("device `{}` has already joined", j.hello.device),
                        );
                        continue;
                    }
                    let mut s = &j.stream;
                    if write_frame(&mut s, &ToDevice::Welcome, &mut Vec::new()).is_ok() {
                        joined[i] = Some(j);
                    }
                }
                Ok(Err(why)) => tracing::warn!("edge ingress: refused a connection: {why}"),
                Err(_) => {
                    accepting.store(false, Ordering::Release);
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
        accepting.store(false, Ordering::Release);
        // Wake the acceptor so it sees it should stop.
        let _ = TcpStream::connect(self.addr);
        Ok(joined.into_iter().flatten().collect())
    }
}

/// Refuses a device with `reason`.
fn refuse(stream: &TcpStream, reason: &str) {
    tracing::warn!("edge ingress: refused a device: {reason}");
    let mut s = stream;
    let _ = write_frame(&mut s, &ToDevice::Reject(reason.to_owned()), &mut Vec::new());
}

/// Accepts connections until told to stop; each is handshaken on its own thread.
fn spawn_acceptor(
    listener: TcpListener,
    expected: Arc<Vec<Hello>>,
    tx: Sender<Result<Joined, String>>,
    accepting: Arc<AtomicBool>,
) {
    std::thread::Builder::new()
        .name("edge-accept".into())
        .spawn(move || {
            for stream in listener.incoming() {
                if !accepting.load(Ordering::Acquire) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let (expected, tx) = (expected.clone(), tx.clone());
                std::thread::spawn(move || {
                    let _ = tx.send(handshake(stream, &expected));
                });
            }
        })
        .expect("spawn the edge acceptor");
}

/// Reads a device's preamble and hello and checks its part against the cloud's.
fn handshake(stream: TcpStream, expected: &[Hello]) -> Result<Joined, String> {
    let peer = stream.peer_addr().map_or_else(|_| "?".into(), |a| a.to_string());
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut r = &stream;
    protocol::PROTOCOL.read_preamble(&mut r, &peer).map_err(|e| e.to_string())?;
    let mut reader = FrameReader::new(peer.clone(), protocol::MAX_FRAME);
    // No connector exists before the hello.
    let hello = match reader.read_message(&mut r, &protocol::Limits::default()) {
        Ok(Some(ToCloud::Hello(h))) => h,
        Ok(_) => return Err(format!("{peer}: the first frame is not a hello")),
        Err(e) => return Err(e.to_string()),
    };
    if let Err(reason) = check_hello(&hello, expected) {
        refuse(&stream, &reason);
        return Err(format!("{peer}: {reason}"));
    }
    let _ = stream.set_read_timeout(None);
    let index = expected.iter().position(|h| h.device == hello.device).expect("checked");
    let bytes = PREAMBLE_LEN as u64 + reader.consumed();
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
