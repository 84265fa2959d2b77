//! Hostile numbers and sizes on the command line and in spec files: each gets a clear error
//! naming what is wrong before anything runs (no cluster starts, no panic), and a closed
//! standard output ends a command quietly.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

fn clasp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clasp"))
        .args(args)
        .current_dir(repo(""))
        .env_remove("CLASP_TOKEN")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// A copy of `pipelines/<name>` with `from` replaced by `to`, in a scratch directory.
fn spec_with(name: &str, from: &str, to: &str) -> String {
    let text = std::fs::read_to_string(repo(&format!("pipelines/{name}"))).unwrap();
    assert!(text.contains(from), "{name} lacks {from:?}");
    let dir = std::env::temp_dir().join(format!("clasp-numbers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path =
        dir.join(format!("{}-{}.toml", name.trim_end_matches(".toml"), to.len() + from.len()));
    let path =
        dir.join(format!("{}-{:x}.toml", path.file_stem().unwrap().to_str().unwrap(), fxhash(to)));
    std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    path.display().to_string()
}

fn fxhash(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100000001b3))
}

#[test]
fn hostile_numbers_are_refused_before_anything_runs() {
    let wc = "pipelines/wc.toml";
    let aa = "pipelines/aa.toml";
    let run = |extra: &[&str]| {
        let mut a = vec!["run".to_owned(), wc.to_owned(), "--input".into(), "gen:10".into()];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let rate_spec = spec_with("wc.toml", "name = \"lines\"", "name = \"lines\"\nrate = 1e308");
    let sel_spec = spec_with("wc.toml", "selectivity = 10.0", "selectivity = 1e308");
    let svc_spec = spec_with(
        "wc.toml",
        "function = \"wc.split\"",
        "function = \"wc.split\"\nservice_time_us = 1e24",
    );
    let fun_spec = spec_with("wc.toml", "function = \"wc.split\"", "function = \"wc.splitt\"");
    let win_spec = spec_with("aa.toml", "window_ms = 10000", "window_ms = -5");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (run(&["--service-time", "split=1e24"]), "longer than the longest allowed"),
        (run(&["--service-time", "split=NaN"]), "not a number of microseconds"),
        (run(&["--dispatch-cost", "local=1e300"]), "more than the largest emulated cost"),
        (run(&["--dispatch-cost", "remote=-1"]), "not a number of microseconds >= 0"),
        (run(&["--batch", "4294967295"]), "--batch 4294967295 must be between 1 and 65536"),
        (
            run(&["--key-groups", "4294967295"]),
            "for '--key-groups <KEY_GROUPS>': 4294967295 is not in 1..=",
        ),
        (run(&["--slots", "100000"]), "--slots 100000 must be between 1 and 1024"),
        (run(&["--max-workers", "100000"]), "--max-workers 100000 must be between 1 and 4096"),
        (run(&["--rate", "1e308"]), "more than the largest rate"),
        (run(&["--rate", "inf"]), "must be a positive number"),
        (run(&["--duration", "999999999h"]), "longer than the longest allowed"),
        (run(&["--interval-ms", "0"]), "for '--interval-ms <INTERVAL_MS>': 0 is not in 10..="),
        (run(&["--cooldown", "1e300"]), "--cooldown"),
        (run(&["--latency-slo", "NaN"]), "--latency-slo NaN"),
        (own(&["plan", wc, "--rate", "1e308"]), "more than the largest rate"),
        (own(&["plan", wc, "--rate", "NaN"]), "not a positive rate"),
        (own(&["sim", wc, "--rate", "1e300"]), "more than the largest rate"),
        (
            own(&["sim", wc, "--rate", "100", "--duration", "1e300"]),
            "longer than the longest allowed",
        ),
        (own(&["sim", wc, "--rate", "100", "--workers", "100000"]), "more than the most workers"),
        (
            own(&["check", &rate_spec]),
            "source[0].rate`: the value 1e308 is larger than the largest allowed",
        ),
        (own(&["plan", &rate_spec, "--rate", "10"]), "is larger than the largest allowed"),
        (own(&["check", &sel_spec]), "selectivity`: the value 1e308 is larger"),
        (own(&["check", &svc_spec]), "service_time_us`: the value 1e24 is larger"),
        (own(&["check", &fun_spec]), "runs function `wc.splitt`, which is not registered"),
        (own(&["check", &win_spec]), "window_ms"),
        (own(&["check", "/dev/zero"]), "larger than 16 MiB"),
        (
            own(&[
                "edge",
                "pipelines/taxi-w1.toml",
                "--devices",
                "devices/taxi-w1.toml",
                "--embedded",
                "--connect-timeout-s",
                "1e300",
            ]),
            "longer than the longest allowed",
        ),
        (
            own(&[
                "edge",
                "pipelines/taxi-w1.toml",
                "--devices",
                "devices/taxi-w1.toml",
                "--embedded",
                "--speed",
                "NaN",
            ]),
            "--speed NaN",
        ),
        (
            own(&[
                "edge",
                "pipelines/taxi-w1.toml",
                "--devices",
                "devices/taxi-w1.toml",
                "--embedded",
                "--reconnect-timeout-s",
                "1e300",
            ]),
            "longer than the longest allowed",
        ),
        (
            own(&[
                "edge",
                "pipelines/taxi-w1.toml",
                "--devices",
                "devices/taxi-w1.toml",
                "--embedded",
                "--resend-buffer-kib",
                "0",
            ]),
            "--resend-buffer-kib 0 must be between 1 and 4194304",
        ),
        (own(&["planner", wc, "--workers", "1"]), "needs the cluster secret"),
        (own(&["worker", "--join", "127.0.0.1:9"]), "needs the cluster secret"),
        (
            own(&[
                "edge",
                "pipelines/taxi-w1.toml",
                "--devices",
                "devices/taxi-w1.toml",
                "--cloud",
            ]),
            "needs the cluster secret",
        ),
        (own(&["worker", "--join", "127.0.0.1:9", "--token-file", "/dev/zero"]), "/dev/zero"),
    ];
    let mut failures = Vec::new();
    for (args, want) in &cases {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = clasp(&refs);
        let err = String::from_utf8_lossy(&out.stderr);
        let ok = !out.status.success()
            && err.contains(want)
            && !err.contains("panicked")
            && !err.contains("clasp: running");
        if !ok {
            failures.push(format!("{args:?}: status {:?}, wanted `{want}` in:\n{err}", out.status));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n---\n"));
    assert!(cases.len() >= 30);
    // The maxima themselves are accepted.
    let out = clasp(&["check", aa]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_closed_stdout_ends_a_command_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_clasp"))
        .args(["plan", "pipelines/etl.toml", "--rate", "2000"])
        .current_dir(repo(""))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Reads one byte, then closes its end, as `head -c 1` does.
    let mut first = [0u8; 1];
    child.stdout.as_mut().unwrap().read_exact(&mut first).unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{err}");
    assert!(out.status.success(), "{:?}: {err}", out.status);
}
