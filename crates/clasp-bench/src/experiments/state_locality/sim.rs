//! Paper Fig. 4: throughput when stateful operators read their state locally versus from a
//! remote state server.
//!
//! Every application with state runs unthrottled on ten workers under CLASP's placement,
//! twice: with state on the executing worker (every execution at its mean execution time) and
//! with every execution of a stateful operator taking `remote_state_us` longer (the paper
//! measured 400 µs → 1,400 µs). Each placement is planned from statistics that include the
//! longer execution times, so both runs are balanced; the difference is the cost of the
//! state access alone. The paper's local/remote ratio grows with the share of executions that
//! touch state (WC 3.5× at 90 %, PL 1.5× at 20 %).

use super::SimSettings;
use crate::engine::sim::{Ctx, Setup, run_static, spec_stats};
use crate::experiments::Experiment;
use crate::plot::{Chart, Series};
use crate::report::{Output, Report, Table, num};
use crate::{BenchError, Options};
use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_plan::autoscaler::UNTHROTTLED_RATE;
use clasp_sim::{Model, SimError, placement_on};
use serde::{Deserialize, Serialize};

/// One application.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StateLocalityRow {
    /// Application.
    pub app: String,
    /// Share of executions that touch state.
    pub state_share: f64,
    /// Throughput with local state (chains/s).
    pub local: f64,
    /// Throughput with remote state (chains/s).
    pub remote: f64,
    /// Local over remote.
    pub ratio: f64,
}

/// Runs the experiment for every application that has a stateful operator (the others are
/// skipped: their two runs would be the same).
pub fn rows(
    apps: &[Pipeline],
    setup: &Setup,
    remote_state_us: f64,
) -> Result<Vec<StateLocalityRow>, SimError> {
    let mut rows = Vec::new();
    for p in apps.iter().filter(|p| p.operators.iter().any(|o| o.stateful)) {
        let local = throughput(p, setup, 0.0)?;
        let remote = throughput(p, setup, remote_state_us)?;
        rows.push(StateLocalityRow {
            app: p.name.clone(),
            state_share: state_share(p, setup),
            local,
            remote,
            ratio: local / remote.max(1e-9),
        });
    }
    Ok(rows)
}

/// Unthrottled throughput on the setup's workers with `extra_us` per stateful execution.
fn throughput(p: &Pipeline, setup: &Setup, extra_us: f64) -> Result<f64, SimError> {
    let mut setup = setup.clone();
    setup.sim.remote_state_us = extra_us;
    let mut stats = spec_stats(p, &setup, UNTHROTTLED_RATE);
    for (s, op) in stats.operators.iter_mut().zip(&p.operators) {
        if op.stateful {
            s.exec_time_us += extra_us;
        }
    }
    let workers = setup.sim.max_workers.min(10);
    let placement = placement_on(p, &stats, &setup.sim, UNTHROTTLED_RATE, workers)?;
    Ok(run_static(p, &setup, placement, RatePattern::unthrottled())?.throughput)
}

/// Share of all executions that are of stateful operators.
fn state_share(p: &Pipeline, setup: &Setup) -> f64 {
    let model = Model::from_spec(p, &setup.sim);
    let n = model.requests_per_input();
    let total: f64 = n.iter().sum();
    let stateful: f64 =
        n.iter().zip(&p.operators).filter(|(_, o)| o.stateful).map(|(x, _)| x).sum();
    if total > 0.0 { stateful / total } else { 0.0 }
}

/// Runs the experiment on the simulator.
pub(super) fn run(o: &Options) -> Result<Output, BenchError> {
    let cluster = super::sim_cluster(o.quick);
    let (ctx, own) = Ctx::new(Experiment::StateLocality, o, &cluster, &SimSettings::default())?;
    let extra = own.remote_state_time.micros();
    let rows =
        ctx.per_app("state-locality", |p| rows(std::slice::from_ref(p), &ctx.setup, extra))?;
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
    super::paper_notes(rows.iter().map(|r| (r.app.as_str(), r.ratio, r.state_share, None)))
}
