//! Word count on a real cluster (loopback TCP) gives exactly the reference counts.

mod common;

use clasp_core::SourceId;
use common::*;
use std::sync::Arc;

fn run_wc(workers: u32, batch_size: u32, lines: usize) {
    let p = pipeline("wc.toml");
    let text = Arc::new(corpus(7, lines));
    let mut cluster = start(&p, workers, batch_size, threads());
    let summary = cluster
        .planner
        .run(vec![unthrottled(&text, SourceId(0))], None, |_| {}, |_, _| Ok(()))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut dump = Vec::new();
    cluster.planner.dump_state(&mut dump).unwrap();
    cluster.shutdown().unwrap();

    let expected = reference_word_count(&text);
    let got = parse_dump(&dump);
    let counts: std::collections::BTreeMap<String, u64> =
        got["count"].iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap())).collect();
    assert_eq!(counts.len(), expected.len());
    assert_eq!(counts, expected);
    assert_eq!(summary.input_records, lines as u64);
    assert_eq!(summary.completed, summary.input_requests);
    let words: u64 = expected.values().sum();
    assert_eq!(summary.operators[1].records, words);
    assert_eq!(summary.operators[0].records, lines as u64);
    if workers > 1 {
        assert!(summary.remote_requests > 0 && summary.local_requests > 0);
    } else {
        assert_eq!(summary.remote_requests, 0);
    }
}

#[test]
fn wc_on_three_workers_matches_the_reference_batch_256() {
    run_wc(3, 256, 20_000);
}

#[test]
fn wc_on_three_workers_matches_the_reference_batch_1() {
    run_wc(3, 1, 3_000);
}

#[test]
fn wc_on_one_worker_matches_the_reference() {
    run_wc(1, 64, 5_000);
}
