//! The operator API that user code implements, and the registry from the function names of spec
//! files to implementations.
//!
//! An operator processes one request — a [`Batch`] of records — at a time, with access to its
//! keyed state through a [`Context`], and emits records to its output streams. Emitting copies
//! the record into the runtime's routing buffers; nothing in the API allocates per record.

use crate::batch::{Batch, Record};
use crate::pipeline::{Operator as OperatorSpec, Origin, Pipeline};
use crate::state::{KeyedStore, StateAccess, StateStore, StateValue};
use std::any::TypeId;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where emitted records go. The runtime's implementation routes each record to the worker
/// that owns its key (or by share) as it is emitted; tests collect them.
pub trait Emitter {
    /// Emits a record on every output stream of the operator.
    fn emit(&mut self, key: &[u8], value: &[u8]);
    /// Emits a record on output port `port` only (the `port`-th output stream in spec order).
    fn emit_to(&mut self, port: usize, key: &[u8], value: &[u8]);
}

/// Records that an operator rejected, counted per reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rejections {
    counts: Vec<(&'static str, u64)>,
}

impl Rejections {
    /// Counts one rejected record.
    pub fn add(&mut self, reason: &'static str) {
        match self.counts.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => self.counts.push((reason, 1)),
        }
    }

    /// Adds another tally to this one.
    pub fn merge(&mut self, other: &Rejections) {
        for (reason, n) in &other.counts {
            match self.counts.iter_mut().find(|(r, _)| r == reason) {
                Some((_, m)) => *m += n,
                None => self.counts.push((reason, *n)),
            }
        }
    }

    /// `(reason, count)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        self.counts.iter().copied()
    }

    /// Total rejected records.
    pub fn total(&self) -> u64 {
        self.counts.iter().map(|(_, n)| n).sum()
    }

    /// Forgets every count, keeping the allocation.
    pub fn clear(&mut self) {
        self.counts.clear();
    }
}

/// What an operator sees while it processes one request.
pub struct Context<'a, S> {
    state: StateAccess<'a, S>,
    out: &'a mut dyn Emitter,
    input_port: usize,
    rejects: &'a mut Rejections,
}

impl<S> std::fmt::Debug for Context<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("input_port", &self.input_port).finish_non_exhaustive()
    }
}

impl<'a, S: StateValue> Context<'a, S> {
    /// A context over `store`, emitting into `out`, for a request that arrived on input port
    /// `input_port` (the index of its stream among the operator's input streams).
    pub fn new(
        store: &'a KeyedStore<S>,
        out: &'a mut dyn Emitter,
        input_port: usize,
        rejects: &'a mut Rejections,
    ) -> Self {
        Self { state: StateAccess::new(store), out, input_port, rejects }
    }

    /// The state of the record's key, created with `Default` when first seen.
    #[inline]
    pub fn state(&mut self, r: Record<'_>) -> &mut S {
        self.state.get_mut(r)
    }

    /// The state of the record's key, if it exists.
    #[inline]
    pub fn existing_state(&mut self, r: Record<'_>) -> Option<&mut S> {
        self.state.get(r)
    }

    /// Removes the state of the record's key.
    pub fn remove_state(&mut self, r: Record<'_>) -> Option<S> {
        self.state.remove(r)
    }

    /// Whether this request read or wrote state so far.
    pub fn touched_state(&self) -> bool {
        self.state.touched()
    }

    /// Emits a record on every output stream.
    #[inline]
    pub fn emit(&mut self, key: &[u8], value: &[u8]) {
        self.out.emit(key, value);
    }

    /// Emits a record on one output port.
    #[inline]
    pub fn emit_to(&mut self, port: usize, key: &[u8], value: &[u8]) {
        self.out.emit_to(port, key, value);
    }

    /// Index of the input stream this request arrived on.
    pub fn input_port(&self) -> usize {
        self.input_port
    }

    /// Counts a record this operator could not process (malformed input, say); the pipeline
    /// goes on and the run summary reports the count per reason.
    pub fn reject(&mut self, reason: &'static str) {
        self.rejects.add(reason);
    }
}

/// What user code implements.
pub trait Operator: Send + Sync + 'static {
    /// The value kept per key; `()` for stateless operators.
    type State: StateValue;

    /// Processes one request.
    fn process(&self, input: &Batch, ctx: &mut Context<'_, Self::State>);
}

/// What one execution did, for the metrics monitor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Execution {
    /// Whether the request read or wrote keyed state.
    pub touched_state: bool,
}

/// An operator with its state type erased, as the runtime holds it.
pub trait DynOperator: Send + Sync {
    /// A new, empty state store with `groups` key groups.
    fn new_store(&self, groups: u32) -> Box<dyn StateStore>;
    /// Whether the implementation keeps state (its `State` is not `()`).
    fn keeps_state(&self) -> bool;
    /// Processes one request against `store` (which must come from [`DynOperator::new_store`]).
    fn process(
        &self,
        input: &Batch,
        input_port: usize,
        store: &dyn StateStore,
        out: &mut dyn Emitter,
        rejects: &mut Rejections,
    ) -> Execution;
}

