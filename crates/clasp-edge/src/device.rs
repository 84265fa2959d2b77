//! The edge runner: one device's part of the cut, on the device's raw data, with every cut
//! stream sent to the cloud's edge ingress over one TCP connection.
//!
//! The device replays its sources ([`crate::input`]) through its operators — one instance of
//! each, single-threaded, in the local driver — and every `flush` interval (or 4,096 records)
//! sends what reached each connector as one `Data` frame, stamped with the read time of the
//! oldest raw record behind it. At the end it sends `End` with its per-connector counts and
//! waits for the cloud's `Ack`.

use crate::cut::{self, Mode};
use crate::engine::Engine;
use crate::error::EdgeError;
use crate::input::{self, InputSpec, Replay, Share};
use crate::protocol::{self, Hello, Outgoing, ToDevice};
use crate::shaper::{LinkShape, LinkWriter};
use crate::subgraph::{self, DeviceGraph};
use clasp_core::{Batch, Pipeline, Registry, SourceId};
use clasp_plan::edgecut::{CostModel, Devices};
use clasp_runtime::worker::executor::now_ns;
use clasp_wire::frame::PREAMBLE_LEN;
use clasp_wire::{
    Conn, Deadline, FrameReader, HANDSHAKE_DEADLINE, Opening, Security, WireError, write_frame,
};
use serde::Serialize;
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Records buffered on a device before it sends them even if the flush interval has not
/// passed.
const MAX_PENDING: usize = 4096;

/// How to run one device.
#[derive(Clone, Debug)]
pub struct DeviceOptions {
    /// The device's id in the devices file.
    pub device: String,
    /// The cloud's edge ingress (`HOST:PORT`).
    pub join: String,
    /// The cut or everything in the cloud (must match the cloud's).
    pub mode: Mode,
    /// Raw data per source the device holds.
    pub inputs: Vec<(String, InputSpec)>,
    /// Replay speed relative to the sources' rates (0: as fast as possible).
    pub speed: f64,
    /// Link emulation in user space.
    pub shape: LinkShape,
    /// Longest a record waits on the device before it is sent.
    pub flush: Duration,
    /// Records per request inside the device.
    pub batch_size: usize,
    /// How long to keep trying to reach the cloud.
    pub connect_timeout: Duration,
    /// Whether a file input is the whole source, of which the device keeps its share (as for a
    /// generated trace); otherwise a file is the device's own raw data.
    pub split_files: bool,
    /// The cluster secret and TLS the cloud expects.
    pub security: Security,
}

impl DeviceOptions {
    /// Options with the defaults: cut, unpaced, unshaped, 10 ms flush, 10 s to connect.
    pub fn new(device: &str, join: &str, inputs: Vec<(String, InputSpec)>) -> Self {
        Self {
            device: device.to_owned(),
            join: join.to_owned(),
            mode: Mode::Cut,
            inputs,
            speed: 0.0,
            shape: LinkShape::default(),
            flush: Duration::from_millis(10),
            batch_size: 64,
            connect_timeout: Duration::from_secs(10),
            split_files: false,
            security: Security::insecure(),
        }
    }
}

/// What a device did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct DeviceReport {
    /// The device.
    pub device: String,
    /// Operators it ran.
    pub operators: Vec<String>,
    /// Raw records it read.
    pub records_read: u64,
    /// Records sent per connector: `(name, count)`.
    pub sent: Vec<(String, u64)>,
    /// Bytes written to its link: preamble and frames.
    pub bytes: u64,
    /// Data frames sent.
    pub frames: u64,
    /// Records its operators rejected: `(operator, reason, count)`.
    pub rejected: Vec<(String, String, u64)>,
    /// Seconds from the cloud's start signal to the cloud's acknowledgement.
    pub seconds: f64,
}

/// Everything a device needs to know about its part.
#[derive(Debug)]
pub struct DevicePlan {
    /// The device's id.
    pub id: String,
    /// Its part as a sub-pipeline.
    pub graph: DeviceGraph,
    /// Its place among the holders of each of its sources: `(source, share)`.
    pub shares: Vec<(SourceId, Share)>,
    /// The hello that states its part.
    pub hello: Hello,
}

