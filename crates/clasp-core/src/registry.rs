//! The registry from the function names of spec files to operator implementations, and to the
//! functions that read event times from input lines.

use crate::batch::Batch;
use crate::operator::{Context, OpenInfo, Operator};
use crate::pipeline::{Operator as OperatorSpec, Origin, Pipeline};
use std::collections::BTreeMap;
use std::sync::Arc;

pub use crate::erased::{DynOperator, Execution, erase};

/// Reads a record's event time from its input line (`None`: the line has none).
pub type EventTimeFn = Arc<dyn Fn(&[u8]) -> Option<u64> + Send + Sync>;

/// Opens a source from its command-line argument (`--input SOURCE=NAME:ARG`) and the run's seed.
pub type SourceFactory =
    Arc<dyn Fn(&str, u64) -> Result<Box<dyn crate::source::Source>, String> + Send + Sync>;

/// Builds an operator from its spec entry (which carries its `params`).
pub type Factory = Arc<dyn Fn(&OperatorSpec) -> Result<Box<dyn DynOperator>, String> + Send + Sync>;

/// Why a pipeline's functions cannot be instantiated.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RegistryError {
    /// The spec names a function nobody registered.
    #[error(
        "{origin}: operator `{operator}` runs function `{function}`, which is not registered\n  help: use one of: {known}"
    )]
    UnknownFunction {
        /// Operator name.
        operator: String,
        /// Function name from the spec.
        function: String,
        /// Where the operator is declared.
        origin: Origin,
        /// Registered names, comma-separated.
        known: String,
    },
    /// The function rejected the operator's parameters.
    #[error("{origin}: operator `{operator}` (function `{function}`): {message}")]
    BadParams {
        /// Operator name.
        operator: String,
        /// Function name.
        function: String,
        /// Where the operator is declared.
        origin: Origin,
        /// What is wrong.
        message: String,
    },
    /// A source names an event-time function nobody registered.
    #[error(
        "{origin}: source `{source_name}` reads event times with `{function}`, which is not registered\n  help: use one of: {known}"
    )]
    UnknownEventTime {
        /// Source name.
        source_name: String,
        /// Function name from the spec.
        function: String,
        /// Where the source is declared.
        origin: Origin,
        /// Registered event-time functions, comma-separated.
        known: String,
    },
    /// An operator's `open` failed.
    #[error("{origin}: operator `{operator}` failed to open: {message}")]
    Open {
        /// Operator name.
        operator: String,
        /// Where the operator is declared.
        origin: Origin,
        /// What its `open` said.
        message: String,
    },
    /// The function keeps state but the spec declares the operator stateless, so its state
    /// would not be partitioned or migrated.
    #[error(
        "{origin}: operator `{operator}` runs `{function}`, which keeps keyed state, but is not declared stateful\n  help: add `stateful = true` and `key = \"...\"`"
    )]
    UndeclaredState {
        /// Operator name.
        operator: String,
        /// Function name.
        function: String,
        /// Where the operator is declared.
        origin: Origin,
    },
}

/// Opens every operator of `p` (`ops` indexed by `OperatorId`), as hosted by `worker`.
pub fn open_all(
    ops: &mut [Box<dyn DynOperator>],
    p: &Pipeline,
    worker: Option<u32>,
    key_groups: u32,
) -> Result<(), RegistryError> {
    for (o, spec) in ops.iter_mut().zip(&p.operators) {
        let info = OpenInfo { operator: &spec.name, worker, key_groups };
        o.open(&info).map_err(|message| RegistryError::Open {
            operator: spec.name.clone(),
            origin: spec.origin.clone(),
            message,
        })?;
    }
    Ok(())
}

/// Function name → factory, and event-time function name → function.
#[derive(Clone)]
pub struct Registry {
    factories: BTreeMap<String, Factory>,
    event_times: BTreeMap<String, EventTimeFn>,
    sources: BTreeMap<String, SourceFactory>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.factories.keys()).finish()
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}

/// Passes every record through unchanged to every output stream (`function = "identity"`,
/// the default when a spec names no function).
#[derive(Clone, Copy, Debug, Default)]
pub struct Identity;

