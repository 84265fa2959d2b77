//! The simulator against queueing theory. One worker with `c` slots, CPU for all of them, no
//! dispatch cost and no network delay is an M/G/c queue: under Poisson arrivals its mean
//! waiting time must match Erlang C (exponential service) and Pollaczek–Khinchine
//! (deterministic service), Little's law must hold, and throughput must cap at c / E[S].

use clasp_core::pattern::RatePattern;
use clasp_core::placement::Placement;
use clasp_plan::queueing::{md1_wait, mmc_wait};
use clasp_sim::{Deployment, ServiceDist, SimConfig, SimSummary, Simulation};
use serde::{Deserialize, Serialize};

/// Mean service time of every check (µs).
pub const SERVICE_US: f64 = 400.0;

const ONE_OP: &str = "[[source]]\nname = \"in\"\n[[operator]]\nname = \"serve\"\nkind = \"map\"\n\
                      service_time_us = 400\n[[stream]]\nfrom = \"in\"\nto = \"serve\"\n";

/// One simulated queue against its closed form.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// What is compared (`M/M/10 wait`, `Little c=1`, ...).
    pub name: String,
    /// Slots.
    pub slots: u32,
    /// Utilization ρ (or the offered load for the throughput cap).
    pub load: f64,
    /// The simulated value.
    pub simulated: f64,
    /// The closed form's value.
    pub exact: f64,
    /// |simulated − exact| / exact.
    pub error: f64,
    /// The unit of both values.
    pub unit: String,
}

impl Check {
    fn new(name: String, slots: u32, load: f64, simulated: f64, exact: f64, unit: &str) -> Self {
        let error = (simulated - exact).abs() / exact.abs().max(1e-12);
        Self { name, slots, load, simulated, exact, error, unit: unit.to_owned() }
    }
}

/// One worker with `c` slots at utilization `rho` for about `customers` arrivals.
pub fn single_queue(
    c: u32,
    rho: f64,
    service: ServiceDist,
    customers: f64,
    seed: u64,
) -> SimSummary {
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
    run(cfg, c, RatePattern::constant(lambda))
}

/// A one-operator pipeline on one worker whose every slot may run it.
fn run(cfg: SimConfig, c: u32, pattern: RatePattern) -> SimSummary {
    let p = clasp_core::spec::parse(ONE_OP, "one.toml").expect("a valid spec");
    let placement = Placement::single_worker(&p, &[c]);
    Simulation::from_spec(&p, cfg, pattern, Deployment::Static(placement))
        .expect("a valid configuration")
        .run()
}

/// Mean queue waits of M/M/1 and M/M/10 at several loads (each the mean over `seeds` runs of
/// `customers` arrivals) against Erlang C, and of M/D/1 against Pollaczek–Khinchine.
pub fn waiting_times(customers: f64, seeds: u64) -> Vec<Check> {
    let mut out = Vec::new();
    for (c, rho) in [(1, 0.5), (1, 0.7), (1, 0.8), (10, 0.5), (10, 0.7), (10, 0.9)] {
        let sim = (1..=seeds)
            .map(|seed| single_queue(c, rho, ServiceDist::Exponential, customers, seed))
            .map(|s| s.mean_queue_wait_us)
            .sum::<f64>()
            / seeds as f64;
        let exact = mmc_wait(c, rho * f64::from(c) / SERVICE_US, SERVICE_US);
        out.push(Check::new(format!("M/M/{c} wait (Erlang C)"), c, rho, sim, exact, "us"));
    }
    for rho in [0.5, 0.8] {
        let s = single_queue(1, rho, ServiceDist::Deterministic, customers * 0.6, 5);
        let exact = md1_wait(rho / SERVICE_US, SERVICE_US);
        let name = "M/D/1 wait (Pollaczek-Khinchine)".to_owned();
        out.push(Check::new(name, 1, rho, s.mean_queue_wait_us, exact, "us"));
    }
    out
}

/// Mean chains in flight against throughput × mean latency.
pub fn littles_law(customers: f64) -> Vec<Check> {
    [(1, 0.7), (10, 0.8)]
        .into_iter()
        .map(|(c, rho)| {
            let s = single_queue(c, rho, ServiceDist::Exponential, customers, 3);
            let lw = s.throughput * s.latency.mean_us * 1e-6;
            Check::new("Little's law L = lambda W".into(), c, rho, s.mean_in_flight, lw, "chains")
        })
        .collect()
}

/// Throughput offered twice the capacity against c / E[S].
pub fn throughput_cap(customers: f64) -> Vec<Check> {
    let mut out = Vec::new();
    for c in [1u32, 4, 10] {
        let cap = f64::from(c) / (SERVICE_US * 1e-6);
        let duration = customers / cap;
        let cfg = SimConfig {
            duration_s: duration,
            warmup_s: 0.1 * duration,
            interval_s: duration / 100.0,
            max_in_flight: 1_000,
            planner_queue: 1_000,
            ..SimConfig::queueing(c)
        };
        let s = run(cfg, c, RatePattern::constant(2.0 * cap));
        out.push(Check::new("throughput cap c/E[S]".into(), c, 2.0, s.throughput, cap, "req/s"));
    }
    out
}
