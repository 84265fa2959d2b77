//! `scaling` on the runtime (CLASP Fig. 2–3): maximum throughput (unthrottled) and p95
//! latency of CLASP's placement over exactly 1, 2, … workers, relative to one worker, under
//! native and emulated (the paper's) dispatch costs, on the emulated testbed
//! ([`crate::engine::runtime::testbed`]).

use super::{PAPER_SYN, RuntimeSettings};
use crate::engine::runtime::sig;
use crate::engine::runtime::testbed::{
    Measured, NativeCosts, Regime, Testbed, TestbedSettings, UNTHROTTLED_RATE,
};
use crate::plot::{Chart, Series};
use crate::progress::Progress;
use crate::report::{Output, Report, Table, num};
use crate::{BenchError, Options};

/// One application at one worker count in one regime.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Application.
    pub app: String,
    /// `native` or `emulated`.
    pub regime: &'static str,
    /// Workers.
    pub workers: u32,
    /// Unthrottled throughput (chains/s).
    pub max_throughput: f64,
    /// Relative to one worker.
    pub throughput_ratio: f64,
    /// Input rate of the latency run (chains/s).
    pub latency_rate: f64,
    /// Median latency at that rate (ms).
    pub p50_ms: f64,
    /// p95 latency at that rate (ms).
    pub p95_ms: f64,
    /// Relative to one worker.
    pub latency_ratio: f64,
    /// Remote share of chained requests in the unthrottled run.
    pub remote_share: f64,
    /// Cores the process used in the unthrottled run.
    pub cpu_cores: f64,
}

/// Runs the experiment on the runtime.
pub(super) fn run(o: &Options) -> Result<Output, BenchError> {
    let (settings, own) = TestbedSettings::read(
        "scaling",
        o,
        &super::testbed(o.quick),
        &RuntimeSettings::preset(o.quick),
    )?;
    let apps = settings.apps.0.clone();
    let mut counts = own.workers.0;
    if counts[0] != 1 {
        // Everything is relative to one worker.
        counts.insert(0, 1);
    }
    let load = own.load.0;
    let beds = Testbed::each_regime(&settings, o.seed, NativeCosts::NOMINAL);
    let regimes: Vec<Regime> = beds.iter().map(|b| b.regime).collect();
    let mut progress = Progress::new("scaling", apps.len() * beds.len() * counts.len());
    let mut rows = Vec::new();
    for app in &apps {
        for bed in &beds {
            rows.extend(app_rows(app, bed, &counts, load, &mut progress)?);
        }
    }
    let mut setup = beds[0].setup_lines(o.quick);
    for r in &regimes {
        setup.push(format!("regime `{}`: {}", r.label(), r.describe()));
    }
    setup.push(format!(
        "CLASP's placement over exactly {} workers (the paper: 1, 5, 10); throughput unthrottled ({} chains in flight per executor slot); latency at {load} of the one-worker maximum",
        counts.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
        beds[0].unthrottled_in_flight
    ));
    let report = Report {
        title: "scaling (Fig. 2-3) on the runtime: throughput and latency by cluster size".into(),
        setup,
        tables: vec![table(&rows)],
        notes: notes(&rows),
    };
    Ok(Output { report, charts: charts(&rows, &counts) })
}

/// Every worker count of one application in one regime (the first is one worker).
fn app_rows(
    app: &str,
    bed: &Testbed,
    counts: &[u32],
    load: f64,
    progress: &mut Progress,
) -> Result<Vec<Row>, BenchError> {
    let p = bed.pipeline(app)?;
    let mut maxima: Vec<Measured> = Vec::new();
    for &w in counts {
        progress.step(&format!("{app} {} {w} worker(s)", bed.regime.label()));
        let placement = bed.clasp_on(&p, UNTHROTTLED_RATE, w)?;
        maxima.push(bed.run(&p, &placement, None)?);
    }
    let rate = load * maxima[0].throughput;
    let mut rows: Vec<Row> = Vec::new();
    for (m, &w) in maxima.iter().zip(counts) {
        let placement = bed.clasp_on(&p, rate, w)?;
        let lat = bed.run(&p, &placement, Some(rate))?;
        let first = rows.first().map_or(lat.p95_ms, |r: &Row| r.p95_ms);
        rows.push(Row {
            app: app.to_owned(),
            regime: bed.regime.label(),
            workers: w,
            max_throughput: m.throughput,
            throughput_ratio: m.throughput / maxima[0].throughput.max(1e-9),
            latency_rate: rate,
            p50_ms: lat.p50_ms,
            p95_ms: lat.p95_ms,
            latency_ratio: lat.p95_ms / first.max(1e-9),
            remote_share: m.remote_share,
            cpu_cores: m.cpu_cores.max(lat.cpu_cores),
        });
    }
    Ok(rows)
}

