//! Executors and the local scheduling engine.
//!
//! An executor runs one request at a time. What the operator emits goes straight into the
//! [`Outbox`], which routes each record as it is emitted (keyed successors: to the owner of the
//! key's group; stateless ones: to a worker drawn by share) into per-destination batches of at
//! most `batch_size` records. When the execution ends, those batches become chained requests:
//! the ones for this worker go into its own queue as they are (never serialized), the others to
//! the peer's sending thread. The request's chain credit is split among them; a request that
//! causes none returns its credit to the planner.

use super::WorkerShared;
use crate::metrics::{EXEC_SQ_UNIT_NS2, ExecCounters, bump};
use crate::request::{Request, split_credit};
use crate::routing::Routing;
use crate::service;
use crate::wire::{CreditReturn, Cut, Message};
use crate::worker::scheduler::Next;
use crate::worker::timing::Sampler;
use clasp_core::frontier::Frontiers;
use clasp_core::operator::Rejections;
use clasp_core::rng::SeededRng;
use clasp_core::{Batch, Emitter, Endpoint, OperatorId, SinkId, StreamId, WorkerId};
use rand::SeedableRng;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Nanoseconds since the Unix epoch: a clock every process on a host shares.
pub fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

/// Where an output port leads.
#[derive(Clone, Copy, Debug)]
pub enum Target {
    /// A successor operator: its id, the input port the stream arrives on, the stream.
    Operator { op: OperatorId, port: u16, stream: StreamId },
    /// A sink.
    Sink(SinkId),
}

/// Output ports of every operator, in port order.
pub fn port_targets(p: &clasp_core::Pipeline) -> Vec<Vec<Target>> {
    p.operators
        .iter()
        .map(|o| {
            p.outputs(o.id)
                .iter()
                .filter_map(|&s| match p.stream(s).to {
                    Endpoint::Operator(to) => {
                        let port = p.inputs(to).iter().position(|x| *x == s).unwrap_or(0) as u16;
                        Some(Target::Operator { op: to, port, stream: s })
                    }
                    Endpoint::Sink(k) => Some(Target::Sink(k)),
                    Endpoint::Source(_) => None,
                })
                .collect()
        })
        .collect()
}

/// Records buffered for one output port.
#[derive(Debug, Default)]
struct PortBuffer {
    /// Per destination worker (keyed successors use many, stateless ones one at a time).
    by_worker: Vec<Batch>,
    /// The worker the open batch of a stateless successor goes to.
    drawn: Option<WorkerId>,
}

/// The local scheduling engine of one executor.
pub struct Outbox {
    shared: Arc<WorkerShared>,
    counters: Arc<ExecCounters>,
    routing: Arc<Routing>,
    rng: SeededRng,
    batch_size: usize,
    // The request being executed.
    op: OperatorId,
    chain: u64,
    /// Its chain's entry watermark, inherited by the requests it causes.
    watermark: Option<u64>,
    ports: Vec<PortBuffer>,
    emitted: u64,
    children: Vec<(WorkerId, StreamId, Request)>,
    /// Chained requests for this worker, queued when the executor picks its next request.
    local: Vec<Request>,
    /// Emptied batches kept for reuse, so steady state allocates no batch buffers.
    spare: Vec<Batch>,
    /// Chained requests for other workers, batched per destination until a batch is full,
    /// the executor is about to sleep, or the oldest has waited the flush deadline.
    remote: Vec<Vec<Request>>,
    oldest_remote: Option<Instant>,
    /// Emulated dispatch time the last execution spent (µs), which the fan-out cost
    /// stretches ([`super::fanout`]).
    dispatch_spent_us: f64,
    flush_deadline: std::time::Duration,
    /// The cut of the request running.
    cut: Cut,
    // Buffered for the planner, across requests.
    sinks: Vec<Batch>,
    sink_records: usize,
    /// The cut of the buffered sink records' chains (a batch holds those of one cut).
    sinks_cut: Cut,
    credits: Vec<CreditReturn>,
    /// When the executor first saw its oldest buffered credit (see [`CREDIT_DEADLINE`]).
    oldest_credit: Option<Instant>,
    /// The worker's recovery generation when the buffered outputs were produced.
    generation: u64,
}

impl std::fmt::Debug for Outbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbox").field("op", &self.op).field("chain", &self.chain).finish()
    }
}