impl std::fmt::Debug for dyn DynOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynOperator").field("keeps_state", &self.keeps_state()).finish()
    }
}

struct Erased<T>(T);

impl<T: Operator> DynOperator for Erased<T> {
    fn new_store(&self, groups: u32) -> Box<dyn StateStore> {
        Box::new(KeyedStore::<T::State>::new(groups))
    }

    fn keeps_state(&self) -> bool {
        TypeId::of::<T::State>() != TypeId::of::<()>()
    }

    fn process(
        &self,
        input: &Batch,
        input_port: usize,
        store: &dyn StateStore,
        out: &mut dyn Emitter,
        rejects: &mut Rejections,
    ) -> Execution {
        let store = store
            .as_any()
            .downcast_ref::<KeyedStore<T::State>>()
            .expect("the runtime passes the store this operator created");
        let mut ctx = Context::new(store, out, input_port, rejects);
        self.0.process(input, &mut ctx);
        Execution { touched_state: ctx.touched_state() }
    }
}

/// Wraps a typed operator for the runtime.
pub fn erase<T: Operator>(op: T) -> Box<dyn DynOperator> {
    Box::new(Erased(op))
}

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

/// Function name → factory.
#[derive(Clone)]
pub struct Registry {
    factories: BTreeMap<String, Factory>,
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
        for r in input.iter() {
            ctx.emit(r.key, r.value);
        }
    }
}

impl Registry {
    /// A registry holding the built-in `identity` function.
    pub fn new() -> Self {
        let mut r = Self { factories: BTreeMap::new() };
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

/// An [`Emitter`] that collects what it is given, per port (`None` = every port).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CollectingEmitter {
    /// `(port, key, value)` in emission order.
    pub records: Vec<(Option<usize>, Vec<u8>, Vec<u8>)>,
}

impl Emitter for CollectingEmitter {
    fn emit(&mut self, key: &[u8], value: &[u8]) {
        self.records.push((None, key.to_vec(), value.to_vec()));
    }
    fn emit_to(&mut self, port: usize, key: &[u8], value: &[u8]) {
        self.records.push((Some(port), key.to_vec(), value.to_vec()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse;

    #[derive(Clone)]
    struct Count;
    impl Operator for Count {
        type State = u64;
        fn process(&self, input: &Batch, ctx: &mut Context<'_, u64>) {
            for r in input.iter() {
                if r.key.is_empty() {
                    ctx.reject("empty key");
                    continue;
                }
                *ctx.state(r) += 1;
            }
        }
    }

    const SPEC: &str = r#"
[[source]]
name = "in"
key_field = 0
[[operator]]
name = "count"
function = "count"
stateful = true
key = "word"
[[operator]]
name = "pass"
function = "count"
[[stream]]
from = "in"
to = "count"
[[stream]]
from = "in"
to = "pass"
"#;

    #[test]
    fn registry_builds_typed_operators_and_checks_declared_state() {
        let p = parse(SPEC, "t.toml").unwrap();
        let mut reg = Registry::new();
        reg.register_operator("count", Count);
        let op = reg.instantiate(&p.operators[0]).unwrap();
        assert!(op.keeps_state());
        let err = reg.instantiate(&p.operators[1]).unwrap_err();
        assert!(matches!(err, RegistryError::UndeclaredState { .. }), "{err}");
        let mut unknown = p.operators[0].clone();
        unknown.function = "nope".into();
        let msg = reg.instantiate(&unknown).unwrap_err().to_string();
        assert!(
            msg.contains("t.toml:6") && msg.contains("`nope`") && msg.contains("count, identity"),
            "{msg}"
        );
    }

    #[test]
    fn erased_operator_runs_against_its_store() {
        let mut reg = Registry::new();
        reg.register_operator("count", Count);
        let p = parse(SPEC, "t.toml").unwrap();
        let op = reg.instantiate(&p.operators[0]).unwrap();
        let store = op.new_store(16);
        let input: Batch =
            [(&b"a"[..], &b""[..]), (b"b", b""), (b"a", b""), (b"", b"")].into_iter().collect();
        let mut out = CollectingEmitter::default();
        let mut rejects = Rejections::default();
        let exec = op.process(&input, 0, store.as_ref(), &mut out, &mut rejects);
        assert!(exec.touched_state);
        assert_eq!(store.key_count(), 2);
        assert_eq!(rejects.iter().collect::<Vec<_>>(), vec![("empty key", 1)]);
        let mut dump = Vec::new();
        store.dump_json("count", &mut dump).unwrap();
        assert!(String::from_utf8(dump).unwrap().contains("\"key\":\"a\",\"value\":2"));
    }
}
