//! `clasp bench` as a user runs it: a quick experiment writes its CSV, PNG and markdown and
//! prints the report; bad arguments fail with a clear message before anything runs.

use std::path::PathBuf;
use std::process::{Command, Output};

fn clasp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clasp")).args(args).output().expect("the binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn temp_dir(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("clasp-bench-{name}-{}", std::process::id()))
}

#[test]
fn a_quick_experiment_writes_csv_png_and_markdown() {
    let dir = temp_dir("state");
    let out = dir.to_str().unwrap();
    let o = clasp(&[
        "bench",
        "state-locality",
        "--engine",
        "sim",
        "--quick",
        "--out",
        out,
        "--set",
        "apps=wc",
        "--set",
        "run=2s",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let md = String::from_utf8(o.stdout.clone()).unwrap();
    assert!(md.starts_with("# state-locality"), "{md}");
    assert!(md.contains("| wc |") && md.contains("engine: sim"), "{md}");
    let err = stderr(&o);
    for file in ["state-locality.csv", "state-locality.md", "state-locality.png"] {
        assert!(dir.join(file).is_file(), "{file} missing");
        assert!(err.contains(&format!("wrote {}", dir.join(file).display())), "{err}");
    }
    assert!(err.contains("1/1 state-locality: wc"), "progress on stderr: {err}");
    let png = std::fs::read(dir.join("state-locality.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let csv = std::fs::read_to_string(dir.join("state-locality.csv")).unwrap();
    assert!(csv.starts_with("app,executions touching state (%),"), "{csv}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Runs `clasp bench` with `args` and returns its error message; nothing may be written.
fn fails(args: &[&str]) -> String {
    let dir = temp_dir("bad");
    let mut all = vec!["bench"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--out", dir.to_str().unwrap()]);
    let o = clasp(&all);
    assert!(!o.status.success(), "{args:?} should fail");
    assert!(o.stdout.is_empty(), "{args:?} printed a report");
    assert!(!dir.exists(), "{args:?} wrote {}", dir.display());
    stderr(&o)
}

#[test]
fn bad_input_is_a_clear_error_before_anything_runs() {
    let e = fails(&["nope"]);
    assert!(e.contains("unknown experiment `nope`") && e.contains("worker-count"), "{e}");
    let e = fails(&["scaling", "--engine", "gpu"]);
    assert!(e.contains("unknown engine `gpu`"), "{e}");
    let sim = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend_from_slice(&["--engine", "sim"]);
        fails(&all)
    };
    let e = sim(&["scaling", "--set", "workers=0"]);
    assert!(e.contains("workers=0"), "{e}");
    let e = sim(&["migration", "--set", "rate=0"]);
    assert!(e.contains("rate=0") && e.contains("> 0"), "{e}");
    let e = sim(&["placement", "--set", "speed=9"]);
    assert!(e.contains("unknown setting `speed`"), "{e}");
    let e = sim(&["scaling", "--set", "workers"]);
    assert!(e.contains("KEY=VALUE"), "{e}");
    let e = sim(&["scaling", "--set", "exec-us=200"]);
    assert!(e.contains("did you mean `exec_time`?") && e.contains("headroom"), "{e}");
    let e = sim(&["scaling", "--set", "run=2"]);
    assert!(e.contains("--set run=2") && e.contains("e.g. 2s"), "{e}");
    let e = fails(&["edge", "--set", "wan=carrier-pigeon"]);
    assert!(e.contains("wan=carrier-pigeon") && e.contains("user-space"), "{e}");
    let e = fails(&["edge", "--engine", "sim"]);
    assert!(e.contains("only on the edge engine"), "{e}");
    let e = sim(&["dispatch"]);
    assert!(e.contains("only on the runtime engine"), "{e}");
    let e = fails(&["scaling", "--engine", "runtime", "--set", "speed=9"]);
    assert!(e.contains("unknown setting `speed`") && e.contains("dispatch_cost"), "{e}");
    let e = fails(&["placement", "--engine", "runtime", "--set", "workers=0"]);
    assert!(e.contains("workers=0"), "{e}");
    let e = fails(&["scaling", "--engine", "runtime", "--set", "dispatch_cost=remote=x"]);
    assert!(e.contains("dispatch_cost=remote=x"), "{e}");
    let e = fails(&["validate", "--engine", "runtime", "--set", "loads=1.5"]);
    assert!(e.contains("loads=1.5"), "{e}");
}

/// Runs a quick runtime experiment with `settings` (short runs on few workers) and returns its
/// markdown and output directory; checks that it wrote its CSV, PNG and markdown.
fn runtime_quick(experiment: &str, settings: &[&str]) -> (String, PathBuf) {
    let dir = temp_dir(&format!("rt-{experiment}"));
    let mut args = vec!["bench", experiment, "--quick", "--out", dir.to_str().unwrap()];
    for s in settings {
        args.extend_from_slice(&["--set", s]);
    }
    let o = clasp(&args);
    assert!(o.status.success(), "{experiment}: {}", stderr(&o));
    let md = String::from_utf8(o.stdout).unwrap();
    assert!(md.contains("engine: runtime") || md.contains("engine runtime"), "{md}");
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for ext in [".csv", ".png"] {
        assert!(files.iter().any(|f| f.ends_with(ext)), "{experiment}: no {ext} in {files:?}");
    }
    assert!(files.contains(&format!("{experiment}.md")), "{files:?}");
    (md, dir)
}

/// The rows of the markdown table that follows `## name`.
fn table_rows(md: &str, name: &str) -> Vec<Vec<String>> {
    let start = md.find(&format!("## {name}\n")).unwrap_or_else(|| panic!("no table {name}: {md}"));
    md[start..]
        .lines()
        .skip(4)
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split('|').map(|c| c.trim().to_owned()).collect())
        .collect()
}

/// Cell `i` of `row` as a positive, finite number.
fn positive(row: &[String], i: usize) -> f64 {
    let x: f64 = row[i].parse().unwrap_or_else(|_| panic!("cell {i} of {row:?}"));
    assert!(x.is_finite() && x > 0.0, "cell {i} of {row:?}");
    x
}

#[test]
fn runtime_scaling_reports_every_worker_count_in_both_regimes() {
    let (md, dir) = runtime_quick("scaling", &["warmup=500ms", "workers=1,2", "run=1s"]);
    let rows = table_rows(&md, "scaling");
    assert_eq!(rows.len(), 4, "{md}");
    for (row, (regime, workers)) in
        rows.iter().zip([("native", "1"), ("native", "2"), ("emulated", "1"), ("emulated", "2")])
    {
        assert_eq!((row[0].as_str(), row[1].as_str(), row[2].as_str()), ("syn", regime, workers));
        positive(row, 3);
        positive(row, 8);
    }
    assert_eq!(rows[0][4], "1.00");
    assert!(md.contains("EMULATED dispatch costs: local 38.5 us, remote 275 us"), "{md}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn runtime_placement_and_state_locality_run_each_policy_and_state_mode() {
    let (md, dir) = runtime_quick(
        "placement",
        &["warmup=500ms", "workers=2", "run=1s", "policies=clasp,faasflow", "dispatch_cost=paper"],
    );
    let rows = table_rows(&md, "placement");
    assert_eq!(rows.len(), 2, "{md}");
    assert_eq!((rows[0][2].as_str(), rows[1][2].as_str()), ("clasp", "faasflow"));
    assert!(rows.iter().all(|r| r[1] == "emulated"), "{md}");
    positive(&rows[1], 4);
    assert!(md.contains("EMULATED"), "{md}");
    std::fs::remove_dir_all(&dir).unwrap();
    let (md, dir) = runtime_quick(
        "state-locality",
        &["warmup=500ms", "apps=wc", "workers=2", "run=1s", "dispatch_cost=native"],
    );
    let rows = table_rows(&md, "state-locality");
    assert_eq!(rows.len(), 1, "{md}");
    assert_eq!((rows[0][0].as_str(), rows[0][1].as_str()), ("wc", "native"));
    assert!(positive(&rows[0], 2) > 50.0, "WC's count touches state: {md}");
    positive(&rows[0], 3);
    positive(&rows[0], 4);
    assert!(!md.contains("EMULATED dispatch"), "native only: {md}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn runtime_worker_count_predicts_every_other_level() {
    let (md, dir) = runtime_quick(
        "worker-count",
        &["warmup=500ms", "workers=2", "levels=2", "run=1s", "policies=clasp"],
    );
    let rows = table_rows(&md, "worker-count-transitions");
    assert!(!rows.is_empty() && rows.len() <= 2, "{md}");
    for r in &rows {
        assert_eq!((r[0].as_str(), r[1].as_str(), r[2].as_str()), ("emulated", "wc", "clasp"));
        let (predicted, optimal): (u32, u32) = (r[6].parse().unwrap(), r[7].parse().unwrap());
        assert!((1..=2).contains(&predicted) && (1..=2).contains(&optimal), "{r:?}");
        assert_eq!(r[8].parse::<u32>().unwrap(), predicted.abs_diff(optimal));
    }
    assert_eq!(table_rows(&md, "worker-count-maxima").len(), 2, "{md}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The rows of `<dir>/<name>.csv`, header first.
fn csv_rows(dir: &std::path::Path, name: &str) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(dir.join(format!("{name}.csv"))).unwrap();
    text.lines().map(|l| l.split(',').map(str::to_owned).collect()).collect()
}

/// This runtime's β as the report's dispatch measurement gives it (µs), floored as the
/// testbed floors it.
fn measured_beta_us(md: &str) -> f64 {
    let rows = table_rows(md, "dispatch");
    assert_eq!(rows.len(), 3, "baseline, local and remote runs: {md}");
    assert!(rows[2][0].contains("beta"), "{rows:?}");
    let ns: f64 = rows[2][5].parse().unwrap();
    (ns / 1e3).max(1e-3)
}

#[test]
fn runtime_validate_compares_the_simulator_with_numbers_and_a_verdict() {
    let (md, dir) = runtime_quick("validate", &["warmup=500ms", "run=1s", "dispatch_cost=native"]);
    let rows = table_rows(&md, "validate-runtime");
    assert_eq!(rows.len(), 2, "unthrottled throughput and the latency at 50 %: {md}");
    // The CSV holds the same cells as the markdown.
    let csv = csv_rows(&dir, "validate-runtime");
    assert_eq!(&csv[1..], &rows[..], "{md}");
    let mut worst: f64 = 0.0;
    for r in &rows {
        let (runtime, simulated) = (positive(r, 4), positive(r, 5));
        let diff: f64 = r[7].parse().unwrap();
        // The difference column is (simulator - runtime) / runtime of the two value columns.
        let recomputed = 100.0 * (simulated - runtime) / runtime;
        // Each cell is rounded to its last printed digit: the recomputed difference is only
        // as exact as that rounding lets it be.
        let (hr, hs, hd) = (half_unit(&r[4]), half_unit(&r[5]), half_unit(&r[7]));
        let bound = 100.0 * (hs / runtime + simulated * hr / (runtime * runtime)) + hd + 1e-9;
        assert!((diff - recomputed).abs() <= bound, "{r:?}: off by more than {bound}");
        if (diff.abs() - 15.0).abs() > 0.1 {
            assert_eq!(r[8] == "yes", diff.abs() <= 15.0, "{r:?}");
        }
        worst = worst.max(diff.abs());
    }
    // The verdict follows from the table: PASS with the largest difference, or FAIL counting
    // the rows outside the bound.
    let outside = rows.iter().filter(|r| r[8] == "NO").count();
    if outside == 0 {
        assert!(
            md.contains(&format!(
                "PASS: all 2 comparisons within 15 % (largest difference {worst:.1} %)"
            )),
            "{md}"
        );
    } else {
        assert!(md.contains(&format!("FAIL: {outside} of 2 comparisons outside 15 %")), "{md}");
    }
    assert_eq!(rows[0][3], "unthrottled throughput", "{md}");
    // alpha and beta were measured in this run and the simulator was given those values.
    let beta = measured_beta_us(&md);
    assert!(md.contains("measured at the start of this run"), "{md}");
    let given = md
        .split_once("simulator given:")
        .and_then(|(_, rest)| rest.split_once(" us and beta "))
        .and_then(|(_, rest)| rest.split_once(" us of dispatch CPU as measured above"))
        .unwrap_or_else(|| panic!("the simulator's beta: {md}"))
        .0;
    assert_printed_from(given, beta, BETA_HALF_UNIT_US);
    assert!(md.contains("hop delays calibrated before each case"), "{md}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Half of the last printed digit of `cell`: how far the value it was rounded from may lie.
fn half_unit(cell: &str) -> f64 {
    0.5 * 10f64.powi(-(cell.split('.').nth(1).map_or(0, str::len) as i32))
}

/// The dispatch table prints beta in whole nanoseconds: half of one, in microseconds.
const BETA_HALF_UNIT_US: f64 = 0.5e-3;

/// `cell` is a rounding of a value within `tolerance` of `value`. Two reports that round the
/// same measurement at different digits (nanoseconds in one table, three significant digits
/// of microseconds in another) may each round to a different side of it.
fn assert_printed_from(cell: &str, value: f64, tolerance: f64) {
    let printed: f64 = cell.parse().unwrap_or_else(|_| panic!("{cell:?} is not a number"));
    let bound = half_unit(cell) + tolerance + 1e-9;
    assert!((printed - value).abs() <= bound, "{cell} is not {value} rounded (within {bound})");
}

#[test]
fn runtime_recovery_measures_checkpoints_and_a_killed_worker() {
    let keys = 5_000;
    let (md, dir) = runtime_quick("recovery", &[&format!("keys={keys}")]);
    let cost = table_rows(&md, "recovery_cost");
    assert_eq!(cost.len(), 1, "{md}");
    assert_eq!(cost[0][0], keys.to_string());
    positive(&cost[0], 1);
    positive(&cost[0], 2);
    let (unthrottled, paced) = cost[0][4].split_once(" + ").unwrap();
    let committed = |n: &str| n.parse::<u32>().unwrap();
    assert!(committed(unthrottled) >= 1 && committed(paced) >= 1, "{md}");
    // Dispatch pauses and holds (5 to 8) are zero when nothing waited; none is negative.
    for (i, cell) in cost[0].iter().enumerate().take(9).skip(5) {
        let ms: f64 = cell.parse().unwrap_or_else(|_| panic!("cell {i}: {md}"));
        assert!(ms >= 0.0, "cell {i}: {md}");
    }
    positive(&cost[0], 9);
    positive(&cost[0], 10);
    let rec = table_rows(&md, "recovery_time");
    assert_eq!(rec.len(), 1, "{md}");
    positive(&rec[0], 2);
    // Every key entered the state with the first pass over the input, before any checkpoint.
    assert_eq!(rec[0][4], keys.to_string(), "keys restored: {md}");
    assert!(rec[0][6].parse::<u64>().is_ok(), "restored from a checkpoint: {md}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn runtime_end_to_end_says_when_dispatch_costs_are_emulated() {
    let (md, dir) = runtime_quick(
        "end-to-end",
        &["policies=clasp,faasflow", "pattern_scale=0.04", "dispatch_cost=paper"],
    );
    let rows = table_rows(&md, "end_to_end");
    assert_eq!(rows.len(), 2, "{md}");
    assert!(rows.iter().all(|r| r[0] == "emulated"), "{md}");
    for r in &rows {
        let (done, offered) = r[8].split_once('/').unwrap();
        assert_eq!(done, offered, "every input completes: {r:?}");
    }
    assert!(md.contains("EMULATED dispatch costs: local 38.5 us"), "{md}");
    let ratios = table_rows(&md, "end_to_end_ratios");
    assert_eq!((ratios[0][0].as_str(), ratios[0][1].as_str()), ("emulated", "faasflow"));
    // Convergence counts every rescaling of the run and the burst's rate changes.
    let converged = table_rows(&md, "end_to_end_convergence");
    assert_eq!(converged.len(), 2, "{md}");
    for (c, r) in converged.iter().zip(&rows) {
        assert_eq!((c[1].as_str(), c[6].as_str()), (r[1].as_str(), r[7].as_str()), "{md}");
        let count =
            |i: usize| -> usize { c[i].parse().unwrap_or_else(|_| panic!("cell {i} of {c:?}")) };
        let (one, changes) = (count(4), count(3));
        assert!(changes > 0 && one <= changes, "{c:?}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn runtime_coefficients_learn_the_emulated_remote_cost() {
    let (md, dir) = runtime_quick("coefficients", &["warmup=500ms", "dispatch_cost=paper"]);
    let steps = table_rows(&md, "coefficients");
    // CLASP on 1 worker, then CLASP and FaaSFlow on 2.
    assert_eq!(steps.len(), 3, "{md}");
    assert!(steps.iter().all(|r| r[0] == "emulated" && r[1] == "wc"), "{md}");
    let summary = table_rows(&md, "coefficients-summary");
    assert_eq!(summary.len(), 4, "{md}");
    // The estimator starts 2.5 times away from the truth and must end closer to it than it
    // started.
    let beta = &summary[1];
    assert_eq!(beta[2], "beta (us)");
    let (start, learnt, truth) = (positive(beta, 3), positive(beta, 4), positive(beta, 5));
    // The truth is the emulated 275 us plus this runtime's own beta, measured in the same run
    // (its dispatch table); printed to three significant digits.
    let expected = 275.0 + measured_beta_us(&md);
    assert_printed_from(&beta[5], expected, BETA_HALF_UNIT_US);
    assert!((learnt - truth).abs() < (start - truth).abs() / 2.0, "{beta:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}
