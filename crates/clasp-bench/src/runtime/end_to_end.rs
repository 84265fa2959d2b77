//! Every policy on the same input (CLASP Fig. 14, on this runtime): word count under a seeded
//! burst (or gradual) pattern, the policy deciding worker counts and placements live; per
//! policy, throughput, median and p95 latency, workers used over time and scaling steps.

use super::{app_pipeline, sig, worker_threads};
use crate::report::{Report, Table};
use crate::{BenchError, Options};
use clasp_core::SourceId;
use clasp_core::input::MemoryLines;
use clasp_core::pattern::RatePattern;
use clasp_plan::controller::TriggerConfig;
use clasp_plan::{PlanConfig, Policy};
use clasp_runtime::job::{self, Job};
use clasp_runtime::planner::{DiscardSink, Input, PlannerConfig};
use clasp_runtime::scaling::ScalingConfig;
use std::sync::Arc;

/// The pattern, its stages shortened by `scale` (so a quick run keeps the same shape).
fn pattern(name: &str, max_rate: f64, seed: u64, scale: f64) -> Result<RatePattern, BenchError> {
    let base = match name {
        "burst" => RatePattern::burst(max_rate, seed),
        "gradual" => RatePattern::gradual(max_rate, seed),
        other => {
            return Err(BenchError::Config(format!("--set pattern={other}: use burst or gradual")));
        }
    };
    let text: String =
        base.stages().iter().map(|s| format!("{} {}\n", s.duration_s * scale, s.rate)).collect();
    RatePattern::trace(&text, name).map_err(|e| BenchError::Config(e.to_string()))
}

/// Workers in use at each interval.
type Timeline = Vec<(f64, u32)>;

/// One policy's run; returns (summary, workers over time).
fn run_policy(
    policy: Policy,
    o: &Options,
    pattern: &Arc<RatePattern>,
    lines: &Arc<Vec<Vec<u8>>>,
) -> Result<(job::JobOutput, Timeline), BenchError> {
    let mut p = app_pipeline("wc")?;
    let count = p.operator_id("count").expect("wc has count");
    p.operators[count.index()].service = Some(clasp_core::pipeline::ServiceTime {
        micros: super::number(o, "count_us", 50.0)?,
        mode: clasp_core::pipeline::ServiceMode::Sleep,
        per: clasp_core::pipeline::ServicePer::Record,
    });
    let slots = 3;
    let mut planner =
        PlannerConfig { batch_size: 16, max_in_flight: 2_000, ..PlannerConfig::default() };
    planner.settings.batch_size = 16;
    planner.settings.interval_ms = 500;
    planner.settings.seed = o.seed;
    let scaling = ScalingConfig {
        policy,
        plan: PlanConfig { slots_per_worker: slots, max_workers: 6, ..PlanConfig::default() },
        triggers: TriggerConfig {
            warmup_requests: 200,
            cooldown_s: 5.0,
            ..TriggerConfig::default()
        },
        estimator: super::coefficients::native_estimator(slots),
        window_s: 3.0,
    };
    let job = Job {
        pipeline: p,
        workers: 1,
        slots,
        planner,
        launch: worker_threads(),
        placement: None,
        scaling,
        duration: pattern.duration().map(std::time::Duration::from_secs_f64),
        initial_rate: 100.0,
    };
    let pat = pattern.clone();
    let input = Input {
        source: SourceId(0),
        reader: Box::new(MemoryLines::new(lines.clone(), 0, 1)),
        rate: Box::new(move |t| Some(pat.rate_at(t))),
    };
    let mut timeline = Vec::new();
    let out = job::run(
        job,
        vec![input],
        Box::new(DiscardSink),
        None,
        |p| timeline.push((p.t, p.workers)),
        |_| {},
    )
    .map_err(|e| BenchError::Run(format!("{policy}: {e}")))?;
    Ok((out, timeline))
}

/// Runs the experiment.
pub fn run(o: &Options) -> Result<Report, BenchError> {
    let max_rate = super::number(o, "rate", 800.0)?;
    let scale = super::number(o, "stage_scale", if o.quick { 0.25 } else { 1.0 })?;
    let name = o.setting("pattern").unwrap_or("burst");
    let pattern = Arc::new(pattern(name, max_rate, o.seed, scale)?);
    let volume = pattern.total_volume().unwrap_or(0.0);
    let def = clasp_apps::inputs::source("wc", None).map_err(BenchError::Config)?;
    let mut g = def.generator((volume * 16.0) as u64 + 16, o.seed);
    let mut lines = Vec::new();
    let mut line = Vec::new();
    while g.next_line(&mut line).map_err(|e| BenchError::Run(e.to_string()))? {
        lines.push(line.clone());
    }
    let lines = Arc::new(lines);
    let policies: Vec<Policy> = match o.setting("policies") {
        Some(list) => list
            .split(',')
            .map(|s| s.parse::<Policy>().map_err(|e| BenchError::Config(e.to_string())))
            .collect::<Result<_, _>>()?,
        None => clasp_sim::experiments::end_to_end::POLICIES.to_vec(),
    };
    let mut t = Table::new(
        "end_to_end",
        &[
            "policy",
            "throughput (req/s)",
            "p50 latency (ms)",
            "p95 latency (ms)",
            "mean workers",
            "max workers",
            "scaling steps",
            "completed",
        ],
    );
    let mut over_time = Table::new("workers_over_time", &["policy", "time (s)", "workers"]);
    for policy in policies {
        let (out, timeline) = run_policy(policy, o, &pattern, &lines)?;
        let s = &out.summary;
        let mean =
            timeline.iter().map(|(_, w)| f64::from(*w)).sum::<f64>() / timeline.len().max(1) as f64;
        let max = timeline.iter().map(|(_, w)| *w).max().unwrap_or(0);
        t.row(vec![
            policy.name().into(),
            sig(s.throughput),
            sig(s.latency.p50_us as f64 / 1e3),
            sig(s.latency.p95_us as f64 / 1e3),
            sig(mean),
            max.to_string(),
            out.stats.scaling_events.len().to_string(),
            format!("{}/{}", s.completed, s.input_requests),
        ]);
        for (time, w) in timeline {
            over_time.row(vec![policy.name().into(), sig(time), w.to_string()]);
        }
    }
    Ok(Report {
        title: format!("Policies end to end on this runtime ({name} pattern)"),
        setup: vec![
            format!("engine runtime; word count, {name} pattern up to {max_rate} requests/s of 16 lines (stages x{scale}), seed {}", o.seed),
            "workers as threads, 3 executor slots each, at most 6 workers; count sleeps 50 us per word (an executor slot per request, not a core)".into(),
            "same input and pattern for every policy; triggers: rate changed 2 s or lagging 3 s, warm-up 200 requests, cooldown 5 s".into(),
        ],
        tables: vec![t, over_time],
        notes: vec!["Paper (Fig. 14): CLASP up to 2.5x FaaSFlow's and 3.3x Zhang24's throughput, median latency -75 % / -76 %.".into()],
    })
}
