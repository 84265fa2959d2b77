//! Busy time: how long an operator's instances are busy with a request. DS2 calls it *useful
//! time* and derives true processing rates from it (records processed per second of useful
//! time per instance); Flink's autoscaler reads it as `busyTimeMsPerSecond`. In both an
//! instance is a thread and its busy time is wall-clock time: with a request to work on it is
//! busy, running or waiting for the CPU. On a clasp worker the instances share its executor
//! slots and the slots share its CPU, so a busy instance may also wait for a slot (where a
//! placement gives a worker more instances than slots, as Flink's slot sharing does), and an
//! execution takes longer than the CPU time it needs.
//!
//! clasp's statistics report τ̄, the mean *execution time* per request. What it measures
//! differs: the runtime times an execution by the wall clock, the simulator reports the
//! execution's CPU work, whatever share of the worker's W̄ it ran at. Neither report says how
//! many instances were busy at a time, which is what turns one into the other. It is known on a
//! saturated worker (queue and wait over their thresholds): requests wait for every instance,
//! so each is busy all the time, and Little's law gives each request's busy time
//!
//! ```text
//! B_{w,o} = max(τ̄_{w,o}, P_{w,o} · 10⁶ / N_{w,o})
//! ```
//!
//! (DS2's true rate is then the observed rate per instance, N_{w,o} / P_{w,o}). Without the
//! running placement the instances are not known; then all the worker's slots count as busy
//! and are divided among the operators in proportion to their execution time,
//! B_{w,o} = τ̄_{w,o} · max(1, slots · 10⁶ / Σ_o N_{w,o} τ̄_{w,o}). On a worker that is not
//! saturated the busy instances are not in the statistics, and τ̄ stands for the busy time.

use clasp_core::placement::Placement;
use clasp_core::stats::{ObservedStats, WorkerStats};
use clasp_core::{Pipeline, WorkerId};

use super::finite_non_negative;

/// One operator's busy time on one worker.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WorkerBusy {
    /// The worker.
    pub worker: WorkerId,
    /// N_{w,o}: requests processed per second.
    pub processed: f64,
    /// N_{w,o}·B_{w,o}: busy µs per second, over all the operator's instances on the worker.
    pub busy: f64,
    /// P_{w,o}: the operator's instances on the worker, when the running placement is known.
    pub instances: Option<u32>,
}

/// One operator's busy time over the window.
#[derive(Clone, Debug, PartialEq)]
pub struct OperatorBusy {
    /// Requests processed per second.
    pub processed: f64,
    /// Busy µs per second, over all instances.
    pub busy: f64,
    /// The workers that reported the operator (empty when the statistics have no worker rows).
    pub workers: Vec<WorkerBusy>,
}

impl OperatorBusy {
    /// B_o: mean busy time per request (µs), 0 when nothing was processed.
    pub fn per_request_us(&self) -> f64 {
        if self.processed > 0.0 { self.busy / self.processed } else { 0.0 }
    }

    /// The largest busy fraction of one instance over the workers (what Flink's default `MAX`
    /// busy-time aggregator reads: the busiest subtask), if every reporting worker's instances
    /// are known; instances on one worker share its queue, so they are equally busy.
    pub fn max_instance_busy(&self) -> Option<f64> {
        if self.workers.is_empty() {
            return None;
        }
        self.workers.iter().try_fold(0.0f64, |max, w| {
            let n = w.instances.filter(|&n| n > 0)?;
            Some(max.max(w.busy / (f64::from(n) * 1e6)))
        })
    }
}

/// The busy time of every operator of `p`, indexed by operator. With per-worker rows, from
/// them as the module docs derive; without, N_o·τ̄_o from the operator rows. `current` is the
/// placement the statistics were observed under.
pub fn busy_times(
    p: &Pipeline,
    stats: &ObservedStats,
    current: Option<&Placement>,
) -> Vec<OperatorBusy> {
    let current = current.filter(|c| c.check(p).is_ok());
    let slot_stretch: Vec<f64> = stats.workers.iter().map(slot_stretch).collect();
    p.operators
        .iter()
        .map(|op| {
            let workers: Vec<WorkerBusy> = stats
                .workers
                .iter()
                .zip(&slot_stretch)
                .filter_map(|(row, &stretch)| {
                    let o = row.operators.iter().find(|o| o.name == op.name)?;
                    let processed = finite_non_negative(o.processed_rate);
                    let worker = WorkerId(row.worker);
                    let instances = current.map(|c| instances_on(c, op.id.index(), worker));
                    let exec = processed * finite_non_negative(o.exec_time_us);
                    let busy = match instances {
                        _ if !row.saturated => exec,
                        Some(n) if n > 0 => exec.max(f64::from(n) * 1e6),
                        _ => exec * stretch,
                    };
                    (processed > 0.0).then_some(WorkerBusy { worker, processed, busy, instances })
                })
                .collect();
            if workers.is_empty() {
                let (processed, exec) = stats.operator(p, op.id).map_or((0.0, 0.0), |o| {
                    (finite_non_negative(o.processed_rate), finite_non_negative(o.exec_time_us))
                });
                return OperatorBusy { processed, busy: processed * exec, workers };
            }
            let processed = workers.iter().map(|w| w.processed).sum();
            let busy = workers.iter().map(|w| w.busy).sum();
            OperatorBusy { processed, busy, workers }
        })
        .collect()
}

/// Busy time per µs of execution time on a saturated worker whose instances are not known:
/// all its slots busy, shared in proportion to execution time (module docs).
fn slot_stretch(w: &WorkerStats) -> f64 {
    let exec = finite_non_negative(w.exec_load);
    if exec > 0.0 { (f64::from(w.slots) * 1e6 / exec).max(1.0) } else { 1.0 }
}

