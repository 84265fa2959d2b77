//! Paper Fig. 9: the coefficients α, β, γ (and W̄) the online estimator converges to.
//!
//! For every application and every worker count `n` in `1..=10`, CLASP's placement over
//! exactly `n` workers runs unthrottled with enough chains in flight to saturate the workers
//! (the reference's 10,000), and every saturated worker report of the run feeds one estimator
//! (Eq. 2–4) that starts away from the truth. Its final values are reported beside the
//! simulated machines' true costs, which the estimator never sees. With one worker no request
//! is remote, so β and γ are not identifiable and the estimator keeps its starting values
//! (`updates` is 0).

use crate::engine::sim::{Ctx, Setup, spec_stats};
use crate::experiments::{Experiment, distinct, lookup};
use crate::plot::{Chart, Series};
use crate::report::{Output, Report, Table, num};
use crate::{BenchError, Options};
use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_core::stats::Coefficients;
use clasp_plan::EstimatorConfig;
use clasp_plan::autoscaler::UNTHROTTLED_RATE;
use clasp_sim::{Deployment, SimError, Simulation, placement_on};
use serde::{Deserialize, Serialize};

/// Chains in flight: enough for every worker's queue to exceed the saturation threshold.
pub const SATURATING_IN_FLIGHT: u32 = 10_000;

/// One application on one worker count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoefficientRow {
    /// Application.
    pub app: String,
    /// Workers.
    pub workers: u32,
    /// Estimated α (µs per local chained request).
    pub alpha: f64,
    /// Estimated β (µs per remote chained request).
    pub beta: f64,
    /// Estimated γ (µs/s per remote destination).
    pub gamma: f64,
    /// Estimated W̄ (µs/s).
    pub capacity: f64,
    /// Saturated observations that updated α, β, γ.
    pub updates: u64,
    /// Throughput of the run (chains/s).
    pub throughput: f64,
}

/// The estimator's starting point: the paper's initial values (α 100, β 1,000, γ 100,000),
/// away from the simulated truth, and W̄ at the reference's 880,000.
pub fn initial_estimator() -> EstimatorConfig {
    EstimatorConfig {
        local_scale: 100.0,
        remote_scale: 1_000.0,
        destinations_scale: 100_000.0,
        ..EstimatorConfig::default()
    }
}

/// Runs the experiment for every application and worker count `1..=max_workers` (at most 10).
pub fn rows(
    apps: &[Pipeline],
    setup: &Setup,
    estimator: &EstimatorConfig,
) -> Result<Vec<CoefficientRow>, SimError> {
    let mut rows = Vec::new();
    for p in apps {
        for n in 1..=setup.sim.max_workers.min(10) {
            rows.push(one(p, setup, estimator, n)?);
        }
    }
    Ok(rows)
}

fn one(
    p: &Pipeline,
    setup: &Setup,
    estimator: &EstimatorConfig,
    workers: u32,
) -> Result<CoefficientRow, SimError> {
    let stats = spec_stats(p, setup, UNTHROTTLED_RATE);
    let placement = placement_on(p, &stats, &setup.sim, UNTHROTTLED_RATE, workers)?;
    let cfg = clasp_sim::SimConfig { max_in_flight: SATURATING_IN_FLIGHT, ..setup.config() };
    let s =
        Simulation::from_spec(p, cfg, RatePattern::unthrottled(), Deployment::Static(placement))?
            .with_estimator(estimator.clone())
            .run();
    let nan = f64::NAN;
    let c =
        s.coefficients.unwrap_or(Coefficients { alpha: nan, beta: nan, gamma: nan, capacity: nan });
    Ok(CoefficientRow {
        app: p.name.clone(),
        workers,
        alpha: c.alpha,
        beta: c.beta,
        gamma: c.gamma,
        capacity: c.capacity,
        updates: s.estimator_updates,
        throughput: s.throughput,
    })
}

/// Runs the experiment on the simulator.
pub(super) fn run(o: &Options) -> Result<Output, BenchError> {
    let ctx = Ctx::cluster_only(Experiment::Coefficients, o, &super::sim_cluster(o.quick))?;
    let est = initial_estimator();
    let run_setup = ctx.setup.clone();
    let rows = ctx.per_app("coefficients", |p| rows(std::slice::from_ref(p), &run_setup, &est))?;
    let truth = ctx.setup.sim.costs;
    let mut all = Table::new(
        "coefficients",
        &[
            "app",
            "workers",
            "alpha (us)",
            "beta (us)",
            "gamma (us/s)",
            "W (us/s)",
            "estimator updates",
            "throughput (chains/s)",
        ],
    );
    for r in &rows {
        all.row(vec![
            r.app.clone(),
            r.workers.to_string(),
            num(r.alpha, 1),
            num(r.beta, 1),
            num(r.gamma, 0),
            num(r.capacity, 0),
            r.updates.to_string(),
            num(r.throughput, 1),
        ]);
    }
    let mut setup = ctx.setup_lines();
    setup.push(format!("each run {} s after the warm-up", run_setup.run_s));
    setup.push(format!(
        "CLASP's placement over exactly 1..={} workers, unthrottled with {} chains in flight; one estimator per run fed every saturated worker report, starting at alpha {}, beta {}, gamma {}, W {}",
        ctx.setup.sim.max_workers.min(10),
        SATURATING_IN_FLIGHT,
        est.local_scale,
        est.remote_scale,
        est.destinations_scale,
        est.initial_capacity
    ));
    let report = Report {
        title: "coefficients (Fig. 9): what the online estimator converges to".into(),
        setup,
        tables: vec![summary(&rows, truth), all],
        notes: notes(&rows, truth),
    };
    Ok(Output { report, charts: charts(&rows, truth) })
}

