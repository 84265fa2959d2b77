//! A single-threaded, in-process driver for a pipeline's operators.
//!
//! [`LocalDriver`] instantiates every operator through a [`Registry`], gives each one a
//! [`KeyedStore`](crate::state::KeyedStore) (stateless operators get an unused one), and runs
//! requests through the DAG in topological order: one pass after every source batch, so each
//! operator sees its inputs in the order they were produced and every key's records in FIFO
//! order. Sink records and final state are kept for inspection.
//!
//! Time: records pushed from a source with an `event_time` function get their times from it;
//! after each source batch the source's watermark advances (its `out_of_orderness`) and the
//! event-time timers due fire, operator by operator in topological order ([`Frontiers`]), and
//! processing-time timers due by the clock fire. [`LocalDriver::finish`] ends the input: every
//! pending timer fires and every operator is closed.
//!
//! It is the harness for running operators in tests and for quick local runs (`clasp gen
//! --profile` measures selectivities with it). It is not a reference implementation: results
//! are checked against independent code, and the distributed runtime is what `clasp run` uses.

use crate::batch::{Batch, Record};
use crate::frontier::Frontiers;
use crate::ids::{KeyGroup, OperatorId, SinkId, SourceId};
use crate::operator::{DynOperator, Emitter, Registry, RegistryError, Rejections};
use crate::pipeline::{Endpoint, Pipeline};
use crate::registry::EventTimeFn;
use crate::state::{StateError, StateStore};
use crate::time::{BoundedOutOfOrderness, TimeDomain};
use std::io::{self, Write};

/// How the driver forms requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LocalOptions {
    /// Most records per request, for source batches and chained requests alike. `1` makes
    /// every record its own request, as in the CLASP paper's per-tuple invocations.
    pub batch_size: usize,
    /// Key groups per keyed store.
    pub key_groups: u32,
}

impl Default for LocalOptions {
    fn default() -> Self {
        Self { batch_size: 256, key_groups: 64 }
    }
}

/// What one operator did during a run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OperatorStats {
    /// Requests processed.
    pub executions: u64,
    /// Executions that read or wrote keyed state.
    pub touched_state: u64,
    /// Records received.
    pub records_in: u64,
    /// Records emitted (an `emit` to every port counts once).
    pub records_out: u64,
    /// Records rejected, per reason.
    pub rejections: Rejections,
}

impl OperatorStats {
    /// Output records per input record (0 when nothing came in).
    pub fn selectivity(&self) -> f64 {
        if self.records_in == 0 { 0.0 } else { self.records_out as f64 / self.records_in as f64 }
    }
}

/// Where an emitted record goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// Input port `port` of an operator.
    Operator { op: usize, port: usize },
    /// A pipeline sink.
    Sink(usize),
}

/// Routes emitted records into the pending inputs of successors and into sinks.
struct Router<'a> {
    targets: &'a [Target],
    pending: &'a mut [Vec<Batch>],
    sinks: &'a mut [Batch],
    emitted: u64,
}

impl Router<'_> {
    #[inline]
    fn deliver(&mut self, t: Target, key: &[u8], value: &[u8], time: Option<u64>) {
        match t {
            Target::Operator { op, port } => self.pending[op][port].push_timed(key, value, time),
            Target::Sink(s) => self.sinks[s].push_timed(key, value, time),
        }
    }
}

impl Emitter for Router<'_> {
    fn emit(&mut self, key: &[u8], value: &[u8]) {
        self.emitted += 1;
        for i in 0..self.targets.len() {
            self.deliver(self.targets[i], key, value, None);
        }
    }

    fn emit_to(&mut self, port: usize, key: &[u8], value: &[u8]) {
        self.emitted += 1;
        if let Some(&t) = self.targets.get(port) {
            self.deliver(t, key, value, None);
        }
    }

    fn emit_timed(&mut self, port: Option<usize>, time: u64, key: &[u8], value: &[u8]) {
        self.emitted += 1;
        match port {
            None => {
                for i in 0..self.targets.len() {
                    self.deliver(self.targets[i], key, value, Some(time));
                }
            }
            Some(p) => {
                if let Some(&t) = self.targets.get(p) {
                    self.deliver(t, key, value, Some(time));
                }
            }
        }
    }
}

