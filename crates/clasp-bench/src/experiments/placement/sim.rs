//! Paper Fig. 10: the throughput each policy's placement reaches on 10 workers under an
//! unthrottled input. Every policy decides from the same spec-derived statistics for an input
//! rate no cluster here sustains, within 10 workers (the baselines then use all ten; CLASP
//! uses the placement the worker-limit search finds), and the placement runs unthrottled.

use super::SimSettings;
use crate::engine::sim::{Ctx, Setup, policy_placement, run_static, spec_stats};
use crate::experiments::{Experiment, distinct, lookup};
use crate::plot::{Chart, Series};
use crate::report::{Output, Report, Table, num};
use crate::{BenchError, Options};
use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_plan::Policy;
use clasp_plan::autoscaler::UNTHROTTLED_RATE;
use clasp_sim::SimError;
use serde::{Deserialize, Serialize};

/// One application under one policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlacementRow {
    /// Application.
    pub app: String,
    /// Policy.
    pub policy: String,
    /// Workers its placement uses.
    pub workers: u32,
    /// Throughput (chains/s).
    pub throughput: f64,
    /// Relative to the first policy's (CLASP's) throughput.
    pub ratio: f64,
    /// Remote share of chained requests.
    pub remote_share: f64,
}

/// Runs the experiment for every application and policy (the first policy is the reference).
pub fn rows(
    apps: &[Pipeline],
    setup: &Setup,
    policies: &[Policy],
) -> Result<Vec<PlacementRow>, SimError> {
    let workers = setup.sim.max_workers.min(10);
    let mut rows = Vec::new();
    for p in apps {
        let stats = spec_stats(p, setup, UNTHROTTLED_RATE);
        let mut reference = None;
        for &policy in policies {
            let placement = policy_placement(p, setup, &stats, policy, UNTHROTTLED_RATE, workers)?;
            let used = placement.workers;
            let s = run_static(p, setup, placement, RatePattern::unthrottled())?;
            let base = *reference.get_or_insert(s.throughput);
            let calls = s.local_rate + s.remote_rate;
            rows.push(PlacementRow {
                app: p.name.clone(),
                policy: policy.name().to_owned(),
                workers: used,
                throughput: s.throughput,
                ratio: s.throughput / f64::max(base, 1e-9),
                remote_share: if calls > 0.0 { s.remote_rate / calls } else { 0.0 },
            });
        }
    }
    Ok(rows)
}

/// Runs the experiment on the simulator.
pub(super) fn run(o: &Options) -> Result<Output, BenchError> {
    let cluster = super::sim_cluster(o.quick);
    let (ctx, own) = Ctx::new(Experiment::Placement, o, &cluster, &SimSettings::default())?;
    let policies = own.policies.0;
    let rows =
        ctx.per_app("placement", |p| rows(std::slice::from_ref(p), &ctx.setup, &policies))?;
    let mut table = Table::new(
        "placement",
        &[
            "app",
            "policy",
            "workers",
            "throughput (chains/s)",
            "vs first policy",
            "remote share (%)",
        ],
    );
    for r in &rows {
        table.row(vec![
            r.app.clone(),
            r.policy.clone(),
            r.workers.to_string(),
            num(r.throughput, 1),
            num(r.ratio, 2),
            num(100.0 * r.remote_share, 1),
        ]);
    }
    let mut setup = ctx.setup_lines();
    setup.push(format!(
        "each policy places for an unthrottled input within {} workers from the same spec-derived statistics; the placement runs unthrottled; ratios relative to {}",
        ctx.setup.sim.max_workers.min(10),
        policies[0]
    ));
    let report = Report {
        title: "placement (Fig. 10): unthrottled throughput on ten workers".into(),
        setup,
        tables: vec![table],
        notes: notes(&rows, policies[0].name()),
    };
    Ok(Output { report, charts: vec![chart(&rows)] })
}

fn chart(rows: &[PlacementRow]) -> Chart {
    let apps = distinct(rows, |r| &r.app);
    let policies = distinct(rows, |r| &r.policy);
    let base = Chart::bars(
        "Fig. 10: throughput by placement on 10 workers (sim)",
        "application",
        "throughput (chains/s)",
    )
    .named("placement")
    .categories(&apps);
    policies.iter().fold(base, |c, pol| {
        let values = apps
            .iter()
            .map(|a| lookup(rows, |r| (r.app == *a && r.policy == *pol).then_some(r.throughput)))
            .collect();
        c.series(Series::new(pol, values))
    })
}

fn notes(rows: &[PlacementRow], first: &str) -> Vec<String> {
    let ratios: Vec<(String, f64)> = rows.iter().map(|r| (r.policy.clone(), r.ratio)).collect();
    let mut out = super::ratio_notes(&ratios, first, None);
    out.push(super::PAPER_NOTE.into());
    out
}
