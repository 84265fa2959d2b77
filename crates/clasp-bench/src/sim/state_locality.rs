//! `state-locality` (paper Fig. 4): throughput with local vs remote state access.

use super::{Ctx, per_app};
use crate::BenchError;
use crate::plot::{Chart, Series};
use crate::report::{Output, Report, Table, num};
use clasp_sim::experiments::state_locality::{self, PAPER_REMOTE_STATE_US, StateLocalityRow};

/// Runs the experiment.
pub fn run(ctx: &Ctx) -> Result<Output, BenchError> {
    let extra = ctx.settings.number("remote-state-us").unwrap_or(PAPER_REMOTE_STATE_US);
    let rows = per_app(ctx, "state-locality", |p| {
        state_locality::run(std::slice::from_ref(p), &ctx.setup, extra)
    })?;
    let mut table = Table::new(
        "state-locality",
        &[
            "app",
            "executions touching state (%)",
            "local state (chains/s)",
            "remote state (chains/s)",
            "local / remote",
        ],
    );
    for r in &rows {
        table.row(vec![
            r.app.clone(),
            num(100.0 * r.state_share, 1),
            num(r.local, 1),
            num(r.remote, 1),
            num(r.ratio, 2),
        ]);
    }
    let mut setup = ctx.setup_lines();
    setup.push(format!(
        "unthrottled on {} workers under CLASP's placement; remote state adds {extra} us to every execution of a stateful operator (paper: 400 -> 1,400 us)",
        ctx.setup.sim.max_workers.min(10)
    ));
    let report = Report {
        title: "state-locality (Fig. 4): local vs remote state access".into(),
        setup,
        tables: vec![table],
        notes: notes(&rows),
    };
    Ok(Output { report, charts: vec![chart(&rows)] })
}

fn chart(rows: &[StateLocalityRow]) -> Chart {
    let apps: Vec<&str> = rows.iter().map(|r| r.app.as_str()).collect();
    Chart::bars("Fig. 4: throughput by state access (sim)", "application", "throughput (chains/s)")
        .named("state-locality")
        .categories(&apps)
        .series(Series::new("local", rows.iter().map(|r| r.local).collect()))
        .series(Series::new("remote", rows.iter().map(|r| r.remote).collect()))
}

fn notes(rows: &[StateLocalityRow]) -> Vec<String> {
    let mut out: Vec<String> = [("wc", 3.5), ("pl", 1.5)]
        .iter()
        .filter_map(|(app, paper)| {
            let r = rows.iter().find(|r| r.app == *app)?;
            Some(format!(
                "{}: local state x{:.2} the remote throughput (paper x{paper}); {:.0} % of executions touch state.",
                app.to_uppercase(),
                r.ratio,
                100.0 * r.state_share
            ))
        })
        .collect();
    out.push("Paper: the gap widens with the share of executions that access state (WC 90 %: x3.5; PL 20 %: x1.5).".into());
    out
}
