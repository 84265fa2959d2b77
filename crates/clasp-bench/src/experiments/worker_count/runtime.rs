//! `worker-count` on the runtime (CLASP Fig. 11–13), reduced: predicted vs observed optimal
//! worker counts on the emulated testbed ([`crate::engine::runtime::testbed`]).
//!
//! For every application, CLASP's placement over exactly `n` workers runs unthrottled for
//! `n = 1..=N` (N = 3 quick, 6 full; the paper: 10); the largest throughput is the
//! application's maximum and the rate levels are fractions of it (3 levels quick, 6 full; the
//! paper: 10). The observed optimal worker count (OOWC) of a level is the fewest workers whose
//! maximum reaches it. Then every policy runs elastically at each source level on a live
//! cluster — starting on one worker, its first decision after the warm-up, its own placement
//! for the rest of the run — and, from the statistics and estimates it decides with at the
//! end of the run, predicts the worker count of every other level. Errors and their means are
//! those of the simulator's experiment ([`super`]).

use super::{
    Mae, Maxima, PAPER_NOTE, RuntimeSettings, Transition, errors, mae_of, mean_workers, pct,
};
use crate::engine::runtime::testbed::{
    self, NativeCosts, Testbed, TestbedSettings, UNTHROTTLED_RATE,
};
use crate::plot::{Chart, Series};
use crate::progress::Progress;
use crate::report::{Output, Report, Table, num};
use crate::{BenchError, Options};
use clasp_core::Pipeline;
use clasp_plan::autoscaler::AutoscalerConfig;
use clasp_plan::triggers::TriggerConfig;
use clasp_plan::{PlanConfig, PlanInput, Policy};
use clasp_runtime::cluster::Cluster;
use clasp_runtime::planner::PlannerError;
use clasp_runtime::scaling::{ScalingError, ScalingLoop};
use std::time::Duration;

/// The settings of one run of the experiment.
struct Plan {
    apps: Vec<String>,
    policies: Vec<Policy>,
    max_workers: u32,
    levels: Vec<f64>,
}

/// Runs the experiment on the runtime.
pub(super) fn run(o: &Options) -> Result<Output, BenchError> {
    let (settings, own) = TestbedSettings::read(
        "worker-count",
        o,
        &super::testbed(o.quick),
        &RuntimeSettings::preset(o.quick),
    )?;
    let plan = Plan {
        apps: settings.apps.0.clone(),
        policies: own.policies.0,
        max_workers: own.workers.u32(),
        levels: super::levels(own.levels.u32()),
    };
    let beds = Testbed::each_regime(&settings, o.seed, NativeCosts::NOMINAL);
    let steps = plan.apps.len()
        * beds.len()
        * (plan.max_workers as usize + plan.policies.len() * plan.levels.len());
    let mut progress = Progress::new("worker-count", steps);
    let mut results = Vec::new();
    for bed in &beds {
        let mut all = Results::default();
        for app in &plan.apps {
            let p = bed.pipeline(app)?;
            let maxima = maxima(&p, bed, plan.max_workers, &mut progress)?;
            for &policy in &plan.policies {
                all.transitions.extend(transitions(
                    &p,
                    bed,
                    policy,
                    &maxima,
                    &plan,
                    &mut progress,
                )?);
            }
            all.maxima.push(maxima);
        }
        all.mae = errors(&all.transitions, &plan.policies);
        results.push((bed.regime.label(), all));
    }
    let mut setup = beds[0].setup_lines(o.quick);
    for b in &beds {
        setup.push(format!("regime `{}`: {}", b.regime.label(), b.regime.describe()));
    }
    setup.push(format!(
        "REDUCED: maxima over 1..={} workers (paper 10), {} levels ({} % of the maximum; paper 10), applications {}; each policy runs elastically at every level for {} s (first decision after {} s of input), plans to full capacity (headroom 1, as the simulator's worker-count) and predicts every other level",
        plan.max_workers,
        plan.levels.len(),
        plan.levels.iter().map(|l| format!("{:.0}", 100.0 * l)).collect::<Vec<_>>().join(", "),
        plan.apps.join(", "),
        elastic_secs(&beds[0]),
        beds[0].warmup_s
    ));
    let report = Report {
        title: "worker-count (Fig. 11-13) on the runtime, reduced: predicted vs observed optimal worker count".into(),
        setup,
        tables: tables(&results, &plan),
        notes: notes(&results, &plan.policies),
    };
    Ok(Output { report, charts: charts(&results, &plan) })
}

/// Transitions, maxima and mean absolute errors of one regime.
#[derive(Debug, Default)]
struct Results {
    maxima: Vec<Maxima>,
    transitions: Vec<Transition>,
    mae: Vec<Mae>,
}

/// CLASP's unthrottled throughput over exactly 1..=`max_workers` workers.
fn maxima(
    p: &Pipeline,
    bed: &Testbed,
    max_workers: u32,
    progress: &mut Progress,
) -> Result<Maxima, BenchError> {
    let mut throughput = Vec::new();
    for w in 1..=max_workers {
        progress.step(&format!("{} {} maximum on {w} worker(s)", p.name, bed.regime.label()));
        let placement = bed.clasp_on(p, UNTHROTTLED_RATE, w)?;
        throughput.push(bed.run(p, &placement, None)?.throughput);
    }
    Ok(Maxima { app: p.name.clone(), throughput })
}

