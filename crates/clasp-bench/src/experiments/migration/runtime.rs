//! Migration cost on this runtime (CLASP Fig. 8): planner duration (plan issued → every
//! worker done) and each worker's pause (plan received → resumed) when scaling word count
//! between worker counts with about 40,000 keys of state, while input keeps arriving.

use super::RuntimeSettings;
use crate::engine::runtime::{app_pipeline, sig, worker_threads};
use crate::report::{Output, Report, Table};
use crate::settings::Scope;
use crate::{BenchError, Options};
use clasp_core::SourceId;
use clasp_core::input::MemoryLines;
use clasp_core::rng::SeededRng;
use clasp_plan::keys::assign_keys;
use clasp_runtime::cluster::{Cluster, spread};
use clasp_runtime::planner::stats::MigrationRecord;
use clasp_runtime::planner::{DiscardSink, Input, PlannerConfig};
use clasp_runtime::routing::RoutingPlan;
use clasp_runtime::scaling::ScalingLoop;
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
    queued: u64,
) -> Result<Vec<(u32, u32, MigrationRecord)>, BenchError> {
    let err = |e: &dyn std::fmt::Display| BenchError::Run(e.to_string());
    let mut p = app_pipeline("wc")?;
    let load = (keys as usize).div_ceil(10) + 1_000;
    let text = lines(keys, load + 400_000, seed);
    // With a backlog asked for, one line per request and counting slowed down to 200 µs per
    // request, so the unthrottled input piles up requests at the workers.
    let batch = if queued > 0 { 1 } else { 64 };
    let mut cfg = PlannerConfig { batch_size: batch, ..PlannerConfig::default() };
    cfg.settings.batch_size = batch;
    cfg.settings.interval_ms = 250;
    if queued > 0 {
        cfg.max_in_flight = queued as usize + queued as usize / 2;
        let count = p.operator_id("count").expect("wc has count");
        p.operators[count.index()].service = Some(clasp_core::pipeline::ServiceTime {
            micros: 200.0,
            mode: clasp_core::pipeline::ServiceMode::Sleep,
            per: clasp_core::pipeline::ServicePer::Request,
        });
    }
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
        reader: clasp_core::source::from_lines(Box::new(MemoryLines::new(warm, 0, 1)), None),
        rate: Box::new(|_| None),
    };
    c.planner.run(vec![input], None, |_| {}, |_, _| Ok(())).map_err(|e| err(&e))?;
    // Then migrate while input keeps arriving at a moderate rate.
    // A backlog needs only what fills the queues once and keeps them full through the
    // transitions (each starts as soon as the queues hold `queued` again).
    let end =
        if queued > 0 { (load + 2 * queued as usize + 10_000).min(text.len()) } else { text.len() };
    let rest = Arc::new(text[load..end].to_vec());
    let scaling = clasp_plan::AutoscalerConfig::with_policy(clasp_plan::Policy::Static);
    let mut scaler =
        ScalingLoop::new(scaling, &p, placement, keys_assignment, 1).map_err(|e| err(&e))?;
    let mut records = Vec::new();
    let mut next = 1;
    let mut failure = None;
    let Cluster { planner, pool } = &mut c;
    let input = Input {
        source: SourceId(0),
        reader: clasp_core::source::from_lines(Box::new(MemoryLines::new(rest, 0, 1)), None),
        rate: Box::new(move |_| (queued == 0).then_some(150.0)),
    };
    let duration = std::time::Duration::from_secs_f64(0.75 * steps.len() as f64 + 1.0);
    let due = |prog: &clasp_runtime::planner::Progress, next: usize| {
        if queued > 0 {
            prog.worker_queues.iter().sum::<u64>() >= queued
        } else {
            prog.t > 0.75 * next as f64
        }
    };
    planner
        .run(
            vec![input],
            (queued == 0).then_some(duration),
            |_| {},
            |planner, prog| {
                if next < steps.len() && due(prog, next) && failure.is_none() {
                    let (from, to) = (steps[next - 1], steps[next]);
                    match scaler.rescale_to(planner, pool, spread(&p, to, slots)) {
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

/// Runs the experiment on the runtime.
pub(super) fn run(o: &Options) -> Result<Output, BenchError> {
    let s = Scope::new("migration", o).one(&RuntimeSettings::preset(o.quick))?;
    let (keys, repeats, queued) = (s.keys.get(), s.repeats.usize(), s.queued.get());
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
            rows.extend(transitions(steps, keys, slots, o.seed + r as u64, queued)?);
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
    Ok(Output::from(Report {
        title: "Migration cost on this runtime".into(),
        setup: vec![
            format!(
                "engine runtime; word count with {keys} distinct keys loaded on the first worker count, then migrated while input arrives at 150 requests/s (64 lines each)"
            ),
            format!(
                "workers as threads of one process, {slots} executor slots each, every operator spread over all workers; 1024 key groups; {repeats} repetition(s)"
            ),
            if queued > 0 {
                format!(
                    "each transition starts with at least {queued} requests queued at the workers (one line per request, counting slowed to 200 us per request, unthrottled input)"
                )
            } else {
                "nothing queued beyond what a moderate input leaves".into()
            },
        ],
        tables: vec![t],
        notes: vec![format!("{} Targets here: pause <= 2 ms, planner <= 5 ms.", super::PAPER_NOTE)],
    }))
}
