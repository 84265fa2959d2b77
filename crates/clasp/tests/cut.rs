//! `clasp cut` end to end: the binary on the Planner paper's w1–w3, checked against costs
//! derived by hand from the specs' rates and selectivities, and on bad input.

use clasp_core::{Pipeline, spec};
use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

fn clasp(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clasp")).args(args).current_dir(repo("")).output().unwrap()
}

fn cut_json(w: &str) -> (Pipeline, Value) {
    let pipeline = format!("pipelines/taxi-{w}.toml");
    let devices = format!("devices/taxi-{w}.toml");
    let out = clasp(&["cut", &pipeline, "--devices", &devices, "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json = serde_json::from_slice(&out.stdout).unwrap();
    (spec::load(&repo(&pipeline)).unwrap(), json)
}

fn rate(p: &Pipeline, source: &str) -> f64 {
    p.sources[p.source_id(source).unwrap().index()].rate.unwrap()
}

fn sel(p: &Pipeline, op: &str) -> f64 {
    p.operator(p.operator_id(op).unwrap()).selectivity_or_default()
}

fn strings(v: &Value) -> Vec<&str> {
    v.as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect()
}

fn close(a: &Value, b: f64) {
    let a = a.as_f64().unwrap();
    assert!((a - b).abs() <= 1e-9 * b.max(1.0), "{a} vs {b}");
}

/// All five devices hold a fifth of the data; links cost 1 per item, so the cost is the rate
/// of what crosses, summed over devices.
#[test]
fn w1_both_filters_on_the_devices() {
    let (p, j) = cut_json("w1");
    assert_eq!(j["groups"].as_array().unwrap().len(), 1);
    assert_eq!(strings(&j["groups"][0]["devices"]).len(), 5);
    assert_eq!(strings(&j["groups"][0]["operators"]), ["filter_start_nyc", "filter_duration"]);
    assert!(strings(&j["cloud"]).is_empty());
    let cut = &j["cut_streams"][0];
    assert_eq!(
        (cut["from"].as_str(), cut["to"].as_str()),
        (Some("filter_duration"), Some("kafka"))
    );
    let expected = rate(&p, "rides") * sel(&p, "filter_start_nyc") * sel(&p, "filter_duration");
    close(&cut["cost"], expected);
    close(&j["cost"], expected);
    close(&j["all_cloud_cost"], rate(&p, "rides"));
}

#[test]
fn w2_everything_before_the_join_on_the_devices() {
    let (p, j) = cut_json("w2");
    let on_device = strings(&j["groups"][0]["operators"]);
    for op in &p.operators {
        assert_eq!(on_device.contains(&op.name.as_str()), op.name != "join", "{}", op.name);
    }
    assert_eq!(strings(&j["cloud"]), ["join"]);
    let rides = rate(&p, "rides")
        * sel(&p, "filter_wellformed")
        * sel(&p, "filter_nyc")
        * sel(&p, "filter_night");
    let fares = rate(&p, "fares") * sel(&p, "filter_fare") * sel(&p, "fare_fields");
    let cuts = j["cut_streams"].as_array().unwrap();
    assert_eq!(cuts.len(), 2);
    assert!(cuts.iter().all(|c| c["to"] == "join"));
    close(&j["cost"], rides + fares);
    close(&j["all_cloud_cost"], rate(&p, "rides") + rate(&p, "fares"));
}

#[test]
fn w3_window_and_after_in_the_cloud() {
    let (p, j) = cut_json("w3");
    assert_eq!(strings(&j["groups"][0]["operators"]), ["filter_nyc", "to_cell"]);
    assert_eq!(strings(&j["cloud"]), ["window", "filter_popular", "to_area"]);
    close(&j["cost"], rate(&p, "rides") * sel(&p, "filter_nyc") * sel(&p, "to_cell"));
}

#[test]
fn human_and_dot_output() {
    let out = clasp(&["cut", "pipelines/taxi-w1.toml", "--devices", "devices/taxi-w1.toml"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert!(text.contains("on each device: filter_start_nyc -> filter_duration"), "{text}");
    assert!(text.contains("all in cloud"), "{text}");
    let out =
        clasp(&["cut", "pipelines/taxi-w3.toml", "--devices", "devices/taxi-w3.toml", "--dot"]);
    let dot = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success());
    assert!(dot.starts_with("digraph") && dot.contains("color=red"), "{dot}");
}

#[test]
fn a_bad_devices_file_fails_with_a_located_error() {
    let dir = std::env::temp_dir().join(format!("clasp-cut-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad-devices.toml");
    std::fs::write(&bad, "[[device]]\nid = \"e1\"\nsources = [\"ridez\"]\n").unwrap();
    let out = clasp(&["cut", "pipelines/taxi-w1.toml", "--devices", bad.to_str().unwrap()]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert!(err.contains("bad-devices.toml:3:"), "{err}");
    assert!(err.contains("device[0].sources[0]"), "{err}");
    assert!(err.contains("no source `ridez`") && err.contains("did you mean `rides`?"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    // A devices file for another pipeline contradicts this one.
    let out = clasp(&["cut", "pipelines/taxi-w1.toml", "--devices", "devices/taxi-w2.toml"]);
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success());
    assert!(err.contains("devices/taxi-w2.toml:3:") && err.contains("not `taxi-w1`"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn observed_statistics_refine_the_model() {
    let dir = std::env::temp_dir().join(format!("clasp-cut-stats-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let stats = dir.join("observed.json");
    let text = r#"{"schema": "clasp.stats/1", "pipeline": "taxi-w2", "throughput": 1500,
        "operators": [{"name": "fare_fields", "processed_rate": 450, "selectivity": 3}]}"#;
    std::fs::write(&stats, text).unwrap();
    let s = stats.to_str().unwrap();
    let args = ["cut", "pipelines/taxi-w2.toml", "--devices", "devices/taxi-w2.toml"];
    let out = clasp(&[&args[..], &["--stats", s, "--json"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: Value = serde_json::from_slice(&out.stdout).unwrap();
    // Tripling the fares after the flatmap makes shipping them before it cheaper.
    assert_eq!(strings(&j["cloud"]), ["fare_fields", "join"]);
    std::fs::write(&stats, text.replace("\"selectivity\": 3", "\"selectivity\": -3")).unwrap();
    let out = clasp(&[&args[..], &["--stats", s]].concat());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success());
    assert!(err.contains("observed.json") && err.contains("fare_fields"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}
