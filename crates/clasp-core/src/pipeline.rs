//! The validated pipeline: sources, operators, sinks and the streams between them.
//!
//! A `Pipeline` is only ever built by [`crate::spec`], so every value here has passed validation:
//! names are unique, the graph is acyclic, every operator is reachable from a source, stateful
//! operators have a key. Graph queries are precomputed once.

use crate::ids::{OperatorId, SinkId, SourceId, StreamId};
use crate::kind::OperatorKind;
use serde::{Deserialize, Serialize};

/// Where an element was declared, for errors raised after validation (a missing function, say).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The spec file as given.
    pub file: String,
    /// 1-based line of the element's `name`.
    pub line: usize,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// How an emulated service time is spent by the executor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServiceMode {
    /// Busy-wait: consumes a core, like real computation.
    Spin,
    /// Sleep: holds an executor slot without using a core.
    Sleep,
}

/// Whether an emulated service time is charged per record or per request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServicePer {
    /// Once for every record of a request's batch.
    Record,
    /// Once per request, whatever its batch size.
    Request,
}

/// An emulated service time, spent in addition to the operator's real logic.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServiceTime {
    /// Microseconds per unit (`per`).
    pub micros: f64,
    /// Spin or sleep.
    pub mode: ServiceMode,
    /// Per record or per request.
    pub per: ServicePer,
}

impl ServiceTime {
    /// Microseconds one request of `records` records costs.
    pub fn micros_for(&self, records: usize) -> f64 {
        match self.per {
            ServicePer::Record => self.micros * records as f64,
            ServicePer::Request => self.micros,
        }
    }
}

/// A named input of the pipeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Source {
    /// Dense id.
    pub id: SourceId,
    /// Unique name.
    pub name: String,
    /// Reference input rate (records/s) the spec's rate hints were measured at, if given.
    pub rate: Option<f64>,
    /// Which field of an input line is the record key (0-based), if records need one.
    pub key_field: Option<u32>,
    /// Free-form description of the record format (`text`, `json`, `csv`, ...).
    pub format: Option<String>,
    /// The registered function that reads a record's event time from its line, if the
    /// records have event times (`event_time = "name"`).
    #[serde(default)]
    pub event_time: Option<String>,
    /// How far out of order (in event-time units) the records may arrive: the source's
    /// watermark trails the largest time seen by this much (`out_of_orderness`, default 0).
    #[serde(default)]
    pub out_of_orderness: u64,
    /// Where it was declared.
    pub origin: Origin,
}

impl Source {
    /// The key of an input line: field `key_field` of the line, fields being separated by
    /// commas when the line has one and by runs of whitespace otherwise; empty when the source
    /// has no `key_field` or the line has too few fields.
    pub fn key_of<'a>(&self, line: &'a [u8]) -> &'a [u8] {
        let Some(n) = self.key_field else { return b"" };
        let n = n as usize;
        if line.contains(&b',') {
            line.split(|b| *b == b',').nth(n).unwrap_or(b"")
        } else {
            line.split(|b| b.is_ascii_whitespace()).filter(|f| !f.is_empty()).nth(n).unwrap_or(b"")
        }
    }
}

/// A named output of the pipeline; records reaching it are the pipeline's results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sink {
    /// Dense id.
    pub id: SinkId,
    /// Unique name.
    pub name: String,
    /// Where it was declared.
    pub origin: Origin,
}

/// A stateful or stateless processing step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Operator {
    /// Dense id.
    pub id: OperatorId,
    /// Unique name.
    pub name: String,
    /// Table I kind.
    pub kind: OperatorKind,
    /// Name of the registered function that implements it.
    pub function: String,
    /// Whether it keeps keyed state.
    pub stateful: bool,
    /// Whether each key's records are processed in arrival order (stateful operators, unless
    /// the spec says `ordered = false` because their updates commute). The runtime then runs
    /// one execution of the operator at a time on each worker.
    pub ordered: bool,
    /// What the state is keyed by (required when stateful; documents the record key).
    pub key: Option<String>,
    /// Output records per input record, if hinted.
    pub selectivity: Option<f64>,
    /// Emulated service time, if any.
    pub service: Option<ServiceTime>,
    /// Function parameters (`[operator.params]`), as JSON.
    pub params: serde_json::Map<String, serde_json::Value>,
    /// How far behind its watermark (event-time units) a record may be and still be
    /// processed; its event-time timers fire that much after the watermark passes them
    /// (`allowed_lateness`, default 0). Records later than that are counted as `late`.
    #[serde(default)]
    pub allowed_lateness: u64,
    /// Where it was declared.
    pub origin: Origin,
}

