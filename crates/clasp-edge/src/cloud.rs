//! The cloud side: the edge ingress that devices join, and the cloud part of the cut on the
//! elastic runtime with the cut streams as its sources.
//!
//! [`Cloud::bind`] opens the ingress; [`Cloud::run`] starts the runtime (planner and workers,
//! loopback TCP), admits every device of the devices file — each must state the part the
//! cloud computed for it — then tells them all to start. Each device connection has a receiver
//! thread that puts `Data` frames on the queue of their connector; each connector is one input
//! of the runtime ([`ConnectorInput`]), which ends when every device sending it has ended. The
//! run finishes when every device has finished and every chain completed.
//!
//! A cloud part without operators (every operator runs on the devices) writes what arrives to
//! the sinks directly.

use crate::cut::{self, Mode};
use crate::device;
use crate::error::EdgeError;
use crate::input::{self, InputSpec, Replay, ReplayInput, Share};
use crate::protocol::{self, Hello, ToCloud, ToDevice};
use crate::subgraph::{self, CloudGraph};
use clasp_core::input::{InputRecord, LineSource, Next};
use clasp_core::sync::lock;
use clasp_core::{Batch, Endpoint, Pipeline, Registry};
use clasp_plan::edgecut::{CostModel, Devices};
use clasp_runtime::cluster::{Cluster, Launch, contiguous_keys, spread};
use clasp_runtime::planner::stats::Latency;
use clasp_runtime::planner::{Input, PlannerConfig, SinkOutput};
use clasp_runtime::routing::RoutingPlan;
use clasp_runtime::worker::executor::now_ns;
use clasp_wire::frame::PREAMBLE_LEN;
use clasp_wire::{FrameReader, write_frame};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::io::{self, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Frames queued per connector before device connections are held back.
const QUEUE_FRAMES: usize = 256;

/// How to run the cloud side.
#[derive(Clone, Debug)]
pub struct CloudOptions {
    /// Where devices join (`HOST:PORT`; port 0 picks one).
    pub listen: String,
    /// The cut or everything in the cloud (devices must use the same).
    pub mode: Mode,
    /// Runtime workers.
    pub workers: usize,
    /// Executor slots per worker.
    pub slots: u32,
    /// Records per input request.
    pub batch_size: u32,
    /// How long devices have to join.
    pub join_timeout: Duration,
    /// A connector input sends what it has when nothing arrived for this long.
    pub idle: Duration,
    /// Raw data of the sources held in the cloud.
    pub inputs: Vec<(String, InputSpec)>,
    /// Replay speed of those sources (0: as fast as possible).
    pub speed: f64,
    /// Collect the keyed state of every stateful operator at the end.
    pub dump_state: bool,
}

impl Default for CloudOptions {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:0".into(),
            mode: Mode::Cut,
            workers: 2,
            slots: 4,
            batch_size: 64,
            join_timeout: Duration::from_secs(60),
            idle: Duration::from_millis(2),
            inputs: Vec::new(),
            speed: 0.0,
            dump_state: false,
        }
    }
}

/// Traffic over one device's link, as the cloud received it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LinkReport {
    /// The device.
    pub device: String,
    /// Bytes received: preamble and frames.
    pub bytes: u64,
    /// Data frames.
    pub frames: u64,
    /// Records per connector: `(name, count)`.
    pub records: Vec<(String, u64)>,
}

/// What the cloud side did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CloudReport {
    /// The pipeline.
    pub pipeline: String,
    /// `cut` or `all-cloud`.
    pub mode: String,
    /// Operators the cloud ran.
    pub operators: Vec<String>,
    /// One entry per device.
    pub links: Vec<LinkReport>,
    /// Seconds from the start signal until every device finished and every chain completed.
    pub makespan_s: f64,
    /// End-to-end latency of completed chains, from the device's read of the oldest raw record
    /// behind a request to the completion of everything it caused in the cloud.
    pub latency: Latency,
    /// Chains completed.
    pub chains: u64,
    /// Records that reached the sinks.
    pub sink_records: u64,
    /// The keyed state (JSON lines), when asked for.
    #[serde(skip)]
    pub state: Option<Vec<u8>>,
}

impl CloudReport {
    /// Bytes over every device link.
    pub fn bytes(&self) -> u64 {
        self.links.iter().map(|l| l.bytes).sum()
    }

