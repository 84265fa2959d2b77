//! Edge devices, their raw data and their constraints: the resource model of the Planner paper
//! (§III-A, Eq. 1) read from a devices file (documented in `docs/devices-format.md`).
//!
//! A device `d` holds part of the raw data of the sources `g⁻¹(d)`; the devices holding data of
//! a source `s` are `g(s)`, and each holds an equal share of the source's rate. Every device has
//! one link to the cloud with a per-item cost `W_res`, and a constraint `C_d` (see
//! [`Constraint`]). Sources whose raw data is already in the cloud are listed under `[cloud]`.

use clasp_core::kind::OperatorKind;
use clasp_core::locate::{FileError, FileProblem, closest, line_col, read_then};
use clasp_core::pipeline::Operator;
use clasp_core::{Pipeline, SourceId};
use serde::Deserialize;
use std::collections::HashMap;
use std::fmt;
use std::ops::Range;
use toml::Spanned;

/// What a device can run, besides the rules every device obeys.
///
/// Every device runs only locally replicable operators (Table I, Theorem 1), never sinks, and
/// only operators whose inputs all come from its own sources or from operators it runs
/// (Eq. 6–7). On top of that a constraint may restrict, per operator, the kinds and functions
/// the device supports, and may set budgets on the whole device part: at most `max_operators`
/// operators, and at most `max_load` items per second entering them on one device.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Constraint {
    /// Kinds the device supports, sorted; `None`: every locally replicable kind.
    pub kinds: Option<Vec<OperatorKind>>,
    /// Functions the device supports, sorted; an entry ending in `*` matches every function
    /// starting with what precedes it. `None`: every function.
    pub functions: Option<Vec<String>>,
    /// Budget: the most operators the device runs.
    pub max_operators: Option<usize>,
    /// Budget: the most items per second entering the device's operators (sum over operators
    /// of their input weights on one device).
    pub max_load: Option<f64>,
}

impl Constraint {
    /// The per-operator part of `C_d`: locally replicable, of a supported kind and function.
    pub fn admits(&self, op: &Operator, replicable: bool) -> bool {
        replicable
            && self.kinds.as_ref().is_none_or(|k| k.contains(&op.kind))
            && self.functions.as_ref().is_none_or(|f| f.iter().any(|p| matches(p, &op.function)))
    }

    /// Whether the constraint has a budget over the whole device part.
    pub fn has_budget(&self) -> bool {
        self.max_operators.is_some() || self.max_load.is_some()
    }
}

impl fmt::Display for Constraint {
    /// `locally replicable`, then each restriction and budget, separated by `; `.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("locally replicable")?;
        if let Some(kinds) = &self.kinds {
            let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
            write!(f, "; kinds {}", names.join(", "))?;
        }
        if let Some(functions) = &self.functions {
            write!(f, "; functions {}", functions.join(", "))?;
        }
        if let Some(n) = self.max_operators {
            write!(f, "; at most {n} operators")?;
        }
        if let Some(load) = self.max_load {
            write!(f, "; load at most {load} items/s")?;
        }
        Ok(())
    }
}

/// Whether `function` matches the pattern `pattern` (exact, or a prefix ending in `*`).
fn matches(pattern: &str, function: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => function.starts_with(prefix),
        None => pattern == function,
    }
}

/// One edge device.
#[derive(Clone, Debug, PartialEq)]
pub struct Device {
    /// Unique id.
    pub id: String,
    /// `g⁻¹(d)`: the sources whose raw data it holds, sorted.
    pub sources: Vec<SourceId>,
    /// `W_res(d, ς)`: the cost of one item over its link to the cloud.
    pub link_cost: f64,
    /// `C_d`.
    pub constraint: Constraint,
    /// 1-based line where it is declared.
    pub line: usize,
}

