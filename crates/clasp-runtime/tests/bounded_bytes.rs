//! Memory bounded in bytes: input requests are cut by bytes as well as records, a record no
//! frame could carry is skipped and counted (the run goes on), and a run with a duration stops
//! at it — dropping what is queued, waiting a bounded grace for what is in flight — and says
//! how much was left.

mod common;

use clasp_core::SourceId;
use clasp_core::pipeline::{ServiceMode, ServicePer, ServiceTime};
use clasp_runtime::cluster::{Cluster, contiguous_keys, spread};
use clasp_runtime::planner::DiscardSink;
use clasp_runtime::routing::RoutingPlan;
use clasp_runtime::wire::DEFAULT_MAX_FRAME;
use std::sync::Arc;
use std::time::Duration;

fn cluster(p: &clasp_core::Pipeline, config: clasp_runtime::planner::PlannerConfig) -> Cluster {
    let c =
        Cluster::start(p.clone(), config, Box::new(DiscardSink), common::threads(), 2, 4).unwrap();
    let placement = spread(p, 2, 4);
    let keys = contiguous_keys(p, &placement, 64);
    c.planner.install(RoutingPlan { epoch: 1, placement, keys }).unwrap();
    c
}

/// A line of `words` words of `len` letters each, the `i`th of the input.
fn line(i: usize, words: usize, len: usize) -> Vec<u8> {
    (0..words)
        .map(|w| {
            let letter = (b'a' + ((i * 7 + w) % 26) as u8) as char;
            format!("{}{letter}", "x".repeat(len - 1))
        })
        .collect::<Vec<_>>()
        .join(" ")
        .into_bytes()
}

#[test]
fn requests_are_cut_by_bytes_and_a_record_beyond_the_frame_limit_is_skipped() {
    let p = common::pipeline("wc.toml");
    // 256 lines of 288 KB: 72 MB, more than a frame holds in one request of 256 records.
    let mut lines: Vec<Vec<u8>> = (0..256).map(|i| line(i, 4, 72 << 10)).collect();
    let huge = DEFAULT_MAX_FRAME as usize + 1;
    lines.insert(100, vec![b'z'; huge]);
    let kept: Vec<Vec<u8>> = lines.iter().filter(|l| l.len() < huge).cloned().collect();
    let total: usize = kept.iter().map(Vec::len).sum();
    let config = common::config(256);
    let max_request = config.max_request_bytes;
    let mut c = cluster(&p, config);
    let text = Arc::new(lines);
    let summary = c
        .planner
        .run(vec![common::unthrottled(&text, SourceId(0))], None, |_| {}, |_, _| Ok(()))
        .unwrap();
    assert_eq!(summary.oversized_records, 1);
    assert_eq!(summary.input_records, kept.len() as u64);
    assert!(summary.input_requests as usize >= total.div_ceil(max_request), "{summary:?}");
    assert_eq!(summary.completed, summary.input_requests);
    let mut dump = Vec::new();
    c.planner.dump_state(&mut dump).unwrap();
    assert_eq!(common::counts(&dump), common::reference_word_count(&kept));
    c.shutdown().unwrap();
}

#[test]
fn a_run_stops_at_its_duration_and_accounts_for_what_was_left() {
    let mut p = common::pipeline("wc.toml");
    // 2 ms per word, sleeping: the input is far more than the cluster can do in the duration.
    for o in &mut p.operators {
        o.service = Some(ServiceTime {
            micros: 2_000.0,
            mode: ServiceMode::Sleep,
            per: ServicePer::Record,
        });
    }
    let mut config = common::config(16);
    config.drain_grace = Duration::from_millis(500);
    config.stop_at_duration = true;
    let mut c = cluster(&p, config);
    let text = Arc::new(common::corpus(9, 20_000));
    let summary = c
        .planner
        .run(
            vec![common::unthrottled(&text, SourceId(0))],
            Some(Duration::from_millis(300)),
            |_| {},
            |_, _| Ok(()),
        )
        .unwrap();
    // Every request that entered is completed, dropped from the queue, or abandoned in flight.
    let left = summary.dropped_requests + summary.abandoned_chains;
    assert!(left > 0, "{summary:?}");
    assert!(summary.completed < summary.input_requests);
    assert_eq!(summary.completed + left, summary.input_requests, "{summary:?}");
    c.pool.kill_all();
}
