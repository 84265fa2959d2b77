//! Every baseline on every pipeline in `pipelines/`, driven through a scale-out and a
//! scale-in with key assignment, worker remapping and migration plans, as the scaling
//! controller will use them.

use clasp_core::Pipeline;
use clasp_core::placement::{KeyAssignment, Placement};
use clasp_core::spec::load;
use clasp_core::stats::ObservedStats;
use clasp_plan::baselines::{ds2, faasflow, flink, zhang24};
use clasp_plan::keys::{assign_keys, remap_workers};
use clasp_plan::migration::plan_migration;
use std::path::PathBuf;

fn pipelines() -> Vec<Pipeline> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../pipelines");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    paths.sort();
    paths.iter().map(|p| load(p).unwrap_or_else(|e| panic!("{e}"))).collect()
}

/// (worker count, placement) of each baseline for `rate`.
fn decisions(p: &Pipeline, stats: &ObservedStats, rate: f64) -> Vec<(&'static str, Placement)> {
    let f = faasflow::Config::default();
    let z = zhang24::Config::default();
    let d = ds2::Config::default();
    let fl = flink::Config::default();
    vec![
        (
            "faasflow",
            faasflow::place(p, stats, rate, faasflow::worker_count(p, stats, rate, &f), &f),
        ),
        ("zhang24", zhang24::place(p, stats, rate, zhang24::worker_count(p, stats, rate, &z), &z)),
        ("ds2", ds2::place(p, stats, rate, ds2::worker_count(p, stats, rate, None, &d), None, &d)),
        ("flink", flink::place(p, stats, rate, None, &fl)),
    ]
}

/// Groups whose owner differs between two assignments.
fn changed(a: &KeyAssignment, b: &KeyAssignment) -> usize {
    a.owners
        .iter()
        .zip(&b.owners)
        .map(|(x, y)| x.iter().zip(y).filter(|(u, v)| u != v).count())
        .sum()
}

#[test]
fn baselines_scale_every_app_out_and_back_in() {
    const GROUPS: u32 = 256;
    for p in pipelines() {
        // Observed on one worker at 1000 input requests/s, 400 µs per request.
        let stats = ObservedStats::from_spec(&p, 1000.0, 400.0);
        let start = Placement::single_worker(&p, &vec![1; p.operators.len()]);
        let start_keys = assign_keys(&p, &start, GROUPS, None);
        let high = decisions(&p, &stats, 40_000.0);
        let low = decisions(&p, &stats, 500.0);
        for ((name, out), (_, back)) in high.into_iter().zip(low) {
            for placement in [&out, &back] {
                assert!(
                    placement.check(&p).is_ok(),
                    "{} {name}: {:?}",
                    p.name,
                    placement.check(&p)
                );
                assert!((1..=10).contains(&placement.workers), "{} {name}", p.name);
            }
            let out = remap_workers(&start, out);
            let out_keys = assign_keys(&p, &out, GROUPS, Some(&start_keys));
            let plan = plan_migration(&p, &start, &start_keys, &out, &out_keys);
            assert_eq!(plan.moved_groups(), changed(&start_keys, &out_keys), "{} {name}", p.name);
            // Scaling out from one worker, that worker only sends.
            assert!(plan.workers[0].receive_from.is_empty(), "{} {name}", p.name);

            let back = remap_workers(&out, back);
            let back_keys = assign_keys(&p, &back, GROUPS, Some(&out_keys));
            let plan = plan_migration(&p, &out, &out_keys, &back, &back_keys);
            assert_eq!(plan.moved_groups(), changed(&out_keys, &back_keys), "{} {name}", p.name);
            assert_eq!(plan.workers.len(), out.workers.max(back.workers) as usize);
        }
    }
}

#[test]
fn baseline_decisions_are_deterministic() {
    for p in pipelines() {
        let stats = ObservedStats::from_spec(&p, 1000.0, 400.0);
        let a = serde_json::to_string(&decisions(&p, &stats, 7_500.0)).unwrap();
        let b = serde_json::to_string(&decisions(&p, &stats, 7_500.0)).unwrap();
        assert_eq!(a, b, "{}", p.name);
    }
}

/// Every policy behind the shared interface gives a valid decision on every pipeline, within
/// the worker limit, and the "-SP" ablations use their baseline's worker count.
#[test]
fn every_policy_decides_on_every_pipeline() {
    use clasp_plan::{PlanConfig, PlanInput, Policy};
    let config = PlanConfig::default();
    for p in pipelines() {
        let stats = ObservedStats::from_spec(&p, 2_000.0, 400.0);
        let input = PlanInput {
            pipeline: &p,
            stats: &stats,
            target_rate: 2_000.0,
            coefficients: clasp_core::stats::Coefficients::PAPER,
            config: &config,
            current: None,
        };
        for &policy in Policy::ALL {
            let d = policy.decide(&input).unwrap_or_else(|e| panic!("{} {policy}: {e}", p.name));
            d.placement.check(&p).unwrap_or_else(|e| panic!("{} {policy}: {e}", p.name));
            assert!((1..=config.max_workers).contains(&d.workers), "{} {policy}", p.name);
            assert_eq!(d.workers, d.placement.workers);
        }
        let ff = faasflow::worker_count(&p, &stats, 2_000.0, &faasflow::Config::default());
        let ff_sp = Policy::FaasFlowSp.decide(&input).unwrap();
        assert!(ff_sp.workers <= ff.max(1), "{}: -SP uses at most FaaSFlow's {ff}", p.name);
        let z = zhang24::worker_count(&p, &stats, 2_000.0, &zhang24::Config::default());
        assert!(Policy::Zhang24Sp.decide(&input).unwrap().workers <= z.max(1));
    }
}
