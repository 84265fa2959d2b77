//! The inputs: one thread per source reads its records into input requests, paced by the
//! source's rate, into the planner's incoming queue.
//!
//! A source's thread stays alive after its input ended, so that a recovery can send it back
//! to a checkpoint's position: [`IngressControl`] holds it at the top of its loop (dropping
//! the batch it was reading), the planner empties the queue, and it resumes from the position
//! it is given, with the watermark it had there.
//!
//! Each request carries the source's watermark when it entered and after its records (see
//! `clock`).

use super::{PlannerError, Shared};
use crate::source::{Pacer, RateFn};
use clasp_core::Batch;
use clasp_core::SourceId;
use clasp_core::input::{InputRecord, Next};
use clasp_core::source::{self, Source, SourcePosition};
use clasp_core::sync::{lock, wait_timeout};
use clasp_core::time::BoundedOutOfOrderness;
use crossbeam_channel::Sender;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
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
    /// The source's position after this batch.
    pub(super) position: SourcePosition,
    /// The source's watermark before these records (their lateness is judged against it).
    pub(super) watermark: Option<u64>,
    /// The source's watermark after them.
    pub(super) advanced: Option<u64>,
}

/// Where a source can be sent back to (a checkpoint's replay point): its position after a
/// request, and its watermark after that request's records.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ReplayPoint {
    /// The source's position.
    pub position: SourcePosition,
    /// Its watermark there (`None`: no event time read yet).
    #[serde(default)]
    pub watermark: Option<u64>,
}

/// Bytes of a request frame besides its records: the message's fields and each record's
/// lengths and hash, with room to spare.
const FRAME_OVERHEAD: usize = 4096;

#[derive(Debug, Default)]
struct IngressState {
    hold: bool,
    parked: bool,
    exited: bool,
    ended: bool,
    seek: Option<ReplayPoint>,
}

/// Holds and rewinds one source's thread.
#[derive(Debug, Default)]
pub(super) struct IngressControl {
    state: Mutex<IngressState>,
    changed: Condvar,
}

impl IngressControl {
    /// Whether the input was read to its end.
    pub(super) fn ended(&self) -> bool {
        lock(&self.state).ended
    }

    /// Asks the thread to stop at the top of its loop.
    pub(super) fn hold(&self) {
        lock(&self.state).hold = true;
        self.changed.notify_all();
    }

    /// Waits until the thread is held (or it exited).
    pub(super) fn wait_parked(&self) {
        let mut s = lock(&self.state);
        while !s.parked && !s.exited {
            s = wait_timeout(&self.changed, s, Duration::from_millis(5));
        }
    }

    /// Lets a held thread go on, from `seek` when given.
    pub(super) fn release(&self, seek: Option<ReplayPoint>) {
        let mut s = lock(&self.state);
        s.hold = false;
        if seek.is_some() {
            s.seek = seek;
            s.ended = false;
        }
        drop(s);
        self.changed.notify_all();
    }

    fn held(&self) -> bool {
        lock(&self.state).hold
    }
}

/// What one source's thread works with.
pub(super) struct IngressThread {
    pub(super) shared: Arc<Shared>,
    pub(super) input: Input,
    pub(super) queue: Sender<Queued>,
    pub(super) stop: Arc<AtomicBool>,
    pub(super) counters: Arc<InputCounters>,
    pub(super) started: Instant,
    pub(super) errors: Arc<Mutex<Option<PlannerError>>>,
    pub(super) control: Arc<IngressControl>,
}

/// Where a request leaves its source: the position after it, and the watermark before and
/// after its records.
struct Marks {
    position: SourcePosition,
    entered: Option<u64>,
    advanced: Option<u64>,
}

/// What happened at the top of the loop.
enum Top {
    /// Read on; `rewound`: the source was sent back to another position, where it had this
    /// watermark.
    Read {
        rewound: Option<Option<u64>>,
    },
    Stop,
}

impl IngressThread {
    fn fail(&self, error: String) {
        let source = &self.shared.pipeline.sources[self.input.source.index()];
        lock(&self.errors)
            .get_or_insert(PlannerError::Input { source_name: source.name.clone(), error });
    }

    /// Parks while held, applies a seek, and waits while the input has ended.
    fn top(&mut self) -> Top {
        let c = self.control.clone();
        let mut s = lock(&c.state);
        let mut rewound = None;
        loop {
            if self.stop.load(Ordering::Acquire) {
                return Top::Stop;
            }
            if s.hold {
                s.parked = true;
                c.changed.notify_all();
                s = wait_timeout(&c.changed, s, Duration::from_millis(20));
                continue;
            }
            s.parked = false;
            if let Some(to) = s.seek.take() {
                if let Err(e) = self.input.reader.seek(&to.position) {
                    drop(s);
                    self.fail(format!("going back to a checkpoint's position: {e}"));
                    return Top::Stop;
                }
                rewound = Some(to.watermark);
            }
            if !s.ended {
                return Top::Read { rewound };
            }
            s = wait_timeout(&c.changed, s, Duration::from_millis(20));
        }
    }

    fn run(self) {
        let control = self.control.clone();
        self.read_all();
        lock(&control.state).exited = true;
        control.changed.notify_all();
    }

