//! The edge runner: one device's part of the cut, on the device's raw data, with every cut
//! stream sent to the cloud's edge ingress over one TCP connection.
//!
//! The device replays its sources ([`crate::input`]) through its operators — one instance of
//! each, single-threaded, in the local driver — and every `flush` interval (or 4,096 records)
//! sends what reached each connector as one item of its cut stream: the records with their
//! event times, the connector's watermark after them, and the read time of the oldest raw
//! record behind them. Items are kept until the cloud acknowledges them and resent after a
//! reconnect ([`uplink`]). At the end it sends `End` with its per-connector counts and waits
//! for the cloud's `Done`. With a Kafka uplink ([`crate::Transport::Kafka`]) the items go to
//! a topic instead ([`kafka_uplink`]), each stream's end after them.

#[cfg(feature = "kafka")]
mod kafka_uplink;
mod link;
mod uplink;

use crate::cut::{self, Mode};
use crate::engine::Engine;
use crate::error::EdgeError;
use crate::input::{self, InputSpec, Replay, Share};
use crate::protocol::Hello;
use crate::shaper::LinkShape;
use crate::subgraph::{self, DeviceGraph};
use crate::transport::Transport;
use clasp_core::{Pipeline, Registry, SourceId};
use clasp_plan::edgecut::{CostModel, Devices};
use clasp_runtime::worker::executor::now_ns;
use clasp_wire::Security;
use link::Link;
use serde::Serialize;
use std::time::{Duration, Instant};

/// Records buffered on a device before it sends them even if the flush interval has not
/// passed.
const MAX_PENDING: usize = 4096;

/// How to run one device.
#[derive(Clone, Debug)]
pub struct DeviceOptions {
    /// The device's id in the devices file.
    pub device: String,
    /// The cloud's edge ingress (`HOST:PORT`), with the TCP connector.
    pub join: String,
    /// How the cut streams reach the cloud: the TCP connector to `join`, or a Kafka topic.
    pub uplink: Transport,
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
    /// How long to keep trying to reach the cloud again after the link broke.
    pub reconnect_timeout: Duration,
    /// Bytes of items kept until the cloud acknowledges them; when they fill it the device
    /// waits before it reads on.
    pub resend_buffer: usize,
    /// Whether a file input is the whole source, of which the device keeps its share (as for a
    /// generated trace); otherwise a file is the device's own raw data.
    pub split_files: bool,
    /// The cluster secret and TLS the cloud expects.
    pub security: Security,
}

impl DeviceOptions {
    /// Options with the defaults: cut, unpaced, unshaped, 10 ms flush, 10 s to connect, 60 s
    /// to connect again, 16 MiB of items awaiting acknowledgement.
    pub fn new(device: &str, join: &str, inputs: Vec<(String, InputSpec)>) -> Self {
        Self {
            device: device.to_owned(),
            join: join.to_owned(),
            uplink: Transport::Connector,
            mode: Mode::Cut,
            inputs,
            speed: 0.0,
            shape: LinkShape::default(),
            flush: Duration::from_millis(10),
            batch_size: 64,
            connect_timeout: Duration::from_secs(10),
            reconnect_timeout: Duration::from_secs(60),
            resend_buffer: 16 << 20,
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
    /// Bytes written to its link: preambles and frames, resent ones included (over Kafka:
    /// the keys, values and headers of the records produced, produced-again ones included).
    pub bytes: u64,
    /// Data frames sent (each once).
    pub frames: u64,
    /// Times the device connected again after its link broke.
    pub reconnects: u64,
    /// Data frames sent again after a reconnect.
    pub resent: u64,
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
    let mut link = Link::open(opts, &plan.hello)?;
    let started = Instant::now();
    let records_read = replay(&mut replays, &mut engine, &mut link, opts)?;
    let counts = link.finish()?;
    Ok(DeviceReport {
        device: opts.device.clone(),
        operators: plan.hello.operators.clone(),
        records_read,
        sent: plan.hello.connectors.iter().cloned().zip(counts.sent).collect(),
        bytes: counts.bytes,
        frames: counts.frames,
        reconnects: counts.reconnects,
        resent: counts.resent,
        rejected: engine.rejections(),
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// Replays every source in due order through the engine, sending as it goes; returns the
/// records read.
fn replay(
    replays: &mut [Replay],
    engine: &mut Engine,
    link: &mut Link,
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
    link: &mut Link,
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
    fn send(&mut self, engine: &mut Engine, link: &mut Link) -> Result<(), EdgeError> {
        let origin = self.oldest_ns.take().unwrap_or_else(now_ns);
        engine.drain(|connector, records, watermark| {
            link.data(connector, origin, watermark, records)
        })?;
        link.flush()?;
        self.pending = 0;
        self.since = Instant::now();
        Ok(())
    }
}
