//! The elastic loop end to end: every chain completes across migrations, the rescalings form
//! one unbroken sequence of worker counts, and a seed determines the run.

use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_plan::Policy;
use clasp_sim::{Deployment, SimConfig, Simulation, autoscaler_config};
use std::path::Path;

fn pipeline(name: &str) -> Pipeline {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines").join(name);
    clasp_core::spec::load(&path).unwrap()
}

/// Runs SYN under a burst with the CLASP controller, then long enough to drain.
fn elastic(seed: u64) -> clasp_sim::SimSummary {
    let p = pipeline("syn.toml");
    let pattern = RatePattern::burst(900.0, seed);
    let cfg = SimConfig {
        duration_s: pattern.duration().unwrap() + 60.0,
        warmup_s: 0.0,
        seed,
        ..SimConfig::default()
    };
    let autoscaler = autoscaler_config(&cfg, Policy::Clasp).with_warmup(1_000);
    Simulation::from_spec(&p, cfg, pattern, Deployment::Elastic(Box::new(autoscaler)))
        .unwrap()
        .run()
}

#[test]
fn every_chain_completes_across_migrations() {
    let s = elastic(7);
    println!("\n{}", s.human());
    assert!(s.scaling_events.len() >= 3, "the controller rescales: {:?}", s.scaling_events);
    // Nothing lost, nothing run twice: every input's chain completed exactly once.
    assert_eq!(s.completed, s.inputs);
    // The run starts on one worker and each rescaling starts where the previous one ended.
    let mut workers = 1;
    for e in &s.scaling_events {
        assert_eq!(e.from_workers, workers, "{e:?}");
        // The planner's duration spans every worker's pause (plan issued → last completion).
        assert!(e.planner_ms >= e.max_worker_pause_ms, "{e:?}");
        workers = e.to_workers;
    }
    let most = s.scaling_events.iter().map(|e| e.to_workers).max().unwrap();
    assert_eq!(s.max_workers, most.max(1), "the summary's maximum is the largest count used");
}

#[test]
fn same_seed_same_elastic_run() {
    let (a, b) = (elastic(9), elastic(9));
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
}
