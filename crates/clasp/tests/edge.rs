//! `clasp edge` end to end: the cloud and five devices as separate processes over loopback TCP,
//! the embedded mode, and bad input (unknown device, a devices file that contradicts the
//! pipeline, an unreachable cloud, a malformed --input).

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

/// The cluster secret the tests' clouds and devices share.
const TOKEN: &str = "edge-tests-secret-0123456789abcdef0123";

/// `clasp` with the tests' secret in its environment.
fn command() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_clasp"));
    c.env("CLASP_TOKEN", TOKEN).current_dir(repo(""));
    c
}

fn clasp(args: &[&str]) -> Output {
    command().args(args).output().unwrap()
}

fn failure(args: &[&str]) -> String {
    let out = clasp(args);
    assert!(!out.status.success(), "expected a failure: {args:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const W1: [&str; 3] = ["edge", "pipelines/taxi-w1.toml", "--devices"];

#[test]
fn cloud_and_five_device_processes_run_w2_to_the_end() {
    let mut cloud = command()
        .args(["edge", "pipelines/taxi-w2.toml", "--devices", "devices/taxi-w2.toml", "--cloud"])
        .args(["--listen", "127.0.0.1:0", "--json", "--join-timeout-s", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(cloud.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line.split_whitespace().nth(3).unwrap().trim_end_matches(';').to_owned();
    assert!(line.starts_with("edge ingress on"), "{line}");
    let devices: Vec<_> = (1..=5)
        .map(|i| {
            command()
                .args(["edge", "pipelines/taxi-w2.toml", "--devices", "devices/taxi-w2.toml"])
                .args(["--device", &format!("edge-{i}"), "--join", &addr, "--speed", "0"])
                .args(["--input", "rides=gen:4000:3", "--input", "fares=gen:4000:3"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let devices: Vec<Output> = devices.into_iter().map(|d| d.wait_with_output().unwrap()).collect();
    for d in &devices {
        assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
        assert!(String::from_utf8_lossy(&d.stdout).contains("filter_night"));
    }
    let out = cloud.wait_with_output().unwrap();
    assert!(out.status.success());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let links = report["cloud"]["links"].as_array().unwrap();
    assert_eq!(links.len(), 5);
    assert_eq!(report["cloud"]["operators"], serde_json::json!(["join"]));
    assert!(links.iter().all(|l| l["bytes"].as_u64().unwrap() > 0));
}

#[test]
fn embedded_w1_sends_less_cut_than_all_in_cloud() {
    let run = |extra: &[&str]| -> Value {
        let mut args = vec!["edge", "pipelines/taxi-w1.toml", "--devices", "devices/taxi-w1.toml"];
        args.extend_from_slice(&[
            "--embedded",
            "--input",
            "rides=gen:3000:5",
            "--speed",
            "0",
            "--json",
        ]);
        args.extend_from_slice(extra);
        let out = clasp(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let items = |v: &Value| -> u64 {
        v["cloud"]["links"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|l| l["records"].as_array().unwrap().iter().map(|r| r[1].as_u64().unwrap()))
            .sum()
    };
    let (cut, all) = (run(&[]), run(&["--all-cloud"]));
    assert_eq!(items(&all), 3000);
    assert!(items(&cut) < 3000 / 2 + 200, "{}", items(&cut));
    assert_eq!(cut["cloud"]["sink_records"], all["cloud"]["sink_records"]);
}

#[test]
fn an_unknown_device_is_named_with_the_choices() {
    let mut args = W1.to_vec();
    args.extend([
        "devices/taxi-w1.toml",
        "--device",
        "edge-9",
        "--join",
        "127.0.0.1:9",
        "--input",
        "rides=gen:5",
    ]);
    let err = failure(&args);
    assert!(err.contains("no device `edge-9`") && err.contains("edge-1, edge-2"), "{err}");
}

#[test]
fn a_devices_file_for_another_pipeline_is_refused() {
    let mut args = W1.to_vec();
    args.extend(["devices/taxi-w2.toml", "--cloud"]);
    let err = failure(&args);
    assert!(err.contains("taxi-w2") && err.contains("help:"), "{err}");
}

#[test]
fn an_unreachable_cloud_says_so() {
    let mut args = W1.to_vec();
    args.extend(["devices/taxi-w1.toml", "--device", "edge-1", "--join", "127.0.0.1:9"]);
    args.extend(["--input", "rides=gen:5", "--connect-timeout-s", "0.3"]);
    let err = failure(&args);
    assert!(
        err.contains("cannot reach the cloud at 127.0.0.1:9") && err.contains("--cloud"),
        "{err}"
    );
}

#[test]
fn inputs_must_be_well_formed_and_complete() {
    let mut args = W1.to_vec();
    args.extend(["devices/taxi-w1.toml", "--embedded", "--input", "rides"]);
    assert!(failure(&args).contains("SOURCE=FILE"));
    let mut args = W1.to_vec();
    args.extend(["devices/taxi-w1.toml", "--embedded"]);
    let err = failure(&args);
    assert!(err.contains("--input rides="), "{err}");
    let mut args = W1.to_vec();
    args.extend(["devices/taxi-w1.toml", "--embedded", "--input", "rides=/nonexistent.csv"]);
    assert!(failure(&args).contains("/nonexistent.csv"));
}
