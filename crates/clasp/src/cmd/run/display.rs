//! What `clasp run` prints: the live progress line, scaling events and the summary.

use clasp_plan::Policy;
use clasp_runtime::job;
use clasp_runtime::planner::Progress;
use clasp_runtime::scaling::ScalingEvent;

fn si(x: f64) -> String {
    match x.abs() {
        v if v >= 1e9 => format!("{:.2}G", x / 1e9),
        v if v >= 1e6 => format!("{:.2}M", x / 1e6),
        v if v >= 1e4 => format!("{:.1}k", x / 1e3),
        _ => format!("{x:.0}"),
    }
}

fn ms(us: u64) -> String {
    format!("{:.2}ms", us as f64 / 1e3)
}

/// The live progress line.
pub fn live_line(p: &Progress) -> String {
    let queues: Vec<String> = p.worker_queues.iter().map(u64::to_string).collect();
    format!(
        "[{:>6.1}s] in {} req/s ({} rec/s) | done {} req/s | p50 {} p95 {} | queue planner {} workers [{}] | chained {}/s local {}/s remote | workers {}",
        p.t,
        si(p.input_rate),
        si(p.input_records),
        si(p.throughput),
        ms(p.p50_us),
        ms(p.p95_us),
        p.planner_queue,
        queues.join(","),
        si(p.local_rate),
        si(p.remote_rate),
        p.workers
    )
}

/// One scaling event.
pub fn event_line(e: &ScalingEvent) -> String {
    format!(
        "[{:>6.1}s] scaling {} -> {} workers ({}, target {} req/s): planner {:.2} ms, worst worker pause {:.2} ms, {} keys ({} bytes) moved",
        e.time_s,
        e.from_workers,
        e.to_workers,
        e.reason,
        si(e.target_rate),
        e.planner_ms,
        e.max_worker_pause_ms,
        e.keys_moved,
        e.bytes_moved
    )
}

pub(super) fn summary(name: &str, policy: Policy, out: &job::JobOutput) -> String {
    let s = &out.summary;
    let mut text = format!(
        "\n== `{name}` with policy {policy}: {:.1} s\n\
         input      {} requests, {} records ({} records/s)\n\
         completed  {} chains ({} req/s)\n\
         latency    p50 {} | p95 {} | p99 {} | max {} | mean {:.2}ms\n\
         chained    {} local, {} remote requests\n\
         sinks      {} records\n\
         workers    {} at the end; {} rescalings\n",
        s.duration_s,
        s.input_requests,
        s.input_records,
        si(s.records_per_s),
        s.completed,
        si(s.throughput),
        ms(s.latency.p50_us),
        ms(s.latency.p95_us),
        ms(s.latency.p99_us),
        ms(s.latency.max_us),
        s.latency.mean_us / 1e3,
        s.local_requests,
        s.remote_requests,
        s.sink_records,
        out.placement.workers,
        out.stats.scaling_events.len(),
    );
    text += "operators  name             requests    records    emitted  mean exec  state keys\n";
    for o in &s.operators {
        text += &format!(
            "           {:<16} {:>9} {:>10} {:>10} {:>8.1}us {:>11}\n",
            o.name, o.processed, o.records, o.emitted, o.mean_exec_us, o.state_keys
        );
    }
    if s.interrupted {
        text += &format!(
            "stopped    by a signal (results partial): {} queued requests dropped, {} chains still in flight\n",
            s.dropped_requests, s.abandoned_chains
        );
    } else if s.dropped_requests + s.abandoned_chains > 0 {
        text += &format!(
            "stopped    at the duration: {} queued requests dropped, {} chains still in flight\n",
            s.dropped_requests, s.abandoned_chains
        );
    }
    if s.oversized_records > 0 {
        text += &format!(
            "skipped    {} input records larger than the frame limit of {} bytes\n",
            s.oversized_records,
            clasp_runtime::wire::DEFAULT_MAX_FRAME
        );
    }
    if !out.stats.recommendations.is_empty() {
        text += &format!(
            "recommend  {} decisions reported, none carried out\n",
            out.stats.recommendations.len()
        );
    }
    let rejected = s.rejected();
    if rejected > 0 {
        text += &format!("rejected   {rejected} records:\n");
        for o in &s.operators {
            for (reason, n) in &o.rejected {
                text += &format!("           {}: {n} ({reason})\n", o.name);
            }
        }
    }
    if out.state_lines > 0 {
        text += &format!("state      {} keys dumped\n", out.state_lines);
    }
    text
}
