//! `/metrics` scraped during a real elastic run, checked against the run's own summary and
//! against counts made from the input itself, and validated by `promtool check metrics`.

mod common;

use clasp_plan::Policy;
use clasp_plan::autoscaler::Mode;
use clasp_runtime::job::RescaleAt;
use common::{Run, get, sample, samples, tool};
use std::io::Write;
use std::process::{Command, Stdio};

const RECORDS: u64 = 9_600;
const BATCH: u32 = 16;

/// The words of the generated input, counted from scratch.
fn words_in_input() -> u64 {
    let def = clasp_apps::inputs::source("wc", None).unwrap();
    let mut reader = def.generator(RECORDS, 7);
    let (mut line, mut words) = (Vec::new(), 0);
    while reader.next_line(&mut line).unwrap() {
        clasp_apps::wc::for_each_word(&line, |_| words += 1);
    }
    words
}

fn sum(text: &str, name: &str, label: &str) -> f64 {
    samples(text, name).filter(|(s, _)| s.contains(label)).map(|(_, v)| v).sum()
}

/// Runs promtool's linter on an exposition; returns what it reported.
fn promtool(exposition: &str) -> Option<(bool, String)> {
    let promtool = tool(&["promtool"], "CLASP_REQUIRE_PROMTOOL", "prometheus")?;
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(exposition.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let report =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Some((out.status.success(), report))
}

#[test]
fn scraped_metrics_match_the_runs_summary_and_pass_promtool() {
    let run = Run {
        pipeline: common::pipeline("wc.toml"),
        workers: 1,
        rescales: vec![
            RescaleAt { after_requests: 150, workers: 3 },
            RescaleAt { after_requests: 400, workers: 2 },
        ],
        records: RECORDS,
        batch: BATCH,
        rate: 400.0,
        policy: Policy::Static,
        mode: Mode::Act,
        checkpoint_every: Some(100),
    };
    let mut seen_records = Vec::new();
    let mut mid_run = String::new();
    let (out, server, _obs) = run.run(|addr, _, _| {
        let (status, text) = get(addr, "/metrics");
        assert_eq!(status, 200);
        seen_records.push(sample(&text, "clasp_input_records_total").unwrap());
        if sample(&text, "clasp_workers_active") == Some(3.0) {
            mid_run = text;
        }
    });
    assert!(seen_records.len() >= 3, "scraped {} times during the run", seen_records.len());
    assert!(seen_records.windows(2).all(|w| w[0] <= w[1]), "a counter fell: {seen_records:?}");
    let (status, text) = get(server.addr(), "/metrics");
    assert_eq!(status, 200);
    let s = &out.summary;
    let m = |name: &str| sample(&text, name).unwrap_or_else(|| panic!("no {name} in\n{text}"));
    // Against the input itself.
    assert_eq!(m("clasp_input_records_total"), RECORDS as f64);
    assert_eq!(m("clasp_input_requests_total"), RECORDS.div_ceil(u64::from(BATCH)) as f64);
    assert_eq!(sum(&text, "clasp_operator_records_in_total", "operator=\"split\""), RECORDS as f64);
    assert_eq!(
        sum(&text, "clasp_operator_records_in_total", "operator=\"count\""),
        words_in_input() as f64
    );
    // Against the run's summary.
    assert_eq!(m("clasp_input_records_total"), s.input_records as f64);
    assert_eq!(m("clasp_chains_completed_total"), s.completed as f64);
    assert_eq!(m("clasp_end_to_end_latency_seconds_count"), s.completed as f64);
    assert_eq!(m("clasp_workers_active"), f64::from(out.placement.workers));
    assert_eq!(out.placement.workers, 2);
    assert_eq!(
        sum(&text, "clasp_chained_requests_total", "kind=\"local\""),
        s.local_requests as f64
    );
    assert_eq!(
        sum(&text, "clasp_chained_requests_total", "kind=\"remote\""),
        s.remote_requests as f64
    );
    for (i, o) in s.operators.iter().enumerate() {
        let label = format!("operator=\"{}\"", o.name);
        assert_eq!(sum(&text, "clasp_operator_requests_in_total", &label), o.processed as f64);
        assert_eq!(sum(&text, "clasp_operator_records_out_total", &label), o.emitted as f64, "{i}");
    }
    let events = &out.stats.scaling_events;
    assert_eq!(events.len(), 2);
    assert_eq!(m("clasp_rescalings_total{reason=\"requested\"}"), events.len() as f64);
    assert_eq!(m("clasp_migration_duration_seconds_count"), s.migrations.len() as f64);
    let pauses: usize = s.migrations.iter().map(|r| r.workers.len()).sum();
    assert_eq!(m("clasp_migration_worker_pause_seconds_count"), pauses as f64);
    let keys: u64 = events.iter().map(|e| e.keys_moved).sum();
    assert_eq!(m("clasp_migration_keys_moved_total"), keys as f64);
    assert_eq!(m("clasp_run_finished"), 1.0);
    let checkpoints = &out.stats.checkpoints;
    let committed: Vec<_> = checkpoints.iter().filter(|c| c.committed).collect();
    assert!(committed.len() >= 3, "checkpoints every 100 of 600 requests: {checkpoints:?}");
    assert_eq!(m("clasp_checkpoints_committed_total"), committed.len() as f64);
    assert_eq!(m("clasp_checkpoints_failed_total"), (checkpoints.len() - committed.len()) as f64);
    assert_eq!(m("clasp_recoveries_total"), out.stats.recoveries.len() as f64);
    let last = committed.last().unwrap();
    assert_eq!(m("clasp_checkpoint_last_id"), last.id as f64);
    assert_eq!(m("clasp_checkpoint_last_size_bytes"), last.bytes as f64);
    assert_eq!(m("clasp_checkpoint_last_duration_seconds"), last.duration_ms / 1e3);
    grafana_uses_only_exported_metrics(&text);
    for exposition in [&text, &mid_run].into_iter().filter(|t| !t.is_empty()) {
        if let Some((ok, report)) = promtool(exposition) {
            assert!(ok && report.trim().is_empty(), "promtool check metrics:\n{report}");
        }
    }
}

#[test]
fn promtool_rejects_a_broken_exposition() {
    // The check above can fail: promtool refuses a counter without `_total` and a gauge that
    // has one.
    let broken = "# HELP clasp_x_total x\n# TYPE clasp_x_total gauge\nclasp_x_total 1\n# HELP clasp_y y\n# TYPE clasp_y counter\nclasp_y 1\n";
    if let Some((ok, report)) = promtool(broken) {
        assert!(!ok || !report.trim().is_empty(), "promtool accepted:\n{broken}");
    }
}

/// Every metric the Grafana dashboard queries is a family of the exposition.
fn grafana_uses_only_exported_metrics(exposition: &str) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("deploy/grafana/clasp.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut exprs = Vec::new();
    collect_exprs(&dashboard, &mut exprs);
    assert!(exprs.len() >= 20, "{} queries", exprs.len());
    let families: Vec<&str> =
        exposition.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next()).collect();
    for e in &exprs {
        let mut rest = e.as_str();
        while let Some(at) = rest.find("clasp_") {
            let name: String =
                rest[at..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            rest = &rest[at + name.len()..];
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|f| families.contains(f)))
                .unwrap_or(&name);
            // Families without a sample yet (no recommendation in an acting run) are named
            // in the docs; everything else must be exported.
            let documented = ["clasp_recommendations_total"];
            assert!(
                families.contains(&family) || documented.contains(&family),
                "Grafana queries `{family}`, which /metrics does not export"
            );
        }
    }
}

