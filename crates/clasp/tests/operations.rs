//! Operations from the command line: JSON logs without colour, each rescaling and migration
//! logged once; `--scaling recommend` on the README's main job (shortened) reporting decisions
//! and moving nothing; the admin URL printed at start, with the admin token for the dashboard,
//! and `clasp admin-token`; `clasp config print` with origins.

mod common;

use common::root;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn clasp() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_clasp"));
    c.current_dir(root()).env_remove("CLASP_LOG").env_remove("CLASP_CONFIG");
    c
}

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("clasp-operations-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Runs `clasp run ARGS --stats FILE`: stderr and the stats.
fn run(name: &str, args: &[&str]) -> (String, Value) {
    let stats = tmp(&format!("{name}.json"));
    let out = clasp().arg("run").args(args).arg("--stats").arg(&stats).output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    let stats: Value = serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    (stderr, stats)
}

/// The JSON log lines' messages (every line starting with `{` must be one).
fn messages(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            v["fields"]["message"].as_str().unwrap().to_string()
        })
        .collect()
}

fn count(messages: &[String], needle: &str) -> usize {
    messages.iter().filter(|m| m.contains(needle)).count()
}

#[test]
fn json_logs_have_no_colour_and_log_each_rescaling_and_migration_once() {
    let (stderr, stats) = run(
        "json",
        &[
            "pipelines/wc.toml",
            "--input",
            "gen:6400",
            "--rate",
            "400",
            "--batch",
            "16",
            "--interval-ms",
            "200",
            "--rescale-at",
            "100:3,250:2",
            "--log-format",
            "json",
            "--log-level",
            "info",
            "--quiet",
        ],
    );
    assert!(!stderr.contains('\u{1b}'), "escape codes in a log that is not a terminal");
    let m = messages(&stderr);
    let rescales = stats["scaling_events"].as_array().unwrap().len();
    let migrations = stats["migrations"].as_array().unwrap().len();
    assert_eq!(rescales, 2);
    assert_eq!(count(&m, "requested rescale"), rescales);
    assert_eq!(count(&m, "migration to epoch"), migrations);
    assert!(stderr.contains("clasp: admin server at http://127.0.0.1:"), "{stderr}");
}

#[test]
fn text_logs_to_a_pipe_have_no_colour() {
    let out = clasp()
        .args(["run", "pipelines/wc.toml", "--input", "gen:2000", "--log-level", "info", "--quiet"])
        .args(["--rescale-at", "20:2", "--batch", "16", "--no-admin"])
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains(" INFO "), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
    assert!(!stderr.contains("admin server at"), "--no-admin started one: {stderr}");
}

#[test]
fn recommend_reports_decisions_on_the_main_job_and_moves_nothing() {
    // The README's main job, shortened: the rate jumps to 700 requests/s at once.
    let (stderr, stats) = run(
        "recommend",
        &[
            "pipelines/wc.toml",
            "--policy",
            "clasp",
            "--rate",
            "700",
            "--slots",
            "3",
            "--batch",
            "16",
            "--service-time",
            "count=50:sleep",
            "--input",
            "gen:16000",
            "--warmup-time",
            "1s",
            "--scaling",
            "recommend",
            "--log-format",
            "json",
            "--log-level",
            "info",
            "--quiet",
        ],
    );
    let m = messages(&stderr);
    let recommended = stats["recommendations"].as_array().expect("recommendations recorded");
    assert!(!recommended.is_empty(), "no decision reported");
    assert_eq!(count(&m, "(not applied)"), recommended.len());
    assert_eq!(count(&m, "decides"), 0);
    assert_eq!(count(&m, "migration to epoch"), 0);
    assert!(stats["scaling_events"].as_array().unwrap().is_empty());
    assert!(stats["migrations"].as_array().unwrap().is_empty());
    assert_eq!(stats["workers_used"], 1);
}

