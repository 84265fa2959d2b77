//! Every benchmark application run through the distributed runtime — a planner and worker
//! threads over loopback TCP — on 1 worker and on 3 workers, its sink records and final
//! keyed state compared with the independent single-threaded reference (`clasp-reference`,
//! `reference::expected`, which recomputes each app with plain code sharing nothing with the
//! operators). Windowed apps (AA, taxi-w3) are also compared window by window.
//!
//! Which comparison applies follows from what the runtime guarantees about order:
//! - **1 worker, one instance per operator** ([`Layout::Sequential`]): every operator runs one
//!   request at a time and takes its queue in arrival order, so every record reaches every
//!   operator in input order — exactly as in the reference. Every app is checked with the
//!   exact [`reference::check`] (and [`reference::check_order_insensitive`] as well).
//! - **3 workers, every operator spread over all of them** ([`Layout::Spread`]): stateless
//!   operators run concurrently and send each request to a worker drawn by share, so the
//!   records of one key reach its stateful operator from several upstream workers and can
//!   interleave differently from the input. Only an app whose first operator is the keyed one
//!   (SD: the source keys readings by sensor and the planner routes them straight to the
//!   owner's ordered `moving_avg`) keeps per-key order, and is checked exactly; the others use
//!   [`reference::check_order_insensitive`], which compares what no reordering of a key's
//!   records can change (for NWM, taxi-w1 and taxi-w2 that is everything).
//!
//! Inputs are a few thousand generated records, with parameters scaled down so that even
//! so every app produces sink output (smaller windows and blocks, an earlier "night").
//! Runs cap the input chains in flight ([`OPTS`]), which bounds how far a parallel run can
//! reorder the input, and windowed apps get a lateness above that bound, so no event is late.

mod common;

use clasp_apps::{pipeline, profile};
use clasp_core::Pipeline;
use clasp_reference::{self as reference, Outcome};
use common::apps::{AppRun, Layout, RunOptions, run_app, set_param};
use serde_json::json;

const SEED: u64 = 5;

/// 8 chains of 32 records in flight: a record is overtaken by fewer than 256 later ones.
const OPTS: RunOptions = RunOptions { batch: 32, max_in_flight: 8 };

/// How a run's outcome is compared with the reference.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Check {
    /// Sinks and state equal (and windows window by window).
    Exact,
    /// What no reordering of a key's records can change.
    OrderInsensitive,
}

/// An app's pipeline and generated input, and the reference outcome.
struct Case {
    app: &'static str,
    p: Pipeline,
    inputs: Vec<clasp_apps::inputs::SourceLines>,
    expected: Outcome,
}

impl Case {
    /// `count` generated records per source for `SEED`, with `tune` applied to the spec.
    fn new(app: &'static str, count: u64, tune: impl FnOnce(&mut Pipeline)) -> Self {
        let mut p = pipeline(app).unwrap();
        tune(&mut p);
        let inputs = profile::generate(app, count, SEED).unwrap();
        let expected = reference::expected(app, &p, &inputs).unwrap();
        let sink_records: usize = expected.sinks.values().map(Vec::len).sum();
        assert!(sink_records > 0, "{app}: the reference produced no sink output to compare");
        Self { app, p, inputs, expected }
    }

    fn sink_records(&self) -> usize {
        self.expected.sinks.values().map(Vec::len).sum()
    }

    /// Runs the case with `layout` and compares with the reference.
    fn run(&self, layout: Layout, check: Check) -> AppRun {
        self.run_with(layout, check, OPTS)
    }

