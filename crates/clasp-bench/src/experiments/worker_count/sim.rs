//! `worker-count` on the simulator (paper Fig. 11–13).
//!
//! For every application, CLASP's placement over exactly `n` workers runs unthrottled for
//! `n = 1..=10`; the largest of those throughputs is the application's maximum, and the input
//! rate levels are fractions of it. The observed optimal worker count (OOWC) of a level is the
//! smallest `n` whose maximum reaches the level. Then, for every policy and every source level,
//! the policy runs elastically at the source rate (its warm-up decision, then its own
//! placement), and from the statistics of that placement — observed, with the estimator's
//! coefficients — it predicts the worker count for every other level as the target. The error
//! of a transition is |predicted − OOWC(target)|; mean absolute errors are reported per target
//! level, per application, per gap between the levels and per direction, for each policy.

use super::{Mae, Maxima, PAPER_NOTE, SimSettings, Transition, errors, mae_of, mean_workers, pct};
use crate::engine::sim::{Ctx, Setup, elastic_config, maxima, run_elastic};
use crate::experiments::Experiment;
use crate::plot::{Chart, Series};
use crate::report::{Output, Report, Table, num};
use crate::{BenchError, Options};
use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_plan::{PlanInput, Policy};
use clasp_sim::{SimError, plan_config};
use serde::{Deserialize, Serialize};

/// Everything the experiment measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerCountReport {
    /// Per application.
    pub maxima: Vec<Maxima>,
    /// Every transition.
    pub transitions: Vec<Transition>,
    /// Mean absolute errors.
    pub mae: Vec<Mae>,
}

/// Runs the experiment for every application and policy.
pub fn rows(
    apps: &[Pipeline],
    setup: &Setup,
    policies: &[Policy],
) -> Result<WorkerCountReport, SimError> {
    let mut report = WorkerCountReport::default();
    for p in apps {
        let maxima = maxima(p, setup, setup.sim.max_workers.min(10))?;
        for &policy in policies {
            report.transitions.extend(transitions(p, setup, policy, &maxima)?);
        }
        report.maxima.push(maxima);
    }
    report.mae = errors(&report.transitions, policies);
    Ok(report)
}

/// A policy's predictions from every source level to every other level.
fn transitions(
    p: &Pipeline,
    setup: &Setup,
    policy: Policy,
    maxima: &Maxima,
) -> Result<Vec<Transition>, SimError> {
    let rates: Vec<f64> = setup.levels.iter().map(|l| l * maxima.max()).collect();
    let plan = plan_config(&setup.sim, setup.sim.max_workers);
    let mut out = Vec::new();
    for (i, &source) in rates.iter().enumerate() {
        let duration = 2.0 * setup.warmup_s + setup.run_s;
        let warmup = (source * setup.warmup_s).max(100.0) as u64;
        let autoscaler = elastic_config(setup, policy, warmup);
        let s = run_elastic(p, setup, autoscaler, RatePattern::constant(source), duration)?;
        let (Some(current), Some(c)) = (s.placement.as_ref(), s.stats.coefficients) else {
            continue;
        };
        for (j, &target) in rates.iter().enumerate() {
            if i == j {
                continue;
            }
            let input = PlanInput {
                pipeline: p,
                stats: &s.stats,
                target_rate: target,
                coefficients: c,
                config: &plan,
                current: Some(current),
            };
            let Ok(d) = policy.decide(&input) else { continue };
            let optimal = maxima.optimal(target);
            out.push(Transition {
                app: p.name.clone(),
                policy: policy.name().to_owned(),
                source_pct: pct(setup.levels[i]),
                target_pct: pct(setup.levels[j]),
                target_rate: target,
                predicted: d.workers,
                optimal,
                error: d.workers.abs_diff(optimal),
            });
        }
    }
    Ok(out)
}

/// Runs the experiment on the simulator (cluster preset: [`super::sim_cluster`]).
pub(super) fn run(o: &Options) -> Result<Output, BenchError> {
    let cluster = super::sim_cluster(o.quick);
    let (ctx, own) = Ctx::new(Experiment::WorkerCount, o, &cluster, &SimSettings::preset(o.quick))?;
    let ctx = &ctx;
    let policies = own.policies.0;
    let mut setup = ctx.setup.clone();
    setup.levels = super::levels(own.levels.u32());
    let mut progress = ctx.progress("worker-count", ctx.apps.len() * policies.len());
    let mut all = WorkerCountReport::default();
    for p in &ctx.apps {
        for &policy in &policies {
            progress.step(&format!("{} {policy}", p.name));
            let r = rows(std::slice::from_ref(p), &setup, &[policy])?;
            all.transitions.extend(r.transitions);
            if !all.maxima.iter().any(|m| m.app == p.name) {
                all.maxima.extend(r.maxima);
            }
        }
    }
    all.mae = errors(&all.transitions, &policies);
    let mut lines = ctx.setup_lines();
    lines.push(format!(
        "levels: {} % of each application's maximum (CLASP's best over 1-10 workers); every policy runs elastically at each source level and predicts the worker count of every other level from what it observed",
        setup.levels.iter().map(|l| format!("{:.0}", 100.0 * l)).collect::<Vec<_>>().join(", ")
    ));
    let report = Report {
        title: "worker-count (Fig. 11-13): predicted vs observed optimal worker count".into(),
        setup: lines,
        tables: tables(&all, &policies, &setup.levels),
        notes: notes(&all.mae, &policies),
    };
    Ok(Output { report, charts: charts(&all, &policies, &setup.levels) })
}