const SINK_FLUSH_RECORDS: usize = 4096;
/// Remote chained requests sent together at most.
const REMOTE_BATCH: usize = 64;
const CREDIT_FLUSH: usize = 256;
/// Longest a finished chain's credit waits in a busy executor before it goes to the planner.
/// Without a deadline an executor that never idles holds up to [`CREDIT_FLUSH`] completions,
/// and a planner at its in-flight limit waits for them: a closed loop (an unthrottled input
/// with fewer chains in flight than executors can hold) runs in stop-and-go bursts.
const CREDIT_DEADLINE: std::time::Duration = std::time::Duration::from_millis(1);

impl Outbox {
    fn new(shared: Arc<WorkerShared>, counters: Arc<ExecCounters>, seed: u64) -> Self {
        let routing = shared.routing();
        let sinks = (0..shared.pipeline.sinks.len()).map(|_| Batch::new()).collect();
        let flush_deadline = std::time::Duration::from_micros(shared.settings.flush_deadline_us);
        Self {
            batch_size: shared.settings.batch_size.max(1) as usize,
            shared,
            counters,
            routing,
            rng: SeededRng::seed_from_u64(seed),
            op: OperatorId(0),
            chain: 0,
            watermark: None,
            ports: Vec::new(),
            emitted: 0,
            children: Vec::new(),
            local: Vec::new(),
            spare: Vec::new(),
            remote: Vec::new(),
            oldest_remote: None,
            dispatch_spent_us: 0.0,
            flush_deadline,
            cut: Cut::default(),
            sinks,
            sink_records: 0,
            sinks_cut: Cut::default(),
            credits: Vec::new(),
            oldest_credit: None,
            generation: 0,
        }
    }

    fn refresh_routing(&mut self) {
        if self.shared.epoch.load(Ordering::Acquire) != self.routing.epoch {
            self.routing = self.shared.routing();
        }
    }

    /// Drops what was buffered before a rollback the worker went through since.
    fn discard_if_rolled_back(&mut self, now: u64) {
        if now != self.generation {
            self.generation = now;
            for b in &mut self.sinks {
                b.clear();
            }
            self.sink_records = 0;
            self.credits.clear();
            self.oldest_credit = None;
            self.remote.iter_mut().for_each(Vec::clear);
            self.oldest_remote = None;
        }
    }

    fn begin(&mut self, op: OperatorId, chain: u64, cut: Cut, watermark: Option<u64>) {
        // A rollback after this read is caught when sending, under the gate.
        self.discard_if_rolled_back(self.shared.generation.load(Ordering::Acquire));
        if cut != self.sinks_cut {
            if self.sink_records > 0 {
                self.flush_planner();
            }
            self.sinks_cut = cut;
        }
        self.op = op;
        self.chain = chain;
        self.cut = cut;
        self.watermark = watermark;
        self.emitted = 0;
        self.dispatch_spent_us = 0.0;
        let n = self.shared.targets[op.index()].len();
        let workers = self.routing.workers().max(self.shared.me.0 + 1) as usize;
        // Never shrunk: an operator without successors would free what the next one reuses.
        if self.ports.len() < n {
            self.ports.resize_with(n, PortBuffer::default);
        }
        for p in &mut self.ports[..n] {
            if p.by_worker.len() < workers {
                p.by_worker.resize_with(workers, Batch::new);
            }
            p.drawn = None;
        }
    }

    #[inline]
    fn route(&mut self, port: usize, hash: u64, key: &[u8], value: &[u8], time: Option<u64>) {
        let target = self.shared.targets[self.op.index()][port];
        match target {
            Target::Sink(s) => {
                self.sinks[s.index()].push_hashed_timed(hash, key, value, time);
                self.sink_records += 1;
            }
            Target::Operator { op, .. } => {
                let w = if self.routing.is_keyed(op) {
                    self.routing.owner(op, hash)
                } else {
                    match self.ports[port].drawn {
                        Some(w) => w,
                        None => {
                            let w = self.routing.draw(op, &mut self.rng);
                            self.ports[port].drawn = Some(w);
                            w
                        }
                    }
                };
                let buffers = &mut self.ports[port].by_worker;
                if w.index() >= buffers.len() {
                    buffers.resize_with(w.index() + 1, Batch::new);
                }
                buffers[w.index()].push_hashed_timed(hash, key, value, time);
                if buffers[w.index()].len() >= self.batch_size {
                    self.seal(port, w);
                }
            }
        }
    }

