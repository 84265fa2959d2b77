//! The metrics monitor's data: per-executor counters (written by one thread each, summed by the
//! monitor every interval) and the report a worker sends the planner (CLASP Table 2).

use clasp_core::{OperatorId, WorkerId};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};

/// Adds to a counter that only one thread writes (no atomic read-modify-write needed).
#[inline]
pub fn bump(c: &AtomicU64, by: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(by), Ordering::Relaxed);
}

/// Totals for one operator.
#[derive(Debug, Default)]
pub struct OpCounters {
    /// Requests executed.
    pub processed: AtomicU64,
    /// Records in them.
    pub records: AtomicU64,
    /// Records emitted.
    pub emitted: AtomicU64,
    /// Requests whose execution and queue wait were timed (all large ones, a sample of
    /// small ones).
    pub timed: AtomicU64,
    /// Execution time of the timed requests (ns).
    pub exec_ns: AtomicU64,
    /// Time the timed requests waited in the queue (ns).
    pub wait_ns: AtomicU64,
    /// Executions that touched keyed state.
    pub touched: AtomicU64,
}

/// One executor thread's counters.
#[derive(Debug)]
pub struct ExecCounters {
    /// Per operator.
    pub ops: Box<[OpCounters]>,
    /// Chained requests per stream.
    pub edges: Box<[AtomicU64]>,
    /// Chained requests dispatched to this worker.
    pub local: AtomicU64,
    /// Chained requests dispatched to other workers.
    pub remote: AtomicU64,
    /// Bit per remote worker reached since the monitor last looked.
    pub destinations: Box<[AtomicU64]>,
}

impl ExecCounters {
    /// Counters for `ops` operators, `streams` streams and up to `workers` workers.
    pub fn new(ops: usize, streams: usize, workers: usize) -> Self {
        Self {
            ops: (0..ops).map(|_| OpCounters::default()).collect(),
            edges: (0..streams).map(|_| AtomicU64::new(0)).collect(),
            local: AtomicU64::new(0),
            remote: AtomicU64::new(0),
            destinations: (0..workers.div_ceil(64).max(1)).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Notes that a chained request went to remote worker `w`.
    #[inline]
    pub fn reached(&self, w: WorkerId) {
        let (word, bit) = (w.index() / 64, 1u64 << (w.index() % 64));
        if let Some(cell) = self.destinations.get(word)
            && cell.load(Ordering::Relaxed) & bit == 0
        {
            cell.fetch_or(bit, Ordering::Relaxed);
        }
    }
}

/// One operator's part of a report.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OpReport {
    /// Requests executed.
    pub processed: u64,
    /// Records in them.
    pub records: u64,
    /// Records emitted.
    pub emitted: u64,
    /// Total execution time (µs).
    pub exec_us: f64,
    /// Total queue wait (µs).
    pub wait_us: f64,
    /// Executions that touched state.
    pub touched: u64,
    /// Keys in state now.
    pub state_keys: u64,
    /// Rejected records by reason.
    pub rejects: Vec<(String, u64)>,
}

/// What a worker reports every interval: CLASP Table 2 plus what the baselines need.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerReport {
    /// The reporting worker.
    pub worker: WorkerId,
    /// Placement epoch when the report was taken.
    pub epoch: u64,
    /// Interval length (s).
    pub interval_s: f64,
    /// Executor slots.
    pub slots: u32,
    /// Q_w: mean queue size over the interval.
    pub queue: f64,
    /// Queue size at the end of the interval.
    pub queue_now: u64,
    /// Local chained requests dispatched.
    pub local: u64,
    /// Remote chained requests dispatched.
    pub remote: u64,
    /// δ_w: distinct remote workers reached.
    pub destinations: u32,
    /// Per operator (indexed by `OperatorId`).
    pub ops: Vec<OpReport>,
    /// Chained requests per stream (indexed by `StreamId`).
    pub edges: Vec<u64>,
    /// Whether the worker was saturated in the interval.
    pub saturated: bool,
    /// The planner's request number when asked for (`ReportNow`), 0 for periodic reports.
    pub requested: u64,
}

impl WorkerReport {
    /// Σ_o N_{w,o} τ̄_{w,o}: execution load (µs per second).
    pub fn exec_load(&self) -> f64 {
        self.ops.iter().map(|o| o.exec_us).sum::<f64>() / self.interval_s.max(1e-9)
    }

    /// Mean queue wait of the requests started in the interval (µs).
    pub fn mean_wait_us(&self) -> f64 {
        let n: u64 = self.ops.iter().map(|o| o.processed).sum();
        if n == 0 { 0.0 } else { self.ops.iter().map(|o| o.wait_us).sum::<f64>() / n as f64 }
    }

    /// Operator `op`'s part.
    pub fn op(&self, op: OperatorId) -> Option<&OpReport> {
        self.ops.get(op.index())
    }
}
