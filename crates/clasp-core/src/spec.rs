//! The TOML spec format (documented in `docs/spec-format.md`) and its validation.
//!
//! Parsing goes descriptor → validated record: the raw TOML tables below keep byte spans so
//! that every problem is reported with the file, line, column and field it concerns, plus what
//! to do about it. Only a fully valid spec becomes a [`Pipeline`].

use crate::ids::{OperatorId, SinkId, SourceId, StreamId};
use crate::kind::OperatorKind;
use crate::locate::{FileError, FileProblem, LineIndex, closest, read_then};
use crate::pipeline::{
    Endpoint, Operator, Origin, Pipeline, ServiceMode, ServicePer, ServiceTime, Sink, Source,
    Stream,
};
use serde::Deserialize;
use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use toml::Spanned;

/// What is wrong with a spec.
#[derive(Clone, Debug, PartialEq)]
pub enum Problem {
    /// The file could not be read.
    Io(String),
    /// Not valid TOML, or a value of the wrong type.
    Syntax(String),
    /// A field the format does not have.
    UnknownField(String),
    /// A required field is missing.
    MissingField(String),
    /// Two elements share a name.
    DuplicateName { name: String, first_line: usize },
    /// A name with characters outside `[A-Za-z0-9_.-]`, or empty.
    BadName(String),
    /// `kind` is not one of Table I's kinds.
    UnknownKind(String),
    /// A stream names an element that does not exist.
    UnknownNode { name: String, suggestion: Option<String> },
    /// A stream leads into a source.
    SourceWithInput { source: String },
    /// A stream leaves a sink.
    SinkWithOutput { sink: String },
    /// The same stream is declared twice.
    DuplicateStream { from: String, to: String },
    /// The streams form a cycle.
    Cycle(Vec<String>),
    /// A stateful operator without `key`.
    StatefulWithoutKey(String),
    /// `key` on an operator that is not stateful.
    KeyWithoutState(String),
    /// `ordered` on an operator that is not stateful.
    OrderedWithoutState(String),
    /// An operator no source reaches.
    Unreachable(String),
    /// A source that feeds nothing, or a sink that receives nothing.
    Dangling(String),
    /// A number that must be finite and non-negative.
    Negative { value: f64 },
    /// A number above the largest the field allows.
    TooLarge { value: f64, max: f64 },
    /// A value outside the allowed set.
    BadValue { value: String, allowed: &'static [&'static str] },
    /// The spec declares no source or no operator.
    Empty(&'static str),
    /// A source feeds a stateful operator directly but does not say what keys its records.
    UnkeyedInput { source: String, operator: String },
}

/// A number as a person writes it: huge ones in exponent form.
struct Short(f64);

impl fmt::Display for Short {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.abs() >= 1e12 { write!(f, "{:e}", self.0) } else { write!(f, "{}", self.0) }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "cannot read the spec: {e}"),
            Self::Syntax(e) => write!(f, "invalid TOML: {e}"),
            Self::UnknownField(e) => write!(f, "unknown field: {e}"),
            Self::MissingField(name) => write!(f, "missing required field `{name}`"),
            Self::DuplicateName { name, first_line } => {
                write!(f, "the name `{name}` is already used on line {first_line}")
            }
            Self::BadName(name) => write!(f, "invalid name `{name}`"),
            Self::UnknownKind(k) => write!(f, "unknown operator kind `{k}`"),
            Self::UnknownNode { name, .. } => {
                write!(f, "no source, operator or sink is named `{name}`")
            }
            Self::SourceWithInput { source } => write!(f, "source `{source}` cannot have inputs"),
            Self::SinkWithOutput { sink } => write!(f, "sink `{sink}` cannot have outputs"),
            Self::DuplicateStream { from, to } => {
                write!(f, "the stream `{from}` -> `{to}` is declared twice")
            }
            Self::Cycle(path) => write!(f, "the streams form a cycle: {}", path.join(" -> ")),
            Self::StatefulWithoutKey(op) => {
                write!(f, "operator `{op}` is stateful but has no `key`")
            }
            Self::KeyWithoutState(op) => {
                write!(f, "operator `{op}` has a `key` but is not stateful")
            }
            Self::OrderedWithoutState(op) => {
                write!(f, "operator `{op}` sets `ordered` but is not stateful")
            }
            Self::Unreachable(op) => write!(f, "operator `{op}` is not reachable from any source"),
            Self::Dangling(what) => write!(f, "{what}"),
            Self::Negative { value } => {
                write!(f, "the value {value} must be a finite number >= 0")
            }
            Self::TooLarge { value, max } => {
                write!(f, "the value {} is larger than the largest allowed, {max}", Short(*value))
            }
            Self::BadValue { value, allowed } => {
                write!(f, "`{value}` is not one of: {}", allowed.join(", "))
            }
            Self::Empty(what) => write!(f, "the spec declares no {what}"),
            Self::UnkeyedInput { source, operator } => write!(
                f,
                "source `{source}` feeds stateful operator `{operator}` but declares no `key_field`"
            ),
        }
    }
}

