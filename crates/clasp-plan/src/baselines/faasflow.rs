//! FaaSFlow (Li et al., ASPLOS 2022) as re-implemented by the CLASP authors: a worker's
//! capacity is its executor slots, nothing else.
//!
//! - **Worker count**: ⌈target rate / per-worker rate⌉, the per-worker rate being the mean
//!   throughput per worker over recent saturated observations
//!   ([`ObservedStats::saturated_per_worker_rate`]). It extrapolates linearly from what the
//!   workers did, so it cannot see that more workers send more chained requests remotely.
//!   Without saturated observations the per-worker rate is the slot capacity: `slots` busy
//!   executors divided by the execution time one input request causes, Σ_o N_o·τ̄_o / Λ.
//! - **Sizes**: the work needed, ⌈slots · target / per-worker rate⌉ slot units (at most all
//!   the slots of the workers given; all of them without a per-worker rate), is split among
//!   operators by their processed-tuple ratios N_o / Σ N with largest-remainder rounding. With
//!   the default 10 slots a unit is 0.1 worker.
//! - **Grouping**: the reference re-implementation's greedy, not the original paper's
//!   critical-path grouping: operator-to-operator edges are visited by descending observed
//!   chained-call rate and their two groups merged whenever the merged size fits one worker.
//! - **Packing**: groups (an operator bigger than a worker is first cut into whole-worker
//!   pieces and a remainder) go first-fit decreasing onto the workers' slots; a piece that
//!   fits no single worker is split over the workers with the most free slots, so no worker
//!   gets more units than slots. Workers left idle join the largest group, which is then
//!   split evenly over its workers and them.
//!
//! Instances are slot units: an operator runs as many instances on a worker as it has units
//! there, at least one.

use super::{Observed, Slice, build_placement, clamp_workers, finite_non_negative};
use crate::keys::largest_remainder;
use clasp_core::placement::Placement;
use clasp_core::stats::ObservedStats;
use clasp_core::{OperatorId, Pipeline, WorkerId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// FaaSFlow's settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Executor slots per worker, the unit of capacity (default 10: 0.1-worker units).
    pub slots: u32,
    /// Most workers the policy may use (default 10).
    pub max_workers: u32,
}

impl Default for Config {
    fn default() -> Self {
        Self { slots: 10, max_workers: 10 }
    }
}

/// Input requests per second one worker is taken to sustain: the observed saturated
/// per-worker rate, else the slot capacity (module docs); `None` when neither is known.
pub fn per_worker_rate(p: &Pipeline, stats: &ObservedStats, cfg: &Config) -> Option<f64> {
    if let Some(r) = stats.saturated_per_worker_rate.filter(|r| r.is_finite() && *r > 0.0) {
        return Some(r);
    }
    let observed = Observed::new(p, stats, 1.0);
    let input =
        [stats.throughput, stats.input_rate].into_iter().find(|r| r.is_finite() && *r > 0.0)?;
    let busy: f64 = observed.processed.iter().zip(&observed.exec_us).map(|(n, t)| n * t).sum();
    let per_request_us = busy / input;
    (per_request_us > 0.0).then(|| f64::from(cfg.slots.max(1)) * 1e6 / per_request_us)
}

/// ⌈target rate / per-worker rate⌉ within `1..=max_workers` (1 when nothing is known).
pub fn worker_count(p: &Pipeline, stats: &ObservedStats, target_rate: f64, cfg: &Config) -> u32 {
    per_worker_rate(p, stats, cfg)
        .map_or(1, |r| clamp_workers(finite_non_negative(target_rate) / r, cfg.max_workers))
}

/// Slot units of every operator on `workers` workers (module docs), indexed by operator.
pub fn operator_units(
    p: &Pipeline,
    stats: &ObservedStats,
    target_rate: f64,
    workers: u32,
    cfg: &Config,
) -> Vec<u32> {
    let slots = cfg.slots.max(1);
    let all = workers.max(1).saturating_mul(slots);
    let needed = per_worker_rate(p, stats, cfg)
        .map(|r| (f64::from(slots) * finite_non_negative(target_rate) / r).ceil());
    let total = needed.map_or(all, |u| if u < f64::from(all) { (u as u32).max(1) } else { all });
    let observed = Observed::new(p, stats, target_rate);
    largest_remainder(&observed.processed, total)
}

