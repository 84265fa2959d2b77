//! Planning time of one CLASP decision (projection, order, packing, worker-limit search,
//! parallelism, Eq. 8 loads).
//!
//! - Every paper application on 10 workers, at 90 % of the highest rate 10 workers sustain
//!   (`fit`: one packing) and at 10× that rate (`limited`: the binary search, uncached).
//! - A seeded random DAG of 1,000 operators on up to 1,000 workers, likewise.
//! - The `flink` policy's decision at the `fit` rate, for comparison.
//!
//! Run: `CARGO_TARGET_DIR=... cargo bench -p clasp-plan --bench plan`.

use clasp_core::Pipeline;
use clasp_core::stats::{Coefficients, ObservedStats};
use clasp_plan::projection::spec_observation;
use clasp_plan::synthetic::RandomDag;
use clasp_plan::{PlanConfig, PlanInput, Policy};
use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use std::path::Path;
use std::time::Duration;

const APPS: [&str; 7] = ["wc", "sd", "aa", "pl", "nwm", "etl", "syn"];

struct Case {
    pipeline: Pipeline,
    stats: ObservedStats,
    config: PlanConfig,
}

impl Case {
    fn new(pipeline: Pipeline, max_workers: u32) -> Self {
        let config = PlanConfig { max_workers, ..PlanConfig::default() };
        let stats = spec_observation(&pipeline, 1.0, &config, &Coefficients::PAPER);
        Self { pipeline, stats, config }
    }

    fn input(&self, rate: f64) -> PlanInput<'_> {
        PlanInput {
            pipeline: &self.pipeline,
            stats: &self.stats,
            target_rate: rate,
            coefficients: Coefficients::PAPER,
            config: &self.config,
            current: None,
        }
    }

    /// The highest rate the worker limit sustains.
    fn limit_rate(&self) -> f64 {
        let huge = self.stats.throughput * 1e4;
        Policy::Clasp.decide(&self.input(huge)).expect("plannable").target_rate
    }

    fn bench(&self, c: &mut Criterion, name: &str) {
        let limit = self.limit_rate();
        for (label, rate) in [("fit", 0.9 * limit), ("limited", 10.0 * limit)] {
            let d = Policy::Clasp.decide(&self.input(rate)).expect("plannable");
            eprintln!(
                "{name}/{label}: {} operators, rate {rate:.0}, {} workers, limited {}",
                self.pipeline.operators.len(),
                d.workers,
                d.limited
            );
            c.bench_function(&format!("plan/{name}/{label}"), |b| {
                b.iter(|| Policy::Clasp.decide(black_box(&self.input(rate))).unwrap())
            });
        }
        let rate = 0.9 * limit;
        let d = Policy::Flink.decide(&self.input(rate)).expect("plannable");
        eprintln!("{name}/flink: rate {rate:.0}, {} workers", d.workers);
        c.bench_function(&format!("plan/{name}/flink"), |b| {
            b.iter(|| Policy::Flink.decide(black_box(&self.input(rate))).unwrap())
        });
    }
}

fn apps(c: &mut Criterion) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines");
    for app in APPS {
        let p = clasp_core::spec::load(&dir.join(format!("{app}.toml"))).expect("spec loads");
        Case::new(p, 10).bench(c, &format!("{app}-10w"));
    }
}

fn random_dag(c: &mut Criterion) {
    Case::new(RandomDag::new(1_000, 7).pipeline(), 1_000).bench(c, "random1000-1000w");
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = apps, random_dag
}
criterion_main!(benches);