    /// Records over every device link.
    pub fn items(&self) -> u64 {
        self.links.iter().flat_map(|l| l.records.iter().map(|r| r.1)).sum()
    }
}

/// A bound edge ingress with the cloud part it will run.
pub struct Cloud {
    p: Pipeline,
    devices: Devices,
    model: CostModel,
    graph: CloudGraph,
    listener: TcpListener,
    addr: SocketAddr,
    opts: CloudOptions,
}

impl std::fmt::Debug for Cloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cloud").field("addr", &self.addr).finish_non_exhaustive()
    }
}

/// A device that joined: its connection, what it said, and the reader of its frames.
struct Joined {
    index: usize,
    hello: Hello,
    stream: TcpStream,
    reader: FrameReader,
    bytes: u64,
}

/// A frame waiting for the runtime.
struct Frame {
    origin_ns: u64,
    records: Batch,
}

impl Cloud {
    /// Computes the cut and opens the ingress on `opts.listen`.
    pub fn bind(
        p: &Pipeline,
        devices: &Devices,
        model: &CostModel,
        opts: CloudOptions,
    ) -> Result<Self, EdgeError> {
        let cut = cut::plan(p, model, devices, opts.mode);
        let graph = subgraph::cloud_graph(p, &cut)?;
        let listener = TcpListener::bind(&opts.listen)
            .map_err(|error| EdgeError::Listen { addr: opts.listen.clone(), error })?;
        let addr = listener
            .local_addr()
            .map_err(|error| EdgeError::Listen { addr: opts.listen.clone(), error })?;
        Ok(Self {
            p: p.clone(),
            devices: devices.clone(),
            model: model.clone(),
            graph,
            listener,
            addr,
            opts,
        })
    }

    /// The address devices join.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Operators the cloud runs.
    pub fn operators(&self) -> Vec<String> {
        self.graph
            .pipeline
            .as_ref()
            .map_or_else(Vec::new, |cp| cp.operators.iter().map(|o| o.name.clone()).collect())
    }

    /// Runs until every device has finished and every chain completed; sink records go to
    /// `sink`.
    pub fn run(
        self,
        registry: &Registry,
        sink: Box<dyn SinkOutput>,
    ) -> Result<CloudReport, EdgeError> {
        let held = input::assign(&self.p, &self.graph.sources, &self.opts.inputs, "the cloud")?;
        let mut sink = Some(sink);
        let mut cluster = match &self.graph.pipeline {
            Some(cp) => Some(self.start_cluster(cp, registry, sink.take().expect("unused"))?),
            None => None,
        };
        let joined = match self.admit() {
            Ok(j) => j,
            Err(e) => {
                if let Some(c) = cluster {
                    let _ = c.shutdown();
                }
                return Err(e);
            }
        };
        let (senders, receivers) = self.queues();
        let links: Vec<Arc<Mutex<LinkReport>>> = joined
            .iter()
            .map(|j| {
                Arc::new(Mutex::new(LinkReport {
                    device: j.hello.device.clone(),
                    bytes: j.bytes,
                    frames: 0,
                    records: j.hello.connectors.iter().map(|c| (c.clone(), 0)).collect(),
                }))
            })
            .collect();
        let errors: Arc<Mutex<Vec<String>>> = Arc::default();
        let mut streams = Vec::new();
        for j in &joined {
            let mut s = &j.stream;
            write_frame(&mut s, &ToDevice::Start, &mut Vec::new()).map_err(|e| {
                EdgeError::Protocol { peer: j.hello.device.clone(), problem: e.to_string() }
            })?;
        }
        let started = Instant::now();
        for (j, link) in joined.into_iter().zip(&links) {
            let outs: Vec<Sender<Frame>> = j
                .hello
                .connectors
                .iter()
                .map(|c| {
                    let i =
                        self.graph.ingress.iter().position(|x| &x.name == c).expect("validated");
                    senders[i].clone()
                })
                .collect();
            streams.push(spawn_receiver(j, outs, link.clone(), errors.clone()));
        }
        drop(senders);
        let outcome = match cluster.as_mut() {
            Some(c) => self.run_runtime(c, receivers, held),
            None => self.run_direct(receivers, held, sink.take().expect("unused")),
        };
        let makespan_s = started.elapsed().as_secs_f64();
        for t in streams {
            let _ = t.join();
        }
        let mut state = None;
        if let (Some(c), true, Ok(_)) = (cluster.as_mut(), self.opts.dump_state, &outcome) {
            let mut dump = Vec::new();
            c.planner.dump_state(&mut dump).map_err(|e| EdgeError::Runtime(e.to_string()))?;
            state = Some(dump);
        }
        if let Some(c) = cluster {
            c.shutdown().map_err(|e| EdgeError::Runtime(e.to_string()))?;
        }
        let errors = std::mem::take(&mut *lock(&errors));
        if !errors.is_empty() {
            return Err(EdgeError::Protocol { peer: "devices".into(), problem: errors.join("; ") });
        }
        let (latency, chains, sink_records) = outcome?;
        Ok(CloudReport {
            pipeline: self.p.name.clone(),
            mode: self.opts.mode.as_str().to_owned(),
            operators: self.operators(),
            links: links.iter().map(|l| lock(l).clone()).collect(),
            makespan_s,
            latency,
            chains,
            sink_records,
            state,
        })
    }