    /// Runs the case with `layout` and `opts` and compares with the reference.
    fn run_with(&self, layout: Layout, check: Check, opts: RunOptions) -> AppRun {
        let run = run_app(&self.p, &self.inputs, layout, opts);
        let what = format!("{} on {layout:?}", self.app);
        let s = &run.summary;
        let records: usize = self.inputs.iter().map(|(_, l)| l.len()).sum();
        assert_eq!(s.input_records, records as u64, "{what}");
        assert_eq!(s.completed, s.input_requests, "{what}: chains left incomplete");
        assert_eq!(s.rejected(), 0, "{what}: generated input was rejected: {:?}", s.operators);
        let got: usize = run.outcome.sinks.values().map(Vec::len).sum();
        assert_eq!(s.sink_records, got as u64, "{what}: sink records counted vs received");
        if check == Check::Exact {
            reference::check(self.app, &self.p, &self.expected, &run.outcome)
                .unwrap_or_else(|e| panic!("{what} (exact):\n{e}"));
        }
        reference::check_order_insensitive(self.app, &self.p, &self.expected, &run.outcome)
            .unwrap_or_else(|e| panic!("{what} (order-insensitive):\n{e}"));
        if layout.workers() > 1 {
            assert!(s.remote_requests > 0, "{what}: no request crossed workers");
        }
        run
    }

    /// Windows of the reference, and how many of them were emitted to the sink.
    fn windows(&self) -> (usize, usize) {
        let all = reference::windows(self.app, &self.p, &self.expected).unwrap();
        let mut open = self.expected.clone();
        open.sinks.values_mut().for_each(Vec::clear);
        let still_open = reference::windows(self.app, &self.p, &open).unwrap();
        (all.len(), all.len() - still_open.len())
    }
}

/// SD — exact on 1 worker and on 3 workers. The readings source is keyed by sensor and
/// `moving_avg` (ordered, keyed by sensor) is the first operator: the planner routes each
/// reading straight to the key's owner over one connection per worker, so every sensor's
/// readings are averaged in input order wherever its key lives. The window is 20 readings so
/// that a few thousand inputs (about 55 per sensor) evict.
#[test]
fn sd_matches_the_reference_exactly_on_1_and_3_workers() {
    let case = Case::new("sd", 3_000, |p| set_param(p, "moving_avg", "window", json!(20)));
    assert!(case.sink_records() > 20, "{}", case.sink_records());
    case.run(Layout::Sequential, Check::Exact);
    case.run(Layout::Spread(3), Check::Exact);
}

/// AA — exact on 1 worker; on 3 workers window by window, order-insensitively: the
/// projection runs on every worker, so a campaign's views reach `campaign` from several
/// workers in an order that decides only the order of the emitted windows, not their counts:
/// a window closes by an event-time timer once the watermark (the time of the events read,
/// once every earlier chain completed) passes its end. Windows are 500 ms of event time (a few
/// thousand events span a few seconds).
#[test]
fn aa_matches_the_reference_per_window_on_1_and_3_workers() {
    let case = Case::new("aa", 5_000, |p| set_param(p, "campaign", "window_ms", json!(500)));
    let (windows, emitted) = case.windows();
    assert!(windows > 500 && emitted == windows, "{windows} windows, {emitted} emitted");
    case.run(Layout::Sequential, Check::Exact);
    case.run(Layout::Spread(3), Check::OrderInsensitive);
    // Unthrottled with as many chains in flight as `clasp run` allows: the same windows.
    let wide = RunOptions { batch: 16, max_in_flight: 10_000 };
    case.run_with(Layout::Spread(3), Check::OrderInsensitive, wide);
}

/// PL — exact on 1 worker; on 3 workers order-insensitive: the stateless parse, filters and
/// join spread over the workers, so which records of a category share a block of
/// `reset_every` (and so each block's mean) depends on the order they reach `aggregation`;
/// the number of records and of blocks per category does not. Blocks are 100 records here.
#[test]
fn pl_matches_the_reference_on_1_and_3_workers() {
    let case = Case::new("pl", 5_000, |p| set_param(p, "aggregation", "reset_every", json!(100)));
    assert!(case.sink_records() >= 20, "{}", case.sink_records());
    case.run(Layout::Sequential, Check::Exact);
    case.run(Layout::Spread(3), Check::OrderInsensitive);
}