/// Seconds of an elastic run: the warm-up before the first decision, half as long again for
/// the decision to settle, then the period the prediction's statistics cover.
fn elastic_secs(bed: &Testbed) -> f64 {
    1.5 * bed.warmup_s + bed.run_s
}

/// Planning parameters of the policies: full capacity, at most `max_workers`.
fn plan_config(bed: &Testbed, max_workers: u32) -> PlanConfig {
    PlanConfig { headroom: 1.0, ..bed.plan_config(max_workers) }
}

/// A policy's predictions from every source level to every other level.
fn transitions(
    p: &Pipeline,
    bed: &Testbed,
    policy: Policy,
    maxima: &Maxima,
    plan: &Plan,
    progress: &mut Progress,
) -> Result<Vec<Transition>, BenchError> {
    let rates: Vec<f64> = plan.levels.iter().map(|l| l * maxima.max()).collect();
    let mut out = Vec::new();
    for (i, &source) in rates.iter().enumerate() {
        progress.step(&format!(
            "{} {} {policy} at {:.0} %",
            p.name,
            bed.regime.label(),
            100.0 * plan.levels[i]
        ));
        let Some(predicted) = predictions(p, bed, policy, source, &rates, plan.max_workers)? else {
            continue;
        };
        for (j, (&target, workers)) in rates.iter().zip(predicted).enumerate() {
            let Some(workers) = workers.filter(|_| i != j) else { continue };
            let optimal = maxima.optimal(target);
            out.push(Transition {
                app: p.name.clone(),
                policy: policy.name().to_owned(),
                source_pct: pct(plan.levels[i]),
                target_pct: pct(plan.levels[j]),
                target_rate: target,
                predicted: workers,
                optimal,
                error: workers.abs_diff(optimal),
            });
        }
    }
    Ok(out)
}

/// Runs `policy` elastically at `source` chains/s and returns, from what it decides with at
/// the end of the run (after its first decision, whether it rescaled or not), the worker
/// count it would choose for each of `targets` (`None` where it cannot decide; `None` overall
/// when the run ended before the prediction).
fn predictions(
    p: &Pipeline,
    bed: &Testbed,
    policy: Policy,
    source: f64,
    targets: &[f64],
    max_workers: u32,
) -> Result<Option<Vec<Option<u32>>>, BenchError> {
    let err = |e: &dyn std::fmt::Display| BenchError::Run(format!("{} {policy}: {e}", p.name));
    let plan = plan_config(bed, max_workers);
    let first = bed.clasp_on(p, source, 1)?;
    let scaling = AutoscalerConfig {
        policy,
        plan: PlanConfig { estimator: bed.estimator(), ..plan.clone() },
        triggers: TriggerConfig {
            warmup_requests: (source * bed.warmup_s).max(50.0) as u64,
            ..TriggerConfig::default()
        },
        window_s: bed.run_s,
        ..AutoscalerConfig::default()
    };
    let secs = elastic_secs(bed);
    let mut cluster = bed.start(p, &first, bed.in_flight(Some(source), max_workers))?;
    let keys = clasp_plan::keys::assign_keys(p, &first, testbed::KEY_GROUPS, None);
    let mut scaler = ScalingLoop::new(scaling, p, first, keys, 1).map_err(|e| err(&e))?;
    let input = bed.input(p, Some(source), secs)?;
    let predict_from = secs - 2.0 * f64::from(bed.interval_ms as u32) / 1e3;
    let mut predicted: Option<Vec<Option<u32>>> = None;
    let mut failure: Option<ScalingError> = None;
    let Cluster { planner, pool } = &mut cluster;
    let result = planner.run(
        vec![input],
        Some(Duration::from_secs_f64(secs)),
        |_| {},
        |planner, prog| -> Result<(), PlannerError> {
            match scaler.step(planner, pool, prog) {
                Err(ScalingError::Planner(e)) => return Err(e),
                Err(e) => failure = Some(e),
                Ok(_) => {}
            }
            if prog.t >= predict_from && predicted.is_none() {
                let autoscaler = scaler.autoscaler();
                let stats = autoscaler.window_stats(p);
                let coefficients = autoscaler.coefficients();
                let decide = |target: f64| {
                    let input = PlanInput {
                        pipeline: p,
                        stats: &stats,
                        target_rate: target,
                        coefficients,
                        config: &plan,
                        current: Some(autoscaler.placement()),
                    };
                    policy.decide(&input).ok().map(|d| d.workers)
                };
                predicted = Some(targets.iter().map(|&t| decide(t)).collect());
            }
            Ok(())
        },
    );
    if let Err(e) = result {
        cluster.pool.kill_all();
        return Err(err(&e));
    }
    if let Some(e) = failure {
        cluster.pool.kill_all();
        return Err(err(&e));
    }
    cluster.shutdown().map_err(|e| err(&e))?;
    Ok(predicted)
}

