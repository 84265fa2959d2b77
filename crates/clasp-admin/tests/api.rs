//! The JSON API, one test per endpoint, against a real elastic run (1 → 3 → 2 workers) whose
//! output and input give the expected values; and the 4xx answers to bad requests.

mod common;

use clasp_admin::{Access, AdminServer};
use clasp_plan::Policy;
use clasp_plan::autoscaler::Mode;
use clasp_runtime::job::{JobOutput, RescaleAt};
use clasp_runtime::observe::Observatory;
use common::{Run, get, request};
use serde_json::Value;
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

const RECORDS: u64 = 6_400;

struct Done {
    out: JobOutput,
    server: AdminServer,
    intervals: u64,
}

fn done() -> &'static Done {
    static DONE: OnceLock<Done> = OnceLock::new();
    DONE.get_or_init(|| {
        let run = Run {
            pipeline: common::pipeline("wc.toml"),
            workers: 1,
            rescales: vec![
                RescaleAt { after_requests: 100, workers: 3 },
                RescaleAt { after_requests: 250, workers: 2 },
            ],
            records: RECORDS,
            batch: 16,
            rate: 400.0,
            policy: Policy::Static,
            mode: Mode::Act,
            checkpoint_every: None,
        };
        let mut intervals = 0;
        let (out, server, _) = run.run(|_, n, _| intervals = n);
        Done { out, server, intervals }
    })
}

fn json(path: &str) -> Value {
    let (status, body) = get(done().server.addr(), path);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap()
}

fn error(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let (status, body) = request(addr, method, path);
    let v: Value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("{path}: {body}"));
    (status, v["error"].as_str().unwrap().to_string())
}

#[test]
fn pipeline_lists_the_specs_operators_and_streams() {
    let p = common::pipeline("wc.toml");
    let v = json("/api/v1/pipeline");
    let names: Vec<&str> =
        v["operators"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(names, p.operators.iter().map(|o| o.name.as_str()).collect::<Vec<_>>());
    assert_eq!(v["streams"].as_array().unwrap().len(), p.streams.len());
    assert_eq!(v["topological"].as_array().unwrap().len(), p.operators.len());
    assert_eq!(v["operators"][1]["stateful"], true);
}

#[test]
fn placement_is_the_runs_final_placement() {
    let d = done();
    let v = json("/api/v1/placement");
    assert_eq!(v["workers"], d.out.placement.workers);
    assert_eq!(v["epoch"], 1 + d.out.stats.scaling_events.len() as u64);
    for (o, placed) in v["operators"].as_array().unwrap().iter().zip(&d.out.placement.operators) {
        let shares = o["shares"].as_array().unwrap();
        let fraction: f64 = shares.iter().map(|s| s["fraction"].as_f64().unwrap()).sum();
        assert!((fraction - 1.0).abs() < 1e-9, "{o}");
        let instances: u64 = placed.shares.iter().map(|s| u64::from(s.instances)).sum();
        assert_eq!(o["parallelism"], instances);
        let groups: u64 = shares.iter().map(|s| s["key_groups"].as_u64().unwrap()).sum();
        let keyed = o["operator"] == "count";
        assert_eq!(
            groups,
            if keyed { u64::from(v["key_groups"].as_u64().unwrap() as u32) } else { 0 }
        );
    }
}

#[test]
fn workers_hold_every_distinct_word_once() {
    let d = done();
    let v = json("/api/v1/workers");
    let workers = v.as_array().unwrap();
    let ids: Vec<u64> = workers.iter().map(|w| w["id"].as_u64().unwrap()).collect();
    assert_eq!(ids, (0..u64::from(d.out.placement.workers)).collect::<Vec<_>>());
    assert!(workers.iter().all(|w| !w["addr"].as_str().unwrap().is_empty()));
    let def = clasp_apps::inputs::source("wc", None).unwrap();
    let mut reader = def.generator(RECORDS, 7);
    let (mut line, mut words) = (Vec::new(), HashSet::new());
    while reader.next_line(&mut line).unwrap() {
        clasp_apps::wc::for_each_word(&line, |w| {
            words.insert(w.to_vec());
        });
    }
    let keys: u64 = workers.iter().map(|w| w["state_keys"].as_u64().unwrap()).sum();
    assert_eq!(keys, words.len() as u64);
}

#[test]
fn operators_add_up_to_the_summary() {
    let d = done();
    let v = json("/api/v1/operators");
    for o in &d.out.summary.operators {
        let rows: Vec<&Value> =
            v.as_array().unwrap().iter().filter(|r| r["operator"] == o.name.as_str()).collect();
        let total = |k: &str| rows.iter().map(|r| r[k].as_u64().unwrap()).sum::<u64>();
        assert_eq!(
            (total("requests_in"), total("records_out")),
            (o.processed, o.emitted),
            "{}",
            o.name
        );
    }
    let split_out: u64 = v
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["operator"] == "split")
        .map(|r| r["requests_out"].as_u64().unwrap())
        .sum();
    // A migration re-routes queued requests, splitting a batch whose keys now have several
    // owners: count may run more requests than split sent, but never fewer, and every record
    // split emitted is one count received.
    let (split, count) = (&d.out.summary.operators[0], &d.out.summary.operators[1]);
    assert!(split_out > 0 && split_out <= count.processed, "split sent {split_out}: {count:?}");
    assert_eq!(split.emitted, count.records, "split's records are count's");
}

