//! Reacting on saturation: under the gradual pattern, the first scale-out comes within a few
//! seconds of the first interval in which the single worker falls behind the input — not
//! after a fixed request-count warm-up (the paper's setup, which waits much longer).

use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_plan::{AutoscalerConfig, Policy};
use clasp_sim::{Deployment, SimConfig, SimSummary, Simulation, autoscaler_config};
use std::path::Path;

fn pipeline(name: &str) -> Pipeline {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines").join(name);
    clasp_core::spec::load(&path).unwrap()
}

fn run(seed: u64, configure: impl FnOnce(AutoscalerConfig) -> AutoscalerConfig) -> SimSummary {
    let p = pipeline("syn.toml");
    let pattern = RatePattern::gradual_every(900.0, 3.0);
    let cfg = SimConfig {
        duration_s: pattern.duration().unwrap() + 10.0,
        warmup_s: 0.0,
        seed,
        ..SimConfig::default()
    };
    let autoscaler = configure(autoscaler_config(&cfg, Policy::Clasp));
    Simulation::from_spec(&p, cfg, pattern, Deployment::Elastic(Box::new(autoscaler)))
        .unwrap()
        .run()
}

/// Seconds from the first interval that lags (throughput more than 10 % below the input
/// rate) to the first scale-out; negative when the scale-out came first.
fn reaction_s(s: &SimSummary) -> f64 {
    let lagging = s
        .timeline
        .iter()
        .find(|row| row.throughput < 0.9 * row.input_rate)
        .map_or(f64::INFINITY, |row| row.time_s);
    let out = s
        .scaling_events
        .iter()
        .find(|e| e.to_workers > e.from_workers)
        .unwrap_or_else(|| panic!("never scaled out: {:?}", s.scaling_events))
        .time_s;
    out - lagging
}

#[test]
fn the_first_scale_out_comes_within_five_seconds_of_lagging() {
    for seed in [1, 2] {
        let s = run(seed, |a| a);
        let reaction = reaction_s(&s);
        assert!(reaction <= 5.0, "seed {seed}: scaled out {reaction:.1} s after lagging");
    }
}

#[test]
fn the_papers_request_warm_up_reacts_later() {
    // The same run with the paper's 10,000-request warm-up: the comparison shows the trigger,
    // not the pattern, makes the difference.
    let fast = reaction_s(&run(1, |a| a));
    let paper = reaction_s(&run(1, |a| a.with_warmup(10_000)));
    assert!(paper > fast, "paper warm-up {paper:.1} s vs {fast:.1} s");
}
