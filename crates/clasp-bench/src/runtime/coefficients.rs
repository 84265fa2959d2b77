//! What the online estimator (Eq. 2–4) converges to on this runtime (CLASP Fig. 9): each
//! application runs unthrottled on 1, 2, … workers (CLASP's placement over that many), and
//! the saturated workers' reports of all runs feed one estimator, as the planner's would.

use super::{app_pipeline, sig, worker_threads};
use crate::report::{Report, Table};
use crate::{BenchError, Options};
use clasp_core::SourceId;
use clasp_core::input::MemoryLines;
use clasp_core::stats::Coefficients;
use clasp_plan::estimator::{Estimator, EstimatorConfig, Observation};
use clasp_plan::keys::assign_keys;
use clasp_plan::policy::clasp_on_workers;
use clasp_plan::{PlanConfig, PlanInput, Policy};
use clasp_runtime::cluster::Cluster;
use clasp_runtime::planner::{DiscardSink, Input, PlannerConfig};
use clasp_runtime::routing::RoutingPlan;
use std::sync::Arc;

/// The estimator's starting point on this runtime (its normalization constants).
pub fn native_estimator(slots: u32) -> EstimatorConfig {
    EstimatorConfig {
        local_scale: 0.2,
        remote_scale: 1.0,
        destinations_scale: 100.0,
        load_scale: f64::from(slots) * 1e6,
        initial_capacity: f64::from(slots) * 1e6,
        min_remote_rate: 0.0,
        ..EstimatorConfig::default()
    }
}

/// The input lines of `app`'s first source.
fn input_lines(app: &str, count: u64, seed: u64) -> Result<Arc<Vec<Vec<u8>>>, BenchError> {
    let def = clasp_apps::inputs::source(app, None).map_err(BenchError::Config)?;
    let mut g = def.generator(count, seed);
    let mut lines = Vec::new();
    let mut line = Vec::new();
    while g.next_line(&mut line).map_err(|e| BenchError::Run(e.to_string()))? {
        lines.push(line.clone());
    }
    Ok(Arc::new(lines))
}

/// Runs `app` saturated on `workers` workers for `secs` seconds, feeding `est`.
fn saturate(
    app: &str,
    workers: u32,
    secs: f64,
    lines: &Arc<Vec<Vec<u8>>>,
    est: &mut Estimator,
    o: &Options,
) -> Result<usize, BenchError> {
    let err = |e: &dyn std::fmt::Display| BenchError::Run(e.to_string());
    let p = app_pipeline(app)?;
    let slots = 4;
    let plan = PlanConfig { slots_per_worker: slots, ..PlanConfig::default() };
    let stats = clasp_plan::projection::spec_observation(&p, 1_000.0, &plan, &Coefficients::PAPER);
    let input = PlanInput {
        pipeline: &p,
        stats: &stats,
        target_rate: 1_000.0,
        coefficients: Coefficients::PAPER,
        config: &plan,
        current: None,
    };
    let placement =
        clasp_on_workers(Policy::Clasp, &input, workers).map_err(|e| err(&e))?.placement;
    let mut cfg = PlannerConfig { batch_size: 16, ..PlannerConfig::default() };
    cfg.settings.batch_size = 16;
    cfg.settings.interval_ms = 500;
    cfg.settings.seed = o.seed;
    // Saturation as the planner sees it: deep queues that make requests wait.
    cfg.settings.saturation_queue = 50.0;
    cfg.settings.saturation_wait_ms = 20.0;
    let mut c = Cluster::start(
        p.clone(),
        cfg,
        Box::new(DiscardSink),
        worker_threads(),
        workers as usize,
        slots,
    )
    .map_err(|e| err(&e))?;
    let keys = assign_keys(&p, &placement, 1024, None);
    c.planner.install(RoutingPlan { epoch: 1, placement, keys }).map_err(|e| err(&e))?;
    let input = Input {
        source: SourceId(0),
        reader: Box::new(MemoryLines::new(lines.clone(), 0, 1)),
        rate: Box::new(|_| None),
    };
    c.planner
        .run(vec![input], Some(std::time::Duration::from_secs_f64(secs)), |_| {}, |_, _| Ok(()))
        .map_err(|e| err(&e))?;
    let mut used = 0;
    for (_, r) in c.planner.reports.all() {
        if r.saturated {
            let s = r.interval_s.max(1e-9);
            let obs = Observation {
                exec_load: r.exec_load(),
                local_rate: r.local as f64 / s,
                remote_rate: r.remote as f64 / s,
                remote_destinations: f64::from(r.destinations),
            };
            est.observe(r.worker.0, &obs);
            used += 1;
        }
    }
    c.shutdown().map_err(|e| err(&e))?;
    Ok(used)
}

/// Runs the experiment.
pub fn run(o: &Options) -> Result<Report, BenchError> {
    let apps: Vec<String> = match o.setting("apps") {
        Some(list) => list.split(',').map(str::to_owned).collect(),
        None if o.quick => vec!["wc".into(), "syn".into()],
        None => vec!["wc".into(), "syn".into(), "sd".into(), "pl".into()],
    };
    let max_workers = super::number(o, "workers", if o.quick { 3.0 } else { 5.0 })? as u32;
    let secs = super::number(o, "seconds", if o.quick { 3.0 } else { 8.0 })?;
    let mut t = Table::new(
        "coefficients",
        &[
            "app",
            "workers (cumulative)",
            "saturated observations",
            "alpha (us)",
            "beta (us)",
            "gamma (us/s)",
            "W (us/s)",
        ],
    );
    for app in &apps {
        let lines = input_lines(app, 400_000, o.seed)?;
        let mut est = Estimator::new(native_estimator(4));
        let mut seen = 0;
        for n in 1..=max_workers {
            seen += saturate(app, n, secs, &lines, &mut est, o)?;
            let c = est.coefficients();
            t.row(vec![
                app.clone(),
                format!("1..={n}"),
                seen.to_string(),
                sig(c.alpha),
                sig(c.beta),
                sig(c.gamma),
                sig(c.capacity),
            ]);
        }
    }
    Ok(Report {
        title: "Coefficients the estimator converges to on this runtime".into(),
        setup: vec![
            format!("engine runtime; each app unthrottled for {secs} s on 1..={max_workers} workers (threads, 4 slots each, CLASP placement over that many), 16 records per request"),
            "one estimator fed every saturated worker report of all runs (queue > 50 and wait > 20 ms); it starts from alpha 0.2, beta 1, gamma 100, W 4e6".into(),
        ],
        tables: vec![t],
        notes: vec!["Paper (Faasm, Fig. 9): alpha about 38.5 us, beta about 275 us, gamma about 51,500 us/s, W about 850,000 us/s.".into()],
    })
}
