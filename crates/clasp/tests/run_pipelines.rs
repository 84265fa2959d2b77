//! `clasp run` on every pipeline in `pipelines/` with its application's generator as input,
//! and on input files mixing good and malformed lines: the run exits 0, its summary shows
//! every input completed, and malformed lines are counted per operator and reason without
//! stopping the pipeline.

mod common;

use clasp_apps::inputs::{self, SourceLines};
use clasp_reference::{self as reference, Outcome};
use common::{Scratch, root};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const SEED: u64 = 3;

/// Runs `clasp run` with `args`; returns its standard output (the summary). Fails the test,
/// with the standard error, unless it exits 0.
fn clasp_run(args: &[String]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_clasp")).arg("run").args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "clasp run {args:?} exited with {}:\n{stderr}", out.status);
    String::from_utf8(out.stdout).unwrap()
}

/// The numbers of the summary's `input` and `completed` lines: (input requests, input
/// records, completed chains).
fn summary_counts(summary: &str) -> (u64, u64, u64) {
    let line = |label: &str| -> Vec<u64> {
        let l = summary
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no `{label}` line in:\n{summary}"));
        l.split(|c: char| !c.is_ascii_digit() && c != '.')
            .filter(|w| !w.is_empty() && !w.contains('.'))
            .map(|w| w.parse().unwrap())
            .collect()
    };
    let input = line("input ");
    let completed = line("completed ");
    (input[0], input[1], completed[0])
}

/// The run summary of a `--stats` file.
fn stats_summary(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    v["summary"].clone()
}

/// `operator/reason → count` from a `--stats` summary.
fn rejections(summary: &serde_json::Value) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for op in summary["operators"].as_array().unwrap() {
        for pair in op["rejected"].as_array().unwrap() {
            let key = format!("{}/{}", op["name"].as_str().unwrap(), pair[0].as_str().unwrap());
            *m.entry(key).or_default() += pair[1].as_u64().unwrap();
        }
    }
    m
}

