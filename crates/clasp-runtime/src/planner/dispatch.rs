//! The scheduling engine for input requests: each request from the incoming queue opens a
//! chain and goes to the worker that owns its records, within the in-flight limit.
//!
//! It records each source's position after the last request it dispatched (a checkpoint's
//! replay point) as it opens the request's chain, and parks when the planner pauses it (a
//! recovery).

use super::Shared;
use super::ingress::{Queued, ReplayPoint};
use crate::migration;
use crate::request::{FULL_CREDIT, Request, split_credit};
use crate::wire::{self, Cut, Message};
use crate::worker::executor::now_ns;
use clasp_core::rng::independent_stream;
use clasp_core::sync::{lock, wait_timeout};
use clasp_core::{Batch, Endpoint, Pipeline, WorkerId};
use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Pausing the dispatcher, and what it dispatched.
#[derive(Debug, Default)]
pub(super) struct DispatchGate {
    state: Mutex<GateState>,
    changed: Condvar,
    /// Input requests dispatched.
    pub(super) dispatched: AtomicU64,
    /// Input requests taken out of the queue without being dispatched (a recovery).
    pub(super) discarded: AtomicU64,
}

#[derive(Debug, Default)]
struct GateState {
    paused: bool,
    parked: bool,
    /// Per source: its position after the last request dispatched (`None`: none yet).
    positions: Vec<Option<ReplayPoint>>,
}

impl DispatchGate {
    /// Pauses the dispatcher and waits until it parked (or `finished` says it exited).
    pub(super) fn pause(&self, finished: impl Fn() -> bool) {
        let mut s = lock(&self.state);
        s.paused = true;
        self.changed.notify_all();
        while !s.parked && !finished() {
            s = wait_timeout(&self.changed, s, Duration::from_millis(1));
        }
    }

    /// Lets the dispatcher go on.
    pub(super) fn resume(&self) {
        lock(&self.state).paused = false;
        self.changed.notify_all();
    }

    /// The sources' positions after the last request dispatched; exact under the chains'
    /// lock, under which a request's chain opens and its position is recorded.
    pub(super) fn positions(&self) -> Vec<Option<ReplayPoint>> {
        lock(&self.state).positions.clone()
    }

    /// Sets the sources' positions (a recovery rewinds them).
    pub(super) fn set_positions(&self, positions: Vec<Option<ReplayPoint>>) {
        lock(&self.state).positions = positions;
    }

    /// Parks while paused; `false` when the planner is stopping.
    fn wait_while_paused(&self, shared: &Shared) -> bool {
        let mut s = lock(&self.state);
        while s.paused {
            if shared.stopping.load(Ordering::Acquire) {
                return false;
            }
            s.parked = true;
            self.changed.notify_all();
            s = wait_timeout(&self.changed, s, Duration::from_millis(20));
        }
        s.parked = false;
        true
    }

    /// The dispatcher exited (its queue closed, or the planner stops): it dispatches nothing
    /// more, so it counts as parked from now on.
    fn exited(&self) {
        lock(&self.state).parked = true;
        self.changed.notify_all();
    }

    /// A dispatcher is about to start: not parked until it parks.
    fn starting(&self) {
        lock(&self.state).parked = false;
    }

    fn dispatched_from(&self, source: usize, position: ReplayPoint) {
        let mut s = lock(&self.state);
        if s.positions.len() <= source {
            s.positions.resize(source + 1, None);
        }
        s.positions[source] = Some(position);
    }
}

/// Entry points of each source: (operator, input port) per stream, or a sink.
fn entries(p: &Pipeline) -> Vec<Vec<Endpoint>> {
    p.sources
        .iter()
        .map(|s| p.source_outputs(s.id).iter().map(|&st| p.stream(st).to).collect())
        .collect()
}

