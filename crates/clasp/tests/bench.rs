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
        "run-s=2",
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
    let e = sim(&["dispatch"]);
    assert!(e.contains("only on the runtime engine"), "{e}");
    let e = fails(&["scaling", "--engine", "runtime"]);
    assert!(e.contains("not available on the runtime engine yet"), "{e}");
}