/// Every spec in `pipelines/`, with its pipeline name.
fn pipelines() -> Vec<(PathBuf, String)> {
    let mut v: Vec<(PathBuf, String)> = std::fs::read_dir(root().join("pipelines"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| {
            let name = clasp_core::spec::load(&p).unwrap_or_else(|e| panic!("{e}")).name;
            (p, name)
        })
        .collect();
    v.sort();
    v
}

/// How many lines `clasp run` reads from generator input `SOURCE=gen:count` for `app`
/// (taxi-w2's fares are those of the rides started among `count` ride events).
fn generated_lines(app: &str, count: u64) -> u64 {
    inputs::sources_of(app)
        .iter()
        .map(|d| d.write_generated(count, SEED, &mut std::io::sink()).unwrap())
        .sum()
}

/// Every pipeline runs with its generator — one `--input SOURCE=gen:N` per source — on 1
/// and on 3 workers (worker threads), exits 0, and completes every input request: the
/// summary's input records are all the generator's lines, completed chains equal input
/// requests, and nothing is rejected. `fig6` is the CLASP paper's example DAG of pass-through
/// operators, not an application: it has no generator and runs on a file of lines instead.
#[test]
fn every_pipeline_runs_with_its_generator() {
    const COUNT: u64 = 2_000;
    let dir = Scratch::new("run-pipelines", "generators");
    let all = pipelines();
    assert!(all.len() >= clasp_apps::APPS.len(), "{all:?}");
    for app in clasp_apps::APPS {
        assert!(all.iter().any(|(_, n)| n == app), "no spec in pipelines/ for {app}");
    }
    for (spec, name) in &all {
        let defs = inputs::sources_of(name);
        let mut input_args = Vec::new();
        let expected_records = if defs.is_empty() {
            assert_eq!(name, "fig6", "{}: a pipeline without a generator", spec.display());
            let file = dir.file("fig6-input.txt");
            let lines: String = (0..COUNT).map(|i| format!("line {i}\n")).collect();
            std::fs::write(&file, lines).unwrap();
            input_args.extend(["--input".into(), format!("file:{}", file.display())]);
            COUNT
        } else {
            for d in &defs {
                input_args.extend(["--input".into(), format!("{}=gen:{COUNT}", d.source)]);
            }
            generated_lines(name, COUNT)
        };
        for workers in [1, 3] {
            let what = format!("{name} on {workers} worker(s)");
            let stats = dir.file(&format!("{name}-{workers}-stats.json"));
            let mut args: Vec<String> = vec![
                spec.display().to_string(),
                "--quiet".into(),
                "--seed".into(),
                SEED.to_string(),
                "--workers".into(),
                workers.to_string(),
                "--batch".into(),
                "64".into(),
                "--stats".into(),
                stats.display().to_string(),
            ];
            args.extend(input_args.iter().cloned());
            let out = clasp_run(&args);
            let (requests, records, completed) = summary_counts(&out);
            assert_eq!(records, expected_records, "{what}: input records in\n{out}");
            assert_eq!(requests, expected_records.div_ceil(64).max(1), "{what}:\n{out}");
            assert_eq!(completed, requests, "{what}: not every input completed:\n{out}");
            assert!(!out.contains("rejected"), "{what}: generated input rejected:\n{out}");
            let s = stats_summary(&stats);
            assert_eq!(s["input_records"], expected_records, "{what}");
            assert_eq!(s["completed"], s["input_requests"], "{what}");
            assert!(rejections(&s).is_empty(), "{what}: {:?}", rejections(&s));
        }
    }
}

/// `app`'s generated lines for `source` with `bad` lines spread evenly among them.
fn mixed(app: &str, source: &str, count: u64, bad: &[&str]) -> Vec<Vec<u8>> {
    let def = inputs::source(app, Some(source)).unwrap();
    let mut text = Vec::new();
    def.write_generated(count, SEED, &mut text).unwrap();
    let mut lines: Vec<Vec<u8>> = text.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
    lines.pop(); // after the last newline
    for (i, l) in bad.iter().enumerate() {
        let at = (i + 1) * lines.len() / (bad.len() + 1);
        lines.insert(at, l.as_bytes().to_vec());
    }
    lines
}

/// Runs `app` (one source) on 3 workers with `lines` as a file; returns the summary text,
/// the `--stats` summary, and the sinks and final state it produced.
fn run_file(app: &str, source: &str, lines: &[Vec<u8>]) -> (String, serde_json::Value, Outcome) {
    let dir = Scratch::new("run-pipelines", app);
    let file = dir.file("input.txt");
    let mut text = lines.join(&b'\n');
    text.push(b'\n');
    std::fs::write(&file, text).unwrap();
    let (stats, output, dump) =
        (dir.file("stats.json"), dir.file("output.jsonl"), dir.file("state.jsonl"));
    let spec = root().join(format!("pipelines/{app}.toml"));
    let args: Vec<String> = [
        spec.display().to_string(),
        "--quiet".into(),
        "--workers".into(),
        "3".into(),
        "--batch".into(),
        "32".into(),
        "--input".into(),
        format!("{source}=file:{}", file.display()),
        "--stats".into(),
        stats.display().to_string(),
        "--output".into(),
        output.display().to_string(),
        "--state-dump".into(),
        dump.display().to_string(),
    ]
    .into();
    let out = clasp_run(&args);
    let p = clasp_apps::pipeline(app).unwrap();
    let mut o = Outcome::default();
    for s in &p.sinks {
        o.sinks.entry(s.name.clone()).or_default();
    }
    for line in std::fs::read_to_string(&output).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let field = |f: &str| v[f].as_str().unwrap().to_owned();
        o.add_sink(&field("sink"), field("key").as_bytes(), field("value").as_bytes());
    }
    for line in std::fs::read_to_string(&dump).unwrap().lines() {
        o.add_state_line(line).unwrap();
    }
    (out, stats_summary(&stats), o)
}

/// Checks one run on good and malformed lines: every line was read and completed, the
/// summary lists `want` (`operator/reason → count`, from the apps' documented reasons for
/// the bad lines inserted) under `rejected`, and the good lines gave the reference result.
fn check_malformed(app: &str, source: &str, lines: &[Vec<u8>], want: &[(&str, u64)]) {
    let (out, s, actual) = run_file(app, source, lines);
    let (requests, records, completed) = summary_counts(&out);
    assert_eq!(records, lines.len() as u64, "{app}:\n{out}");
    assert_eq!(completed, requests, "{app}: the pipeline stopped early:\n{out}");
    let want: BTreeMap<String, u64> = want.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect();
    assert_eq!(rejections(&s), want, "{app}: --stats rejections");
    let total: u64 = want.values().sum();
    assert!(out.contains(&format!("rejected   {total} records:")), "{app}:\n{out}");
    for (key, n) in &want {
        let (op, reason) = key.split_once('/').unwrap();
        let line = format!("{op}: {n} ({reason})");
        assert!(out.lines().any(|l| l.trim() == line), "{app}: no `{line}` in\n{out}");
    }
    // The good lines around the bad ones were all processed: sinks and state are the
    // reference's (order-insensitively, as three workers may reorder a key's records).
    let p = clasp_apps::pipeline(app).unwrap();
    let inputs: Vec<SourceLines> = vec![(source.to_owned(), lines.to_vec())];
    let expected = reference::expected(app, &p, &inputs).unwrap();
    let produced = expected.sinks.values().map(Vec::len).sum::<usize>()
        + expected.state.values().map(BTreeMap::len).sum::<usize>();
    assert!(produced > 0, "{app}: the reference produced nothing to compare");
    reference::check_order_insensitive(app, &p, &expected, &actual)
        .unwrap_or_else(|e| panic!("{app}: {e}"));
}

