//! Paper Fig. 8: how long a rescaling's migration takes, for the planner and for the workers.
//!
//! Every application runs at a fixed input (`load` × its one-worker maximum, so that one
//! worker sustains it), first on one worker for `fill_s` seconds so that its state fills up,
//! then through the paper's six transitions 1 → 5 → 10 → 5 → 1 → 10 → 1, one every `gap_s`
//! seconds, each to CLASP's placement over exactly the new worker count. State size is the
//! application's own ([`StateSize`]: keys and bytes per key, e.g. from `clasp_apps::profile`).
//! The planner's duration runs from issuing the plan to the last worker's completion message;
//! a worker's from receiving the plan to resuming (the longest is reported).

use super::SimSettings;
use crate::engine::sim::{Ctx, Setup, max_throughput, spec_stats};
use crate::experiments::{Experiment, distinct};
use crate::plot::{Chart, Series};
use crate::report::{Output, Report, Table, num};
use crate::{BenchError, Options};
use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_plan::autoscaler::UNTHROTTLED_RATE;
use clasp_sim::{Deployment, SimError, Simulation, placement_on};
use serde::{Deserialize, Serialize};

/// The worker counts visited, in order: every transition of Fig. 8 once.
pub const SEQUENCE: [u32; 7] = [1, 5, 10, 5, 1, 10, 1];

/// An application's state at migration time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StateSize {
    /// Keys held by each stateful operator.
    pub keys: u64,
    /// Bytes per key.
    pub bytes_per_key: u64,
}

/// How the experiment runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MigrationSetup {
    /// Input rate as a fraction of the one-worker maximum.
    pub load: f64,
    /// Seconds on one worker before the first transition (the paper: 100).
    pub fill_s: f64,
    /// Seconds between transitions.
    pub gap_s: f64,
}

/// One transition of one application.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MigrationRow {
    /// Application.
    pub app: String,
    /// Workers before.
    pub from: u32,
    /// Workers after.
    pub to: u32,
    /// Plan issued → last completion received (ms).
    pub planner_ms: f64,
    /// Longest worker pause (ms).
    pub worker_ms: f64,
    /// Keys moved.
    pub keys_moved: u64,
    /// Queued requests moved.
    pub requests_moved: u64,
    /// Input rate (chains/s).
    pub rate: f64,
}

/// Runs the transitions for every application with its state size.
pub fn rows(
    apps: &[(Pipeline, StateSize)],
    setup: &Setup,
    m: &MigrationSetup,
) -> Result<Vec<MigrationRow>, SimError> {
    let mut rows = Vec::new();
    for (p, state) in apps {
        rows.extend(one(p, *state, setup, m)?);
    }
    Ok(rows)
}

fn one(
    p: &Pipeline,
    state: StateSize,
    setup: &Setup,
    m: &MigrationSetup,
) -> Result<Vec<MigrationRow>, SimError> {
    let rate = m.load * max_throughput(p, setup, 1)?;
    // Placements that use exactly n workers: planned for more than any n sustain.
    let stats = spec_stats(p, setup, UNTHROTTLED_RATE);
    let mut cfg = setup.sim.clone();
    cfg.state_keys = state.keys;
    cfg.bytes_per_key = state.bytes_per_key;
    cfg.warmup_s = 0.0;
    cfg.duration_s = m.fill_s + m.gap_s * SEQUENCE.len() as f64;
    let start = placement_on(p, &stats, &cfg, UNTHROTTLED_RATE, SEQUENCE[0])?;
    let schedule = SEQUENCE[1..]
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let placement = placement_on(p, &stats, &cfg, UNTHROTTLED_RATE, n)?;
            Ok((m.fill_s + m.gap_s * i as f64, placement))
        })
        .collect::<Result<Vec<_>, SimError>>()?;
    let s = Simulation::from_spec(p, cfg, RatePattern::constant(rate), Deployment::Static(start))?
        .with_rescales(schedule)
        .run();
    Ok(s.scaling_events
        .iter()
        .map(|e| MigrationRow {
            app: p.name.clone(),
            from: e.from_workers,
            to: e.to_workers,
            planner_ms: e.planner_ms,
            worker_ms: e.max_worker_pause_ms,
            keys_moved: e.keys_moved,
            requests_moved: e.requests_moved,
            rate,
        })
        .collect())
}

/// The transitions in the order of the paper's Fig. 8.
const TRANSITIONS: [(u32, u32); 6] = [(1, 5), (5, 1), (5, 10), (10, 5), (1, 10), (10, 1)];

/// Runs the experiment on the simulator.
pub(super) fn run(o: &Options) -> Result<Output, BenchError> {
    let cluster = super::sim_cluster(o.quick);
    let (ctx, s) = Ctx::new(Experiment::Migration, o, &cluster, &SimSettings::preset(o.quick))?;
    if ctx.setup.sim.max_workers < 10 {
        return Err(BenchError::Config(format!(
            "migration visits 1, 5 and 10 workers; --set workers={} is too few",
            ctx.setup.sim.max_workers
        )));
    }
    let ctx = &ctx;
    let m = MigrationSetup { load: s.load.0, fill_s: s.fill.secs(), gap_s: s.gap.secs() };
    let repeats = s.repeats.get();
    let rate = s.rate.map(|r| r.0);
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
            if let Some(rate) = rate {
                m.load = rate / max_throughput(p, &setup, 1)?.max(1e-9);
            }
            rows.extend(self::rows(&[(p.clone(), state)], &setup, &m)?);
        }
    }
    let mut setup = ctx.setup_lines();
    setup.push(format!(
        "input at {} of the one-worker maximum{}; {} s on one worker, then 1 -> 5 -> 10 -> 5 -> 1 -> 10 -> 1 every {} s; {repeats} run(s) per application, seeds {}..",
        m.load,
        rate.map_or(String::new(), |r| format!(" ({r} chains/s given)")),
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
    let rate = m.load * max_throughput(p, &ctx.setup, 1)?;
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
    for app in distinct(rows, |r| &r.app) {
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
    let apps = distinct(rows, |r| &r.app);
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
