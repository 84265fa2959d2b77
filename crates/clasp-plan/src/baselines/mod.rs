//! The baseline scaling policies CLASP is compared against, re-implemented from the same
//! observed statistics and target rate as CLASP itself:
//!
//! - [`faasflow`]: slot-based capacity, operators grouped along heavy edges (FaaSFlow, as
//!   re-implemented by the CLASP authors);
//! - [`zhang24`]: a fitted scheduling-overhead model per operator and an affinity/balance
//!   score that spreads instances over all workers (Zhang et al., HPCC 2024);
//! - [`ds2`]: true processing rates from useful (busy) time and target rates propagated
//!   through the graph (DS2, Kalavri et al., OSDI 2018);
//! - [`flink`]: the Flink Kubernetes operator's autoscaler (true rates from busy time, a target
//!   utilization with bounds, scale factors limited, parallelism aligned to key groups) with
//!   Flink's slot-sharing placement.
//!
//! [`busy`] reconstructs the busy time DS2 and Flink read from the execution times the
//! statistics carry.
//!
//! Each module offers `worker_count` and `place`; the placement carries each operator's
//! instances per worker in [`Share::instances`].

pub mod busy;
pub mod ds2;
pub mod faasflow;
pub mod flink;
pub mod zhang24;

use clasp_core::placement::{OperatorPlacement, Placement, Share};
use clasp_core::stats::ObservedStats;
use clasp_core::{OperatorId, Pipeline, WorkerId};

/// Per-operator observations every baseline starts from, with the projection to the target
/// rate (CLASP Eq. 5–7).
#[derive(Clone, Debug)]
pub(crate) struct Observed {
    /// N_o: processed requests per second, as observed (0 if not observed).
    pub processed: Vec<f64>,
    /// τ̄_o: mean execution time per request (µs, 0 if not observed).
    pub exec_us: Vec<f64>,
    /// s = λ_p / Λ: from the observed rates to the target rate.
    pub scale: f64,
}

impl Observed {
    /// Reads `stats` for every operator of `p`. The projection factor divides by the observed
    /// throughput Λ, or the observed input rate when no chain completed, and is 1 when
    /// neither was observed.
    pub fn new(p: &Pipeline, stats: &ObservedStats, target_rate: f64) -> Self {
        let (processed, exec_us) = p
            .operators
            .iter()
            .map(|op| {
                stats.operator(p, op.id).map_or((0.0, 0.0), |o| {
                    (finite_non_negative(o.processed_rate), finite_non_negative(o.exec_time_us))
                })
            })
            .unzip();
        let observed =
            [stats.throughput, stats.input_rate].into_iter().find(|r| r.is_finite() && *r > 0.0);
        let target = finite_non_negative(target_rate);
        let scale = observed.map_or(1.0, |r| target / r);
        Self { processed, exec_us, scale }
    }

    /// D̃_o = s·N_o·τ̄_o: projected demand (µs/s).
    pub fn demand(&self, op: OperatorId) -> f64 {
        self.scale * self.processed[op.index()] * self.exec_us[op.index()]
    }
}

/// `x` if finite and positive, else 0: statistics files come from outside.
pub(crate) fn finite_non_negative(x: f64) -> f64 {
    if x.is_finite() && x > 0.0 { x } else { 0.0 }
}

/// One operator on one worker, before normalization.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Slice {
    /// The worker.
    pub worker: WorkerId,
    /// Relative weight of the operator's requests this worker takes.
    pub weight: f64,
    /// Executor instances of the operator on the worker.
    pub instances: u32,
}