    fn read_all(mut self) {
        let source = self.shared.pipeline.sources[self.input.source.index()].clone();
        let batch_size = self.shared.config.batch_size.max(1) as usize;
        let max_frame = self.shared.config.settings.max_frame;
        // A record must fit one request frame with room for the request's own fields.
        let largest = (max_frame as usize).saturating_sub(FRAME_OVERHEAD);
        let max_bytes = self.shared.config.max_request_bytes.clamp(1, largest.max(1));
        let mut pacer = Pacer::new(std::mem::replace(&mut self.input.rate, Box::new(|_| None)));
        let mut rec = InputRecord::default();
        // A record read and not yet in a request (it opens the next one), and the source's
        // position before it (the position after the request it did not fit).
        // Whether a record read is not in a request yet (it overflowed the last one), and the
        // source's position before it: asked before every record, into one reused buffer.
        let mut pending = false;
        let mut pending_at = SourcePosition::default();
        let mut oversized = 0u64;
        let mut bounded = BoundedOutOfOrderness::new(source.out_of_orderness);
        let mut watermark = None;
        // Room for a request's bytes, from the one before: the queue and the requests in
        // flight are bounded by the bytes they hold, so a request must not hold much more room
        // than bytes (a fixed 64 KiB for requests of 13 KB made memory 5 times the bound).
        let mut room = max_bytes.min(64 << 10);
        'outer: loop {
            match self.top() {
                Top::Stop => return,
                // A rewound source reads the pending record again, and its watermark goes on
                // from the checkpoint's: the largest time before it is already in that.
                Top::Read { rewound: Some(at) } => {
                    pending = false;
                    bounded = BoundedOutOfOrderness::new(source.out_of_orderness);
                    watermark = at;
                }
                Top::Read { rewound: None } => {}
            }
            let mut batch = Batch::with_capacity(batch_size.min(4096), room);
            let mut origin_ns: Option<u64> = None;
            let mut end = false;
            while batch.len() < batch_size {
                if !pending {
                    self.input.reader.position_into(&mut pending_at);
                    source::reset(&mut rec);
                    match self.input.reader.next_record(&mut rec) {
                        Ok(Next::Record) => pending = true,
                        Ok(Next::Idle) if batch.is_empty() => {
                            if self.stop.load(Ordering::Acquire) || self.control.held() {
                                continue 'outer;
                            }
                            continue;
                        }
                        Ok(Next::Idle) => break,
                        Ok(Next::End) => {
                            end = true;
                            break;
                        }
                        Err(e) => {
                            self.fail(e.to_string());
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
                    self.counters.oversized.fetch_add(1, Ordering::Relaxed);
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
            // The position after the request: before the pending record, if one is.
            let position = if pending { pending_at.clone() } else { self.input.reader.position() };
            if !batch.is_empty() {
                room = (batch.byte_len() + batch.byte_len() / 8).max(1 << 10).min(max_bytes);
                let entered = watermark;
                let advanced =
                    self.input.reader.watermark().or_else(|| bounded.watermark()).max(watermark);
                let marks = Marks { position, entered, advanced };
                if !self.send(&mut pacer, batch, origin_ns, marks) {
                    continue;
                }
                watermark = advanced;
            }
            if end {
                if oversized > 0 {
                    tracing::warn!(
                        "source `{}`: {oversized} record(s) larger than the frame limit of {max_frame} bytes were skipped",
                        source.name
                    );
                }
                let mut s = lock(&self.control.state);
                // A hold that came meanwhile rewinds the source anyway.
                if !s.hold {
                    s.ended = true;
                }
            }
        }
    }

    /// Paces and queues one request; `false` when a hold or the stop dropped it.
    fn send(&self, pacer: &mut Pacer, batch: Batch, origin_ns: Option<u64>, marks: Marks) -> bool {
        loop {
            if self.stop.load(Ordering::Acquire) || self.control.held() {
                return false;
            }
            let wait = pacer.wait(self.started.elapsed().as_secs_f64());
            if wait <= 0.0 {
                break;
            }
            std::thread::sleep(Duration::from_secs_f64(wait.min(0.05)));
        }
        pacer.take();
        let n = batch.len() as u64;
        let bytes = batch.byte_len() as u64;
        let shared = &self.shared;
        // The queue is bounded in bytes too: a source waits while it holds more than its
        // share (one request always enters an empty queue).
        loop {
            let queued = shared.queued_bytes.load(Ordering::Acquire);
            if queued == 0 || queued + bytes <= shared.config.max_queued_bytes {
                break;
            }
            if self.stop.load(Ordering::Acquire) || self.control.held() {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        shared.queued_bytes.fetch_add(bytes, Ordering::AcqRel);
        let Marks { position, entered, advanced } = marks;
        let mut item = Queued {
            source: self.input.source,
            batch,
            origin_ns,
            position,
            watermark: entered,
            advanced,
        };
        // A full queue holds the source back (unthrottled input retries).
        loop {
            match self.queue.send_timeout(item, Duration::from_millis(50)) {
                Ok(()) => break,
                Err(crossbeam_channel::SendTimeoutError::Timeout(back)) => {
                    if self.stop.load(Ordering::Acquire) || self.control.held() {
                        shared.queued_bytes.fetch_sub(bytes, Ordering::AcqRel);
                        return false;
                    }
                    item = back;
                }
                Err(crossbeam_channel::SendTimeoutError::Disconnected(_)) => {
                    shared.queued_bytes.fetch_sub(bytes, Ordering::AcqRel);
                    return false;
                }
            }
        }
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        self.counters.records.fetch_add(n, Ordering::Relaxed);
        let second = self.started.elapsed().as_secs() as usize;
        let mut ps = lock(&self.counters.per_second);
        if ps.len() <= second {
            ps.resize(second + 1, 0);
        }
        ps[second] += 1;
        true
    }
}

pub(super) fn spawn_ingress(t: IngressThread) -> std::thread::JoinHandle<()> {
    std::thread::Builder::new()
        .name(format!("planner-ingress-{}", t.input.source))
        .spawn(move || t.run())
        .expect("spawn ingress")
}
