//! The scheduling engine for input requests: each request from the incoming queue opens a
//! chain and goes to the worker that owns its records, within the in-flight limit.

use super::Shared;
use super::ingress::Queued;
use crate::migration;
use crate::request::{FULL_CREDIT, Request, split_credit};
use crate::wire::{self, Message};
use crate::worker::executor::now_ns;
use clasp_core::rng::independent_stream;
use clasp_core::sync::{lock, wait_timeout};
use clasp_core::{Batch, Endpoint, Pipeline, WorkerId};
use crossbeam_channel::Receiver;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

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
    std::thread::Builder::new()
        .name("planner-dispatch".into())
        .spawn(move || {
            let p = shared.pipeline.clone();
            let entries = entries(&p);
            let not_a_worker = WorkerId(u32::MAX);
            let mut rng = independent_stream(shared.config.settings.seed, 0xd15);
            let mut parts: Vec<(WorkerId, Request)> = Vec::new();
            let mut last_chain = None;
            let max_bytes = shared.config.max_in_flight_bytes;
            while let Ok(item) = queue.recv() {
                let bytes = item.batch.byte_len() as u64;
                shared.queued_bytes.fetch_sub(bytes, Ordering::AcqRel);
                let discard = || shared.discarding.load(Ordering::Acquire);
                let chain = {
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
                        continue;
                    }
                    c.open(item.origin_ns.unwrap_or_else(now_ns), bytes)
                };
                last_chain = Some(chain);
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
                            req.credit = share;
                            req.time = wire::ChainTime::entered(item.watermark);
                            parts.extend(migration::reroute(req, &routing, not_a_worker, &mut rng));
                        }
                        Endpoint::Sink(s) => {
                            let batch = take_or_clone(&mut records, i + 1 == outs.len());
                            shared.sink_records.fetch_add(batch.len() as u64, Ordering::Relaxed);
                            if let Err(e) =
                                lock(&shared.sink).write(&p.sinks[s.index()].name, &batch)
                            {
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
            lock(&shared.clock).inputs_ended(last_chain);
            shared.poll_clock();
        })
        .expect("spawn dispatcher")
}

/// The batch itself for its last use, a copy before that.
fn take_or_clone(slot: &mut Option<Batch>, last: bool) -> Batch {
    if last { slot.take().unwrap_or_default() } else { slot.clone().unwrap_or_default() }
}
