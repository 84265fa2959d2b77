//! `clasp sim` as a user runs it: fixed workers and policies, the same output for the same
//! seed, and clear errors before anything runs.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn clasp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clasp")).args(args).output().expect("the binary runs")
}

fn spec(name: &str) -> String {
    let p: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines").join(name);
    p.to_str().unwrap().to_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn fixed_workers_report_throughput_and_latency() {
    let wc = spec("wc.toml");
    let out = clasp(&["sim", &wc, "--workers", "2", "--rate", "100", "--duration", "8"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in ["throughput", "latency p50", "workers over time: 0-8 s: 2"] {
        assert!(text.contains(needle), "{needle}: {text}");
    }
}

#[test]
fn same_seed_same_json_and_stats_file() {
    let syn = spec("syn.toml");
    let stats = std::env::temp_dir().join(format!("clasp-sim-stats-{}.json", std::process::id()));
    let run = |seed: &str| {
        let args = [
            "sim",
            &syn,
            "--policy",
            "clasp",
            "--pattern",
            "burst",
            "--rate",
            "600",
            "--duration",
            "40",
            "--seed",
            seed,
            "--json",
            "--stats",
            stats.to_str().unwrap(),
        ];
        let out = clasp(&args);
        assert!(out.status.success(), "{}", stderr(&out));
        out.stdout
    };
    let (a, b, c) = (run("4"), run("4"), run("5"));
    assert_eq!(a, b);
    assert_ne!(a, c);
    let v: serde_json::Value = serde_json::from_slice(&a).unwrap();
    assert!(v["throughput"].as_f64().unwrap() > 0.0);
    assert!(!v["scaling_events"].as_array().unwrap().is_empty(), "the policy scales");
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    assert_eq!(file["schema"], "clasp.stats/1");
    assert!(file["scaling_events"].is_array() && file["coefficients"].is_object());
    let _ = std::fs::remove_file(stats);
}

#[test]
fn bad_input_is_a_clear_error_before_anything_runs() {
    let wc = spec("wc.toml");
    for (args, needle) in [
        (vec!["--workers", "0", "--rate", "10"], "0 workers"),
        (vec!["--workers", "2", "--rate", "0"], "positive rate"),
        (vec!["--workers", "2", "--rate", "-3"], "positive rate"),
        (vec!["--policy", "fifo", "--rate", "10"], "unknown policy `fifo`"),
        (vec!["--policy", "clasp", "--pattern", "wobble", "--rate", "10"], "unknown input pattern"),
        (vec!["--policy", "clasp", "--pattern", "gradual"], "needs a rate > 0"),
        (vec!["--rate", "10"], "--workers"),
        (vec!["--workers", "12", "--rate", "10"], "--max-workers"),
        (
            vec!["--workers", "2", "--rate", "10", "--duration", "5", "--warmup", "6"],
            "nothing to measure",
        ),
    ] {
        let mut all = vec!["sim", wc.as_str()];
        all.extend(args.iter().copied());
        let out = clasp(&all);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{args:?}: nothing runs");
    }
}
