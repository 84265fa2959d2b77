//! A worker's incoming request queue and the choice of what its executors run next.
//!
//! Requests wait in one queue per operator. An idle executor takes the oldest request among the
//! operators that have fewer running executions than their instance limit (the parallelism the
//! plan gives this worker), so one operator cannot take every slot. Migration pauses the
//! queue, waits for running executions, and takes the queued requests out.

use crate::request::Request;
use clasp_core::OperatorId;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

#[derive(Debug)]
struct Inner {
    queues: Vec<VecDeque<Request>>,
    running: Vec<u32>,
    limits: Vec<u32>,
    queued: usize,
    running_total: u32,
    paused: bool,
    shutdown: bool,
    idle_executors: u32,
}

/// The queue shared by the receivers, the executors and the migration handler.
///
/// Idle executors are woken only while fewer executors than cores are running on a CPU:
/// more would just take turns on the cores. An executor sleeping in an emulated service time
/// does not count as running, so slot-bound (sleep) workloads still use every slot.
#[derive(Debug)]
pub struct Scheduler {
    inner: Mutex<Inner>,
    work: Condvar,
    drained: Condvar,
    cores: u32,
    on_cpu: AtomicU32,
}

/// What an executor gets.
#[derive(Debug)]
pub enum Next {
    /// Run this; `slept` tells whether the executor blocked waiting for it (so the time it
    /// last read is stale).
    Run {
        /// The request.
        request: Request,
        /// Whether the executor blocked.
        slept: bool,
    },
    /// The worker is stopping.
    Shutdown,
}

impl Scheduler {
    /// A queue for `ops` operators, each limited to `limits[o]` concurrent executions.
    pub fn new(limits: Vec<u32>) -> Self {
        let ops = limits.len();
        Self {
            inner: Mutex::new(Inner {
                queues: (0..ops).map(|_| VecDeque::new()).collect(),
                running: vec![0; ops],
                limits,
                queued: 0,
                running_total: 0,
                paused: false,
                shutdown: false,
                idle_executors: 0,
            }),
            work: Condvar::new(),
            drained: Condvar::new(),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            on_cpu: AtomicU32::new(0),
        }
    }

    /// How many idle executors to wake for `queued` runnable requests.
    fn wakes(&self, idle: u32, queued: usize) -> u32 {
        let free_cores = self.cores.saturating_sub(self.on_cpu.load(Ordering::Relaxed));
        idle.min(queued as u32).min(free_cores)
    }

    /// The calling executor stops using a CPU (it is about to sleep in a service time).
    pub fn off_cpu(&self) {
        self.on_cpu.fetch_sub(1, Ordering::Relaxed);
    }