#[test]
fn coefficients_have_a_sample_per_interval_and_since_filters() {
    let d = done();
    let v = json("/api/v1/coefficients");
    let history = v["history"].as_array().unwrap();
    // One sample per interval the autoscaler stepped (not those spent rescaling).
    assert_eq!(history.len(), d.out.stats.coefficients_over_time.len());
    assert!(history.len() as u64 <= d.intervals && history.len() >= 2);
    assert!(v["current"]["capacity"].as_f64().unwrap() > 0.0);
    let mid = history[history.len() / 2]["time_s"].as_f64().unwrap();
    let later = json(&format!("/api/v1/coefficients?since={mid}"));
    let expected = history.iter().filter(|h| h["time_s"].as_f64().unwrap() > mid).count();
    assert_eq!(later["history"].as_array().unwrap().len(), expected);
}

#[test]
fn events_are_the_runs_rescalings() {
    let d = done();
    let v = json("/api/v1/events");
    let events = v.as_array().unwrap();
    let expected: Vec<(u64, u64)> = d
        .out
        .stats
        .scaling_events
        .iter()
        .map(|e| (u64::from(e.from_workers), u64::from(e.to_workers)))
        .collect();
    assert_eq!(expected.len(), 2, "the two requested rescales");
    let got: Vec<(u64, u64)> = events
        .iter()
        .map(|e| (e["from_workers"].as_u64().unwrap(), e["to_workers"].as_u64().unwrap()))
        .collect();
    assert_eq!(got, expected);
    assert!(events.iter().all(|e| e["kind"] == "rescale"
        && e["reason"] == "requested"
        && e["planner_ms"].as_f64().unwrap() > 0.0));
    assert_eq!(json("/api/v1/events?kind=rescale").as_array().unwrap().len(), 2);
    assert_eq!(json("/api/v1/events?kind=recommendation").as_array().unwrap().len(), 0);
    let first = events[0]["time_s"].as_f64().unwrap();
    assert_eq!(json(&format!("/api/v1/events?since={first}")).as_array().unwrap().len(), 1);
}

#[test]
fn autoscaler_reports_its_settings() {
    let v = json("/api/v1/autoscaler");
    assert_eq!((v["policy"].as_str(), v["mode"].as_str()), (Some("static"), Some("act")));
    assert_eq!(v["desired_workers"], 2);
    assert_eq!(v["rescaling"], false);
}

#[test]
fn counters_match_the_input_and_the_summary() {
    let d = done();
    let v = json("/api/v1/counters");
    let s = &d.out.summary;
    assert_eq!(v["input_records"], RECORDS);
    assert_eq!(v["input_requests"], s.input_requests);
    assert_eq!(v["completed"], s.completed);
    assert_eq!(
        (v["local_requests"].as_u64(), v["remote_requests"].as_u64()),
        (Some(s.local_requests), Some(s.remote_requests))
    );
    assert_eq!(v["rescalings"], 2);
    assert_eq!(v["in_flight"], 0);
    assert_eq!(v["finished"], true);
}

