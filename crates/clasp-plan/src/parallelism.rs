//! Operator parallelism (§4.3.2, Eq. 10–12): derived from the placement, not chosen per
//! operator. Instances are integers; every split of an integer total uses largest-remainder
//! rounding, so the parts always add up to the total.

use crate::projection::Projection;
use clasp_core::placement::Placement;

/// Eq. 10: P_tot = s · P_tot^cur, rounded to the nearest integer, at least 1.
pub fn total_instances(scale: f64, current: u32) -> u32 {
    let t = (scale * f64::from(current)).round();
    if t.is_finite() { t.clamp(1.0, f64::from(u32::MAX)) as u32 } else { 1 }
}

/// Splits `total` in proportion to `weights` (≥ 0) by largest remainders (Hamilton's method):
/// each part gets the floor of its quota, and the units left go to the largest fractional
/// remainders, ties to the lower index. With all weights 0 the split is even.
pub fn largest_remainder(total: u32, weights: &[f64]) -> Vec<u32> {
    if weights.is_empty() {
        return Vec::new();
    }
    let sum: f64 = weights.iter().map(|w| w.max(0.0)).sum();
    let quota = |w: f64| {
        let share = if sum > 0.0 { w.max(0.0) / sum } else { 1.0 / weights.len() as f64 };
        f64::from(total) * share
    };
    let quotas: Vec<f64> = weights.iter().map(|&w| quota(w)).collect();
    let mut parts: Vec<u32> = quotas.iter().map(|q| q.floor() as u32).collect();
    let given: u32 = parts.iter().sum();
    let mut by_remainder: Vec<usize> = (0..parts.len()).collect();
    by_remainder.sort_by(|&a, &b| {
        let (ra, rb) = (quotas[a] - quotas[a].floor(), quotas[b] - quotas[b].floor());
        rb.total_cmp(&ra).then(a.cmp(&b))
    });
    for &i in by_remainder.iter().cycle().take(total.saturating_sub(given) as usize) {
        parts[i] += 1;
    }
    parts
}

/// Eq. 11: P_o = P_tot · N_o τ̄_o / Σ_o' N_o' τ̄_o', rounded by largest remainders so that
/// Σ_o P_o = P_tot exactly. `demand` holds N_o τ̄_o.
pub fn operator_instances(total: u32, demand: &[f64]) -> Vec<u32> {
    largest_remainder(total, demand)
}

/// Eq. 12: the initial single-worker allocation of the `slots` executor slots (P_max) in
/// proportion to each operator's demand N_o τ̄_o; every operator gets at least one instance,
/// so the sum exceeds `slots` only when there are more operators than slots (or operators
/// without demand).
pub fn initial_allocation(demand: &[f64], slots: u32) -> Vec<u32> {
    largest_remainder(slots, demand).into_iter().map(|p| p.max(1)).collect()
}

/// Spreads `instances` of one operator over the workers holding `fractions` of it. Worker `w`'s
/// quota is q_w = instances·σ_w; each worker first gets one instance (it must be able to run its
/// share), and the remaining instances are split by largest remainders in proportion to the
/// quota above that one, max(q_w − 1, 0). So a worker gets its quota rounded whenever the
/// quota is at least one. Returns at least one per worker, summing to
/// `max(instances, fractions.len())`.
pub fn spread(instances: u32, fractions: &[f64]) -> Vec<u32> {
    let k = fractions.len() as u32;
    let total: f64 = fractions.iter().map(|f| f.max(0.0)).sum();
    let above_one: Vec<f64> = fractions
        .iter()
        .map(|f| {
            let quota = if total > 0.0 { f64::from(instances) * f.max(0.0) / total } else { 0.0 };
            (quota - 1.0).max(0.0)
        })
        .collect();
    let rest = largest_remainder(instances.saturating_sub(k), &above_one);
    rest.into_iter().map(|r| r + 1).collect()
}

