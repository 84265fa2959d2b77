//! SYN's ten no-op operators each process every input record exactly once, whatever the batch
//! size and placement.

mod common;

use clasp_core::SourceId;
use common::*;
use std::sync::Arc;

fn run_syn(batch: u32, records: usize) {
    let p = pipeline("syn.toml");
    let lines: Arc<Vec<Vec<u8>>> =
        Arc::new((0..records).map(|i| format!("record-{i}").into_bytes()).collect());
    let mut c = start(&p, 3, batch, threads());
    let s =
        c.planner.run(vec![unthrottled(&lines, SourceId(0))], None, |_| {}, |_, _| Ok(())).unwrap();
    c.shutdown().unwrap();
    for op in &s.operators {
        assert_eq!(op.records, records as u64, "operator {}", op.name);
    }
    // Every operator but the last forwards every record.
    let emitted: Vec<u64> = s.operators.iter().map(|o| o.emitted).collect();
    assert!(emitted.iter().all(|e| *e == records as u64));
    assert_eq!(s.completed, s.input_requests);
    assert_eq!(s.input_requests, records.div_ceil(batch as usize) as u64);
}

#[test]
fn syn_counts_with_batch_1() {
    run_syn(1, 2_000);
}

#[test]
fn syn_counts_with_batch_256() {
    run_syn(256, 20_000);
}