fn collect_exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match x.as_str() {
                    Some(e) if k == "expr" || k == "query" => out.push(e.to_string()),
                    _ => collect_exprs(x, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_exprs(x, out)),
        _ => {}
    }
}

/// `promtool check rules` on one recording rule per query: whether it accepted them.
fn promtool_parses(queries: &[String]) -> Option<(bool, String)> {
    let promtool = tool(&["promtool"], "CLASP_REQUIRE_PROMTOOL", "prometheus")?;
    // JSON strings are YAML strings.
    let mut rules = String::from("groups:\n  - name: grafana\n    rules:\n");
    for (i, q) in queries.iter().enumerate() {
        let expr = serde_json::Value::String(q.clone()).to_string();
        rules += &format!("      - record: query_{i}\n        expr: {expr}\n");
    }
    let path = std::env::temp_dir().join(format!("clasp-grafana-{}.yml", std::process::id()));
    std::fs::write(&path, rules).unwrap();
    let out = Command::new(promtool).args(["check", "rules"]).arg(&path).output().unwrap();
    let _ = std::fs::remove_file(&path);
    let report =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    Some((out.status.success(), report))
}

#[test]
fn the_grafana_queries_are_valid_promql() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("deploy/grafana/clasp.json")).unwrap();
    let dashboard: serde_json::Value = serde_json::from_str(&text).unwrap();
    // The panels' queries (the `job` variable's `label_values(...)` is Grafana's, not PromQL).
    let mut exprs = Vec::new();
    collect_exprs(&dashboard["panels"], &mut exprs);
    assert!(exprs.len() >= 20, "{} queries", exprs.len());
    // Grafana's variables, as Grafana substitutes them before querying.
    let queries: Vec<String> = exprs
        .iter()
        .map(|e| e.replace("$__rate_interval", "1m").replace("$job", "clasp"))
        .collect();
    assert!(queries.iter().all(|q| !q.contains('$')), "a variable left: {queries:?}");
    let Some((ok, report)) = promtool_parses(&queries) else { return };
    assert!(ok, "promtool check rules on the Grafana queries:\n{report}");
    // The check can fail: a query with a bracket missing is refused.
    let broken = vec!["sum by (operator (clasp_operator_busy_ratio)".to_string()];
    let (ok, report) = promtool_parses(&broken).unwrap();
    assert!(!ok && report.contains("parse error"), "promtool accepted {broken:?}:\n{report}");
}