fn table(rows: &[Row]) -> Table {
    let mut t = Table::new(
        "scaling",
        &[
            "app",
            "dispatch costs",
            "workers",
            "max throughput (chains/s)",
            "throughput vs 1 worker",
            "remote share (%)",
            "latency-run rate (chains/s)",
            "p50 latency (ms)",
            "p95 latency (ms)",
            "p95 vs 1 worker",
            "CPU (cores)",
        ],
    );
    for r in rows {
        t.row(vec![
            r.app.clone(),
            r.regime.into(),
            r.workers.to_string(),
            num(r.max_throughput, 1),
            num(r.throughput_ratio, 2),
            num(100.0 * r.remote_share, 1),
            num(r.latency_rate, 1),
            num(r.p50_ms, 2),
            num(r.p95_ms, 2),
            num(r.latency_ratio, 2),
            num(r.cpu_cores, 2),
        ]);
    }
    t
}

fn charts(rows: &[Row], counts: &[u32]) -> Vec<Chart> {
    let xs: Vec<f64> = counts.iter().map(|&w| f64::from(w)).collect();
    let mut keys: Vec<(String, &'static str)> = Vec::new();
    for r in rows {
        if !keys.iter().any(|(a, g)| *a == r.app && *g == r.regime) {
            keys.push((r.app.clone(), r.regime));
        }
    }
    let series = |f: fn(&Row) -> f64| {
        keys.iter()
            .map(|(app, regime)| {
                let values = xs
                    .iter()
                    .map(|&x| {
                        rows.iter()
                            .find(|r| {
                                r.app == *app && r.regime == *regime && f64::from(r.workers) == x
                            })
                            .map_or(f64::NAN, f)
                    })
                    .collect();
                Series::new(&format!("{app} {regime}"), values)
            })
            .collect::<Vec<_>>()
    };
    let thr = Chart::line(
        "Fig. 2: max throughput relative to 1 worker (runtime)",
        "workers",
        "throughput (x vs 1 worker)",
    )
    .named("scaling-throughput")
    .xs(&xs);
    let lat = Chart::line(
        "Fig. 3: p95 latency relative to 1 worker (runtime)",
        "workers",
        "p95 latency (x vs 1 worker)",
    )
    .named("scaling-latency")
    .xs(&xs);
    let ideal = Series::new("ideal (linear)", xs.iter().map(|x| x / xs[0]).collect());
    let thr = series(|r| r.throughput_ratio).into_iter().fold(thr.series(ideal), Chart::series);
    let lat = series(|r| r.latency_ratio).into_iter().fold(lat, Chart::series);
    vec![thr, lat]
}

fn notes(rows: &[Row]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for regime in [Regime::native().label(), Regime::paper().label()] {
        let syn: Vec<&Row> = rows.iter().filter(|r| r.app == "syn" && r.regime == regime).collect();
        if let Some(last) = syn.last().filter(|r| r.workers > 1) {
            out.push(format!(
                "SYN, {regime} costs: throughput x{} on {} workers ({} % of linear), p95 latency x{} at {} chains/s.",
                sig(last.throughput_ratio),
                last.workers,
                num(100.0 * last.throughput_ratio / f64::from(last.workers), 0),
                sig(last.latency_ratio),
                num(last.latency_rate, 0)
            ));
        }
    }
    let paper: Vec<String> = PAPER_SYN
        .iter()
        .map(|(w, t, l)| format!("x{t} throughput and x{l} p95 on {w} workers"))
        .collect();
    out.push(format!(
        "Paper (Faasm, SYN): {}. Native costs here are ~100-500x below Faasm's, so only the emulated regime can show the paper's sub-linear scaling; both regimes run on the same emulated slots.",
        paper.join(", ")
    ));
    if let Some(hot) = rows.iter().map(|r| r.cpu_cores).reduce(f64::max).filter(|c| *c > 1.5) {
        out.push(format!(
            "Caution: a run used {hot:.2} of this machine's 2 cores; beyond about 1.5 the real CPU, not the emulated slots, starts to bound throughput."
        ));
    }
    out
}
