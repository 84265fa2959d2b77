//! DS2 (Kalavri et al., OSDI 2018): each operator's *true* processing rate is what one
//! instance processes per second of *useful* time, 10⁶/B_o for a busy (useful) time B_o per
//! request; target rates flow from the source target rate through the observed selectivities
//! in topological order; each operator gets ⌈target / true rate⌉ instances, and the workers are
//! the slots those instances need. It sizes operators from their busy time alone: the cost of
//! dispatching chained requests is in no term.
//!
//! Useful time is wall-clock time on the instance, which on a worker whose slots share its CPU
//! is longer than the execution time the statistics report: [`super::busy`] reconstructs it
//! (on saturated workers, where every instance is busy) and docs/model-notes.md explains why
//! taking the execution time for it made DS2 ask for one or two workers at any rate.
//!
//! Placement: the instances, in topological operator order, are laid out over the workers in
//! contiguous runs of ⌊total/W⌋ or ⌈total/W⌉ (instance `i` on worker ⌊i·W/total⌋). This is
//! Flink's default of filling a task manager's slots before the next one, balanced so that
//! no worker is left empty when there are at least as many instances as workers; neighbours
//! in the topological order tend to share a worker.

use super::busy::busy_times;
use super::{Observed, Slice, build_placement, clamp_workers};
use clasp_core::placement::Placement;
use clasp_core::stats::ObservedStats;
use clasp_core::{Endpoint, OperatorId, Pipeline, WorkerId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// DS2's settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Executor slots per worker (default 10, as in the CLASP reference implementation).
    pub slots: u32,
    /// Most workers the policy may use (default 10).
    pub max_workers: u32,
}

impl Default for Config {
    fn default() -> Self {
        Self { slots: 10, max_workers: 10 }
    }
}

/// Requests per second one instance of an operator processes when busy all the time:
/// 10⁶ / B_o for a busy time B_o per request (infinite when none was observed).
pub fn true_rate(busy_us: f64) -> f64 {
    if busy_us > 0.0 { 1e6 / busy_us } else { f64::INFINITY }
}

/// Target processed rate of every operator (requests/s), indexed by operator.
///
/// In topological order: the part of an operator's observed input that came from sources is
/// projected by s = λ_p / Λ; each operator input adds the producer's target rate times the
/// edge's observed selectivity E_{q→o} / N_q (the producer's spec selectivity when it
/// processed nothing). An operator with an observed rate but no observed input edge is
/// projected by s directly.
pub fn target_rates(p: &Pipeline, stats: &ObservedStats, target_rate: f64) -> Vec<f64> {
    let observed = Observed::new(p, stats, target_rate);
    let mut target = vec![0.0; p.operators.len()];
    for &o in p.topological_order() {
        let producers: BTreeSet<OperatorId> = p.predecessors(o).collect();
        let from_ops: f64 =
            producers.iter().map(|&q| super::finite_non_negative(stats.edge_rate(p, q, o))).sum();
        let n = observed.processed[o.index()];
        let fed_by_source =
            p.inputs(o).iter().any(|s| matches!(p.stream(*s).from, Endpoint::Source(_)));
        if from_ops == 0.0 && n > 0.0 {
            target[o.index()] = observed.scale * n;
            continue;
        }
        let from_sources = if fed_by_source { (n - from_ops).max(0.0) } else { 0.0 };
        let downstream: f64 = producers
            .iter()
            .map(|&q| selectivity(p, stats, &observed, q, o) * target[q.index()])
            .sum();
        target[o.index()] = observed.scale * from_sources + downstream;
    }
    target
}

/// Chained requests on `q → o` per request `q` processes.
fn selectivity(
    p: &Pipeline,
    stats: &ObservedStats,
    observed: &Observed,
    q: OperatorId,
    o: OperatorId,
) -> f64 {
    let n = observed.processed[q.index()];
    if n > 0.0 {
        super::finite_non_negative(stats.edge_rate(p, q, o)) / n
    } else {
        p.operator(q).selectivity_or_default()
    }
}

