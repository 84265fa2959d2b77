//! A worker's incoming request queue and the choice of what its executors run next.
//!
//! Requests wait in one queue per operator. An idle executor takes the oldest request among the
//! operators that have fewer running executions than their instance limit (the parallelism the
//! plan gives this worker), so one operator cannot take every slot. An executor that produced
//! a chained request for its own worker runs it next itself when the operator has a free
//! instance, without touching the queue or its lock (work-first: chains run depth-first).
//! Migration pauses the queue, waits for running executions (not for those in their emulated
//! service time, which are done with state and finish after it), and takes the queue out;
//! key groups taken over wait behind a [`Gate`] until their state arrives, without pausing.

use super::gate::Gate;
use crate::request::Request;
use clasp_core::{KeyGroup, OperatorId};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A counter alone on its cache line.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Padded(AtomicU32);

#[derive(Debug)]
struct Inner {
    queues: Vec<VecDeque<Request>>,
    queued: usize,
    shutdown: bool,
    idle_executors: u32,
    gate: Gate,
    /// Executions done with keyed state that spend their emulated service time.
    in_service: u32,
    /// Whether a migration's pause counted the executions in service as done: they finish
    /// only after it resumes.
    service_held: bool,
}

impl Inner {
    /// Queues `r` at the back (what the gate lets through of it); returns whether it queued.
    fn enqueue(&mut self, r: Request, now: Instant, waiting: &[Padded]) -> bool {
        let Some(mut r) = self.gate.admit(r) else { return false };
        r.enqueued = Some(now);
        waiting[r.op.index()].0.fetch_add(1, Ordering::Relaxed);
        self.queues[r.op.index()].push_back(r);
        self.queued += 1;
        true
    }
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
    /// Executions running per operator, each on its own cache line (executors running
    /// different operators do not contend); reserved with a compare-and-swap against `limits`.
    running: Box<[Padded]>,
    /// Requests queued per operator (kept under the lock, read without it): a chained request
    /// may skip the queue only when none of its operator's requests is waiting, so every
    /// operator still runs its requests in arrival order.
    waiting: Box<[Padded]>,
    limits: Box<[AtomicU32]>,
    paused: AtomicBool,
    /// Whether some key group is gated (read without the lock on the work-first path).
    gated: AtomicBool,
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
                queued: 0,
                shutdown: false,
                idle_executors: 0,
                gate: Gate::default(),
                in_service: 0,
                service_held: false,
            }),
            work: Condvar::new(),
            drained: Condvar::new(),
            running: (0..ops).map(|_| Padded::default()).collect(),
            waiting: (0..ops).map(|_| Padded::default()).collect(),
            limits: limits.into_iter().map(AtomicU32::new).collect(),
            paused: AtomicBool::new(false),
            gated: AtomicBool::new(false),
            cores: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
            on_cpu: AtomicU32::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        clasp_core::sync::lock(&self.inner)
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

    /// Takes an instance of `op` if one is free.
    fn try_reserve(&self, op: usize) -> bool {
        let limit = self.limits[op].load(Ordering::Relaxed).max(1);
        self.running[op]
            .0
            .fetch_update(Ordering::SeqCst, Ordering::Relaxed, |r| (r < limit).then_some(r + 1))
            .is_ok()
    }

    /// Executions running over all operators.
    fn running_total(&self) -> u32 {
        self.running.iter().map(|r| r.0.load(Ordering::SeqCst)).sum()
    }

    /// Gives back an instance of `op`; wakes a pause waiting for the last execution.
    fn release(&self, op: usize) {
        if self.give_back(op) {
            let _g = self.lock();
            self.drained.notify_all();
        }
    }

    /// [`Self::release`] for a caller holding the queue's lock.
    fn release_locked(&self, op: usize) {
        if self.give_back(op) {
            self.drained.notify_all();
        }
    }

    /// Gives back an instance of `op`; whether a pause may now wait for nothing more (a
    /// migration's waits only for the executions not in service, so any release may end it).
    fn give_back(&self, op: usize) -> bool {
        self.running[op].0.fetch_sub(1, Ordering::SeqCst);
        self.paused.load(Ordering::SeqCst)
    }

    /// Enqueues requests (stamping their arrival) and wakes executors for them.
    pub fn push_many(&self, reqs: impl IntoIterator<Item = Request>) {
        self.push_stamped(reqs, Instant::now());
    }

    fn push_stamped(&self, reqs: impl IntoIterator<Item = Request>, now: Instant) {
        let mut g = self.lock();
        let mut n = 0;
        for r in reqs {
            n += usize::from(g.enqueue(r, now, &self.waiting));
        }
        let wake = self.wakes(g.idle_executors, n);
        drop(g);
        for _ in 0..wake {
            self.work.notify_one();
        }
    }

    /// Gates `groups`: their records wait aside from now on (a migration hands them to this
    /// worker; their state has not arrived yet).
    pub fn close_gate(&self, ops: usize, group_count: u32, groups: &[(OperatorId, KeyGroup)]) {
        if groups.is_empty() {
            return;
        }
        let mut g = self.lock();
        g.gate.close(ops, group_count, groups);
        self.gated.store(true, Ordering::SeqCst);
    }

    /// Gates every key group of `ops` while their queued requests are re-routed.
    pub fn close_operators(&self, ops: &[OperatorId]) {
        if ops.is_empty() {
            return;
        }
        let mut g = self.lock();
        let count = g.queues.len();
        g.gate.close_operators(count, ops);
        self.gated.store(true, Ordering::SeqCst);
    }

    /// Opens what [`Self::close_operators`] closed: `older`, the re-routed requests this worker
    /// keeps, go to the front of their queues in order (what a still gated group's records
    /// are waits on), then the records that waited meanwhile.
    pub fn open_operators(&self, ops: &[OperatorId], older: Vec<Request>) {
        let now = Instant::now();
        let mut g = self.lock();
        let released = g.gate.open_operators(ops);
        let older: Vec<Request> = older.into_iter().filter_map(|r| g.gate.admit(r)).collect();
        self.push_front_locked(&mut g, older, now);
        for r in released {
            g.enqueue(r, now, &self.waiting);
        }
        if g.gate.is_open() {
            self.gated.store(false, Ordering::SeqCst);
        }
        drop(g);
        self.work.notify_all();
    }

    /// Puts `reqs` at the front of their queues, in the given order.
    fn push_front_locked(&self, g: &mut Inner, reqs: Vec<Request>, now: Instant) {
        g.queued += reqs.len();
        for mut r in reqs.into_iter().rev() {
            r.enqueued = Some(now);
            self.waiting[r.op.index()].0.fetch_add(1, Ordering::Relaxed);
            g.queues[r.op.index()].push_front(r);
        }
    }

    /// Opens `groups` (their state is installed): `handed_over`, the requests their previous
    /// owner had queued, go to the front of their queues in order, older than anything queued
    /// here; then the records that waited for the groups, in arrival order.
    pub fn open_gate(&self, groups: &[(OperatorId, KeyGroup)], handed_over: Vec<Request>) {
        let now = Instant::now();
        let mut g = self.lock();
        let released = g.gate.open(groups);
        if g.gate.is_open() {
            self.gated.store(false, Ordering::SeqCst);
        }
        self.push_front_locked(&mut g, handed_over, now);
        for r in released {
            g.enqueue(r, now, &self.waiting);
        }
        drop(g);
        self.work.notify_all();
    }

    /// Blocks until a request may run or the worker stops. `before_sleep` runs (without the
    /// lock) before the executor would block, so it can flush what it buffered.
    pub fn next(&self, before_sleep: impl FnMut()) -> Next {
        self.next_after(None, &mut Vec::new(), Instant::now(), before_sleep)
    }

    /// Ends the caller's execution of `finished` (if any), queues the local chained requests
    /// it caused (arrived at `now`), and picks the caller's next request. When the last of
    /// those chained requests can run at once, the caller takes it without the queue's lock.
    pub fn next_after(
        &self,
        finished: Option<OperatorId>,
        children: &mut Vec<Request>,
        now: Instant,
        mut before_sleep: impl FnMut(),
    ) -> Next {
        // The finished execution is released only once its chained requests are queued (or
        // one of them holds an instance): a pause waiting for running executions must find
        // them in the queue, and the operator's next request must not run before them, or its
        // chained requests could overtake these and an operator see its records out of order.
        if let Some(mut request) = self.take_own(children) {
            // The executor stays on its CPU: `on_cpu` is unchanged.
            request.enqueued = Some(now);
            if !children.is_empty() {
                self.push_stamped(children.drain(..), now);
            }
            if let Some(op) = finished {
                self.release(op.index());
            }
            return Next::Run { request, slept: false };
        }
        if finished.is_some() {
            self.on_cpu.fetch_sub(1, Ordering::Relaxed);
        }
        let mut g = self.lock();
        for r in children.drain(..) {
            g.enqueue(r, now, &self.waiting);
        }
        if let Some(op) = finished {
            self.release_locked(op.index());
        }
        let mut flushed = false;
        let mut slept = false;
        loop {
            if g.shutdown {
                return Next::Shutdown;
            }
            if !self.paused.load(Ordering::SeqCst)
                && let Some(op) = self.pick(&g)
            {
                let request = g.queues[op].pop_front().expect("picked a non-empty queue");
                self.waiting[op].0.fetch_sub(1, Ordering::Relaxed);
                g.queued -= 1;
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
            g = clasp_core::sync::wait(&self.work, g);
            g.idle_executors -= 1;
            flushed = false;
            slept = true;
        }
    }

    /// Ends the caller's execution of `finished` without picking another: queues the local
    /// chained requests it caused (arrived at `now`), gives its instance back and wakes idle
    /// executors for them. The caller then spends time that is the worker's, not the
    /// operator's (it stays off the CPU count), and comes back with [`Self::next`].
    pub fn hand_back(&self, finished: OperatorId, children: &mut Vec<Request>, now: Instant) {
        self.on_cpu.fetch_sub(1, Ordering::Relaxed);
        let mut g = self.lock();
        for r in children.drain(..) {
            g.enqueue(r, now, &self.waiting);
        }
        self.release_locked(finished.index());
        let wake = self.wakes(g.idle_executors, g.queued);
        drop(g);
        for _ in 0..wake {
            self.work.notify_one();
        }
    }

    /// The last of `children`, if its operator has a free instance and the queue is not
    /// paused (checked again after reserving, so a starting pause waits for it or wins).
    fn take_own(&self, children: &mut Vec<Request>) -> Option<Request> {
        let op = children.last()?.op.index();
        // Earlier chained requests in `children` for the same operator would be overtaken.
        let alone = children[..children.len() - 1].iter().all(|c| c.op.index() != op);
        if !alone
            || self.waiting[op].0.load(Ordering::Acquire) > 0
            || self.paused.load(Ordering::SeqCst)
            || self.gated.load(Ordering::SeqCst)
            || !self.try_reserve(op)
        {
            return None;
        }
        if self.paused.load(Ordering::SeqCst) {
            self.release(op);
            return None;
        }
        children.pop()
    }

    /// The operator whose oldest request is oldest among those with a free instance; the
    /// instance is reserved.
    fn pick(&self, g: &Inner) -> Option<usize> {
        loop {
            let mut best: Option<(usize, Instant)> = None;
            for (op, q) in g.queues.iter().enumerate() {
                let Some(head) = q.front() else { continue };
                let limit = self.limits[op].load(Ordering::Relaxed).max(1);
                if self.running[op].0.load(Ordering::Relaxed) >= limit {
                    continue;
                }
                let t = head.enqueued.unwrap_or_else(Instant::now);
                if best.is_none_or(|(_, bt)| t < bt) {
                    best = Some((op, t));
                }
            }
            let (op, _) = best?;
            if self.try_reserve(op) {
                return Some(op);
            }
        }
    }

    /// Marks an execution of `op` finished without picking another (a stopping executor).
    pub fn done(&self, op: OperatorId) {
        self.on_cpu.fetch_sub(1, Ordering::Relaxed);
        self.release(op.index());
    }

    /// Stops handing out requests and waits until running executions finish.
    pub fn pause_and_drain(&self) {
        self.paused.store(true, Ordering::SeqCst);
        let mut g = self.lock();
        while self.running_total() > 0 {
            g = clasp_core::sync::wait(&self.drained, g);
        }
    }

    /// [`Self::pause_and_drain`] for a migration: an execution spending its emulated service
    /// time is done with keyed state and does not hold the pause up; it hands its chained
    /// requests on only after [`Self::resume`] (see [`Self::leave_service`]).
    pub fn pause_for_migration(&self) {
        self.paused.store(true, Ordering::SeqCst);
        let mut g = self.lock();
        while self.running_total() > g.in_service {
            g = clasp_core::sync::wait(&self.drained, g);
        }
        g.service_held = true;
    }

    /// The calling execution is done with keyed state and starts its emulated service time.
    pub fn enter_service(&self) {
        let mut g = self.lock();
        g.in_service += 1;
        if self.paused.load(Ordering::SeqCst) {
            self.drained.notify_all();
        }
    }

    /// The calling execution's service time is over. If a migration's pause counted it as
    /// done, this waits until the migration resumed and returns true: the execution's chained
    /// requests were routed under the routing before, and the caller must re-route them.
    pub fn leave_service(&self) -> bool {
        let mut g = self.lock();
        let held = g.service_held;
        while g.service_held {
            g = clasp_core::sync::wait(&self.work, g);
        }
        g.in_service -= 1;
        held
    }

    /// Removes and returns every queued request, one queue per operator, in O(operators)
    /// (the queue must be paused).
    pub fn take_all(&self) -> Vec<VecDeque<Request>> {
        let mut g = self.lock();
        g.queued = 0;
        self.waiting.iter().for_each(|w| w.0.store(0, Ordering::Relaxed));
        g.queues.iter_mut().map(std::mem::take).collect()
    }

    /// Opens every gate and drops the records waiting behind it (a rollback).
    pub fn reset_gate(&self) {
        let mut g = self.lock();
        g.gate = Gate::default();
        self.gated.store(false, Ordering::SeqCst);
    }

    /// Sets new instance limits and resumes.
    pub fn resume(&self, limits: Vec<u32>) {
        let mut g = self.lock();
        g.service_held = false;
        for (cell, l) in self.limits.iter().zip(limits) {
            cell.store(l, Ordering::Relaxed);
        }
        self.paused.store(false, Ordering::SeqCst);
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
        (g.queued, self.running_total())
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
        // Finishing 0 with a chained request for 1 (one of 1's two instances is free): the
        // executor runs its own chained request next (work-first), though a 0 is queued.
        let mut children = vec![req(1)];
        let Next::Run { request: c, .. } =
            s.next_after(Some(OperatorId(0)), &mut children, Instant::now(), || {})
        else {
            panic!()
        };
        assert_eq!(c.op, OperatorId(1));
        assert!(children.is_empty());
        // Without chained requests, the oldest queued request runs: the 0.
        let Next::Run { request: d, .. } =
            s.next_after(Some(OperatorId(1)), &mut Vec::new(), Instant::now(), || {})
        else {
            panic!()
        };
        assert_eq!(d.op, OperatorId(0));
        // Two chained requests for 1 while `b` still runs: the free instance takes one, the
        // other is queued.
        let mut children = vec![req(1), req(1)];
        let Next::Run { request: e, .. } =
            s.next_after(Some(OperatorId(0)), &mut children, Instant::now(), || {})
        else {
            panic!()
        };
        assert_eq!(e.op, OperatorId(1));
        assert_eq!(s.load(), (1, 2));
        s.done(OperatorId(1));
        s.done(OperatorId(1));
        assert_eq!(s.take_all().iter().map(VecDeque::len).sum::<usize>(), 1);
        assert_eq!(s.load(), (0, 0));
    }

    #[test]
    fn a_handed_back_instance_runs_the_next_request_while_its_executor_is_away() {
        let s = Scheduler::new(vec![1, 1]);
        s.push_many([req(0), req(0)]);
        let Next::Run { request: a, .. } = s.next(|| {}) else { panic!() };
        assert_eq!(a.op, OperatorId(0));
        // The first execution's chained request is queued and its instance given back: a
        // second executor takes the queued 0 (the older request), while the first is away.
        s.hand_back(OperatorId(0), &mut vec![req(1)], Instant::now());
        assert_eq!(s.load(), (2, 0));
        let Next::Run { request: b, .. } = s.next(|| {}) else { panic!() };
        assert_eq!(b.op, OperatorId(0));
        let Next::Run { request: c, .. } = s.next(|| {}) else { panic!() };
        assert_eq!(c.op, OperatorId(1));
        assert_eq!(s.load(), (0, 2));
    }

    /// Executors racing through a chain of three single-instance operators: every operator
    /// must see its requests in the order the first one got them, whether an execution's end
    /// picks the next request at once or first hands its instance back.
    #[test]
    fn chains_keep_their_order_through_single_instance_operators_under_contention() {
        const REQUESTS: u64 = 20_000;
        let s = std::sync::Arc::new(Scheduler::new(vec![1, 1, 1]));
        s.push_many((0..REQUESTS).map(|i| Request { chain: i, ..req(0) }));
        let seen = std::sync::Arc::new(Mutex::new(vec![Vec::new(), Vec::new(), Vec::new()]));
        let done = std::sync::Arc::new(AtomicU32::new(0));
        let executors: Vec<_> = (0..4)
            .map(|_| {
                let (s, seen, done) = (s.clone(), seen.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut finished = None;
                    let mut children = Vec::new();
                    loop {
                        let next =
                            s.next_after(finished.take(), &mut children, Instant::now(), || {});
                        let Next::Run { request, .. } = next else { return };
                        let op = request.op.index();
                        seen.lock().unwrap()[op].push(request.chain);
                        if op < 2 {
                            children.push(Request { chain: request.chain, ..req(op as u32 + 1) });
                        } else if done.fetch_add(1, Ordering::SeqCst) + 1 == REQUESTS as u32 {
                            s.shutdown();
                        }
                        if request.chain % 3 == 0 {
                            s.hand_back(request.op, &mut children, Instant::now());
                            std::thread::yield_now();
                        } else {
                            finished = Some(request.op);
                        }
                    }
                })
            })
            .collect();
        for e in executors {
            e.join().unwrap();
        }
        let in_order: Vec<u64> = (0..REQUESTS).collect();
        for (op, chains) in seen.lock().unwrap().iter().enumerate() {
            assert!(chains == &in_order, "operator {op} saw its requests out of order");
        }
    }

    #[test]
    fn a_chained_request_never_overtakes_a_queued_one_of_its_operator() {
        let s = Scheduler::new(vec![1, 1]);
        let mut older = req(1);
        older.chain = 7;
        s.push_many([req(0), older]);
        let Next::Run { request: a, .. } = s.next(|| {}) else { panic!() };
        assert_eq!(a.op, OperatorId(0));
        let mut newer = req(1);
        newer.chain = 8;
        let mut children = vec![newer];
        let Next::Run { request: b, .. } =
            s.next_after(Some(OperatorId(0)), &mut children, Instant::now(), || {})
        else {
            panic!()
        };
        assert_eq!((b.op, b.chain), (OperatorId(1), 7), "the queued request of operator 1 first");
        let Next::Run { request: c, .. } =
            s.next_after(Some(OperatorId(1)), &mut Vec::new(), Instant::now(), || {})
        else {
            panic!()
        };
        assert_eq!(c.chain, 8);
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
        assert_eq!(s.take_all().iter().map(VecDeque::len).sum::<usize>(), 2);
        t.join().unwrap();
        s.shutdown();
        assert!(matches!(s.next(|| {}), Next::Shutdown));
    }

    #[test]
    fn a_migration_does_not_wait_for_service_time_and_holds_its_end_back() {
        use std::sync::atomic::AtomicBool;
        let s = std::sync::Arc::new(Scheduler::new(vec![4]));
        s.push_many([req(0), req(0)]);
        let Next::Run { request: serving, .. } = s.next(|| {}) else { panic!() };
        let Next::Run { request: running, .. } = s.next(|| {}) else { panic!() };
        s.enter_service();
        let left = std::sync::Arc::new(AtomicBool::new(false));
        let (s2, left2) = (s.clone(), left.clone());
        // The other execution is still in its state access: the pause waits for it.
        let finisher = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            s2.done(running.op);
        });
        s.pause_for_migration();
        assert_eq!(s.load().1, 1, "only the execution in service still runs");
        let (s3, left3) = (s.clone(), left2.clone());
        let server = std::thread::spawn(move || {
            s3.leave_service();
            left3.store(true, Ordering::SeqCst);
            s3.done(serving.op);
        });
        std::thread::sleep(Duration::from_millis(20));
        assert!(!left.load(Ordering::SeqCst), "service ended before the migration resumed");
        s.resume(vec![4]);
        server.join().unwrap();
        finisher.join().unwrap();
        assert!(left.load(Ordering::SeqCst));
        assert_eq!(s.load(), (0, 0));
        // A pause that is not a migration's waits for service time too.
        s.push_many([req(0)]);
        let Next::Run { request: r, .. } = s.next(|| {}) else { panic!() };
        s.enter_service();
        let s4 = s.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            s4.leave_service();
            s4.done(r.op);
        });
        s.pause_and_drain();
        assert_eq!(s.load().1, 0);
        t.join().unwrap();
    }
}
