//! The experiments' rows on the simulator at quick scale.

use clasp_bench::engine::sim::Setup;
use clasp_bench::experiments::migration::{MigrationSetup, StateSize};
use clasp_bench::experiments::{
    coefficients, end_to_end, migration, placement, scaling, state_locality, worker_count,
};
use clasp_core::Pipeline;
use clasp_plan::Policy;
use clasp_sim::SimConfig;
use std::path::Path;

fn pipeline(name: &str) -> Pipeline {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines").join(name);
    clasp_core::spec::load(&path).unwrap()
}

#[test]
fn scaling_is_sublinear_but_grows() {
    let rows = scaling::sim_rows(&[pipeline("syn.toml")], &Setup::quick(1)).unwrap();
    println!("\nscaling (quick): {rows:#?}");
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].throughput_ratio, 1.0);
    let (five, ten) = (rows[1].throughput_ratio, rows[2].throughput_ratio);
    // More workers sustain more, but chained requests crossing workers cost capacity.
    assert!(1.0 < five && five < ten, "{five} {ten}");
    assert!(five < 5.0 && ten < 10.0, "{five} {ten}");
    assert!(rows.iter().all(|r| r.p95_ms > 0.0 && r.latency_rate == rows[0].latency_rate));
}

#[test]
fn placement_compares_every_policy_on_ten_workers() {
    let rows = placement::sim_rows(&[pipeline("wc.toml")], &Setup::quick(2), &placement::POLICIES)
        .unwrap();
    println!("\nplacement (quick): {rows:#?}");
    assert_eq!(rows.len(), placement::POLICIES.len());
    assert_eq!(rows[0].ratio, 1.0);
    for r in &rows {
        assert!(r.throughput > 0.0 && r.workers >= 1 && r.workers <= 10, "{r:?}");
        assert!((r.ratio - r.throughput / rows[0].throughput).abs() < 1e-9);
    }
}

#[test]
fn worker_count_errors_cover_every_transition() {
    let setup = Setup::quick(3);
    let policies = [Policy::Clasp, Policy::FaasFlow];
    let r = worker_count::sim_rows(&[pipeline("sd.toml")], &setup, &policies).unwrap();
    let n = setup.levels.len();
    assert_eq!(r.transitions.len(), policies.len() * n * (n - 1));
    let m = &r.maxima[0];
    // More workers sustain more, so the optimum never falls as the target rises.
    let optima: Vec<u32> = setup.levels.iter().map(|l| m.optimal(l * m.max())).collect();
    assert!(optima.windows(2).all(|w| w[0] <= w[1]), "{optima:?}");
    // The optimum at the maximum is the worker count that reached it.
    let best = m.throughput.iter().position(|&t| t == m.max()).unwrap() as u32 + 1;
    assert_eq!(m.optimal(m.max()), best);
    for t in &r.transitions {
        assert!((1..=setup.sim.max_workers).contains(&t.predicted), "{t:?}");
        assert!(t.optimal <= best, "no more workers than the best count: {t:?}");
    }
    // Each policy's overall MAE is the mean |predicted - optimal| of its transitions.
    for p in policies {
        let mine: Vec<f64> = r
            .transitions
            .iter()
            .filter(|t| t.policy == p.name())
            .map(|t| f64::from(t.predicted.abs_diff(t.optimal)))
            .collect();
        let all = r.mae.iter().find(|e| e.by == "all" && e.policy == p.name()).unwrap();
        assert_eq!(all.transitions, mine.len());
        assert!((all.mae - mine.iter().sum::<f64>() / mine.len() as f64).abs() < 1e-12);
    }
    for e in &r.mae {
        println!(
            "{:<9} {:<9} {:>4} MAE {:.3} over {}",
            e.policy, e.by, e.key, e.mae, e.transitions
        );
    }
}

#[test]
fn end_to_end_runs_every_policy_on_both_patterns() {
    let setup = Setup { pattern_scale: 0.15, ..Setup::quick(4) };
    let policies = [Policy::Clasp, Policy::FaasFlowSp];
    let tuning = end_to_end::Tuning::default();
    let rows = end_to_end::sim_rows(&[pipeline("syn.toml")], &setup, &policies, tuning).unwrap();
    println!("\nend-to-end (quick): {rows:#?}");
    assert_eq!(rows.len(), 2 * policies.len());
    assert_eq!((rows[0].pattern.as_str(), rows[2].pattern.as_str()), ("burst", "gradual"));
    for r in &rows {
        assert!(r.throughput > 0.0 && r.mean_workers >= 1.0 && r.p95_ms >= r.p50_ms, "{r:?}");
        let c = r.convergence;
        assert_eq!(c.rescalings, r.scaling_steps, "{r:?}");
        assert!(c.one_step <= c.changes, "{r:?}");
    }
    // The gradual pattern steps 10 % -> 100 % -> 10 %: 19 stages, 18 rate changes.
    assert!(rows.iter().filter(|r| r.pattern == "gradual").all(|r| r.convergence.changes == 18));
}

#[test]
fn remote_state_costs_throughput_where_state_is_touched() {
    let apps = [pipeline("wc.toml"), pipeline("syn.toml")];
    let rows = state_locality::sim_rows(&apps, &Setup::quick(5), 1_000.0).unwrap();
    println!("\nstate locality (quick): {rows:#?}");
    assert_eq!(rows.len(), 1, "SYN has no state");
    let wc = &rows[0];
    assert!(wc.state_share > 0.9 && wc.ratio > 2.0 && wc.local > wc.remote, "{wc:?}");
}

#[test]
fn migrations_take_every_transition_once() {
    let m = MigrationSetup { load: 0.5, fill_s: 2.0, gap_s: 1.0 };
    let state = StateSize { keys: 40_000, bytes_per_key: 64 };
    let rows = migration::sim_rows(&[(pipeline("wc.toml"), state)], &Setup::quick(6), &m).unwrap();
    println!("\nmigration (quick): {rows:#?}");
    let pairs: Vec<(u32, u32)> = rows.iter().map(|r| (r.from, r.to)).collect();
    assert_eq!(pairs, [(1, 5), (5, 10), (10, 5), (5, 1), (1, 10), (10, 1)]);
    for r in &rows {
        assert!(r.planner_ms >= r.worker_ms && r.worker_ms > 0.0 && r.keys_moved > 0, "{r:?}");
    }
}

#[test]
fn the_estimator_learns_the_simulated_costs() {
    let est = coefficients::initial_estimator();
    let setup =
        Setup { sim: SimConfig { max_workers: 4, ..Setup::quick(7).sim }, ..Setup::quick(7) };
    let rows = coefficients::sim_rows(&[pipeline("syn.toml")], &setup, &est).unwrap();
    println!("\ncoefficients (quick): {rows:#?}");
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[0].updates, 0, "one worker: nothing remote, nothing identifiable");
    let last = &rows[3];
    assert!(last.updates > 0, "{last:?}");
    // From β = 1,000 towards the true 275.
    assert!(last.beta < 1_000.0, "{last:?}");
}