    /// The calling executor uses a CPU again.
    pub fn back_on_cpu(&self) {
        self.on_cpu.fetch_add(1, Ordering::Relaxed);
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Enqueues requests (stamping their arrival) and wakes executors for them.
    pub fn push_many(&self, reqs: impl IntoIterator<Item = Request>) {
        let now = Instant::now();
        let mut g = self.lock();
        let mut n = 0;
        for mut r in reqs {
            r.enqueued = Some(now);
            g.queues[r.op.index()].push_back(r);
            n += 1;
        }
        g.queued += n;
        let wake = self.wakes(g.idle_executors, n);
        drop(g);
        for _ in 0..wake {
            self.work.notify_one();
        }
    }

    /// Puts requests at the front of their operators' queues, in the given order (requests
    /// handed over in a migration, older than anything queued here).
    pub fn push_front_many(&self, reqs: Vec<Request>) {
        let now = Instant::now();
        let mut g = self.lock();
        let n = reqs.len();
        for mut r in reqs.into_iter().rev() {
            r.enqueued = Some(now);
            g.queues[r.op.index()].push_front(r);
        }
        g.queued += n;
        drop(g);
        self.work.notify_all();
    }

    /// Blocks until a request may run or the worker stops. `before_sleep` runs (without the
    /// lock) before the executor would block, so it can flush what it buffered.
    pub fn next(&self, before_sleep: impl FnMut()) -> Next {
        self.next_after(None, &mut Vec::new(), Instant::now(), before_sleep)
    }

    /// Ends the caller's execution of `finished` (if any), queues the local chained requests
    /// it caused (arrived at `now`), and picks the caller's next request — all under one lock.
    /// The caller takes one request itself, so a single chained request wakes no other
    /// executor (work-first: a chain runs depth-first on the executor that produced it).
    pub fn next_after(
        &self,
        finished: Option<OperatorId>,
        children: &mut Vec<Request>,
        now: Instant,
        mut before_sleep: impl FnMut(),
    ) -> Next {
        let mut g = self.lock();
        if let Some(op) = finished {
            g.running[op.index()] -= 1;
            g.running_total -= 1;
            self.on_cpu.fetch_sub(1, Ordering::Relaxed);
            if g.paused && g.running_total == 0 {
                self.drained.notify_all();
            }
        }
        if !children.is_empty() {
            g.queued += children.len();
            for mut r in children.drain(..) {
                r.enqueued = Some(now);
                g.queues[r.op.index()].push_back(r);
            }
        }
        let mut flushed = false;
        let mut slept = false;
        loop {
            if g.shutdown {
                return Next::Shutdown;
            }
            if !g.paused
                && let Some(op) = pick(&g)
            {
                let request = g.queues[op].pop_front().expect("picked a non-empty queue");
                g.queued -= 1;
                g.running[op] += 1;
                g.running_total += 1;
                self.on_cpu.fetch_add(1, Ordering::Relaxed);
                let wake = self.wakes(g.idle_executors, g.queued);
                drop(g);
                for _ in 0..wake {
                    self.work.notify_one();
                }
                return Next::Run { request, slept };
            }
            if !flushed {
                drop(g);
                before_sleep();
                flushed = true;
                g = self.lock();
                continue;
            }
            g.idle_executors += 1;
            g = self.work.wait(g).unwrap_or_else(PoisonError::into_inner);
            g.idle_executors -= 1;
            flushed = false;
            slept = true;
        }
    }

    /// Marks an execution of `op` finished without picking another (a stopping executor).
    pub fn done(&self, op: OperatorId) {
        let mut g = self.lock();
        g.running[op.index()] -= 1;
        g.running_total -= 1;
        self.on_cpu.fetch_sub(1, Ordering::Relaxed);
        if g.paused && g.running_total == 0 {
            self.drained.notify_all();
        }
    }

    /// Stops handing out requests and waits until running executions finish.
    pub fn pause_and_drain(&self) {
        let mut g = self.lock();
        g.paused = true;
        while g.running_total > 0 {
            g = self.drained.wait(g).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// Removes and returns every queued request (the queue must be paused).
    pub fn take_all(&self) -> Vec<Request> {
        let mut g = self.lock();
        g.queued = 0;
        g.queues.iter_mut().flat_map(|q| q.drain(..)).collect()
    }

    /// Sets new instance limits and resumes.
    pub fn resume(&self, limits: Vec<u32>) {
        let mut g = self.lock();
        g.limits = limits;
        g.paused = false;
        drop(g);
        self.work.notify_all();
    }

    /// Requests queued.
    pub fn len(&self) -> usize {
        self.lock().queued
    }

    /// Whether no request is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Queued and running requests.
    pub fn load(&self) -> (usize, u32) {
        let g = self.lock();
        (g.queued, g.running_total)
    }

    /// Stops every executor.
    pub fn shutdown(&self) {
        self.lock().shutdown = true;
        self.work.notify_all();
    }

    /// Waits up to `timeout` for the queue to be empty and nothing to run.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let (q, r) = self.load();
            if q == 0 && r == 0 {
                return true;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        false
    }
}

/// The operator whose oldest request is oldest among those below their instance limit.
fn pick(g: &Inner) -> Option<usize> {
    let mut best: Option<(usize, Instant)> = None;
    for (op, q) in g.queues.iter().enumerate() {
        let Some(head) = q.front() else { continue };
        if g.running[op] >= g.limits[op].max(1) {
            continue;
        }
        let t = head.enqueued.unwrap_or_else(Instant::now);
        if best.is_none_or(|(_, bt)| t < bt) {
            best = Some((op, t));
        }
    }
    best.map(|(op, _)| op)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clasp_core::Batch;

    fn req(op: u32) -> Request {
        Request::new(OperatorId(op), 0, 0, 0, Batch::new())
    }

    #[test]
    fn instance_limits_and_fifo_across_operators() {
        let s = Scheduler::new(vec![1, 2]);
        s.push_many([req(0), req(0), req(1)]);
        let Next::Run { request: a, .. } = s.next(|| {}) else { panic!() };
        assert_eq!(a.op, OperatorId(0));
        // Operator 0 is at its limit of 1: the next pick is operator 1 although 0 is older.
        let Next::Run { request: b, .. } = s.next(|| {}) else { panic!() };
        assert_eq!(b.op, OperatorId(1));
        // Finishing 0 with a chained request for 1: the queued 0 is older and runs next.
        let mut children = vec![req(1)];
        let Next::Run { request: c, .. } =
            s.next_after(Some(OperatorId(0)), &mut children, Instant::now(), || {})
        else {
            panic!()
        };
        assert_eq!(c.op, OperatorId(0));
        assert!(children.is_empty());
        let Next::Run { request: d, .. } =
            s.next_after(Some(OperatorId(0)), &mut Vec::new(), Instant::now(), || {})
        else {
            panic!()
        };
        assert_eq!(d.op, OperatorId(1));
        s.done(OperatorId(1));
        s.done(OperatorId(1));
        assert_eq!(s.load(), (0, 0));
    }

    #[test]
    fn pause_drains_running_work_and_hands_back_the_queue() {
        let s = std::sync::Arc::new(Scheduler::new(vec![4]));
        s.push_many([req(0), req(0), req(0)]);
        let Next::Run { request: r, .. } = s.next(|| {}) else { panic!() };
        let s2 = s.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            s2.done(r.op);
        });
        s.pause_and_drain();
        assert_eq!(s.load().1, 0);
        assert_eq!(s.take_all().len(), 2);
        t.join().unwrap();
        s.shutdown();
        assert!(matches!(s.next(|| {}), Next::Shutdown));
    }
}