    /// Turns the open batch for (`port`, `w`) into a chained request.
    fn seal(&mut self, port: usize, w: WorkerId) {
        let Target::Operator { op, port: in_port, stream } =
            self.shared.targets[self.op.index()][port]
        else {
            return;
        };
        let spare = self.spare.pop().unwrap_or_default();
        let batch = std::mem::replace(&mut self.ports[port].by_worker[w.index()], spare);
        self.ports[port].drawn = None;
        let mut req = Request::new(op, in_port, self.chain, self.routing.epoch, batch);
        req.cut = self.cut;
        req.time = crate::wire::ChainTime::entered(self.watermark);
        self.children.push((w, stream, req));
    }

    /// Re-routes this execution's chained requests for this worker after a migration
    /// installed a new routing while it ran (in its service time, see
    /// [`super::scheduler::Scheduler::leave_service`]): their key groups may have moved, and
    /// the queue they would join is the new routing's.
    fn readmit_local(&mut self) {
        if !self.local.is_empty() {
            let local = std::mem::take(&mut self.local);
            self.shared.admit(local, &mut self.rng);
        }
    }

    /// Dispatches the chained requests of the finished execution and settles its credit.
    fn finish(&mut self, credit: u64) {
        for port in 0..self.ports.len().min(self.shared.targets[self.op.index()].len()) {
            for w in 0..self.ports[port].by_worker.len() {
                if !self.ports[port].by_worker[w].is_empty() {
                    self.seal(port, WorkerId::from(w));
                }
            }
        }
        if self.children.is_empty() {
            self.credits.push(CreditReturn { chain: self.chain, credit, done_ns: now_ns() });
            if self.credits.len() >= CREDIT_FLUSH {
                self.flush_planner();
            }
        } else {
            self.dispatch_children(credit);
        }
        if self.sink_records >= SINK_FLUSH_RECORDS {
            self.flush_planner();
        }
    }

    fn dispatch_children(&mut self, credit: u64) {
        let me = self.shared.me;
        let (mut local, mut remote) = (0u64, 0u64);
        let shares = split_credit(credit, self.children.len());
        let mut children = std::mem::take(&mut self.children);
        for ((w, stream, mut req), share) in children.drain(..).zip(shares) {
            req.credit = share;
            bump(&self.counters.edges[stream.index()], 1);
            bump(&self.counters.edge_records[stream.index()], req.batch.len() as u64);
            if w == me {
                local += 1;
                self.local.push(req);
            } else {
                remote += 1;
                self.counters.reached(w);
                if self.shared.settings.dispatch_cost.is_some_and(|c| c.fanout_us > 0.0) {
                    super::fanout::reach(&self.shared, w);
                }
                self.hold_remote(w, req);
            }
        }
        self.children = children;
        bump(&self.counters.local, local);
        bump(&self.counters.remote, remote);
        if let Some(cost) = self.shared.settings.dispatch_cost {
            self.emulate_dispatch(&cost, local, remote);
        }
    }

    /// Spends the emulated dispatch cost of the chained requests just sent: α per local, β
    /// per remote (γ is the worker's, [`super::fanout`]).
    fn emulate_dispatch(&mut self, cost: &crate::wire::DispatchCost, local: u64, remote: u64) {
        let micros = cost.local_us * local as f64 + cost.remote_us * remote as f64;
        self.dispatch_spent_us = micros;
        spend_off_cpu(&self.shared, micros, cost.mode);
    }

    /// Buffers a chained request for worker `w`; a full batch goes at once.
    fn hold_remote(&mut self, w: WorkerId, req: Request) {
        if self.flush_deadline.is_zero() {
            self.shared.send_to_peer(w, Message::Request(req));
            return;
        }
        if self.remote.len() <= w.index() {
            self.remote.resize_with(w.index() + 1, Vec::new);
        }
        self.remote[w.index()].push(req);
        self.oldest_remote.get_or_insert_with(Instant::now);
        if self.remote[w.index()].len() >= REMOTE_BATCH {
            let batch = std::mem::take(&mut self.remote[w.index()]);
            self.shared.send_to_peer(w, Message::Requests(batch));
        }
    }

    /// Sends every buffered remote request.
    pub fn flush_remote(&mut self) {
        self.discard_if_rolled_back(self.shared.generation.load(Ordering::Acquire));
        self.oldest_remote = None;
        for (w, reqs) in self.remote.iter_mut().enumerate() {
            if !reqs.is_empty() {
                let batch = std::mem::take(reqs);
                self.shared.send_to_peer(WorkerId::from(w), Message::Requests(batch));
            }
        }
    }

    /// Sends the buffered remote requests now if the execution of `op` about to start is
    /// expected to outlast the flush deadline: held across it, they would wait that long,
    /// and the peers that could run them meanwhile would idle.
    fn flush_remote_before(&mut self, op: &crate::metrics::OpCounters) {
        if self.oldest_remote.is_some() && op.mean_exec_exceeds(self.flush_deadline) {
            self.flush_remote();
        }
    }