/// Instances of every operator: ⌈target rate / true rate⌉, at least 1 and at most every
/// slot of the largest cluster allowed (`max_workers × slots`; more could not run at once,
/// and an unreachable target rate must not ask for billions). `current` is the placement the
/// statistics were observed under (its instances tell how many slots of a saturated worker
/// were busy).
pub fn parallelism(
    p: &Pipeline,
    stats: &ObservedStats,
    target_rate: f64,
    current: Option<&Placement>,
    cfg: &Config,
) -> Vec<u32> {
    let cap = cfg.max_workers.max(1).saturating_mul(cfg.slots.max(1));
    let busy = busy_times(p, stats, current);
    target_rates(p, stats, target_rate)
        .iter()
        .zip(&busy)
        .map(|(target, b)| instances_for(*target / true_rate(b.per_request_us()), cap))
        .collect()
}

/// ⌈x⌉ within `1..=cap`, forgiving the last bits of float error on whole numbers.
fn instances_for(x: f64, cap: u32) -> u32 {
    if x.is_finite() && x > 1.0 { (x - 1e-9).ceil().min(f64::from(cap.max(1))) as u32 } else { 1 }
}

/// ⌈Σ_o P_o / slots⌉ workers, within `1..=max_workers`.
pub fn worker_count(
    p: &Pipeline,
    stats: &ObservedStats,
    target_rate: f64,
    current: Option<&Placement>,
    cfg: &Config,
) -> u32 {
    let total: f64 =
        parallelism(p, stats, target_rate, current, cfg).iter().map(|&x| f64::from(x)).sum();
    clamp_workers(total / f64::from(cfg.slots.max(1)), cfg.max_workers)
}