impl Operator for Identity {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        if input.is_timed() {
            for (r, t) in input.iter_timed() {
                match t {
                    Some(t) => ctx.emit_at(t, r.key, r.value),
                    None => ctx.emit(r.key, r.value),
                }
            }
        } else {
            for r in input.iter() {
                ctx.emit(r.key, r.value);
            }
        }
    }
}

impl Registry {
    /// A registry holding the built-in `identity` function.
    pub fn new() -> Self {
        let mut r = Self {
            factories: BTreeMap::new(),
            event_times: BTreeMap::new(),
            sources: BTreeMap::new(),
        };
        r.register_operator("identity", Identity);
        r
    }

    /// Registers a factory under `name`, replacing any previous one.
    pub fn register(
        &mut self,
        name: &str,
        factory: impl Fn(&OperatorSpec) -> Result<Box<dyn DynOperator>, String> + Send + Sync + 'static,
    ) {
        self.factories.insert(name.to_owned(), Arc::new(factory));
    }

    /// Registers a parameterless operator under `name`.
    pub fn register_operator<T: Operator + Clone>(&mut self, name: &str, op: T) {
        self.register(name, move |_| Ok(erase(op.clone())));
    }

    /// Registers a function reading event times from input lines, for sources that declare
    /// `event_time = "name"`.
    pub fn register_event_time(
        &mut self,
        name: &str,
        f: impl Fn(&[u8]) -> Option<u64> + Send + Sync + 'static,
    ) {
        self.event_times.insert(name.to_owned(), Arc::new(f));
    }

    /// The event-time function registered as `name`.
    pub fn event_time(&self, name: &str) -> Option<EventTimeFn> {
        self.event_times.get(name).cloned()
    }

    /// Registers a kind of input, opened by `--input SOURCE=name:ARG` on the command line.
    pub fn register_source(
        &mut self,
        name: &str,
        f: impl Fn(&str, u64) -> Result<Box<dyn crate::source::Source>, String> + Send + Sync + 'static,
    ) {
        self.sources.insert(name.to_owned(), Arc::new(f));
    }

    /// The kind of input registered as `name`.
    pub fn source(&self, name: &str) -> Option<SourceFactory> {
        self.sources.get(name).cloned()
    }

    /// Registered kinds of input.
    pub fn source_names(&self) -> impl Iterator<Item = &str> {
        self.sources.keys().map(String::as_str)
    }

    /// The event-time function of every source of `p` (`None` for sources without one).
    pub fn event_times(&self, p: &Pipeline) -> Result<Vec<Option<EventTimeFn>>, RegistryError> {
        p.sources
            .iter()
            .map(|s| match &s.event_time {
                None => Ok(None),
                Some(name) => {
                    self.event_time(name).map(Some).ok_or_else(|| RegistryError::UnknownEventTime {
                        source_name: s.name.clone(),
                        function: name.clone(),
                        origin: s.origin.clone(),
                        known: self.event_times.keys().cloned().collect::<Vec<_>>().join(", "),
                    })
                }
            })
            .collect()
    }

    /// Registered function names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.factories.keys().map(String::as_str)
    }

    /// Whether `name` is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.factories.contains_key(name)
    }

    /// Builds the implementation of one operator.
    pub fn instantiate(&self, op: &OperatorSpec) -> Result<Box<dyn DynOperator>, RegistryError> {
        let factory =
            self.factories.get(&op.function).ok_or_else(|| RegistryError::UnknownFunction {
                operator: op.name.clone(),
                function: op.function.clone(),
                origin: op.origin.clone(),
                known: self.names().collect::<Vec<_>>().join(", "),
            })?;
        let built = factory(op).map_err(|message| RegistryError::BadParams {
            operator: op.name.clone(),
            function: op.function.clone(),
            origin: op.origin.clone(),
            message,
        })?;
        if built.keeps_state() && !op.stateful {
            return Err(RegistryError::UndeclaredState {
                operator: op.name.clone(),
                function: op.function.clone(),
                origin: op.origin.clone(),
            });
        }
        Ok(built)
    }

    /// Builds every operator of a pipeline, indexed by `OperatorId`.
    pub fn instantiate_all(
        &self,
        p: &Pipeline,
    ) -> Result<Vec<Box<dyn DynOperator>>, RegistryError> {
        p.operators.iter().map(|o| self.instantiate(o)).collect()
    }
}
