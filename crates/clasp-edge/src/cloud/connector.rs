//! The cut streams arriving in the cloud: one receiving thread per device puts its `Data`
//! frames on the queue of their connector, and each connector is one input of the runtime.

use super::admission::Joined;
use super::report::LinkReport;
use crate::protocol::{self, ToCloud, ToDevice};
use clasp_core::Batch;
use clasp_core::input::{InputRecord, LineSource, Next};
use clasp_core::sync::lock;
use clasp_wire::write_frame;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::io::{self, Write};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A frame waiting for the runtime.
pub(super) struct Frame {
    pub(super) origin_ns: u64,
    pub(super) records: Batch,
}

/// Reads one device's frames into the connector queues until its `End`.
pub(super) fn spawn_receiver(
    mut j: Joined,
    outs: Vec<Sender<Frame>>,
    link: Arc<Mutex<LinkReport>>,
    errors: Arc<Mutex<Vec<String>>>,
) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(format!("edge-from-{}", j.hello.device))
        .spawn(move || {
            if let Err(e) = receive(&mut j, &outs, &link) {
                lock(&errors).push(format!("device `{}`: {e}", j.hello.device));
            }
        })
        .expect("spawn an edge receiver")
}

fn receive(j: &mut Joined, outs: &[Sender<Frame>], link: &Mutex<LinkReport>) -> Result<(), String> {
    let limits = protocol::Limits { connectors: outs.len() };
    let mut buf = Vec::new();
    let mut counts = vec![0u64; outs.len()];
    loop {
        let before = j.reader.consumed();
        let msg = j
            .reader
            .read_message::<ToCloud, _>(&mut &j.stream, &limits)
            .map_err(|e| e.to_string())?
            .ok_or("disconnected before the end of its data")?;
        lock(link).bytes += j.reader.consumed() - before;
        match msg {
            ToCloud::Data { connector, origin_ns, records } => {
                // Checked against the connectors at decode.
                let c = connector as usize;
                let out = &outs[c];
                counts[c] += records.len() as u64;
                {
                    let mut l = lock(link);
                    l.frames += 1;
                    l.records[c].1 += records.len() as u64;
                }
                out.send(Frame { origin_ns, records }).map_err(|_| "the cloud stopped")?;
            }
            ToCloud::End { sent } => {
                if sent != counts {
                    return Err(format!(
                        "sent {sent:?} records per connector but {counts:?} arrived"
                    ));
                }
                let mut s = &j.stream;
                write_frame(&mut s, &ToDevice::Ack { received: counts }, &mut buf)
                    .map_err(|e| e.to_string())?;
                let _ = s.flush();
                return Ok(());
            }
            ToCloud::Hello(_) => return Err("a second hello".into()),
        }
    }
}

/// One connector's records as an input of the runtime: keyed, stamped with their origin, and
/// ending when every device sending the connector has ended.
pub struct ConnectorInput {
    rx: Receiver<Frame>,
    current: Option<Frame>,
    next: usize,
    idle: Duration,
}

impl std::fmt::Debug for ConnectorInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectorInput").field("queued", &self.rx.len()).finish_non_exhaustive()
    }
}

impl ConnectorInput {
    pub(super) fn new(rx: Receiver<Frame>, idle: Duration) -> Self {
        Self { rx, current: None, next: 0, idle }
    }
}

impl LineSource for ConnectorInput {
    fn next_line(&mut self, line: &mut Vec<u8>) -> io::Result<bool> {
        let mut rec = InputRecord::default();
        loop {
            match self.next_record(&mut rec)? {
                Next::Record => {
                    std::mem::swap(line, &mut rec.value);
                    return Ok(true);
                }
                Next::Idle => {}
                Next::End => return Ok(false),
            }
        }
    }

    fn next_record(&mut self, rec: &mut InputRecord) -> io::Result<Next> {
        loop {
            if let Some(f) = &self.current {
                if self.next < f.records.len() {
                    let r = f.records.get(self.next);
                    rec.key.clear();
                    rec.key.extend_from_slice(r.key);
                    rec.value.clear();
                    rec.value.extend_from_slice(r.value);
                    rec.keyed = true;
                    rec.origin_ns = Some(f.origin_ns);
                    self.next += 1;
                    return Ok(Next::Record);
                }
                self.current = None;
            }
            match self.rx.recv_timeout(self.idle) {
                Ok(f) => {
                    self.current = Some(f);
                    self.next = 0;
                }
                Err(RecvTimeoutError::Timeout) => return Ok(Next::Idle),
                Err(RecvTimeoutError::Disconnected) => return Ok(Next::End),
            }
        }
    }
}
