//! Kafka connectors end to end on a real broker (`CLASP_KAFKA_BROKERS`, started by
//! `scripts/kafka-broker.sh`; the tests that need one skip without it unless
//! `CLASP_REQUIRE_KAFKA=1`): word count from a topic to a topic on three worker processes,
//! rescaled mid-run, against a from-scratch count, and the errors of bad input.
#![cfg(feature = "kafka")]

mod common;

use clasp::kafka::topics::{
    RawRecord, broker_required, create_topic, produce, retained_offsets, test_broker as broker,
};
use clasp::kafka::{SourceOptions, open_source};
use clasp::{Source, core::input::InputRecord, core::input::Next};
use common::{Scratch, root};
use std::collections::BTreeMap;
use std::process::{Command, Output};

fn clasp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_clasp"))
}

/// A topic name unique to this test process and test.
fn topic(name: &str) -> String {
    format!("clasp-test-{}-{name}", std::process::id())
}

/// A WC corpus from `clasp gen wc`.
fn corpus(lines: u64, seed: u64) -> Vec<String> {
    let out = clasp()
        .args(["gen", "wc", "--count", &lines.to_string(), "--seed", &seed.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect()
}

/// Word counts from scratch: maximal runs of alphanumeric characters, lower-cased.
fn reference(lines: &[String]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for line in lines {
        for word in line.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
            *counts.entry(word.to_lowercase()).or_insert(0) += 1;
        }
    }
    counts
}

/// Every record of a topic, read to its current end: (key, value, event time).
fn read_topic(broker: &str, topic: &str) -> Vec<(Vec<u8>, Vec<u8>, Option<u64>)> {
    let options = SourceOptions { event_time: None, record_keys: true };
    let mut source = open_source(&format!("{broker}/{topic}?stop=latest"), options).unwrap();
    let mut rec = InputRecord::default();
    let mut all = Vec::new();
    loop {
        clasp::core::source::reset(&mut rec);
        match source.next_record(&mut rec).unwrap() {
            Next::Record => all.push((rec.key.clone(), rec.value.clone(), rec.time)),
            Next::Idle => {}
            Next::End => return all,
        }
    }
}

fn run(args: &[String]) -> Output {
    clasp().arg("run").args(args).output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The lines spread over three partitions, each record stamped with a distinct time.
fn produce_lines(broker: &str, topic: &str, lines: &[String]) {
    create_topic(broker, topic, 3).unwrap();
    for partition in 0..3 {
        let records =
            lines.iter().enumerate().filter(|(i, _)| i % 3 == partition as usize).map(|(i, l)| {
                RawRecord {
                    key: None,
                    value: Some(l.clone().into_bytes()),
                    timestamp_ms: 1_700_000_000_000 + i as i64,
                }
            });
        produce(broker, topic, partition, records, 2_000).unwrap();
    }
}

/// Failures caused in a WC run.
struct Failures<'a> {
    /// `--kill-worker-at` points.
    workers: &'a [&'a str],
    /// `--kill-planner-at`, after which the job is resumed from its checkpoints.
    planner: Option<&'a str>,
}