/// Operators merged into groups that each fit one worker, along edges by descending observed
/// chained-call rate (ties: lower producer, then consumer id). Groups are returned by their
/// lowest operator, each with its operators ascending and its total units.
pub fn merge_groups(
    p: &Pipeline,
    stats: &ObservedStats,
    units: &[u32],
    slots: u32,
) -> Vec<(Vec<OperatorId>, u32)> {
    let n = p.operators.len();
    // One entry per operator pair, however many streams join them (edge_rate sums them).
    let pairs: BTreeSet<(OperatorId, OperatorId)> =
        p.operators.iter().flat_map(|q| p.successors(q.id).map(move |o| (q.id, o))).collect();
    let mut edges: Vec<(f64, OperatorId, OperatorId)> = pairs
        .into_iter()
        .map(|(q, o)| (finite_non_negative(stats.edge_rate(p, q, o)), q, o))
        .collect();
    edges.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut root: Vec<usize> = (0..n).collect();
    let mut size: Vec<u32> = units.to_vec();
    for (_, q, o) in edges {
        let (a, b) = (find(&mut root, q.index()), find(&mut root, o.index()));
        if a != b && size[a] + size[b] <= slots {
            // The lower root survives, so group identity does not depend on merge order.
            let (keep, gone) = (a.min(b), a.max(b));
            root[gone] = keep;
            size[keep] += size[gone];
        }
    }
    let mut groups: BTreeMap<usize, Vec<OperatorId>> = BTreeMap::new();
    for o in 0..n {
        groups.entry(find(&mut root, o)).or_default().push(OperatorId::from(o));
    }
    groups.into_iter().map(|(r, ops)| (ops, size[r])).collect()
}

/// Union-find root with path halving.
fn find(root: &mut [usize], mut x: usize) -> usize {
    while root[x] != x {
        root[x] = root[root[x]];
        x = root[x];
    }
    x
}

/// Where each group landed: per group, its slot units on each worker.
type Landing = Vec<BTreeMap<WorkerId, u32>>;

/// First-fit decreasing of the groups' pieces onto `workers` workers of `slots` units.
fn pack(groups: &[(Vec<OperatorId>, u32)], workers: u32, slots: u32) -> Landing {
    // (units, group, piece): whole-worker pieces of oversized single operators first.
    let mut pieces: Vec<(u32, usize, u32)> = Vec::new();
    for (g, (_, units)) in groups.iter().enumerate() {
        let (whole, rest) =
            if *units > slots { (units / slots, units % slots) } else { (0, *units) };
        pieces.extend((0..whole).map(|i| (slots, g, i)));
        if rest > 0 || whole == 0 {
            pieces.push((rest, g, whole));
        }
    }
    pieces.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    let mut free: Vec<i64> = vec![i64::from(slots); workers as usize];
    let mut landing: Landing = vec![BTreeMap::new(); groups.len()];
    for (units, g, _) in pieces {
        if let Some(w) = free.iter().position(|f| *f >= i64::from(units)) {
            free[w] -= i64::from(units);
            *landing[g].entry(WorkerId::from(w)).or_default() += units;
            continue;
        }
        // The total never exceeds the slots of all workers, so splitting always finds room;
        // the last step only guards against a caller passing more units than that.
        let mut need = i64::from(units);
        while need > 0 {
            let w = most_free(&free);
            let take = if free[w] > 0 { need.min(free[w]) } else { need };
            free[w] -= take;
            need -= take;
            *landing[g].entry(WorkerId::from(w)).or_default() += take as u32;
        }
    }
    landing
}

/// The worker with the most free units, the lowest among equals.
fn most_free(free: &[i64]) -> usize {
    let best = free.iter().copied().max().unwrap_or(0);
    free.iter().position(|f| *f == best).unwrap_or(0)
}

