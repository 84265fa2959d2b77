//! A simulated worker: one incoming queue per operator, executor slots with per-operator
//! instance limits, and a CPU the running executions share.
//!
//! **Queue.** As in the runtime's scheduler, an idle slot takes the oldest queued request among
//! the operators that run fewer executions than their instance limit.
//!
//! **CPU.** The worker's CPU delivers `cores` µs of work per µs (W / 10⁶, less the fan-out
//! overhead γ·δ of the last interval). The executions in their CPU phase share it equally
//! (processor sharing), each at most one core: with `k` of them, each progresses at
//! `min(1, cores / k)`. An execution's work is its execution time (when it spins) plus the
//! dispatch cost of its chained requests, α per local and β per remote one: the executor that
//! sends them pays. An execution whose operator sleeps first holds its slot for the execution
//! time without using the CPU, then dispatches. With `cores ≥ slots` and no dispatch cost a
//! worker is an M/G/c queue, which the validation tests rely on.
//!
//! Processor sharing is simulated with a virtual clock: `vtime` advances at the per-execution
//! rate, an execution finishes when `vtime` reaches its tag (virtual start + work), so a
//! change of rate costs one recomputation of the worker's next finishing time, not one per
//! execution.

use crate::events::{Nanos, Req};
use clasp_core::rng::{SeededRng, independent_stream};
use std::collections::VecDeque;

/// Slack (µs of work) below which an execution counts as finished: absorbs rounding of event
/// times to whole nanoseconds.
const FINISH_SLACK_US: f64 = 1e-3;

/// Where an execution is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Phase {
    /// Holding its slot without CPU until this time.
    Sleep(Nanos),
    /// On the CPU until the virtual clock reaches this tag.
    Cpu(f64),
}

/// One running execution.
#[derive(Clone, Copy, Debug)]
pub struct Job {
    /// The request.
    pub req: Req,
    /// Seed of the draws that decide its chained requests (drawn once to price them at the
    /// start, again to send them at the end).
    pub seed: u64,
    /// Routing epoch it started under.
    pub epoch: u32,
    /// Its execution time (µs): what the metrics report as τ.
    pub exec_us: f64,
    /// CPU spent dispatching its chained requests (µs).
    pub dispatch_us: f64,
    /// CPU work left after the sleep phase (µs).
    pub work_us: f64,
    /// When it started.
    pub started: Nanos,
    /// How long it waited in the queue (µs).
    pub wait_us: f64,
    /// Where it is.
    pub phase: Phase,
}

/// One operator's counters over a statistics interval.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OpCount {
    /// Executions finished.
    pub processed: u64,
    /// Chained requests they emitted.
    pub emitted: u64,
    /// Execution time of those (µs).
    pub exec_us: f64,
    /// Their squared execution times (µs²).
    pub exec_sq_us2: f64,
    /// Queue wait of those (µs).
    pub wait_us: f64,
    /// CPU spent dispatching their chained requests (µs).
    pub dispatch_us: f64,
}

/// A worker's counters over a statistics interval (reset by the engine).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters {
    /// Per operator.
    pub ops: Vec<OpCount>,
    /// Chained requests per stream.
    pub edges: Vec<u64>,
    /// Chained requests dispatched to this worker.
    pub local: u64,
    /// Chained requests dispatched to other workers.
    pub remote: u64,
    /// Bit per remote worker reached.
    pub destinations: Vec<u64>,
    /// ∫ queued requests dt (request·s).
    pub queue_area: f64,
    /// ∫ running executions dt (execution·s).
    pub busy_area: f64,
}

impl Counters {
    /// Zeroed counters for `ops` operators, `streams` streams and up to `workers` workers.
    pub fn new(ops: usize, streams: usize, workers: usize) -> Self {
        Self {
            ops: vec![OpCount::default(); ops],
            edges: vec![0; streams],
            destinations: vec![0; workers.div_ceil(64).max(1)],
            ..Self::default()
        }
    }

    /// Notes a chained request to remote worker `w`.
    #[inline]
    pub fn reached(&mut self, w: u32) {
        self.destinations[(w / 64) as usize] |= 1u64 << (w % 64);
    }

