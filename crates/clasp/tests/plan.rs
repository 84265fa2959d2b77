//! `clasp plan` as a user runs it: the built binary on every spec in `pipelines/`, on malformed
//! input, and twice on the same input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn clasp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clasp")).args(args).output().expect("the binary runs")
}

fn pipelines() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    v.sort();
    v
}

/// A scratch file unique to this test process.
fn scratch(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clasp-plan-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn plans_every_pipeline_in_both_forms() {
    let files = pipelines();
    assert!(files.len() >= 11);
    for f in &files {
        let f = f.to_str().unwrap();
        for policy in ["clasp", "static"] {
            let out = clasp(&["plan", f, "--rate", "200", "--policy", policy]);
            assert!(out.status.success(), "{f} {policy}: {}", stderr(&out));
            let text = String::from_utf8(out.stdout).unwrap();
            assert!(text.contains("worker 0: load"), "{f}: {text}");
        }
        let out = clasp(&["plan", f, "--rate", "5000", "--max-workers", "4", "--json"]);
        assert!(out.status.success(), "{f}: {}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for key in ["workers", "order", "placement", "load", "policy", "coefficients"] {
            assert!(v.get(key).is_some(), "{f}: no `{key}`");
        }
        let workers = v["workers"].as_u64().unwrap();
        assert!((1..=4).contains(&workers), "{f}: {workers}");
        assert_eq!(v["load"].as_array().unwrap().len() as u64, workers);
        for l in v["load"].as_array().unwrap() {
            let (load, cap) = (l["load"].as_f64().unwrap(), l["capacity"].as_f64().unwrap());
            assert!(load <= cap * (1.0 + 1e-9), "{f}: {l}");
        }
        for e in v["placement"].as_array().unwrap() {
            for key in ["operator", "worker", "share", "parallelism"] {
                assert!(e.get(key).is_some(), "{f}: placement entry without `{key}`");
            }
        }
    }
}

#[test]
fn the_same_input_gives_byte_identical_json() {
    let f = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines/etl.toml");
    let args = ["plan", f.to_str().unwrap(), "--rate", "1500", "--json"];
    let (a, b) = (clasp(&args), clasp(&args));
    assert!(a.status.success(), "{}", stderr(&a));
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn statistics_files_are_read_and_checked() {
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines/wc.toml");
    let p = clasp_core::spec::load(&spec).unwrap();
    let mut stats = clasp_core::stats::ObservedStats::from_spec(&p, 100.0, 300.0);
    stats.coefficients = Some(clasp_core::stats::Coefficients {
        alpha: 10.0,
        beta: 50.0,
        gamma: 1000.0,
        capacity: 1e6,
    });
    let good = scratch("good.json", &serde_json::to_string(&stats).unwrap());
    let out = clasp(&[
        "plan",
        spec.to_str().unwrap(),
        "--rate",
        "100",
        "--stats",
        good.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["coefficients"]["beta"].as_f64(), Some(50.0), "the file's coefficients are used");

    let bad = scratch("bad.json", "{\"schema\": 3");
    let out =
        clasp(&["plan", spec.to_str().unwrap(), "--rate", "100", "--stats", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("bad.json: not a clasp statistics file"), "{}", stderr(&out));
}

#[test]
fn malformed_input_fails_with_a_clear_message() {
    let wc = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines/wc.toml");
    let wc = wc.to_str().unwrap();
    let spec = scratch("broken.toml", "[[operator]]\nname = \"a\"\nkind = \"mapp\"\n");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["plan", spec.to_str().unwrap(), "--rate", "10"], "broken.toml:3"),
        (vec!["plan", wc, "--rate", "0"], "not a positive rate"),
        (vec!["plan", wc, "--rate", "-5"], "not a positive rate"),
        (
            vec!["plan", wc, "--rate", "10", "--policy", "fifo"],
            "valid policies: clasp, faasflow, zhang24, ds2, flink, faasflow-sp, zhang24-sp, static",
        ),
        (vec!["plan", wc, "--rate", "10", "--max-workers", "0"], "--max-workers"),
        (vec!["plan", wc, "--rate", "10", "--coefficients", "1,2"], "alpha,beta,gamma,W"),
        (vec!["plan", wc, "--rate", "10", "--coefficients", "1,2,3,0"], "must be > 0"),
        (vec!["plan", wc, "--rate", "10", "--stats", "/no/such/stats.json"], "/no/such/stats.json"),
    ];
    for (args, expected) in cases {
        let out = clasp(&args);
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = stderr(&out);
        assert!(err.contains(expected), "{args:?}: expected `{expected}` in:\n{err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