fn tables(results: &[(&'static str, Results)], plan: &Plan) -> Vec<Table> {
    let mut summary = Table::new(
        "worker-count-summary",
        &["dispatch costs", "policy", "MAE all", "MAE up", "MAE down", "transitions"],
    );
    let mut cols: Vec<String> =
        vec!["dispatch costs".into(), "target (% of max)".into(), "OOWC".into()];
    cols.extend(plan.policies.iter().map(|p| format!("{p} (workers)")));
    let col_refs: Vec<&str> = cols.iter().map(String::as_str).collect();
    let mut by_target = Table::new("worker-count-by-target", &col_refs);
    let mut maxima = Table::new(
        "worker-count-maxima",
        &["dispatch costs", "app", "workers", "max throughput (chains/s)"],
    );
    let mut transitions = Table::new(
        "worker-count-transitions",
        &[
            "dispatch costs",
            "app",
            "policy",
            "source (%)",
            "target (%)",
            "target rate (chains/s)",
            "predicted",
            "OOWC",
            "error",
        ],
    );
    for (regime, r) in results {
        for &p in &plan.policies {
            let n = r.transitions.iter().filter(|t| t.policy == p.name()).count();
            summary.row(vec![
                (*regime).into(),
                p.name().into(),
                num(mae_of(&r.mae, p.name(), "all", "all"), 3),
                num(mae_of(&r.mae, p.name(), "direction", "up"), 3),
                num(mae_of(&r.mae, p.name(), "direction", "down"), 3),
                n.to_string(),
            ]);
        }
        for &l in &plan.levels {
            let mut row = vec![
                (*regime).into(),
                pct(l).to_string(),
                num(mean_workers(&r.transitions, None, pct(l)), 2),
            ];
            row.extend(
                plan.policies
                    .iter()
                    .map(|p| num(mean_workers(&r.transitions, Some(p.name()), pct(l)), 2)),
            );
            by_target.row(row);
        }
        for m in &r.maxima {
            for (i, t) in m.throughput.iter().enumerate() {
                maxima.row(vec![(*regime).into(), m.app.clone(), (i + 1).to_string(), num(*t, 1)]);
            }
        }
        for t in &r.transitions {
            transitions.row(vec![
                (*regime).into(),
                t.app.clone(),
                t.policy.clone(),
                t.source_pct.to_string(),
                t.target_pct.to_string(),
                num(t.target_rate, 1),
                t.predicted.to_string(),
                t.optimal.to_string(),
                t.error.to_string(),
            ]);
        }
    }
    vec![summary, by_target, maxima, transitions]
}

/// Per regime: the workers each policy chooses by target level beside the OOWC (Fig. 12–13),
/// and the mean absolute error by target level (Fig. 11a).
fn charts(results: &[(&'static str, Results)], plan: &Plan) -> Vec<Chart> {
    let xs: Vec<f64> = plan.levels.iter().map(|&l| f64::from(pct(l))).collect();
    let mut out = Vec::new();
    for (regime, r) in results {
        let oowc = Series::new(
            "OOWC",
            xs.iter().map(|&x| mean_workers(&r.transitions, None, x as u32)).collect(),
        );
        let workers = plan.policies.iter().fold(
            Chart::line(
                &format!("Fig. 12-13: workers chosen by target rate (runtime, {regime} costs)"),
                "target input rate (% of max)",
                "mean workers",
            )
            .named(&format!("worker-count-workers-{regime}"))
            .xs(&xs)
            .series(oowc),
            |c, p| {
                let v = xs
                    .iter()
                    .map(|&x| mean_workers(&r.transitions, Some(p.name()), x as u32))
                    .collect();
                c.series(Series::new(p.name(), v))
            },
        );
        let mae = plan.policies.iter().fold(
            Chart::line(
                &format!("Fig. 11a: worker-count error by target rate (runtime, {regime} costs)"),
                "target input rate (% of max)",
                "mean absolute error (workers)",
            )
            .named(&format!("worker-count-mae-target-{regime}"))
            .xs(&xs),
            |c, p| {
                let v = xs
                    .iter()
                    .map(|&x| mae_of(&r.mae, p.name(), "target", &format!("{x}")))
                    .collect();
                c.series(Series::new(p.name(), v))
            },
        );
        out.push(workers);
        out.push(mae);
    }
    out
}

fn notes(results: &[(&'static str, Results)], policies: &[Policy]) -> Vec<String> {
    let mut out = Vec::new();
    for (regime, r) in results {
        for p in policies {
            out.push(format!(
                "{regime} costs, {p}: mean absolute error {} workers (scaling up {}, down {}).",
                num(mae_of(&r.mae, p.name(), "all", "all"), 3),
                num(mae_of(&r.mae, p.name(), "direction", "up"), 3),
                num(mae_of(&r.mae, p.name(), "direction", "down"), 3)
            ));
        }
    }
    out.push(format!("{PAPER_NOTE} Fewer levels and workers here make each error count more: one wrong transition of 6 moves the MAE by 0.17."));
    out
}