    /// Distinct remote workers reached.
    pub fn destination_count(&self) -> u32 {
        self.destinations.iter().map(|d| d.count_ones()).sum()
    }

    /// Back to zero, keeping the allocations.
    pub fn clear(&mut self) {
        self.ops.fill(OpCount::default());
        self.edges.fill(0);
        self.destinations.fill(0);
        self.local = 0;
        self.remote = 0;
        self.queue_area = 0.0;
        self.busy_area = 0.0;
    }

    /// Adds `other` into `self`.
    pub fn absorb(&mut self, other: &Counters) {
        for (a, b) in self.ops.iter_mut().zip(&other.ops) {
            a.processed += b.processed;
            a.emitted += b.emitted;
            a.exec_us += b.exec_us;
            a.wait_us += b.wait_us;
            a.dispatch_us += b.dispatch_us;
        }
        for (a, b) in self.edges.iter_mut().zip(&other.edges) {
            *a += b;
        }
        for (a, b) in self.destinations.iter_mut().zip(&other.destinations) {
            *a |= b;
        }
        self.local += other.local;
        self.remote += other.remote;
        self.queue_area += other.queue_area;
        self.busy_area += other.busy_area;
    }
}

/// A simulated worker.
#[derive(Debug)]
pub struct Worker {
    /// Its index.
    pub id: u32,
    /// Part of the cluster's active set.
    pub active: bool,
    /// Not starting executions (migrating).
    pub paused: bool,
    /// Requests that arrived while paused, examined on resume.
    pub held: Vec<Req>,
    /// Its random draws (execution times, seeds of chained requests).
    pub rng: SeededRng,
    /// Counters of the current interval.
    pub counters: Counters,
    /// When its next execution finishes (`Nanos::MAX`: none running).
    pub next: Nanos,
    slots: u32,
    queues: Vec<VecDeque<Req>>,
    queued: u32,
    running: Vec<u32>,
    limits: Vec<u32>,
    jobs: Vec<Job>,
    full_cores: f64,
    cores: f64,
    vtime: f64,
    cpu_jobs: u32,
    last: Nanos,
}

impl Worker {
    /// An inactive worker with `slots` slots and `cores` CPU cores.
    pub fn new(id: u32, slots: u32, cores: f64, counters: Counters, seed: u64) -> Self {
        let ops = counters.ops.len();
        Self {
            id,
            active: false,
            paused: false,
            held: Vec::new(),
            rng: independent_stream(seed, 0x776f_726b_0000 + u64::from(id)),
            counters,
            next: Nanos::MAX,
            slots,
            queues: (0..ops).map(|_| VecDeque::new()).collect(),
            queued: 0,
            running: vec![0; ops],
            limits: vec![0; ops],
            jobs: Vec::with_capacity(slots as usize),
            full_cores: cores,
            cores,
            vtime: 0.0,
            cpu_jobs: 0,
            last: 0,
        }
    }

    /// Sets the per-operator instance limits.
    pub fn set_limits(&mut self, limits: Vec<u32>) {
        self.limits = limits;
    }

    /// Requests queued.
    pub fn queued(&self) -> u32 {
        self.queued
    }

    /// Executions running.
    pub fn running(&self) -> usize {
        self.jobs.len()
    }

    /// Whether nothing is queued or running.
    pub fn idle(&self) -> bool {
        self.queued == 0 && self.jobs.is_empty()
    }

    /// Accumulates the queue and busy areas up to `now`.
    #[inline]
    fn touch(&mut self, now: Nanos) {
        let dt = (now - self.last) as f64 * 1e-9;
        self.counters.queue_area += f64::from(self.queued) * dt;
        self.counters.busy_area += self.jobs.len() as f64 * dt;
        if self.cpu_jobs > 0 {
            self.vtime += (now - self.last) as f64 * 1e-3 * self.rate();
        }
        self.last = now;
    }

    /// Brings the queue and busy areas up to `now` (before a report is taken).
    pub fn flush(&mut self, now: Nanos) {
        self.touch(now);
    }

