//! `placement` (paper Fig. 10): unthrottled throughput of each policy's placement on ten
//! workers.

use super::{Ctx, apps_of, lookup, per_app};
use crate::BenchError;
use crate::plot::{Chart, Series};
use crate::report::{Output, Report, Table, num};
use clasp_sim::experiments::placement::{self, POLICIES, PlacementRow};

/// Runs the experiment.
pub fn run(ctx: &Ctx) -> Result<Output, BenchError> {
    let policies = ctx.settings.policies(&POLICIES);
    let rows = per_app(ctx, "placement", |p| {
        placement::run(std::slice::from_ref(p), &ctx.setup, &policies)
    })?;
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
    let apps = apps_of(rows, |r| &r.app);
    let policies = apps_of(rows, |r| &r.policy);
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
    let mut out: Vec<String> = apps_of(rows, |r| &r.policy)
        .iter()
        .filter(|p| p.as_str() != first)
        .map(|pol| {
            let ratios: Vec<f64> =
                rows.iter().filter(|r| &r.policy == pol).map(|r| r.ratio).collect();
            let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = ratios.iter().copied().fold(0.0, f64::max);
            format!("{pol}: {:.0}-{:.0} % of {first}'s throughput.", 100.0 * lo, 100.0 * hi)
        })
        .collect();
    out.push("Paper: CLASP beats FaaSFlow and Zhang24 on every application; FaaSFlow loses most on WC (its split operator emits ten chained requests per request), Zhang24 through fan-out to nearly every worker.".into());
    out
}
