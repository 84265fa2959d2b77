//! Helpers shared by the edge runner's integration tests.
#![allow(dead_code)]

use clasp_core::{Batch, Pipeline};
use clasp_edge::device;
use clasp_edge::embedded::{self, EmbeddedOptions, EmbeddedReport};
use clasp_edge::input::InputSpec;
use clasp_edge::protocol::{self, Item, Outgoing, ToDevice};
use clasp_edge::results::{CollectSink, RunResults};
use clasp_edge::{Mode, Transport};
use clasp_plan::edgecut::{self, CostModel, Devices};
use clasp_reference::Outcome;
use clasp_wire::{Conn, FrameReader, Security};
use std::io::Write;
use std::path::PathBuf;

/// Logs to stderr when `CLASP_LOG` is set (e.g. `CLASP_LOG=warn`).
pub fn logs() {
    if let Ok(filter) = std::env::var("CLASP_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .try_init();
    }
}

/// Seed of every trace.
pub const SEED: u64 = 7;

/// A file of the repository.
pub fn repo_file(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel)
}

/// The five devices of the Planner paper's setup for `app` (`devices/<app>.toml`).
pub fn devices(p: &Pipeline, app: &str) -> Devices {
    edgecut::devices::load(&repo_file(&format!("devices/{app}.toml")), p)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Every source of `app` generated with `count` records of [`SEED`].
pub fn inputs(p: &Pipeline, count: u64) -> Vec<(String, InputSpec)> {
    p.sources.iter().map(|s| (s.name.clone(), InputSpec::Generated { count, seed: SEED })).collect()
}

/// Runs `p` (application `app`) over its five devices and the cloud in `mode`; returns the
/// sinks and final state as the reference's outcome and as the edge runner's results, and the
/// report.
pub fn run_embedded(
    p: &Pipeline,
    app: &str,
    mode: Mode,
    count: u64,
    speed: f64,
) -> (Outcome, RunResults, EmbeddedReport) {
    run_embedded_over(p, app, mode, count, speed, Transport::Connector)
}

/// [`run_embedded`] with the cut streams carried by `uplink`.
pub fn run_embedded_over(
    p: &Pipeline,
    app: &str,
    mode: Mode,
    count: u64,
    speed: f64,
    uplink: Transport,
) -> (Outcome, RunResults, EmbeddedReport) {
    logs();
    let devices = devices(p, app);
    let mut opts = EmbeddedOptions::new(inputs(p, count));
    opts.mode = mode;
    opts.speed = speed;
    opts.uplink = uplink;
    opts.cloud.dump_state = true;
    let sink = CollectSink::default();
    let report = embedded::run(
        p,
        &devices,
        &CostModel::from_spec(p),
        &clasp_apps::registry(),
        &opts,
        Box::new(sink.clone()),
    )
    .unwrap_or_else(|e| panic!("{app} {mode:?}: {e}"));
    let mut results = sink.results();
    results.add_state_dump(report.cloud.state.as_deref().unwrap_or_default());
    (outcome_of(p, &results), results, report)
}

/// The sinks and final state of `results` as the reference's outcome.
pub fn outcome_of(p: &Pipeline, results: &RunResults) -> Outcome {
    let mut outcome = Outcome::default();
    for s in &p.sinks {
        outcome.sinks.entry(s.name.clone()).or_default();
    }
    for op in p.operators.iter().filter(|o| o.stateful) {
        outcome.state.entry(op.name.clone()).or_default();
    }
    for (sink, key, value, times) in results.sink_records() {
        for _ in 0..times {
            outcome.add_sink(sink, key, value);
        }
    }
    for line in results.state_lines() {
        outcome.add_state_line(line).unwrap();
    }
    outcome
}

/// Opens a link to the cloud at `addr` proving `identity` with `security` (the first frames
/// after it are the test's to write).
pub fn dial_as(identity: &str, addr: &str, security: &Security) -> (Conn, FrameReader) {
    let opening = clasp_wire::Opening {
        security,
        protocol: &protocol::PROTOCOL,
        identity,
        max_frame: protocol::MAX_FRAME,
        deadline: clasp_wire::Deadline::after(clasp_wire::HANDSHAKE_DEADLINE),
    };
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    let link = clasp_wire::link::dial(tcp, addr, &opening, |_| Ok(())).unwrap();
    link.conn.set_timeouts(None).unwrap();
    (link.conn, link.reader)
}

/// A device driven by hand: its connection and the items it sent.
pub struct HandDevice {
    /// The connection.
    pub conn: Conn,
    reader: FrameReader,
    /// The number of the next item.
    pub seq: u64,
    /// Records sent.
    pub sent: u64,
    /// The largest event time sent.
    pub max_time: Option<u64>,
}

impl HandDevice {
    /// Device `id` of `d` joins the cloud at `addr` all in the cloud: it forwards its rides.
    pub fn join(id: &str, addr: &str, p: &Pipeline, d: &Devices) -> Self {
        let hello = device::plan(p, d, &CostModel::from_spec(p), Mode::AllCloud, id).unwrap().hello;
        assert_eq!(hello.connectors, ["rides"], "all in the cloud, a device forwards its rides");
        let (conn, reader) = dial_as(&format!("device:{id}"), addr, &Security::insecure());
        let mut out = Vec::new();
        clasp_wire::encode(&Outgoing::Hello(&hello), &mut out);
        (&conn).write_all(&out).unwrap();
        Self { conn, reader, seq: 0, sent: 0, max_time: None }
    }

    /// The next message from the cloud.
    pub fn next(&mut self) -> ToDevice {
        let limits = protocol::Limits { connectors: 1 };
        self.reader.read_message(&mut &self.conn, &limits).unwrap().expect("a message")
    }

    /// Expects the welcome, saying the cloud holds `held` items, and the start.
    pub fn await_start(&mut self, held: u64) {
        assert_eq!(self.next(), ToDevice::Welcome { held: vec![held] });
        assert_eq!(self.next(), ToDevice::Start);
    }

    /// Sends `lines` in items of 100 with the watermark of out-of-orderness 60 after each
    /// (the largest time sent minus 61: no later in-bound event is at or before it); returns
    /// the last watermark.
    pub fn send(
        &mut self,
        p: &Pipeline,
        lines: &[Vec<u8>],
        time: &dyn Fn(&[u8]) -> u64,
    ) -> Option<u64> {
        assert_eq!(p.sources[0].out_of_orderness, 60);
        for chunk in lines.chunks(100) {
            let max = chunk.iter().map(|l| time(l)).chain(self.max_time).max();
            self.item(p, chunk, max.map(|m| m - 61), time);
        }
        self.max_time.map(|m| m - 61)
    }

    /// Sends `lines` as one item carrying `watermark`.
    pub fn item(
        &mut self,
        p: &Pipeline,
        lines: &[Vec<u8>],
        watermark: Option<u64>,
        time: &dyn Fn(&[u8]) -> u64,
    ) {
        let source = &p.sources[0];
        let mut records = Batch::new();
        for l in lines {
            records.push(source.key_of(l), l);
            self.max_time = Some(self.max_time.unwrap_or(0).max(time(l)));
        }
        let item = Item { seq: self.seq, origin_ns: 1, watermark, records: &records };
        let mut out = Vec::new();
        clasp_wire::encode(&Outgoing::Data { connector: 0, item }, &mut out);
        (&self.conn).write_all(&out).unwrap();
        self.seq += 1;
        self.sent += lines.len() as u64;
    }

    /// Ends the device's data, expecting the cloud to have received `received` records.
    pub fn end(mut self, received: u64) {
        let mut out = Vec::new();
        clasp_wire::encode(&Outgoing::End { sent: &[received] }, &mut out);
        (&self.conn).write_all(&out).unwrap();
        let done = loop {
            match self.next() {
                ToDevice::Ack { .. } => {}
                other => break other,
            }
        };
        assert_eq!(done, ToDevice::Done { received: vec![received] });
        out.clear();
        clasp_wire::encode(&Outgoing::Bye, &mut out);
        (&self.conn).write_all(&out).unwrap();
    }
}