    /// Sends buffered remote requests whose oldest has waited the flush deadline by `now`.
    fn flush_remote_due(&mut self, now: Instant) {
        if self
            .oldest_remote
            .is_some_and(|t| now.saturating_duration_since(t) >= self.flush_deadline)
        {
            self.flush_remote();
        }
    }

    /// Keeps an executed request's batch for reuse.
    fn recycle(&mut self, mut batch: Batch) {
        if self.spare.len() < 64 && batch.byte_len() < (1 << 20) {
            batch.clear();
            self.spare.push(batch);
        }
    }

    /// Sends buffered credit (and sink records) once the oldest credit has waited
    /// [`CREDIT_DEADLINE`] by `now`, counted from the first execution end that saw it.
    fn flush_planner_due(&mut self, now: Instant) {
        if self.credits.is_empty() {
            return;
        }
        match self.oldest_credit {
            None => self.oldest_credit = Some(now),
            Some(t) if now.saturating_duration_since(t) >= CREDIT_DEADLINE => self.flush_planner(),
            Some(_) => {}
        }
    }

    /// Sends buffered sink records, then buffered credit (in that order, on one connection, so
    /// a chain is never complete at the planner before its outputs arrived).
    pub fn flush_planner(&mut self) {
        let shared = self.shared.clone();
        // Held while sending: a rollback waits, so nothing buffered before it is sent after.
        let _gate = clasp_core::sync::read(&shared.send_gate);
        self.discard_if_rolled_back(shared.generation.load(Ordering::Acquire));
        self.oldest_credit = None;
        if self.sink_records > 0 {
            for (i, b) in self.sinks.iter_mut().enumerate() {
                if !b.is_empty() {
                    let batch = std::mem::take(b);
                    let (sink, cut) = (SinkId::from(i), self.sinks_cut);
                    self.shared.planner.send(Message::Sink { sink, cut, batch });
                }
            }
            self.sink_records = 0;
        }
        if !self.credits.is_empty() {
            self.shared.planner.send(Message::Credits(std::mem::take(&mut self.credits)));
        }
    }
}

impl Emitter for Outbox {
    #[inline]
    fn emit(&mut self, key: &[u8], value: &[u8]) {
        let hash = clasp_core::hash::key_hash(key);
        self.emitted += 1;
        for port in 0..self.shared.targets[self.op.index()].len() {
            self.route(port, hash, key, value, None);
        }
    }

    #[inline]
    fn emit_to(&mut self, port: usize, key: &[u8], value: &[u8]) {
        if port < self.shared.targets[self.op.index()].len() {
            self.emitted += 1;
            self.route(port, clasp_core::hash::key_hash(key), key, value, None);
        }
    }

    fn emit_timed(&mut self, port: Option<usize>, time: u64, key: &[u8], value: &[u8]) {
        let hash = clasp_core::hash::key_hash(key);
        let ports = self.shared.targets[self.op.index()].len();
        match port {
            None => {
                self.emitted += 1;
                for port in 0..ports {
                    self.route(port, hash, key, value, Some(time));
                }
            }
            Some(port) if port < ports => {
                self.emitted += 1;
                self.route(port, hash, key, value, Some(time));
            }
            Some(_) => {}
        }
    }
}

/// Spends an emulated time; while it sleeps, the executor does not count as using a core.
fn spend_off_cpu(shared: &WorkerShared, micros: f64, mode: clasp_core::pipeline::ServiceMode) {
    if mode == clasp_core::pipeline::ServiceMode::Sleep && micros > 0.0 {
        shared.sched.off_cpu();
        service::spend(micros, mode);
        shared.sched.back_on_cpu();
    } else {
        service::spend(micros, mode);
    }
}

