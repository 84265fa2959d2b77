//! Exactly-once across failures: `clasp run --processes` on WC and on NWM (whose failure
//! branch joins per host) rescales while a seeded schedule
//! `kill -9`s worker processes (during a migration, during a checkpoint, and between), or the
//! planner itself (the job then goes on with `--resume`); the final state dump and the
//! `--output` file must equal the independent reference's exactly — nothing lost, nothing
//! counted twice. A scale-in's migration survives the loss of the worker leaving and of one
//! staying. Against a directory store, and against Redis when a server answers (see
//! `scripts/setup.sh`; with `CLASP_REQUIRE_REDIS=1` a missing server fails the test).

mod common;

use clasp_apps::inputs::{self, SourceLines};
use clasp_reference::{self as reference, Outcome};
use common::{Scratch, root};
use std::path::Path;
use std::process::{Command, Output};

const SEED: u64 = 5;

/// The Redis location for a test, or `None` (skipped) when no server answers and none is
/// required.
fn redis(test: &str) -> Option<String> {
    let base = std::env::var("CLASP_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let location = format!("{}/recovery-{test}-{}", base.trim_end_matches('/'), std::process::id());
    match clasp_runtime::fault::store::open(&location) {
        Ok(s) => {
            for name in s.list("").unwrap() {
                s.delete(&name).unwrap();
            }
            Some(location)
        }
        Err(e) if std::env::var("CLASP_REQUIRE_REDIS").is_ok_and(|v| v == "1") => {
            panic!("CLASP_REQUIRE_REDIS=1 but Redis is unreachable: {e}")
        }
        Err(e) => {
            eprintln!("skipping the Redis recovery test: {e} (see scripts/setup.sh)");
            None
        }
    }
}

/// `app`'s generated input, one file per source; returns the `--input` arguments and the
/// lines for the reference.
fn inputs_of(app: &str, count: u64, dir: &Scratch) -> (Vec<String>, Vec<SourceLines>) {
    let mut args = Vec::new();
    let mut lines = Vec::new();
    for def in inputs::sources_of(app) {
        let mut text = Vec::new();
        def.write_generated(count, SEED, &mut text).unwrap();
        let file = dir.file(&format!("{}.txt", def.source));
        std::fs::write(&file, &text).unwrap();
        args.push("--input".into());
        args.push(format!("{}=file:{}", def.source, file.display()));
        let mut ls: Vec<Vec<u8>> = text.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
        ls.pop();
        lines.push((def.source.to_owned(), ls));
    }
    (args, lines)
}

fn clasp_run(args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clasp")).arg("run").args(args).output().unwrap()
}

/// The sinks of an `--output` file and the state of a `--state-dump`.
fn outcome(app: &str, output: &Path, dump: &Path) -> Outcome {
    let p = clasp_apps::pipeline(app).unwrap();
    let mut o = Outcome::default();
    for s in &p.sinks {
        o.sinks.entry(s.name.clone()).or_default();
    }
    for line in std::fs::read_to_string(output).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let field = |f: &str| v[f].as_str().unwrap().to_owned();
        o.add_sink(&field("sink"), field("key").as_bytes(), field("value").as_bytes());
    }
    for line in std::fs::read_to_string(dump).unwrap().lines() {
        o.add_state_line(line).unwrap();
    }
    o
}

/// How a scenario fails.
struct Schedule<'a> {
    /// `--kill-worker-at` points.
    workers: &'a [&'a str],
    /// `--kill-planner-at`, after which the job is resumed.
    planner: Option<&'a str>,
    /// `--kill-seed`: which running worker each kill draws.
    seed: u64,
}

/// How a scenario scales: workers at the start and `--rescale-at`; and its `--rate`
/// (`None`: unthrottled).
struct Shape<'a> {
    workers: u32,
    rescale_at: &'a str,
    rate: Option<u32>,
}

/// Two workers, three from the 250th request, two again from the 650th.
const OUT_AND_IN: Shape<'static> = Shape { workers: 2, rescale_at: "250:3,650:2", rate: Some(250) };

/// Runs `app` on worker processes, rescaled 2 → 3 → 2, checkpointing every 120 requests into
/// `store` (a scratch directory when `None`), with `schedule`'s failures; checks the result
/// against the reference and returns the workers lost and recovered from.
fn scenario(
    test: &str,
    app: &str,
    count: u64,
    store: Option<String>,
    schedule: &Schedule<'_>,
) -> usize {
    let stats = scaled_scenario(test, app, count, store, schedule, &OUT_AND_IN);
    // Workers lost in all (a kill during a recovery joins that recovery).
    lost_workers(&stats).len()
}

