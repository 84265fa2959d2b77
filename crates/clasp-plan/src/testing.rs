//! Test fixtures: pipelines from spec text, seeded random DAGs, placements and statistics.

use clasp_core::placement::{OperatorPlacement, Placement, Share};
use clasp_core::rng::SeededRng;
use clasp_core::spec::parse;
use clasp_core::stats::ObservedStats;
use clasp_core::{Pipeline, WorkerId};
use rand::RngExt;
use std::fmt::Write;

/// Parses a spec, panicking with the parser's message on error.
pub fn pipeline(spec: &str) -> Pipeline {
    parse(spec, "test.toml").unwrap_or_else(|e| panic!("{e}"))
}

/// A random DAG of `ops` operators fed by one source: every operator after the first has at
/// least one earlier predecessor (so all are reachable), extra forward edges are added at
/// random, each operator is stateful with probability `stateful`, and has a service time and
/// selectivity so that [`ObservedStats::from_spec`] gives varied rates.
pub fn random_pipeline(rng: &mut SeededRng, ops: usize, stateful: f64) -> Pipeline {
    let mut spec = String::from("[[source]]\nname = \"in\"\nrate = 1000\nkey_field = 0\n");
    for i in 0..ops {
        let keyed = rng.random_bool(stateful);
        write!(
            spec,
            "[[operator]]\nname = \"o{i}\"\nkind = \"map\"\nselectivity = {:.2}\nservice_time_us = {}\n",
            rng.random_range(0.5..3.0),
            50 + rng.random_range(0..950),
        )
        .unwrap();
        if keyed {
            spec.push_str("stateful = true\nkey = \"k\"\n");
        }
    }
    spec.push_str("[[stream]]\nfrom = \"in\"\nto = \"o0\"\n");
    for j in 1..ops {
        let first = rng.random_range(0..j as u64) as usize;
        for i in 0..j {
            if i == first || rng.random_bool(0.2) {
                write!(spec, "[[stream]]\nfrom = \"o{i}\"\nto = \"o{j}\"\n").unwrap();
            }
        }
    }
    pipeline(&spec)
}

/// A random valid placement on `workers` workers: each operator on a random non-empty subset
/// of workers with random positive fractions and 1–4 instances per worker.
pub fn random_placement(rng: &mut SeededRng, p: &Pipeline, workers: u32) -> Placement {
    let operators = p
        .operators
        .iter()
        .map(|op| {
            let demand = rng.random_range(0.0..1e6);
            let mut chosen: Vec<u32> = (0..workers).filter(|_| rng.random_bool(0.5)).collect();
            if chosen.is_empty() {
                chosen.push(rng.random_range(0..u64::from(workers)) as u32);
            }
            let weights: Vec<f64> = chosen.iter().map(|_| rng.random_range(0.05..1.0)).collect();
            let total: f64 = weights.iter().sum();
            let shares = chosen
                .iter()
                .zip(&weights)
                .map(|(w, x)| Share {
                    worker: WorkerId(*w),
                    share: demand * x / total,
                    fraction: x / total,
                    instances: 1 + rng.random_range(0..4) as u32,
                })
                .collect();
            OperatorPlacement { operator: op.id, demand, shares }
        })
        .collect();
    Placement { workers, operators }
}

/// Spec-derived statistics at a random reference rate, with random overhead samples and,
/// half of the time, a saturated per-worker rate.
pub fn random_stats(rng: &mut SeededRng, p: &Pipeline) -> ObservedStats {
    let mut stats = ObservedStats::from_spec(p, rng.random_range(100.0..5000.0), 400.0);
    for o in &mut stats.operators {
        o.parallelism = 1 + rng.random_range(0..8) as u32;
        o.overhead_samples = (0..rng.random_range(0..10))
            .map(|_| [1.0 + rng.random_range(0..20) as f64, rng.random_range(0.0..0.9)])
            .collect();
    }
    if rng.random_bool(0.5) {
        stats.saturated_per_worker_rate = Some(rng.random_range(50.0..2000.0));
    }
    stats
}