/// FaaSFlow's placement on `workers` workers (module docs).
pub fn place(
    p: &Pipeline,
    stats: &ObservedStats,
    target_rate: f64,
    workers: u32,
    cfg: &Config,
) -> Placement {
    let workers = workers.max(1);
    let slots = cfg.slots.max(1);
    let units = operator_units(p, stats, target_rate, workers, cfg);
    let groups = merge_groups(p, stats, &units, slots);
    let mut landing = pack(&groups, workers, slots);
    let spread = join_idle(&groups, &mut landing, workers);
    let mut slices = vec![Vec::new(); p.operators.len()];
    for (g, (ops, _)) in groups.iter().enumerate() {
        for &o in ops {
            slices[o.index()] = if spread == Some(g) {
                even_slices(&landing[g], units[o.index()])
            } else {
                group_slices(&landing[g], units[o.index()])
            };
        }
    }
    build_placement(p, &Observed::new(p, stats, target_rate), workers, slices)
}

/// Adds the workers no group landed on to the largest group (the lower index among equals)
/// and returns that group, to be split evenly; `None` when no worker is idle.
fn join_idle(
    groups: &[(Vec<OperatorId>, u32)],
    landing: &mut Landing,
    workers: u32,
) -> Option<usize> {
    let idle: Vec<WorkerId> =
        (0..workers).map(WorkerId).filter(|w| landing.iter().all(|l| !l.contains_key(w))).collect();
    if idle.is_empty() {
        return None;
    }
    let largest =
        (0..groups.len()).max_by(|&a, &b| groups[a].1.cmp(&groups[b].1).then(b.cmp(&a)))?;
    landing[largest].extend(idle.into_iter().map(|w| (w, 0)));
    Some(largest)
}

/// An operator of a group that was packed as it is. A group on one worker runs there whole;
/// a group cut into pieces has the same fraction of each of its operators on a worker as of
/// its units, and each operator's units split in that proportion.
fn group_slices(landing: &BTreeMap<WorkerId, u32>, units: u32) -> Vec<Slice> {
    if landing.len() <= 1 {
        let w = *landing.keys().next().unwrap_or(&WorkerId(0));
        return vec![Slice { worker: w, weight: 1.0, instances: units.max(1) }];
    }
    let weights: Vec<f64> = landing.values().map(|u| f64::from(*u)).collect();
    landing
        .keys()
        .zip(&weights)
        .zip(largest_remainder(&weights, units))
        .map(|((w, weight), u)| Slice { worker: *w, weight: *weight, instances: u.max(1) })
        .collect()
}