/// Fills `Share::instances` of a placement at projection `proj`: Eq. 10 gives the total,
/// Eq. 11 the operator's part, and [`spread`] its split over the operator's workers. An
/// operator gets `max(P_o, workers it runs on)` instances. Returns those per operator.
pub fn assign(placement: &mut Placement, proj: &Projection) -> Vec<u32> {
    let total = total_instances(proj.scale, proj.current_instances);
    let eq11 = operator_instances(total, &proj.observed_demand());
    placement
        .operators
        .iter_mut()
        .zip(eq11)
        .map(|(op, p)| {
            let fractions: Vec<f64> = op.shares.iter().map(|s| s.fraction).collect();
            let per_worker = spread(p, &fractions);
            for (s, n) in op.shares.iter_mut().zip(&per_worker) {
                s.instances = *n;
            }
            per_worker.iter().sum()
        })
        .collect()
}

/// The highest utilization an instance is planned to, whatever the workers' headroom.
pub const MAX_INSTANCE_UTILIZATION: f64 = 0.9;

/// The busy time (µs/s) one instance may carry: it runs one execution at a time, so at most
/// a second per second, kept below saturation by the planner's headroom and never above
/// [`MAX_INSTANCE_UTILIZATION`]: an instance is a single server, whose queue grows long
/// nearer its capacity than a worker's pooled slots do, so a budget that loads workers fully
/// must not load an operator's instances fully too.
pub fn instance_budget(headroom: f64) -> f64 {
    1e6 * headroom.min(MAX_INSTANCE_UTILIZATION)
}

