//! The sessions example run by its own binary, as a user would: across worker processes with
//! a rescale in the middle of open sessions, unthrottled on one and three workers, and on
//! inputs shuffled within the declared out-of-orderness. Every run's sessions must equal a
//! from-scratch computation; clicks later than the bound must be counted as late.

use clasp_example_sessions::clicks;
use rand::{RngExt, SeedableRng};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const CLICKS: usize = 20_000;
const GAP_MS: u64 = 300;
const SEED: u64 = 7;

type Sessions = BTreeSet<(String, u64, u64, u64)>;

/// Sessions from scratch: each user's click times sorted, split where two are `gap` apart.
fn reference(lines: &[String], gap: u64) -> Sessions {
    let mut by_user: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for l in lines {
        let (user, t) = l.split_once(',').unwrap();
        by_user.entry(user).or_default().push(t.parse().unwrap());
    }
    let mut out = Sessions::new();
    for (user, mut times) in by_user {
        times.sort_unstable();
        let mut start = 0;
        for i in 1..=times.len() {
            if i == times.len() || times[i] - times[i - 1] >= gap {
                let n = (i - start) as u64;
                out.insert((user.to_string(), times[start], times[i - 1], n));
                start = i;
            }
        }
    }
    out
}

/// `lines` in an arrival order at most `bound` ms out of order (seeded).
fn shuffled(lines: &[String], bound: u64, seed: u64) -> Vec<String> {
    let mut rng = clasp::core::rng::SeededRng::seed_from_u64(seed);
    let mut keyed: Vec<(u64, usize)> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let t: u64 = l.split_once(',').unwrap().1.parse().unwrap();
            (t + rng.random_range(0..bound), i)
        })
        .collect();
    keyed.sort_unstable();
    keyed.into_iter().map(|(_, i)| lines[i].clone()).collect()
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clasp-sessions-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

struct Run {
    sessions: Sessions,
    summary: Value,
}

/// Runs `sessions run SPEC ARGS…` and reads its output and statistics.
fn run(spec: &Path, args: &[&str], dir: &Path) -> Run {
    let out = dir.join("out.jsonl");
    let stats = dir.join("stats.json");
    let status = Command::new(env!("CARGO_BIN_EXE_sessions"))
        .arg("run")
        .arg(spec)
        .args(args)
        .arg("--output")
        .arg(&out)
        .arg("--stats")
        .arg(&stats)
        .status()
        .unwrap();
    assert!(status.success(), "sessions run {args:?}");
    let mut sessions = Sessions::new();
    for line in std::fs::read_to_string(&out).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        let f: Vec<u64> =
            v["value"].as_str().unwrap().split(',').map(|x| x.parse().unwrap()).collect();
        let user = v["key"].as_str().unwrap().to_string();
        assert!(sessions.insert((user, f[0], f[1], f[2])), "a session emitted twice: {line}");
    }
    let stats: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    Run { sessions, summary: stats["summary"].clone() }
}

fn spec() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sessions.toml")
}

fn late(summary: &Value) -> u64 {
    summary["operators"][0]["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r[0] == "late")
        .map(|r| r[1].as_u64().unwrap())
        .sum()
}

#[test]
fn sessions_survive_a_rescale_across_worker_processes() {
    let dir = scratch("rescale");
    let seed = SEED.to_string();
    let count = format!("sessions:{CLICKS}");
    let args = [
        "--workers",
        "2",
        "--max-workers",
        "3",
        "--processes",
        "--batch",
        "16",
        "--rate",
        "500",
        "--rescale-at",
        "300:3",
        "--seed",
        &seed,
        "--input",
        &count,
    ];
    let r = run(&spec(), &args, &dir);
    let migrations = r.summary["migrations"].as_array().unwrap();
    assert_eq!(migrations.len(), 1, "one rescale");
    assert!(migrations[0]["keys"].as_u64().unwrap() > 0, "open sessions moved: {migrations:?}");
    assert_eq!(late(&r.summary), 0);
    assert_eq!(r.sessions, reference(&clicks(CLICKS, 40, 200, SEED), GAP_MS));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn any_arrival_order_within_the_bound_gives_the_same_sessions_on_1_and_3_workers() {
    let dir = scratch("orders");
    let in_order = clicks(CLICKS, 40, 0, SEED);
    let expected = reference(&in_order, GAP_MS);
    assert!(expected.len() > 1_000, "{} sessions", expected.len());
    for (order, workers) in [(0, "1"), (1, "3"), (2, "3")] {
        let lines = if order == 0 { in_order.clone() } else { shuffled(&in_order, 200, order) };
        let file = dir.join(format!("clicks-{order}.csv"));
        std::fs::write(&file, lines.join("\n")).unwrap();
        let input = format!("file:{}", file.display());
        let r = run(&spec(), &["--workers", workers, "--input", &input], &dir);
        assert_eq!(late(&r.summary), 0, "order {order}");
        assert_eq!(r.sessions, expected, "order {order} on {workers} worker(s)");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn clicks_beyond_the_bound_are_counted_late_and_left_out() {
    let dir = scratch("late");
    // The same spec promising clicks in order, given clicks up to 200 ms out of order.
    let text = std::fs::read_to_string(spec()).unwrap();
    assert!(text.contains("out_of_orderness = 200"));
    let strict = dir.join("strict.toml");
    std::fs::write(&strict, text.replace("out_of_orderness = 200", "out_of_orderness = 0"))
        .unwrap();
    let lines = shuffled(&clicks(CLICKS, 40, 0, SEED), 200, 9);
    let file = dir.join("clicks.csv");
    std::fs::write(&file, lines.join("\n")).unwrap();
    let input = format!("file:{}", file.display());
    let r = run(&strict, &["--workers", "1", "--input", &input], &dir);
    let late = late(&r.summary);
    let counted: u64 = r.sessions.iter().map(|s| s.3).sum();
    assert!(late > 0, "no click came late");
    assert_eq!(counted + late, CLICKS as u64, "every click is in a session or counted late");
    std::fs::remove_dir_all(&dir).unwrap();
}