impl FileProblem for Problem {
    fn io(message: String) -> Self {
        Self::Io(message)
    }

    fn syntax(message: String, unknown: bool) -> Self {
        if unknown { Self::UnknownField(message) } else { Self::Syntax(message) }
    }

    fn help(&self) -> String {
        match self {
            Self::Io(_) => "check the path and permissions".into(),
            Self::Syntax(_) => "fix the TOML syntax or the value's type (see docs/spec-format.md)".into(),
            Self::UnknownField(_) => {
                "remove the field or correct its spelling (see docs/spec-format.md)".into()
            }
            Self::MissingField(name) => format!("add `{name} = ...` to this table"),
            Self::DuplicateName { .. } => {
                "give every source, operator and sink a distinct name".into()
            }
            Self::BadName(_) => "use letters, digits, `_`, `-` or `.` only".into(),
            Self::UnknownKind(_) => format!(
                "use one of: {}",
                OperatorKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
            ),
            Self::UnknownNode { suggestion: Some(s), .. } => {
                format!("did you mean `{s}`? Declare the element or fix the name")
            }
            Self::UnknownNode { .. } => {
                "declare it as a [[source]], [[operator]] or [[sink]], or fix the name".into()
            }
            Self::SourceWithInput { .. } => {
                "sources only produce records: point the stream at an operator or a sink".into()
            }
            Self::SinkWithOutput { .. } => {
                "sinks only consume records: start the stream at a source or an operator".into()
            }
            Self::DuplicateStream { .. } => "delete one of the two [[stream]] tables".into(),
            Self::Cycle(_) => "pipelines are acyclic: remove one stream of the cycle".into(),
            Self::StatefulWithoutKey(_) => {
                "add `key = \"...\"` naming what the state is partitioned by, or set `stateful = false`"
                    .into()
            }
            Self::KeyWithoutState(_) => "set `stateful = true` or remove `key`".into(),
            Self::OrderedWithoutState(_) => {
                "`ordered` only applies to stateful operators: remove it".into()
            }
            Self::Unreachable(_) => {
                "add a [[stream]] that connects it to a source or upstream operator, or remove it"
                    .into()
            }
            Self::Dangling(_) => "connect it with a [[stream]] or remove it".into(),
            Self::Negative { .. } => "use a number that is zero or positive".into(),
            Self::TooLarge { max, .. } => format!("use a number between 0 and {max}"),
            Self::BadValue { allowed, .. } => format!("use one of: {}", allowed.join(", ")),
            Self::Empty(what) => format!("declare at least one {what}"),
            Self::UnkeyedInput { .. } => "add `key_field = N` to the source: the 0-based field of \
                 each input line (comma-separated, else whitespace-separated) that is the key"
                .into(),
        }
    }
}