/// WC reads 30,000 lines from a 3-partition topic on three worker processes, rescales
/// 3 → 2 → 3 at input counts, checkpoints every 120 requests, and writes every updated count
/// to another topic, with `failures`. Each word's records in the output topic must be its
/// counts 1, 2, …, n exactly once (nothing lost, nothing twice), n being the from-scratch
/// count. Returns the run's stats (of the resumed run after a planner kill).
fn wc_scenario(name: &str, failures: &Failures<'_>) -> serde_json::Value {
    let broker = broker().expect("checked by the caller");
    let (input, output) = (topic(&format!("{name}-in")), topic(&format!("{name}-out")));
    let lines = corpus(30_000, 17);
    produce_lines(&broker, &input, &lines);
    create_topic(&broker, &output, 2).unwrap();
    let dir = Scratch::new("kafka", name);
    let (stats, store) = (dir.file("stats.json"), dir.file("checkpoints"));
    let args: Vec<String> = [
        root().join("pipelines/kafka/wc-counts.toml").display().to_string(),
        "--workers".into(),
        "3".into(),
        "--processes".into(),
        "--slots".into(),
        "3".into(),
        "--batch".into(),
        "16".into(),
        "--interval-ms".into(),
        "100".into(),
        // Paced so that both rescalings come well before the input ends.
        "--rate".into(),
        "400".into(),
        "--rescale-at".into(),
        "200:2,600:3".into(),
        "--checkpoint".into(),
        "requests:120".into(),
        // Only the kills lose workers: a busy debug-built worker may miss heartbeats.
        "--heartbeat-timeout".into(),
        "30s".into(),
        "--checkpoint-store".into(),
        store.display().to_string(),
        "--input".into(),
        format!("kafka:{broker}/{input}?stop=latest"),
        "--output".into(),
        format!("kafka:{broker}/{output}"),
        "--stats".into(),
        stats.display().to_string(),
        "--no-admin".into(),
        "--quiet".into(),
    ]
    .into();
    let mut first = args.clone();
    for w in failures.workers {
        first.extend(["--kill-worker-at".into(), (*w).into()]);
    }
    if let Some(at) = failures.planner {
        first.extend(["--kill-planner-at".into(), at.into()]);
    }
    let out = run(&first);
    if failures.planner.is_some() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(9), "the planner was to be killed:\n{}", stderr(&out));
        let mut again = args.clone();
        again.extend(["--resume".into(), store.display().to_string()]);
        let out = run(&again);
        assert!(out.status.success(), "the resumed run failed:\n{}", stderr(&out));
        assert!(stderr(&out).contains("resuming from checkpoint"), "{}", stderr(&out));
    } else {
        assert!(out.status.success(), "{}", stderr(&out));
    }
    let mut emitted: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for (key, value, _) in read_topic(&broker, &output) {
        let count = String::from_utf8(value).unwrap().parse().unwrap();
        emitted.entry(String::from_utf8(key).unwrap()).or_default().push(count);
    }
    let expected = reference(&lines);
    assert_eq!(emitted.len(), expected.len(), "distinct words in the output topic");
    for (word, n) in &expected {
        let mut counts = emitted.remove(word).unwrap_or_default();
        counts.sort_unstable();
        assert!(
            counts.iter().copied().eq(1..=*n),
            "`{word}`: counted {n} times, emitted {counts:?}"
        );
    }
    serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap()
}

