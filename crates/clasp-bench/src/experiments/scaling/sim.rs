//! Paper Fig. 2–3: how throughput and latency change with the number of workers.
//!
//! For every application, CLASP's placement over exactly 1, 5 and 10 workers runs under an
//! unthrottled input: its throughput is the maximum, reported relative to one worker (Fig. 2).
//! Then each runs at a fixed input of `Setup::latency_load` of the one-worker maximum (the
//! paper uses the maximum itself; here the worker's CPU is the bottleneck, so at the maximum
//! its queue never settles and queueing, not placement, decides the latency), and its p95
//! end-to-end latency is reported relative to one worker (Fig. 3).

use super::{PAPER_NOTE, PAPER_SYN, SimSettings};
use crate::engine::sim::{Ctx, Setup, max_throughput, run_static, spec_stats};
use crate::experiments::{Experiment, distinct, lookup};
use crate::plot::{Chart, Series};
use crate::report::{Output, Report, Table, num};
use crate::{BenchError, Options};
use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_sim::{SimError, placement_on};
use serde::{Deserialize, Serialize};

/// One application at one worker count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScalingRow {
    /// Application (pipeline name).
    pub app: String,
    /// Workers.
    pub workers: u32,
    /// Throughput under unthrottled input (chains/s).
    pub max_throughput: f64,
    /// Relative to one worker.
    pub throughput_ratio: f64,
    /// Input rate of the latency run (chains/s).
    pub latency_rate: f64,
    /// p95 end-to-end latency at that rate (ms).
    pub p95_ms: f64,
    /// Relative to one worker.
    pub latency_ratio: f64,
}

/// Runs the experiment for every application.
pub fn rows(apps: &[Pipeline], setup: &Setup) -> Result<Vec<ScalingRow>, SimError> {
    let mut rows = Vec::new();
    for p in apps {
        rows.extend(app(p, setup)?);
    }
    Ok(rows)
}

fn app(p: &Pipeline, setup: &Setup) -> Result<Vec<ScalingRow>, SimError> {
    let counts: Vec<u32> =
        super::WORKERS.into_iter().filter(|&w| w <= setup.sim.max_workers).collect();
    let maxima =
        counts.iter().map(|&w| max_throughput(p, setup, w)).collect::<Result<Vec<f64>, _>>()?;
    let rate = setup.latency_load * maxima[0];
    let stats = spec_stats(p, setup, rate);
    let mut p95 = Vec::new();
    for &w in &counts {
        let placement = placement_on(p, &stats, &setup.sim, rate, w)?;
        let s = run_static(p, setup, placement, RatePattern::constant(rate))?;
        p95.push(s.latency.p95_us as f64 / 1e3);
    }
    Ok(counts
        .iter()
        .enumerate()
        .map(|(i, &workers)| ScalingRow {
            app: p.name.clone(),
            workers,
            max_throughput: maxima[i],
            throughput_ratio: maxima[i] / maxima[0].max(1e-9),
            latency_rate: rate,
            p95_ms: p95[i],
            latency_ratio: p95[i] / p95[0].max(1e-9),
        })
        .collect())
}

/// Runs the experiment on the simulator.
pub(super) fn run(o: &Options) -> Result<Output, BenchError> {
    let cluster = super::sim_cluster(o.quick);
    let (ctx, own) = Ctx::new(Experiment::Scaling, o, &cluster, &SimSettings::default())?;
    let mut setup = ctx.setup.clone();
    setup.latency_load = own.load.0;
    let rows = ctx.per_app("scaling", |p| rows(std::slice::from_ref(p), &setup))?;
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
    let apps = distinct(rows, |r| &r.app);
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
    out.push(PAPER_NOTE.into());
    out
}
