//! `migration` (paper Fig. 8): planner and worker durations of the transitions 1↔5, 5↔10 and
//! 1↔10, every application, with the state each application really accumulates.

use super::{Ctx, apps_of, sim_err};
use crate::BenchError;
use crate::plot::{Chart, Series};
use crate::report::{Output, Report, Table, num};
use clasp_core::Pipeline;
use clasp_sim::experiments::max_throughput;
use clasp_sim::experiments::migration::{self, MigrationRow, MigrationSetup, StateSize};

/// The transitions in the order of the paper's Fig. 8.
const TRANSITIONS: [(u32, u32); 6] = [(1, 5), (5, 1), (5, 10), (10, 5), (1, 10), (10, 1)];

/// Runs the experiment.
pub fn run(ctx: &Ctx) -> Result<Output, BenchError> {
    let s = &ctx.settings;
    let quick = ctx.opts.quick;
    let m = MigrationSetup {
        load: s.number("load").unwrap_or(0.5),
        fill_s: s.number("fill-s").unwrap_or(if quick { 10.0 } else { 100.0 }),
        gap_s: s.number("gap-s").unwrap_or(if quick { 2.0 } else { 10.0 }),
    };
    let repeats = s.number("repeats").map_or(if quick { 1 } else { 5 }, |n| n as u64);
    let mut progress = ctx.progress("migration", ctx.apps.len() * repeats as usize);
    let mut rows = Vec::new();
    let mut states = Table::new(
        "migration-state",
        &["app", "inputs profiled", "keys per stateful operator", "bytes per key"],
    );
    for p in &ctx.apps {
        let (state, inputs) = state_size(ctx, p, &m)?;
        states.row(vec![
            p.name.clone(),
            inputs.to_string(),
            state.keys.to_string(),
            state.bytes_per_key.to_string(),
        ]);
        for r in 0..repeats {
            progress.step(&format!("{} run {}", p.name, r + 1));
            let mut setup = ctx.setup.clone();
            setup.sim.seed = ctx.opts.seed + r;
            let mut m = m;
            if let Some(rate) = s.number("rate") {
                m.load = rate / max_throughput(p, &setup, 1).map_err(sim_err)?.max(1e-9);
            }
            rows.extend(migration::run(&[(p.clone(), state)], &setup, &m).map_err(sim_err)?);
        }
    }
    let mut setup = ctx.setup_lines();
    setup.push(format!(
        "input at {} of the one-worker maximum{}; {} s on one worker, then 1 -> 5 -> 10 -> 5 -> 1 -> 10 -> 1 every {} s; {repeats} run(s) per application, seeds {}..",
        m.load,
        s.number("rate").map_or(String::new(), |r| format!(" ({r} chains/s given)")),
        m.fill_s,
        m.gap_s,
        ctx.opts.seed
    ));
    setup.push("state per application from running its real operators on as many generated inputs as the fill period offers (clasp_apps::profile); sent at 10 Gbit/s".into());
    let table = summary(&rows);
    let report = Report {
        title: "migration (Fig. 8): planner and worker durations".into(),
        setup,
        tables: vec![table, states],
        notes: notes(&rows),
    };
    Ok(Output { report, charts: charts(&rows) })
}

/// The state an application holds after the fill period: its real operators run on the
/// inputs the fill period offers.
fn state_size(ctx: &Ctx, p: &Pipeline, m: &MigrationSetup) -> Result<(StateSize, u64), BenchError> {
    let rate = m.load * max_throughput(p, &ctx.setup, 1).map_err(sim_err)?;
    let inputs = (rate * m.fill_s).ceil().max(1.0) as u64;
    let profile = clasp_apps::profile::run(&p.name, inputs, ctx.opts.seed)
        .map_err(|e| BenchError::Run(format!("profiling {}: {e}", p.name)))?;
    let stateful: Vec<_> = profile.operators.iter().filter(|o| o.stateful).collect();
    let keys: usize = stateful.iter().map(|o| o.keys).sum();
    let bytes: usize = stateful.iter().map(|o| o.state_bytes).sum();
    let state = StateSize {
        keys: (keys / stateful.len().max(1)) as u64,
        bytes_per_key: bytes.checked_div(keys).map_or(64, |b| b.max(1) as u64),
    };
    Ok((state, profile.inputs))
}