    fn start_cluster(
        &self,
        cp: &Pipeline,
        registry: &Registry,
        sink: Box<dyn SinkOutput>,
    ) -> Result<Cluster, EdgeError> {
        let mut config =
            PlannerConfig { batch_size: self.opts.batch_size, ..PlannerConfig::default() };
        config.settings.batch_size = self.opts.batch_size;
        config.settings.interval_ms = 200;
        let groups = config.settings.key_groups;
        let workers = self.opts.workers.max(1);
        let c = Cluster::start(
            cp.clone(),
            config,
            sink,
            Launch::Threads(registry.clone()),
            workers,
            self.opts.slots,
        )
        .map_err(|e| EdgeError::Runtime(e.to_string()))?;
        let placement = spread(cp, workers as u32, self.opts.slots);
        let keys = contiguous_keys(cp, &placement, groups);
        c.planner
            .install(RoutingPlan { epoch: 1, placement, keys })
            .map_err(|e| EdgeError::Runtime(e.to_string()))?;
        Ok(c)
    }

    /// Admits every device of the devices file, refusing strangers and mismatched parts.
    fn admit(&self) -> Result<Vec<Joined>, EdgeError> {
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
        let accepting = Arc::new(std::sync::atomic::AtomicBool::new(true));
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
                    accepting.store(false, std::sync::atomic::Ordering::Release);
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
        accepting.store(false, std::sync::atomic::Ordering::Release);
        // Wake the acceptor so it sees it should stop.
        let _ = TcpStream::connect(self.addr);
        Ok(joined.into_iter().flatten().collect())
    }

    /// One queue per connector arriving in the cloud.
    fn queues(&self) -> (Vec<Sender<Frame>>, Vec<Receiver<Frame>>) {
        self.graph.ingress.iter().map(|_| crossbeam_channel::bounded(QUEUE_FRAMES)).unzip()
    }

    /// Inputs of the runtime: connectors first, then the cloud's own sources.
    fn inputs(
        &self,
        cp: &Pipeline,
        receivers: Vec<Receiver<Frame>>,
        held: Vec<(clasp_core::SourceId, InputSpec)>,
    ) -> Result<Vec<Input>, EdgeError> {
        let mut inputs = Vec::new();
        for (c, rx) in self.graph.ingress.iter().zip(receivers) {
            let source = cp.source_id(&c.name).expect("the cloud part has a source per connector");
            let reader = Box::new(ConnectorInput::new(rx, self.opts.idle));
            inputs.push(Input { source, reader, rate: Box::new(|_| None) });
        }
        for (s, spec) in held {
            let rate = self.model.source_rates[s.index()];
            let replay = Replay::open(&self.p, s, &spec, Share::ALL, 1, rate, 0.0)?;
            let source = cp.source_id(&self.p.sources[s.index()].name).expect("cloud source");
            let per_request = rate * self.opts.speed / f64::from(self.opts.batch_size.max(1));
            let paced = self.opts.speed > 0.0;
            inputs.push(Input {
                source,
                reader: Box::new(ReplayInput(replay)),
                rate: Box::new(move |_| paced.then_some(per_request)),
            });
        }
        Ok(inputs)
    }

