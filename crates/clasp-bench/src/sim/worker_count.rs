//! `worker-count` (paper Fig. 11–13): predicted vs observed optimal worker counts for every
//! pairwise transition among the input-rate levels, per policy.

use super::{Ctx, sim_err};
use crate::BenchError;
use crate::plot::{Chart, Series};
use crate::report::{Output, Report, Table, num};
use clasp_plan::Policy;
use clasp_sim::experiments::worker_count::{self, Mae, POLICIES, Transition, WorkerCountReport};

/// Runs the experiment. Unless set otherwise, the policies plan workers to their full
/// capacity (`headroom` 1: the observed optimum is measured at saturation, so a planning
/// margin would count as error) and, at paper scale, the maxima are measured over 60 s (less
/// sampling noise where a level falls right at a worker count's maximum).
pub fn run(ctx: &Ctx) -> Result<Output, BenchError> {
    let mut ctx = ctx.clone();
    if ctx.settings.number("headroom").is_none() {
        ctx.setup.sim.plan_headroom = 1.0;
    }
    if ctx.settings.number("run-s").is_none() && !ctx.opts.quick {
        ctx.setup.run_s = 60.0;
    }
    let ctx = &ctx;
    let policies = ctx.settings.policies(&POLICIES);
    let mut setup = ctx.setup.clone();
    if let Some(n) = ctx.settings.number("levels") {
        let n = n as u32;
        setup.levels = (1..=n).map(|l| f64::from(l) / f64::from(n)).collect();
    }
    let mut progress = ctx.progress("worker-count", ctx.apps.len() * policies.len());
    let mut all = WorkerCountReport::default();
    for p in &ctx.apps {
        for &policy in &policies {
            progress.step(&format!("{} {policy}", p.name));
            let r =
                worker_count::run(std::slice::from_ref(p), &setup, &[policy]).map_err(sim_err)?;
            all.transitions.extend(r.transitions);
            if !all.maxima.iter().any(|m| m.app == p.name) {
                all.maxima.extend(r.maxima);
            }
        }
    }
    all.mae = worker_count::errors(&all.transitions, &policies);
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

fn pct(l: f64) -> u32 {
    (100.0 * l).round() as u32
}

fn mae_of(mae: &[Mae], policy: Policy, by: &str, key: &str) -> f64 {
    mae.iter()
        .find(|m| m.policy == policy.name() && m.by == by && m.key == key)
        .map_or(f64::NAN, |m| m.mae)
}

/// Mean predicted workers at each target level (and the mean optimum).
fn mean_workers(t: &[Transition], policy: Option<Policy>, target: u32) -> f64 {
    let v: Vec<f64> = t
        .iter()
        .filter(|x| x.target_pct == target && policy.is_none_or(|p| x.policy == p.name()))
        .map(|x| f64::from(if policy.is_some() { x.predicted } else { x.optimal }))
        .collect();
    if v.is_empty() { f64::NAN } else { v.iter().sum::<f64>() / v.len() as f64 }
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
            policies.iter().map(|&p| num(mean_workers(&all.transitions, Some(p), pct(l)), 2)),
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
            num(mae_of(&all.mae, p, "all", "all"), 3),
            num(mae_of(&all.mae, p, "direction", "up"), 3),
            num(mae_of(&all.mae, p, "direction", "down"), 3),
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
                let v = keys.iter().map(|k| mae_of(&all.mae, p, by, &format!("{k}"))).collect();
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
                apps.iter().map(|a| mae_of(&all.mae, p, "app", a)).collect(),
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
            let v = xs.iter().map(|&x| mean_workers(&all.transitions, Some(p), x as u32)).collect();
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
                mae_of(mae, p, "all", "all"),
                mae_of(mae, p, "direction", "up"),
                mae_of(mae, p, "direction", "down")
            )
        })
        .collect();
    out.push("Paper: CLASP's error is below 0.25 workers for every application and below 0.3 for every gap (target here: <= 0.1); FaaSFlow under-provisions when scaling up and over-provisions when scaling down; Zhang24 uses all workers from 50-60 % of the maximum.".into());
    out
}
