//! Paper Fig. 14: each policy driving the cluster through a burst and a gradual input.
//!
//! The maximum rate of both patterns is the application's maximum throughput with CLASP on
//! ten workers; the patterns are seeded, so every policy sees the same input. Each policy
//! starts on one worker, takes its first decision as the runtime does (within 2 s, sooner when
//! the cluster falls behind; the paper's 10,000 requests with `first_decision = paper`), scales
//! with the runtime's triggers, and is measured over the whole run: throughput, median and p95
//! end-to-end latency, workers used (time-weighted mean) and scaling steps. Ratios are
//! relative to the first policy (CLASP).

use super::convergence::{Convergence, Step, convergence};
use super::criterion::Point;
use super::floor::{behind_floor_share, floor_workers};
use super::{FirstDecision, SimSettings};
use crate::engine::sim::{Ctx, Setup, elastic_config, maxima, run_elastic};
use crate::experiments::worker_count::Maxima;
use crate::experiments::{Experiment, distinct, lookup};
use crate::plot::{Chart, Series};
use crate::report::{Output, Report, Table, num};
use crate::{BenchError, Options};
use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_plan::Policy;
use clasp_plan::autoscaler::AutoscalerConfig;
use clasp_sim::SimError;
use serde::{Deserialize, Serialize};

/// One application, pattern and policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EndToEndRow {
    /// Application.
    pub app: String,
    /// `burst` or `gradual`.
    pub pattern: String,
    /// Policy.
    pub policy: String,
    /// Maximum rate of the pattern (chains/s).
    pub max_rate: f64,
    /// Chains completed per second.
    pub throughput: f64,
    /// Median latency (ms).
    pub p50_ms: f64,
    /// 95th percentile latency (ms).
    pub p95_ms: f64,
    /// Time-weighted mean of workers in use.
    pub mean_workers: f64,
    /// Time-weighted mean of the fewest workers that keep up with the pattern
    /// ([`super::floor`]).
    pub floor_workers: f64,
    /// Share of the run with fewer workers than the rate offered then needs.
    pub behind_floor_share: f64,
    /// Rescalings.
    pub scaling_steps: usize,
    /// Throughput of the first policy over this one's.
    pub reference_throughput_ratio: f64,
    /// Median latency of the first policy relative to this one's, minus one (−0.76: 76 % lower).
    pub reference_p50_change: f64,
    /// The pattern's rate changes and how many reached their stable count in one step
    /// ([`super::convergence`]).
    pub convergence: Convergence,
}

/// The autoscaler settings every policy of a run shares, where they differ from the defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tuning {
    /// Plan to drain a backlog within this time (the triggers' `catch_up_s`).
    pub catch_up_s: f64,
    /// Carry a scale-in out only if it is still decided this long after it first was.
    pub scale_in_delay_s: f64,
    /// CLASP's latency objective (ms), if any.
    pub latency_slo_ms: Option<f64>,
    /// When the first decision comes.
    pub first_decision: FirstDecision,
}

impl Default for Tuning {
    fn default() -> Self {
        let defaults = AutoscalerConfig::default();
        Self {
            catch_up_s: defaults.triggers.catch_up_s,
            scale_in_delay_s: defaults.scale_in_delay_s,
            latency_slo_ms: defaults.latency_slo_ms,
            first_decision: FirstDecision::default(),
        }
    }
}

/// Runs the experiment for every application, both patterns and every policy, each with the
/// autoscaler settings of `tuning`.
pub fn rows(
    apps: &[Pipeline],
    setup: &Setup,
    policies: &[Policy],
    tuning: Tuning,
) -> Result<Vec<EndToEndRow>, SimError> {
    let mut rows = Vec::new();
    for p in apps {
        let maxima = maxima(p, setup, setup.sim.max_workers.min(10))?;
        let max_rate = maxima.on_most_workers();
        let seed = setup.sim.seed;
        let patterns = [
            ("burst", RatePattern::burst(max_rate, seed)),
            ("gradual", RatePattern::gradual(max_rate, seed)),
        ];
        for (name, pattern) in patterns {
            let pattern = setup.pattern(&pattern);
            rows.extend(one(p, setup, policies, tuning, name, &pattern, &maxima)?);
        }
    }
    Ok(rows)
}

