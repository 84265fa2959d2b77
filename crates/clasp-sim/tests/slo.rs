//! The latency objective against the simulator: the placement chosen for a p95 SLO, run in
//! the simulator at the rate it was chosen for, keeps the simulated p95 within the SLO, where
//! the placement chosen for the rate alone does not.

use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_plan::policy::clasp_on_workers;
use clasp_plan::projection::{Projection, spec_observation};
use clasp_plan::slo::{fewest_workers_within, predicted_p95_us};
use clasp_plan::{Decision, PlanInput, Policy};
use clasp_sim::{Deployment, SimConfig, Simulation};
use std::path::Path;

fn pipeline(name: &str) -> Pipeline {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines").join(name);
    clasp_core::spec::load(&path).unwrap()
}

/// Simulated p95 (µs) of `d`'s placement at `rate`.
fn simulated_p95(p: &Pipeline, cfg: &SimConfig, d: &Decision, rate: f64) -> u64 {
    let sim = Simulation::from_spec(
        p,
        cfg.clone(),
        RatePattern::constant(rate),
        Deployment::Static(d.placement.clone()),
    )
    .unwrap();
    sim.run().latency.p95_us
}

#[test]
fn the_slo_placement_meets_the_slo_in_the_simulator_and_the_rate_placement_does_not() {
    for (app, rate) in [("syn.toml", 600.0), ("wc.toml", 500.0)] {
        let p = pipeline(app);
        let cfg = SimConfig { duration_s: 40.0, warmup_s: 10.0, seed: 3, ..SimConfig::default() };
        let plan = clasp_sim::plan_config(&cfg, cfg.max_workers);
        let stats = spec_observation(&p, rate, &plan, &cfg.costs);
        let input = PlanInput {
            pipeline: &p,
            stats: &stats,
            target_rate: rate,
            coefficients: cfg.costs,
            config: &plan,
            current: None,
        };
        let plain = Policy::Clasp.decide(&input).unwrap();
        let proj = Projection::new(&p, &stats, rate, plan.default_exec_us, 1).unwrap();
        for k in plain.workers..=(plain.workers + 3).min(cfg.max_workers) {
            let d = clasp_on_workers(Policy::Clasp, &input, k).unwrap();
            let predicted = predicted_p95_us(&p, &proj, &d.placement, &d.loads, &cfg.costs);
            println!(
                "{app} at {rate}: {k} workers predicted p95 {:.0} us, simulated {} us",
                predicted,
                simulated_p95(&p, &cfg, &d, rate)
            );
        }
        let plain_p95 = simulated_p95(&p, &cfg, &plain, rate) as f64;
        let slo_ms = 0.6 * plain_p95 / 1e3;
        let chosen = fewest_workers_within(&input, slo_ms, f64::INFINITY).unwrap();
        assert!(chosen.workers > plain.workers, "{app}: the SLO asks for more workers");
        let got = simulated_p95(&p, &cfg, &chosen, rate) as f64;
        assert!(got <= slo_ms * 1e3, "{app}: {got} us over the SLO of {slo_ms} ms");
    }
}
