//! Invariants of every CLASP decision on seeded random pipelines, coefficients and rates,
//! checked against references computed here from the statistics (not from the planner's own
//! bookkeeping): demands recomputed from Eq. 5–7, loads from Eq. 8, instance totals from
//! Eq. 10–11.

use clasp_core::Pipeline;
use clasp_core::stats::{Coefficients, ObservedStats};
use clasp_plan::order::is_reverse_topological;
use clasp_plan::parallelism::{operator_instances, total_instances};
use clasp_plan::synthetic::RandomDag;
use clasp_plan::{Decision, PackingVariant, PlanConfig, PlanInput, Policy, placement_loads};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;

#[derive(Clone, Debug)]
struct Case {
    dag: RandomDag,
    coefficients: Coefficients,
    rate_factor: f64,
    max_workers: u32,
    variant: PackingVariant,
}

fn case() -> impl Strategy<Value = Case> {
    (
        (2usize..30, any::<u64>()),
        (0.0f64..100.0, 1.0f64..10.0, 0.0f64..60_000.0, 500_000.0f64..1_000_000.0),
        (0.01f64..20.0, 1u32..60, any::<bool>()),
    )
        .prop_map(
            |((ops, seed), (alpha, beta_x, gamma, w), (rate_factor, max_workers, aff))| Case {
                dag: RandomDag::new(ops, seed),
                coefficients: Coefficients { alpha, beta: alpha * beta_x, gamma, capacity: w },
                rate_factor,
                max_workers,
                variant: if aff { PackingVariant::Affinity } else { PackingVariant::NextFit },
            },
        )
}

fn decide(c: &Case) -> (Pipeline, ObservedStats, PlanConfig, Decision) {
    let p = c.dag.pipeline();
    let stats = ObservedStats::from_spec(&p, 1000.0, 400.0);
    let cfg =
        PlanConfig { max_workers: c.max_workers, packing: c.variant, ..PlanConfig::default() };
    let d = {
        let input = PlanInput {
            pipeline: &p,
            stats: &stats,
            target_rate: stats.throughput * c.rate_factor,
            coefficients: c.coefficients,
            config: &cfg,
            current: None,
        };
        Policy::Clasp.decide(&input).unwrap()
    };
    (p, stats, cfg, d)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 192,
        rng_seed: RngSeed::Fixed(0xC1A5),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_decision_is_complete_and_within_budget(c in case()) {
        let (p, stats, cfg, d) = decide(&c);
        prop_assert!(d.placement.check(&p).is_ok(), "{:?}", d.placement.check(&p));
        prop_assert!(is_reverse_topological(&p, &d.order));
        prop_assert!(d.workers >= 1 && d.workers <= c.max_workers);
        prop_assert!(d.target_rate <= d.requested_rate && d.limited == (d.target_rate < d.requested_rate));
        let s = d.target_rate / stats.throughput;
        let budget = cfg.headroom * c.coefficients.capacity;

        // Every operator's projected demand (Eq. 5–7, from the statistics) is fully placed.
        let mut total = 0.0;
        for (op, st) in d.placement.operators.iter().zip(&stats.operators) {
            let demand = s * st.processed_rate * st.exec_time_us;
            let placed: f64 = op.shares.iter().map(|x| x.share).sum();
            prop_assert!((placed - demand).abs() <= 1e-9 * demand.max(1.0), "{} vs {}", placed, demand);
            prop_assert!(op.shares.iter().all(|x| x.share >= 0.0 && x.fraction > 0.0));
            total += demand;
        }
        // Eq. 8 loads, recomputed from the placement alone, are within the budget.
        let proj = clasp_plan::Projection::new(&p, &stats, d.target_rate.max(1e-300), 400.0, 1).unwrap();
        let loads = placement_loads(&proj, &d.placement, &c.coefficients, budget);
        for l in &loads {
            prop_assert!(l.load <= budget * (1.0 + 1e-9), "worker {} load {} > {}", l.worker, l.load, budget);
        }
        prop_assert_eq!(loads.len() as u32, d.workers);
        // Execution demand alone needs at least this many workers.
        prop_assert!(f64::from(d.workers) >= (total / budget - 1e-9).ceil());

        // Eq. 10–11: the operators' instances are P_o = max(Eq. 11 part, workers it runs on).
        let current: u32 = stats.operators.iter().map(|o| o.parallelism).sum();
        let eq11 = operator_instances(
            total_instances(s, current),
            &stats.operators.iter().map(|o| o.processed_rate * o.exec_time_us).collect::<Vec<_>>(),
        );
        for (op, part) in d.placement.operators.iter().zip(eq11) {
            let got: u32 = op.shares.iter().map(|x| x.instances).sum();
            prop_assert_eq!(got, part.max(op.shares.len() as u32));
            prop_assert!(op.shares.iter().all(|x| x.instances >= 1));
        }
    }

    /// CLASP's placement spread over a given worker count (the "-SP" ablations).
    #[test]
    fn spread_placements_use_at_most_n_workers_within_budget(c in case(), extra in 0u32..6) {
        let (p, stats, cfg, own) = decide(&c);
        let n = own.workers + extra;
        let input = PlanInput {
            pipeline: &p,
            stats: &stats,
            target_rate: own.requested_rate,
            coefficients: c.coefficients,
            config: &cfg,
            current: None,
        };
        let d = clasp_plan::policy::clasp_on_workers(Policy::Clasp, &input, n).unwrap();
        prop_assert!(d.placement.check(&p).is_ok());
        prop_assert!(d.workers <= n);
        // Where CLASP itself fits the target, more workers hold it too.
        prop_assert!(own.limited || !d.limited);
        let budget = cfg.headroom * c.coefficients.capacity;
        for l in &d.loads {
            prop_assert!(l.load <= budget * (1.0 + 1e-9), "{:?}", l);
        }
    }

    #[test]
    fn decisions_are_deterministic(c in case()) {
        let (_, _, _, a) = decide(&c);
        let (_, _, _, b) = decide(&c);
        prop_assert_eq!(a, b);
    }
}

/// A 300-operator DAG on up to 300 workers: the same invariants at a larger size, once within
/// the worker limit and once past it. Past it, fan-out cost compounds upstream (an operator
/// spread over k workers makes each worker of its predecessor pay γ·k), so the search settles
/// well below the target.
#[test]
fn large_random_dag_stays_within_budget() {
    for (factor, limited) in [(1.0, false), (3.0, true)] {
        let c = Case {
            dag: RandomDag::new(300, 42),
            coefficients: Coefficients::PAPER,
            rate_factor: factor,
            max_workers: 300,
            variant: PackingVariant::NextFit,
        };
        let (p, stats, cfg, d) = decide(&c);
        d.placement.check(&p).unwrap();
        let budget = cfg.headroom * Coefficients::PAPER.capacity;
        let proj = clasp_plan::Projection::new(&p, &stats, d.target_rate, 400.0, 1).unwrap();
        for l in placement_loads(&proj, &d.placement, &Coefficients::PAPER, budget) {
            assert!(l.load <= budget * (1.0 + 1e-9), "{l:?}");
        }
        assert_eq!(d.limited, limited, "factor {factor}: {} workers", d.workers);
    }
}