fn one(
    p: &Pipeline,
    setup: &Setup,
    policies: &[Policy],
    tuning: Tuning,
    name: &str,
    pattern: &RatePattern,
    maxima: &Maxima,
) -> Result<Vec<EndToEndRow>, SimError> {
    let max_rate = maxima.on_most_workers();
    let floor = floor_workers(pattern, maxima);
    let duration = pattern.duration().unwrap_or(setup.run_s);
    let warmup = match tuning.first_decision {
        FirstDecision::AtOnce => 0,
        // The paper's 10,000 requests, or what the first 5 s of the pattern offer if fewer.
        FirstDecision::Paper => {
            pattern.volume_until(5.0 * setup.pattern_scale).clamp(100.0, 10_000.0) as u64
        }
    };
    let starts: Vec<f64> = pattern.stages().iter().map(|st| st.start_s).collect();
    let mut rows: Vec<EndToEndRow> = Vec::new();
    for &policy in policies {
        let mut autoscaler = elastic_config(setup, policy, warmup);
        autoscaler.triggers.catch_up_s = tuning.catch_up_s;
        autoscaler.scale_in_delay_s = tuning.scale_in_delay_s;
        autoscaler.latency_slo_ms = tuning.latency_slo_ms;
        let s = run_elastic(p, setup, autoscaler, pattern.clone(), duration)?;
        let steps: Vec<Step> =
            s.scaling_events.iter().map(|e| Step { time_s: e.time_s, to: e.to_workers }).collect();
        let (p50, p95) = (s.latency.p50_us as f64 / 1e3, s.latency.p95_us as f64 / 1e3);
        let (ref_thr, ref_p50) =
            rows.first().map_or((s.throughput, p50), |r| (r.throughput, r.p50_ms));
        rows.push(EndToEndRow {
            app: p.name.clone(),
            pattern: name.to_owned(),
            policy: policy.name().to_owned(),
            max_rate,
            throughput: s.throughput,
            p50_ms: p50,
            p95_ms: p95,
            mean_workers: s.mean_workers,
            floor_workers: floor,
            behind_floor_share: behind_floor_share(pattern, maxima, &s.timeline),
            scaling_steps: s.scaling_events.len(),
            reference_throughput_ratio: ref_thr / s.throughput.max(1e-9),
            reference_p50_change: ref_p50 / p50.max(1e-9) - 1.0,
            convergence: convergence(&starts, duration, &steps),
        });
    }
    Ok(rows)
}

/// Runs the experiment on the simulator.
pub(super) fn run(o: &Options) -> Result<Output, BenchError> {
    let cluster = super::sim_cluster(o.quick);
    let (ctx, own) = Ctx::new(Experiment::EndToEnd, o, &cluster, &SimSettings::preset(o.quick))?;
    let policies = own.policies.0;
    let mut setup = ctx.setup.clone();
    setup.pattern_scale = own.pattern_scale.0;
    let tuning = Tuning {
        catch_up_s: own.catch_up.secs(),
        scale_in_delay_s: own.scale_in_delay.secs(),
        latency_slo_ms: own.latency_slo.map(|t| t.micros() / 1e3),
        first_decision: own.first_decision,
    };
    let rows =
        ctx.per_app("end-to-end", |p| rows(std::slice::from_ref(p), &setup, &policies, tuning))?;
    let first = policies[0].name();
    let mut table = Table::new(
        "end-to-end",
        &[
            "app",
            "pattern",
            "policy",
            "max rate (chains/s)",
            "throughput (chains/s)",
            "p50 (ms)",
            "p95 (ms)",
            "mean workers",
            "floor workers",
            "time behind the floor (%)",
            "rescalings",
            &format!("{first} throughput / this"),
            &format!("{first} p50 vs this (%)"),
        ],
    );
    for r in &rows {
        table.row(vec![
            r.app.clone(),
            r.pattern.clone(),
            r.policy.clone(),
            num(r.max_rate, 1),
            num(r.throughput, 1),
            num(r.p50_ms, 2),
            num(r.p95_ms, 2),
            num(r.mean_workers, 2),
            num(r.floor_workers, 2),
            num(100.0 * r.behind_floor_share, 1),
            r.scaling_steps.to_string(),
            num(r.reference_throughput_ratio, 2),
            num(100.0 * r.reference_p50_change, 1),
        ]);
    }
    let mut lines = ctx.setup_lines();
    lines.push(format!(
        "burst and gradual patterns up to each application's maximum on {} workers (CLASP's placement), stages {} x the paper's 5-10 s; every policy starts on one worker, first decision after 10,000 inputs (or the first 5 s of input, if fewer); the runtime's triggers",
        ctx.setup.sim.max_workers.min(10),
        setup.pattern_scale
    ));
    if let Some(slo) = tuning.latency_slo_ms {
        lines.push(format!("CLASP with a latency objective: p95 within {slo} ms"));
    }
    let cells = criterion_cells(&rows);
    let report = Report {
        title: "end-to-end (Fig. 14): burst and gradual input under each policy".into(),
        setup: lines,
        tables: vec![
            ratios(&rows, first),
            summary(&rows),
            super::criterion::table("end-to-end-criterion", "pattern", first, &cells),
            table,
            convergence_table(&rows),
        ],
        notes: notes(&rows, first),
    };
    let mut charts = charts(&rows);
    charts.extend(convergence_charts(&rows));
    charts.extend(cells.iter().map(|(pattern, points)| {
        super::criterion::chart(
            &format!(
                "p95 latency against workers, {pattern} input, mean of the applications (sim)"
            ),
            &format!("end-to-end-tradeoff-{pattern}"),
            points,
        )
    }));
    Ok(Output { report, charts })
}

