//! The simulator against queueing theory. One worker with `c` slots, CPU for all of them, no
//! dispatch cost and no network delay is an M/G/c queue; under Poisson arrivals its mean
//! waiting time must match Erlang C (exponential service) and Pollaczek–Khinchine
//! (deterministic service), Little's law must hold, and throughput must cap at c / E[S].
//!
//! Every figure is printed (`cargo test -p clasp-sim --test validation -- --nocapture`) for
//! `docs/simulator.md`.

use clasp_core::pattern::RatePattern;
use clasp_core::placement::Placement;
use clasp_sim::analytic::{md1_wait, mmc_wait};
use clasp_sim::{Deployment, ServiceDist, SimConfig, SimSummary, Simulation};

const ONE_OP: &str = r#"
[[source]]
name = "in"
[[operator]]
name = "serve"
kind = "map"
service_time_us = 400
[[stream]]
from = "in"
to = "serve"
"#;

const SERVICE_US: f64 = 400.0;

fn single_queue(c: u32, rho: f64, service: ServiceDist, customers: f64, seed: u64) -> SimSummary {
    let p = clasp_core::spec::parse(ONE_OP, "one.toml").unwrap();
    let lambda = rho * f64::from(c) / (SERVICE_US * 1e-6);
    let duration = customers / lambda;
    let cfg = SimConfig {
        service,
        duration_s: duration,
        warmup_s: duration * 0.05,
        interval_s: duration / 100.0,
        seed,
        ..SimConfig::queueing(c)
    };
    // One instance per slot: the operator may use them all.
    let placement = Placement::single_worker(&p, &[c]);
    let pattern = RatePattern::constant(lambda);
    Simulation::from_spec(&p, cfg, pattern, Deployment::Static(placement)).unwrap().run()
}

fn relative_error(measured: f64, exact: f64) -> f64 {
    (measured - exact).abs() / exact
}

#[test]
fn mean_wait_matches_erlang_c() {
    println!("\nM/M/c, E[S] = {SERVICE_US} us: mean queue wait, simulated vs Erlang C");
    println!("{:>3} {:>5} {:>12} {:>12} {:>8}", "c", "rho", "sim (us)", "exact (us)", "error");
    let cases = [(1, 0.5), (1, 0.7), (1, 0.8), (10, 0.5), (10, 0.7), (10, 0.9)];
    for (c, rho) in cases {
        // Four independent runs of 500,000 customers each, averaged.
        let seeds = 1..=4;
        let n = seeds.clone().count() as f64;
        let sim = seeds
            .map(|seed| single_queue(c, rho, ServiceDist::Exponential, 500_000.0, seed))
            .map(|s| s.mean_queue_wait_us)
            .sum::<f64>()
            / n;
        let lambda = rho * f64::from(c) / SERVICE_US;
        let exact = mmc_wait(c, lambda, SERVICE_US);
        let err = relative_error(sim, exact);
        println!("{c:>3} {rho:>5.2} {sim:>12.2} {exact:>12.2} {:>7.2}%", 100.0 * err);
        assert!(err < 0.05, "c = {c}, rho = {rho}: {sim} vs {exact}");
    }
}

#[test]
fn deterministic_service_matches_pollaczek_khinchine() {
    println!("\nM/D/1, S = {SERVICE_US} us: mean queue wait, simulated vs Pollaczek-Khinchine");
    for rho in [0.5, 0.8] {
        let s = single_queue(1, rho, ServiceDist::Deterministic, 300_000.0, 5);
        let exact = md1_wait(rho / SERVICE_US, SERVICE_US);
        let err = relative_error(s.mean_queue_wait_us, exact);
        println!(
            "rho {rho:.2}: {:.2} us vs {exact:.2} us ({:.2} %)",
            s.mean_queue_wait_us,
            100.0 * err
        );
        assert!(err < 0.05, "rho = {rho}");
    }
}

#[test]
fn littles_law_holds() {
    println!("\nLittle's law: mean chains in flight vs throughput x mean latency");
    for (c, rho) in [(1, 0.7), (10, 0.8)] {
        let s = single_queue(c, rho, ServiceDist::Exponential, 200_000.0, 3);
        let l = s.throughput * s.latency.mean_us * 1e-6;
        let err = relative_error(s.mean_in_flight, l);
        println!(
            "c {c:>2}, rho {rho:.1}: L = {:.4}, lambda W = {l:.4} ({:.2} %); at the worker {:.4}",
            s.mean_in_flight,
            100.0 * err,
            s.mean_at_workers
        );
        // The histogram keeps 3 significant digits of each latency.
        assert!(err < 0.01, "c = {c}: L = {} vs {l}", s.mean_in_flight);
        // With no network delay, chains in flight are exactly the requests at the worker.
        assert!(relative_error(s.mean_at_workers, s.mean_in_flight) < 1e-6);
    }
}

#[test]
fn throughput_caps_at_slots_over_service_time() {
    println!("\nOverload: throughput vs c / E[S]");
    for c in [1u32, 4, 10] {
        let cap = f64::from(c) / (SERVICE_US * 1e-6);
        // Offered at twice the capacity, and unthrottled.
        for (name, pattern) in
            [("2x", RatePattern::constant(2.0 * cap)), ("unthrottled", RatePattern::unthrottled())]
        {
            let p = clasp_core::spec::parse(ONE_OP, "one.toml").unwrap();
            let cfg = SimConfig {
                duration_s: 50_000.0 / cap,
                warmup_s: 5_000.0 / cap,
                max_in_flight: 1_000,
                planner_queue: 1_000,
                ..SimConfig::queueing(c)
            };
            let placement = Placement::single_worker(&p, &[c]);
            let s = Simulation::from_spec(&p, cfg, pattern, Deployment::Static(placement))
                .unwrap()
                .run();
            let err = relative_error(s.throughput, cap);
            println!(
                "c {c:>2}, {name:>11}: {:.1} /s vs {cap:.1} /s ({:.2} %)",
                s.throughput,
                100.0 * err
            );
            assert!(err < 0.03, "c = {c} {name}: {} vs {cap}", s.throughput);
        }
    }
}

#[test]
fn same_seed_same_run() {
    let a = single_queue(10, 0.8, ServiceDist::LogNormal { cv: 0.7 }, 20_000.0, 77);
    let b = single_queue(10, 0.8, ServiceDist::LogNormal { cv: 0.7 }, 20_000.0, 77);
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
    let c = single_queue(10, 0.8, ServiceDist::LogNormal { cv: 0.7 }, 20_000.0, 78);
    assert_ne!(a.mean_queue_wait_us, c.mean_queue_wait_us);
}
