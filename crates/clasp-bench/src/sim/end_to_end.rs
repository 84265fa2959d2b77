//! `end-to-end` (paper Fig. 14): every policy (with the -SP ablations) driving the cluster
//! through a burst and a gradual input: throughput, median and p95 latency, workers used.

use super::{Ctx, apps_of, lookup, per_app};
use crate::BenchError;
use crate::plot::{Chart, Series};
use crate::report::{Output, Report, Table, num};
use clasp_sim::experiments::end_to_end::{self, EndToEndRow, POLICIES};

/// Runs the experiment.
pub fn run(ctx: &Ctx) -> Result<Output, BenchError> {
    let policies = ctx.settings.policies(&POLICIES);
    let mut setup = ctx.setup.clone();
    if let Some(s) = ctx.settings.number("pattern-scale") {
        setup.pattern_scale = s;
    }
    let rows = per_app(ctx, "end-to-end", |p| {
        end_to_end::run(std::slice::from_ref(p), &setup, &policies)
    })?;
    let first = policies[0].name();
    let mut table = Table::new(
        "end-to-end",
        &[
            "app",
            "pattern",
            "policy",
            "max rate (chains/s)",
            "throughput (chains/s)",
            "p50 (ms)",
            "p95 (ms)",
            "mean workers",
            "rescalings",
            &format!("{first} throughput / this"),
            &format!("{first} p50 vs this (%)"),
        ],
    );
    for r in &rows {
        table.row(vec![
            r.app.clone(),
            r.pattern.clone(),
            r.policy.clone(),
            num(r.max_rate, 1),
            num(r.throughput, 1),
            num(r.p50_ms, 2),
            num(r.p95_ms, 2),
            num(r.mean_workers, 2),
            r.scaling_steps.to_string(),
            num(r.reference_throughput_ratio, 2),
            num(100.0 * r.reference_p50_change, 1),
        ]);
    }
    let mut lines = ctx.setup_lines();
    lines.push(format!(
        "burst and gradual patterns up to each application's maximum on {} workers (CLASP's placement), stages {} x the paper's 5-10 s; every policy starts on one worker, first decision after 10,000 inputs (or the first 5 s of input, if fewer); the runtime's triggers",
        ctx.setup.sim.max_workers.min(10),
        setup.pattern_scale
    ));
    let report = Report {
        title: "end-to-end (Fig. 14): burst and gradual input under each policy".into(),
        setup: lines,
        tables: vec![ratios(&rows, first), table],
        notes: notes(&rows, first),
    };
    Ok(Output { report, charts: charts(&rows) })
}

/// Per baseline: CLASP's throughput ratio and median-latency change, best and mean.
fn ratios(rows: &[EndToEndRow], first: &str) -> Table {
    let mut t = Table::new(
        "end-to-end-ratios",
        &[
            "baseline",
            &format!("{first} throughput ratio, max"),
            "mean",
            &format!("{first} p50 change (%), best"),
            "mean",
            "baseline mean workers",
            &format!("{first} mean workers"),
        ],
    );
    for pol in apps_of(rows, |r| &r.policy).iter().filter(|p| p.as_str() != first) {
        let mine: Vec<&EndToEndRow> = rows.iter().filter(|r| &r.policy == pol).collect();
        let mean = |f: fn(&EndToEndRow) -> f64| {
            mine.iter().map(|r| f(r)).sum::<f64>() / mine.len().max(1) as f64
        };
        let ours: Vec<&EndToEndRow> = rows.iter().filter(|r| r.policy == first).collect();
        let ours_workers =
            ours.iter().map(|r| r.mean_workers).sum::<f64>() / ours.len().max(1) as f64;
        t.row(vec![
            pol.clone(),
            num(mine.iter().map(|r| r.reference_throughput_ratio).fold(0.0, f64::max), 2),
            num(mean(|r| r.reference_throughput_ratio), 2),
            num(
                100.0 * mine.iter().map(|r| r.reference_p50_change).fold(f64::INFINITY, f64::min),
                1,
            ),
            num(100.0 * mean(|r| r.reference_p50_change), 1),
            num(mean(|r| r.mean_workers), 2),
            num(ours_workers, 2),
        ]);
    }
    t
}

fn charts(rows: &[EndToEndRow]) -> Vec<Chart> {
    let apps = apps_of(rows, |r| &r.app);
    let policies = apps_of(rows, |r| &r.policy);
    let chart = |pattern: &str, what: &str, y: &str, f: fn(&EndToEndRow) -> f64| {
        let base =
            Chart::bars(&format!("Fig. 14: {what}, {pattern} input (sim)"), "application", y)
                .named(&format!("end-to-end-{}-{pattern}", crate::plot::slug(what)))
                .categories(&apps);
        policies.iter().fold(base, |c, pol| {
            let v = apps
                .iter()
                .map(|a| {
                    lookup(rows, |r| {
                        (r.app == *a && r.policy == *pol && r.pattern == pattern).then(|| f(r))
                    })
                })
                .collect();
            c.series(Series::new(pol, v))
        })
    };
    let mut out = Vec::new();
    for pattern in ["burst", "gradual"] {
        out.push(chart(pattern, "throughput", "throughput (chains/s)", |r| r.throughput));
        out.push(chart(pattern, "median latency", "p50 latency (ms)", |r| r.p50_ms));
    }
    out
}

fn notes(rows: &[EndToEndRow], first: &str) -> Vec<String> {
    let best = |pol: &str, f: fn(&EndToEndRow) -> f64, max: bool| {
        let v = rows.iter().filter(|r| r.policy == pol).map(f);
        if max { v.fold(0.0, f64::max) } else { v.fold(f64::INFINITY, f64::min) }
    };
    let mut out: Vec<String> = apps_of(rows, |r| &r.policy)
        .iter()
        .filter(|p| p.as_str() != first)
        .map(|pol| {
            format!(
                "vs {pol}: {first} reaches up to x{:.2} its throughput and changes its median latency by down to {:+.0} %.",
                best(pol, |r| r.reference_throughput_ratio, true),
                100.0 * best(pol, |r| r.reference_p50_change, false)
            )
        })
        .collect();
    out.push("Paper: up to x2.5 the throughput of FaaSFlow and x3.3 of Zhang24; median latency up to 75 % (FaaSFlow) and 76 % (Zhang24) lower; Zhang24-SP matches CLASP's throughput with more workers.".into());
    out
}
