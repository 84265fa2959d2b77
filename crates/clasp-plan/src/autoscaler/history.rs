//! What the autoscaler remembers of past intervals: the measurements of the decision window,
//! from which it computes the observed statistics every policy reads, and the samples the
//! baselines need beyond them (FaaSFlow's saturated per-worker rate, Zhang24's overhead ratio).

use clasp_core::Pipeline;
use clasp_core::placement::Placement;
use clasp_core::report::{self, Gaps, Window, WorkerReport};
use clasp_core::stats::ObservedStats;
use std::collections::VecDeque;

/// One statistics interval, as the runtime's planner and the simulator both measure it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Interval {
    /// End of the interval (s since the start).
    pub t: f64,
    /// Length of the interval (s): it covers `(t − interval_s, t]`.
    pub interval_s: f64,
    /// λ_p: input requests per second entering the planner.
    pub input_rate: f64,
    /// λ_p over the interval's last quarter (0: not measured). An interval a jump of the load
    /// falls in straddles it; its last quarter shows the new rate sooner.
    pub recent_input_rate: f64,
    /// Λ: chains completed per second.
    pub throughput: f64,
    /// Input requests dispatched since the start.
    pub requests: u64,
    /// Mean planner queue over the interval.
    pub planner_queue: f64,
    /// Input requests waiting at the end of the interval: queued at the planner or in flight.
    pub backlog: f64,
    /// Workers active.
    pub workers: u32,
    /// The gaps between the input requests dispatched to the workers in the interval.
    pub arrival_gaps: Gaps,
    /// The worker reports that arrived in the interval.
    pub reports: Vec<WorkerReport>,
}

/// Newest saturated per-worker throughputs FaaSFlow averages.
const PER_WORKER_SAMPLES: usize = 10;
/// Newest overhead samples kept per operator for Zhang24.
const OVERHEAD_SAMPLES: usize = 64;

/// The intervals of the decision window and the baselines' samples.
#[derive(Clone, Debug)]
pub(crate) struct History {
    intervals: VecDeque<Interval>,
    /// Throughput per worker of intervals in which some worker was saturated.
    per_worker_rates: VecDeque<f64>,
    /// Per operator: `[parallelism, r]` with r = t_s / (t_s + t_e), Zhang24's overhead ratio
    /// (t_s queueing plus dispatch, t_e execution), one per interval the operator ran in.
    overhead: Vec<VecDeque<[f64; 2]>>,
}

impl History {
    pub(crate) fn new(operators: usize) -> Self {
        Self {
            intervals: VecDeque::new(),
            per_worker_rates: VecDeque::new(),
            overhead: vec![VecDeque::new(); operators],
        }
    }

    /// Keeps `interval`, forgetting intervals that ended more than `keep_s` before it.
    pub(crate) fn push(&mut self, interval: Interval, current: &Placement, keep_s: f64) {
        if interval.workers > 0 && interval.reports.iter().any(|r| r.saturated) {
            self.per_worker_rates.push_back(interval.throughput / f64::from(interval.workers));
            if self.per_worker_rates.len() > PER_WORKER_SAMPLES {
                self.per_worker_rates.pop_front();
            }
        }
        for (o, samples) in self.overhead.iter_mut().enumerate() {
            let (mut n, mut ts, mut te) = (0u64, 0.0, 0.0);
            for op in interval.reports.iter().filter_map(|r| r.ops.get(o)) {
                n += op.processed;
                ts += op.wait_us + op.dispatch_us;
                te += op.exec_us;
            }
            if n == 0 || ts + te <= 0.0 {
                continue;
            }
            let parallelism = current.operators.get(o).map_or(1, total_instances);
            samples.push_back([f64::from(parallelism), ts / (ts + te)]);
            if samples.len() > OVERHEAD_SAMPLES {
                samples.pop_front();
            }
        }
        let t = interval.t;
        self.intervals.push_back(interval);
        while self.intervals.front().is_some_and(|i| t - i.t > keep_s) {
            self.intervals.pop_front();
        }
    }

    /// Records per key group of every operator over the intervals ending in `(from, to]`
    /// (`groups` groups each; all 0 where nothing was measured).
    pub(crate) fn group_loads(
        &self,
        (from, to): (f64, f64),
        operators: usize,
        groups: u32,
    ) -> Vec<Vec<f64>> {
        let mut loads = vec![Vec::new(); operators];
        let window = self.intervals.iter().filter(|i| i.t > from && i.t <= to);
        for r in window.flat_map(|i| &i.reports) {
            for (o, op) in r.ops.iter().enumerate().take(operators) {
                for &(g, n) in &op.groups {
                    if g < groups {
                        let l = &mut loads[o];
                        if l.is_empty() {
                            l.resize(groups as usize, 0.0);
                        }
                        l[g as usize] += n as f64;
                    }
                }
            }
        }
        loads
    }

    /// Mean input rate of the intervals of the last `secs` seconds (of the newest one if
    /// none ended within them).
    pub(crate) fn mean_input_rate(&self, secs: f64) -> f64 {
        let Some(newest) = self.intervals.back() else { return 0.0 };
        let recent: Vec<f64> = self
            .intervals
            .iter()
            .filter(|i| newest.t - i.t < secs - 1e-9)
            .map(|i| i.input_rate)
            .collect();
        if recent.is_empty() {
            newest.input_rate
        } else {
            recent.iter().sum::<f64>() / recent.len() as f64
        }
    }

    /// Observed statistics of the intervals ending in `(from, to]`, with everything the
    /// policies read beyond the reports.
    pub(crate) fn statistics(
        &self,
        p: &Pipeline,
        (from, to): (f64, f64),
        current: &Placement,
        batch_size: u32,
    ) -> ObservedStats {
        let window: Vec<&Interval> =
            self.intervals.iter().filter(|i| i.t > from && i.t <= to).collect();
        let inputs: Vec<f64> = window.iter().map(|i| i.input_rate).collect();
        let completed: Vec<f64> = window.iter().map(|i| i.throughput).collect();
        let planner_queue =
            window.iter().map(|i| i.planner_queue).sum::<f64>() / window.len().max(1) as f64;
        let reports: Vec<&WorkerReport> = window.iter().flat_map(|i| &i.reports).collect();
        let mut stats = report::observe(
            p,
            &reports,
            &Window {
                inputs: &inputs,
                completed: &completed,
                planner_queue,
                workers_used: current.workers,
                batch_size,
            },
        );
        for (o, s) in stats.operators.iter_mut().enumerate() {
            s.parallelism = current.operators.get(o).map_or(1, total_instances);
            s.overhead_samples = self.overhead[o].iter().copied().collect();
        }
        stats.arrival_scv = Gaps::mean_scv(window.iter().map(|i| &i.arrival_gaps));
        stats.saturated_per_worker_rate = (!self.per_worker_rates.is_empty()).then(|| {
            self.per_worker_rates.iter().sum::<f64>() / self.per_worker_rates.len() as f64
        });
        stats
    }
}

/// Instances of one operator over all its shares (at least one).
fn total_instances(o: &clasp_core::placement::OperatorPlacement) -> u32 {
    o.shares.iter().map(|s| s.instances).sum::<u32>().max(1)
}