/// Per baseline: CLASP's throughput ratio and median-latency change, best and mean.
fn ratios(rows: &[EndToEndRow], first: &str) -> Table {
    let mut t = Table::new(
        "end-to-end-ratios",
        &[
            "baseline",
            &format!("{first} throughput ratio, max"),
            "mean",
            &format!("{first} p50 change (%), best"),
            "mean",
            "baseline mean workers",
            &format!("{first} mean workers"),
        ],
    );
    for pol in distinct(rows, |r| &r.policy).iter().filter(|p| p.as_str() != first) {
        let mine: Vec<&EndToEndRow> = rows.iter().filter(|r| &r.policy == pol).collect();
        let mean = |f: fn(&EndToEndRow) -> f64| mean_of(&mine, f);
        let ours: Vec<&EndToEndRow> = rows.iter().filter(|r| r.policy == first).collect();
        let ours_workers = mean_of(&ours, |r| r.mean_workers);
        t.row(vec![
            pol.clone(),
            num(mine.iter().map(|r| r.reference_throughput_ratio).fold(0.0, f64::max), 2),
            num(mean(|r| r.reference_throughput_ratio), 2),
            num(
                100.0 * mine.iter().map(|r| r.reference_p50_change).fold(f64::INFINITY, f64::min),
                1,
            ),
            num(100.0 * mean(|r| r.reference_p50_change), 1),
            num(mean(|r| r.mean_workers), 2),
            num(ours_workers, 2),
        ]);
    }
    t
}

/// The mean of `f` over `rows` (0 when there are none).
fn mean_of(rows: &[&EndToEndRow], f: fn(&EndToEndRow) -> f64) -> f64 {
    rows.iter().map(|r| f(r)).sum::<f64>() / rows.len().max(1) as f64
}

/// The rows of one pattern and policy (one per application).
fn of<'a>(rows: &'a [EndToEndRow], pattern: &str, policy: &str) -> Vec<&'a EndToEndRow> {
    rows.iter().filter(|r| r.pattern == pattern && r.policy == policy).collect()
}

/// Per pattern and policy, means over the applications: p95 latency, workers against the
/// floor, time behind it.
fn summary(rows: &[EndToEndRow]) -> Table {
    let mut t = Table::new(
        "end-to-end-summary",
        &[
            "pattern",
            "policy",
            "mean p95 (ms)",
            "mean workers",
            "floor workers",
            "time behind the floor (%)",
        ],
    );
    for pattern in ["burst", "gradual"] {
        for pol in distinct(rows, |r| &r.policy) {
            let mine = of(rows, pattern, &pol);
            let mean = |f: fn(&EndToEndRow) -> f64| mean_of(&mine, f);
            t.row(vec![
                pattern.to_owned(),
                pol,
                num(mean(|r| r.p95_ms), 0),
                num(mean(|r| r.mean_workers), 2),
                num(mean(|r| r.floor_workers), 2),
                num(100.0 * mean(|r| r.behind_floor_share), 1),
            ]);
        }
    }
    t
}

/// Each pattern's points on the criterion's axes ([`super::criterion`]): the means over the
/// applications.
fn criterion_cells(rows: &[EndToEndRow]) -> Vec<(String, Vec<Point>)> {
    ["burst", "gradual"]
        .iter()
        .map(|&pattern| {
            let points = distinct(rows, |r| &r.policy)
                .into_iter()
                .map(|pol| {
                    let mine = of(rows, pattern, &pol);
                    Point {
                        p95_ms: mean_of(&mine, |r| r.p95_ms),
                        mean_workers: mean_of(&mine, |r| r.mean_workers),
                        policy: pol,
                    }
                })
                .collect();
            (pattern.to_owned(), points)
        })
        .collect()
}

