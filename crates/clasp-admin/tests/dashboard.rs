//! The dashboard in headless Chromium against a running cluster of 20 operators rescaled to
//! 10 workers: after the page's scripts ran, the graph shows every operator with its shares,
//! every chart has data points and a mark at the rescale, and the events table lists it.

mod common;

use clasp_plan::Policy;
use clasp_plan::autoscaler::Mode;
use clasp_runtime::job::RescaleAt;
use common::{Run, tool};
use std::process::{Child, Command, Stdio};

const CHARTS: [&str; 5] =
    ["chart-rate", "chart-latency", "chart-workers", "chart-alpha-beta", "chart-gamma-capacity"];

/// Chromium loading `url`, printing the DOM after its scripts ran for 4 s of virtual time.
fn dump_dom(chromium: &std::path::Path, profile: &std::path::Path, url: &str) -> Child {
    Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-dev-shm-usage",
            "--window-size=1400,1500",
            "--virtual-time-budget=4000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromium starts")
}

/// `attr="VALUE"` of the element whose id is `id`.
fn attribute(dom: &str, id: &str, attr: &str) -> Option<String> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let start = dom[..at].rfind('<')?;
    let end = at + dom[at..].find('>')?;
    let tag = &dom[start..end];
    let from = tag.find(&format!("{attr}=\""))? + attr.len() + 2;
    Some(tag[from..from + tag[from..].find('"')?].to_string())
}

#[test]
fn the_dashboard_shows_every_operator_and_charts_with_data() {
    let Some(chromium) =
        tool(&["chromium", "chromium-browser"], "CLASP_REQUIRE_BROWSER", "chromium")
    else {
        return;
    };
    let pipeline = common::wide_pipeline(20);
    let names: Vec<String> = pipeline.operators.iter().map(|o| o.name.clone()).collect();
    let run = Run {
        pipeline,
        workers: 1,
        rescales: vec![RescaleAt { after_requests: 100, workers: 10 }],
        records: 16_000,
        batch: 16,
        rate: 250.0,
        policy: Policy::Static,
        mode: Mode::Act,
        checkpoint_every: None,
    };
    let profile = std::env::temp_dir().join(format!("clasp-dashboard-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&profile);
    let mut browser = None;
    // Chromium starts once the cluster runs on 10 workers and the series has a few points; the
    // run goes on while the page loads.
    let (out, server, _) = run.run(|addr, interval, workers| {
        if interval >= 4 && workers == 10 && browser.is_none() {
            // The URL `clasp run` prints: the token once, exchanged for a cookie that the
            // page's own requests carry.
            let url = format!("http://{addr}/?token={}", common::token());
            browser = Some(dump_dom(&chromium, &profile, &url));
        }
    });
    assert_eq!(out.placement.workers, 10);
    let browser = browser.expect("the run went on for intervals on 10 workers");
    let dom = String::from_utf8(browser.wait_with_output().unwrap().stdout).unwrap();
    let _ = std::fs::remove_dir_all(&profile);
    drop(server);
    assert!(dom.contains("data-updates=\""), "the page's script never refreshed:\n{dom}");
    for name in &names {
        let node = format!("class=\"op\" data-operator=\"{name}\"");
        assert!(dom.contains(&node), "operator {name} missing from the graph");
    }
    let shares = dom.matches("class=\"share\"").count();
    assert!(shares >= names.len(), "{shares} share bars for {} operators", names.len());
    for id in ["0", "9"] {
        assert!(dom.contains(&format!("data-worker=\"{id}\"")), "no share on worker {id}");
    }
    for chart in CHARTS {
        let points: usize = attribute(&dom, chart, "data-points")
            .unwrap_or_else(|| panic!("{chart} has no data-points"))
            .parse()
            .unwrap();
        assert!(points >= 2, "{chart}: {points} data points");
        // The run's one rescale falls within every chart's time range.
        let marks: usize = attribute(&dom, chart, "data-marks")
            .unwrap_or_else(|| panic!("{chart} drew no event marks"))
            .parse()
            .unwrap();
        assert_eq!(marks, out.stats.scaling_events.len(), "{chart}: event marks");
    }
    let table = &dom[dom.find("id=\"events\"").expect("the events table")..];
    for e in &out.stats.scaling_events {
        let row = format!("<td>{} → {}</td>", e.from_workers, e.to_workers);
        assert!(table.contains(&row), "the events table lacks {row}");
    }
}