/// AA's YSB events with bad JSON, a missing field, a non-numeric time and an unknown ad:
/// each counted under the operator that refused it, with its reason. 3,000 events span about
/// 3 s of event time, less than a 10 s window's lateness, so however three workers reorder
/// them no view comes late; every window is still open, and its count in the final state is
/// compared with the reference's.
#[test]
fn malformed_events_are_counted_per_operator_and_reason() {
    let view = |ad: &str, time: &str| {
        format!(
            r#"{{"user_id":"u","page_id":"p","ad_id":"{ad}","ad_type":"mail","event_type":"view","event_time":{time},"ip_address":"1.2.3.4"}}"#
        )
    };
    let (unknown_ad, bad_time) = (view("no-such-ad", "\"1500000000001\""), view("x", "\"soon\""));
    let bad = ["{not json", r#"{"user_id":"u"}"#, &unknown_ad, &bad_time, "[]", "{not json"];
    let lines = mixed("aa", "events", 3_000, &bad);
    check_malformed(
        "aa",
        "events",
        &lines,
        &[
            ("deserialize/bad JSON", 3),
            ("deserialize/missing field", 1),
            ("deserialize/non-numeric event_time", 1),
            ("join/unknown ad", 1),
        ],
    );
}

/// PL's CSV page loads with a wrong field count, a non-numeric load time, an empty url and
/// a url outside the catalog.
#[test]
fn malformed_csv_lines_are_counted_per_operator_and_reason() {
    let bad = [
        "http://www.example.com/news/world,user1",
        "http://www.example.com/news/world,user1,fast",
        ",user1,5",
        "http://www.example.com/not/a/page,user1,5",
        "http://www.example.com/news/world,user1,5,extra",
        "http://www.example.com/shop/deals,user2,12ms",
    ];
    let lines = mixed("pl", "page_loads", 12_000, &bad);
    check_malformed(
        "pl",
        "page_loads",
        &lines,
        &[
            ("transition/wrong field count", 2),
            ("transition/non-numeric load_time", 2),
            ("transition/empty field", 1),
            ("join/url not in catalog", 1),
        ],
    );
}

/// The `--stats` of a one-worker run of `pipeline` with one record per request and `args`.
fn run_statistics(name: &str, pipeline: &str, args: &[&str]) -> serde_json::Value {
    let scratch = Scratch::new("run-pipelines", name);
    let stats = scratch.file("stats.json");
    let spec = root().join("pipelines").join(pipeline);
    let mut all = vec![spec.display().to_string(), "--workers=1".into(), "--batch=1".into()];
    all.extend(args.iter().map(|a| a.to_string()));
    all.extend([format!("--stats={}", stats.display()), "--quiet".into()]);
    clasp_run(&all);
    serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap()
}

/// Every operator's execution time (and its variability) is measured, whatever the chain's length: the emulated
/// service time is the reference (sampled timing once measured only every other operator of
/// SYN's ten and reported the others as 0).
#[test]
fn every_operator_of_a_chain_reports_its_execution_time() {
    let v = run_statistics(
        "exec-time",
        "syn.toml",
        &["--slots=1", "--service-time=*=300:sleep", "--input=gen:160"],
    );
    let ops = v["operators"].as_array().unwrap();
    assert_eq!(ops.len(), 10);
    for op in ops {
        let exec = op["exec_time_us"].as_f64().unwrap();
        assert!(exec >= 300.0, "{}: {exec} us for a 300 us service time", op["name"]);
        // Its variability too (sleeps overrun by what the scheduler adds, so only its presence
        // is certain on a shared machine).
        let scv = op["exec_time_scv"].as_f64();
        assert!(scv.is_some_and(|v| v.is_finite() && v >= 0.0), "{}: {scv:?}", op["name"]);
    }
}

/// The statistics measure how regular the input's arrivals are: a paced source is far from
/// Poisson (variance / mean² of the gaps 0 against 1), which the latency objective's waits use.
#[test]
fn a_paced_input_is_measured_as_paced() {
    let v = run_statistics(
        "arrivals",
        "wc.toml",
        &["--input=gen:1000", "--rate=500", "--interval-ms=100"],
    );
    let scv = v["arrival_scv"].as_f64();
    assert!(scv.is_some_and(|v| (0.0..0.5).contains(&v)), "paced at 500/s: {scv:?}");
}
