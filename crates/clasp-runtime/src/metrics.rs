//! The metrics monitor's data: per-executor counters (written by one thread each, summed by the
//! monitor every interval) and the report a worker sends the planner (CLASP Table 2, the type
//! the simulator's workers report too).

use clasp_core::WorkerId;
use std::sync::atomic::{AtomicU64, Ordering};

/// Adds to a counter that only one thread writes (no atomic read-modify-write needed).
#[inline]
pub fn bump(c: &AtomicU64, by: u64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(by), Ordering::Relaxed);
}

/// The unit of [`OpCounters::exec_sq`] (ns²): 1 µs², so its total holds 10¹¹ executions of
/// 10 ms.
pub const EXEC_SQ_UNIT_NS2: u64 = 1_000_000;

/// Totals for one operator.
#[derive(Debug, Default)]
pub struct OpCounters {
    /// Requests executed.
    pub processed: AtomicU64,
    /// Records in them.
    pub records: AtomicU64,
    /// Records emitted.
    pub emitted: AtomicU64,
    /// Requests the timed ones stand for: all large ones are timed (weight 1), one small one
    /// in a sample of several (weight: the sample's size).
    pub timed: AtomicU64,
    /// Execution time of the timed requests, each times its weight (ns).
    pub exec_ns: AtomicU64,
    /// Squared execution time of the timed requests, each times its weight (in units of
    /// [`EXEC_SQ_UNIT_NS2`]): with `exec_ns`, its variability.
    pub exec_sq: AtomicU64,
    /// Time the timed requests waited in the queue, each times its weight (ns).
    pub wait_ns: AtomicU64,
    /// Executions that touched keyed state.
    pub touched: AtomicU64,
}

impl OpCounters {
    /// Whether the timed requests so far took longer than `d` on average (no division: this
    /// is asked on the per-request path).
    #[inline]
    pub fn mean_exec_exceeds(&self, d: std::time::Duration) -> bool {
        let timed = u128::from(self.timed.load(Ordering::Relaxed));
        u128::from(self.exec_ns.load(Ordering::Relaxed)) > d.as_nanos() * timed.max(1)
    }
}

/// One executor thread's counters.
#[derive(Debug)]
pub struct ExecCounters {
    /// Per operator.
    pub ops: Box<[OpCounters]>,
    /// Chained requests per stream.
    pub edges: Box<[AtomicU64]>,
    /// Records those requests carried, per stream.
    pub edge_records: Box<[AtomicU64]>,
    /// Chained requests dispatched to this worker.
    pub local: AtomicU64,
    /// Chained requests dispatched to other workers.
    pub remote: AtomicU64,
    /// Bit per remote worker reached since the monitor last looked.
    pub destinations: Box<[AtomicU64]>,
    /// Per operator, records processed per key group (empty for stateless operators).
    pub groups: Box<[Box<[AtomicU64]>]>,
}

impl ExecCounters {
    /// Counters for `ops` operators, `streams` streams and up to `workers` workers;
    /// `key_groups[o]` groups are counted for operator `o` (0 for a stateless one).
    pub fn new(ops: usize, streams: usize, workers: usize, key_groups: &[u32]) -> Self {
        Self {
            groups: (0..ops)
                .map(|o| {
                    let n = key_groups.get(o).copied().unwrap_or(0) as usize;
                    (0..n).map(|_| AtomicU64::new(0)).collect()
                })
                .collect(),
            ops: (0..ops).map(|_| OpCounters::default()).collect(),
            edges: (0..streams).map(|_| AtomicU64::new(0)).collect(),
            edge_records: (0..streams).map(|_| AtomicU64::new(0)).collect(),
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

pub use clasp_core::report::{OpReport, WorkerReport};

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn mean_execution_is_compared_without_dividing() {
        let c = OpCounters::default();
        let d = Duration::from_micros(100);
        assert!(!c.mean_exec_exceeds(d), "nothing timed yet");
        bump(&c.timed, 4);
        bump(&c.exec_ns, 4 * 100_000);
        assert!(!c.mean_exec_exceeds(d), "a mean of exactly 100 us does not exceed it");
        bump(&c.exec_ns, 1);
        assert!(c.mean_exec_exceeds(d));
        assert!(!c.mean_exec_exceeds(Duration::from_micros(101)));
    }
}