fn charts(rows: &[EndToEndRow]) -> Vec<Chart> {
    let apps = distinct(rows, |r| &r.app);
    let policies = distinct(rows, |r| &r.policy);
    let chart = |pattern: &str, what: &str, y: &str, f: fn(&EndToEndRow) -> f64| {
        let base =
            Chart::bars(&format!("Fig. 14: {what}, {pattern} input (sim)"), "application", y)
                .named(&format!("end-to-end-{}-{pattern}", crate::plot::slug(what)))
                .categories(&apps);
        policies.iter().fold(base, |c, pol| {
            let v = apps
                .iter()
                .map(|a| {
                    lookup(rows, |r| {
                        (r.app == *a && r.policy == *pol && r.pattern == pattern).then(|| f(r))
                    })
                })
                .collect();
            c.series(Series::new(pol, v))
        })
    };
    let mut out = Vec::new();
    for pattern in ["burst", "gradual"] {
        out.push(chart(pattern, "throughput", "throughput (chains/s)", |r| r.throughput));
        out.push(chart(pattern, "median latency", "p50 latency (ms)", |r| r.p50_ms));
    }
    out
}

fn notes(rows: &[EndToEndRow], first: &str) -> Vec<String> {
    let best = |pol: &str, f: fn(&EndToEndRow) -> f64, max: bool| {
        let v = rows.iter().filter(|r| r.policy == pol).map(f);
        if max { v.fold(0.0, f64::max) } else { v.fold(f64::INFINITY, f64::min) }
    };
    let mut out: Vec<String> = distinct(rows, |r| &r.policy)
        .iter()
        .filter(|p| p.as_str() != first)
        .map(|pol| {
            format!(
                "vs {pol}: {first} reaches up to x{:.2} its throughput and changes its median latency by down to {:+.0} %.",
                best(pol, |r| r.reference_throughput_ratio, true),
                100.0 * best(pol, |r| r.reference_p50_change, false)
            )
        })
        .collect();
    out.push(super::PAPER_NOTE.into());
    out
}

/// Per policy (over every application, then per application): the gradual pattern's rate
/// changes that converged in one step, and the rescalings under each pattern.
fn convergence_table(rows: &[EndToEndRow]) -> Table {
    let mut t = Table::new(
        "end-to-end-convergence",
        &[
            "app",
            "policy",
            "gradual rate changes",
            "converged in one step",
            "one-step share (%)",
            "rescalings, burst",
            "rescalings, gradual",
        ],
    );
    let mut apps = vec!["all".to_owned()];
    apps.extend(distinct(rows, |r| &r.app));
    for app in &apps {
        for pol in distinct(rows, |r| &r.policy) {
            let of = |pattern: &str| total(rows, app, &pol, pattern);
            let (gradual, burst) = (of("gradual"), of("burst"));
            t.row(vec![
                app.clone(),
                pol.clone(),
                gradual.changes.to_string(),
                gradual.one_step.to_string(),
                num(100.0 * gradual.share(), 1),
                burst.rescalings.to_string(),
                gradual.rescalings.to_string(),
            ]);
        }
    }
    t
}

/// The convergence counts of `policy` under `pattern`, summed over `app` (`all`: every one).
fn total(rows: &[EndToEndRow], app: &str, policy: &str, pattern: &str) -> Convergence {
    let mut c = Convergence::default();
    for r in rows
        .iter()
        .filter(|r| (app == "all" || r.app == app) && r.policy == policy && r.pattern == pattern)
    {
        c.add(r.convergence);
    }
    c
}

/// The one-step share of the gradual pattern's rate changes per application and policy, and
/// the rescalings per policy under each pattern (every application).
fn convergence_charts(rows: &[EndToEndRow]) -> Vec<Chart> {
    let mut apps = distinct(rows, |r| &r.app);
    apps.push("all".into());
    let policies = distinct(rows, |r| &r.policy);
    let share = policies.iter().fold(
        Chart::bars(
            "Convergence: gradual rate changes at their stable count in one step (sim)",
            "application",
            "one-step share (%)",
        )
        .named("end-to-end-convergence")
        .categories(&apps),
        |c, pol| {
            let v = apps.iter().map(|a| 100.0 * total(rows, a, pol, "gradual").share()).collect();
            c.series(Series::new(pol, v))
        },
    );
    let rescalings = ["burst", "gradual"].iter().fold(
        Chart::bars("Rescalings per pattern, every application (sim)", "policy", "rescalings")
            .named("end-to-end-rescalings")
            .categories(&policies),
        |c, pattern| {
            let v = policies
                .iter()
                .map(|pol| total(rows, "all", pol, pattern).rescalings as f64)
                .collect();
            c.series(Series::new(pattern, v))
        },
    );
    vec![share, rescalings]
}
