//! Theorem 1 of the Planner paper: a workflow cut across five devices and the cloud gives the
//! same results as the same workflow all in the cloud, on the same seeded trace — and both
//! match the independent reference implementation. Devices and cloud talk over real loopback
//! TCP; the cloud part runs on the elastic runtime with two workers.

mod common;

use clasp_edge::Mode;
use clasp_reference::{self as reference, Outcome};
use common::*;

/// One workflow at a time: each run starts a cluster and five devices on a 2-core machine.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `app` cut and all in the cloud on `count` records of seed `seed`, and checks both
/// against the reference and against each other.
fn equivalent(app: &str, spec: &str, count: u64, speed: f64) {
    let _one = clasp_core::sync::lock(&SERIAL);
    let p = clasp_core::spec::parse(spec, app).unwrap();
    let lines = clasp_apps::profile::generate(app, count, SEED).unwrap();
    let expected = reference::expected(app, &p, &lines).unwrap();
    let (cut, cut_results, cut_report) = run_embedded(&p, app, Mode::Cut, count, speed);
    let (all, all_results, all_report) = run_embedded(&p, app, Mode::AllCloud, count, speed);
    assert!(!sink_records(&expected).is_empty(), "{app}: the trace produces no result");
    reference::check_order_insensitive(app, &p, &expected, &all)
        .unwrap_or_else(|e| panic!("{app} all in the cloud vs reference: {e}"));
    reference::check_order_insensitive(app, &p, &expected, &cut)
        .unwrap_or_else(|e| panic!("{app} cut vs reference: {e}"));
    reference::check_order_insensitive(app, &p, &all, &cut)
        .unwrap_or_else(|e| panic!("{app} cut vs all in the cloud: {e}"));
    // The comparison `clasp bench edge` reports: the two runs' records and state, exactly.
    assert_eq!(all_results.difference(&cut_results), None, "{app}");
    // Both runs read the whole trace, and the cut sends less over the links.
    let read = |r: &clasp_edge::embedded::EmbeddedReport| -> u64 {
        r.devices.iter().map(|d| d.records_read).sum()
    };
    let total: u64 = lines.iter().map(|(_, l)| l.len() as u64).sum();
    assert_eq!((read(&cut_report), read(&all_report)), (total, total), "{app}");
    assert_eq!(all_report.cloud.items(), total, "{app}: all in the cloud sends every record");
    assert!(cut_report.cloud.items() < total, "{app}: the cut sends fewer records");
    assert!(cut_report.cloud.bytes() < all_report.cloud.bytes(), "{app}: and fewer bytes");
    assert_eq!(cut_report.devices.len(), 5);
}

fn sink_records(o: &Outcome) -> Vec<&(String, String)> {
    o.sinks.values().flatten().collect()
}

#[test]
fn w1_cut_across_five_devices_equals_all_in_cloud() {
    equivalent("taxi-w1", clasp_apps::spec_text("taxi-w1").unwrap(), 10_000, 0.0);
}

#[test]
fn w2_cut_across_five_devices_equals_all_in_cloud() {
    // Night rides (20:00 on) begin after ride 28,800: 60,000 events reach them.
    equivalent("taxi-w2", clasp_apps::spec_text("taxi-w2").unwrap(), 60_000, 0.0);
}

#[test]
fn w3_cut_across_five_devices_equals_all_in_cloud_window_by_window() {
    // The cut streams carry the events' times and each device's watermark; the cloud's windows
    // close as the slowest device's watermark passes them, whatever order the network merges
    // the five streams in, and every one of them is compared.
    equivalent("taxi-w3", clasp_apps::spec_text("taxi-w3").unwrap(), 20_000, 6.0);
}

#[test]
fn w3_unthrottled_cut_equals_all_in_cloud_window_by_window() {
    // As fast as the devices go: items of 4,096 events, devices far apart in event time, the
    // watermark closing windows while others still fill.
    equivalent("taxi-w3", clasp_apps::spec_text("taxi-w3").unwrap(), 40_000, 0.0);
}