/// The devices serving one pipeline, validated against it.
#[derive(Clone, Debug, PartialEq)]
pub struct Devices {
    /// The file they were read from.
    pub file: String,
    /// The edge devices, in file order.
    pub devices: Vec<Device>,
    /// Sources whose raw data is in the cloud already (they cost nothing), sorted.
    pub cloud_sources: Vec<SourceId>,
    /// `|g(s)|` per source: how many devices hold part of its raw data.
    pub holders: Vec<usize>,
}

impl Devices {
    /// The share of source `s`'s rate one device holding it produces: `1 / |g(s)|`.
    pub fn share(&self, s: SourceId) -> f64 {
        match self.holders[s.index()] {
            0 => 0.0,
            n => 1.0 / n as f64,
        }
    }
}

/// What is wrong with a devices file.
#[derive(Clone, Debug, PartialEq)]
pub enum Problem {
    /// The file could not be read.
    Io(String),
    /// Not valid TOML, or a value of the wrong type.
    Syntax(String),
    /// A field the format does not have.
    UnknownField(String),
    /// A required field is missing.
    MissingField(&'static str),
    /// The file declares no `[[device]]`.
    NoDevices,
    /// The file names another pipeline.
    WrongPipeline { named: String, actual: String },
    /// Two devices share an id.
    DuplicateDevice { id: String, first_line: usize },
    /// An id with characters outside `[A-Za-z0-9_.-]`, or empty.
    BadId(String),
    /// A device lists no source.
    NoSources(String),
    /// A source the pipeline does not have.
    UnknownSource { name: String, suggestion: Option<String> },
    /// A source listed twice in one list.
    DuplicateSource(String),
    /// A source held both by devices and by the cloud.
    SourceInBoth(String),
    /// A pipeline source that no device and not the cloud provides.
    Unprovided { source: String, pipeline: String },
    /// A number that must be finite and non-negative.
    Negative(f64),
    /// A kind that is not one of Table I's.
    UnknownKind(String),
    /// A kind devices never run: it is not locally replicable.
    NotReplicable(OperatorKind),
    /// An empty function pattern.
    EmptyPattern,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Io(e) => write!(f, "cannot read the devices file: {e}"),
            Self::Syntax(e) => write!(f, "invalid TOML: {e}"),
            Self::UnknownField(e) => write!(f, "unknown field: {e}"),
            Self::MissingField(name) => write!(f, "missing required field `{name}`"),
            Self::NoDevices => write!(f, "the file declares no [[device]]"),
            Self::WrongPipeline { named, actual } => {
                write!(f, "the devices are for pipeline `{named}`, not `{actual}`")
            }
            Self::DuplicateDevice { id, first_line } => {
                write!(f, "the device id `{id}` is already used on line {first_line}")
            }
            Self::BadId(id) => write!(f, "invalid device id `{id}`"),
            Self::NoSources(id) => write!(f, "device `{id}` lists no source"),
            Self::UnknownSource { name, .. } => write!(f, "the pipeline has no source `{name}`"),
            Self::DuplicateSource(name) => write!(f, "source `{name}` is listed twice"),
            Self::SourceInBoth(name) => {
                write!(f, "source `{name}` is held by devices and by the cloud")
            }
            Self::Unprovided { source, pipeline } => write!(
                f,
                "source `{source}` of pipeline `{pipeline}` has no raw data anywhere: \
                 no device and not the cloud lists it"
            ),
            Self::Negative(v) => write!(f, "the value {v} must be a finite number >= 0"),
            Self::UnknownKind(k) => write!(f, "unknown operator kind `{k}`"),
            Self::NotReplicable(k) => {
                write!(f, "kind `{k}` is not locally replicable, so no device runs it")
            }
            Self::EmptyPattern => write!(f, "an empty function pattern"),
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
            Self::Syntax(_) => {
                "fix the TOML syntax or the value's type (see docs/devices-format.md)".into()
            }
            Self::UnknownField(_) => {
                "remove the field or correct its spelling (see docs/devices-format.md)".into()
            }
            Self::MissingField(name) => format!("add `{name} = ...` to this table"),
            Self::NoDevices => "declare at least one [[device]] with `id` and `sources`".into(),
            Self::WrongPipeline { .. } => {
                "pass the devices file written for this pipeline, or correct `pipeline`".into()
            }
            Self::DuplicateDevice { .. } => "give every device a distinct `id`".into(),
            Self::BadId(_) => "use letters, digits, `_`, `-` or `.` only".into(),
            Self::NoSources(_) => {
                "list the sources whose raw data the device holds, or remove the device".into()
            }
            Self::UnknownSource { suggestion: Some(s), .. } => {
                format!("did you mean `{s}`? Use the name of a [[source]] of the pipeline")
            }
            Self::UnknownSource { .. } => "use the name of a [[source]] of the pipeline".into(),
            Self::DuplicateSource(_) => "list every source once".into(),
            Self::SourceInBoth(_) => {
                "a source's raw data is either on devices or in the cloud: remove one of the two"
                    .into()
            }
            Self::Unprovided { source, .. } => format!(
                "add `{source}` to the `sources` of the devices holding its data, or to \
                 `[cloud] sources` if the data is in the cloud"
            ),
            Self::Negative(_) => "use a number that is zero or positive".into(),
            Self::UnknownKind(_) => format!(
                "use one of: {}",
                OperatorKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
            ),
            Self::NotReplicable(_) => format!(
                "remove it: devices run only locally replicable kinds ({})",
                replicable_kinds().join(", ")
            ),
            Self::EmptyPattern => {
                "give a function name, or a prefix ending in `*` (`*` alone matches all)".into()
            }
        }
    }
}