/// A spec problem with its location. Displays as `file:line:col: field: problem` plus a help
/// line saying what to do.
/// A spec problem, located: `file:line:column: in `field`: problem` plus a help line.
pub type SpecError = FileError<Problem>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    pipeline: Option<RawHeader>,
    #[serde(default, rename = "source")]
    sources: Vec<Spanned<RawSource>>,
    #[serde(default, rename = "operator")]
    operators: Vec<Spanned<RawOperator>>,
    #[serde(default, rename = "sink")]
    sinks: Vec<Spanned<RawSink>>,
    #[serde(default, rename = "stream")]
    streams: Vec<Spanned<RawStream>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHeader {
    name: Option<Spanned<String>>,
    description: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSource {
    name: Option<Spanned<String>>,
    rate: Option<Spanned<f64>>,
    key_field: Option<u32>,
    format: Option<String>,
    event_time: Option<String>,
    out_of_orderness: Option<u64>,
    description: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSink {
    name: Option<Spanned<String>>,
    description: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOperator {
    name: Option<Spanned<String>>,
    kind: Option<Spanned<String>>,
    function: Option<Spanned<String>>,
    stateful: Option<bool>,
    ordered: Option<Spanned<bool>>,
    key: Option<Spanned<String>>,
    selectivity: Option<Spanned<f64>>,
    service_time_us: Option<Spanned<f64>>,
    service_mode: Option<Spanned<String>>,
    service_per: Option<Spanned<String>>,
    params: Option<toml::Table>,
    allowed_lateness: Option<u64>,
    description: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStream {
    from: Option<Spanned<String>>,
    to: Option<Spanned<String>>,
    rate: Option<Spanned<f64>>,
}

/// Largest rate a spec may give a source or stream (records per second).
pub const MAX_RATE: f64 = 1e9;
/// Largest selectivity of an operator (records out per record in).
pub const MAX_SELECTIVITY: f64 = 1e6;
/// Largest emulated service time (µs per record or request): one minute.
pub const MAX_SERVICE_US: f64 = 60e6;

/// Reads and validates the spec file at `path`.
pub fn load(path: &std::path::Path) -> Result<Pipeline, SpecError> {
    read_then(path, parse)
}

/// Parses and validates spec `text`; `file` names it in errors.
pub fn parse(text: &str, file: &str) -> Result<Pipeline, SpecError> {
    let raw: RawSpec = toml::from_str(text).map_err(|e| SpecError::syntax(text, file, &e))?;
    Validator { text, file, lines: LineIndex::new(text) }.validate(raw)
}

struct Validator<'a> {
    text: &'a str,
    file: &'a str,
    lines: LineIndex,
}

/// A name and where it was declared, before ids exist.
#[derive(Clone, Copy)]
enum Node {
    Source(usize),
    Operator(usize),
    Sink(usize),
}

impl Validator<'_> {
    fn error(&self, span: Range<usize>, field: impl Into<String>, problem: Problem) -> SpecError {
        SpecError::at(self.text, self.file, span, field, problem)
    }

    fn origin(&self, span: &Range<usize>) -> Origin {
        Origin { file: self.file.into(), line: self.lines.line(span.start) }
    }

    fn name(
        &self,
        name: &Option<Spanned<String>>,
        table_span: &Range<usize>,
        field: &str,
    ) -> Result<(String, Range<usize>), SpecError> {
        let Some(name) = name else {
            return Err(self.error(
                table_span.clone(),
                format!("{field}.name"),
                Problem::MissingField("name".into()),
            ));
        };
        let valid = !name.get_ref().is_empty()
            && name.get_ref().chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
        if !valid {
            return Err(self.error(
                name.span(),
                format!("{field}.name"),
                Problem::BadName(name.get_ref().clone()),
            ));
        }
        Ok((name.get_ref().clone(), name.span()))
    }

    /// A number that must be finite, at least 0 and at most `max`.
    fn bounded(
        &self,
        v: &Option<Spanned<f64>>,
        field: String,
        max: f64,
    ) -> Result<Option<f64>, SpecError> {
        match v {
            Some(x) if !(x.get_ref().is_finite() && *x.get_ref() >= 0.0) => {
                Err(self.error(x.span(), field, Problem::Negative { value: *x.get_ref() }))
            }
            Some(x) if *x.get_ref() > max => {
                Err(self.error(x.span(), field, Problem::TooLarge { value: *x.get_ref(), max }))
            }
            Some(x) => Ok(Some(*x.get_ref())),
            None => Ok(None),
        }
    }

    fn choice<T: Copy>(
        &self,
        v: &Option<Spanned<String>>,
        field: String,
        options: &[(&'static str, T)],
        allowed: &'static [&'static str],
        default: T,
    ) -> Result<T, SpecError> {
        let Some(v) = v else { return Ok(default) };
        options
            .iter()
            .find(|(s, _)| s.eq_ignore_ascii_case(v.get_ref()))
            .map(|(_, t)| *t)
            .ok_or_else(|| {
                self.error(
                    v.span(),
                    field,
                    Problem::BadValue { value: v.get_ref().clone(), allowed },
                )
            })
    }

    fn validate(&self, raw: RawSpec) -> Result<Pipeline, SpecError> {
        let mut names: HashMap<String, (Node, usize)> = HashMap::new();
        let mut register = |name: &str, span: &Range<usize>, node: Node, field: &str| {
            let line = self.lines.line(span.start);
            if let Some((_, first_line)) = names.get(name) {
                return Err(self.error(
                    span.clone(),
                    format!("{field}.name"),
                    Problem::DuplicateName { name: name.into(), first_line: *first_line },
                ));
            }
            names.insert(name.into(), (node, line));
            Ok(())
        };

        let mut sources = Vec::new();
        for (i, s) in raw.sources.iter().enumerate() {
            let field = format!("source[{i}]");
            let (name, span) = self.name(&s.get_ref().name, &s.span(), &field)?;
            register(&name, &span, Node::Source(i), &field)?;
            let rate = self.bounded(&s.get_ref().rate, format!("{field}.rate"), MAX_RATE)?;
            let _ = &s.get_ref().description;
            sources.push(Source {
                id: SourceId::from(i),
                name,
                rate,
                key_field: s.get_ref().key_field,
                format: s.get_ref().format.clone(),
                event_time: s.get_ref().event_time.clone(),
                out_of_orderness: s.get_ref().out_of_orderness.unwrap_or(0),
                origin: self.origin(&span),
            });
        }

        let mut operators = Vec::new();
        let mut op_name_spans = Vec::new();
        for (i, o) in raw.operators.iter().enumerate() {
            let field = format!("operator[{i}]");
            let (name, span) = self.name(&o.get_ref().name, &o.span(), &field)?;
            register(&name, &span, Node::Operator(i), &field)?;
            operators.push(self.operator(i, o.get_ref(), name, &span, &field)?);
            op_name_spans.push(span);
        }

        let mut sinks = Vec::new();
        for (i, s) in raw.sinks.iter().enumerate() {
            let field = format!("sink[{i}]");
            let (name, span) = self.name(&s.get_ref().name, &s.span(), &field)?;
            register(&name, &span, Node::Sink(i), &field)?;
            let _ = &s.get_ref().description;
            sinks.push(Sink { id: SinkId::from(i), name, origin: self.origin(&span) });
        }

        let streams = self.streams(&raw.streams, &names)?;
        let header = raw.pipeline.as_ref();
        let name = match header.and_then(|h| h.name.as_ref()) {
            Some(n) => n.get_ref().clone(),
            None => std::path::Path::new(self.file)
                .file_stem()
                .map_or_else(|| "pipeline".into(), |s| s.to_string_lossy().into_owned()),
        };
        let description = header.and_then(|h| h.description.clone()).unwrap_or_default();

        if sources.is_empty() {
            return Err(self.error(0..0, "source", Problem::Empty("[[source]]")));
        }
        if operators.is_empty() {
            return Err(self.error(0..0, "operator", Problem::Empty("[[operator]]")));
        }
        let mut pipeline = Pipeline::assemble(
            name,
            description,
            sources,
            operators,
            sinks,
            streams,
            self.text.to_string(),
        );
        self.check_graph(&mut pipeline, &raw, &op_name_spans)?;
        Ok(pipeline)
    }

    fn operator(
        &self,
        i: usize,
        o: &RawOperator,
        name: String,
        span: &Range<usize>,
        field: &str,
    ) -> Result<Operator, SpecError> {
        let kind = match &o.kind {
            Some(k) => OperatorKind::parse(k.get_ref()).ok_or_else(|| {
                self.error(
                    k.span(),
                    format!("{field}.kind"),
                    Problem::UnknownKind(k.get_ref().clone()),
                )
            })?,
            None => OperatorKind::User,
        };
        let stateful = o.stateful.unwrap_or(false);
        let key = o.key.as_ref().map(|k| k.get_ref().clone());
        match (&o.key, stateful) {
            (None, true) => {
                return Err(self.error(
                    span.clone(),
                    format!("{field}.key"),
                    Problem::StatefulWithoutKey(name),
                ));
            }
            (Some(k), false) => {
                return Err(self.error(
                    k.span(),
                    format!("{field}.key"),
                    Problem::KeyWithoutState(name),
                ));
            }
            _ => {}
        }
        if let (Some(ord), false) = (&o.ordered, stateful) {
            return Err(self.error(
                ord.span(),
                format!("{field}.ordered"),
                Problem::OrderedWithoutState(name),
            ));
        }
        let selectivity =
            self.bounded(&o.selectivity, format!("{field}.selectivity"), MAX_SELECTIVITY)?;
        let micros =
            self.bounded(&o.service_time_us, format!("{field}.service_time_us"), MAX_SERVICE_US)?;
        let mode = self.choice(
            &o.service_mode,
            format!("{field}.service_mode"),
            &[("spin", ServiceMode::Spin), ("sleep", ServiceMode::Sleep)],
            &["spin", "sleep"],
            ServiceMode::Spin,
        )?;
        let per = self.choice(
            &o.service_per,
            format!("{field}.service_per"),
            &[("record", ServicePer::Record), ("request", ServicePer::Request)],
            &["record", "request"],
            ServicePer::Record,
        )?;
        let params = match &o.params {
            Some(t) => match serde_json::to_value(t) {
                Ok(serde_json::Value::Object(m)) => m,
                _ => serde_json::Map::new(),
            },
            None => serde_json::Map::new(),
        };
        let _ = &o.description;
        Ok(Operator {
            id: OperatorId::from(i),
            name,
            kind,
            function: o
                .function
                .as_ref()
                .map_or_else(|| "identity".into(), |f| f.get_ref().clone()),
            stateful,
            ordered: stateful && o.ordered.as_ref().is_none_or(|v| *v.get_ref()),
            key,
            selectivity,
            service: micros.map(|micros| ServiceTime { micros, mode, per }),
            params,
            allowed_lateness: o.allowed_lateness.unwrap_or(0),
            origin: self.origin(span),
        })
    }

    fn streams(
        &self,
        raw: &[Spanned<RawStream>],
        names: &HashMap<String, (Node, usize)>,
    ) -> Result<Vec<Stream>, SpecError> {
        let mut seen: HashMap<(String, String), ()> = HashMap::new();
        let mut streams = Vec::with_capacity(raw.len());
        for (i, s) in raw.iter().enumerate() {
            let field = format!("stream[{i}]");
            let end = |v: &Option<Spanned<String>>,
                       which: &str|
             -> Result<(Node, Spanned<String>), SpecError> {
                let Some(v) = v else {
                    return Err(self.error(
                        s.span(),
                        format!("{field}.{which}"),
                        Problem::MissingField(which.into()),
                    ));
                };
                match names.get(v.get_ref()) {
                    Some((node, _)) => Ok((*node, v.clone())),
                    None => Err(self.error(
                        v.span(),
                        format!("{field}.{which}"),
                        Problem::UnknownNode {
                            name: v.get_ref().clone(),
                            suggestion: closest(v.get_ref(), names.keys()),
                        },
                    )),
                }
            };
            let (from, from_name) = end(&s.get_ref().from, "from")?;
            let (to, to_name) = end(&s.get_ref().to, "to")?;
            if let Node::Sink(_) = from {
                return Err(self.error(
                    from_name.span(),
                    format!("{field}.from"),
                    Problem::SinkWithOutput { sink: from_name.get_ref().clone() },
                ));
            }
            if let Node::Source(_) = to {
                return Err(self.error(
                    to_name.span(),
                    format!("{field}.to"),
                    Problem::SourceWithInput { source: to_name.get_ref().clone() },
                ));
            }
            let pair = (from_name.get_ref().clone(), to_name.get_ref().clone());
            if seen.insert(pair.clone(), ()).is_some() {
                return Err(self.error(
                    s.span(),
                    field,
                    Problem::DuplicateStream { from: pair.0, to: pair.1 },
                ));
            }
            let rate = self.bounded(&s.get_ref().rate, format!("{field}.rate"), MAX_RATE)?;
            streams.push(Stream {
                id: StreamId::from(i),
                from: endpoint(from),
                to: endpoint(to),
                rate,
                origin: self.origin(&s.span()),
            });
        }
        Ok(streams)
    }

    fn check_graph(
        &self,
        p: &mut Pipeline,
        raw: &RawSpec,
        op_spans: &[Range<usize>],
    ) -> Result<(), SpecError> {
        if let Err(stuck) = p.order_topologically() {
            let path = find_cycle(p, &stuck);
            let (first, next) = (path[0], path[1 % path.len()]);
            let names: Vec<String> =
                path.iter().chain([&first]).map(|o| p.operator(*o).name.clone()).collect();
            let stream = p
                .streams
                .iter()
                .find(|s| s.from == Endpoint::Operator(first) && s.to == Endpoint::Operator(next))
                .map_or(0, |s| s.id.index());
            return Err(self.error(
                raw.streams[stream].span(),
                format!("stream[{stream}]"),
                Problem::Cycle(names),
            ));
        }
        for s in &p.sources {
            if p.source_outputs(s.id).is_empty() {
                let span = raw.sources[s.id.index()].span();
                return Err(self.error(
                    span,
                    format!("source[{}]", s.id.index()),
                    Problem::Dangling(format!("source `{}` feeds no operator or sink", s.name)),
                ));
            }
        }
        for s in &p.sinks {
            if p.sink_inputs(s.id).is_empty() {
                let span = raw.sinks[s.id.index()].span();
                return Err(self.error(
                    span,
                    format!("sink[{}]", s.id.index()),
                    Problem::Dangling(format!("sink `{}` receives no stream", s.name)),
                ));
            }
        }
        for st in &p.streams {
            if let (Endpoint::Source(src), Endpoint::Operator(op)) = (st.from, st.to) {
                let (source, operator) = (&p.sources[src.index()], p.operator(op));
                if operator.stateful && source.key_field.is_none() {
                    return Err(self.error(
                        raw.sources[src.index()].span(),
                        format!("source[{}].key_field", src.index()),
                        Problem::UnkeyedInput {
                            source: source.name.clone(),
                            operator: operator.name.clone(),
                        },
                    ));
                }
            }
        }
        let mut reached = vec![false; p.operators.len()];
        let mut stack = p.entry_operators();
        while let Some(o) = stack.pop() {
            if !std::mem::replace(&mut reached[o.index()], true) {
                stack.extend(p.successors(o));
            }
        }
        if let Some(o) = reached.iter().position(|r| !r) {
            return Err(self.error(
                op_spans[o].clone(),
                format!("operator[{o}]"),
                Problem::Unreachable(p.operators[o].name.clone()),
            ));
        }
        Ok(())
    }
}

fn endpoint(n: Node) -> Endpoint {
    match n {
        Node::Source(i) => Endpoint::Source(SourceId::from(i)),
        Node::Operator(i) => Endpoint::Operator(OperatorId::from(i)),
        Node::Sink(i) => Endpoint::Sink(SinkId::from(i)),
    }
}

/// A cycle among the operators Kahn's algorithm could not order, as a list of operators.
fn find_cycle(p: &Pipeline, stuck: &[OperatorId]) -> Vec<OperatorId> {
    let on: std::collections::HashSet<OperatorId> = stuck.iter().copied().collect();
    // Every stuck operator has a stuck predecessor; walking predecessors must revisit a node.
    let mut path = vec![stuck[0]];
    loop {
        let cur = *path.last().expect("non-empty");
        let prev = p
            .predecessors(cur)
            .find(|x| on.contains(x))
            .expect("stuck nodes have stuck predecessors");
        if let Some(pos) = path.iter().position(|&x| x == prev) {
            let mut cycle: Vec<OperatorId> = path[pos..].to_vec();
            cycle.reverse();
            return cycle;
        }
        path.push(prev);
    }
}