    fn run_runtime(
        &self,
        cluster: &mut Cluster,
        receivers: Vec<Receiver<Frame>>,
        held: Vec<(clasp_core::SourceId, InputSpec)>,
    ) -> Result<(Latency, u64, u64), EdgeError> {
        let cp = self.graph.pipeline.as_ref().expect("a runtime run has a cloud pipeline");
        let inputs = self.inputs(cp, receivers, held)?;
        let summary = cluster
            .planner
            .run(inputs, None, |_| {}, |_, _| Ok(()))
            .map_err(|e| EdgeError::Runtime(e.to_string()))?;
        Ok((summary.latency, summary.completed, summary.sink_records))
    }

    /// Without cloud operators: what arrives goes to the sinks, one chain per request as in the
    /// runtime.
    fn run_direct(
        &self,
        receivers: Vec<Receiver<Frame>>,
        held: Vec<(clasp_core::SourceId, InputSpec)>,
        sink: Box<dyn SinkOutput>,
    ) -> Result<(Latency, u64, u64), EdgeError> {
        let shared = Arc::new(Mutex::new(Direct::new(sink)));
        let mut threads: Vec<JoinHandle<()>> = Vec::new();
        for (c, rx) in self.graph.ingress.iter().zip(receivers) {
            let names = sinks_of(&self.p, &[c.stream]);
            let shared = shared.clone();
            threads.push(std::thread::spawn(move || {
                for f in rx {
                    lock(&shared).deliver(&names, &f.records, f.origin_ns);
                }
            }));
        }
        for (s, spec) in held {
            let mut replay = Replay::open(&self.p, s, &spec, Share::ALL, 1, 1.0, 0.0)?;
            let names = sinks_of(&self.p, self.p.source_outputs(s));
            let (shared, size) = (shared.clone(), self.opts.batch_size.max(1) as usize);
            threads.push(std::thread::spawn(move || {
                let mut line = Vec::new();
                let mut batch = Batch::new();
                loop {
                    let more = match replay.next(&mut line) {
                        Ok(m) => m.is_some(),
                        Err(e) => {
                            lock(&shared).error.get_or_insert(e.to_string());
                            false
                        }
                    };
                    if more {
                        batch.push(replay.key_of(&line), &line);
                    }
                    if batch.len() >= size || (!more && !batch.is_empty()) {
                        lock(&shared).deliver(&names, &batch, now_ns());
                        batch.clear();
                    }
                    if !more {
                        return;
                    }
                }
            }));
        }
        for t in threads {
            let _ = t.join();
        }
        let mut d = lock(&shared);
        if let Some(e) = d.error.take() {
            return Err(EdgeError::Output {
                what: "sink records".into(),
                error: io::Error::other(e),
            });
        }
        Ok((d.latency(), d.chains, d.records))
    }
}

/// The sinks that `streams` of `p` lead to.
fn sinks_of(p: &Pipeline, streams: &[clasp_core::StreamId]) -> Vec<String> {
    streams
        .iter()
        .filter_map(|s| match p.stream(*s).to {
            Endpoint::Sink(k) => Some(p.sinks[k.index()].name.clone()),
            _ => None,
        })
        .collect()
}

/// Sink writing and latency tracking without a runtime.
struct Direct {
    sink: Box<dyn SinkOutput>,
    hist: Histogram<u64>,
    chains: u64,
    records: u64,
    error: Option<String>,
}

impl Direct {
    fn new(sink: Box<dyn SinkOutput>) -> Self {
        let hist = Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds");
        Self { sink, hist, chains: 0, records: 0, error: None }
    }

    /// Writes one request's records to `sinks`; its chain ends now.
    fn deliver(&mut self, sinks: &[String], records: &Batch, origin_ns: u64) {
        for name in sinks {
            if let Err(e) = self.sink.write(name, records) {
                self.error.get_or_insert(e.to_string());
            }
            self.records += records.len() as u64;
        }
        let micros = (now_ns().saturating_sub(origin_ns) / 1000).max(1);
        let _ = self.hist.record(micros);
        self.chains += 1;
    }

    fn latency(&self) -> Latency {
        Latency::of(&self.hist)
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
    accepting: Arc<std::sync::atomic::AtomicBool>,
) {
    std::thread::Builder::new()
        .name("edge-accept".into())
        .spawn(move || {
            for stream in listener.incoming() {
                if !accepting.load(std::sync::atomic::Ordering::Acquire) {
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

/// Reads one device's frames into the connector queues until its `End`.
fn spawn_receiver(
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
    fn new(rx: Receiver<Frame>, idle: Duration) -> Self {
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
