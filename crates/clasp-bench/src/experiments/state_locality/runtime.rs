//! `state-locality` on the runtime (CLASP Fig. 4): unthrottled throughput with state on the
//! executing worker against state on a remote server, on the emulated testbed
//! ([`crate::engine::runtime::testbed`]).
//!
//! The runtime always keeps state on the worker that owns its key group, so remote state is
//! emulated the way the paper measured it: every execution of a stateful operator takes
//! `remote_state_us` longer (the paper: 400 → 1,400 µs, sleeping, so it holds the executor as
//! a blocking state read would). Not emulated: contention at a single shared state server.
//! Both runs use CLASP's placement over the same N workers, each planned with its own
//! execution times.

use super::RuntimeSettings;
use crate::engine::runtime::testbed::{NativeCosts, Testbed, TestbedSettings, UNTHROTTLED_RATE};
use crate::plot::{Chart, Series};
use crate::progress::Progress;
use crate::report::{Output, Report, Table, num};
use crate::{BenchError, Options};
use clasp_core::Pipeline;

/// One application in one regime.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Application.
    pub app: String,
    /// `native` or `emulated`.
    pub regime: &'static str,
    /// Share of executions that touch state.
    pub state_share: f64,
    /// Throughput with local state (chains/s).
    pub local: f64,
    /// Throughput with remote state (chains/s).
    pub remote: f64,
}

impl Row {
    /// Local over remote.
    pub fn ratio(&self) -> f64 {
        self.local / self.remote.max(1e-9)
    }
}

/// Runs the experiment on the runtime.
pub(super) fn run(o: &Options) -> Result<Output, BenchError> {
    let (settings, own) = TestbedSettings::read(
        "state-locality",
        o,
        &super::testbed(o.quick),
        &RuntimeSettings::default(),
    )?;
    let apps = settings.apps.0.clone();
    let workers = own.workers.u32();
    let extra = own.remote_state_time.micros();
    let beds = Testbed::each_regime(&settings, o.seed, NativeCosts::NOMINAL);
    let regimes: Vec<_> = beds.iter().map(|b| b.regime).collect();
    let mut progress = Progress::new("state-locality", 2 * apps.len() * beds.len());
    let mut rows = Vec::new();
    for app in &apps {
        for bed in &beds {
            if let Some(row) = app_row(app, bed, workers, extra, &mut progress)? {
                rows.push(row);
            }
        }
    }
    let mut setup = beds[0].setup_lines(o.quick);
    for r in &regimes {
        setup.push(format!("regime `{}`: {}", r.label(), r.describe()));
    }
    setup.push(format!(
        "unthrottled on {workers} workers (the paper: 10) under CLASP's placement; remote state EMULATED: every execution of a stateful operator sleeps {extra} us longer (the paper: 400 -> 1,400 us); applications without state are skipped"
    ));
    let report = Report {
        title: "state-locality (Fig. 4) on the runtime: local vs remote state access".into(),
        setup,
        tables: vec![table(&rows)],
        notes: notes(&rows),
    };
    Ok(Output { report, charts: charts(&rows) })
}

/// `p` with every stateful operator taking `extra` µs longer per record.
fn with_remote_state(mut p: Pipeline, extra: f64) -> Pipeline {
    for op in p.operators.iter_mut().filter(|o| o.stateful) {
        if let Some(s) = op.service.as_mut() {
            s.micros += extra;
        }
    }
    p
}

/// Local and remote state on one application in one regime (`None` without state).
fn app_row(
    app: &str,
    bed: &Testbed,
    workers: u32,
    extra: f64,
    progress: &mut Progress,
) -> Result<Option<Row>, BenchError> {
    let local_p = bed.pipeline(app)?;
    if !local_p.operators.iter().any(|o| o.stateful) {
        return Ok(None);
    }
    let remote_p = with_remote_state(local_p.clone(), extra);
    let mut measured = Vec::new();
    for (what, p) in [("local", &local_p), ("remote", &remote_p)] {
        progress.step(&format!("{app} {} {what} state", bed.regime.label()));
        let placement = bed.clasp_on(p, UNTHROTTLED_RATE, workers)?;
        measured.push(bed.run(p, &placement, None)?);
    }
    let ops = &measured[0].summary.operators;
    let total: u64 = ops.iter().map(|o| o.processed).sum();
    let stateful: u64 = local_p
        .operators
        .iter()
        .zip(ops)
        .filter(|(op, _)| op.stateful)
        .map(|(_, s)| s.processed)
        .sum();
    Ok(Some(Row {
        app: app.to_owned(),
        regime: bed.regime.label(),
        state_share: stateful as f64 / total.max(1) as f64,
        local: measured[0].throughput,
        remote: measured[1].throughput,
    }))
}

fn table(rows: &[Row]) -> Table {
    let mut t = Table::new(
        "state-locality",
        &[
            "app",
            "dispatch costs",
            "executions touching state (%)",
            "local state (chains/s)",
            "remote state (chains/s)",
            "local / remote",
        ],
    );
    for r in rows {
        t.row(vec![
            r.app.clone(),
            r.regime.into(),
            num(100.0 * r.state_share, 1),
            num(r.local, 1),
            num(r.remote, 1),
            num(r.ratio(), 2),
        ]);
    }
    t
}

/// One bar chart per regime.
fn charts(rows: &[Row]) -> Vec<Chart> {
    let mut regimes: Vec<&str> = Vec::new();
    for r in rows {
        if !regimes.contains(&r.regime) {
            regimes.push(r.regime);
        }
    }
    regimes
        .into_iter()
        .map(|regime| {
            let mine: Vec<&Row> = rows.iter().filter(|r| r.regime == regime).collect();
            let apps: Vec<&str> = mine.iter().map(|r| r.app.as_str()).collect();
            Chart::bars(
                &format!("Fig. 4: throughput by state access (runtime, {regime} costs)"),
                "application",
                "throughput (chains/s)",
            )
            .named(&format!("state-locality-{regime}"))
            .categories(&apps)
            .series(Series::new("local", mine.iter().map(|r| r.local).collect()))
            .series(Series::new("remote", mine.iter().map(|r| r.remote).collect()))
        })
        .collect()
}

fn notes(rows: &[Row]) -> Vec<String> {
    super::paper_notes(
        rows.iter().map(|r| (r.app.as_str(), r.ratio(), r.state_share, Some(r.regime))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_state_lengthens_stateful_operators_only() {
        let mut p = clasp_apps::pipeline("wc").unwrap();
        for op in &mut p.operators {
            op.service = Some(clasp_core::pipeline::ServiceTime {
                micros: 400.0,
                mode: clasp_core::pipeline::ServiceMode::Sleep,
                per: clasp_core::pipeline::ServicePer::Record,
            });
        }
        let r = with_remote_state(p, 1_000.0);
        let micros: Vec<f64> = r.operators.iter().map(|o| o.service.unwrap().micros).collect();
        assert_eq!(micros, [400.0, 1_400.0]);
        let row = Row {
            app: "wc".into(),
            regime: "native",
            state_share: 0.9,
            local: 300.0,
            remote: 100.0,
        };
        assert_eq!(row.ratio(), 3.0);
    }
}