/// Raises each share's instances to cover its busy time `busy` (per operator, per share, as
/// [`crate::capacity::share_busy_time`] gives it) at `per_instance` µs/s each:
/// n ≥ ⌈busy / per_instance⌉, capped at the worker's `slots`, never lowered. Eq. 11 sizes an
/// operator from N_o·τ̄_o alone; an operator whose executors also send many remote chained
/// requests needs more instances on a worker than its execution time says, or one instance
/// becomes that worker's bottleneck while its other slots idle. Returns instances per operator.
pub fn cover_busy_time(
    placement: &mut Placement,
    busy: &[Vec<f64>],
    per_instance: f64,
    slots: u32,
) -> Vec<u32> {
    placement
        .operators
        .iter_mut()
        .zip(busy)
        .map(|(op, busy)| {
            for (s, &b) in op.shares.iter_mut().zip(busy) {
                let needed = (b / per_instance).ceil();
                let needed =
                    if needed.is_finite() { needed.clamp(0.0, f64::from(slots)) as u32 } else { 0 };
                s.instances = s.instances.max(needed);
            }
            op.shares.iter().map(|s| s.instances).sum()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn eq10_scales_and_rounds() {
        assert_eq!(total_instances(2.5, 10), 25);
        assert_eq!(total_instances(0.26, 10), 3);
        assert_eq!(total_instances(0.01, 10), 1);
        assert_eq!(total_instances(f64::INFINITY, 10), 1);
    }

    #[test]
    fn largest_remainder_by_hand() {
        // Quotas 10·[0.5, 0.3, 0.2]/1 = 5, 3, 2 exactly.
        assert_eq!(largest_remainder(10, &[5.0, 3.0, 2.0]), [5, 3, 2]);
        // Quotas 3.333…: floors 3,3,3, one unit left to the first (tie → lower index).
        assert_eq!(largest_remainder(10, &[1.0, 1.0, 1.0]), [4, 3, 3]);
        // Quotas 1.4, 5.6, 3.0 → floors 1,5,3, remainder 1 to 0.6.
        assert_eq!(largest_remainder(10, &[14.0, 56.0, 30.0]), [1, 6, 3]);
        assert_eq!(largest_remainder(4, &[0.0, 0.0]), [2, 2]);
        assert!(largest_remainder(4, &[]).is_empty());
    }

    #[test]
    fn eq12_gives_every_operator_a_slot() {
        assert_eq!(initial_allocation(&[900.0, 100.0], 10), [9, 1]);
        assert_eq!(initial_allocation(&[999.0, 1.0], 10), [10, 1]);
        assert_eq!(initial_allocation(&[1.0; 12], 10).iter().sum::<u32>(), 12);
    }

    #[test]
    fn spread_gives_each_worker_one_then_by_fraction() {
        assert_eq!(spread(10, &[0.5, 0.5]), [5, 5]);
        assert_eq!(spread(10, &[0.9, 0.1]), [9, 1]);
        assert_eq!(spread(1, &[0.5, 0.25, 0.25]), [1, 1, 1]);
        // Quotas 3.6, 0.2, 0.2: the small ones get their one, the rest goes to the first.
        assert_eq!(spread(4, &[0.9, 0.05, 0.05]), [2, 1, 1]);
        assert_eq!(spread(20, &[0.9, 0.05, 0.05]), [18, 1, 1]);
    }

    #[test]
    fn busy_time_raises_instances_up_to_the_slots() {
        use clasp_core::placement::{OperatorPlacement, Share};
        use clasp_core::{OperatorId, WorkerId};
        let share = |w: u32, instances: u32| Share {
            worker: WorkerId(w),
            share: 0.0,
            fraction: 0.5,
            instances,
        };
        let mut p = Placement {
            workers: 2,
            operators: vec![
                OperatorPlacement {
                    operator: OperatorId::from(0),
                    demand: 0.0,
                    shares: vec![share(0, 1), share(1, 2)],
                },
                OperatorPlacement {
                    operator: OperatorId::from(1),
                    demand: 0.0,
                    shares: vec![share(0, 1)],
                },
            ],
        };
        // 2.5 s/s of busy time needs ⌈2.5/0.9⌉ = 3 instances; 0.2 s/s keeps the 2 it has;
        // 9 s/s would need 10 but the worker has 4 slots.
        let busy = vec![vec![2.5e6, 0.2e6], vec![9e6]];
        let totals = cover_busy_time(&mut p, &busy, instance_budget(0.9), 4);
        assert_eq!(totals, [5, 4]);
        assert_eq!(p.operators[0].shares.iter().map(|s| s.instances).collect::<Vec<_>>(), [3, 2]);
    }

    #[test]
    fn a_full_worker_budget_leaves_instances_their_margin() {
        // 1.9 s/s of busy time on two instances would keep each 95 % busy; a full worker
        // budget still plans three, a tighter one plans to its own fraction.
        use clasp_core::placement::{OperatorPlacement, Share};
        use clasp_core::{OperatorId, WorkerId};
        let share = Share { worker: WorkerId(0), share: 0.0, fraction: 1.0, instances: 1 };
        let mut p = Placement {
            workers: 1,
            operators: vec![OperatorPlacement {
                operator: OperatorId::from(0),
                demand: 0.0,
                shares: vec![share],
            }],
        };
        assert_eq!(cover_busy_time(&mut p, &[vec![1.9e6]], instance_budget(1.0), 4), [3]);
        assert_eq!(instance_budget(0.8), 0.8e6);
    }

    proptest! {
        #![proptest_config(ProptestConfig { rng_seed: proptest::test_runner::RngSeed::Fixed(11), ..ProptestConfig::default() })]

        #[test]
        fn apportionment_is_exact_and_within_one_of_the_quota(
            total in 0u32..10_000,
            weights in prop::collection::vec(0.0f64..1e6, 1..40),
        ) {
            let parts = largest_remainder(total, &weights);
            prop_assert_eq!(parts.iter().sum::<u32>(), total);
            let sum: f64 = weights.iter().sum();
            for (p, w) in parts.iter().zip(&weights) {
                let q = if sum > 0.0 { f64::from(total) * w / sum } else { f64::from(total) / weights.len() as f64 };
                prop_assert!((f64::from(*p) - q).abs() < 1.0 + 1e-9, "{} vs {}", p, q);
            }
        }

        #[test]
        fn spread_sums_and_floors(
            instances in 0u32..200,
            fractions in prop::collection::vec(0.001f64..1.0, 1..20),
        ) {
            let s = spread(instances, &fractions);
            prop_assert!(s.iter().all(|&x| x >= 1));
            prop_assert_eq!(s.iter().sum::<u32>(), instances.max(fractions.len() as u32));
        }
    }
}