/// Mean and max durations per application and transition over the repeats.
fn summary(rows: &[MigrationRow]) -> Table {
    let mut t = Table::new(
        "migration",
        &[
            "app",
            "transition",
            "planner mean (ms)",
            "planner max (ms)",
            "worker mean (ms)",
            "worker max (ms)",
            "keys moved",
            "requests moved",
            "runs",
        ],
    );
    for app in apps_of(rows, |r| &r.app) {
        for (from, to) in TRANSITIONS {
            let mine: Vec<&MigrationRow> =
                rows.iter().filter(|r| r.app == app && r.from == from && r.to == to).collect();
            if mine.is_empty() {
                continue;
            }
            let n = mine.len() as f64;
            let mean = |f: fn(&MigrationRow) -> f64| mine.iter().map(|r| f(r)).sum::<f64>() / n;
            let max = |f: fn(&MigrationRow) -> f64| mine.iter().map(|r| f(r)).fold(0.0, f64::max);
            t.row(vec![
                app.clone(),
                format!("{from}->{to}"),
                num(mean(|r| r.planner_ms), 2),
                num(max(|r| r.planner_ms), 2),
                num(mean(|r| r.worker_ms), 2),
                num(max(|r| r.worker_ms), 2),
                num(mean(|r| r.keys_moved as f64), 0),
                num(mean(|r| r.requests_moved as f64), 0),
                mine.len().to_string(),
            ]);
        }
    }
    t
}

fn mean_of(rows: &[MigrationRow], app: &str, t: (u32, u32), f: fn(&MigrationRow) -> f64) -> f64 {
    let v: Vec<f64> = rows.iter().filter(|r| r.app == app && (r.from, r.to) == t).map(f).collect();
    if v.is_empty() { f64::NAN } else { v.iter().sum::<f64>() / v.len() as f64 }
}

fn charts(rows: &[MigrationRow]) -> Vec<Chart> {
    let apps = apps_of(rows, |r| &r.app);
    let labels: Vec<String> = TRANSITIONS.iter().map(|(a, b)| format!("{a}->{b}")).collect();
    let chart = |title: &str, name: &str, y: &str, f: fn(&MigrationRow) -> f64| {
        apps.iter().fold(
            Chart::bars(title, "transition (workers)", y).named(name).categories(&labels),
            |c, app| {
                let values = TRANSITIONS.iter().map(|&t| mean_of(rows, app, t, f)).collect();
                c.series(Series::new(app, values))
            },
        )
    };
    vec![
        chart(
            "Fig. 8: planner migration duration (sim)",
            "migration-planner",
            "planner duration (ms)",
            |r| r.planner_ms,
        ),
        chart(
            "Fig. 8: worker migration duration (sim)",
            "migration-worker",
            "longest worker pause (ms)",
            |r| r.worker_ms,
        ),
    ]
}

fn notes(rows: &[MigrationRow]) -> Vec<String> {
    let all: Vec<f64> = rows.iter().map(|r| r.planner_ms).collect();
    let workers: Vec<f64> = rows.iter().map(|r| r.worker_ms).collect();
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let up: Vec<f64> = rows.iter().filter(|r| r.to > r.from).map(|r| r.planner_ms).collect();
    let down: Vec<f64> = rows.iter().filter(|r| r.to < r.from).map(|r| r.planner_ms).collect();
    vec![
        format!(
            "Planner duration: mean {:.2} ms, max {:.2} ms (paper: typically 10-20 ms, up to ~70 ms); longest worker pause: mean {:.2} ms, max {:.2} ms (paper: most within 10 ms).",
            mean(&all),
            max(&all),
            mean(&workers),
            max(&workers)
        ),
        format!(
            "Scaling up takes {:.2} ms on average, scaling down {:.2} ms (paper: up takes longer).",
            mean(&up),
            mean(&down)
        ),
    ]
}