/// Builds a placement on `workers` workers from per-operator slices: fractions are the
/// weights normalized (even if all are 0), shares the fractions of the projected demand,
/// entries sorted by worker.
pub(crate) fn build_placement(
    p: &Pipeline,
    observed: &Observed,
    workers: u32,
    slices: Vec<Vec<Slice>>,
) -> Placement {
    let operators = p
        .operators
        .iter()
        .zip(slices)
        .map(|(op, mut slices)| {
            slices.sort_by_key(|s| s.worker);
            let total: f64 = slices.iter().map(|s| s.weight).sum();
            let even = 1.0 / slices.len().max(1) as f64;
            let demand = observed.demand(op.id);
            let shares = slices
                .iter()
                .map(|s| {
                    let fraction = if total > 0.0 { s.weight / total } else { even };
                    Share {
                        worker: s.worker,
                        share: fraction * demand,
                        fraction,
                        instances: s.instances.max(1),
                    }
                })
                .collect();
            OperatorPlacement { operator: op.id, demand, shares }
        })
        .collect();
    Placement { workers, operators }
}

/// `ceil(x)` as a worker count within `1..=max` (NaN and negatives give 1).
pub(crate) fn clamp_workers(x: f64, max: u32) -> u32 {
    let max = max.max(1);
    if x.is_finite() && x > 1.0 { (x.ceil().min(f64::from(max))) as u32 } else { 1 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{random_pipeline, random_stats};
    use clasp_core::rng::SeededRng;
    use proptest::prelude::*;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn worker_counts_are_clamped() {
        assert_eq!(clamp_workers(0.2, 10), 1);
        assert_eq!(clamp_workers(f64::NAN, 10), 1);
        assert_eq!(clamp_workers(3.01, 10), 4);
        assert_eq!(clamp_workers(3.0, 10), 3);
        assert_eq!(clamp_workers(30.0, 10), 10);
        assert_eq!(clamp_workers(30.0, 0), 1);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 150, rng_seed: proptest::test_runner::RngSeed::Fixed(3), ..ProptestConfig::default() })]

        /// Every baseline gives a valid, deterministic placement for any worker count, with
        /// every operator's instances on the workers that carry its shares.
        #[test]
        fn baselines_place_validly(seed in any::<u64>(), ops in 1usize..9, workers in 1u32..12) {
            let mut rng = SeededRng::seed_from_u64(seed);
            let p = random_pipeline(&mut rng, ops, 0.4);
            let stats = random_stats(&mut rng, &p);
            let rate = rng.random_range(0.0..20_000.0);
            let placements = [
                faasflow::place(&p, &stats, rate, workers, &faasflow::Config::default()),
                zhang24::place(&p, &stats, rate, workers, &zhang24::Config::default()),
                ds2::place(&p, &stats, rate, workers, None, &ds2::Config::default()),
                flink::spread(&p, &stats, rate, &flink::parallelism(&p, &stats, rate, None, &flink::Config::default()), workers, &flink::Config::default()),
            ];
            let again = [
                faasflow::place(&p, &stats, rate, workers, &faasflow::Config::default()),
                zhang24::place(&p, &stats, rate, workers, &zhang24::Config::default()),
                ds2::place(&p, &stats, rate, workers, None, &ds2::Config::default()),
                flink::spread(&p, &stats, rate, &flink::parallelism(&p, &stats, rate, None, &flink::Config::default()), workers, &flink::Config::default()),
            ];
            prop_assert_eq!(&placements, &again);
            for placement in &placements {
                prop_assert_eq!(placement.workers, workers);
                prop_assert!(placement.check(&p).is_ok(), "{:?}", placement.check(&p));
                for op in &placement.operators {
                    prop_assert!(op.shares.iter().all(|s| s.instances >= 1));
                    let placed: f64 = op.shares.iter().map(|s| s.share).sum();
                    prop_assert!((placed - op.demand).abs() <= 1e-6 * op.demand.max(1.0));
                }
            }
            let counts = [
                faasflow::worker_count(&p, &stats, rate, &faasflow::Config::default()),
                zhang24::worker_count(&p, &stats, rate, &zhang24::Config::default()),
                ds2::worker_count(&p, &stats, rate, None, &ds2::Config::default()),
                flink::worker_count(&p, &stats, rate, None, &flink::Config::default()),
            ];
            prop_assert!(counts.iter().all(|c| (1..=10).contains(c)), "{:?}", counts);
        }
    }
}