/// The workers each recovery of a run's stats recovered from, in order.
fn lost_workers(stats: &serde_json::Value) -> Vec<u64> {
    let none = Vec::new();
    let recoveries = stats["recoveries"].as_array().unwrap_or(&none);
    recoveries
        .iter()
        .flat_map(|r| r["lost"].as_array().unwrap().iter().map(|w| w.as_u64().unwrap()))
        .collect()
}

/// [`scenario`] on `shape`'s workers and rescales; returns the run's stats (of the resumed run
/// after a planner kill).
fn scaled_scenario(
    test: &str,
    app: &str,
    count: u64,
    store: Option<String>,
    schedule: &Schedule<'_>,
    shape: &Shape<'_>,
) -> serde_json::Value {
    let dir = Scratch::new("recovery", &format!("{test}-{app}"));
    let store = store.unwrap_or_else(|| dir.file("checkpoints").display().to_string());
    let (input_args, lines) = inputs_of(app, count, &dir);
    let (output, dump, stats) =
        (dir.file("out.jsonl"), dir.file("state.jsonl"), dir.file("stats.json"));
    let spec = root().join(format!("pipelines/{app}.toml"));
    let mut args: Vec<String> = vec![
        spec.display().to_string(),
        "--quiet".into(),
        "--processes".into(),
        "--workers".into(),
        shape.workers.to_string(),
        "--batch".into(),
        "32".into(),
        "--interval-ms".into(),
        "100".into(),
        "--key-groups".into(),
        "64".into(),
        "--rescale-at".into(),
        shape.rescale_at.into(),
        "--checkpoint".into(),
        "requests:120".into(),
        "--checkpoint-store".into(),
        store.clone(),
        "--kill-seed".into(),
        schedule.seed.to_string(),
        "--output".into(),
        output.display().to_string(),
        "--state-dump".into(),
        dump.display().to_string(),
        "--stats".into(),
        stats.display().to_string(),
    ];
    if let Some(rate) = shape.rate {
        args.extend(["--rate".into(), rate.to_string()]);
    }
    args.extend(input_args);
    let mut first = args.clone();
    for w in schedule.workers {
        first.extend(["--kill-worker-at".into(), (*w).into()]);
    }
    if let Some(at) = schedule.planner {
        first.extend(["--kill-planner-at".into(), at.into()]);
    }
    let out = clasp_run(&first);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if schedule.planner.is_some() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(9), "{app}: the planner was to be killed:\n{stderr}");
        let mut again = args.clone();
        again.extend(["--resume".into(), store]);
        let out = clasp_run(&again);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{app}: the resumed run failed:\n{stderr}");
        assert!(stderr.contains("resuming from checkpoint"), "{app}:\n{stderr}");
    } else {
        assert!(out.status.success(), "{app}: the run failed:\n{stderr}");
    }
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let p = clasp_apps::pipeline(app).unwrap();
    let expected = reference::expected(app, &p, &lines).unwrap();
    let actual = outcome(app, &output, &dump);
    let produced: usize = expected.sinks.values().map(Vec::len).sum();
    assert!(produced > 0 || app == "wc", "{app}: the reference produced no output to compare");
    let got: usize = actual.sinks.values().map(Vec::len).sum();
    assert_eq!(got, produced, "{app}: output records (lost or duplicated)");
    reference::check_order_insensitive(app, &p, &expected, &actual)
        .unwrap_or_else(|e| panic!("{app}: {e}"));
    stats
}

/// Five kills: two between checkpoints, one during a checkpoint, one during the first
/// migration, one late.
const FIVE_KILLS: Schedule<'static> = Schedule {
    workers: &["requests:90", "checkpoint:2", "migration:1", "requests:500", "requests:800"],
    planner: None,
    seed: SEED,
};

#[test]
fn wc_survives_five_worker_kills_with_exact_counts() {
    let n = scenario("five", "wc", 30_000, None, &FIVE_KILLS);
    assert!(n >= 5, "{n} workers recovered from for five kills");
}

#[test]
fn a_join_survives_five_worker_kills_with_exact_output() {
    let n = scenario("five", "nwm", 30_000, None, &FIVE_KILLS);
    assert!(n >= 5, "{n} workers recovered from for five kills");
}