#[test]
fn the_prometheus_scrape_config_is_valid_and_sends_the_admin_token() {
    let Some(promtool) = tool(&["promtool"], "CLASP_REQUIRE_PROMTOOL", "prometheus") else {
        return;
    };
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let config = std::fs::read_to_string(root.join("deploy/prometheus/prometheus.yml")).unwrap();
    // The scrape carries the admin token as a bearer credential, read from a file.
    let file = config
        .lines()
        .find_map(|l| l.trim().strip_prefix("credentials_file:"))
        .expect("the scrape config names a credentials_file")
        .trim();
    assert!(config.contains("type: Bearer"), "{config}");
    let dir = std::env::temp_dir().join(format!("clasp-prometheus-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("prometheus.yml"), &config).unwrap();
    let check = || {
        let out = Command::new(&promtool)
            .args(["check", "config"])
            .arg(dir.join("prometheus.yml"))
            .output()
            .unwrap();
        let report = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), report)
    };
    // promtool reads the credentials: without the file the config is refused.
    let (ok, report) = check();
    assert!(!ok && report.contains(file), "promtool took a missing token file:\n{report}");
    std::fs::write(dir.join(file), clasp_wire::auth::admin_token(common::secret())).unwrap();
    let (ok, report) = check();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(ok, "{report}");
}

#[test]
fn recommend_mode_reports_its_decisions_in_the_metrics_and_the_api() {
    // The README's main job, shortened: 50 us per word on 2-slot workers, 700 requests/s.
    let mut pipeline = common::pipeline("wc.toml");
    let count = pipeline.operator_id("count").unwrap();
    pipeline.operators[count.index()].service = Some(clasp_core::pipeline::ServiceTime {
        micros: 50.0,
        mode: clasp_core::pipeline::ServiceMode::Sleep,
        per: clasp_core::pipeline::ServicePer::Record,
    });
    let run = Run {
        pipeline,
        workers: 1,
        rescales: Vec::new(),
        records: 12_000,
        batch: BATCH,
        rate: 700.0,
        policy: Policy::Clasp,
        mode: Mode::Recommend,
        checkpoint_every: None,
    };
    let (out, server, _) = run.run(|_, _, _| {});
    let recommended = &out.stats.recommendations;
    assert!(!recommended.is_empty(), "no decision reported");
    assert!(out.stats.scaling_events.is_empty() && out.summary.migrations.is_empty());
    let (_, text) = get(server.addr(), "/metrics");
    assert_eq!(sum(&text, "clasp_recommendations_total", ""), recommended.len() as f64);
    assert_eq!(samples(&text, "clasp_rescalings_total").count(), 0);
    let last = recommended.last().unwrap();
    assert_eq!(sample(&text, "clasp_workers_desired"), Some(f64::from(last.to_workers)));
    assert_eq!(sample(&text, "clasp_workers_active"), Some(1.0));
    assert!(text.contains("mode=\"recommend\""), "{text}");
    let (_, body) = get(server.addr(), "/api/v1/events?kind=recommendation");
    let events: serde_json::Value = serde_json::from_str(&body).unwrap();
    let got: Vec<(f64, u64)> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["time_s"].as_f64().unwrap(), e["to_workers"].as_u64().unwrap()))
        .collect();
    let expected: Vec<(f64, u64)> =
        recommended.iter().map(|r| (r.time_s, u64::from(r.to_workers))).collect();
    assert_eq!(got, expected);
    if let Some((ok, report)) = promtool(&text) {
        assert!(ok && report.trim().is_empty(), "promtool check metrics:\n{report}");
    }
}

#[test]
fn times_read_back_from_the_api_are_the_times_written() {
    // The events API is compared exactly with the run's own record: parsing must round-trip.
    for time_s in [4.513962786, 0.1 + 0.2, 2.463374398, 1e-7 / 3.0] {
        let text = serde_json::to_string(&time_s).unwrap();
        assert_eq!(serde_json::from_str::<f64>(&text).unwrap(), time_s, "{text}");
    }
}
