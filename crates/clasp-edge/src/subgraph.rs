//! The two halves of a cut pipeline as pipelines of their own.
//!
//! A device group runs its part of the cut as a sub-pipeline whose sinks are the cut streams
//! (one per connector); the cloud runs the rest as a sub-pipeline whose sources are the cut
//! streams arriving from the devices. Both are generated as spec text and validated by
//! [`clasp_core::spec::parse`] like any spec, so every name stays what the original pipeline
//! calls it: operators and sinks keep their names, sources keep theirs, and a connector is named
//! after its stream ([`connector_name`]).
//!
//! Input ports matter (a join tells rides from fares by port), so every operator's input streams
//! are declared in the original order. When the cloud both runs an operator for data of devices
//! that do not and receives that operator's output from devices that do, the two copies of the
//! stream meet in a `union` (`<from>.<to>.merge`, the built-in `identity` function) that takes
//! the stream's place, and the consumer's ports stay as they were.
//!
//! A part without operators has no sub-pipeline (a spec needs one): a device then forwards its
//! raw data, and a cloud writes what arrives to the sinks.

use crate::error::EdgeError;
use clasp_core::pipeline::{Operator, ServiceMode, ServicePer, Source};
use clasp_core::{Endpoint, OperatorId, Pipeline, SourceId, StreamId};
use clasp_plan::edgecut::{DevicePart, EdgeCut};
use toml::{Table, Value};

/// A cut stream as both sides name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connector {
    /// The device pipeline's sink and the cloud pipeline's source of this stream.
    pub name: String,
    /// The stream in the original pipeline.
    pub stream: StreamId,
}

/// What every device of one group runs.
#[derive(Clone, Debug)]
pub struct DeviceGraph {
    /// The device's sub-pipeline; `None` when it runs no operator and forwards its raw data.
    pub pipeline: Option<Pipeline>,
    /// The sources it holds (ids of the original pipeline), sorted.
    pub sources: Vec<SourceId>,
    /// Its cut streams, in stream order; with a sub-pipeline, each is the sink of its name.
    pub connectors: Vec<Connector>,
}

/// What the cloud runs.
#[derive(Clone, Debug)]
pub struct CloudGraph {
    /// The cloud's sub-pipeline; `None` when it runs no operator and only writes sinks.
    pub pipeline: Option<Pipeline>,
    /// Sources whose raw data is in the cloud (ids of the original pipeline).
    pub sources: Vec<SourceId>,
    /// Every cut stream arriving from devices, in stream order; each is the source of its name.
    pub ingress: Vec<Connector>,
}

/// The name of the connector on stream `s`: the source's own name for a raw stream of a source
/// with one output (so the all-in-cloud part is the original pipeline), `<from>.<to>` otherwise.
pub fn connector_name(p: &Pipeline, s: StreamId) -> String {
    let st = p.stream(s);
    match st.from {
        Endpoint::Source(x) if p.source_outputs(x).len() == 1 => p.sources[x.index()].name.clone(),
        from => format!("{}.{}", p.endpoint_name(from), p.endpoint_name(st.to)),
    }
}

/// The sub-pipeline of device part `part` of a cut of `p`.
pub fn device_graph(p: &Pipeline, part: &DevicePart) -> Result<DeviceGraph, EdgeError> {
    let connectors: Vec<Connector> = part
        .connectors
        .iter()
        .map(|c| Connector { name: connector_name(p, c.stream), stream: c.stream })
        .collect();
    let mut graph = DeviceGraph { pipeline: None, sources: part.sources.clone(), connectors };
    if part.operators.is_empty() {
        return Ok(graph);
    }
    let mut spec = SpecBuilder::new(&p.name, "device part");
    for &s in &part.sources {
        spec.source(&p.sources[s.index()]);
    }
    for &o in &part.operators {
        spec.operator(p.operator(o));
    }
    for c in &graph.connectors {
        spec.sink(&c.name);
    }
    for st in &p.streams {
        if part.streams.contains(&st.id) {
            spec.stream(p.endpoint_name(st.from), p.endpoint_name(st.to), st.rate);
        } else if let Some(c) = graph.connectors.iter().find(|c| c.stream == st.id) {
            spec.stream(p.endpoint_name(st.from), &c.name, st.rate);
        }
    }
    let what = format!("device part of {}", part.devices.join(", "));
    graph.pipeline = Some(spec.parse(&what)?);
    Ok(graph)
}

