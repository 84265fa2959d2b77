//! The windowed applications whose windows follow event time — SD's moving average, ETL's
//! interpolation, taxi-w3's sliding windows — run by `clasp run` on 1 and 3 workers, paced and
//! unthrottled, on their generated input and on a seeded shuffle of it within the source's
//! declared `out_of_orderness`: every run's sink records and final keyed state must equal the
//! independent reference's, and no record may come late. With the bound declared too small,
//! the records beyond it are counted as late by the operator that holds the window.

mod common;

use clasp_apps::profile;
use clasp_core::rng::SeededRng;
use clasp_reference::{self as reference, Outcome};
use common::Scratch;
use rand::{RngExt, SeedableRng};
use std::process::Command;

const SEED: u64 = 11;

/// Input lines, in arrival order.
type Lines = [Vec<u8>];

/// One windowed application: its spec (tuned so that a few thousand records give results),
/// its generated lines and the reference outcome.
struct Case {
    app: &'static str,
    spec: String,
    lines: Vec<Vec<u8>>,
    expected: Outcome,
    /// The operator holding the windows, which counts late records.
    windowed: &'static str,
}

impl Case {
    fn new(app: &'static str, count: u64, tune: &[(&str, &str)], windowed: &'static str) -> Self {
        let mut spec = clasp_apps::spec_text(app).unwrap().to_owned();
        for (from, to) in tune {
            assert!(spec.contains(from), "{app}: no `{from}` in the spec");
            spec = spec.replace(from, to);
        }
        let p = clasp_core::spec::parse(&spec, app).unwrap();
        let inputs = profile::generate(app, count, SEED).unwrap();
        assert_eq!(inputs.len(), 1, "{app}: one source");
        let expected = reference::expected(app, &p, &inputs).unwrap();
        let sink_records: usize = expected.sinks.values().map(Vec::len).sum();
        assert!(sink_records > 20, "{app}: only {sink_records} sink records to compare");
        let lines = inputs.into_iter().next().unwrap().1;
        Self { app, spec, lines, expected, windowed }
    }

    fn pipeline(&self) -> clasp_core::Pipeline {
        clasp_core::spec::parse(&self.spec, self.app).unwrap()
    }

    /// The lines in an arrival order at most the source's `out_of_orderness` out of order
    /// (seeded): each line is placed by its time plus a draw below the bound.
    fn shuffled(&self, seed: u64) -> Vec<Vec<u8>> {
        let p = self.pipeline();
        let bound = p.sources[0].out_of_orderness;
        assert!(bound > 0, "{}: no out-of-orderness declared", self.app);
        let times = clasp_apps::registry().event_times(&p).unwrap();
        let time = times[0].as_ref().expect("the source has event times");
        let mut rng = SeededRng::seed_from_u64(seed);
        let mut placed: Vec<(u64, usize)> = self
            .lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                (time(l).expect("generated lines have times") + rng.random_range(0..bound), i)
            })
            .collect();
        placed.sort_unstable();
        let out: Vec<Vec<u8>> = placed.into_iter().map(|(_, i)| self.lines[i].clone()).collect();
        assert_ne!(out, self.lines, "{}: the shuffle moved nothing", self.app);
        out
    }
}

/// What one `clasp run` produced.
struct Run {
    outcome: Outcome,
    /// Late records counted by each operator.
    late: Vec<(String, u64)>,
}

/// Runs `spec` with `lines` as the input file and `args`; reads its sinks, final state and
/// late counts.
fn clasp_run(case: &Case, spec: &str, lines: &[Vec<u8>], args: &[&str], dir: &Scratch) -> Run {
    let (spec_file, input) = (dir.file("spec.toml"), dir.file("input.txt"));
    std::fs::write(&spec_file, spec).unwrap();
    let mut text = lines.join(&b'\n');
    text.push(b'\n');
    std::fs::write(&input, text).unwrap();
    let (output, dump, stats) =
        (dir.file("out.jsonl"), dir.file("state.jsonl"), dir.file("s.json"));
    let out = Command::new(env!("CARGO_BIN_EXE_clasp"))
        .arg("run")
        .arg(&spec_file)
        .args(["--quiet", "--batch", "32", "--seed", "3"])
        .args(args)
        .arg("--input")
        .arg(format!("file:{}", input.display()))
        .arg("--output")
        .arg(&output)
        .arg("--state-dump")
        .arg(&dump)
        .arg("--stats")
        .arg(&stats)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{} {args:?}: clasp run failed:\n{stderr}", case.app);
    let p = case.pipeline();
    let mut outcome = Outcome::default();
    for s in &p.sinks {
        outcome.sinks.entry(s.name.clone()).or_default();
    }
    for o in p.operators.iter().filter(|o| o.stateful) {
        outcome.state.entry(o.name.clone()).or_default();
    }
    for line in std::fs::read_to_string(&output).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let field = |f: &str| v[f].as_str().unwrap().to_owned();
        outcome.add_sink(&field("sink"), field("key").as_bytes(), field("value").as_bytes());
    }
    for line in std::fs::read_to_string(&dump).unwrap().lines() {
        outcome.add_state_line(line).unwrap();
    }
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let late = stats["summary"]["operators"]
        .as_array()
        .unwrap()
        .iter()
        .map(|op| {
            let n = op["rejected"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| r[0] == clasp_core::operator::LATE)
                .map(|r| r[1].as_u64().unwrap())
                .sum();
            (op["name"].as_str().unwrap().to_owned(), n)
        })
        .collect();
    Run { outcome, late }
}