/// NWM — exact on 1 worker; on 3 workers order-insensitive, which for NWM is the whole
/// comparison: daily failure counts, the ≥ 3 flag, the join and the locked hosts depend only
/// on which logins each host had on each day, not on their order. 11,000 logins span three
/// days (5,000 a day), within the 3 days each operator keeps.
#[test]
fn nwm_matches_the_reference_on_1_and_3_workers() {
    let case = Case::new("nwm", 11_000, |_| {});
    assert!(case.sink_records() > 100, "{}", case.sink_records());
    case.run(Layout::Sequential, Check::Exact);
    case.run(Layout::Spread(3), Check::OrderInsensitive);
}

/// NWM with as many chains in flight as `clasp run` allows (10,000), unthrottled on 3
/// workers: the short success branch runs days ahead of the failure branch, and the result is
/// still the reference's, because a host's day stays open until the watermark (the day of the
/// logins read, once every earlier chain completed) passes it. 30,000 logins span six days.
#[test]
fn nwm_is_exact_unthrottled_with_many_chains_in_flight() {
    let case = Case::new("nwm", 30_000, |_| {});
    let wide = RunOptions { batch: 16, max_in_flight: 10_000 };
    let run = case.run_with(Layout::Spread(3), Check::OrderInsensitive, wide);
    assert!(run.summary.remote_requests > 0);
}

/// ETL — exact on 1 worker and on 3 workers: the SenML parse spreads over the workers, so a
/// sensor field's readings reach `interpolation` in any order, but it takes them in event-time
/// order once the watermark passes them, so the interpolated values are the reference's.
#[test]
fn etl_matches_the_reference_on_1_and_3_workers() {
    let case = Case::new("etl", 3_000, |_| {});
    assert!(case.sink_records() > 1_000, "{}", case.sink_records());
    case.run(Layout::Sequential, Check::Exact);
    case.run(Layout::Spread(3), Check::Exact);
}

/// taxi-w1 — two stateless filters: the result is the same set of rides in any order, so
/// the order-insensitive comparison on 3 workers is the whole comparison; exact on 1 worker.
#[test]
fn taxi_w1_matches_the_reference_on_1_and_3_workers() {
    let case = Case::new("taxi-w1", 4_000, |_| {});
    assert!(case.sink_records() > 500, "{}", case.sink_records());
    case.run(Layout::Sequential, Check::Exact);
    case.run(Layout::Spread(3), Check::OrderInsensitive);
}

/// taxi-w2 — the ride–fare join by ride id pairs each ride with its fare whatever order the
/// two sources' records arrive in (and the two sources are read concurrently even on one
/// worker), so the order-insensitive comparison on 3 workers is the whole comparison; exact
/// on 1 worker. Generated rides start at noon, one a second, so the "night" is moved to
/// 12:00–13:00 to keep rides of a few thousand events.
#[test]
fn taxi_w2_matches_the_reference_on_1_and_3_workers() {
    let case = Case::new("taxi-w2", 4_000, |p| {
        set_param(p, "filter_night", "night_start_h", json!(12));
        set_param(p, "filter_night", "night_end_h", json!(13));
    });
    let leftovers = case.expected.state["join"].len();
    assert!(case.sink_records() > 100 && leftovers > 100, "{} {leftovers}", case.sink_records());
    case.run(Layout::Sequential, Check::Exact);
    case.run(Layout::Spread(3), Check::OrderInsensitive);
}

/// taxi-w3 — exact on 1 worker and on 3 workers: rides reach the per-cell `window` from
/// every worker in any order, and each window closes by an event-time timer once the
/// watermark passes its end, so every window is emitted with the reference's counts; popular
/// means 5 rides in 15 minutes for a few thousand events.
#[test]
fn taxi_w3_matches_the_reference_per_window_on_1_and_3_workers() {
    let case = Case::new("taxi-w3", 6_000, |p| {
        set_param(p, "filter_popular", "min_count", json!(5));
    });
    let (windows, emitted) = case.windows();
    assert!(windows > 20 && emitted == windows, "{windows} windows, {emitted} emitted");
    case.run(Layout::Sequential, Check::Exact);
    case.run(Layout::Spread(3), Check::Exact);
}
