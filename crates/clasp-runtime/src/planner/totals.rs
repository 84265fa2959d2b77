//! Read-only views of the planner for observers (the admin server): run totals, the latency
//! histogram of completed chains and the workers' addresses. Taken once per interval, never on
//! the per-request path.

use super::Planner;
use clasp_core::WorkerId;
use clasp_core::sync::lock;
use hdrhistogram::Histogram;
use std::sync::atomic::Ordering;

/// Counters of a run so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Input requests that entered the planner queue.
    pub input_requests: u64,
    /// Records in them.
    pub input_records: u64,
    /// Chains completed.
    pub completed: u64,
    /// Chains in flight.
    pub in_flight: u64,
    /// Records that reached sinks.
    pub sink_records: u64,
}

/// A connected worker as the planner knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerInfo {
    /// Its id.
    pub id: WorkerId,
    /// The address it accepts peer connections on.
    pub addr: String,
    /// Its process id.
    pub pid: u32,
}

impl Planner {
    /// The run's counters now.
    pub fn totals(&self) -> Totals {
        let (completed, in_flight) = {
            let c = lock(&self.shared.chains);
            (c.completed, c.in_flight() as u64)
        };
        Totals {
            input_requests: self.inputs.requests.load(Ordering::Relaxed),
            input_records: self.inputs.records.load(Ordering::Relaxed),
            completed,
            in_flight,
            sink_records: self.shared.sink_records.load(Ordering::Relaxed),
        }
    }

    /// Seconds since the run started.
    pub fn elapsed_s(&self) -> f64 {
        self.origin.elapsed().as_secs_f64()
    }

    /// End-to-end latency of every chain completed so far (µs).
    pub fn latency_histogram(&self) -> Histogram<u64> {
        lock(&self.shared.chains).total.clone()
    }

    /// The connected workers.
    pub fn worker_info(&self) -> Vec<WorkerInfo> {
        lock(&self.shared.workers)
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let s = s.as_ref().filter(|s| !s.left)?;
                Some(WorkerInfo { id: WorkerId::from(i), addr: s.addr.clone(), pid: s.pid })
            })
            .collect()
    }
}
