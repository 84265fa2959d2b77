//! The operator API that user code implements.
//!
//! An operator processes one request — a [`Batch`] of records — at a time, with access to its
//! keyed state through a [`Context`], and emits records to its output streams. Emitting copies
//! the record into the runtime's routing buffers; nothing in the API allocates per record.
//!
//! Lifecycle: [`Operator::open`] runs once per instance before its first request (on every
//! worker that hosts it), [`Operator::close`] when the instance stops. Time: records may carry
//! an event time; an operator that declares timers in [`Operator::timers`] sets them per key
//! through the [`Context`] and gets [`Operator::on_timer`] calls as the watermark (or the
//! clock) passes them — see [`crate::time`]. The registry mapping spec function names to
//! implementations is in [`crate::registry`].

use crate::batch::{Batch, Record};
use crate::hash::key_hash;
use crate::state::{KeyedStore, StateAccess, StateValue};
use crate::time::{TimeDomain, Timer, TimerUse};

pub use crate::registry::{
    DynOperator, Execution, Factory, Identity, Registry, RegistryError, erase,
};

/// Where emitted records go. The runtime's implementation routes each record to the worker
/// that owns its key (or by share) as it is emitted; tests collect them.
pub trait Emitter {
    /// Emits a record on every output stream of the operator.
    fn emit(&mut self, key: &[u8], value: &[u8]);
    /// Emits a record on output port `port` only (the `port`-th output stream in spec order).
    fn emit_to(&mut self, port: usize, key: &[u8], value: &[u8]);
    /// Emits a record with event time `time`, on output port `port` (`None`: every port).
    fn emit_timed(&mut self, port: Option<usize>, time: u64, key: &[u8], value: &[u8]);
}

/// Records that an operator rejected, counted per reason.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rejections {
    counts: Vec<(&'static str, u64)>,
}

impl Rejections {
    /// Counts one rejected record.
    pub fn add(&mut self, reason: &'static str) {
        self.add_many(reason, 1);
    }

    /// Counts `n` rejected records.
    pub fn add_many(&mut self, reason: &'static str, n: u64) {
        match self.counts.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, c)) => *c += n,
            None => self.counts.push((reason, n)),
        }
    }

    /// Adds another tally to this one.
    pub fn merge(&mut self, other: &Rejections) {
        for (reason, n) in &other.counts {
            self.add_many(reason, *n);
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

    /// The count for one reason.
    pub fn count(&self, reason: &str) -> u64 {
        self.counts.iter().find(|(r, _)| *r == reason).map_or(0, |(_, n)| *n)
    }

    /// Forgets every count, keeping the allocation.
    pub fn clear(&mut self) {
        self.counts.clear();
    }
}

/// The reason late records are counted under (see [`crate::time`]).
pub const LATE: &str = "late";

/// Where an operator instance runs, for [`Operator::open`].
#[derive(Clone, Copy, Debug)]
pub struct OpenInfo<'a> {
    /// The operator's name in the spec.
    pub operator: &'a str,
    /// The worker hosting this instance (`None` in the local driver).
    pub worker: Option<u32>,
    /// Key groups of its keyed state.
    pub key_groups: u32,
}

