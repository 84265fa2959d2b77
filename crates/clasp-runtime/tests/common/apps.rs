//! Running a benchmark application on a cluster of worker threads (loopback TCP) and turning
//! what it produced — sink records and the final keyed state — into a reference
//! [`Outcome`], so it can be checked against `clasp_reference::expected`.

use super::{config, placement_of, threads};
use clasp_apps::inputs::SourceLines;
use clasp_core::input::MemoryLines;
use clasp_core::placement::Placement;
use clasp_core::source::from_lines;
use clasp_core::sync::lock;
use clasp_core::{Batch, Pipeline};
use clasp_reference::Outcome;
use clasp_runtime::cluster::{Cluster, contiguous_keys, spread};
use clasp_runtime::planner::stats::RunSummary;
use clasp_runtime::planner::{Input, SinkOutput};
use clasp_runtime::routing::RoutingPlan;
use std::sync::{Arc, Mutex};

/// Executor slots per worker.
pub const SLOTS: u32 = 4;

/// Sink records as they reach the planner: `(sink, key, value)`.
type Received = Arc<Mutex<Vec<(String, Vec<u8>, Vec<u8>)>>>;

/// Keeps every sink record.
struct Collect(Received);

impl SinkOutput for Collect {
    fn write(&mut self, name: &str, batch: &Batch) -> std::io::Result<()> {
        let mut v = lock(&self.0);
        v.extend(batch.iter().map(|r| (name.to_owned(), r.key.to_vec(), r.value.to_vec())));
        Ok(())
    }
}

/// How the operators are laid out on the workers.
#[derive(Clone, Copy, Debug)]
pub enum Layout {
    /// One worker, every operator with one instance: each operator runs one request at a
    /// time and takes its queue in arrival order, so every record reaches every operator in
    /// input order.
    Sequential,
    /// Every operator on each of `n` workers with an equal share and the worker's slots
    /// shared among the operators (`cluster::spread`): stateless operators run concurrently
    /// and send each request to a worker drawn by share.
    Spread(u32),
}

impl Layout {
    fn placement(self, p: &Pipeline) -> Placement {
        match self {
            Layout::Sequential => {
                let one: &[super::Slot] = &[(0, 1.0, 1)];
                let entries: Vec<(&str, &[super::Slot])> =
                    p.operators.iter().map(|o| (o.name.as_str(), one)).collect();
                placement_of(p, 1, &entries)
            }
            Layout::Spread(n) => spread(p, n, SLOTS),
        }
    }

    /// Workers used.
    pub fn workers(self) -> u32 {
        match self {
            Layout::Sequential => 1,
            Layout::Spread(n) => n,
        }
    }
}

/// How a run is driven.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    /// Records per input request (and per chained request).
    pub batch: u32,
    /// Most input chains in flight. A record can only be overtaken by records of chains
    /// opened while its own chain is in flight, so this bounds how far a parallel run can
    /// reorder the input: by fewer than `max_in_flight × batch` records.
    pub max_in_flight: usize,
}

/// What a run produced.
pub struct AppRun {
    /// Sink records and final state.
    pub outcome: Outcome,
    /// The run summary.
    pub summary: RunSummary,
}

/// Runs `p` on `inputs` (per source, fed unthrottled) with `layout`.
pub fn run_app(p: &Pipeline, inputs: &[SourceLines], layout: Layout, opts: RunOptions) -> AppRun {
    let received: Received = Arc::default();
    let mut cfg = config(opts.batch);
    cfg.max_in_flight = opts.max_in_flight;
    let groups = cfg.settings.key_groups;
    let mut cluster = Cluster::start(
        p.clone(),
        cfg,
        Box::new(Collect(received.clone())),
        threads(),
        layout.workers() as usize,
        SLOTS,
    )
    .unwrap_or_else(|e| panic!("{}: starting the cluster: {e}", p.name));
    let placement = layout.placement(p);
    let keys = contiguous_keys(p, &placement, groups);
    cluster.planner.install(RoutingPlan { epoch: 1, placement, keys }).unwrap();
    // Each source's records get their event times as `clasp run` reads them.
    let times = clasp_apps::registry().event_times(p).unwrap_or_else(|e| panic!("{e}"));
    let feeds = inputs
        .iter()
        .map(|(source, lines)| {
            let id = p.source_id(source).unwrap_or_else(|| panic!("no source {source}"));
            let lines = MemoryLines::new(Arc::new(lines.clone()), 0, 1);
            let reader = from_lines(Box::new(lines), times[id.index()].clone());
            Input { source: id, reader, rate: Box::new(|_| None) }
        })
        .collect();
    let summary = match cluster.planner.run(feeds, None, |_| {}, |_, _| Ok(())) {
        Ok(s) => s,
        Err(e) => {
            // A lost worker says why when joined.
            let why = cluster.shutdown().err().map(|w| w.to_string()).unwrap_or_default();
            panic!("{}: {e} {why}", p.name);
        }
    };
    let mut dump = Vec::new();
    cluster.planner.dump_state(&mut dump).unwrap();
    cluster.shutdown().unwrap();

    let mut outcome = Outcome::default();
    for s in &p.sinks {
        outcome.sinks.entry(s.name.clone()).or_default();
    }
    for o in p.operators.iter().filter(|o| o.stateful) {
        outcome.state.entry(o.name.clone()).or_default();
    }
    for (sink, key, value) in lock(&received).iter() {
        outcome.add_sink(sink, key, value);
    }
    for line in String::from_utf8(dump).expect("state dumps are UTF-8").lines() {
        outcome.add_state_line(line).unwrap_or_else(|e| panic!("{}: {e}: {line}", p.name));
    }
    AppRun { outcome, summary }
}

/// Sets `[operator.params] name = value` of operator `op`.
pub fn set_param(p: &mut Pipeline, op: &str, name: &str, value: serde_json::Value) {
    let id = p.operator_id(op).unwrap_or_else(|| panic!("no operator {op}"));
    p.operators[id.index()].params.insert(name.to_owned(), value);
}