fn replicable_kinds() -> Vec<&'static str> {
    OperatorKind::ALL.iter().filter(|k| k.locally_replicable(false)).map(|k| k.as_str()).collect()
}

/// A devices-file problem with its location. Displays as `file:line:col: in `field`: problem`
/// plus a help line saying what to do, like pipeline spec errors.
/// A devices-file problem, located like a pipeline spec error.
pub type DevicesError = FileError<Problem>;

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    pipeline: Option<Spanned<String>>,
    description: Option<String>,
    cloud: Option<Spanned<RawCloud>>,
    #[serde(default, rename = "device")]
    devices: Vec<Spanned<RawDevice>>,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCloud {
    #[serde(default)]
    sources: Vec<Spanned<String>>,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDevice {
    id: Option<Spanned<String>>,
    sources: Option<Spanned<Vec<Spanned<String>>>>,
    link_cost: Option<Spanned<f64>>,
    kinds: Option<Vec<Spanned<String>>>,
    functions: Option<Vec<Spanned<String>>>,
    max_operators: Option<Spanned<i64>>,
    max_load: Option<Spanned<f64>>,
    description: Option<String>,
}

/// Reads the devices file at `path` and validates it against `p`.
pub fn load(path: &std::path::Path, p: &Pipeline) -> Result<Devices, DevicesError> {
    read_then(path, |text, file| parse(text, file, p))
}

/// Parses devices-file `text` (named `file` in errors) and validates it against `p`.
pub fn parse(text: &str, file: &str, p: &Pipeline) -> Result<Devices, DevicesError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| DevicesError::syntax(text, file, &e))?;
    Validator { text, file, p }.validate(raw)
}

/// Parses devices-file `text` once and validates it against each of `pipelines`: the outer
/// error is a syntax error, the inner ones each pipeline's verdict.
pub fn parse_each(
    text: &str,
    file: &str,
    pipelines: &[&Pipeline],
) -> Result<Vec<Result<Devices, DevicesError>>, DevicesError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| DevicesError::syntax(text, file, &e))?;
    Ok(pipelines.iter().map(|p| Validator { text, file, p }.validate(raw.clone())).collect())
}

struct Validator<'a> {
    text: &'a str,
    file: &'a str,
    p: &'a Pipeline,
}