#[test]
fn config_print_shows_each_value_and_its_origin() {
    let file = tmp("clasp.toml");
    std::fs::write(&file, "[cluster]\nworkers = 2\nslots = 4\n\n[policy]\npolicy = \"clasp\"\n")
        .unwrap();
    let out = clasp()
        .arg("--config")
        .arg(&file)
        .env("CLASP_SLOTS", "6")
        .args(["config", "print", "run", "--", "--max-workers", "5"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let line = |key: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{key} = ")))
            .unwrap_or_else(|| panic!("no {key} in\n{text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    let at = |line: u32| format!("# file {}:{line}", file.display());
    assert_eq!(line("workers"), format!("workers = 2 {}", at(2)));
    assert_eq!(line("slots"), "slots = 6 # env CLASP_SLOTS");
    assert_eq!(line("max_workers"), "max_workers = 5 # flag");
    assert_eq!(line("policy"), format!("policy = \"clasp\" {}", at(6)));
    assert_eq!(line("batch"), "batch = 256 # default");
    assert!(text.contains("[admin]\naddress = \"127.0.0.1:0\""), "{text}");
}

#[test]
fn a_bad_config_file_fails_before_anything_starts() {
    let file = tmp("bad.toml");
    std::fs::write(&file, "[cluster]\nworkers = 2\n\n[triggers]\ncooldwn = 3\n").unwrap();
    let out = clasp()
        .env("CLASP_CONFIG", &file)
        .args(["run", "pipelines/wc.toml", "--input", "gen:10"])
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success());
    let expected = format!(
        "error: {}:5:1: unknown setting `triggers.cooldwn`; did you mean `triggers.cooldown`?",
        Path::new(&file).display()
    );
    assert_eq!(stderr.trim(), expected);
}

#[test]
fn the_example_config_file_is_accepted_and_its_origins_shown() {
    let out = clasp()
        .args([
            "--config",
            "deploy/clasp.toml",
            "config",
            "print",
            "run",
            "--",
            "pipelines/wc.toml",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let example = std::fs::read_to_string(root().join("deploy/clasp.toml")).unwrap();
    let line_of = |needle: &str| example.lines().position(|l| l.starts_with(needle)).unwrap() + 1;
    for (key, shown) in [
        ("policy", "policy = \"clasp\""),
        ("service_time", "service_time = [\"count=50:sleep\"]"),
        ("address", "address = \"127.0.0.1:9898\""),
    ] {
        let line = text.lines().find(|l| l.starts_with(&format!("{key} = "))).unwrap();
        let origin = format!("# file deploy/clasp.toml:{}", line_of(&format!("{key} = ")));
        assert!(line.starts_with(shown) && line.ends_with(&origin), "{line}");
    }
}

#[test]
fn the_dashboard_address_and_clasp_admin_token_carry_the_secrets_admin_token() {
    let secret_file = tmp("cluster.token");
    std::fs::write(&secret_file, "operations-test-secret-0123456789abcdef\n").unwrap();
    let secret = clasp_wire::Secret::from_file(&secret_file).unwrap();
    let want = clasp_wire::auth::admin_token(&secret);
    let out = clasp().arg("admin-token").arg("--token-file").arg(&secret_file).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8(out.stdout).unwrap().trim(), want);
    // Without a secret it says how to make one.
    let out = clasp().arg("admin-token").env_remove("CLASP_TOKEN").output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(!out.status.success() && stderr.contains("--token-file"), "{stderr}");
    // `clasp run` prints the dashboard's address with the token of its secret.
    let token_file = secret_file.to_str().unwrap();
    let (stderr, _) = run(
        "admin-token",
        &["pipelines/wc.toml", "--input", "gen:2000", "--quiet", "--token-file", token_file],
    );
    let dashboard = stderr
        .lines()
        .find_map(|l| l.strip_prefix("clasp: dashboard at http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no dashboard address: {stderr}"));
    let token = dashboard.split_once("/?token=").unwrap().1.split(' ').next().unwrap();
    assert_eq!(token, want);
    // With --insecure the server asks no token, and no token is printed.
    let (stderr, _) =
        run("insecure", &["pipelines/wc.toml", "--input", "gen:2000", "--quiet", "--insecure"]);
    assert!(stderr.contains("clasp: admin server at http://127.0.0.1:"), "{stderr}");
    assert!(!stderr.contains("?token="), "{stderr}");
}
