//! The metrics monitor: every interval, or when the planner asks, sums the executors'
//! counters into a [`WorkerReport`] (CLASP Table 2) and sends it to the planner.

use super::WorkerShared;
use crate::metrics::{OpReport, WorkerReport};
use crate::wire::Message;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Running totals, to turn counters into per-interval deltas.
#[derive(Default)]
struct Totals {
    ops: Vec<[u64; 8]>,
    edges: Vec<u64>,
    edge_records: Vec<u64>,
    local: u64,
    remote: u64,
    /// Per operator, records per key group.
    groups: Vec<Vec<u64>>,
}

fn totals(shared: &WorkerShared) -> Totals {
    let n_ops = shared.pipeline.operators.len();
    let mut t = Totals {
        ops: vec![[0; 8]; n_ops],
        edges: vec![0; shared.pipeline.streams.len()],
        edge_records: vec![0; shared.pipeline.streams.len()],
        groups: shared
            .counters
            .first()
            .map_or_else(Vec::new, |c| c.groups.iter().map(|g| vec![0; g.len()]).collect()),
        ..Totals::default()
    };
    for c in &shared.counters {
        for (acc, g) in t.groups.iter_mut().zip(c.groups.iter()) {
            for (a, x) in acc.iter_mut().zip(g.iter()) {
                *a += x.load(Ordering::Relaxed);
            }
        }
        for (o, oc) in c.ops.iter().enumerate() {
            let v = [
                &oc.processed,
                &oc.records,
                &oc.emitted,
                &oc.exec_ns,
                &oc.wait_ns,
                &oc.touched,
                &oc.timed,
                &oc.exec_sq,
            ];
            for (acc, x) in t.ops[o].iter_mut().zip(v) {
                *acc += x.load(Ordering::Relaxed);
            }
        }
        for (acc, e) in t.edges.iter_mut().zip(c.edges.iter()) {
            *acc += e.load(Ordering::Relaxed);
        }
        for (acc, e) in t.edge_records.iter_mut().zip(c.edge_records.iter()) {
            *acc += e.load(Ordering::Relaxed);
        }
        t.local += c.local.load(Ordering::Relaxed);
        t.remote += c.remote.load(Ordering::Relaxed);
    }
    t
}

/// Distinct remote workers reached since the last call (clears the executors' bits).
fn take_destinations(shared: &WorkerShared) -> u32 {
    let words = shared.counters.first().map_or(0, |c| c.destinations.len());
    (0..words)
        .map(|i| {
            shared
                .counters
                .iter()
                .fold(0u64, |acc, c| acc | c.destinations[i].swap(0, Ordering::Relaxed))
        })
        .map(u64::count_ones)
        .sum()
}

/// Starts the monitor thread.
pub fn spawn(shared: Arc<WorkerShared>) -> JoinHandle<()> {
    std::thread::Builder::new()
        .name(format!("w{}-monitor", shared.me))
        .spawn(move || run(&shared))
        .expect("spawn monitor")
}

fn run(shared: &WorkerShared) {
    let interval = Duration::from_millis(shared.settings.interval_ms.max(10));
    let sample_every = (interval / 20).max(Duration::from_millis(1));
    let mut prev = totals(shared);
    let mut start = Instant::now();
    let mut second = Instant::now();
    let (mut queue_sum, mut samples) = (0.0, 0u32);
    // Whether the planner asked for the last report: while it paces the reports, one of our
    // own would only split its interval in two.
    let mut paced = false;
    take_destinations(shared);
    while !shared.stopping.load(Ordering::Acquire) {
        std::thread::sleep(sample_every);
        if second.elapsed() >= Duration::from_secs(1) {
            second = Instant::now();
            super::fanout::roll_second(shared);
        }
        queue_sum += shared.sched.len() as f64;
        samples += 1;
        let requested = shared.report_now.swap(0, Ordering::AcqRel);
        let due = if paced { interval + interval / 2 } else { interval };
        if start.elapsed() < due && requested == 0 {
            continue;
        }
        let now = totals(shared);
        let elapsed = start.elapsed().as_secs_f64();
        let mut report = build(shared, &prev, &now, elapsed, queue_sum / f64::from(samples.max(1)));
        report.requested = requested;
        paced = requested != 0;
        shared.planner.send(Message::Report(Box::new(report)));
        prev = now;
        start = Instant::now();
        queue_sum = 0.0;
        samples = 0;
    }
}

fn build(
    shared: &WorkerShared,
    prev: &Totals,
    now: &Totals,
    interval_s: f64,
    queue: f64,
) -> WorkerReport {
    let rejects = super::lock(&shared.rejects).clone();
    let ops: Vec<OpReport> = (0..now.ops.len())
        .map(|o| {
            let d = |i: usize| now.ops[o][i] - prev.ops[o][i];
            // Totals over every request, from the timed sample's means; an interval whose
            // requests were all untimed takes the means of the whole run so far.
            let per_request = |i: usize| match (d(6), now.ops[o][6]) {
                (0, 0) => 0.0,
                (0, all) => now.ops[o][i] as f64 / all as f64,
                (timed, _) => d(i) as f64 / timed as f64,
            };
            OpReport {
                processed: d(0),
                records: d(1),
                emitted: d(2),
                exec_us: per_request(3) * d(0) as f64 / 1e3,
                exec_sq_us2: per_request(7) * d(0) as f64,
                wait_us: per_request(4) * d(0) as f64 / 1e3,
                touched: d(5),
                state_keys: if shared.pipeline.operators[o].stateful {
                    shared.stores[o].key_count() as u64
                } else {
                    0
                },
                rejects: rejects[o].iter().map(|(r, n)| (r.to_owned(), n)).collect(),
                dispatch_us: 0.0,
                groups: group_deltas(prev.groups.get(o), now.groups.get(o)),
            }
        })
        .collect();
    let mut report = WorkerReport {
        worker: shared.me,
        epoch: shared.epoch.load(Ordering::Acquire),
        interval_s,
        slots: shared.counters.len() as u32,
        queue,
        queue_now: shared.sched.len() as u64,
        local: now.local - prev.local,
        remote: now.remote - prev.remote,
        destinations: take_destinations(shared),
        edges: now.edges.iter().zip(&prev.edges).map(|(a, b)| a - b).collect(),
        edge_records: now.edge_records.iter().zip(&prev.edge_records).map(|(a, b)| a - b).collect(),
        ops,
        saturated: false,
        requested: 0,
    };
    report.saturated = queue > shared.settings.saturation_queue
        && report.mean_wait_us() / 1e3 > shared.settings.saturation_wait_ms;
    report
}

/// Records per key group between two totals, for the groups that had any.
fn group_deltas(prev: Option<&Vec<u64>>, now: Option<&Vec<u64>>) -> Vec<(u32, u64)> {
    let (Some(prev), Some(now)) = (prev, now) else { return Vec::new() };
    now.iter()
        .zip(prev)
        .enumerate()
        .filter(|(_, (n, p))| n > p)
        .map(|(g, (n, p))| (g as u32, n - p))
        .collect()
}
