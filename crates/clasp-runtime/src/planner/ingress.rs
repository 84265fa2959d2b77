//! The inputs: one thread per source reads its records into input requests, paced by the
//! source's rate, into the planner's incoming queue. Each request carries the source's
//! watermark when it entered and after its records (see `clock`).

use super::{PlannerError, Shared};
use crate::source::{Pacer, RateFn};
use clasp_core::Batch;
use clasp_core::SourceId;
use clasp_core::input::{InputRecord, Next};
use clasp_core::source::{self, Source};
use clasp_core::sync::lock;
use clasp_core::time::BoundedOutOfOrderness;
use crossbeam_channel::Sender;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Counts of what entered the planner.
#[derive(Debug, Default)]
pub struct InputCounters {
    /// Input requests queued.
    pub requests: AtomicU64,
    /// Records in them.
    pub records: AtomicU64,
    /// Requests queued per second since the start.
    pub per_second: Mutex<Vec<u64>>,
    /// Records skipped because no frame could carry them.
    pub oversized: AtomicU64,
}

/// One input of a run.
pub struct Input {
    /// The source it feeds.
    pub source: SourceId,
    /// Its records (a line source joins through [`clasp_core::source::from_lines`]).
    pub reader: Box<dyn Source>,
    /// How fast (requests/s over time).
    pub rate: RateFn,
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Input").field("source", &self.source).finish_non_exhaustive()
    }
}

/// A request waiting in the planner's incoming queue.
pub(super) struct Queued {
    pub(super) source: SourceId,
    pub(super) batch: Batch,
    /// When the oldest record's chain started, if before the planner read it.
    pub(super) origin_ns: Option<u64>,
    /// The source's watermark before these records (their lateness is judged against it).
    pub(super) watermark: Option<u64>,
    /// The source's watermark after them.
    pub(super) advanced: Option<u64>,
}

/// Bytes of a request frame besides its records: the message's fields and each record's
/// lengths and hash, with room to spare.
const FRAME_OVERHEAD: usize = 4096;

pub(super) fn spawn_ingress(
    shared: Arc<Shared>,
    mut input: Input,
    queue: Sender<Queued>,
    stop: Arc<AtomicBool>,
    counters: Arc<InputCounters>,
    started: Instant,
    errors: Arc<Mutex<Option<PlannerError>>>,
) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name(format!("planner-ingress-{}", input.source))
        .spawn(move || {
            let source = &shared.pipeline.sources[input.source.index()];
            let batch_size = shared.config.batch_size.max(1) as usize;
            let max_frame = shared.config.settings.max_frame;
            // A record must fit one request frame with room for the request's own fields.
            let largest = (max_frame as usize).saturating_sub(FRAME_OVERHEAD);
            let max_bytes = shared.config.max_request_bytes.clamp(1, largest.max(1));
            // A record read and not yet in a request (it opens the next one).
            let mut pending = false;
            let max_queued = shared.config.max_queued_bytes;
            let mut pacer = Pacer::new(std::mem::replace(&mut input.rate, Box::new(|_| None)));
            let mut rec = InputRecord::default();
            let mut bounded = BoundedOutOfOrderness::new(source.out_of_orderness);
            let mut watermark = None;
            let mut oversized = 0u64;
            // Room for a request's bytes, from the one before: the queue and the requests in
            // flight are bounded by the bytes they hold, so a request must not hold much more
            // room than bytes (a fixed 64 KiB for requests of 13 KB made memory 5 times the
            // bound).
            let mut room = max_bytes.min(64 << 10);
            loop {
                let mut batch = Batch::with_capacity(batch_size.min(4096), room);
                let mut origin_ns: Option<u64> = None;
                while batch.len() < batch_size {
                    if !pending {
                        source::reset(&mut rec);
                        match input.reader.next_record(&mut rec) {
                            Ok(Next::Record) => pending = true,
                            Ok(Next::Idle) if batch.is_empty() => {
                                if stop.load(Ordering::Acquire) {
                                    return;
                                }
                                continue;
                            }
                            Ok(Next::Idle | Next::End) => break,
                            Err(e) => {
                                lock(&errors).get_or_insert(PlannerError::Input {
                                    source_name: source.name.clone(),
                                    error: e.to_string(),
                                });
                                return;
                            }
                        }
                    }
                    let key = if rec.keyed { &rec.key[..] } else { source.key_of(&rec.value) };
                    let size = key.len() + rec.value.len();
                    if size > largest {
                        if oversized == 0 {
                            tracing::warn!(
                                "source `{}`: a record of {size} bytes exceeds the frame limit of {max_frame} bytes; it and any other such record are skipped and counted",
                                source.name
                            );
                        }
                        oversized += 1;
                        counters.oversized.fetch_add(1, Ordering::Relaxed);
                        pending = false;
                        continue;
                    }
                    // The record that would take the request past its bytes opens the next.
                    if !batch.is_empty() && batch.byte_len() + size > max_bytes {
                        break;
                    }
                    batch.push_timed(key, &rec.value, rec.time);
                    if let Some(t) = rec.time {
                        bounded.observe(t);
                    }
                    pending = false;
                    if let Some(o) = rec.origin_ns {
                        origin_ns = Some(origin_ns.map_or(o, |m| m.min(o)));
                    }
                }
                if batch.is_empty() {
                    if oversized > 0 {
                        tracing::warn!(
                            "source `{}`: {oversized} record(s) larger than the frame limit of {max_frame} bytes were skipped",
                            source.name
                        );
                    }
                    return;
                }
                loop {
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    let wait = pacer.wait(started.elapsed().as_secs_f64());
                    if wait <= 0.0 {
                        break;
                    }
                    std::thread::sleep(Duration::from_secs_f64(wait.min(0.05)));
                }
                pacer.take();
                let n = batch.len() as u64;
                let bytes = batch.byte_len() as u64;
                room = (batch.byte_len() + batch.byte_len() / 8).max(1 << 10).min(max_bytes);
                // The queue is bounded in bytes too: a source waits while it holds more than
                // its share (one request always enters an empty queue).
                loop {
                    let queued = shared.queued_bytes.load(Ordering::Acquire);
                    if queued == 0 || queued + bytes <= max_queued {
                        break;
                    }
                    if stop.load(Ordering::Acquire) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                shared.queued_bytes.fetch_add(bytes, Ordering::AcqRel);
                let entered = watermark;
                watermark = input.reader.watermark().or_else(|| bounded.watermark()).max(watermark);
                let mut item = Queued {
                    source: input.source,
                    batch,
                    origin_ns,
                    watermark: entered,
                    advanced: watermark,
                };
                // A full queue holds the source back (unthrottled input retries).
                loop {
                    match queue.send_timeout(item, Duration::from_millis(50)) {
                        Ok(()) => break,
                        Err(crossbeam_channel::SendTimeoutError::Timeout(back)) => {
                            if stop.load(Ordering::Acquire) {
                                shared.queued_bytes.fetch_sub(bytes, Ordering::AcqRel);
                                return;
                            }
                            item = back;
                        }
                        Err(crossbeam_channel::SendTimeoutError::Disconnected(_)) => return,
                    }
                }
                counters.requests.fetch_add(1, Ordering::Relaxed);
                counters.records.fetch_add(n, Ordering::Relaxed);
                let second = started.elapsed().as_secs() as usize;
                let mut ps = lock(&counters.per_second);
                if ps.len() <= second {
                    ps.resize(second + 1, 0);
                }
                ps[second] += 1;
            }
        })
        .expect("spawn ingress")
}