/// What an operator sees while it processes one request or fires timers.
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

    /// Emits a record with event time `time` on every output stream.
    #[inline]
    pub fn emit_at(&mut self, time: u64, key: &[u8], value: &[u8]) {
        self.out.emit_timed(None, time, key, value);
    }

    /// Emits a record with event time `time` on one output port.
    #[inline]
    pub fn emit_to_at(&mut self, port: usize, time: u64, key: &[u8], value: &[u8]) {
        self.out.emit_timed(Some(port), time, key, value);
    }

    /// Emits a record on every output stream with the event time of the input record it
    /// comes from, if it had one (so a map or filter passes times on).
    #[inline]
    pub fn emit_with(&mut self, time: Option<u64>, key: &[u8], value: &[u8]) {
        match time {
            Some(t) => self.out.emit_timed(None, t, key, value),
            None => self.out.emit(key, value),
        }
    }

    /// Index of the input stream this request arrived on (0 when firing timers).
    pub fn input_port(&self) -> usize {
        self.input_port
    }

    /// Counts a record this operator could not process (malformed input, say); the pipeline
    /// goes on and the run summary reports the count per reason.
    pub fn reject(&mut self, reason: &'static str) {
        self.rejects.add(reason);
    }

    /// Sets an event-time timer for the record's key at `time`: [`Operator::on_timer`] runs
    /// once the watermark passes `time` plus the allowed lateness. Setting it again is a no-op.
    /// The operator must declare event-time timers in [`Operator::timers`].
    pub fn set_event_timer(&mut self, r: Record<'_>, time: u64) {
        self.state.timers(r.hash).set(TimeDomain::Event, time, r.key);
    }

    /// Removes a pending event-time timer of the record's key; returns whether it was set.
    pub fn delete_event_timer(&mut self, r: Record<'_>, time: u64) -> bool {
        self.state.timers(r.hash).delete(TimeDomain::Event, time, r.key)
    }

    /// Sets a processing-time timer for the record's key at `time` (ns since the Unix epoch;
    /// see [`Context::processing_time`]). The operator must declare processing-time timers.
    pub fn set_processing_timer(&mut self, r: Record<'_>, time: u64) {
        self.state.timers(r.hash).set(TimeDomain::Processing, time, r.key);
    }

    /// Removes a pending processing-time timer; returns whether it was set.
    pub fn delete_processing_timer(&mut self, r: Record<'_>, time: u64) -> bool {
        self.state.timers(r.hash).delete(TimeDomain::Processing, time, r.key)
    }

    /// The wall clock: ns since the Unix epoch.
    pub fn processing_time(&self) -> u64 {
        crate::time::now_ns()
    }
}

/// What user code implements.
pub trait Operator: Send + Sync + 'static {
    /// The value kept per key; `()` for stateless operators.
    type State: StateValue;

    /// Runs once per instance before its first request; an error stops the run, naming the
    /// operator.
    fn open(&mut self, info: &OpenInfo<'_>) -> Result<(), String> {
        let _ = info;
        Ok(())
    }

    /// The timers it sets (none by default: the runtime then never fires or checks lateness
    /// for it).
    fn timers(&self) -> TimerUse {
        TimerUse::NONE
    }

    /// Processes one request.
    fn process(&self, input: &Batch, ctx: &mut Context<'_, Self::State>);

    /// A timer this operator set has fired: for event time, the watermark passed `timer.time`
    /// (plus the allowed lateness), so no record at or before it will come. Timers fire in
    /// time order, then key order. The context's state and timers are those of `timer.key`'s
    /// group: use [`Timer::record`] for the key.
    fn on_timer(&self, timer: Timer<'_>, ctx: &mut Context<'_, Self::State>) {
        let _ = (timer, ctx);
    }

    /// Runs once when the instance stops (the end of a run or of the worker).
    fn close(&self) {}
}

impl Timer<'_> {
    /// The timer's key as a record (empty value), for the [`Context`]'s state and timers.
    pub fn record(&self) -> Record<'_> {
        Record { key: self.key, value: b"", hash: key_hash(self.key) }
    }
}

/// An [`Emitter`] that collects what it is given, per port (`None` = every port).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CollectingEmitter {
    /// `(port, key, value)` in emission order.
    pub records: Vec<(Option<usize>, Vec<u8>, Vec<u8>)>,
    /// `(index into records, event time)` of the records emitted with a time.
    pub times: Vec<(usize, u64)>,
}

impl Emitter for CollectingEmitter {
    fn emit(&mut self, key: &[u8], value: &[u8]) {
        self.records.push((None, key.to_vec(), value.to_vec()));
    }
    fn emit_to(&mut self, port: usize, key: &[u8], value: &[u8]) {
        self.records.push((Some(port), key.to_vec(), value.to_vec()));
    }
    fn emit_timed(&mut self, port: Option<usize>, time: u64, key: &[u8], value: &[u8]) {
        self.records.push((port, key.to_vec(), value.to_vec()));
        self.times.push((self.records.len() - 1, time));
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
        let exec = op.process(&input, 0, None, store.as_ref(), &mut out, &mut rejects);
        assert!(exec.touched_state);
        assert_eq!(store.key_count(), 2);
        assert_eq!(rejects.iter().collect::<Vec<_>>(), vec![("empty key", 1)]);
        let mut dump = Vec::new();
        store.dump_json("count", &mut dump).unwrap();
        assert!(String::from_utf8(dump).unwrap().contains("\"key\":\"a\",\"value\":2"));
    }
}