    /// Work per µs each CPU-phase execution receives.
    #[inline]
    fn rate(&self) -> f64 {
        (self.cores / f64::from(self.cpu_jobs.max(1))).min(1.0)
    }

    /// Queues `req` at the back of its operator's queue.
    #[inline]
    pub fn enqueue(&mut self, now: Nanos, mut req: Req) {
        self.touch(now);
        req.enqueued = now;
        self.queues[usize::from(req.op)].push_back(req);
        self.queued += 1;
    }

    /// Queues requests handed over in a migration ahead of everything queued (they are older).
    pub fn enqueue_front(&mut self, now: Nanos, reqs: &[Req]) {
        self.touch(now);
        for r in reqs.iter().rev() {
            self.queues[usize::from(r.op)].push_front(*r);
        }
        self.queued += reqs.len() as u32;
    }

    /// Takes every queued request out (a migration hands them over).
    pub fn take_queued(&mut self, now: Nanos) -> Vec<Req> {
        self.touch(now);
        self.queued = 0;
        self.queues.iter_mut().flat_map(|q| q.drain(..)).collect()
    }

    /// The operator whose oldest request may start now, if a slot is free.
    #[inline]
    pub fn pick(&self) -> Option<usize> {
        if self.paused || self.queued == 0 || self.jobs.len() >= self.slots as usize {
            return None;
        }
        let mut best: Option<(usize, Nanos)> = None;
        for (op, q) in self.queues.iter().enumerate() {
            let Some(head) = q.front() else { continue };
            if self.running[op] >= self.limits[op].max(1) {
                continue;
            }
            if best.is_none_or(|(_, t)| head.enqueued < t) {
                best = Some((op, head.enqueued));
            }
        }
        best.map(|(op, _)| op)
    }

    /// Takes the oldest request of `op` to run it.
    #[inline]
    pub fn pop(&mut self, now: Nanos, op: usize) -> Req {
        self.touch(now);
        self.queued -= 1;
        self.queues[op].pop_front().expect("picked a non-empty queue")
    }

    /// Starts an execution: `job.phase` is set here from its sleep time and CPU work.
    pub fn admit(&mut self, now: Nanos, mut job: Job, sleep_ns: Nanos) {
        self.touch(now);
        self.running[usize::from(job.req.op)] += 1;
        if sleep_ns > 0 {
            job.phase = Phase::Sleep(now + sleep_ns);
        } else {
            job.phase = Phase::Cpu(self.vtime + job.work_us);
            self.cpu_jobs += 1;
        }
        self.jobs.push(job);
    }

    /// Moves every execution due by `now` out into `done`, in start order.
    pub fn finish_due(&mut self, now: Nanos, done: &mut Vec<Job>) {
        self.touch(now);
        for j in &mut self.jobs {
            if let Phase::Sleep(until) = j.phase
                && until <= now
            {
                j.phase = Phase::Cpu(self.vtime + j.work_us);
                self.cpu_jobs += 1;
            }
        }
        let limit = self.vtime + FINISH_SLACK_US;
        let mut i = 0;
        while i < self.jobs.len() {
            if matches!(self.jobs[i].phase, Phase::Cpu(tag) if tag <= limit) {
                let j = self.jobs.remove(i);
                self.running[usize::from(j.req.op)] -= 1;
                self.cpu_jobs -= 1;
                done.push(j);
            } else {
                i += 1;
            }
        }
        if self.cpu_jobs == 0 {
            // Tags are relative to the virtual clock: restart it while nothing uses it.
            self.vtime = 0.0;
        }
    }

    /// Recomputes when the next execution finishes.
    pub fn reschedule(&mut self, now: Nanos) {
        let mut next = Nanos::MAX;
        let rate = self.rate();
        for j in &self.jobs {
            let t = match j.phase {
                Phase::Sleep(until) => until,
                Phase::Cpu(tag) => {
                    let left_us = (tag - self.vtime).max(0.0);
                    now + (left_us / rate * 1e3).ceil() as Nanos
                }
            };
            next = next.min(t);
        }
        self.next = next;
    }

