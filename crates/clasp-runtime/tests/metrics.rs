//! The metrics monitor reports chained requests as local or remote exactly as routed, and δ_w
//! as the number of distinct remote workers reached.

mod common;

use clasp_core::SourceId;
use clasp_runtime::cluster::{Cluster, contiguous_keys};
use clasp_runtime::planner::DiscardSink;
use clasp_runtime::routing::RoutingPlan;
use common::*;
use std::sync::Arc;

/// Runs WC with `split` and `count` placed as given; returns the summary and, per worker, the
/// largest δ it reported while it dispatched chained requests.
fn run(split_on: u32, count_on: u32) -> (clasp_runtime::planner::stats::RunSummary, Vec<u32>) {
    let p = pipeline("wc.toml");
    let text = Arc::new(corpus(3, 4_000));
    let mut c =
        Cluster::start(p.clone(), config(32), Box::new(DiscardSink), threads(), 2, 4).unwrap();
    let placement =
        placement_of(&p, 2, &[("split", &[(split_on, 1.0, 2)]), ("count", &[(count_on, 1.0, 2)])]);
    let keys = contiguous_keys(&p, &placement, 64);
    c.planner.install(RoutingPlan { epoch: 1, placement, keys }).unwrap();
    let summary =
        c.planner.run(vec![unthrottled(&text, SourceId(0))], None, |_| {}, |_, _| Ok(())).unwrap();
    let mut delta = vec![0u32; 2];
    for (_, r) in c.planner.reports.all() {
        delta[r.worker.index()] = delta[r.worker.index()].max(r.destinations);
    }
    c.shutdown().unwrap();
    (summary, delta)
}

#[test]
fn split_and_count_on_different_workers_are_all_remote() {
    let (s, delta) = run(0, 1);
    let count = &s.operators[1];
    assert_eq!(s.local_requests, 0);
    assert_eq!(s.remote_requests, count.processed, "every count request crossed");
    assert_eq!(delta, [1, 0], "split's worker reaches one remote worker, count's none");
    for op in &s.operators {
        assert!(op.mean_exec_us > 0.0, "{} reports no execution time", op.name);
    }
}

#[test]
fn split_and_count_on_one_worker_are_all_local() {
    let (s, delta) = run(1, 1);
    assert_eq!(s.remote_requests, 0);
    assert_eq!(s.local_requests, s.operators[1].processed);
    assert_eq!(delta, [0, 0]);
}