/// The cloud's sub-pipeline of cut `cut` of `p`.
pub fn cloud_graph(p: &Pipeline, cut: &EdgeCut) -> Result<CloudGraph, EdgeError> {
    let ingress: Vec<Connector> = cut
        .cloud
        .ingress
        .iter()
        .map(|&s| Connector { name: connector_name(p, s), stream: s })
        .collect();
    let mut graph = CloudGraph { pipeline: None, sources: cut.cloud.sources.clone(), ingress };
    if cut.cloud.operators.is_empty() {
        return Ok(graph);
    }
    let in_cloud = |o: OperatorId| cut.cloud.operators.contains(&o);
    let mut spec = SpecBuilder::new(&p.name, "cloud part");
    for &s in &cut.cloud.sources {
        spec.source(&p.sources[s.index()]);
    }
    for c in &graph.ingress {
        let raw_of = match p.stream(c.stream).from {
            Endpoint::Source(x) => Some(&p.sources[x.index()]),
            _ => None,
        };
        spec.ingress_source(&c.name, raw_of);
    }
    for &o in &cut.cloud.operators {
        spec.operator(p.operator(o));
    }
    for s in &p.sinks {
        spec.sink(&s.name);
    }
    for st in &p.streams {
        let to_cloud = match st.to {
            Endpoint::Operator(o) => in_cloud(o),
            Endpoint::Sink(_) => true,
            Endpoint::Source(_) => false,
        };
        if !to_cloud {
            continue;
        }
        let (from, to) = (p.endpoint_name(st.from), p.endpoint_name(st.to));
        let internal = cut.cloud.streams.contains(&st.id);
        let arriving = graph.ingress.iter().find(|c| c.stream == st.id);
        match (internal, arriving) {
            (true, None) => spec.stream(from, to, st.rate),
            (false, Some(c)) => spec.stream(&c.name, to, st.rate),
            (true, Some(c)) => {
                let merge = format!("{from}.{to}.merge");
                spec.merge(&merge);
                spec.stream(from, &merge, None);
                spec.stream(&c.name, &merge, None);
                spec.stream(&merge, to, st.rate);
            }
            // No data of this stream reaches the cloud: every device producing it also runs
            // its consumer, which the cloud runs only for other inputs.
            (false, None) => {}
        }
    }
    graph.pipeline = Some(spec.parse("cloud part")?);
    Ok(graph)
}

/// Spec text under construction.
struct SpecBuilder {
    name: String,
    description: String,
    sources: Vec<Value>,
    operators: Vec<Value>,
    sinks: Vec<Value>,
    streams: Vec<Value>,
}

