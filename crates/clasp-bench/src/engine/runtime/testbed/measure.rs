//! What a testbed run measured: the statistics intervals of its measured period averaged,
//! and how busy each worker's slots were.

use clasp_core::report::WorkerReport;
use clasp_core::stats::ObservedStats;
use clasp_runtime::planner::Progress;
use clasp_runtime::planner::stats::{ReportLog, RunSummary};

/// Per worker of `workers`, the fraction of its slots' time spent executing, over the
/// reports that arrived in `(from_s, to_s]`.
pub(super) fn busy(reports: &ReportLog, from_s: f64, to_s: f64, workers: u32) -> Vec<f64> {
    let mut exec = vec![0.0; workers as usize];
    let mut time = vec![0.0; workers as usize];
    for r in reports.window(from_s, to_s) {
        if let Some(w) = exec.get_mut(r.worker.index()) {
            *w += r.ops.iter().map(|o| o.exec_us).sum::<f64>() / 1e6;
            time[r.worker.index()] += r.interval_s * f64::from(r.slots.max(1));
        }
    }
    exec.iter().zip(&time).map(|(e, t)| if *t > 0.0 { e / t } else { f64::NAN }).collect()
}

/// One statistics interval of a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// End of the interval (s).
    pub t: f64,
    /// Its length (s).
    pub dt: f64,
    /// Chains completed per second.
    pub throughput: f64,
    /// Median latency of the chains completed in it (µs).
    pub p50_us: f64,
    /// Their 95th percentile (µs).
    pub p95_us: f64,
    /// Local chained requests per second (latest worker reports).
    pub local_rate: f64,
    /// Remote chained requests per second.
    pub remote_rate: f64,
}

impl Sample {
    pub(super) fn of(p: &Progress) -> Self {
        Self {
            t: p.t,
            dt: p.interval_s,
            throughput: p.throughput,
            p50_us: p.p50_us as f64,
            p95_us: p.p95_us as f64,
            local_rate: p.local_rate,
            remote_rate: p.remote_rate,
        }
    }
}

/// What a run measured over its measured period.
#[derive(Clone, Debug)]
pub struct Measured {
    /// Chains completed per second over the measured intervals.
    pub throughput: f64,
    /// Median end-to-end latency (ms): the intervals' medians weighted by their completions.
    pub p50_ms: f64,
    /// 95th percentile (ms), weighted the same way.
    pub p95_ms: f64,
    /// Remote share of chained requests.
    pub remote_share: f64,
    /// Cores of this machine the run used (planner, workers, emulation), start to shutdown.
    pub cpu_cores: f64,
    /// Per worker, the fraction of its slots' time spent executing in the measured period
    /// (execution time reported ÷ slots × reported time).
    pub busy: Vec<f64>,
    /// Measured intervals.
    pub intervals: usize,
    /// The run's totals (whole run, warm-up and drain included).
    pub summary: RunSummary,
    /// Observed statistics of the measured period (`clasp.stats/1`).
    pub stats: ObservedStats,
    /// The worker reports of the measured period that the planner saw as saturated: what an
    /// online estimator learns from.
    pub saturated: Vec<WorkerReport>,
}

impl Measured {
    /// Averages the samples ending in `(warmup_s, end_s]`.
    pub fn new(
        samples: &[Sample],
        warmup_s: f64,
        end_s: f64,
        cpu_cores: f64,
        summary: RunSummary,
        stats: ObservedStats,
    ) -> Self {
        let measured: Vec<&Sample> =
            samples.iter().filter(|s| s.t > warmup_s && s.t <= end_s + 1e-3).collect();
        let time: f64 = measured.iter().map(|s| s.dt).sum();
        let completed: f64 = measured.iter().map(|s| s.throughput * s.dt).sum();
        let weighted = |f: fn(&Sample) -> f64| {
            if completed > 0.0 {
                measured.iter().map(|s| f(s) * s.throughput * s.dt).sum::<f64>() / completed / 1e3
            } else {
                f64::NAN
            }
        };
        let local: f64 = measured.iter().map(|s| s.local_rate * s.dt).sum();
        let remote: f64 = measured.iter().map(|s| s.remote_rate * s.dt).sum();
        Self {
            throughput: if time > 0.0 { completed / time } else { f64::NAN },
            p50_ms: weighted(|s| s.p50_us),
            p95_ms: weighted(|s| s.p95_us),
            remote_share: if local + remote > 0.0 { remote / (local + remote) } else { 0.0 },
            cpu_cores,
            busy: Vec::new(),
            saturated: Vec::new(),
            intervals: measured.len(),
            summary,
            stats,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measurements_average_the_measured_intervals_only() {
        let s = |t, thr, p50| Sample {
            t,
            dt: if t == 1.5 { 1.0 } else { 0.5 },
            throughput: thr,
            p50_us: p50,
            p95_us: 2.0 * p50,
            local_rate: 1.0,
            remote_rate: 3.0,
        };
        // Intervals of 0.5 s and 1 s: 50 + 300 chains in 1.5 s; medians weighted by chains.
        let samples = [s(0.5, 10.0, 9e3), s(1.0, 100.0, 1e3), s(1.5, 300.0, 3e3), s(2.5, 5.0, 1e3)];
        let m =
            Measured::new(&samples, 0.5, 2.0, 0.1, RunSummary::default(), ObservedStats::default());
        assert_eq!(m.intervals, 2);
        assert!((m.throughput - 350.0 / 1.5).abs() < 1e-9);
        let p50 = (50.0 * 1.0 + 300.0 * 3.0) / 350.0;
        assert!((m.p50_ms - p50).abs() < 1e-12 && (m.p95_ms - 2.0 * p50).abs() < 1e-12);
        assert_eq!(m.remote_share, 0.75);
    }
}