    /// Sets the CPU available to executions to `full − overhead_cores` (at least 1 % of the
    /// full CPU, so a worker overwhelmed by fan-out still crawls).
    pub fn set_overhead(&mut self, now: Nanos, overhead_cores: f64) {
        self.touch(now);
        self.cores = (self.full_cores - overhead_cores).max(0.01 * self.full_cores);
        self.reschedule(now);
    }

    /// Running executions.
    pub fn jobs(&self) -> &[Job] {
        &self.jobs
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(slots: u32, cores: f64) -> Worker {
        let mut w = Worker::new(0, slots, cores, Counters::new(2, 1, 4), 1);
        w.set_limits(vec![slots, 1]);
        w.active = true;
        w
    }

    fn job(op: u16, work_us: f64) -> Job {
        Job {
            req: Req { chain: 0, op, group: 0, enqueued: 0 },
            seed: 0,
            epoch: 0,
            exec_us: work_us,
            dispatch_us: 0.0,
            work_us,
            started: 0,
            wait_us: 0.0,
            phase: Phase::Cpu(0.0),
        }
    }

    #[test]
    fn executions_share_one_core_equally() {
        let mut w = worker(4, 1.0);
        w.admit(0, job(0, 100.0), 0);
        w.admit(0, job(0, 300.0), 0);
        w.reschedule(0);
        // Two share one core: the short one finishes after 200 µs.
        assert_eq!(w.next, 200_000);
        let mut done = Vec::new();
        w.finish_due(200_000, &mut done);
        assert_eq!(done.len(), 1);
        w.reschedule(200_000);
        // The long one has 200 µs left, now alone.
        assert_eq!(w.next, 400_000);
        w.finish_due(400_000, &mut done);
        assert_eq!(done.len(), 2);
        assert_eq!(w.next, 400_000);
        assert!(w.idle());
    }

    #[test]
    fn enough_cores_means_independent_servers_and_sleep_holds_a_slot() {
        let mut w = worker(4, 4.0);
        w.admit(0, job(0, 100.0), 0);
        w.admit(0, job(0, 300.0), 50_000);
        w.reschedule(0);
        assert_eq!(w.next, 50_000);
        let mut done = Vec::new();
        w.finish_due(50_000, &mut done);
        assert!(done.is_empty());
        w.reschedule(50_000);
        assert_eq!(w.next, 100_000);
        w.finish_due(100_000, &mut done);
        w.reschedule(100_000);
        assert_eq!((done.len(), w.next), (1, 350_000));
    }

    #[test]
    fn instance_limits_and_oldest_first() {
        let mut w = worker(4, 4.0);
        let r = |op, t| Req { chain: 0, op, group: 0, enqueued: t };
        w.enqueue(1, r(1, 0));
        w.enqueue(2, r(1, 0));
        w.enqueue(3, r(0, 0));
        assert_eq!(w.pick(), Some(1));
        let req = w.pop(3, 1);
        w.admit(3, Job { req, ..job(1, 10.0) }, 0);
        // Operator 1 is at its limit of one: operator 0 goes next although it is younger.
        assert_eq!(w.pick(), Some(0));
        w.paused = true;
        assert_eq!(w.pick(), None);
        assert_eq!(w.take_queued(4).len(), 2);
        assert_eq!(w.queued(), 0);
    }

    #[test]
    fn areas_integrate_queue_and_running_counts() {
        let mut w = worker(1, 1.0);
        let r = Req { chain: 0, op: 0, group: 0, enqueued: 0 };
        w.enqueue(0, r);
        w.enqueue(0, r);
        let req = w.pop(500_000_000, 0);
        w.admit(500_000_000, Job { req, ..job(0, 1e6) }, 0);
        w.set_overhead(1_000_000_000, 0.0);
        // Two queued for 0.5 s, then one queued and one running for 0.5 s.
        assert!((w.counters.queue_area - 1.5).abs() < 1e-12);
        assert!((w.counters.busy_area - 0.5).abs() < 1e-12);
    }
}
