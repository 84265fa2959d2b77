//! `scaling` (paper Fig. 2–3): max throughput and p95 latency on 1, 5 and 10 workers.

use super::{Ctx, apps_of, lookup, per_app};
use crate::BenchError;
use crate::plot::{Chart, Series};
use crate::report::{Output, Report, Table, num};
use clasp_sim::experiments::scaling::{self, ScalingRow};

/// The paper's SYN figures: throughput ×3.7 and ×5.5, p95 latency ×1.5 and ×2.3 on 5 and 10
/// workers relative to one.
const PAPER_SYN: [(u32, f64, f64); 2] = [(5, 3.7, 1.5), (10, 5.5, 2.3)];

/// Runs the experiment.
pub fn run(ctx: &Ctx) -> Result<Output, BenchError> {
    let mut setup = ctx.setup.clone();
    if let Some(load) = ctx.settings.number("load") {
        setup.latency_load = load;
    }
    let rows = per_app(ctx, "scaling", |p| scaling::run(std::slice::from_ref(p), &setup))?;
    let mut table = Table::new(
        "scaling",
        &[
            "app",
            "workers",
            "max throughput (chains/s)",
            "throughput vs 1 worker",
            "latency-run rate (chains/s)",
            "p95 latency (ms)",
            "p95 vs 1 worker",
        ],
    );
    for r in &rows {
        table.row(vec![
            r.app.clone(),
            r.workers.to_string(),
            num(r.max_throughput, 1),
            num(r.throughput_ratio, 2),
            num(r.latency_rate, 1),
            num(r.p95_ms, 2),
            num(r.latency_ratio, 2),
        ]);
    }
    let mut setup_lines = ctx.setup_lines();
    setup_lines.push(format!(
        "CLASP's placement over exactly 1, 5 and 10 workers; throughput unthrottled; latency at {} of the one-worker maximum",
        setup.latency_load
    ));
    let report = Report {
        title: "scaling (Fig. 2-3): throughput and latency by cluster size".into(),
        setup: setup_lines,
        tables: vec![table],
        notes: notes(&rows),
    };
    Ok(Output { report, charts: charts(&rows) })
}

fn charts(rows: &[ScalingRow]) -> Vec<Chart> {
    let apps = apps_of(rows, |r| &r.app);
    let series = |w: u32, f: fn(&ScalingRow) -> f64| {
        let values = apps
            .iter()
            .map(|a| lookup(rows, |r| (r.app == *a && r.workers == w).then(|| f(r))))
            .collect();
        Series::new(&format!("{w} workers"), values)
    };
    let mut thr = Chart::bars(
        "Fig. 2: max throughput relative to 1 worker (sim)",
        "application",
        "throughput (x vs 1 worker)",
    )
    .named("scaling-throughput")
    .categories(&apps);
    let mut lat = Chart::bars(
        "Fig. 3: p95 latency relative to 1 worker (sim)",
        "application",
        "p95 latency (x vs 1 worker)",
    )
    .named("scaling-latency")
    .categories(&apps);
    for w in [5, 10] {
        thr = thr.series(series(w, |r| r.throughput_ratio));
        lat = lat.series(series(w, |r| r.latency_ratio));
    }
    vec![thr, lat]
}

fn notes(rows: &[ScalingRow]) -> Vec<String> {
    let mut out = Vec::new();
    for (w, thr, lat) in PAPER_SYN {
        let here = rows.iter().find(|r| r.app == "syn" && r.workers == w);
        if let Some(r) = here {
            out.push(format!(
                "SYN on {w} workers: throughput x{:.2} (paper x{thr}), p95 latency x{:.2} (paper x{lat}).",
                r.throughput_ratio, r.latency_ratio
            ));
        }
    }
    out.push(
        "Paper: throughput grows sub-linearly (SYN x3.7 on 5, x5.5 on 10 workers) and p95 latency at the one-worker maximum grows with the cluster."
            .into(),
    );
    out
}