/// P_{w,o} under `placement` (0 if `o` has no share on `w`).
fn instances_on(placement: &Placement, o: usize, w: WorkerId) -> u32 {
    placement.operators[o].shares.iter().find(|s| s.worker == w).map_or(0, |s| s.instances)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::pipeline;
    use clasp_core::placement::{OperatorPlacement, Share};
    use clasp_core::stats::{OperatorStats, WorkerOperatorStats};
    use clasp_core::{OperatorId, WorkerId};

    const CHAIN: &str = "[[source]]\nname = \"in\"\n[[operator]]\nname = \"a\"\n\
        [[operator]]\nname = \"b\"\n[[stream]]\nfrom = \"in\"\nto = \"a\"\n\
        [[stream]]\nfrom = \"a\"\nto = \"b\"\n";

    fn row(worker: u32, saturated: bool, ops: [(f64, f64); 2]) -> WorkerStats {
        let operators = ["a", "b"]
            .iter()
            .zip(ops)
            .map(|(n, (rate, exec))| WorkerOperatorStats {
                name: (*n).into(),
                processed_rate: rate,
                exec_time_us: exec,
            })
            .collect::<Vec<_>>();
        let exec_load = ops.iter().map(|(r, e)| r * e).sum();
        WorkerStats { worker, slots: 10, exec_load, saturated, operators, ..WorkerStats::default() }
    }

    fn placed(instances: [[u32; 2]; 2]) -> Placement {
        let operators = (0..2)
            .map(|o| OperatorPlacement {
                operator: OperatorId(o as u32),
                demand: 0.0,
                shares: (0..2)
                    .map(|w| Share {
                        worker: WorkerId(w),
                        share: 0.0,
                        fraction: 0.5,
                        instances: instances[w as usize][o],
                    })
                    .collect(),
            })
            .collect();
        Placement { workers: 2, operators }
    }

    #[test]
    fn every_instance_of_a_saturated_worker_is_busy() {
        let p = pipeline(CHAIN);
        // Worker 0 saturated at 850,000 µs/s of execution: a 100 × 500 µs, b 700 × 1,142.857 µs.
        // Worker 1 not saturated: a 100 × 500 µs, b 100 × 1,000 µs.
        let b_exec = 800_000.0 / 700.0;
        let stats = ObservedStats {
            workers: vec![
                row(0, true, [(100.0, 500.0), (700.0, b_exec)]),
                row(1, false, [(100.0, 500.0), (100.0, 1000.0)]),
            ],
            ..ObservedStats::default()
        };
        // Worker 0 runs 2 instances of a and 6 of b, busy all the time: 2 s/s and 6 s/s.
        let current = placed([[2, 6], [1, 1]]);
        let busy = busy_times(&p, &stats, Some(&current));
        let (a, b) = (&busy[0], &busy[1]);
        assert_eq!((a.processed, a.busy), (200.0, 2e6 + 100.0 * 500.0));
        assert_eq!((b.processed, b.busy), (800.0, 6e6 + 100.0 * 1000.0));
        assert_eq!(b.per_request_us(), 6.1e6 / 800.0);
        // DS2's true rate on worker 0 is the rate per instance: 700 / 6 requests/s.
        assert!((1e6 / (b.workers[0].busy / b.workers[0].processed) - 700.0 / 6.0).abs() < 1e-9);
        // The busiest instances are worker 0's; worker 1's one instance of b is 0.1 busy.
        assert_eq!(b.max_instance_busy(), Some(1.0));
        assert_eq!(b.workers[1].busy / 1e6, 0.1);
        // Without the placement every slot of a saturated worker counts as busy, shared in
        // proportion to execution time.
        let all = busy_times(&p, &stats, None);
        assert!((all[1].workers[0].busy - 800_000.0 * 1e7 / 850_000.0).abs() < 1e-6);
        assert_eq!(all[1].workers[1].busy, 100_000.0);
        assert_eq!(all[1].max_instance_busy(), None);
        // Slot sharing: 4 + 12 instances on 10 slots are all busy, waiting for a slot or not.
        let shared = busy_times(&p, &stats, Some(&placed([[4, 12], [1, 1]])));
        assert_eq!((shared[0].workers[0].busy, shared[1].workers[0].busy), (4e6, 12e6));
    }

    #[test]
    fn without_worker_rows_busy_time_is_execution_time() {
        let p = pipeline(CHAIN);
        let op = |name: &str, rate, exec| OperatorStats {
            name: name.into(),
            processed_rate: rate,
            exec_time_us: exec,
            ..OperatorStats::default()
        };
        let stats = ObservedStats {
            operators: vec![op("a", 10.0, 300.0), op("b", f64::NAN, 1.0)],
            ..ObservedStats::default()
        };
        let busy = busy_times(&p, &stats, None);
        assert_eq!(
            (busy[0].processed, busy[0].busy, busy[0].per_request_us()),
            (10.0, 3000.0, 300.0)
        );
        assert_eq!((busy[1].processed, busy[1].per_request_us()), (0.0, 0.0));
        assert!(busy[0].workers.is_empty() && busy[0].max_instance_busy().is_none());
    }

    #[test]
    fn busy_time_is_never_below_execution_time() {
        // A wall-clock execution load above slots · 10⁶ keeps τ̄, with or without instances.
        let p = pipeline(CHAIN);
        let stats = ObservedStats {
            workers: vec![row(0, true, [(1000.0, 6000.0), (1000.0, 6000.0)])],
            ..ObservedStats::default()
        };
        assert_eq!(busy_times(&p, &stats, None)[0].per_request_us(), 6000.0);
        let one = Placement::single_worker(&p, &[2, 2]);
        assert_eq!(busy_times(&p, &stats, Some(&one))[0].per_request_us(), 6000.0);
    }
}