/// Runs a pipeline's operators in this thread. See the [module documentation](self).
pub struct LocalDriver {
    pipeline: Pipeline,
    options: LocalOptions,
    ops: Vec<Box<dyn DynOperator>>,
    stores: Vec<Box<dyn StateStore>>,
    op_targets: Vec<Vec<Target>>,
    source_targets: Vec<Vec<Target>>,
    /// Per operator, per input port: records waiting to be processed.
    pending: Vec<Vec<Batch>>,
    /// Per source: records not yet flushed into the pipeline.
    inputs: Vec<Batch>,
    sinks: Vec<Batch>,
    stats: Vec<OperatorStats>,
    request: Batch,
    /// Per source: its event-time function and watermark.
    event_times: Vec<Option<EventTimeFn>>,
    watermarks: Vec<BoundedOutOfOrderness>,
    frontiers: Frontiers,
    /// The watermark of the source whose batch is running (`None` while timers fire).
    entry: Option<u64>,
    closed: bool,
}

impl std::fmt::Debug for LocalDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalDriver")
            .field("pipeline", &self.pipeline.name)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl LocalDriver {
    /// Instantiates every operator of `pipeline` from `registry`.
    pub fn new(
        pipeline: &Pipeline,
        registry: &Registry,
        options: LocalOptions,
    ) -> Result<Self, RegistryError> {
        let mut ops = registry.instantiate_all(pipeline)?;
        let event_times = registry.event_times(pipeline)?;
        crate::registry::open_all(&mut ops, pipeline, None, options.key_groups)?;
        let frontiers = Frontiers::new(pipeline, |o| ops[o.index()].timers().event);
        let watermarks = pipeline
            .sources
            .iter()
            .map(|s| BoundedOutOfOrderness::new(s.out_of_orderness))
            .collect();
        let stores = ops.iter().map(|o| o.new_store(options.key_groups)).collect();
        let target = |stream: &crate::ids::StreamId| {
            let s = pipeline.stream(*stream);
            match s.to {
                Endpoint::Operator(o) => Target::Operator {
                    op: o.index(),
                    port: pipeline.inputs(o).iter().position(|i| i == stream).unwrap_or(0),
                },
                Endpoint::Sink(k) => Target::Sink(k.index()),
                Endpoint::Source(_) => unreachable!("validation forbids streams into sources"),
            }
        };
        let op_targets = pipeline
            .operators
            .iter()
            .map(|o| pipeline.outputs(o.id).iter().map(target).collect())
            .collect();
        let source_targets = pipeline
            .sources
            .iter()
            .map(|s| pipeline.source_outputs(s.id).iter().map(target).collect())
            .collect();
        let pending = pipeline
            .operators
            .iter()
            .map(|o| vec![Batch::new(); pipeline.inputs(o.id).len().max(1)])
            .collect();
        Ok(Self {
            options: LocalOptions { batch_size: options.batch_size.max(1), ..options },
            ops,
            stores,
            op_targets,
            source_targets,
            pending,
            inputs: vec![Batch::new(); pipeline.sources.len()],
            sinks: vec![Batch::new(); pipeline.sinks.len()],
            stats: vec![OperatorStats::default(); pipeline.operators.len()],
            request: Batch::new(),
            event_times,
            watermarks,
            frontiers,
            entry: None,
            closed: false,
            pipeline: pipeline.clone(),
        })
    }

    /// The pipeline being run.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// Feeds one input record from `source` (its event time read by the source's `event_time`
    /// function, if it has one); the pipeline runs once a batch is full.
    pub fn push(&mut self, source: SourceId, key: &[u8], value: &[u8]) {
        let time = self.event_times[source.index()].as_ref().and_then(|f| f(value));
        self.push_timed(source, key, value, time);
    }

    /// Feeds one input record with event time `time`.
    pub fn push_timed(&mut self, source: SourceId, key: &[u8], value: &[u8], time: Option<u64>) {
        let input = &mut self.inputs[source.index()];
        input.push_timed(key, value, time);
        if input.len() >= self.options.batch_size {
            self.flush_source(source);
        }
    }

    /// Feeds every record of `batch` from `source` (with their times, or times read by the
    /// source's function), then runs the pipeline.
    pub fn push_batch(&mut self, source: SourceId, batch: &Batch) {
        for (r, t) in batch.iter_timed() {
            match t {
                Some(t) => self.push_timed(source, r.key, r.value, Some(t)),
                None => self.push(source, r.key, r.value),
            }
        }
        self.flush_source(source);
    }

    /// Runs the records buffered for every source through the pipeline.
    pub fn flush(&mut self) {
        for s in 0..self.inputs.len() {
            self.flush_source(SourceId::from(s));
        }
    }

    fn flush_source(&mut self, source: SourceId) {
        let input = std::mem::take(&mut self.inputs[source.index()]);
        if input.is_empty() {
            self.inputs[source.index()] = input;
            return;
        }
        let watermark = &mut self.watermarks[source.index()];
        self.entry = watermark.watermark();
        for i in 0..input.len() {
            if let Some(t) = input.time(i) {
                watermark.observe(t);
            }
        }
        let after = watermark.watermark();
        let mut router = Router {
            targets: &self.source_targets[source.index()],
            pending: &mut self.pending,
            sinks: &mut self.sinks,
            emitted: 0,
        };
        for (r, t) in input.iter_timed() {
            for &target in router.targets {
                router.deliver(target, r.key, r.value, t);
            }
        }
        let mut input = input;
        input.clear();
        self.inputs[source.index()] = input;
        self.drain();
        self.entry = None;
        if let Some(w) = after {
            self.frontiers.advance_source(source, w);
        }
        self.fire_due(crate::time::now_ns());
    }

    /// Fires the event-time timers the watermarks made due, and the processing-time timers
    /// due by `now_ns`, running what they emit.
    fn fire_due(&mut self, now_ns: u64) {
        while let Some((op, until)) = self.frontiers.next_due() {
            self.fire(op.index(), TimeDomain::Event, until);
            self.frontiers.fired(op, until);
        }
        for op in self.pipeline.topological_order().to_vec() {
            if self.ops[op.index()].timers().processing {
                self.fire(op.index(), TimeDomain::Processing, now_ns);
            }
        }
    }

    fn fire(&mut self, op: usize, domain: TimeDomain, until: u64) {
        let mut router = Router {
            targets: &self.op_targets[op],
            pending: &mut self.pending,
            sinks: &mut self.sinks,
            emitted: 0,
        };
        let stats = &mut self.stats[op];
        let exec = self.ops[op].fire(
            domain,
            until,
            self.stores[op].as_ref(),
            &mut router,
            &mut stats.rejections,
        );
        stats.touched_state += u64::from(exec.touched_state);
        stats.records_out += router.emitted;
        self.drain();
    }

    /// Ends the input: runs what is buffered, fires every pending timer (event time and
    /// processing time), and closes every operator. Records pushed afterwards still run, but
    /// no timer fires for them.
    pub fn finish(&mut self) {
        self.flush();
        self.frontiers.end_all();
        self.fire_due(u64::MAX);
        if !std::mem::replace(&mut self.closed, true) {
            for op in &self.ops {
                op.close();
            }
        }
    }

    /// Processes every pending request, operators in topological order: outputs only flow to
    /// later operators, so one pass empties every queue.
    fn drain(&mut self) {
        let order: Vec<OperatorId> = self.pipeline.topological_order().to_vec();
        for op in order {
            for port in 0..self.pending[op.index()].len() {
                self.run_pending(op.index(), port);
            }
        }
    }

    /// Runs the records pending on one input port as requests of at most `batch_size`.
    fn run_pending(&mut self, op: usize, port: usize) {
        let queued = std::mem::take(&mut self.pending[op][port]);
        let size = self.options.batch_size;
        let mut start = 0;
        while start < queued.len() {
            let end = (start + size).min(queued.len());
            self.request.clear();
            for i in start..end {
                self.request.push_from(&queued, i);
            }
            self.execute(op, port);
            start = end;
        }
        // An operator never feeds itself (the graph is acyclic), so its queue is still empty:
        // put the grown buffer back so steady state allocates nothing.
        let mut queued = queued;
        queued.clear();
        self.pending[op][port] = queued;
    }

    fn execute(&mut self, op: usize, port: usize) {
        let mut router = Router {
            targets: &self.op_targets[op],
            pending: &mut self.pending,
            sinks: &mut self.sinks,
            emitted: 0,
        };
        let stats = &mut self.stats[op];
        let late_until = match self.ops[op].timers().event {
            true => Frontiers::late_until(self.entry, self.pipeline.operators[op].allowed_lateness),
            false => None,
        };
        let exec = self.ops[op].process(
            &self.request,
            port,
            late_until,
            self.stores[op].as_ref(),
            &mut router,
            &mut stats.rejections,
        );
        stats.executions += 1;
        stats.touched_state += u64::from(exec.touched_state);
        stats.records_in += self.request.len() as u64;
        stats.records_out += router.emitted;
    }

    /// Records that reached `sink`, in arrival order.
    pub fn sink_records(&self, sink: SinkId) -> impl ExactSizeIterator<Item = Record<'_>> + '_ {
        self.sinks[sink.index()].iter()
    }

    /// Takes the records that reached `sink` since the last call, leaving none behind: for a
    /// caller that forwards sink records as they come (an edge device's connectors), so the
    /// driver does not hold a whole run's output.
    pub fn take_sink_records(&mut self, sink: SinkId) -> Batch {
        std::mem::take(&mut self.sinks[sink.index()])
    }

    /// The watermark of what reaches `sink`: no record it receives later has a time at or
    /// below it (`None` before the sources upstream have one).
    pub fn sink_watermark(&self, sink: SinkId) -> Option<u64> {
        self.frontiers.sink_watermark(&self.pipeline, sink)
    }

    /// Records that reached the sink named `name` (none if there is no such sink).
    pub fn sink_records_named(&self, name: &str) -> Vec<Record<'_>> {
        match self.pipeline.sinks.iter().find(|s| s.name == name) {
            Some(s) => self.sink_records(s.id).collect(),
            None => Vec::new(),
        }
    }

    /// Statistics of one operator.
    pub fn stats(&self, op: OperatorId) -> &OperatorStats {
        &self.stats[op.index()]
    }

    /// The keyed state of one operator.
    pub fn store(&self, op: OperatorId) -> &dyn StateStore {
        self.stores[op.index()].as_ref()
    }

    /// Whether an operator's implementation keeps state.
    pub fn keeps_state(&self, op: OperatorId) -> bool {
        self.ops[op.index()].keeps_state()
    }

    /// Bytes of an operator's state as a migration would ship it (postcard, all key groups).
    /// Measured by exporting and re-importing every group, so the state is unchanged after.
    pub fn state_bytes(&self, op: OperatorId) -> Result<usize, StateError> {
        let store = self.store(op);
        let mut total = 0;
        let mut buf = Vec::new();
        for g in 0..store.group_count() {
            buf.clear();
            store.export_group(KeyGroup(g), &mut buf)?;
            total += buf.len();
            store.import_group(KeyGroup(g), &buf)?;
        }
        Ok(total)
    }

    /// Writes the state of every stateful operator as JSON lines
    /// `{"operator":…,"key":…,"value":…}`, operators in spec order, keys sorted.
    pub fn dump_state(&self, out: &mut dyn Write) -> io::Result<usize> {
        let mut n = 0;
        for o in &self.pipeline.operators {
            if self.ops[o.id.index()].keeps_state() {
                n += self.stores[o.id.index()].dump_json(&o.name, out)?;
            }
        }
        Ok(n)
    }

    /// Every rejection, as `(operator name, reason, count)`.
    pub fn rejections(&self) -> Vec<(String, &'static str, u64)> {
        let mut v = Vec::new();
        for o in &self.pipeline.operators {
            for (reason, n) in self.stats[o.id.index()].rejections.iter() {
                v.push((o.name.clone(), reason, n));
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::operator::Operator;
    use crate::spec::parse;
    use crate::{Batch, Context};

    /// Splits the value on spaces, one record per word keyed by the word.
    #[derive(Clone)]
    struct Words;
    impl Operator for Words {
        type State = ();
        fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
            for r in input.iter() {
                if r.value.is_empty() {
                    ctx.reject("empty line");
                }
                for w in r.value.split(|b| *b == b' ').filter(|w| !w.is_empty()) {
                    ctx.emit(w, b"");
                }
            }
        }
    }

    /// Counts per key and emits the running count on port 0 only.
    #[derive(Clone)]
    struct Count;
    impl Operator for Count {
        type State = u64;
        fn process(&self, input: &Batch, ctx: &mut Context<'_, u64>) {
            for r in input.iter() {
                let c = ctx.state(r);
                *c += 1;
                let c = c.to_string();
                ctx.emit_to(0, r.key, c.as_bytes());
            }
        }
    }

    const SPEC: &str = r#"
[[source]]
name = "in"
[[operator]]
name = "split"
function = "words"
[[operator]]
name = "count"
function = "count"
stateful = true
key = "word"
[[sink]]
name = "counts"
[[sink]]
name = "unused"
[[stream]]
from = "in"
to = "split"
[[stream]]
from = "split"
to = "count"
[[stream]]
from = "count"
to = "counts"
[[stream]]
from = "count"
to = "unused"
"#;

    fn driver(batch_size: usize) -> LocalDriver {
        let p = parse(SPEC, "t.toml").unwrap();
        let mut reg = Registry::new();
        reg.register_operator("words", Words);
        reg.register_operator("count", Count);
        LocalDriver::new(&p, &reg, LocalOptions { batch_size, key_groups: 8 }).unwrap()
    }

    #[test]
    fn records_flow_in_order_with_stats_state_and_sinks() {
        for batch in [1, 3, 256] {
            let mut d = driver(batch);
            for line in ["a b a", "", "b c", "a"] {
                d.push(SourceId(0), b"", line.as_bytes());
            }
            d.flush();
            let counts: Vec<(String, String)> = d
                .sink_records(SinkId(0))
                .map(|r| {
                    (
                        String::from_utf8(r.key.to_vec()).unwrap(),
                        String::from_utf8(r.value.to_vec()).unwrap(),
                    )
                })
                .collect();
            let expect = [("a", "1"), ("b", "1"), ("a", "2"), ("b", "2"), ("c", "1"), ("a", "3")];
            let expect: Vec<(String, String)> =
                expect.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            assert_eq!(counts, expect, "batch size {batch}");
            assert_eq!(d.sink_records(SinkId(1)).len(), 0, "emit_to(0) reaches port 0 only");
            let split = d.stats(OperatorId(0));
            assert_eq!((split.records_in, split.records_out), (4, 6));
            assert_eq!(split.rejections.total(), 1);
            let count = d.stats(OperatorId(1));
            assert_eq!(count.records_in, 6);
            assert_eq!(count.touched_state, count.executions);
            if batch == 1 {
                assert_eq!((split.executions, count.executions), (4, 6));
            }
            assert_eq!(d.store(OperatorId(1)).key_count(), 3);
            let bytes = d.state_bytes(OperatorId(1)).unwrap();
            assert!(bytes > 0);
            assert_eq!(d.state_bytes(OperatorId(1)).unwrap(), bytes, "measuring keeps the state");
            let mut dump = Vec::new();
            assert_eq!(d.dump_state(&mut dump).unwrap(), 3);
            let dump = String::from_utf8(dump).unwrap();
            assert!(dump.contains("{\"operator\":\"count\",\"key\":\"a\",\"value\":3}"), "{dump}");
            assert_eq!(d.rejections(), vec![("split".to_string(), "empty line", 1)]);
        }
    }
}