/// The part device `id` runs, or an error naming the devices there are.
pub fn plan(
    p: &Pipeline,
    devices: &Devices,
    model: &CostModel,
    mode: Mode,
    id: &str,
) -> Result<DevicePlan, EdgeError> {
    let Some(d) = devices.devices.iter().position(|d| d.id == id) else {
        return Err(EdgeError::UnknownDevice {
            file: devices.file.clone(),
            id: id.to_owned(),
            known: devices.devices.iter().map(|d| d.id.as_str()).collect::<Vec<_>>().join(", "),
        });
    };
    let cut = cut::plan(p, model, devices, mode);
    let part = cut.part_of(id).expect("edgecut places every device in a part");
    let graph = subgraph::device_graph(p, part)?;
    let shares = devices.devices[d]
        .sources
        .iter()
        .map(|&s| {
            let holders: Vec<usize> = (0..devices.devices.len())
                .filter(|&i| devices.devices[i].sources.contains(&s))
                .collect();
            let index = holders.iter().position(|&i| i == d).unwrap_or(0);
            (s, Share { index, of: holders.len() })
        })
        .collect();
    let hello = Hello {
        device: id.to_owned(),
        pipeline: p.name.clone(),
        mode: mode.as_str().to_owned(),
        operators: part.operators.iter().map(|o| p.operator(*o).name.clone()).collect(),
        connectors: graph.connectors.iter().map(|c| c.name.clone()).collect(),
    };
    Ok(DevicePlan { id: id.to_owned(), graph, shares, hello })
}

/// A device ready to connect: its part, its inputs opened, its operators instantiated.
pub struct Prepared {
    plan: DevicePlan,
    replays: Vec<Replay>,
    engine: Engine,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared").field("device", &self.plan.id).finish_non_exhaustive()
    }
}

