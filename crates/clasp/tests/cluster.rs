//! `clasp run` end to end: word count on worker threads and on worker processes, rescaled
//! 1 → 3 → 2 → 1 at given input counts, and failures reported clearly.

mod common;

use common::root;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

fn clasp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_clasp"))
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clasp-cluster-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// A corpus written by `clasp gen wc`, in a file of its own: tests run in parallel, and one
/// rewriting a corpus another is reading would change that one's input under it.
fn corpus(lines: u64, seed: u64) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let path = tmp(&format!("corpus-{lines}-{seed}-{n}.txt"));
    let out = clasp()
        .args(["gen", "wc", "--count", &lines.to_string(), "--seed", &seed.to_string(), "--out"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    path
}

/// Word counts from scratch: maximal runs of alphanumeric characters, lower-cased.
fn reference(path: &Path) -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        for word in line.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
            *counts.entry(word.to_lowercase()).or_insert(0) += 1;
        }
    }
    counts
}

fn dumped_counts(path: &Path) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["operator"], "count");
        let fresh =
            counts.insert(v["key"].as_str().unwrap().to_owned(), v["value"].as_u64().unwrap());
        assert!(fresh.is_none(), "a key dumped twice");
    }
    counts
}

fn run(args: &[&str]) -> (String, String) {
    let out = clasp().arg("run").args(args).output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "clasp run {args:?} failed:\n{stderr}");
    (stdout, stderr)
}

#[test]
fn wc_on_three_worker_processes_matches_the_reference() {
    let input = corpus(30_000, 3);
    for batch in ["1", "256"] {
        let dump = tmp(&format!("wc-procs-{batch}.jsonl"));
        let input_arg = format!("file:{}", input.display());
        run(&[
            "pipelines/wc.toml",
            "--workers",
            "3",
            "--processes",
            "--batch",
            batch,
            "--input",
            &input_arg,
            "--state-dump",
            dump.to_str().unwrap(),
            "--quiet",
        ]
        .map(|a| {
            if a == "pipelines/wc.toml" {
                root().join(a).to_str().unwrap().to_owned()
            } else {
                a.to_owned()
            }
        })
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>());
        assert_eq!(dumped_counts(&dump), reference(&input), "batch {batch}");
    }
}

/// Runs WC paced at 800 requests/s of 16 lines with rescales at input counts, 1 → 3 → 2 → 1
/// workers, each moving the counts with their key groups. The last rescale is due at 2700 of
/// 5625 requests: a loaded machine slows the rescales before it, and the input must not end
/// before it is due.
fn rescaled(processes: bool) {
    let input = corpus(90_000, 9);
    let dump = tmp(&format!("rescaled-{processes}.jsonl"));
    let stats = tmp(&format!("rescaled-{processes}.json"));
    let spec = root().join("pipelines/wc.toml");
    let mut args = vec![
        spec.to_str().unwrap().to_owned(),
        "--slots".into(),
        "3".into(),
        "--batch".into(),
        "16".into(),
        "--interval-ms".into(),
        "100".into(),
        "--rate".into(),
        "800".into(),
        "--rescale-at".into(),
        "600:3,1800:2,2700:1".into(),
        "--input".into(),
        format!("file:{}", input.display()),
        "--state-dump".into(),
        dump.display().to_string(),
        "--stats".into(),
        stats.display().to_string(),
        "--quiet".into(),
    ];
    if processes {
        args.push("--processes".into());
    }
    run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(s["summary"]["input_records"].as_u64(), Some(90_000));
    let (dumped, expected) = (dumped_counts(&dump), reference(&input));
    let wrong = expected.iter().filter(|(k, v)| dumped.get(*k) != Some(v)).count();
    assert!(dumped.len() == expected.len() && wrong == 0, "{wrong} counts differ");
    let events = s["scaling_events"].as_array().unwrap();
    let steps: Vec<(u64, u64)> = events
        .iter()
        .map(|e| (e["from_workers"].as_u64().unwrap(), e["to_workers"].as_u64().unwrap()))
        .collect();
    assert_eq!(steps, [(1, 3), (3, 2), (2, 1)]);
    for e in events {
        assert_eq!(e["reason"], "requested");
        for field in ["time_s", "planner_ms", "max_worker_pause_ms", "keys_moved", "bytes_moved"] {
            assert!(e[field].is_number(), "scaling event without {field}: {e}");
        }
    }
    // A step whose placement (planned from the measured rates) leaves every key group of
    // `count` where it was moves nothing, so only the run as a whole must have moved state.
    let moved = |e: &serde_json::Value| e["keys_moved"].as_u64().unwrap();
    assert!(events.iter().any(|e| moved(e) > 0), "no step moved state: {events:?}");
}

#[test]
fn wc_rescaled_1_3_2_1_on_threads_keeps_every_count() {
    rescaled(false);
}

#[test]
fn wc_rescaled_1_3_2_1_on_processes_keeps_every_count() {
    rescaled(true);
}

fn fails(args: &[&str], expected: &str) {
    let out = clasp().arg("run").args(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(stderr.contains(expected), "{args:?}: expected `{expected}` in:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn bad_run_arguments_fail_before_anything_starts() {
    let wc = root().join("pipelines/wc.toml");
    let wc = wc.to_str().unwrap();
    fails(&[wc, "--policy", "fifo"], "unknown policy `fifo`; valid policies: clasp, faasflow");
    fails(&[wc, "--pattern", "wavy", "--rate", "10"], "wavy");
    fails(&[wc, "--max-workers", "0"], "--max-workers must be at least 1");
    fails(&[wc, "--pattern", "gradual"], "rate");
    fails(&[wc, "--rate=-5"], "--rate -5 must be a positive number");
    fails(&[wc, "--rise-after", "3s"], "--rise-after 3s must be at most 2 s");
    fails(&[wc, "--rescale-at", "100"], "expected REQUESTS:WORKERS");
    fails(&[wc, "--rescale-at", "100:0"], "at least 1 worker");
    fails(&[wc, "--rescale-at", "100:11"], "more workers than --max-workers 10");
    fails(&[wc, "--service-time", "splitt=4"], "no operator `splitt`");
    fails(&[wc, "--input", "lines=nope"], "expected file:PATH, gen[:COUNT] or kafka:BROKERS/TOPIC");
    fails(&[wc, "--input", "rows=gen"], "has no source `rows`");
    let trace = tmp("bad-trace.txt");
    std::fs::write(&trace, "2 100\nthree 5\n").unwrap();
    fails(&[wc, "--pattern", &format!("trace:{}", trace.display()), "--rate", "1"], ":2");
    let w2 = root().join("pipelines/taxi-w2.toml");
    fails(&[w2.to_str().unwrap(), "--input", "rides=gen:10"], "source `fares` has no input");
}

/// A binary built without the `kafka` feature says how to get Kafka inputs and outputs.
#[cfg(not(feature = "kafka"))]
#[test]
fn kafka_specs_need_the_kafka_feature() {
    let wc = root().join("pipelines/wc.toml");
    let wc = wc.to_str().unwrap();
    let built = "built without Kafka support: build it with `--features clasp/kafka`";
    fails(&[wc, "--input", "kafka:127.0.0.1:9092/lines"], built);
    fails(&[wc, "--output", "kafka:127.0.0.1:9092/counts"], built);
}
