//! The fewest workers that keep up with a pattern, the reference a policy's worker count is
//! read against: each stage at the fewest workers whose maximum throughput (CLASP's placement,
//! unthrottled, [`Maxima::optimal`]) reaches the stage's rate. Below that count a stage's input
//! arrives faster than the workers can complete it, whatever the placement of the policies
//! here (all place with CLASP's packing or spread more), so a policy whose mean is below the
//! floor's spent part of the pattern falling behind.

use crate::experiments::worker_count::Maxima;
use clasp_core::pattern::RatePattern;
use clasp_sim::IntervalRow;

/// The time-weighted mean of the floor over `pattern`'s stages.
pub fn floor_workers(pattern: &RatePattern, maxima: &Maxima) -> f64 {
    let (weighted, total) = pattern.stages().iter().fold((0.0, 0.0), |(w, t), s| {
        (w + s.duration_s * f64::from(maxima.optimal(s.rate)), t + s.duration_s)
    });
    if total > 0.0 { weighted / total } else { 0.0 }
}

/// The share of `timeline`'s time (intervals weighted by their length) during which fewer
/// workers were active than the floor of the rate offered then (the rate at the interval's
/// middle).
pub fn behind_floor_share(pattern: &RatePattern, maxima: &Maxima, timeline: &[IntervalRow]) -> f64 {
    let mut previous = 0.0;
    let (behind, total) = timeline.iter().fold((0.0, 0.0), |(b, t), row| {
        let length = (row.time_s - previous).max(0.0);
        let middle = previous + length / 2.0;
        previous = row.time_s;
        let short = row.workers < maxima.optimal(pattern.rate_at(middle));
        (if short { b + length } else { b }, t + length)
    });
    if total > 0.0 { behind / total } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn maxima() -> Maxima {
        Maxima { app: "x".into(), throughput: vec![100.0, 190.0, 270.0] }
    }

    fn two_stages() -> RatePattern {
        RatePattern::trace("10 150\n30 250\n", "test").expect("a valid trace")
    }

    fn row(time_s: f64, workers: u32) -> IntervalRow {
        IntervalRow { time_s, workers, ..IntervalRow::default() }
    }

    #[test]
    fn the_floor_weighs_each_stage_count_by_its_length() {
        // 150/s needs 2 workers for 10 s, 250/s needs 3 for 30 s.
        assert_eq!(floor_workers(&two_stages(), &maxima()), (2.0 * 10.0 + 3.0 * 30.0) / 40.0);
    }

    #[test]
    fn time_behind_the_floor_counts_the_intervals_with_too_few_workers() {
        // 1 worker for the first 10 s (needs 2), 2 for the next 10 (needs 3), then 3.
        let workers = |t: u32| match t {
            0..=10 => 1,
            11..=20 => 2,
            _ => 3,
        };
        let timeline: Vec<IntervalRow> = (1..=40).map(|t| row(f64::from(t), workers(t))).collect();
        assert_eq!(behind_floor_share(&two_stages(), &maxima(), &timeline), 0.5);
        let ample: Vec<IntervalRow> = (1..=40).map(|t| row(f64::from(t), 3)).collect();
        assert_eq!(behind_floor_share(&two_stages(), &maxima(), &ample), 0.0);
    }
}
