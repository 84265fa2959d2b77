//! The inputs: one thread per source reads its records into input requests, paced by the
//! source's rate, into the planner's incoming queue.
//!
//! A source's thread stays alive after its input ended, so that a recovery can send it back
//! to a checkpoint's position: [`IngressControl`] holds it at the top of its loop (dropping
//! the batch it was reading), the planner empties the queue, and it resumes from the position
//! it is given.

use super::{PlannerError, Shared};
use crate::source::{Pacer, RateFn};
use clasp_core::Batch;
use clasp_core::SourceId;
use clasp_core::input::{InputRecord, LineSource, Next, SourcePosition};
use clasp_core::sync::{lock, wait_timeout};
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
}

/// One input of a run.
pub struct Input {
    /// The source it feeds.
    pub source: SourceId,
    /// Its records.
    pub reader: Box<dyn LineSource>,
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
    pub(super) position: Option<SourcePosition>,
}

#[derive(Debug, Default)]
struct IngressState {
    hold: bool,
    parked: bool,
    exited: bool,
    ended: bool,
    seek: Option<SourcePosition>,
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
    pub(super) fn release(&self, seek: Option<SourcePosition>) {
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

/// What happened at the top of the loop.
enum Top {
    Read,
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
            if let Some(to) = s.seek.take()
                && let Err(e) = self.input.reader.seek(to)
            {
                drop(s);
                self.fail(format!("going back to {to}: {e}"));
                return Top::Stop;
            }
            if !s.ended {
                return Top::Read;
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
        let mut pacer = Pacer::new(std::mem::replace(&mut self.input.rate, Box::new(|_| None)));
        let mut rec = InputRecord::default();
        'outer: loop {
            if let Top::Stop = self.top() {
                return;
            }
            let mut batch = Batch::with_capacity(batch_size, batch_size * 64);
            let mut origin_ns: Option<u64> = None;
            let mut end = false;
            while batch.len() < batch_size {
                match self.input.reader.next_record(&mut rec) {
                    Ok(Next::Record) => {
                        let key = if rec.keyed { &rec.key[..] } else { source.key_of(&rec.value) };
                        batch.push(key, &rec.value);
                        if let Some(o) = rec.origin_ns {
                            origin_ns = Some(origin_ns.map_or(o, |m| m.min(o)));
                        }
                    }
                    Ok(Next::Idle) if batch.is_empty() => {
                        if self.stop.load(Ordering::Acquire) || self.control.held() {
                            continue 'outer;
                        }
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
            let position = self.input.reader.position();
            if !batch.is_empty() && !self.send(&mut pacer, batch, origin_ns, position) {
                continue;
            }
            if end {
                let mut s = lock(&self.control.state);
                // A hold that came meanwhile rewinds the source anyway.
                if !s.hold {
                    s.ended = true;
                }
            }
        }
    }

    /// Paces and queues one request; `false` when a hold or the stop dropped it.
    fn send(
        &self,
        pacer: &mut Pacer,
        batch: Batch,
        origin_ns: Option<u64>,
        position: Option<SourcePosition>,
    ) -> bool {
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
        let mut item = Queued { source: self.input.source, batch, origin_ns, position };
        // A full queue holds the source back (unthrottled input retries).
        loop {
            match self.queue.send_timeout(item, Duration::from_millis(50)) {
                Ok(()) => break,
                Err(crossbeam_channel::SendTimeoutError::Timeout(back)) => {
                    if self.stop.load(Ordering::Acquire) || self.control.held() {
                        return false;
                    }
                    item = back;
                }
                Err(crossbeam_channel::SendTimeoutError::Disconnected(_)) => return false,
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