/// The loop of executor thread `index`.
pub fn run(shared: Arc<WorkerShared>, index: usize) {
    service::tighten_timer_slack();
    let counters = shared.counters[index].clone();
    let seed = shared.settings.seed ^ (u64::from(shared.me.0) << 32) ^ index as u64;
    let mut out = Outbox::new(shared.clone(), counters.clone(), seed);
    let mut rejects = Rejections::default();
    let mut finished = None;
    let mut local = Vec::new();
    // Only a sample of requests is timed (`timing`); `clock` is the last time read, which
    // also stamps the arrival of chained requests.
    let mut clock = Instant::now();
    let mut sampler = Sampler::new(shared.pipeline.operators.len());
    loop {
        std::mem::swap(&mut local, &mut out.local);
        let next = shared.sched.next_after(finished.take(), &mut local, clock, || {
            out.flush_remote();
            out.flush_planner();
        });
        let req = match next {
            Next::Run { request, slept } => {
                if slept {
                    clock = Instant::now();
                }
                request
            }
            Next::Shutdown => {
                out.flush_remote();
                out.flush_planner();
                return;
            }
        };
        if req.epoch < shared.floor.load(Ordering::Acquire) {
            // Queued by an execution that ended as a rollback began.
            finished = Some(req.op);
            continue;
        }
        let op = req.op;
        let req = if req.cut.is_after(shared.marked_cut.load(Ordering::Acquire))
            && shared.pipeline.operator(op).stateful
        {
            // Of a checkpoint boundary's new cut, before this worker marked its snapshot.
            match shared.hold_for_mark(req) {
                Some(req) => req,
                None => {
                    finished = Some(op);
                    continue;
                }
            }
        } else {
            req
        };
        out.refresh_routing();
        let weight = sampler.weight(op.index(), req.batch.len());
        let timed = weight > 0;
        if timed {
            clock = Instant::now();
        }
        out.flush_remote_before(&counters.ops[op.index()]);
        let started = clock;
        out.begin(op, req.chain, req.cut, req.time.watermark());
        let operator = &shared.ops[op.index()];
        let store = shared.stores[op.index()].as_ref();
        let exec = match req.time.fire() {
            Some(fire) => operator.fire(fire.domain, fire.until, store, &mut out, &mut rejects),
            None => {
                // Only an operator with event-time timers filters by it (`Erased::process`).
                let late_until = Frontiers::late_until(
                    req.time.watermark(),
                    shared.pipeline.operator(op).allowed_lateness,
                );
                let port = usize::from(req.port);
                operator.process(&req.batch, port, late_until, store, &mut out, &mut rejects)
            }
        };
        // Whether a migration's pause passed this execution by in its service time.
        let mut migrated_meanwhile = false;
        let mut service_us = 0.0;
        if let Some(service) = shared.pipeline.operator(op).service {
            service_us = service.micros_for(req.batch.len());
            shared.sched.enter_service();
            spend_off_cpu(&shared, service_us, service.mode);
            migrated_meanwhile = shared.sched.leave_service();
        }
        let c = &counters.ops[op.index()];
        bump(&c.processed, 1);
        bump(&c.records, req.batch.len() as u64);
        bump(&c.emitted, out.emitted);
        if timed {
            clock = Instant::now();
            bump(&c.timed, weight);
            let exec_ns = clock.duration_since(started).as_nanos() as u64;
            bump(&c.exec_ns, weight * exec_ns);
            let sq = u128::from(exec_ns).pow(2) / u128::from(EXEC_SQ_UNIT_NS2);
            bump(&c.exec_sq, u64::try_from(u128::from(weight) * sq).unwrap_or(u64::MAX));
            if let Some(at) = req.enqueued {
                bump(&c.wait_ns, weight * started.saturating_duration_since(at).as_nanos() as u64);
            }
        }
        bump(&c.touched, u64::from(exec.touched_state));
        let group_counts = &counters.groups[op.index()];
        if !group_counts.is_empty() {
            let n = group_counts.len() as u32;
            for r in req.batch.iter() {
                bump(&group_counts[clasp_core::hash::key_group(r.hash, n).index()], 1);
            }
        }
        if rejects.total() > 0 {
            shared.record_rejects(op, &rejects);
            rejects.clear();
        }
        out.finish(req.credit);
        if migrated_meanwhile {
            out.readmit_local();
        }
        if shared.settings.dispatch_cost.is_some() {
            // The emulated dispatch cost was just spent: it is not the next execution's time.
            clock = Instant::now();
        }
        out.recycle(req.batch);
        out.flush_remote_due(clock);
        out.flush_planner_due(clock);
        let fanout = super::fanout::due(&shared, service_us + out.dispatch_spent_us);
        if fanout > 0.0
            && let Some(cost) = shared.settings.dispatch_cost
        {
            // The worker's share of the fan-out cost: it holds this slot, not the operator.
            // `hand_back` took the executor off the CPU count; it is back on it while it spends.
            std::mem::swap(&mut local, &mut out.local);
            shared.sched.hand_back(op, &mut local, clock);
            shared.sched.back_on_cpu();
            spend_off_cpu(&shared, fanout, cost.mode);
            shared.sched.off_cpu();
            clock = Instant::now();
        } else {
            finished = Some(op);
        }
    }
}
