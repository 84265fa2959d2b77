//! Every policy on the same input (CLASP Fig. 14, on this runtime): word count under a seeded
//! burst (or gradual) pattern, the policy deciding worker counts and placements live; per
//! policy, throughput, median and p95 latency, workers used over time and scaling steps.
//!
//! Each policy runs under this runtime's native dispatch costs and under the paper's,
//! emulated (`--set dispatch_cost=...`, see [`Regime`]; default both); every row names its
//! regime, and the ratios of CLASP to each baseline are reported per regime.

use super::attainable::{Cell, Measured};
use super::convergence::{Convergence, Step, convergence};
use super::criterion::Point;
use super::{PatternName, RuntimeSettings};
use crate::engine::runtime::testbed::Regime;
use crate::engine::runtime::{app_pipeline, sig, worker_threads};
use crate::plot::{Chart, Series};
use crate::report::{Output, Report, Table};
use crate::settings::Scope;
use crate::{BenchError, Options};
use clasp_core::SourceId;
use clasp_core::input::MemoryLines;
use clasp_core::pattern::RatePattern;
use clasp_plan::autoscaler::AutoscalerConfig;
use clasp_plan::triggers::TriggerConfig;
use clasp_plan::{PlanConfig, Policy};
use clasp_runtime::job::{self, Job};
use clasp_runtime::planner::{DiscardSink, Input, PlannerConfig};
use std::sync::Arc;

/// The pattern, its stages shortened by `scale` (so a quick run keeps the same shape).
fn pattern(
    name: PatternName,
    max_rate: f64,
    seed: u64,
    scale: f64,
) -> Result<RatePattern, BenchError> {
    let base = match name {
        PatternName::Burst => RatePattern::burst(max_rate, seed),
        PatternName::Gradual => RatePattern::gradual(max_rate, seed),
    };
    let text: String =
        base.stages().iter().map(|s| format!("{} {}\n", s.duration_s * scale, s.rate)).collect();
    RatePattern::trace(&text, name.name()).map_err(|e| BenchError::Config(e.to_string()))
}

/// One progress interval of a run: its end (s since the start) and what it measured.
struct Interval {
    t: f64,
    at: Measured,
}

/// Executor slots per worker.
const SLOTS: u32 = 3;

/// The estimator's start: this runtime's order of magnitude, plus the emulated costs (the
/// paper starts its estimator at the values it converges to).
fn estimator(regime: Regime) -> clasp_plan::estimator::EstimatorConfig {
    let native = crate::experiments::coefficients::native_estimator(SLOTS);
    match regime.cost {
        None => native,
        Some(c) => clasp_plan::estimator::EstimatorConfig {
            local_scale: native.local_scale + c.local_us,
            remote_scale: native.remote_scale + c.remote_us,
            destinations_scale: native.destinations_scale + c.fanout_us,
            ..native
        },
    }
}

/// One policy's run in one regime; returns (summary, workers over time).
fn run_policy(
    policy: Policy,
    regime: Regime,
    o: &Options,
    s: &RuntimeSettings,
    pattern: &Arc<RatePattern>,
    lines: &Arc<Vec<Vec<u8>>>,
) -> Result<(job::JobOutput, Vec<Interval>), BenchError> {
    let mut p = app_pipeline("wc")?;
    let count = p.operator_id("count").expect("wc has count");
    p.operators[count.index()].service = Some(clasp_core::pipeline::ServiceTime {
        micros: s.count_time.micros(),
        mode: clasp_core::pipeline::ServiceMode::Sleep,
        per: clasp_core::pipeline::ServicePer::Record,
    });
    let slots = SLOTS;
    let mut planner =
        PlannerConfig { batch_size: 16, max_in_flight: 2_000, ..PlannerConfig::default() };
    planner.settings.batch_size = 16;
    planner.settings.interval_ms = 500;
    planner.settings.seed = o.seed;
    planner.settings.dispatch_cost = regime.cost;
    let scaling = AutoscalerConfig {
        policy,
        plan: PlanConfig {
            slots_per_worker: slots,
            max_workers: 6,
            estimator: estimator(regime),
            headroom: s.headroom.0,
            ..PlanConfig::default()
        },
        triggers: TriggerConfig {
            warmup_requests: 200,
            cooldown_s: 5.0,
            ..TriggerConfig::default()
        },
        window_s: 3.0,
        batch_size: 16,
        latency_slo_ms: s.latency_slo.map(|t| t.micros() / 1e3),
        ..AutoscalerConfig::default()
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
        rescales: Vec::new(),
        fault: Default::default(),
    };
    let pat = pattern.clone();
    let input = Input {
        source: SourceId(0),
        reader: clasp_core::source::from_lines(
            Box::new(MemoryLines::new(lines.clone(), 0, 1)),
            None,
        ),
        rate: Box::new(move |t| Some(pat.rate_at(t))),
    };
    let mut timeline = Vec::new();
    let out = job::run(
        job,
        vec![input],
        Box::new(DiscardSink),
        None,
        |p| {
            let percentiles_ms = [p.p50_us, p.p75_us, p.p90_us, p.p95_us].map(|us| us as f64 / 1e3);
            let at = Measured { workers: p.workers, rate: p.input_rate, percentiles_ms };
            timeline.push(Interval { t: p.t, at })
        },
        |_| {},
    )
    .map_err(|e| BenchError::Run(format!("{policy} ({}): {e}", regime.label())))?;
    Ok((out, timeline))
}