#[test]
fn wc_from_topic_to_topic_on_three_worker_processes_with_rescaling() {
    if broker().is_none() {
        return;
    }
    let s = wc_scenario("wc", &Failures { workers: &[], planner: None });
    assert_eq!(s["summary"]["input_records"].as_u64(), Some(30_000), "{:#}", s["recoveries"]);
    let steps: Vec<(u64, u64)> = s["scaling_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["from_workers"].as_u64().unwrap(), e["to_workers"].as_u64().unwrap()))
        .collect();
    assert_eq!(steps, [(3, 2), (2, 3)]);
    let committed = s["checkpoints"].as_array().unwrap().iter().filter(|c| c["committed"] == true);
    assert!(committed.count() >= 2, "the output went out by checkpoint");
}

/// The same with workers `kill -9`ed between checkpoints, during one, during the scale-in's
/// migration (which is carried out again after the recovery) and during the scale-out's:
/// the sources go back to the checkpoints' offsets and the topic gets every count once.
#[test]
fn wc_from_topic_to_topic_survives_worker_kills_exactly_once() {
    if broker().is_none() {
        return;
    }
    let failures = Failures {
        workers: &["requests:300", "checkpoint:4", "migration:1", "migration:3"],
        planner: None,
    };
    let s = wc_scenario("wc-kills", &failures);
    let lost: usize = s["recoveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["lost"].as_array().map_or(0, Vec::len))
        .sum();
    assert!(lost >= 4, "{lost} workers recovered from for four kills");
    let steps: Vec<(u64, u64)> = s["scaling_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["from_workers"].as_u64().unwrap(), e["to_workers"].as_u64().unwrap()))
        .collect();
    assert_eq!(steps, [(3, 2), (2, 3)], "both rescales, each after the recovery that broke it");
}

/// The planner `kill -9`ed during a checkpoint, and the job resumed from its checkpoints: the
/// Kafka source continues from the committed offsets and the topic gets every count once.
#[test]
fn wc_from_topic_to_topic_resumes_after_a_planner_kill_exactly_once() {
    if broker().is_none() {
        return;
    }
    wc_scenario(
        "wc-planner",
        &Failures { workers: &["requests:200"], planner: Some("checkpoint:3") },
    );
}

/// The source hands out key, value and timestamp as produced, and its position replays: read
/// part, note the position, read the rest, seek back and read the rest again.
#[test]
fn the_source_reads_records_as_produced_and_replays_from_its_position() {
    let Some(broker) = broker() else { return };
    let t = topic("replay");
    create_topic(&broker, &t, 2).unwrap();
    let records: Vec<RawRecord> = (0..500)
        .map(|i| RawRecord {
            key: (i % 2 == 0).then(|| format!("k{i}").into_bytes()),
            value: Some(format!("v{i}").into_bytes()),
            timestamp_ms: 1_000 + i,
        })
        .collect();
    produce(&broker, &t, 0, records[..300].to_vec(), 64).unwrap();
    produce(&broker, &t, 1, records[300..].to_vec(), 64).unwrap();
    let options = SourceOptions { event_time: None, record_keys: true };
    let mut source = open_source(&format!("{broker}/{t}?stop=latest"), options).unwrap();
    let read = read_source;
    let first = read(&mut source, 123);
    let at = source.position();
    let rest = read(&mut source, usize::MAX);
    assert_eq!(first.len() + rest.len(), 500);
    let mut all: Vec<_> = first.iter().chain(&rest).cloned().collect();
    all.sort_by_key(|r| r.2);
    let produced: Vec<_> = records
        .iter()
        .map(|r| (r.key.clone(), r.value.clone().unwrap(), Some(r.timestamp_ms as u64)))
        .collect();
    assert_eq!(all, produced);
    source.seek(&at).unwrap();
    // Partitions interleave as their fetches arrive; each partition's records keep their order.
    let by_partition = |records: Vec<Read>| -> (Vec<Read>, Vec<Read>) {
        records.into_iter().partition(|r| r.2 < Some(1_300))
    };
    let replayed = read(&mut source, usize::MAX);
    assert_eq!(by_partition(replayed), by_partition(rest), "replayed from the position");
    let start = format!("{broker}/{t}?stop=latest&start=0:290,1:199");
    let mut late = open_source(&start, SourceOptions::default()).unwrap();
    assert_eq!(read(&mut late, usize::MAX).len(), 10 + 1, "explicit start offsets");
}

/// A record as a source handed it out: key if keyed, value, event time.
type Read = (Option<Vec<u8>>, Vec<u8>, Option<u64>);

/// Reads `source` until it ends (or `n` records).
fn read_source(source: &mut dyn Source, n: usize) -> Vec<Read> {
    let mut rec = InputRecord::default();
    let mut got = Vec::new();
    while got.len() < n {
        clasp::core::source::reset(&mut rec);
        match source.next_record(&mut rec).unwrap() {
            Next::Record => {
                got.push((rec.keyed.then(|| rec.key.clone()), rec.value.clone(), rec.time))
            }
            Next::Idle => {}
            Next::End => break,
        }
    }
    got
}

/// Records produced in batches of several records end where the last batch ends: the log end
/// offset is the number of records produced (not the last batch's first offset plus one), a
/// bounded read hands out every record of the last batch, and `start=latest` begins after it.
#[test]
fn a_partition_ends_after_the_last_record_of_its_last_batch() {
    let Some(broker) = broker() else { return };
    let t = topic("log-end");
    create_topic(&broker, &t, 2).unwrap();
    let record = |p: usize, i: usize| RawRecord {
        key: None,
        value: Some(format!("p{p}-{i}").into_bytes()),
        timestamp_ms: i as i64,
    };
    // Batches of 64, 64 and 37 records, and one batch of 100.
    let sizes = [165, 100];
    let batches = [64, 100];
    for (p, (&n, &batch)) in sizes.iter().zip(&batches).enumerate() {
        produce(&broker, &t, p as i32, (0..n).map(|i| record(p, i)), batch).unwrap();
        assert_eq!(
            retained_offsets(&broker, &t, p as i32).unwrap(),
            (0, n as i64),
            "partition {p}"
        );
    }
    let mut from_latest =
        open_source(&format!("{broker}/{t}?start=latest"), SourceOptions::default()).unwrap();
    let options = SourceOptions::default();
    let mut bounded = open_source(&format!("{broker}/{t}?stop=latest"), options).unwrap();
    let mut read: Vec<Vec<u8>> =
        read_source(&mut bounded, usize::MAX).into_iter().map(|r| r.1).collect();
    read.sort_unstable();
    let mut produced: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .flat_map(|(p, &n)| (0..n).map(move |i| record(p, i).value.unwrap()))
        .collect();
    produced.sort_unstable();
    assert_eq!(read, produced);
    produce(&broker, &t, 1, [record(1, 100)], 1).unwrap();
    let next = read_source(&mut from_latest, 1);
    assert_eq!(next.into_iter().map(|r| r.1).collect::<Vec<_>>(), [record(1, 100).value.unwrap()]);
}

fn fails(args: &[String], expected: &[&str]) {
    let out = run(args);
    let err = stderr(&out);
    assert!(!out.status.success(), "{args:?} succeeded");
    for e in expected {
        assert!(err.contains(e), "{args:?}: expected `{e}` in:\n{err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

fn wc_args(extra: &[String]) -> Vec<String> {
    let mut args = vec![root().join("pipelines/kafka/wc-counts.toml").display().to_string()];
    args.extend(["--no-admin".to_owned(), "--quiet".to_owned()]);
    args.extend_from_slice(extra);
    args
}

/// `file:PATH` of a few lines.
fn lines_file() -> String {
    let path = std::env::temp_dir().join(format!("clasp-kafka-{}-lines.txt", std::process::id()));
    std::fs::write(&path, "a b\nb c\n").unwrap();
    format!("file:{}", path.display())
}

/// Nothing listens on port 1: the run fails at once, naming the address, for input and output.
#[test]
fn an_unreachable_broker_fails_fast_naming_its_address() {
    let input = wc_args(&["--input".into(), "kafka:127.0.0.1:1/lines".into()]);
    fails(
        &input,
        &["--input `kafka:127.0.0.1:1/lines`", "cannot reach the Kafka broker at 127.0.0.1:1"],
    );
    let output = wc_args(&[
        "--input".into(),
        lines_file(),
        "--output".into(),
        "kafka:127.0.0.1:1/counts".into(),
    ]);
    fails(
        &output,
        &["--output `kafka:127.0.0.1:1/counts`", "cannot reach the Kafka broker at 127.0.0.1:1"],
    );
    fails(
        &wc_args(&["--input".into(), "kafka:localhost/lines".into()]),
        &["broker `localhost` is not HOST:PORT"],
    );
    fails(
        &wc_args(&["--input".into(), "kafka:127.0.0.1:1/lines?group=g".into()]),
        &["unknown option `group`"],
    );
}

#[test]
fn a_missing_topic_is_named_with_the_topics_there_are() {
    let Some(broker) = broker() else { return };
    let there = topic("there");
    create_topic(&broker, &there, 1).unwrap();
    let missing = topic("missing");
    let args = wc_args(&["--input".into(), format!("kafka:{broker}/{missing}")]);
    fails(
        &args,
        &[&format!("topic `{missing}` does not exist on the Kafka cluster at {broker}"), &there],
    );
    let args = wc_args(&[
        "--input".into(),
        lines_file(),
        "--output".into(),
        format!("kafka:{broker}/{missing}"),
    ]);
    fails(&args, &[&format!("topic `{missing}` does not exist")]);
    let args = wc_args(&["--input".into(), format!("kafka:{broker}/{there}?partitions=3")]);
    fails(&args, &[&format!("topic `{there}` has no partition 3 (it has 1)")]);
    let args = wc_args(&["--input".into(), format!("kafka:{broker}/{there}?start=0:5")]);
    fails(&args, &["start offset 5", "outside its retained offsets 0..0"]);
}

/// A record without a value stops the run with an error naming its topic, partition and offset;
/// the records before it were processed.
#[test]
fn a_record_without_a_value_stops_the_run_naming_its_offset() {
    let Some(broker) = broker() else { return };
    let t = topic("tombstone");
    create_topic(&broker, &t, 1).unwrap();
    let mut records: Vec<RawRecord> = (0..5)
        .map(|i| RawRecord { key: None, value: Some(b"a b".to_vec()), timestamp_ms: i })
        .collect();
    records.push(RawRecord { key: Some(b"gone".to_vec()), value: None, timestamp_ms: 5 });
    produce(&broker, &t, 0, records, 100).unwrap();
    let args = wc_args(&["--input".into(), format!("kafka:{broker}/{t}?stop=latest")]);
    fails(&args, &[&format!("topic `{t}` partition 0 offset 5: the record has no value")]);
}

/// A broker of this test's own (`scripts/kafka-broker.sh`), stopped when dropped; `None` when
/// tansu is not installed and no broker is required.
struct OwnBroker {
    address: String,
    port: String,
}

impl OwnBroker {
    fn start() -> Option<Self> {
        let script = root().join("scripts/kafka-broker.sh");
        let out = Command::new(&script).arg("start").output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let Some(address) = text.trim().strip_prefix("export CLASP_KAFKA_BROKERS=") else {
            let why = String::from_utf8_lossy(&out.stderr);
            assert!(!broker_required(), "CLASP_REQUIRE_KAFKA is set but no broker starts: {why}");
            eprintln!("SKIPPED: no broker of the test's own: {why}");
            return None;
        };
        let port = address.rsplit(':').next().unwrap().to_owned();
        Some(Self { address: address.to_owned(), port })
    }

    fn stop(&self) {
        let script = root().join("scripts/kafka-broker.sh");
        let out = Command::new(&script).args(["stop", &self.port]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for OwnBroker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The broker stops while a job reads from it and writes to it exactly once: the run ends
/// with an error naming the topic instead of waiting for it, and the checkpoints committed
/// before stay in the store for a resume (their produced records were already in the topic).
#[test]
fn a_broker_that_goes_away_mid_run_ends_the_run_naming_the_topic() {
    let Some(broker) = OwnBroker::start() else { return };
    let b = &broker.address;
    let (input, output) = (topic("gone-in"), topic("gone-out"));
    produce_lines(b, &input, &corpus(3_000, 23));
    create_topic(b, &output, 3).unwrap();
    let dir = Scratch::new("kafka", "gone");
    let store = dir.file("checkpoints");
    let job = clasp()
        .arg("run")
        .args(wc_args(&[
            "--batch".into(),
            "1".into(),
            "--rate".into(),
            "200".into(),
            "--checkpoint".into(),
            "requests:100".into(),
            "--checkpoint-store".into(),
            store.display().to_string(),
            "--input".into(),
            format!("kafka:{b}/{input}?stop=never&timeout_ms=2000"),
            "--output".into(),
            format!("kafka:{b}/{output}?timeout_ms=2000"),
        ]))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The job is under way once committed counts reach the topic.
    let mut seen = 0;
    for _ in 0..6_000 {
        seen = read_topic(b, &output).len();
        if seen > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(seen > 0, "no committed counts reached the topic");
    broker.stop();
    let out = job.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(!out.status.success(), "the run went on without its broker");
    assert!(err.contains(&input) || err.contains(&output), "names the topic:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    let manifests = std::fs::read_dir(&store)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().contains("manifest"))
        .count();
    assert!(manifests > 0, "the committed checkpoints are kept");
}