/// Three workers, two from the 250th request: the third leaves by a scale-in.
const SCALE_IN: Shape<'static> = Shape { workers: 3, rescale_at: "250:2", rate: Some(250) };

/// WC scaled in 3 → 2 with worker `victim` (drawn by `seed`) killed once the scale-in's
/// migration orders went out: one recovery, from exactly that loss, onto the three workers
/// before the scale-in, which is then carried out; the result is exact (checked inside).
fn wc_scale_in_with_a_kill(test: &str, seed: u64, victim: u64) {
    let schedule = Schedule { workers: &["migration:1"], planner: None, seed };
    let stats = scaled_scenario(test, "wc", 30_000, None, &schedule, &SCALE_IN);
    assert_eq!(lost_workers(&stats), [victim], "the workers recovered from");
    assert_eq!(stats["recoveries"][0]["workers"], 3, "restored onto the workers before");
    let rescales: Vec<(u64, u64)> = stats["scaling_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["from_workers"].as_u64().unwrap(), e["to_workers"].as_u64().unwrap()))
        .collect();
    assert_eq!(rescales.last(), Some(&(3, 2)), "the scale-in after the recovery: {rescales:?}");
}

#[test]
fn wc_recovers_exactly_when_the_leaving_worker_dies_during_a_scale_in() {
    wc_scale_in_with_a_kill("scale-in-leaving", 1, 2);
}

#[test]
fn wc_recovers_exactly_when_a_staying_worker_dies_during_a_scale_in() {
    wc_scale_in_with_a_kill("scale-in-staying-0", SEED, 0);
    wc_scale_in_with_a_kill("scale-in-staying-1", 8, 1);
}

#[test]
fn a_worker_killed_while_a_recovery_restores_joins_that_recovery() {
    let schedule = Schedule { workers: &["requests:90", "restore:1"], planner: None, seed: SEED };
    let stats = scaled_scenario("restore", "wc", 30_000, None, &schedule, &OUT_AND_IN);
    let recoveries = stats["recoveries"].as_array().unwrap();
    assert_eq!(recoveries.len(), 1, "one recovery, restarted: {recoveries:#?}");
    let lost = lost_workers(&stats);
    assert_eq!(lost.len(), 2, "both workers killed are recovered from: {lost:?}");
}

/// [`OUT_AND_IN`] at 3,000 requests/s (an unthrottled input would be in flight whole before
/// the first boundary): chains after each checkpoint's boundary are dispatched while those
/// before it complete, and wait at keyed state until their worker marked the snapshot.
const FAST: Shape<'static> = Shape { workers: 2, rescale_at: "250:3,650:2", rate: Some(3_000) };

#[test]
fn checkpoints_taken_while_later_chains_run_recover_exactly() {
    let schedule =
        Schedule { workers: &["checkpoint:2", "requests:600"], planner: None, seed: SEED };
    for app in ["wc", "nwm"] {
        let stats = scaled_scenario("fast", app, 150_000, None, &schedule, &FAST);
        assert_eq!(lost_workers(&stats).len(), 2, "{app}: both kills recovered from");
        let checkpoints = stats["checkpoints"].as_array().unwrap();
        let held = checkpoints.iter().filter(|c| c["held_ms"].as_f64().unwrap() > 0.0).count();
        assert!(
            held > 0,
            "{app}: no request after a boundary reached keyed state before its mark, so no \
             boundary overlapped later chains: {checkpoints:#?}"
        );
    }
}

#[test]
fn a_killed_planner_resumes_with_exact_output() {
    let schedule =
        Schedule { workers: &["requests:90"], planner: Some("checkpoint:4"), seed: SEED };
    scenario("planner", "nwm", 30_000, None, &schedule);
    scenario("planner", "wc", 30_000, None, &schedule);
}

#[test]
fn the_same_against_redis() {
    let Some(store) = redis("kills") else { return };
    let n = scenario("redis", "wc", 30_000, Some(store), &FIVE_KILLS);
    assert!(n >= 5, "{n} workers recovered from for five kills");
    let Some(store) = redis("planner") else { return };
    let schedule =
        Schedule { workers: &["checkpoint:1"], planner: Some("checkpoint:4"), seed: SEED };
    scenario("redis", "nwm", 30_000, Some(store), &schedule);
}