/// An operator of the group idle workers joined: the same fraction on every worker, its
/// units split as evenly as whole instances allow.
fn even_slices(landing: &BTreeMap<WorkerId, u32>, units: u32) -> Vec<Slice> {
    let split = largest_remainder(&vec![1.0; landing.len()], units);
    landing
        .keys()
        .zip(split)
        .map(|(w, u)| Slice { worker: *w, weight: 1.0, instances: u.max(1) })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::pipeline;
    use clasp_core::rng::SeededRng;
    use clasp_core::stats::{EdgeStats, OperatorStats};
    use rand::SeedableRng;

    const CHAIN: &str = r#"
[[source]]
name = "in"
[[operator]]
name = "a"
kind = "flatmap"
[[operator]]
name = "b"
kind = "map"
[[operator]]
name = "c"
kind = "reduce"
stateful = true
key = "k"
[[stream]]
from = "in"
to = "a"
[[stream]]
from = "a"
to = "b"
[[stream]]
from = "b"
to = "c"
"#;

    /// a, b and c each process 100/s at Λ = 100/s, 1 ms each; chained-call rates as given.
    fn chain_stats(ab: f64, bc: f64, saturated: Option<f64>) -> ObservedStats {
        let op = |name: &str| OperatorStats {
            name: name.into(),
            processed_rate: 100.0,
            exec_time_us: 1000.0,
            ..OperatorStats::default()
        };
        let edge = |from: &str, to: &str, rate| EdgeStats {
            from: from.into(),
            to: to.into(),
            rate,
            ..EdgeStats::default()
        };
        ObservedStats {
            throughput: 100.0,
            input_rate: 100.0,
            operators: vec![op("a"), op("b"), op("c")],
            edges: vec![edge("a", "b", ab), edge("b", "c", bc)],
            saturated_per_worker_rate: saturated,
            ..ObservedStats::default()
        }
    }

    /// (worker, instances) of each share of operator `o`.
    fn on(placement: &Placement, o: usize) -> Vec<(u32, u32)> {
        placement.operators[o].shares.iter().map(|s| (s.worker.0, s.instances)).collect()
    }

    #[test]
    fn count_is_rate_over_saturated_per_worker_rate() {
        let p = pipeline(CHAIN);
        let cfg = Config::default();
        let stats = chain_stats(100.0, 100.0, Some(1000.0));
        assert_eq!(worker_count(&p, &stats, 1000.0, &cfg), 1);
        assert_eq!(worker_count(&p, &stats, 1001.0, &cfg), 2);
        assert_eq!(worker_count(&p, &stats, 4500.0, &cfg), 5);
        assert_eq!(worker_count(&p, &stats, 1e9, &cfg), 10);
        assert_eq!(worker_count(&p, &stats, 0.0, &cfg), 1);
    }

    #[test]
    fn count_ignores_chained_request_rates() {
        let p = pipeline(CHAIN);
        let cfg = Config::default();
        for saturated in [Some(700.0), None] {
            let quiet = chain_stats(100.0, 100.0, saturated);
            let chatty = chain_stats(10_000.0, 10_000.0, saturated);
            for rate in [500.0, 2000.0, 6000.0] {
                assert_eq!(
                    worker_count(&p, &quiet, rate, &cfg),
                    worker_count(&p, &chatty, rate, &cfg)
                );
            }
            assert_eq!(place(&p, &quiet, 2000.0, 3, &cfg), place(&p, &chatty, 2000.0, 3, &cfg));
        }
    }

    #[test]
    fn without_saturation_capacity_is_slots_over_execution_time() {
        let p = pipeline(CHAIN);
        // One input request costs 3 × 1 ms of execution; 10 slots sustain 10 / 3 ms.
        let stats = chain_stats(100.0, 100.0, None);
        let r = per_worker_rate(&p, &stats, &Config::default()).unwrap();
        assert!((r - 10.0 * 1e6 / 3000.0).abs() < 1e-9);
        assert_eq!(worker_count(&p, &stats, 10_000.0, &Config::default()), 3);
    }

    #[test]
    fn heaviest_edges_are_grouped_first() {
        let p = pipeline(CHAIN);
        let cfg = Config::default();
        // 1.2 workers of work: 12 units, 4 per operator; a+b fits a worker, a+b+c does not.
        let heavy_ab = chain_stats(1000.0, 10.0, Some(1000.0));
        assert_eq!(operator_units(&p, &heavy_ab, 1200.0, 2, &cfg), [4, 4, 4]);
        assert_eq!(worker_count(&p, &heavy_ab, 1200.0, &cfg), 2);
        let placement = place(&p, &heavy_ab, 1200.0, 2, &cfg);
        assert!(placement.check(&p).is_ok());
        assert_eq!(
            [on(&placement, 0), on(&placement, 1), on(&placement, 2)],
            [vec![(0, 4)], vec![(0, 4)], vec![(1, 4)]]
        );
        let heavy_bc = chain_stats(10.0, 1000.0, Some(1000.0));
        let placement = place(&p, &heavy_bc, 1200.0, 2, &cfg);
        assert_eq!(
            [on(&placement, 0), on(&placement, 1), on(&placement, 2)],
            [vec![(1, 4)], vec![(0, 4)], vec![(0, 4)]]
        );
    }

    #[test]
    fn idle_workers_join_the_largest_group() {
        let p = pipeline(CHAIN);
        let stats = chain_stats(1000.0, 10.0, Some(1000.0));
        // Still 12 units of work on 4 workers: {a, b} (8) on w0, {c} (4) on w1; w2 and w3
        // join {a, b}, whose operators are then split evenly over w0, w2, w3.
        let placement = place(&p, &stats, 1200.0, 4, &Config::default());
        assert!(placement.check(&p).is_ok());
        for o in 0..2 {
            assert_eq!(on(&placement, o), [(0, 2), (2, 1), (3, 1)]);
            assert!(
                placement.operators[o]
                    .shares
                    .iter()
                    .all(|s| (s.fraction - 1.0 / 3.0).abs() < 1e-12)
            );
        }
        assert_eq!(on(&placement, 2), [(1, 4)]);
    }

    #[test]
    fn an_operator_bigger_than_a_worker_is_cut_into_whole_workers() {
        let p = pipeline(CHAIN);
        let mut stats = chain_stats(1.0, 1.0, Some(1000.0));
        stats.operators[0].processed_rate = 2300.0;
        stats.operators[1].processed_rate = 0.0;
        stats.operators[2].processed_rate = 0.0;
        // 3 workers' worth: a gets all 30 units, cut into three whole workers; b and c, with
        // no tuples, cannot join a (30 > 10) but merge with each other and land on w0.
        let placement = place(&p, &stats, 3000.0, 3, &Config::default());
        assert!(placement.check(&p).is_ok());
        assert_eq!(on(&placement, 0), [(0, 10), (1, 10), (2, 10)]);
        assert_eq!(on(&placement, 1), on(&placement, 2));
        // 23 units: pieces 10, 10, 3; the rest of the third worker is free.
        let placement = place(&p, &stats, 2300.0, 3, &Config::default());
        assert_eq!(on(&placement, 0), [(0, 10), (1, 10), (2, 3)]);
        let f: Vec<f64> = placement.operators[0].shares.iter().map(|s| s.fraction).collect();
        assert_eq!(f, [10.0 / 23.0, 10.0 / 23.0, 3.0 / 23.0]);
    }

    #[test]
    fn no_worker_runs_more_units_than_slots() {
        let p = pipeline(CHAIN);
        let cfg = Config::default();
        // Uneven sizes (e.g. 17 + 17 + 16 units on 5 workers) leave pieces that fit no single
        // worker; they are split instead of over-committing one.
        for (ab, bc, per_worker) in [(50.0, 40.0, 300.0), (5.0, 900.0, 170.0), (1.0, 1.0, 90.0)] {
            let stats = chain_stats(ab, bc, Some(per_worker));
            for rate in (1..60).map(|i| f64::from(i) * 50.0) {
                let w = worker_count(&p, &stats, rate, &cfg);
                let placement = place(&p, &stats, rate, w, &cfg);
                assert!(placement.check(&p).is_ok());
                for worker in 0..w {
                    let used: u32 = placement
                        .operators
                        .iter()
                        .flat_map(|o| &o.shares)
                        .filter(|s| s.worker.0 == worker)
                        .map(|s| s.instances)
                        .sum();
                    assert!(used <= cfg.slots, "worker {worker} runs {used} units at {rate}/s");
                }
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 200, rng_seed: proptest::test_runner::RngSeed::Fixed(13), ..proptest::prelude::ProptestConfig::default() })]

        /// Units split exactly, groups fit a worker unless a single operator, and every unit
        /// lands on a worker within its slots.
        #[test]
        fn sizes_groups_and_packing_are_consistent(
            seed in proptest::prelude::any::<u64>(), ops in 1usize..10, workers in 1u32..8,
            rate in 1.0f64..30_000.0,
        ) {
            let mut rng = SeededRng::seed_from_u64(seed);
            let p = crate::testing::random_pipeline(&mut rng, ops, 0.3);
            let stats = crate::testing::random_stats(&mut rng, &p);
            let cfg = Config::default();
            let units = operator_units(&p, &stats, rate, workers, &cfg);
            let total: u32 = units.iter().sum();
            proptest::prop_assert!(total <= workers * cfg.slots);
            let groups = merge_groups(&p, &stats, &units, cfg.slots);
            let mut seen: Vec<OperatorId> = groups.iter().flat_map(|g| g.0.clone()).collect();
            seen.sort();
            proptest::prop_assert_eq!(seen, p.operators.iter().map(|o| o.id).collect::<Vec<_>>());
            for (ops, size) in &groups {
                proptest::prop_assert_eq!(*size, ops.iter().map(|o| units[o.index()]).sum::<u32>());
                proptest::prop_assert!(*size <= cfg.slots || ops.len() == 1);
            }
            let landing = pack(&groups, workers, cfg.slots);
            let mut used = vec![0u32; workers as usize];
            for ((_, size), l) in groups.iter().zip(&landing) {
                proptest::prop_assert_eq!(l.values().sum::<u32>(), *size);
                for (w, u) in l {
                    used[w.index()] += u;
                }
            }
            proptest::prop_assert!(used.iter().all(|u| *u <= cfg.slots), "{:?}", used);
        }
    }
}