/// Rows with at least one estimator update (with one worker nothing is remote).
fn learnt(rows: &[CoefficientRow]) -> impl Iterator<Item = &CoefficientRow> {
    rows.iter().filter(|r| r.updates > 0)
}

/// Per application: mean, min and max of each coefficient over the worker counts it learnt on.
fn summary(rows: &[CoefficientRow], truth: Coefficients) -> Table {
    let mut t = Table::new(
        "coefficients-summary",
        &[
            "app",
            "worker counts learnt",
            "alpha mean (min-max) us",
            "beta mean (min-max) us",
            "gamma mean (min-max) us/s",
            "W mean (us/s)",
        ],
    );
    let span = |v: &[f64], d: usize| {
        let mean = v.iter().sum::<f64>() / v.len().max(1) as f64;
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        format!("{} ({}-{})", num(mean, d), num(lo, d), num(hi, d))
    };
    for app in distinct(rows, |r| &r.app) {
        let mine: Vec<&CoefficientRow> = learnt(rows).filter(|r| r.app == app).collect();
        let col = |f: fn(&CoefficientRow) -> f64| mine.iter().map(|r| f(r)).collect::<Vec<_>>();
        let w = col(|r| r.capacity);
        t.row(vec![
            app.clone(),
            mine.len().to_string(),
            span(&col(|r| r.alpha), 1),
            span(&col(|r| r.beta), 1),
            span(&col(|r| r.gamma), 0),
            num(w.iter().sum::<f64>() / w.len().max(1) as f64, 0),
        ]);
    }
    t.row(vec![
        "truth (simulated)".into(),
        "-".into(),
        num(truth.alpha, 1),
        num(truth.beta, 1),
        num(truth.gamma, 0),
        num(truth.capacity, 0),
    ]);
    t
}

fn charts(rows: &[CoefficientRow], truth: Coefficients) -> Vec<Chart> {
    let apps = distinct(rows, |r| &r.app);
    let counts: Vec<f64> = {
        let mut v: Vec<u32> = rows.iter().map(|r| r.workers).collect();
        v.sort_unstable();
        v.dedup();
        v.into_iter().map(f64::from).collect()
    };
    let chart = |name: &str, label: &str, unit: &str, f: fn(&CoefficientRow) -> f64, t: f64| {
        let base = Chart::line(
            &format!("Fig. 9: estimated {label} by worker count (sim)"),
            "workers",
            &format!("{label} ({unit})"),
        )
        .named(name)
        .xs(&counts);
        let c = apps.iter().fold(base, |c, app| {
            let values = counts
                .iter()
                .map(|&n| {
                    lookup(rows, |r| {
                        (r.app == *app && f64::from(r.workers) == n && r.updates > 0).then(|| f(r))
                    })
                })
                .collect();
            c.series(Series::new(app, values))
        });
        c.series(Series::new("truth", vec![t; counts.len()]))
    };
    vec![
        chart("coefficients-alpha", "alpha", "us", |r| r.alpha, truth.alpha),
        chart("coefficients-beta", "beta", "us", |r| r.beta, truth.beta),
        chart("coefficients-gamma", "gamma", "us/s", |r| r.gamma, truth.gamma),
    ]
}

fn notes(rows: &[CoefficientRow], truth: Coefficients) -> Vec<String> {
    let v: Vec<&CoefficientRow> = learnt(rows).collect();
    let mean =
        |f: fn(&CoefficientRow) -> f64| v.iter().map(|r| f(r)).sum::<f64>() / v.len().max(1) as f64;
    let err = |x: f64, t: f64| 100.0 * (x - t) / t;
    vec![
        format!(
            "Mean over every application and worker count that learnt ({} of {} runs): alpha {:.1} us ({:+.1} % from the simulated {:.1}), beta {:.1} us ({:+.1} % from {:.1}), gamma {:.0} us/s ({:+.1} % from {:.0}), W {:.0} us/s ({:+.1} % from {:.0}).",
            v.len(),
            rows.len(),
            mean(|r| r.alpha),
            err(mean(|r| r.alpha), truth.alpha),
            truth.alpha,
            mean(|r| r.beta),
            err(mean(|r| r.beta), truth.beta),
            truth.beta,
            mean(|r| r.gamma),
            err(mean(|r| r.gamma), truth.gamma),
            truth.gamma,
            mean(|r| r.capacity),
            err(mean(|r| r.capacity), truth.capacity),
            truth.capacity
        ),
        format!(
            "{} Runs on one worker have no remote requests, so beta and gamma are not identifiable there and the estimator keeps its start (0 updates).",
            super::PAPER_NOTE
        ),
    ]
}