impl Operator {
    /// The selectivity hint, or the kind's default.
    pub fn selectivity_or_default(&self) -> f64 {
        self.selectivity.unwrap_or_else(|| self.kind.default_selectivity())
    }

    /// Whether one copy per edge device preserves the computation.
    pub fn locally_replicable(&self) -> bool {
        !self.stateful && self.kind.locally_replicable(self.stateful)
    }
}

/// One end of a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Endpoint {
    /// A pipeline input.
    Source(SourceId),
    /// An operator.
    Operator(OperatorId),
    /// A pipeline output.
    Sink(SinkId),
}

impl Endpoint {
    /// The operator, if this endpoint is one.
    pub fn operator(self) -> Option<OperatorId> {
        match self {
            Self::Operator(o) => Some(o),
            _ => None,
        }
    }
}

/// A directed stream between two endpoints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stream {
    /// Dense id.
    pub id: StreamId,
    /// Producer.
    pub from: Endpoint,
    /// Consumer.
    pub to: Endpoint,
    /// Chained-request rate hint at the sources' reference rate (e.g. the edge rates of Fig. 6).
    pub rate: Option<f64>,
    /// Where it was declared.
    pub origin: Origin,
}

/// A validated pipeline with precomputed adjacency.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pipeline {
    /// Pipeline name.
    pub name: String,
    /// Free-form description.
    pub description: String,
    /// Inputs.
    pub sources: Vec<Source>,
    /// Processing steps.
    pub operators: Vec<Operator>,
    /// Outputs.
    pub sinks: Vec<Sink>,
    /// Streams, in spec order.
    pub streams: Vec<Stream>,
    /// The spec text the pipeline was parsed from (shipped to workers that join later).
    pub spec_text: String,
    adjacency: Adjacency,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct Adjacency {
    op_inputs: Vec<Vec<StreamId>>,
    op_outputs: Vec<Vec<StreamId>>,
    source_outputs: Vec<Vec<StreamId>>,
    sink_inputs: Vec<Vec<StreamId>>,
    topological: Vec<OperatorId>,
}

impl Pipeline {
    /// Assembles a pipeline from already validated parts (used by the spec parser only).
    pub(crate) fn assemble(
        name: String,
        description: String,
        sources: Vec<Source>,
        operators: Vec<Operator>,
        sinks: Vec<Sink>,
        streams: Vec<Stream>,
        spec_text: String,
    ) -> Self {
        let mut adj = Adjacency {
            op_inputs: vec![Vec::new(); operators.len()],
            op_outputs: vec![Vec::new(); operators.len()],
            source_outputs: vec![Vec::new(); sources.len()],
            sink_inputs: vec![Vec::new(); sinks.len()],
            topological: Vec::new(),
        };
        for s in &streams {
            match s.from {
                Endpoint::Source(x) => adj.source_outputs[x.index()].push(s.id),
                Endpoint::Operator(x) => adj.op_outputs[x.index()].push(s.id),
                Endpoint::Sink(_) => {}
            }
            match s.to {
                Endpoint::Operator(x) => adj.op_inputs[x.index()].push(s.id),
                Endpoint::Sink(x) => adj.sink_inputs[x.index()].push(s.id),
                Endpoint::Source(_) => {}
            }
        }
        Self { name, description, sources, operators, sinks, streams, spec_text, adjacency: adj }
    }

    /// Computes the topological order; `Err` holds the operators left on a cycle.
    pub(crate) fn order_topologically(&mut self) -> Result<(), Vec<OperatorId>> {
        self.adjacency.topological = self.kahn_order()?;
        Ok(())
    }

