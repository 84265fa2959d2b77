//! `placement` on the runtime (CLASP Fig. 10): the unthrottled throughput of each policy's
//! placement on N workers, under native and emulated (the paper's) dispatch costs, on the
//! emulated testbed ([`crate::engine::runtime::testbed`]). Every policy decides from the same spec-derived
//! statistics for an input no cluster here sustains, within N workers, and its placement runs
//! unthrottled.

use super::RuntimeSettings;
use crate::engine::runtime::testbed::{
    Measured, NativeCosts, Testbed, TestbedSettings, UNTHROTTLED_RATE,
};
use crate::plot::{Chart, Series};
use crate::progress::Progress;
use crate::report::{Output, Report, Table, num};
use crate::{BenchError, Options};
use clasp_plan::Policy;

/// One application under one policy in one regime.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Application.
    pub app: String,
    /// `native` or `emulated`.
    pub regime: &'static str,
    /// Policy.
    pub policy: String,
    /// Workers its placement uses.
    pub workers: u32,
    /// Unthrottled throughput (chains/s).
    pub throughput: f64,
    /// Relative to the first policy's in the same regime.
    pub ratio: f64,
    /// Remote share of chained requests.
    pub remote_share: f64,
    /// Cores the process used.
    pub cpu_cores: f64,
}

/// Runs the experiment on the runtime.
pub(super) fn run(o: &Options) -> Result<Output, BenchError> {
    let (settings, own) = TestbedSettings::read(
        "placement",
        o,
        &super::testbed(o.quick),
        &RuntimeSettings::default(),
    )?;
    let apps = settings.apps.0.clone();
    let policies = own.policies.0;
    let workers = own.workers.u32();
    let beds = Testbed::each_regime(&settings, o.seed, NativeCosts::NOMINAL);
    let regimes: Vec<_> = beds.iter().map(|b| b.regime).collect();
    let mut progress = Progress::new("placement", apps.len() * beds.len() * policies.len());
    let mut rows = Vec::new();
    for app in &apps {
        for bed in &beds {
            rows.extend(app_rows(app, bed, &policies, workers, &mut progress)?);
        }
    }
    let mut setup = beds[0].setup_lines(o.quick);
    for r in &regimes {
        setup.push(format!("regime `{}`: {}", r.label(), r.describe()));
    }
    setup.push(format!(
        "each policy places for an unthrottled input within {workers} workers (the paper: 10) from the same spec-derived statistics, planning with the regime's true costs; its placement runs unthrottled ({} chains in flight per slot); ratios relative to {} in the same regime",
        beds[0].unthrottled_in_flight, policies[0]
    ));
    let report = Report {
        title: format!(
            "placement (Fig. 10) on the runtime: unthrottled throughput on {workers} workers"
        ),
        setup,
        tables: vec![table(&rows)],
        notes: notes(&rows, policies[0].name()),
    };
    Ok(Output { report, charts: charts(&rows, workers) })
}

/// Every policy on one application in one regime.
fn app_rows(
    app: &str,
    bed: &Testbed,
    policies: &[Policy],
    workers: u32,
    progress: &mut Progress,
) -> Result<Vec<Row>, BenchError> {
    let p = bed.pipeline(app)?;
    let mut rows = Vec::new();
    let mut reference = None;
    for &policy in policies {
        progress.step(&format!("{app} {} {policy}", bed.regime.label()));
        let placement = bed.policy_placement(&p, policy, UNTHROTTLED_RATE, workers)?;
        let m: Measured = bed.run(&p, &placement, None)?;
        let base = *reference.get_or_insert(m.throughput);
        rows.push(Row {
            app: app.to_owned(),
            regime: bed.regime.label(),
            policy: policy.name().to_owned(),
            workers: placement.workers,
            throughput: m.throughput,
            ratio: m.throughput / base.max(1e-9),
            remote_share: m.remote_share,
            cpu_cores: m.cpu_cores,
        });
    }
    Ok(rows)
}

fn table(rows: &[Row]) -> Table {
    let mut t = Table::new(
        "placement",
        &[
            "app",
            "dispatch costs",
            "policy",
            "workers used",
            "throughput (chains/s)",
            "vs first policy",
            "remote share (%)",
            "CPU (cores)",
        ],
    );
    for r in rows {
        t.row(vec![
            r.app.clone(),
            r.regime.into(),
            r.policy.clone(),
            r.workers.to_string(),
            num(r.throughput, 1),
            num(r.ratio, 2),
            num(100.0 * r.remote_share, 1),
            num(r.cpu_cores, 2),
        ]);
    }
    t
}

/// Names in order of first appearance.
fn distinct<'a>(rows: &'a [Row], f: impl Fn(&'a Row) -> &'a str) -> Vec<&'a str> {
    let mut out: Vec<&str> = Vec::new();
    for r in rows {
        if !out.contains(&f(r)) {
            out.push(f(r));
        }
    }
    out
}

/// One bar chart per regime: throughput by application and policy.
fn charts(rows: &[Row], workers: u32) -> Vec<Chart> {
    let apps = distinct(rows, |r| &r.app);
    let policies = distinct(rows, |r| &r.policy);
    distinct(rows, |r| r.regime)
        .into_iter()
        .map(|regime| {
            let base = Chart::bars(
                &format!("Fig. 10: throughput by placement on {workers} workers (runtime, {regime} costs)"),
                "application",
                "throughput (chains/s)",
            )
            .named(&format!("placement-{regime}"))
            .categories(&apps);
            policies.iter().fold(base, |c, pol| {
                let values = apps
                    .iter()
                    .map(|a| {
                        rows.iter()
                            .find(|r| r.app == *a && r.policy == *pol && r.regime == regime)
                            .map_or(f64::NAN, |r| r.throughput)
                    })
                    .collect();
                c.series(Series::new(pol, values))
            })
        })
        .collect()
}

fn notes(rows: &[Row], first: &str) -> Vec<String> {
    let mut out = Vec::new();
    for regime in distinct(rows, |r| r.regime) {
        let ratios: Vec<(String, f64)> = rows
            .iter()
            .filter(|r| r.regime == regime)
            .map(|r| (r.policy.clone(), r.ratio))
            .collect();
        out.extend(super::ratio_notes(&ratios, first, Some(regime)));
    }
    out.push(format!("{} Under native costs a remote chained request costs well under a microsecond against 400 us of execution, so what a placement does to chained requests hardly matters and the policies' instance counts and balance decide.", super::PAPER_NOTE));
    out
}
