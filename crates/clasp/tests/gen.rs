//! `clasp gen` end to end: seeded, byte-identical inputs per app and source, clear errors.

use std::process::Command;

fn clasp(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_clasp")).args(args).output().expect("clasp runs")
}

#[test]
fn same_seed_gives_identical_files() {
    for app in ["wc", "sd", "aa", "pl", "nwm", "etl", "taxi-w1"] {
        let a = clasp(&["gen", app, "--count", "500", "--seed", "9"]);
        assert!(a.status.success(), "{app}: {}", String::from_utf8_lossy(&a.stderr));
        assert_eq!(a.stdout.iter().filter(|b| **b == b'\n').count(), 500, "{app}");
        assert_eq!(a.stdout, clasp(&["gen", app, "--count", "500", "--seed", "9"]).stdout);
        assert_ne!(a.stdout, clasp(&["gen", app, "--count", "500", "--seed", "10"]).stdout);
    }
}

#[test]
fn multi_source_pipelines_generate_per_source_into_files() {
    let dir = std::env::temp_dir().join(format!("clasp-gen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (rides, fares) = (dir.join("rides.csv"), dir.join("fares.csv"));
    for (source, path) in [("rides", &rides), ("fares", &fares)] {
        let out = clasp(&[
            "gen",
            "taxi-w2",
            "--count",
            "400",
            "--source",
            source,
            "--out",
            path.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let rides = std::fs::read_to_string(&rides).unwrap();
    let fares = std::fs::read_to_string(&fares).unwrap();
    let starts = rides.lines().filter(|l| l.contains(",START,")).count();
    assert_eq!(rides.lines().count(), 400);
    assert_eq!(fares.lines().count(), starts, "one fare per ride started");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bad_requests_are_clear_errors() {
    for (args, needle) in [
        (&["gen", "nope"][..], "unknown application `nope`"),
        (&["gen", "taxi-w2"], "choose one with --source: rides, fares"),
        (&["gen", "sd", "--source", "x"], "has no source `x`"),
        (&["gen", "sd", "--profile", "--source", "readings"], "drop --source"),
    ] {
        let out = clasp(args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}

#[test]
fn profile_prints_a_table_per_operator() {
    let out = clasp(&["gen", "pl", "--profile", "--count", "3000"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("| aggregation | `pl.mean_per_category` |"), "{text}");
    assert!(text.contains("% of executions touch state"), "{text}");
}
