//! The simulator against queueing theory (`clasp_bench::experiments::validate::queueing`):
//! Erlang C, Pollaczek–Khinchine, Little's law and the throughput cap.
//!
//! Every figure is printed (`cargo test -p clasp-bench --test queueing -- --nocapture`);
//! `clasp bench validate` reports the same checks.

use clasp_bench::experiments::validate::queueing::{
    Check, littles_law, single_queue, throughput_cap, waiting_times,
};
use clasp_sim::ServiceDist;

fn print(checks: &[Check]) {
    for c in checks {
        println!(
            "{:<34} c {:>2} load {:.2}: {:>10.2} vs {:>10.2} {} ({:.2} %)",
            c.name,
            c.slots,
            c.load,
            c.simulated,
            c.exact,
            c.unit,
            100.0 * c.error
        );
    }
}

#[test]
fn mean_wait_matches_erlang_c_and_pollaczek_khinchine() {
    // Four independent runs of 500,000 customers each per M/M/c row.
    let checks = waiting_times(500_000.0, 4);
    print(&checks);
    assert_eq!(checks.len(), 8);
    for c in &checks {
        assert!(c.error < 0.05, "{c:?}");
    }
}

#[test]
fn littles_law_holds() {
    let checks = littles_law(200_000.0);
    print(&checks);
    for c in &checks {
        // The histogram keeps 3 significant digits of each latency.
        assert!(c.error < 0.01, "{c:?}");
    }
    // With no network delay, chains in flight are exactly the requests at the worker.
    let s = single_queue(1, 0.7, ServiceDist::Exponential, 50_000.0, 3);
    assert!((s.mean_at_workers - s.mean_in_flight).abs() / s.mean_in_flight < 1e-6);
}

#[test]
fn throughput_caps_at_slots_over_service_time() {
    let checks = throughput_cap(50_000.0);
    print(&checks);
    for c in &checks {
        assert!(c.error < 0.03, "{c:?}");
    }
}

#[test]
fn same_seed_same_run() {
    let a = single_queue(10, 0.8, ServiceDist::LogNormal { cv: 0.7 }, 20_000.0, 77);
    let b = single_queue(10, 0.8, ServiceDist::LogNormal { cv: 0.7 }, 20_000.0, 77);
    assert_eq!(serde_json::to_string(&a).unwrap(), serde_json::to_string(&b).unwrap());
    let c = single_queue(10, 0.8, ServiceDist::LogNormal { cv: 0.7 }, 20_000.0, 78);
    assert_ne!(a.mean_queue_wait_us, c.mean_queue_wait_us);
}
