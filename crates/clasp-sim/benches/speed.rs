//! Simulator speed in events per second of wall time, at the paper's scale: 10 workers × 10
//! slots, α = 38.5, β = 275, γ = 51,500, W = 850,000, 400 µs exponential executions.
//!
//! - `static/<app>`: CLASP's placement over 10 workers at 90 % of what it sustains, 20
//!   simulated seconds per iteration (criterion reports elements = events per second);
//! - `elastic/syn-gradual`: SYN under the gradual pattern with the CLASP controller;
//! - before the measurements, one 10-minute simulation of WC on 10 workers is timed and
//!   printed (the "10 workers for 10 minutes in seconds").
//!
//! Run: `CARGO_TARGET_DIR=... cargo bench -p clasp-sim --bench speed`.

use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_plan::Policy;
use clasp_plan::autoscaler::UNTHROTTLED_RATE;
use clasp_sim::{Deployment, SimConfig, Simulation, autoscaler_config, static_placement};
use criterion::{Criterion, Throughput};
use std::path::Path;
use std::time::{Duration, Instant};

fn pipeline(name: &str) -> Pipeline {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines").join(name);
    clasp_core::spec::load(&path).expect("the repository's pipelines are valid")
}

/// A static simulation of `p` on 10 workers at 90 % of the rate CLASP's placement sustains.
fn static_sim(p: &Pipeline, duration_s: f64) -> Simulation<'_> {
    let cfg = SimConfig { duration_s, warmup_s: 1.0, ..SimConfig::default() };
    let limit = static_placement(p, &cfg, UNTHROTTLED_RATE, 10).expect("placement");
    let rate = 0.9 * limit.operators[0].demand / single_demand(p, &cfg);
    let placement = static_placement(p, &cfg, rate, 10).expect("placement");
    Simulation::from_spec(p, cfg, RatePattern::constant(rate), Deployment::Static(placement))
        .expect("valid simulation")
}

/// Demand (µs/s) of the first operator per input request per second.
fn single_demand(p: &Pipeline, cfg: &SimConfig) -> f64 {
    let m = clasp_sim::Model::from_spec(p, cfg);
    m.requests_per_input()[0] * m.ops[0].exec_us
}

fn elastic_sim(p: &Pipeline) -> Simulation<'_> {
    let pattern = RatePattern::gradual(1000.0, 1);
    let cfg = SimConfig {
        duration_s: pattern.duration().unwrap_or(100.0),
        warmup_s: 0.0,
        ..SimConfig::default()
    };
    let autoscaler = autoscaler_config(&cfg, Policy::Clasp);
    Simulation::from_spec(p, cfg, pattern, Deployment::Elastic(Box::new(autoscaler)))
        .expect("valid simulation")
}

/// Times one 10-minute simulation of WC on 10 workers and prints the figure.
fn ten_minutes() {
    let p = pipeline("wc.toml");
    let sim = static_sim(&p, 600.0);
    let start = Instant::now();
    let s = sim.run();
    let wall = start.elapsed().as_secs_f64();
    println!(
        "wc, 10 workers x 10 slots, 600 s simulated at {:.0} chains/s: {} events in {wall:.2} s of wall time = {:.2} M events/s",
        s.input_rate,
        s.events,
        s.events as f64 / wall / 1e6
    );
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("static");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    for app in ["wc", "nwm", "syn"] {
        let p = pipeline(&format!("{app}.toml"));
        let events = static_sim(&p, 20.0).run().events;
        g.throughput(Throughput::Elements(events));
        g.bench_function(app, |b| b.iter(|| static_sim(&p, 20.0).run().events));
    }
    g.finish();
    let mut g = c.benchmark_group("elastic");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    let p = pipeline("syn.toml");
    let events = elastic_sim(&p).run().events;
    g.throughput(Throughput::Elements(events));
    g.bench_function("syn-gradual", |b| b.iter(|| elastic_sim(&p).run().events));
    g.finish();
}

fn main() {
    ten_minutes();
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
}