/// DS2's instances laid out over `workers` workers in balanced contiguous runs (module docs).
pub fn place(
    p: &Pipeline,
    stats: &ObservedStats,
    target_rate: f64,
    workers: u32,
    current: Option<&Placement>,
    cfg: &Config,
) -> Placement {
    let workers = workers.max(1);
    let observed = Observed::new(p, stats, target_rate);
    let instances = parallelism(p, stats, target_rate, current, cfg);
    let total: u64 = instances.iter().map(|&x| u64::from(x)).sum();
    let mut slices = vec![Vec::new(); p.operators.len()];
    let mut next = 0u64;
    for &o in p.topological_order() {
        let mut mine: Vec<Slice> = Vec::new();
        for _ in 0..instances[o.index()] {
            let w = WorkerId((next * u64::from(workers) / total) as u32);
            next += 1;
            match mine.last_mut() {
                Some(s) if s.worker == w => s.instances += 1,
                _ => mine.push(Slice { worker: w, weight: 0.0, instances: 1 }),
            }
        }
        for s in &mut mine {
            // Stateless routing and key groups follow the instances.
            s.weight = f64::from(s.instances);
        }
        slices[o.index()] = mine;
    }
    build_placement(p, &observed, workers, slices)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::pipeline;
    use clasp_core::rng::SeededRng;
    use clasp_core::stats::{EdgeStats, OperatorStats};
    use rand::SeedableRng;

    const DIAMOND: &str = r#"
[[source]]
name = "in"
[[operator]]
name = "a"
kind = "flatmap"
[[operator]]
name = "b"
kind = "filter"
[[operator]]
name = "c"
kind = "map"
[[operator]]
name = "d"
kind = "union"
[[stream]]
from = "in"
to = "a"
[[stream]]
from = "a"
to = "b"
[[stream]]
from = "a"
to = "c"
[[stream]]
from = "b"
to = "d"
[[stream]]
from = "c"
to = "d"
"#;

    fn op(name: &str, rate: f64, exec: f64) -> OperatorStats {
        OperatorStats {
            name: name.into(),
            processed_rate: rate,
            exec_time_us: exec,
            ..OperatorStats::default()
        }
    }

    fn edge(from: &str, to: &str, rate: f64) -> EdgeStats {
        EdgeStats { from: from.into(), to: to.into(), rate, ..EdgeStats::default() }
    }

    /// Observed at Λ = 100/s: a emits 3 per request to b and 1 to c; b passes half on.
    fn diamond_stats(scale: f64) -> ObservedStats {
        ObservedStats {
            throughput: 100.0 * scale,
            input_rate: 100.0 * scale,
            operators: vec![
                op("a", 100.0 * scale, 1000.0),
                op("b", 300.0 * scale, 500.0),
                op("c", 100.0 * scale, 250.0),
                op("d", 250.0 * scale, 100.0),
            ],
            edges: vec![
                edge("a", "b", 300.0 * scale),
                edge("a", "c", 100.0 * scale),
                edge("b", "d", 150.0 * scale),
                edge("c", "d", 100.0 * scale),
            ],
            ..ObservedStats::default()
        }
    }

    #[test]
    fn each_operator_scales_from_its_true_rate() {
        let p = pipeline(DIAMOND);
        let stats = diamond_stats(1.0);
        // Target 2500/s: a 2500, b 3·2500 = 7500, c 2500, d 0.5·7500 + 2500 = 6250.
        let t = target_rates(&p, &stats, 2500.0);
        assert_eq!(t, [2500.0, 7500.0, 2500.0, 6250.0]);
        // True rates 10⁶/τ: a 1000, b 2000, c 4000, d 10000 → ⌈2.5⌉, ⌈3.75⌉, ⌈0.625⌉, ⌈0.625⌉.
        assert_eq!(parallelism(&p, &stats, 2500.0, None, &Config::default()), [3, 4, 1, 1]);
        // An unreachable rate asks for every slot of the largest cluster, no more.
        assert_eq!(parallelism(&p, &stats, 2e9, None, &Config::default()), [100; 4]);
        let cfg = Config { slots: 2, max_workers: 10 };
        assert_eq!(worker_count(&p, &stats, 2500.0, None, &cfg), 5); // ⌈9 / 2⌉
        assert_eq!(worker_count(&p, &stats, 2500.0, None, &Config::default()), 1);
    }

    #[test]
    fn the_decision_does_not_depend_on_the_observed_rate() {
        // DS2 is linear: observing at 10× the rate gives the same plan for the same target.
        let p = pipeline(DIAMOND);
        for target in [50.0, 900.0, 4321.0] {
            let cfg = Config::default();
            assert_eq!(
                parallelism(&p, &diamond_stats(1.0), target, None, &cfg),
                parallelism(&p, &diamond_stats(10.0), target, None, &cfg)
            );
        }
    }

    #[test]
    fn an_unobserved_producer_uses_its_spec_selectivity() {
        let p = pipeline(DIAMOND);
        let mut stats = diamond_stats(1.0);
        stats.operators[1].processed_rate = 0.0;
        // b's selectivity falls back to the filter default (1): d = 7500 + 2500.
        assert_eq!(target_rates(&p, &stats, 2500.0)[3], 10_000.0);
    }

    #[test]
    fn instances_fill_workers_in_balanced_contiguous_runs() {
        let p = pipeline(DIAMOND);
        let stats = diamond_stats(1.0);
        // Instances [3, 4, 1, 1] = 9 over 2 workers, instance i on ⌊2i/9⌋: instances 0–4
        // (a a a b b) on w0, 5–8 (b b c d) on w1.
        let placement = place(&p, &stats, 2500.0, 2, None, &Config::default());
        assert!(placement.check(&p).is_ok());
        let on = |o: usize| -> Vec<(u32, u32)> {
            placement.operators[o].shares.iter().map(|s| (s.worker.0, s.instances)).collect()
        };
        assert_eq!(on(0), [(0, 3)]);
        assert_eq!(on(1), [(0, 2), (1, 2)]);
        assert_eq!(on(2), [(1, 1)]);
        assert_eq!(on(3), [(1, 1)]);
        assert_eq!(placement.operators[1].shares[0].fraction, 0.5);
        // Demand is the projected N·τ: b at 7500/s × 500 µs.
        assert_eq!(placement.operators[1].demand, 3_750_000.0);
    }

    /// WC observed on one saturated worker of 10 slots: split 1 instance, count 9, at
    /// Λ = 850,000 / 4,400 ≈ 193 lines/s (400 µs per split and per word count, W̄ all used).
    /// Every instance is busy all the time, so DS2's true rate is the rate per instance: twice
    /// the rate needs twice the instances, 2 splits and 18 counts, two workers. Taking the
    /// 400 µs for the busy time, DS2 would stay on one.
    #[test]
    fn a_saturated_worker_scales_out_by_its_rate_per_instance() {
        let path =
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../pipelines/wc.toml");
        let p = clasp_core::spec::load(&path).unwrap();
        let lambda = 850_000.0 / 4_400.0;
        let row = |name: &str, rate: f64| clasp_core::stats::WorkerOperatorStats {
            name: name.into(),
            processed_rate: rate,
            exec_time_us: 400.0,
        };
        let stats = ObservedStats {
            throughput: lambda,
            input_rate: lambda,
            operators: vec![op("split", lambda, 400.0), op("count", 10.0 * lambda, 400.0)],
            edges: vec![edge("split", "count", 10.0 * lambda)],
            workers: vec![clasp_core::stats::WorkerStats {
                slots: 10,
                exec_load: 850_000.0,
                saturated: true,
                operators: vec![row("split", lambda), row("count", 10.0 * lambda)],
                ..clasp_core::stats::WorkerStats::default()
            }],
            ..ObservedStats::default()
        };
        let current = Placement::single_worker(&p, &[1, 9]);
        let cfg = Config::default();
        // ⌈2Λ / (Λ/1)⌉ and ⌈20Λ / (10Λ/9)⌉.
        assert_eq!(parallelism(&p, &stats, 2.0 * lambda, Some(&current), &cfg), [2, 18]);
        assert_eq!(worker_count(&p, &stats, 2.0 * lambda, Some(&current), &cfg), 2);
        // Without the placement all 10 slots count as busy, shared by execution time: each
        // request holds one 400 µs · 10 · 10⁶ / 850,000.
        let busy = 400.0 * 10.0 * 1e6 / 850_000.0;
        let want = [(2.0 * lambda * busy / 1e6).ceil(), (20.0 * lambda * busy / 1e6).ceil()];
        assert_eq!(want, [2.0, 19.0]);
        let got = parallelism(&p, &stats, 2.0 * lambda, None, &cfg);
        assert_eq!(got, want.map(|x| x as u32));
        assert_eq!(worker_count(&p, &stats, 2.0 * lambda, None, &cfg), 3);
        // The same worker unsaturated: its execution time is its busy time.
        let mut idle = stats.clone();
        idle.workers[0].saturated = false;
        assert_eq!(parallelism(&p, &idle, 2.0 * lambda, Some(&current), &cfg), [1, 2]);
        assert_eq!(worker_count(&p, &idle, 2.0 * lambda, Some(&current), &cfg), 1);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 200, rng_seed: proptest::test_runner::RngSeed::Fixed(9), ..proptest::prelude::ProptestConfig::default() })]

        /// On consistent observations (every edge rate = producer rate × selectivity, every
        /// processed rate = the sum of its inputs) propagation is the same as scaling every
        /// observed rate by λ_p / Λ.
        #[test]
        fn propagation_equals_projection_on_consistent_rates(
            seed in proptest::prelude::any::<u64>(), ops in 1usize..10, target in 1.0f64..50_000.0,
        ) {
            let mut rng = SeededRng::seed_from_u64(seed);
            let p = crate::testing::random_pipeline(&mut rng, ops, 0.3);
            let stats = ObservedStats::from_spec(&p, target, 100.0);
            let s = target / stats.throughput;
            let t = target_rates(&p, &stats, target);
            for (o, got) in stats.operators.iter().zip(&t) {
                let want = s * o.processed_rate;
                proptest::prop_assert!((got - want).abs() <= 1e-9 * want.max(1.0), "{} {}", got, want);
            }
        }
    }
}