#[test]
fn series_has_a_point_per_interval() {
    let d = done();
    let v = json("/api/v1/series");
    let points = v.as_array().unwrap();
    assert_eq!(points.len() as u64, d.intervals);
    let t: Vec<f64> = points.iter().map(|p| p["t"].as_f64().unwrap()).collect();
    assert!(t.windows(2).all(|w| w[0] < w[1]));
    let total: f64 = points.iter().map(|p| p["input_rate"].as_f64().unwrap() * 0.2).sum();
    assert!(total > 0.0);
    assert_eq!(
        json(&format!("/api/v1/series?since={}", t[1])).as_array().unwrap().len(),
        t.len() - 2
    );
}

/// Every key of `v`, nested ones included.
fn keys(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                out.push(k.clone());
                keys(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| keys(x, out)),
        _ => {}
    }
}

#[test]
fn the_documented_schema_names_every_field_of_every_endpoint() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/admin-api.md")).unwrap();
    for (endpoint, _) in clasp_admin::api::ENDPOINTS {
        let heading = format!("### `GET /api/v1/{endpoint}");
        let at = doc.find(&heading).unwrap_or_else(|| panic!("docs/admin-api.md lacks {heading}"));
        let rest = &doc[at + heading.len()..];
        let section = &rest[..rest.find("\n#").unwrap_or(rest.len())];
        let mut fields = Vec::new();
        keys(&json(&format!("/api/v1/{endpoint}")), &mut fields);
        assert!(!fields.is_empty(), "{endpoint} answered no fields");
        for f in fields {
            let named = [format!("`{f}`"), format!("\"{f}\"")];
            assert!(
                named.iter().any(|n| section.contains(n.as_str())),
                "docs/admin-api.md, {endpoint}: field `{f}` is not documented"
            );
        }
    }
}

#[test]
fn bad_requests_get_4xx_with_a_message() {
    let addr = done().server.addr();
    let cases = [
        ("GET", "/api/v1/nope", 404, "no endpoint /api/v1/nope"),
        ("GET", "/api/v2/pipeline", 404, "no endpoint /api/v2/pipeline"),
        ("GET", "/api/v1/series?since=soon", 400, "`since=soon` is not a number"),
        ("GET", "/api/v1/series?since=inf", 400, "`since=inf` is not a number"),
        ("GET", "/api/v1/events?kind=crash", 400, "`kind=crash` is not an event kind"),
        ("GET", "/api/v1/workers?verbose=1", 400, "unknown parameter `verbose`"),
        ("POST", "/api/v1/counters", 405, "read-only: use GET, not POST"),
        ("DELETE", "/api/v1/placement", 405, "not DELETE"),
    ];
    for (method, path, status, message) in cases {
        let (got, text) = error(addr, method, path);
        assert_eq!(got, status, "{method} {path}: {text}");
        assert!(text.contains(message), "{method} {path}: `{text}` lacks `{message}`");
    }
}

#[test]
fn health_metrics_and_the_dashboard_are_served() {
    let addr = done().server.addr();
    assert_eq!(get(addr, "/healthz"), (200, "ok\n".into()));
    assert_eq!(get(addr, "/readyz"), (200, "ready\n".into()));
    let (status, page) = get(addr, "/");
    assert_eq!(status, 200);
    for asset in ["app.js", "app.css", "uPlot.iife.min.js", "uPlot.min.css"] {
        assert!(page.contains(&format!("/assets/{asset}")), "the page loads {asset}");
        let (status, body) = get(addr, &format!("/assets/{asset}"));
        assert!(status == 200 && !body.is_empty(), "{asset}");
    }
    assert_eq!(get(addr, "/assets/missing.js").0, 404);
}

#[test]
fn before_a_placement_the_server_is_live_but_not_ready() {
    let p = common::pipeline("wc.toml");
    let obs = Arc::new(Observatory::new(&p, "clasp", Mode::Recommend));
    let server =
        AdminServer::start("127.0.0.1:0", obs, Access::Token(common::secret().clone())).unwrap();
    let addr = server.addr();
    assert_eq!(get(addr, "/healthz").0, 200);
    let (status, body) = get(addr, "/readyz");
    assert_eq!((status, body.as_str()), (503, "not ready: no placement installed\n"));
    let (status, text) = error(addr, "GET", "/api/v1/placement");
    assert_eq!((status, text.as_str()), (503, "no placement is installed yet"));
    let (_, body) = get(addr, "/api/v1/autoscaler");
    assert!(body.contains("\"mode\":\"recommend\""), "{body}");
    server.stop().unwrap();
}
