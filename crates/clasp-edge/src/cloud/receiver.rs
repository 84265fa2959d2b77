//! One thread per device reads its items into the connector queues, acknowledges them, and
//! serves the device across connections: when the link breaks it waits for the device to
//! connect again, tells it how many items of each connector it holds, and discards the items
//! the device resends that it already has.

use super::admission::{Joined, Live};
use super::connector::Frame;
use super::report::LinkReport;
use crate::protocol::{self, Fresh, Received, ToCloud, ToDevice};
use clasp_core::sync::lock;
use clasp_wire::{WireError, write_frame};
use crossbeam_channel::{Receiver, Sender};
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// What a device's receiver needs besides its first connection.
pub(super) struct Receiving {
    /// The device's later connections, admitted like the first.
    pub(super) rejoins: Receiver<Joined>,
    /// The connection being served, for the ingress to close when the device connects again.
    pub(super) live: Live,
    /// The queue of each of its connectors.
    pub(super) outs: Vec<Sender<Frame>>,
    /// Its link's counters.
    pub(super) link: Arc<Mutex<LinkReport>>,
    /// How long a device that lost its link has to connect again.
    pub(super) reconnect_timeout: Duration,
}

/// Reads one device's items until its `Bye`, across as many connections as it needs.
pub(super) fn spawn_receiver(
    j: Joined,
    r: Receiving,
    errors: Arc<Mutex<Vec<String>>>,
) -> JoinHandle<()> {
    let device = j.hello.device.clone();
    std::thread::Builder::new()
        .name(format!("edge-from-{device}"))
        .spawn(move || {
            if let Err(e) = Session::new(r).run(j) {
                lock(&errors).push(format!("device `{device}`: {e}"));
            }
        })
        .expect("spawn an edge receiver")
}

/// Why serving a connection stopped.
enum Stop {
    /// The device said `Bye`: its data is in and it got `Done`.
    Bye,
    /// The connection broke; the device may connect again.
    Lost(String),
    /// The device broke the protocol.
    Fatal(String),
}

/// What the cloud knows of one device across its connections.
struct Session {
    r: Receiving,
    received: Received,
    /// Records taken per connector.
    counts: Vec<u64>,
    /// The connector queues, until the device's `End`.
    outs: Option<Vec<Sender<Frame>>>,
    buf: Vec<u8>,
}

impl Session {
    fn new(r: Receiving) -> Self {
        let n = r.outs.len();
        let outs = Some(r.outs.clone());
        Self { r, received: Received::new(n), counts: vec![0; n], outs, buf: Vec::new() }
    }

    fn run(mut self, first: Joined) -> Result<(), String> {
        // Only the session holds the queues: they close at the device's End.
        self.r.outs.clear();
        let mut j = first;
        loop {
            let why = match self.serve(&mut j) {
                Stop::Bye => return Ok(()),
                Stop::Fatal(e) => return Err(e),
                Stop::Lost(why) => why,
            };
            j.stream.close();
            let device = j.hello.device.clone();
            let ended = self.outs.is_none();
            tracing::warn!("edge ingress: device `{device}` lost its link ({why}); waiting for it");
            let Ok(next) = self.r.rejoins.recv_timeout(self.r.reconnect_timeout) else {
                if ended {
                    // Its data is complete; only its goodbye is missing.
                    tracing::warn!("edge ingress: device `{device}` did not say goodbye");
                    return Ok(());
                }
                return Err(format!(
                    "lost its link ({why}) and did not connect again within {} s",
                    self.r.reconnect_timeout.as_secs()
                ));
            };
            j = next;
            // The newest link is the one the device uses.
            while let Ok(newer) = self.r.rejoins.try_recv() {
                j.stream.close();
                j = newer;
            }
            *lock(&self.r.live) = j.stream.try_clone().ok();
            lock(&self.r.link).reconnects += 1;
            let welcome = ToDevice::Welcome { held: self.received.held().to_vec() };
            if let Err(e) = self.send(&j, &welcome).and_then(|()| self.send(&j, &ToDevice::Start)) {
                tracing::warn!("edge ingress: welcoming device `{device}` back: {e}");
            }
        }
    }

    fn send(&mut self, j: &Joined, m: &ToDevice) -> Result<(), String> {
        let mut s = &j.stream;
        write_frame(&mut s, m, &mut self.buf).map_err(|e| e.to_string())?;
        s.flush().map_err(|e| e.to_string())
    }

    /// Reads one connection's frames until it breaks or the device says goodbye.
    fn serve(&mut self, j: &mut Joined) -> Stop {
        let limits = protocol::Limits { connectors: self.counts.len() };
        loop {
            let before = j.reader.consumed();
            let msg = match j.reader.read_message::<ToCloud, _>(&mut &j.stream, &limits) {
                Ok(Some(m)) => m,
                Ok(None) => return Stop::Lost("the connection closed".into()),
                Err(e @ (WireError::Io { .. } | WireError::Truncated { .. })) => {
                    return Stop::Lost(e.to_string());
                }
                Err(e) => return Stop::Fatal(e.to_string()),
            };
            lock(&self.r.link).bytes += j.reader.consumed() - before;
            let answer = match msg {
                ToCloud::Data { connector, item } => {
                    // Checked against the connectors at decode.
                    let c = usize::from(connector);
                    let fresh = match self.received.accept(c, item.seq) {
                        Ok(f) => f,
                        Err(e) => return Stop::Fatal(e.to_string()),
                    };
                    if fresh == Fresh::Duplicate {
                        lock(&self.r.link).duplicates += 1;
                    } else {
                        let Some(outs) = &self.outs else {
                            return Stop::Fatal("data after its End".into());
                        };
                        let n = item.records.len() as u64;
                        self.counts[c] += n;
                        {
                            let mut l = lock(&self.r.link);
                            l.frames += 1;
                            l.records[c].1 += n;
                        }
                        if outs[c].send(Frame::of(j.index, item)).is_err() {
                            return Stop::Fatal("the cloud stopped".into());
                        }
                    }
                    ToDevice::Ack { connector, held: self.received.held()[c] }
                }
                ToCloud::End { sent } => {
                    if sent != self.counts {
                        return Stop::Fatal(format!(
                            "sent {sent:?} records per connector but {:?} arrived",
                            self.counts
                        ));
                    }
                    // The device's streams are complete: their inputs may end.
                    self.outs = None;
                    ToDevice::Done { received: self.counts.clone() }
                }
                ToCloud::Bye if self.outs.is_none() => return Stop::Bye,
                ToCloud::Bye => return Stop::Fatal("said goodbye before its End".into()),
                ToCloud::Hello(_) => return Stop::Fatal("a second hello".into()),
            };
            if let Err(e) = self.send(j, &answer) {
                return Stop::Lost(e);
            }
        }
    }
}