/// The mean worker count over a run's intervals, weighted by their lengths (an interval that
/// ends early on a rise is shorter).
fn time_weighted_mean(timeline: &[Interval]) -> f64 {
    let (mut sum, mut from) = (0.0, 0.0);
    for i in timeline {
        sum += f64::from(i.at.workers) * (i.t - from).max(0.0);
        from = i.t;
    }
    if from > 0.0 { sum / from } else { 0.0 }
}

/// One policy's results in one regime.
struct Outcome {
    policy: Policy,
    regime: &'static str,
    throughput: f64,
    p50_ms: f64,
    p95_ms: f64,
    mean_workers: f64,
    convergence: Convergence,
    /// Its intervals, for [`super::attainable`].
    measured: Vec<Measured>,
}

/// Runs the experiment on the runtime.
pub(super) fn run(o: &Options) -> Result<Output, BenchError> {
    let s = Scope::new("end-to-end", o).one(&RuntimeSettings::preset(o.quick))?;
    let regimes = Regime::all(s.dispatch_cost);
    let max_rate = s.rate.0;
    let scale = s.pattern_scale.0;
    let count_us = s.count_time.micros();
    let name = s.pattern.name();
    let pattern = Arc::new(pattern(s.pattern, max_rate, o.seed, scale)?);
    let volume = pattern.total_volume().unwrap_or(0.0);
    let def = clasp_apps::inputs::source("wc", None)?;
    let mut g = def.generator((volume * 16.0) as u64 + 16, o.seed);
    let mut lines = Vec::new();
    let mut line = Vec::new();
    while g.next_line(&mut line).map_err(|e| BenchError::Run(e.to_string()))? {
        lines.push(line.clone());
    }
    let lines = Arc::new(lines);
    let policies: Vec<Policy> = s.policies.0.clone();
    let mut t = Table::new(
        "end_to_end",
        &[
            "dispatch costs",
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
    let mut over_time = Table::new(
        "workers_over_time",
        &[
            "dispatch costs",
            "policy",
            "time (s)",
            "workers",
            "input rate (req/s)",
            "p50 latency (ms)",
            "p95 latency (ms)",
            "p75 latency (ms)",
            "p90 latency (ms)",
        ],
    );
    let mut converged = Table::new(
        "end_to_end_convergence",
        &[
            "dispatch costs",
            "policy",
            "pattern",
            "rate changes",
            "converged in one step",
            "one-step share (%)",
            "rescalings",
        ],
    );
    let mut rescalings = Table::new(
        "end_to_end_rescalings",
        &[
            "dispatch costs",
            "policy",
            "time (s)",
            "since the stage began (s)",
            "from workers",
            "to workers",
            "reason",
            "target rate (req/s)",
            "planner (ms)",
            "longest worker pause (ms)",
            "keys moved",
            "requests moved",
        ],
    );
    let starts: Vec<f64> = pattern.stages().iter().map(|st| st.start_s).collect();
    let end = pattern.duration().unwrap_or(0.0);
    let mut progress = crate::progress::Progress::new("end-to-end", regimes.len() * policies.len());
    let mut outcomes = Vec::new();
    for &regime in &regimes {
        for &policy in &policies {
            progress.step(&format!("{} {policy}", regime.label()));
            let (out, timeline) = run_policy(policy, regime, o, &s, &pattern, &lines)?;
            let summary = &out.summary;
            let mean = time_weighted_mean(&timeline);
            let max = timeline.iter().map(|i| i.at.workers).max().unwrap_or(0);
            t.row(vec![
                regime.label().into(),
                policy.name().into(),
                sig(summary.throughput),
                sig(summary.latency.p50_us as f64 / 1e3),
                sig(summary.latency.p95_us as f64 / 1e3),
                sig(mean),
                max.to_string(),
                out.stats.scaling_events.len().to_string(),
                format!("{}/{}", summary.completed, summary.input_requests),
            ]);
            for i in &timeline {
                over_time.row(vec![
                    regime.label().into(),
                    policy.name().into(),
                    sig(i.t),
                    i.at.workers.to_string(),
                    sig(i.at.rate),
                    sig(i.at.percentiles_ms[0]),
                    sig(i.at.percentiles_ms[3]),
                    sig(i.at.percentiles_ms[1]),
                    sig(i.at.percentiles_ms[2]),
                ]);
            }
            for e in &out.stats.scaling_events {
                rescalings.row(vec![
                    regime.label().into(),
                    policy.name().into(),
                    sig(e.time_s),
                    // Empty past the pattern's end (a scale-in after the input ended).
                    pattern
                        .stage_at(e.time_s)
                        .map_or_else(String::new, |st| format!("{:.3}", e.time_s - st.start_s)),
                    e.from_workers.to_string(),
                    e.to_workers.to_string(),
                    e.reason.clone(),
                    sig(e.target_rate),
                    sig(e.planner_ms),
                    sig(e.max_worker_pause_ms),
                    e.keys_moved.to_string(),
                    e.requests_moved.to_string(),
                ]);
            }
            let steps: Vec<Step> = out
                .stats
                .scaling_events
                .iter()
                .map(|e| Step { time_s: e.time_s, to: e.to_workers })
                .collect();
            let c = convergence(&starts, end, &steps);
            converged.row(vec![
                regime.label().into(),
                policy.name().into(),
                name.into(),
                c.changes.to_string(),
                c.one_step.to_string(),
                format!("{:.1}", 100.0 * c.share()),
                c.rescalings.to_string(),
            ]);
            outcomes.push(Outcome {
                measured: timeline.iter().map(|i| i.at).collect(),
                policy,
                regime: regime.label(),
                throughput: summary.throughput,
                p50_ms: summary.latency.p50_us as f64 / 1e3,
                p95_ms: summary.latency.p95_us as f64 / 1e3,
                mean_workers: mean,
                convergence: c,
            });
        }
    }
    let mut setup = vec![
        format!("engine runtime; word count, {name} pattern up to {max_rate} requests/s of 16 lines (stages x{scale}), seed {}", o.seed),
        format!("workers as threads, {SLOTS} executor slots each, at most 6 workers; count sleeps {count_us} us per word (an executor slot per request, not a core)"),
        "same input and pattern for every policy; triggers: rate changed 2 s or lagging 3 s, warm-up 200 requests, cooldown 5 s".into(),
        format!("every policy plans a worker to {} of its capacity (headroom)", s.headroom.0),
    ];
    if let Some(slo) = s.latency_slo {
        setup.push(format!("CLASP with a latency objective: p95 within {} ms", slo.micros() / 1e3));
    }
    for r in &regimes {
        setup.push(format!("regime `{}`: {}", r.label(), r.describe()));
    }
    let cells = criterion_cells(&outcomes, &regimes);
    let report = Report {
        title: format!("Policies end to end on this runtime ({name} pattern)"),
        setup,
        tables: vec![
            t,
            ratios(&outcomes),
            super::criterion::table(
                "end_to_end_criterion",
                "dispatch costs",
                Policy::Clasp.name(),
                &cells,
            ),
            attainable(&outcomes, &cells, &pattern),
            converged,
            rescalings,
            over_time,
        ],
        notes: vec![super::PAPER_NOTE.into()],
    };
    let mut charts = charts(&outcomes, name);
    charts.extend(cells.iter().map(|(regime, points)| {
        super::criterion::chart(
            &format!("p95 latency against workers, {name}, {regime} costs (runtime)"),
            &format!("end-to-end-tradeoff-{name}-{regime}"),
            points,
        )
    }));
    Ok(Output { report, charts })
}

/// Per regime, whether any schedule of the counts the run observed could meet the criterion
/// ([`super::attainable`]).
fn attainable(
    outcomes: &[Outcome],
    cells: &[(String, Vec<Point>)],
    pattern: &RatePattern,
) -> Table {
    let stages: Vec<(f64, f64)> = pattern.stages().iter().map(|s| (s.rate, s.duration_s)).collect();
    let cells: Vec<Cell> = cells
        .iter()
        .filter_map(|(regime, points)| {
            let v = super::criterion::verdict(points, Policy::Clasp.name())?;
            Some(Cell {
                name: regime.clone(),
                measured: outcomes
                    .iter()
                    .filter(|x| x.regime == regime)
                    .flat_map(|x| x.measured.iter().copied())
                    .collect(),
                bound_ms: v.lowest_p95.p95_ms * (1.0 + super::criterion::P95_SLACK),
                fewest_workers: v.fewest.mean_workers,
                fewest_policy: v.fewest.policy.clone(),
            })
        })
        .collect();
    super::attainable::table("end_to_end_attainable", "dispatch costs", &stages, &cells)
}

/// Each regime's points on the criterion's axes ([`super::criterion`]).
fn criterion_cells(outcomes: &[Outcome], regimes: &[Regime]) -> Vec<(String, Vec<Point>)> {
    regimes
        .iter()
        .map(|r| {
            let points = outcomes
                .iter()
                .filter(|x| x.regime == r.label())
                .map(|x| Point {
                    policy: x.policy.name().into(),
                    p95_ms: x.p95_ms,
                    mean_workers: x.mean_workers,
                })
                .collect();
            (r.label().to_owned(), points)
        })
        .collect()
}

/// CLASP's throughput ratio and median-latency change against every other policy, per regime.
fn ratios(outcomes: &[Outcome]) -> Table {
    let mut t = Table::new(
        "end_to_end_ratios",
        &[
            "dispatch costs",
            "baseline",
            "CLASP throughput / baseline",
            "CLASP median latency vs baseline (%)",
        ],
    );
    for clasp in outcomes.iter().filter(|x| x.policy == Policy::Clasp) {
        for b in outcomes.iter().filter(|x| x.regime == clasp.regime && x.policy != Policy::Clasp) {
            t.row(vec![
                clasp.regime.into(),
                b.policy.name().into(),
                format!("x{}", sig(clasp.throughput / b.throughput.max(1e-9))),
                format!("{:+.0}", 100.0 * (clasp.p50_ms / b.p50_ms.max(1e-9) - 1.0)),
            ]);
        }
    }
    t
}

/// Throughput and median latency per policy, one series per regime.
fn charts(outcomes: &[Outcome], pattern: &str) -> Vec<Chart> {
    let mut policies: Vec<&str> = Vec::new();
    let mut regimes: Vec<&str> = Vec::new();
    for x in outcomes {
        if !policies.contains(&x.policy.name()) {
            policies.push(x.policy.name());
        }
        if !regimes.contains(&x.regime) {
            regimes.push(x.regime);
        }
    }
    let chart = |title: &str, name: &str, y: &str, f: fn(&Outcome) -> f64| {
        regimes.iter().fold(
            Chart::bars(title, "policy", y).named(name).categories(&policies),
            |c, regime| {
                let values = policies
                    .iter()
                    .map(|p| {
                        outcomes
                            .iter()
                            .find(|x| x.regime == *regime && x.policy.name() == *p)
                            .map_or(f64::NAN, f)
                    })
                    .collect();
                c.series(Series::new(&format!("{regime} costs"), values))
            },
        )
    };
    vec![
        chart(
            &format!("Fig. 14: throughput by policy, {pattern} (runtime)"),
            &format!("end-to-end-throughput-{pattern}"),
            "throughput (requests/s)",
            |x| x.throughput,
        ),
        chart(
            &format!("Fig. 14: median latency by policy, {pattern} (runtime)"),
            &format!("end-to-end-median-latency-{pattern}"),
            "median latency (ms)",
            |x| x.p50_ms,
        ),
        chart(
            &format!(
                "Convergence: rate changes at their stable count in one step, {pattern} (runtime)"
            ),
            &format!("end-to-end-convergence-{pattern}"),
            "one-step share (%)",
            |x| 100.0 * x.convergence.share(),
        ),
        chart(
            &format!("Rescalings by policy, {pattern} (runtime)"),
            &format!("end-to-end-rescalings-{pattern}"),
            "rescalings",
            |x| x.convergence.rescalings as f64,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::{Interval, Measured, time_weighted_mean};

    #[test]
    fn a_short_interval_weighs_by_its_length() {
        // 1 worker for 0.5 s, 1 for 0.2 s (ended early), 3 for 0.3 s and 3 for 1 s: 8.2 / 2.
        let timeline = [(0.5, 1), (0.7, 1), (1.0, 3), (2.0, 3)].map(|(t, workers)| Interval {
            t,
            at: Measured { workers, rate: 0.0, percentiles_ms: [0.0; 4] },
        });
        assert!((time_weighted_mean(&timeline) - (0.5 + 0.2 + 0.9 + 3.0) / 2.0).abs() < 1e-12);
        assert_eq!(time_weighted_mean(&[]), 0.0);
    }
}
