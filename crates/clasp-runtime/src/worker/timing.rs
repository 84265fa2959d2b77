//! Which requests an executor times, and how many requests each timing stands for.
//!
//! Reading the clock costs about as much as dispatching a small request, so small requests are
//! timed one in [`TIME_EVERY`]; large ones always. Each timing is counted with the number of
//! requests it stands for, so the weighted mean (Σ w·t / Σ w) is the mean over all requests:
//! an unweighted mean would tilt towards the large requests, which are all timed and cost more,
//! and overstate an operator's execution time N·τ̄ (Eq. 1) and with it W̄ (Eq. 3).

/// Requests with at least this many records are always timed.
pub const TIME_ALWAYS_RECORDS: usize = 16;
/// One smaller request in this many is timed.
pub const TIME_EVERY: u32 = 8;

/// Per operator, the small requests since the last timed one.
#[derive(Debug)]
pub struct Sampler {
    // Counted per operator: one counter for all would time only some operators of a chain
    // whose length shares a factor with TIME_EVERY (every other one of SYN's ten).
    untimed: Vec<u32>,
}

impl Sampler {
    /// A sampler for `operators` operators; each one's first small request is timed.
    pub fn new(operators: usize) -> Self {
        Self { untimed: vec![TIME_EVERY - 1; operators] }
    }

    /// The weight of a request of operator `op` with `records` records: 0 if it is not
    /// timed, otherwise how many requests its timing stands for.
    pub fn weight(&mut self, op: usize, records: usize) -> u64 {
        if records >= TIME_ALWAYS_RECORDS {
            return 1;
        }
        let since = &mut self.untimed[op];
        *since += 1;
        if *since >= TIME_EVERY {
            *since = 0;
            u64::from(TIME_EVERY)
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clasp_core::rng::SeededRng;
    use rand::{RngExt, SeedableRng};

    /// Σ processed · (Σ w·t / Σ w) against the total cost summed over every request, for
    /// random mixes of small and large requests whose cost grows with their size.
    #[test]
    fn the_weighted_mean_times_the_count_is_the_total() {
        let mut rng = SeededRng::seed_from_u64(7);
        for _ in 0..50 {
            let large_share = rng.random_range(0.0..1.0);
            let mut sampler = Sampler::new(2);
            let (mut total, mut weighted, mut weights, mut n) = (0.0, 0.0, 0u64, 0u64);
            let (mut unweighted, mut timed) = (0.0, 0u64);
            for _ in 0..20_000 {
                let records = if rng.random_bool(large_share) {
                    rng.random_range(16..64)
                } else {
                    rng.random_range(1..4)
                };
                let cost = 10.0 * records as f64;
                total += cost;
                n += 1;
                let w = sampler.weight(1, records);
                weighted += w as f64 * cost;
                weights += w;
                if w > 0 {
                    unweighted += cost;
                    timed += 1;
                }
            }
            let estimate = weighted / weights as f64 * n as f64;
            assert!((estimate / total - 1.0).abs() < 0.03, "{estimate} against {total}");
            let biased = unweighted / timed as f64 * n as f64;
            if (0.05..0.5).contains(&large_share) {
                assert!(biased / total > 1.1, "an unweighted mean would not have been tilted");
            }
        }
    }

    #[test]
    fn large_requests_are_always_timed_and_small_ones_one_in_time_every() {
        let mut sampler = Sampler::new(2);
        assert_eq!(sampler.weight(0, 1), u64::from(TIME_EVERY), "the first small one is timed");
        let small: Vec<u64> = (0..2 * TIME_EVERY).map(|_| sampler.weight(0, 1)).collect();
        assert_eq!(small.iter().filter(|w| **w > 0).count(), 2);
        assert_eq!(sampler.weight(0, TIME_ALWAYS_RECORDS), 1);
        assert_eq!(sampler.weight(1, 1), u64::from(TIME_EVERY), "counted per operator");
    }
}