    /// Kahn's algorithm over operators, smallest id first among ready ones; `Err` holds the
    /// operators left on a cycle.
    pub(crate) fn kahn_order(&self) -> Result<Vec<OperatorId>, Vec<OperatorId>> {
        let n = self.operators.len();
        let mut indegree: Vec<usize> =
            (0..n).map(|o| self.predecessors(OperatorId::from(o)).count()).collect();
        let mut ready: std::collections::BTreeSet<OperatorId> =
            (0..n).filter(|&o| indegree[o] == 0).map(OperatorId::from).collect();
        let mut order = Vec::with_capacity(n);
        while let Some(o) = ready.pop_first() {
            order.push(o);
            for s in self.successors(o) {
                indegree[s.index()] -= 1;
                if indegree[s.index()] == 0 {
                    ready.insert(s);
                }
            }
        }
        if order.len() == n {
            Ok(order)
        } else {
            Err((0..n).filter(|&o| indegree[o] > 0).map(OperatorId::from).collect())
        }
    }

    /// The operator named `name`.
    pub fn operator_id(&self, name: &str) -> Option<OperatorId> {
        self.operators.iter().find(|o| o.name == name).map(|o| o.id)
    }

    /// The operator with id `id`.
    pub fn operator(&self, id: OperatorId) -> &Operator {
        &self.operators[id.index()]
    }

    /// The source named `name`.
    pub fn source_id(&self, name: &str) -> Option<SourceId> {
        self.sources.iter().find(|s| s.name == name).map(|s| s.id)
    }

    /// The stream with id `id`.
    pub fn stream(&self, id: StreamId) -> &Stream {
        &self.streams[id.index()]
    }

    /// Streams into `op`.
    pub fn inputs(&self, op: OperatorId) -> &[StreamId] {
        &self.adjacency.op_inputs[op.index()]
    }

    /// Streams out of `op`, in spec order: output port `i` is `outputs(op)[i]`.
    pub fn outputs(&self, op: OperatorId) -> &[StreamId] {
        &self.adjacency.op_outputs[op.index()]
    }

    /// Streams out of a source.
    pub fn source_outputs(&self, src: SourceId) -> &[StreamId] {
        &self.adjacency.source_outputs[src.index()]
    }

    /// Streams into a sink.
    pub fn sink_inputs(&self, sink: SinkId) -> &[StreamId] {
        &self.adjacency.sink_inputs[sink.index()]
    }

    /// Operators fed by `op`, one per stream (in port order).
    pub fn successors(&self, op: OperatorId) -> impl Iterator<Item = OperatorId> + '_ {
        self.outputs(op).iter().filter_map(|s| self.stream(*s).to.operator())
    }

    /// Operators feeding `op`, one per stream.
    pub fn predecessors(&self, op: OperatorId) -> impl Iterator<Item = OperatorId> + '_ {
        self.inputs(op).iter().filter_map(|s| self.stream(*s).from.operator())
    }

    /// Operators fed directly by a source.
    pub fn entry_operators(&self) -> Vec<OperatorId> {
        let mut v: Vec<OperatorId> = self
            .streams
            .iter()
            .filter(|s| matches!(s.from, Endpoint::Source(_)))
            .filter_map(|s| s.to.operator())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// Operators with no operator successor (they feed only sinks, or nothing).
    pub fn terminal_operators(&self) -> Vec<OperatorId> {
        self.operators
            .iter()
            .map(|o| o.id)
            .filter(|&o| self.successors(o).next().is_none())
            .collect()
    }

    /// Operators in a topological order (smallest id first among ready ones).
    pub fn topological_order(&self) -> &[OperatorId] {
        &self.adjacency.topological
    }

    /// Human name of an endpoint.
    pub fn endpoint_name(&self, e: Endpoint) -> &str {
        match e {
            Endpoint::Source(s) => &self.sources[s.index()].name,
            Endpoint::Operator(o) => &self.operators[o.index()].name,
            Endpoint::Sink(s) => &self.sinks[s.index()].name,
        }
    }
}
