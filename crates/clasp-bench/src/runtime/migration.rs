//! Migration cost on this runtime (CLASP Fig. 8): planner duration (plan issued → every
//! worker done) and each worker's pause (plan received → resumed) when scaling word count
//! between worker counts with about 40,000 keys of state, while input keeps arriving.

use super::{app_pipeline, sig, worker_threads};
use crate::report::{Report, Table};
use crate::{BenchError, Options};
use clasp_core::SourceId;
use clasp_core::input::MemoryLines;
use clasp_core::rng::SeededRng;
use clasp_plan::keys::assign_keys;
use clasp_runtime::cluster::{Cluster, spread};
use clasp_runtime::planner::stats::MigrationRecord;
use clasp_runtime::planner::{DiscardSink, Input, PlannerConfig};
use clasp_runtime::routing::RoutingPlan;
use clasp_runtime::scaling::{Scaler, ScalingConfig};
use rand::{RngExt, SeedableRng};
use std::sync::Arc;

/// Lines of 10 words drawn uniformly from `keys` distinct words, so every key is seen.
fn lines(keys: u64, n: usize, seed: u64) -> Arc<Vec<Vec<u8>>> {
    let mut rng = SeededRng::seed_from_u64(seed);
    Arc::new(
        (0..n)
            .map(|i| {
                // The first lines name every key once, in order; the rest are random.
                let words: Vec<String> = (0..10)
                    .map(|j| {
                        let k = i as u64 * 10 + j;
                        if k < keys {
                            format!("key{k}")
                        } else {
                            format!("key{}", rng.random_range(0..keys.max(1)))
                        }
                    })
                    .collect();
                words.join(" ").into_bytes()
            })
            .collect(),
    )
}

/// Runs the transitions `steps` (worker counts in order, starting at the first) on a loaded
/// cluster; returns one record per transition.
fn transitions(
    steps: &[u32],
    keys: u64,
    slots: u32,
    seed: u64,
) -> Result<Vec<(u32, u32, MigrationRecord)>, BenchError> {
    let err = |e: &dyn std::fmt::Display| BenchError::Run(e.to_string());
    let p = app_pipeline("wc")?;
    let load = (keys as usize).div_ceil(10) + 1_000;
    let text = lines(keys, load + 400_000, seed);
    let mut cfg = PlannerConfig { batch_size: 64, ..PlannerConfig::default() };
    cfg.settings.batch_size = 64;
    cfg.settings.interval_ms = 250;
    let first = steps[0];
    let mut c = Cluster::start(
        p.clone(),
        cfg,
        Box::new(DiscardSink),
        worker_threads(),
        first as usize,
        slots,
    )
    .map_err(|e| err(&e))?;
    let placement = spread(&p, first, slots);
    let keys_assignment = assign_keys(&p, &placement, 1024, None);
    c.planner
        .install(RoutingPlan {
            epoch: 1,
            placement: placement.clone(),
            keys: keys_assignment.clone(),
        })
        .map_err(|e| err(&e))?;
    // Load the state: every key once, as fast as it goes.
    let warm = Arc::new(text[..load].to_vec());
    let input = Input {
        source: SourceId(0),
        reader: Box::new(MemoryLines::new(warm, 0, 1)),
        rate: Box::new(|_| None),
    };
    c.planner.run(vec![input], None, |_| {}, |_, _| Ok(())).map_err(|e| err(&e))?;
    // Then migrate while input keeps arriving at a moderate rate.
    let rest = Arc::new(text[load..].to_vec());
    let scaling = ScalingConfig {
        policy: clasp_plan::Policy::Static,
        plan: clasp_plan::PlanConfig::default(),
        triggers: Default::default(),
        estimator: Default::default(),
        window_s: 1.0,
    };
    let mut scaler = Scaler::new(scaling, placement, keys_assignment, 1);
    let mut records = Vec::new();
    let mut next = 1;
    let mut failure = None;
    let Cluster { planner, pool } = &mut c;
    let input = Input {
        source: SourceId(0),
        reader: Box::new(MemoryLines::new(rest, 0, 1)),
        rate: Box::new(|_| Some(150.0)),
    };
    let duration = std::time::Duration::from_secs_f64(0.75 * steps.len() as f64 + 1.0);
    planner
        .run(
            vec![input],
            Some(duration),
            |_| {},
            |planner, prog| {
                if next < steps.len() && prog.t > 0.75 * next as f64 && failure.is_none() {
                    let (from, to) = (steps[next - 1], steps[next]);
                    match scaler.migrate(planner, pool, &p, spread(&p, to, slots)) {
                        Ok(r) => records.push((from, to, r)),
                        Err(e) => failure = Some(e.to_string()),
                    }
                    next += 1;
                }
                Ok(())
            },
        )
        .map_err(|e| err(&e))?;
    c.shutdown().map_err(|e| err(&e))?;
    match failure {
        Some(f) => Err(BenchError::Run(f)),
        None => Ok(records),
    }
}

/// Runs the experiment.
pub fn run(o: &Options) -> Result<Report, BenchError> {
    let keys = super::number(o, "keys", 40_000.0)? as u64;
    let repeats = super::number(o, "repeats", if o.quick { 1.0 } else { 3.0 })? as usize;
    let slots = 4;
    let plans: Vec<Vec<u32>> = if o.quick {
        vec![vec![1, 3, 1]]
    } else {
        vec![vec![1, 3, 1], vec![1, 5, 10, 5, 1, 10, 1]]
    };
    let mut t = Table::new(
        "migration",
        &[
            "transition",
            "keys moved",
            "bytes moved",
            "requests moved",
            "planner (ms)",
            "max worker pause (ms)",
            "pauses by worker (ms)",
        ],
    );
    let mut rows: Vec<(u32, u32, MigrationRecord)> = Vec::new();
    for r in 0..repeats {
        for steps in &plans {
            rows.extend(transitions(steps, keys, slots, o.seed + r as u64)?);
        }
    }
    rows.sort_by_key(|(a, b, _)| (*a, *b));
    for (from, to, rec) in &rows {
        let mut pauses: Vec<(u32, f64)> =
            rec.workers.iter().map(|d| (d.worker.0, d.pause_us as f64 / 1e3)).collect();
        pauses.sort_by_key(|(w, _)| *w);
        t.row(vec![
            format!("{from} -> {to}"),
            rec.keys.to_string(),
            rec.bytes.to_string(),
            rec.requests.to_string(),
            sig(rec.planner_ms),
            sig(rec.max_worker_pause_ms),
            pauses.iter().map(|(w, p)| format!("w{w}:{}", sig(*p))).collect::<Vec<_>>().join(" "),
        ]);
    }
    Ok(Report {
        title: "Migration cost on this runtime".into(),
        setup: vec![
            format!("engine runtime; word count with {keys} distinct keys loaded on the first worker count, then migrated while input arrives at 150 requests/s (64 lines each)"),
            format!("workers as threads of one process, {slots} executor slots each, every operator spread over all workers; 1024 key groups; {repeats} repetition(s)"),
        ],
        tables: vec![t],
        notes: vec!["Paper (Faasm, Fig. 8): worker pauses within 10 ms, planner 10-20 ms. Targets here: pause <= 2 ms, planner <= 5 ms.".into()],
    })
}