/// Plans device `opts.device`, opens its inputs and instantiates its operators: everything
/// that can fail before it connects.
pub fn prepare(
    p: &Pipeline,
    devices: &Devices,
    model: &CostModel,
    registry: &Registry,
    opts: &DeviceOptions,
) -> Result<Prepared, EdgeError> {
    let plan = plan(p, devices, model, opts.mode, &opts.device)?;
    let side = format!("device `{}`", opts.device);
    let assigned = input::assign(p, &plan.graph.sources, &opts.inputs, &side)?;
    let replays = assigned
        .iter()
        .map(|(s, spec)| {
            let share = plan.shares.iter().find(|(x, _)| x == s).map_or(Share::ALL, |x| x.1);
            let own_file = matches!(spec, InputSpec::File(_)) && !opts.split_files;
            let keep = if own_file { Share::ALL } else { share };
            Replay::open(p, *s, spec, keep, share.of, model.source_rates[s.index()], opts.speed)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let engine = Engine::new(p, &plan.graph, registry, opts.batch_size)?;
    Ok(Prepared { plan, replays, engine })
}

/// Runs device `opts.device` of `devices` until its data is in the cloud.
pub fn run(
    p: &Pipeline,
    devices: &Devices,
    model: &CostModel,
    registry: &Registry,
    opts: &DeviceOptions,
) -> Result<DeviceReport, EdgeError> {
    execute(prepare(p, devices, model, registry, opts)?, opts)
}

/// Connects a prepared device, waits for the start and replays its data.
pub fn execute(prepared: Prepared, opts: &DeviceOptions) -> Result<DeviceReport, EdgeError> {
    let Prepared { plan, mut replays, mut engine } = prepared;
    let mut link = Uplink::connect(opts, &plan.hello)?;
    link.await_start()?;
    let started = Instant::now();
    let records_read = replay(&mut replays, &mut engine, &mut link, opts)?;
    let (sent, bytes, frames) = link.finish()?;
    Ok(DeviceReport {
        device: opts.device.clone(),
        operators: plan.hello.operators.clone(),
        records_read,
        sent: plan.hello.connectors.iter().cloned().zip(sent).collect(),
        bytes,
        frames,
        rejected: engine.rejections(),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Replays every source in due order through the engine, sending as it goes; returns the
/// records read.
fn replay(
    replays: &mut [Replay],
    engine: &mut Engine,
    link: &mut Uplink,
    opts: &DeviceOptions,
) -> Result<u64, EdgeError> {
    let mut lines: Vec<Vec<u8>> = vec![Vec::new(); replays.len()];
    let mut due: Vec<Option<f64>> = Vec::with_capacity(replays.len());
    for (r, line) in replays.iter_mut().zip(&mut lines) {
        due.push(r.next(line)?);
    }
    let start = Instant::now();
    let mut out = Outbox::default();
    let mut read = 0;
    while let Some(i) = earliest(&due) {
        let at = start + Duration::from_secs_f64(due[i].unwrap_or(0.0));
        wait_until(at, &mut out, engine, link, opts.flush)?;
        out.oldest_ns.get_or_insert_with(now_ns);
        engine.push(i, replays[i].key_of(&lines[i]), &lines[i]);
        out.pending += 1;
        read += 1;
        if out.pending >= MAX_PENDING || out.since.elapsed() >= opts.flush {
            out.send(engine, link)?;
        }
        due[i] = replays[i].next(&mut lines[i])?;
    }
    // The end of the input is the final watermark: every pending timer fires (windows close)
    // before the last records are sent.
    engine.finish();
    out.send(engine, link)?;
    Ok(read)
}

/// The input whose next record is due first.
fn earliest(due: &[Option<f64>]) -> Option<usize> {
    (0..due.len())
        .filter(|&i| due[i].is_some())
        .min_by(|&a, &b| due[a].unwrap_or(0.0).total_cmp(&due[b].unwrap_or(0.0)))
}

/// Sleeps until `at`, sending buffered records whenever the flush interval passes meanwhile.
fn wait_until(
    at: Instant,
    out: &mut Outbox,
    engine: &mut Engine,
    link: &mut Uplink,
    flush: Duration,
) -> Result<(), EdgeError> {
    loop {
        let now = Instant::now();
        if now >= at {
            return Ok(());
        }
        let deadline = out.since + flush;
        if out.pending > 0 && deadline <= now {
            out.send(engine, link)?;
            continue;
        }
        let until = if out.pending > 0 { at.min(deadline) } else { at };
        std::thread::sleep(until - now);
    }
}

/// Records read since the last send.
struct Outbox {
    pending: usize,
    oldest_ns: Option<u64>,
    since: Instant,
}

impl Default for Outbox {
    fn default() -> Self {
        Self { pending: 0, oldest_ns: None, since: Instant::now() }
    }
}

impl Outbox {
    /// Runs the engine on what is buffered and sends one frame per connector that got records.
    fn send(&mut self, engine: &mut Engine, link: &mut Uplink) -> Result<(), EdgeError> {
        let origin = self.oldest_ns.take().unwrap_or_else(now_ns);
        engine.drain(|connector, records| link.data(connector, origin, records))?;
        link.flush()?;
        self.pending = 0;
        self.since = Instant::now();
        Ok(())
    }
}

/// The device's connection to the cloud.
struct Uplink {
    peer: String,
    writer: Option<LinkWriter>,
    reader: Conn,
    incoming: FrameReader,
    frame: Vec<u8>,
    sent: Vec<u64>,
    bytes: u64,
    frames: u64,
    device: String,
}

impl Uplink {
    /// Connects (retrying until the timeout), says hello and waits to be welcomed.
    fn connect(opts: &DeviceOptions, hello: &Hello) -> Result<Self, EdgeError> {
        let tcp = connect_retrying(&opts.join, opts.connect_timeout)?;
        let peer = format!("the cloud at {}", opts.join);
        let io_err =
            |e: std::io::Error| EdgeError::Protocol { peer: peer.clone(), problem: e.to_string() };
        let me = protocol::device_identity(&hello.device);
        let opening = Opening {
            security: &opts.security,
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
        let link =
            clasp_wire::link::dial(tcp, &opts.join, &opening, expect).map_err(|e| match e {
                WireError::Rejected { reason, .. } => EdgeError::Refused {
                    addr: opts.join.clone(),
                    device: hello.device.clone(),
                    reason,
                },
                other => EdgeError::Protocol { peer: peer.clone(), problem: other.to_string() },
            })?;
        let stream = link.conn;
        let reader = stream.try_clone().map_err(io_err)?;
        let mut frame = Vec::new();
        clasp_wire::encode(&Outgoing::Hello(hello), &mut frame);
        (&stream).write_all(&frame).map_err(io_err)?;
        stream.set_timeouts(None).map_err(io_err)?;
        let head_len = PREAMBLE_LEN + frame.len();
        let mut incoming = link.reader;
        incoming.set_max_frame(protocol::MAX_FRAME);
        let mut link = Self {
            peer: peer.clone(),
            writer: Some(LinkWriter::new(stream, opts.shape)),
            reader,
            incoming,
            frame,
            sent: vec![0; hello.connectors.len()],
            bytes: head_len as u64,
            frames: 0,
            device: hello.device.clone(),
        };
        match link.receive()? {
            ToDevice::Welcome => Ok(link),
            other => Err(link.unexpected(other, "Welcome")),
        }
    }

    fn await_start(&mut self) -> Result<(), EdgeError> {
        match self.receive()? {
            ToDevice::Start => Ok(()),
            other => Err(self.unexpected(other, "Start")),
        }
    }

    fn receive(&mut self) -> Result<ToDevice, EdgeError> {
        let limits = protocol::Limits { connectors: self.sent.len() };
        match self.incoming.read_message::<ToDevice, _>(&mut self.reader, &limits) {
            Ok(Some(ToDevice::Reject(reason))) => Err(EdgeError::Refused {
                addr: self.peer.trim_start_matches("the cloud at ").to_owned(),
                device: self.device.clone(),
                reason,
            }),
            Ok(Some(m)) => Ok(m),
            Ok(None) => Err(self.protocol("closed the connection (the cloud's output says why)")),
            Err(e) => Err(self.protocol(&e.to_string())),
        }
    }

    fn unexpected(&self, m: ToDevice, wanted: &str) -> EdgeError {
        self.protocol(&format!("expected {wanted}, got {m:?}"))
    }

    fn protocol(&self, problem: &str) -> EdgeError {
        EdgeError::Protocol { peer: self.peer.clone(), problem: problem.to_owned() }
    }

    fn data(&mut self, connector: usize, origin_ns: u64, records: &Batch) -> Result<(), EdgeError> {
        let msg = Outgoing::Data { connector: connector as u16, origin_ns, records };
        self.write(msg)?;
        self.sent[connector] += records.len() as u64;
        self.frames += 1;
        Ok(())
    }

    fn write(&mut self, msg: Outgoing<'_>) -> Result<(), EdgeError> {
        let written = match self.writer.as_mut() {
            Some(w) => write_frame(w, &msg, &mut self.frame),
            None => Err(std::io::Error::other("the link is closed")),
        };
        let n = written.map_err(|e| self.protocol(&format!("sending: {e}")))?;
        self.bytes += n as u64;
        Ok(())
    }

    /// Hands what was written to the link now rather than when a buffer fills.
    fn flush(&mut self) -> Result<(), EdgeError> {
        let flushed = self.writer.as_mut().map_or(Ok(()), Write::flush);
        flushed.map_err(|e| self.protocol(&format!("sending: {e}")))
    }

    /// Sends `End`, delivers everything and waits for the cloud's acknowledgement; returns the
    /// records sent per connector, the bytes and the data frames.
    fn finish(mut self) -> Result<(Vec<u64>, u64, u64), EdgeError> {
        let sent = self.sent.clone();
        self.write(Outgoing::End { sent: &sent })?;
        if let Some(w) = self.writer.take() {
            w.finish().map_err(|e| self.protocol(&format!("sending: {e}")))?;
        }
        match self.receive()? {
            ToDevice::Ack { received } if received == self.sent => {
                Ok((self.sent.clone(), self.bytes, self.frames))
            }
            ToDevice::Ack { received } => Err(self.protocol(&format!(
                "the cloud received {received:?} records per connector, {:?} were sent",
                self.sent
            ))),
            other => Err(self.unexpected(other, "Ack")),
        }
    }
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