fn tables(all: &WorkerCountReport, policies: &[Policy], levels: &[f64]) -> Vec<Table> {
    let mut mae =
        Table::new("worker-count-mae", &["policy", "by", "group", "MAE (workers)", "transitions"]);
    for m in &all.mae {
        mae.row(vec![
            m.policy.clone(),
            m.by.clone(),
            m.key.clone(),
            num(m.mae, 3),
            m.transitions.to_string(),
        ]);
    }
    let mut cols: Vec<String> = vec!["target (% of max)".into(), "OOWC".into()];
    cols.extend(policies.iter().map(|p| format!("{p} (workers)")));
    let col_refs: Vec<&str> = cols.iter().map(String::as_str).collect();
    let mut by_target = Table::new("worker-count-by-target", &col_refs);
    for &l in levels {
        let mut row =
            vec![pct(l).to_string(), num(mean_workers(&all.transitions, None, pct(l)), 2)];
        row.extend(
            policies
                .iter()
                .map(|&p| num(mean_workers(&all.transitions, Some(p.name()), pct(l)), 2)),
        );
        by_target.row(row);
    }
    let mut maxima =
        Table::new("worker-count-maxima", &["app", "workers", "max throughput (chains/s)"]);
    for m in &all.maxima {
        for (i, t) in m.throughput.iter().enumerate() {
            maxima.row(vec![m.app.clone(), (i + 1).to_string(), num(*t, 1)]);
        }
    }
    let mut transitions = Table::new(
        "worker-count-transitions",
        &[
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
    for t in &all.transitions {
        transitions.row(vec![
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
    let mut overall = Table::new(
        "worker-count-summary",
        &["policy", "MAE all", "MAE up", "MAE down", "transitions"],
    );
    for &p in policies {
        let n = all
            .mae
            .iter()
            .find(|m| m.policy == p.name() && m.by == "all")
            .map_or(0, |m| m.transitions);
        overall.row(vec![
            p.name().into(),
            num(mae_of(&all.mae, p.name(), "all", "all"), 3),
            num(mae_of(&all.mae, p.name(), "direction", "up"), 3),
            num(mae_of(&all.mae, p.name(), "direction", "down"), 3),
            n.to_string(),
        ]);
    }
    vec![overall, by_target, mae, maxima, transitions]
}

fn charts(all: &WorkerCountReport, policies: &[Policy], levels: &[f64]) -> Vec<Chart> {
    let xs: Vec<f64> = levels.iter().map(|&l| f64::from(pct(l))).collect();
    let gaps: Vec<f64> =
        (1..levels.len()).map(|i| f64::from(pct(levels[i]) - pct(levels[0]))).collect();
    let apps: Vec<String> = all.maxima.iter().map(|m| m.app.clone()).collect();
    let line = |title: &str, name: &str, x: &str, keys: &[f64], by: &'static str| {
        policies.iter().fold(
            Chart::line(title, x, "mean absolute error (workers)").named(name).xs(keys),
            |c, &p| {
                let v =
                    keys.iter().map(|k| mae_of(&all.mae, p.name(), by, &format!("{k}"))).collect();
                c.series(Series::new(p.name(), v))
            },
        )
    };
    let by_app = policies.iter().fold(
        Chart::bars(
            "Fig. 11b: worker-count error by application (sim)",
            "application",
            "mean absolute error (workers)",
        )
        .named("worker-count-mae-app")
        .categories(&apps),
        |c, &p| {
            c.series(Series::new(
                p.name(),
                apps.iter().map(|a| mae_of(&all.mae, p.name(), "app", a)).collect(),
            ))
        },
    );
    let workers = policies.iter().fold(
        Chart::line(
            "Fig. 12-13: workers chosen by target rate (sim)",
            "target input rate (% of max)",
            "mean workers",
        )
        .named("worker-count-workers")
        .xs(&xs)
        .series(Series::new(
            "OOWC",
            xs.iter().map(|&x| mean_workers(&all.transitions, None, x as u32)).collect(),
        )),
        |c, &p| {
            let v = xs
                .iter()
                .map(|&x| mean_workers(&all.transitions, Some(p.name()), x as u32))
                .collect();
            c.series(Series::new(p.name(), v))
        },
    );
    vec![
        line(
            "Fig. 11a: worker-count error by target rate (sim)",
            "worker-count-mae-target",
            "target input rate (% of max)",
            &xs,
            "target",
        ),
        by_app,
        line(
            "Fig. 11c: worker-count error by rate gap (sim)",
            "worker-count-mae-gap",
            "input rate gap (% of max)",
            &gaps,
            "gap",
        ),
        workers,
    ]
}

fn notes(mae: &[Mae], policies: &[Policy]) -> Vec<String> {
    let mut out: Vec<String> = policies
        .iter()
        .map(|&p| {
            format!(
                "{p}: mean absolute error {:.3} workers (scaling up {:.3}, down {:.3}).",
                mae_of(mae, p.name(), "all", "all"),
                mae_of(mae, p.name(), "direction", "up"),
                mae_of(mae, p.name(), "direction", "down")
            )
        })
        .collect();
    out.push(format!("{PAPER_NOTE} Target here: CLASP <= 0.1."));
    out
}