fn table(pairs: impl IntoIterator<Item = (&'static str, Value)>) -> Value {
    Value::Table(pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect::<Table>())
}

fn text(s: &str) -> Value {
    Value::String(s.to_owned())
}

impl SpecBuilder {
    fn new(pipeline: &str, part: &str) -> Self {
        Self {
            name: pipeline.to_owned(),
            description: format!("{part} of `{pipeline}` (generated by the edge runner)"),
            sources: Vec::new(),
            operators: Vec::new(),
            sinks: Vec::new(),
            streams: Vec::new(),
        }
    }

    fn source(&mut self, s: &Source) {
        let mut t = Table::new();
        t.insert("name".into(), text(&s.name));
        if let Some(k) = s.key_field {
            t.insert("key_field".into(), Value::Integer(i64::from(k)));
        }
        if let Some(f) = &s.format {
            t.insert("format".into(), text(f));
        }
        if let Some(r) = s.rate {
            t.insert("rate".into(), Value::Float(r));
        }
        if let Some(f) = &s.event_time {
            t.insert("event_time".into(), text(f));
            let bound = i64::try_from(s.out_of_orderness).unwrap_or(i64::MAX);
            t.insert("out_of_orderness".into(), Value::Integer(bound));
        }
        self.sources.push(Value::Table(t));
    }

    /// A source fed by a connector. Its records carry their keys; `key_field` only satisfies
    /// the rule that a source feeding a stateful operator says how its records are keyed.
    /// Records carry the event times the device's operators gave them; the raw lines of a
    /// source with event times (`raw_of`) get theirs read as the source reads them. The
    /// watermark is the devices' ([`crate::cloud::ConnectorInput`]), never one the runtime
    /// would derive from the order in which the network merged the devices' streams: hence
    /// the unbounded out-of-orderness.
    fn ingress_source(&mut self, name: &str, raw_of: Option<&Source>) {
        let mut t = table([
            ("name", text(name)),
            ("key_field", Value::Integer(0)),
            ("format", text("edge connector: keyed records")),
            ("out_of_orderness", Value::Integer(i64::MAX)),
        ]);
        if let (Value::Table(t), Some(f)) = (&mut t, raw_of.and_then(|s| s.event_time.as_ref())) {
            t.insert("event_time".into(), text(f));
        }
        self.sources.push(t);
    }

    fn operator(&mut self, o: &Operator) {
        let mut t = Table::new();
        t.insert("name".into(), text(&o.name));
        t.insert("kind".into(), text(o.kind.as_str()));
        t.insert("function".into(), text(&o.function));
        t.insert("stateful".into(), Value::Boolean(o.stateful));
        if o.stateful {
            t.insert("ordered".into(), Value::Boolean(o.ordered));
        }
        if let Some(k) = &o.key {
            t.insert("key".into(), text(k));
        }
        if let Some(s) = o.selectivity {
            t.insert("selectivity".into(), Value::Float(s));
        }
        if o.allowed_lateness > 0 {
            let lateness = i64::try_from(o.allowed_lateness).unwrap_or(i64::MAX);
            t.insert("allowed_lateness".into(), Value::Integer(lateness));
        }
        if let Some(st) = &o.service {
            t.insert("service_time_us".into(), Value::Float(st.micros));
            let mode = match st.mode {
                ServiceMode::Spin => "spin",
                ServiceMode::Sleep => "sleep",
            };
            let per = match st.per {
                ServicePer::Record => "record",
                ServicePer::Request => "request",
            };
            t.insert("service_mode".into(), text(mode));
            t.insert("service_per".into(), text(per));
        }
        if let (false, Ok(v)) = (o.params.is_empty(), Value::try_from(&o.params)) {
            t.insert("params".into(), v);
        }
        self.operators.push(Value::Table(t));
    }

    fn merge(&mut self, name: &str) {
        self.operators.push(table([
            ("name", text(name)),
            ("kind", text("union")),
            ("function", text("identity")),
        ]));
    }

    fn sink(&mut self, name: &str) {
        self.sinks.push(table([("name", text(name))]));
    }

    fn stream(&mut self, from: &str, to: &str, rate: Option<f64>) {
        let mut t = Table::new();
        t.insert("from".into(), text(from));
        t.insert("to".into(), text(to));
        if let Some(r) = rate {
            t.insert("rate".into(), Value::Float(r));
        }
        self.streams.push(Value::Table(t));
    }

    /// The spec text.
    fn text(&self) -> String {
        let mut doc = Table::new();
        doc.insert(
            "pipeline".into(),
            table([("name", text(&self.name)), ("description", text(&self.description))]),
        );
        for (key, list) in [
            ("source", &self.sources),
            ("operator", &self.operators),
            ("sink", &self.sinks),
            ("stream", &self.streams),
        ] {
            doc.insert(key.into(), Value::Array(list.clone()));
        }
        toml::to_string(&doc).unwrap_or_default()
    }

    fn parse(&self, part: &str) -> Result<Pipeline, EdgeError> {
        let file = format!("<{part} of {}>", self.name);
        clasp_core::spec::parse(&self.text(), &file)
            .map_err(|e| EdgeError::Subgraph { part: part.to_owned(), error: Box::new(e) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clasp_plan::edgecut::{self, CostModel};

    fn cut_of(app: &str, devices: &str) -> (Pipeline, EdgeCut) {
        let p = clasp_apps::pipeline(app).unwrap();
        let d = edgecut::devices::parse(devices, "devices.toml", &p).unwrap();
        let cut = edgecut::cut(&p, &CostModel::from_spec(&p), &d);
        (p, cut)
    }

    const W2: &str = "[[device]]\nid = \"a\"\nsources = [\"rides\", \"fares\"]\n\
                      [[device]]\nid = \"b\"\nsources = [\"rides\", \"fares\"]\n";

    #[test]
    fn w2_device_part_ends_in_connectors_and_the_cloud_joins_them_on_the_right_ports() {
        let (p, cut) = cut_of("taxi-w2", W2);
        let dev = device_graph(&p, &cut.groups[0]).unwrap();
        let names: Vec<&str> = dev.connectors.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["filter_night.join", "fare_fields.join"]);
        let dp = dev.pipeline.unwrap();
        assert_eq!(dp.operators.len(), 5);
        assert_eq!(dp.sinks.len(), 2);
        let cloud = cloud_graph(&p, &cut).unwrap();
        let cp = cloud.pipeline.unwrap();
        let join = cp.operator_id("join").unwrap();
        let ports: Vec<&str> =
            cp.inputs(join).iter().map(|s| cp.endpoint_name(cp.stream(*s).from)).collect();
        assert_eq!(ports, ["filter_night.join", "fare_fields.join"]);
        assert_eq!(cp.operator(join).params, p.operator(p.operator_id("join").unwrap()).params);
    }

    #[test]
    fn w1_cloud_runs_no_operator_and_w3_keeps_window_parameters() {
        let one = "[[device]]\nid = \"a\"\nsources = [\"rides\"]\n";
        let (p, cut) = cut_of("taxi-w1", one);
        assert!(cloud_graph(&p, &cut).unwrap().pipeline.is_none());
        let (p, cut) = cut_of("taxi-w3", one);
        let cp = cloud_graph(&p, &cut).unwrap().pipeline.unwrap();
        let w = cp.operator(cp.operator_id("window").unwrap());
        assert_eq!(w.params["size_min"], 15);
        assert!(w.stateful && w.key.as_deref() == Some("cell"));
        assert_eq!(cp.sources[0].name, "to_cell.window");
    }

    #[test]
    fn all_in_cloud_part_is_the_original_pipeline() {
        let (p, _) = cut_of("taxi-w2", W2);
        let d = edgecut::devices::parse(W2, "devices.toml", &p).unwrap();
        let cut = crate::cut::all_in_cloud(&p, &d);
        assert!(device_graph(&p, &cut.groups[0]).unwrap().pipeline.is_none());
        let cp = cloud_graph(&p, &cut).unwrap().pipeline.unwrap();
        let names = |q: &Pipeline| -> Vec<String> {
            q.streams
                .iter()
                .map(|s| format!("{}>{}", q.endpoint_name(s.from), q.endpoint_name(s.to)))
                .collect()
        };
        assert_eq!(names(&cp), names(&p));
    }

    #[test]
    fn a_stream_arriving_both_from_devices_and_the_cloud_is_merged() {
        // Device b may run only filters: filter_fare runs on both, fare_fields on a only; the
        // cloud runs fare_fields for b and receives it from a.
        let mixed = "[[device]]\nid = \"a\"\nsources = [\"rides\", \"fares\"]\n\
                     [[device]]\nid = \"b\"\nsources = [\"rides\", \"fares\"]\nkinds = [\"filter\"]\n";
        let (p, cut) = cut_of("taxi-w2", mixed);
        let cp = cloud_graph(&p, &cut).unwrap().pipeline.unwrap();
        let merge = cp.operator_id("fare_fields.join.merge").unwrap();
        let join = cp.operator_id("join").unwrap();
        let ports: Vec<&str> =
            cp.inputs(join).iter().map(|s| cp.endpoint_name(cp.stream(*s).from)).collect();
        assert_eq!(ports, ["filter_night.join", "fare_fields.join.merge"]);
        assert_eq!(cp.inputs(merge).len(), 2);
    }
}
