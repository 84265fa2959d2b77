//! `coefficients` (paper Fig. 9): the α, β, γ and W̄ the online estimator converges to, per
//! application on 1–10 workers, fed the simulated saturated workers' reports.

use super::{Ctx, apps_of, lookup, per_app};
use crate::BenchError;
use crate::plot::{Chart, Series};
use crate::report::{Output, Report, Table, num};
use clasp_core::stats::Coefficients;
use clasp_sim::experiments::coefficients::{self, CoefficientRow, initial_estimator};

/// Runs the experiment.
pub fn run(ctx: &Ctx) -> Result<Output, BenchError> {
    let est = initial_estimator();
    let mut run_setup = ctx.setup.clone();
    // Long runs: the estimator needs many saturated reports from differing workers.
    run_setup.run_s =
        ctx.settings.number("run-s").unwrap_or(if ctx.opts.quick { 120.0 } else { 600.0 });
    let rows = per_app(ctx, "coefficients", |p| {
        coefficients::run(std::slice::from_ref(p), &run_setup, &est)
    })?;
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
        coefficients::SATURATING_IN_FLIGHT,
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
    for app in apps_of(rows, |r| &r.app) {
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
    let apps = apps_of(rows, |r| &r.app);
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
        "Paper (Faasm testbed): estimates average alpha 38.5, beta 275, gamma 51,500, W 850,000; per application they vary within about +-5 %. Runs on one worker have no remote requests, so beta and gamma are not identifiable there and the estimator keeps its start (0 updates)."
            .into(),
    ]
}
