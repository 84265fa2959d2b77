//! Helpers shared by the edge runner's integration tests.
#![allow(dead_code)]

use clasp_core::Pipeline;
use clasp_edge::Mode;
use clasp_edge::embedded::{self, EmbeddedOptions, EmbeddedReport};
use clasp_edge::input::InputSpec;
use clasp_edge::results::{CollectSink, RunResults};
use clasp_plan::edgecut::{self, CostModel, Devices};
use clasp_reference::Outcome;
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
    logs();
    let devices = devices(p, app);
    let mut opts = EmbeddedOptions::new(inputs(p, count));
    opts.mode = mode;
    opts.speed = speed;
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
pub fn dial_as(
    identity: &str,
    addr: &str,
    security: &clasp_wire::Security,
) -> (clasp_wire::Conn, clasp_wire::FrameReader) {
    let opening = clasp_wire::Opening {
        security,
        protocol: &clasp_edge::protocol::PROTOCOL,
        identity,
        max_frame: clasp_edge::protocol::MAX_FRAME,
        deadline: clasp_wire::Deadline::after(clasp_wire::HANDSHAKE_DEADLINE),
    };
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    let link = clasp_wire::link::dial(tcp, addr, &opening, |_| Ok(())).unwrap();
    link.conn.set_timeouts(None).unwrap();
    (link.conn, link.reader)
}