pub(super) fn spawn_dispatcher(
    shared: Arc<Shared>,
    queue: Receiver<Queued>,
) -> std::thread::JoinHandle<()> {
    shared.dispatch.starting();
    std::thread::Builder::new()
        .name("planner-dispatch".into())
        .spawn(move || {
            let p = shared.pipeline.clone();
            let entries = entries(&p);
            let not_a_worker = WorkerId(u32::MAX);
            let mut rng = independent_stream(shared.config.settings.seed, 0xd15);
            let mut parts: Vec<(WorkerId, Request)> = Vec::new();
            let gate = &shared.dispatch;
            let _parked = ParkOnExit(gate);
            let max_bytes = shared.config.max_in_flight_bytes;
            loop {
                if !gate.wait_while_paused(&shared) {
                    return;
                }
                let item = match queue.recv_timeout(Duration::from_millis(20)) {
                    Ok(item) => item,
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => return,
                };
                let bytes = item.batch.byte_len() as u64;
                shared.queued_bytes.fetch_sub(bytes, Ordering::AcqRel);
                let discard = || shared.discarding.load(Ordering::Acquire);
                let (chain, cut) = {
                    let mut c = lock(&shared.chains);
                    // Within the count and the bytes in flight; a chain alone may exceed the
                    // bytes (it is at most one request).
                    while !discard()
                        && (c.in_flight() >= shared.config.max_in_flight
                            || (c.in_flight() > 0 && c.bytes_in_flight() + bytes > max_bytes))
                    {
                        if shared.stopping.load(Ordering::Acquire) {
                            return;
                        }
                        c = wait_timeout(&shared.chains_done, c, Duration::from_millis(50));
                    }
                    if discard() {
                        shared.dropped.fetch_add(1, Ordering::Relaxed);
                        gate.discarded.fetch_add(1, Ordering::Release);
                        continue;
                    }
                    let chain = c.open(item.origin_ns.unwrap_or_else(now_ns), bytes);
                    c.dispatched_at(now_ns());
                    // Under the chains' lock, as a checkpoint's boundary starts its cut: the
                    // positions it reads are those after the last chain before the cut.
                    let replay = ReplayPoint { position: item.position, watermark: item.advanced };
                    gate.dispatched_from(item.source.index(), replay);
                    gate.dispatched.fetch_add(1, Ordering::Release);
                    (chain, Cut::of(c.cut()))
                };
                let routing = shared.routing();
                let outs = &entries[item.source.index()];
                let mut records = Some(item.batch);
                let shares: Vec<u64> = split_credit(FULL_CREDIT, outs.len()).collect();
                let mut leftover = 0;
                for (i, (end, share)) in outs.iter().zip(shares).enumerate() {
                    match *end {
                        Endpoint::Operator(op) => {
                            let stream = p.source_outputs(item.source)[i];
                            let port =
                                p.inputs(op).iter().position(|s| *s == stream).unwrap_or(0) as u16;
                            let batch = take_or_clone(&mut records, i + 1 == outs.len());
                            let mut req = Request::new(op, port, chain, routing.epoch, batch);
                            req.cut = cut;
                            req.credit = share;
                            req.time = wire::ChainTime::entered(item.watermark);
                            parts.extend(migration::reroute(req, &routing, not_a_worker, &mut rng));
                        }
                        Endpoint::Sink(s) => {
                            let batch = take_or_clone(&mut records, i + 1 == outs.len());
                            shared.sink_records.fetch_add(batch.len() as u64, Ordering::Relaxed);
                            let name = &p.sinks[s.index()].name;
                            if let Err(e) = lock(&shared.sink).write_cut(name, batch, cut) {
                                shared.output_failed(e);
                            }
                            leftover += share;
                        }
                        Endpoint::Source(_) => leftover += share,
                    }
                }
                for (w, req) in parts.drain(..) {
                    shared.send(w, Message::Request(req));
                }
                if item.advanced != item.watermark {
                    lock(&shared.clock).dispatched(chain, item.source, item.advanced);
                }
                if leftover > 0 {
                    shared.settle(&[wire::CreditReturn {
                        chain,
                        credit: leftover,
                        done_ns: now_ns(),
                    }]);
                }
                shared.poll_clock();
            }
        })
        .expect("spawn dispatcher")
}

/// Marks the dispatcher parked however its thread ends, so a pause never waits for it.
struct ParkOnExit<'a>(&'a DispatchGate);

impl Drop for ParkOnExit<'_> {
    fn drop(&mut self) {
        self.0.exited();
    }
}

/// The batch itself for its last use, a copy before that.
fn take_or_clone(slot: &mut Option<Batch>, last: bool) -> Batch {
    if last { slot.take().unwrap_or_default() } else { slot.clone().unwrap_or_default() }
}