impl Validator<'_> {
    fn error(
        &self,
        span: Range<usize>,
        field: impl Into<String>,
        problem: Problem,
    ) -> DevicesError {
        DevicesError::at(self.text, self.file, span, field, problem)
    }

    fn validate(&self, raw: RawFile) -> Result<Devices, DevicesError> {
        let _ = &raw.description;
        if let Some(named) = raw.pipeline.as_ref().filter(|n| n.get_ref() != &self.p.name) {
            let problem = Problem::WrongPipeline {
                named: named.get_ref().clone(),
                actual: self.p.name.clone(),
            };
            return Err(self.error(named.span(), "pipeline", problem));
        }
        if raw.devices.is_empty() {
            return Err(self.error(0..0, "device", Problem::NoDevices));
        }
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut devices = Vec::with_capacity(raw.devices.len());
        for (i, d) in raw.devices.iter().enumerate() {
            let device = self.device(i, d)?;
            if let Some(&first_line) = seen.get(&device.id) {
                let span = d.get_ref().id.as_ref().map_or(d.span(), Spanned::span);
                let id = device.id;
                return Err(self.error(
                    span,
                    format!("device[{i}].id"),
                    Problem::DuplicateDevice { id, first_line },
                ));
            }
            seen.insert(device.id.clone(), device.line);
            devices.push(device);
        }
        let cloud_sources = match &raw.cloud {
            Some(c) => self.source_list(&c.get_ref().sources, "cloud.sources")?,
            None => Vec::new(),
        };
        let holders = self.check_providers(&raw, &devices, &cloud_sources)?;
        Ok(Devices { file: self.file.into(), devices, cloud_sources, holders })
    }

    fn device(&self, i: usize, d: &Spanned<RawDevice>) -> Result<Device, DevicesError> {
        let field = format!("device[{i}]");
        let raw = d.get_ref();
        let _ = &raw.description;
        let Some(id) = &raw.id else {
            return Err(self.error(d.span(), format!("{field}.id"), Problem::MissingField("id")));
        };
        let valid = !id.get_ref().is_empty()
            && id.get_ref().chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
        if !valid {
            return Err(self.error(
                id.span(),
                format!("{field}.id"),
                Problem::BadId(id.get_ref().clone()),
            ));
        }
        let Some(listed) = &raw.sources else {
            return Err(self.error(
                d.span(),
                format!("{field}.sources"),
                Problem::MissingField("sources"),
            ));
        };
        let sources = self.source_list(listed.get_ref(), &format!("{field}.sources"))?;
        if sources.is_empty() {
            let problem = Problem::NoSources(id.get_ref().clone());
            return Err(self.error(listed.span(), format!("{field}.sources"), problem));
        }
        Ok(Device {
            id: id.get_ref().clone(),
            sources,
            link_cost: self.non_negative(&raw.link_cost, &field, "link_cost")?.unwrap_or(1.0),
            constraint: self.constraint(raw, &field)?,
            line: line_col(self.text, id.span().start).0,
        })
    }

    fn constraint(&self, raw: &RawDevice, field: &str) -> Result<Constraint, DevicesError> {
        let kinds = match &raw.kinds {
            Some(list) => Some(self.kinds(list, field)?),
            None => None,
        };
        let functions = match &raw.functions {
            Some(list) => Some(self.functions(list, field)?),
            None => None,
        };
        let max_operators = match &raw.max_operators {
            Some(n) if *n.get_ref() < 0 => {
                let problem = Problem::Negative(*n.get_ref() as f64);
                return Err(self.error(n.span(), format!("{field}.max_operators"), problem));
            }
            Some(n) => Some(usize::try_from(*n.get_ref()).unwrap_or(usize::MAX)),
            None => None,
        };
        let max_load = self.non_negative(&raw.max_load, field, "max_load")?;
        Ok(Constraint { kinds, functions, max_operators, max_load })
    }

    fn kinds(
        &self,
        list: &[Spanned<String>],
        field: &str,
    ) -> Result<Vec<OperatorKind>, DevicesError> {
        let mut kinds = Vec::with_capacity(list.len());
        for (j, k) in list.iter().enumerate() {
            let f = format!("{field}.kinds[{j}]");
            let kind = OperatorKind::parse(k.get_ref()).ok_or_else(|| {
                self.error(k.span(), &f, Problem::UnknownKind(k.get_ref().clone()))
            })?;
            if !kind.locally_replicable(false) {
                return Err(self.error(k.span(), f, Problem::NotReplicable(kind)));
            }
            kinds.push(kind);
        }
        kinds.sort_by_key(|k| k.as_str());
        kinds.dedup();
        Ok(kinds)
    }

    fn functions(
        &self,
        list: &[Spanned<String>],
        field: &str,
    ) -> Result<Vec<String>, DevicesError> {
        let mut functions = Vec::with_capacity(list.len());
        for (j, f) in list.iter().enumerate() {
            if f.get_ref().is_empty() {
                return Err(self.error(
                    f.span(),
                    format!("{field}.functions[{j}]"),
                    Problem::EmptyPattern,
                ));
            }
            functions.push(f.get_ref().clone());
        }
        functions.sort();
        functions.dedup();
        Ok(functions)
    }

    fn non_negative(
        &self,
        v: &Option<Spanned<f64>>,
        field: &str,
        name: &str,
    ) -> Result<Option<f64>, DevicesError> {
        match v {
            Some(x) if !(x.get_ref().is_finite() && *x.get_ref() >= 0.0) => Err(self.error(
                x.span(),
                format!("{field}.{name}"),
                Problem::Negative(*x.get_ref()),
            )),
            Some(x) => Ok(Some(*x.get_ref())),
            None => Ok(None),
        }
    }

    /// Resolves a list of source names, rejecting unknown and repeated ones; sorted ids.
    fn source_list(
        &self,
        list: &[Spanned<String>],
        field: &str,
    ) -> Result<Vec<SourceId>, DevicesError> {
        let mut ids: Vec<SourceId> = Vec::with_capacity(list.len());
        for (j, name) in list.iter().enumerate() {
            let f = format!("{field}[{j}]");
            let Some(id) = self.p.source_id(name.get_ref()) else {
                let known = self.p.sources.iter().map(|s| &s.name);
                let problem = Problem::UnknownSource {
                    name: name.get_ref().clone(),
                    suggestion: closest(name.get_ref(), known),
                };
                return Err(self.error(name.span(), f, problem));
            };
            if ids.contains(&id) {
                return Err(self.error(
                    name.span(),
                    f,
                    Problem::DuplicateSource(name.get_ref().clone()),
                ));
            }
            ids.push(id);
        }
        ids.sort();
        Ok(ids)
    }

    /// Every pipeline source must have its raw data on devices or in the cloud, not both.
    /// Returns `|g(s)|` per source.
    fn check_providers(
        &self,
        raw: &RawFile,
        devices: &[Device],
        cloud: &[SourceId],
    ) -> Result<Vec<usize>, DevicesError> {
        let mut holders = vec![0; self.p.sources.len()];
        for s in devices.iter().flat_map(|d| &d.sources) {
            holders[s.index()] += 1;
        }
        if let Some(c) = &raw.cloud {
            for (j, name) in c.get_ref().sources.iter().enumerate() {
                let held = self.p.source_id(name.get_ref()).is_some_and(|s| holders[s.index()] > 0);
                if held {
                    let problem = Problem::SourceInBoth(name.get_ref().clone());
                    return Err(self.error(name.span(), format!("cloud.sources[{j}]"), problem));
                }
            }
        }
        if let Some(src) =
            self.p.sources.iter().find(|s| holders[s.id.index()] == 0 && !cloud.contains(&s.id))
        {
            let span = raw.cloud.as_ref().map_or(0..0, Spanned::span);
            let problem =
                Problem::Unprovided { source: src.name.clone(), pipeline: self.p.name.clone() };
            return Err(self.error(span, "cloud.sources", problem));
        }
        Ok(holders)
    }
}