fn late_total(run: &Run) -> u64 {
    run.late.iter().map(|(_, n)| n).sum()
}

/// The case on 1 and 3 workers, paced and unthrottled, in generated order and shuffled within
/// the bound: every run equals the reference exactly, and none has a late record.
fn same_results_in_any_order_and_on_any_worker_count(case: &Case) {
    let dir = Scratch::new("event-time", case.app);
    let p = case.pipeline();
    let shuffled = case.shuffled(SEED);
    // The reference takes records in time order: the shuffle changes nothing for it either.
    let again = reference::expected(case.app, &p, &[(p.sources[0].name.clone(), shuffled.clone())]);
    assert_eq!(again.unwrap(), case.expected, "{}: the reference depends on the order", case.app);
    // (what, input lines, arguments)
    let runs: [(&str, &Lines, &[&str]); 4] = [
        ("in order, 1 worker, paced", &case.lines, &["--workers", "1", "--rate", "400"]),
        ("in order, 3 workers, unthrottled", &case.lines, &["--workers", "3"]),
        ("shuffled, 3 workers, unthrottled", &shuffled, &["--workers", "3"]),
        ("shuffled, 1 worker, paced", &shuffled, &["--workers", "1", "--rate", "400"]),
    ];
    for (what, lines, args) in runs {
        let run = clasp_run(case, &case.spec, lines, args, &dir);
        assert_eq!(late_total(&run), 0, "{} {what}: late records {:?}", case.app, run.late);
        reference::check(case.app, &p, &case.expected, &run.outcome)
            .unwrap_or_else(|e| panic!("{} {what}:\n{e}", case.app));
    }
}

#[test]
fn sd_is_the_same_in_any_order_and_on_any_worker_count() {
    let case = Case::new("sd", 3_000, &[("window = 100", "window = 20")], "moving_avg");
    same_results_in_any_order_and_on_any_worker_count(&case);
}

#[test]
fn etl_is_the_same_in_any_order_and_on_any_worker_count() {
    let case = Case::new("etl", 3_000, &[], "interpolation");
    same_results_in_any_order_and_on_any_worker_count(&case);
}

#[test]
fn taxi_w3_is_the_same_in_any_order_and_on_any_worker_count() {
    let case = Case::new("taxi-w3", 6_000, &[("min_count = 20", "min_count = 5")], "window");
    same_results_in_any_order_and_on_any_worker_count(&case);
}

/// The SD spec promising readings in order, given the shuffled readings: those beyond the
/// bound are counted as late by `moving_avg` and only there, and every reading is either
/// averaged or counted late.
#[test]
fn readings_beyond_the_bound_are_counted_late_by_the_window() {
    let case = Case::new("sd", 3_000, &[], "moving_avg");
    let dir = Scratch::new("event-time", "late");
    let strict = case.spec.replace("out_of_orderness = 60000000", "out_of_orderness = 0");
    assert_ne!(strict, case.spec);
    let shuffled = case.shuffled(SEED + 1);
    let run = clasp_run(&case, &strict, &shuffled, &["--workers", "3"], &dir);
    let late = late_total(&run);
    let by_window: u64 =
        run.late.iter().filter(|(op, _)| op == case.windowed).map(|(_, n)| n).sum();
    assert!(late > 0, "no reading came late");
    assert_eq!(by_window, late, "late records are counted by the window: {:?}", run.late);
    let averaged: u64 =
        run.outcome.state["moving_avg"].values().map(|s| s["seen"].as_u64().unwrap()).sum();
    assert_eq!(averaged + late, case.lines.len() as u64, "every reading averaged or late");
}
