//! `/metrics`: the snapshot as Prometheus metric families, encoded by the `prometheus` crate's
//! text encoder. Names follow Prometheus conventions: a `clasp_` prefix, base units (seconds,
//! bytes, ratios), `_total` on counters, and the labels `operator`, `worker`, `kind`, `reason`.
//! Families are built from the snapshot at scrape time, so a scrape costs the data plane
//! nothing.

use clasp_runtime::observe::{Buckets, Snapshot};
use prometheus::proto::{
    Bucket, Counter, Gauge, Histogram, LabelPair, Metric, MetricFamily, MetricType,
};
use prometheus::{Encoder, TextEncoder};
use std::collections::BTreeMap;

/// The content type of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Metric families under construction, by name.
#[derive(Default)]
struct Families(BTreeMap<&'static str, MetricFamily>);

fn labels(pairs: &[(&str, String)]) -> Vec<LabelPair> {
    pairs
        .iter()
        .map(|(k, v)| {
            let mut l = LabelPair::default();
            l.set_name((*k).into());
            l.set_value(v.clone());
            l
        })
        .collect()
}

impl Families {
    fn family(&mut self, name: &'static str, help: &str, kind: MetricType) -> &mut MetricFamily {
        self.0.entry(name).or_insert_with(|| {
            let mut f = MetricFamily::default();
            f.set_name(name.into());
            f.set_help(help.into());
            f.set_field_type(kind);
            f
        })
    }

    fn gauge(&mut self, name: &'static str, help: &str, l: &[(&str, String)], v: f64) {
        let mut g = Gauge::default();
        g.set_value(v);
        let mut m = Metric::from_label(labels(l));
        m.set_gauge(g);
        self.family(name, help, MetricType::GAUGE).mut_metric().push(m);
    }

    fn counter(&mut self, name: &'static str, help: &str, l: &[(&str, String)], v: f64) {
        let mut c = Counter::default();
        c.set_value(v);
        let mut m = Metric::from_label(labels(l));
        m.set_counter(c);
        self.family(name, help, MetricType::COUNTER).mut_metric().push(m);
    }

    fn histogram(&mut self, name: &'static str, help: &str, b: &Buckets) {
        let mut h = Histogram::default();
        h.set_sample_count(b.count);
        h.set_sample_sum(b.sum_s);
        h.set_bucket(
            b.bounds_s
                .iter()
                .zip(&b.cumulative)
                .map(|(le, n)| {
                    let mut bucket = Bucket::default();
                    bucket.set_upper_bound(*le);
                    bucket.set_cumulative_count(*n);
                    bucket
                })
                .collect(),
        );
        let mut m = Metric::default();
        m.set_histogram(h);
        self.family(name, help, MetricType::HISTOGRAM).mut_metric().push(m);
    }
}

/// Every metric of `s`.
fn families(s: &Snapshot) -> Vec<MetricFamily> {
    let mut f = Families::default();
    let c = &s.counters;
    let a = &s.autoscaler;
    let info = [
        ("pipeline", s.pipeline.name.clone()),
        ("policy", a.policy.clone()),
        ("mode", a.mode.clone()),
    ];
    f.gauge("clasp_info", "The job: pipeline, policy and scaling mode (always 1).", &info, 1.0);
    f.gauge("clasp_run_elapsed_seconds", "Time since the run started.", &[], c.elapsed_s);
    f.gauge(
        "clasp_run_finished",
        "1 once every input was processed and the run ended.",
        &[],
        f64::from(u8::from(c.finished)),
    );
    let n = |x: u64| x as f64;
    f.counter(
        "clasp_input_requests_total",
        "Input requests that entered the planner.",
        &[],
        n(c.input_requests),
    );
    f.counter(
        "clasp_input_records_total",
        "Records in the input requests.",
        &[],
        n(c.input_records),
    );
    f.counter(
        "clasp_chains_completed_total",
        "Input requests whose whole chain of requests completed.",
        &[],
        n(c.completed),
    );
    f.gauge("clasp_chains_in_flight", "Chains not yet completed.", &[], n(c.in_flight));
    f.counter("clasp_sink_records_total", "Records that reached sinks.", &[], n(c.sink_records));
    f.gauge(
        "clasp_planner_queue_requests",
        "Input requests waiting in the planner's incoming queue.",
        &[],
        n(s.planner_queue),
    );
    f.histogram(
        "clasp_end_to_end_latency_seconds",
        "End-to-end latency of completed chains (input request entering the planner to its last request done).",
        &s.latency,
    );
    for o in &s.operators {
        let l = [("operator", o.operator.clone()), ("worker", o.worker.to_string())];
        f.counter(
            "clasp_operator_requests_in_total",
            "Requests an operator executed.",
            &l,
            n(o.requests_in),
        );
        f.counter(
            "clasp_operator_records_in_total",
            "Records in the requests an operator executed.",
            &l,
            n(o.records_in),
        );
        f.counter(
            "clasp_operator_requests_out_total",
            "Chained requests an operator sent downstream.",
            &l,
            n(o.requests_out),
        );
        f.counter(
            "clasp_operator_records_out_total",
            "Records an operator emitted.",
            &l,
            n(o.records_out),
        );
        f.counter(
            "clasp_operator_busy_seconds_total",
            "Executor time an operator used.",
            &l,
            o.busy_s,
        );
        f.counter(
            "clasp_operator_queue_wait_seconds_total",
            "Time an operator's requests waited in the worker's queue.",
            &l,
            o.queue_wait_s,
        );
        f.gauge(
            "clasp_operator_busy_ratio",
            "Executor time an operator used over the executor time of its worker, last interval.",
            &l,
            o.busy_ratio,
        );
        f.gauge(
            "clasp_operator_backpressure_ratio",
            "Queue wait over queue wait plus execution of an operator's requests, last interval.",
            &l,
            o.backpressure_ratio,
        );
    }
    for w in &s.workers {
        let l = [("worker", w.id.to_string())];
        f.gauge("clasp_worker_slots", "Executor slots of a worker.", &l, f64::from(w.slots));
        f.gauge(
            "clasp_worker_queue_requests",
            "Requests in a worker's queue at its last report.",
            &l,
            n(w.queue_now),
        );
        f.gauge(
            "clasp_worker_load_ratio",
            "A worker's execution load over the capacity the estimator credits it with (W).",
            &l,
            w.utilization,
        );
        f.gauge(
            "clasp_worker_remote_destinations",
            "Distinct remote workers a worker sent chained requests to, last interval (delta).",
            &l,
            f64::from(w.destinations),
        );
        f.gauge("clasp_worker_state_keys", "Keys in a worker's keyed state.", &l, n(w.state_keys));
    }
    for (w, (local, remote)) in &s.chained {
        for (kind, v) in [("local", *local), ("remote", *remote)] {
            f.counter(
                "clasp_chained_requests_total",
                "Chained requests dispatched, to the same worker (local) or another (remote).",
                &[("worker", w.to_string()), ("kind", kind.into())],
                n(v),
            );
        }
    }
    if let Some(k) = &s.coefficients.current {
        f.gauge(
            "clasp_estimate_alpha_seconds",
            "alpha: worker capacity per local chained request.",
            &[],
            k.alpha / 1e6,
        );
        f.gauge(
            "clasp_estimate_beta_seconds",
            "beta: worker capacity per remote chained request.",
            &[],
            k.beta / 1e6,
        );
        f.gauge(
            "clasp_estimate_gamma_ratio",
            "gamma: worker capacity per distinct remote destination (seconds per second).",
            &[],
            k.gamma / 1e6,
        );
        f.gauge(
            "clasp_estimate_capacity_ratio",
            "W: the smoothed maximum capacity of a worker (executor seconds per second).",
            &[],
            k.capacity / 1e6,
        );
    }
    f.counter(
        "clasp_estimator_observations_total",
        "Saturated observations the estimator used.",
        &[],
        n(s.coefficients.observations),
    );
    let active = s.placement.as_ref().map_or(0, |p| p.workers);
    f.gauge("clasp_workers_active", "Workers in the placement running.", &[], f64::from(active));
    f.gauge(
        "clasp_workers_desired",
        "Workers the last scaling decision asked for.",
        &[],
        f64::from(a.desired_workers),
    );
    f.counter(
        "clasp_scaling_held_back_total",
        "Scaling decisions the cooldown held back.",
        &[],
        f64::from(a.held_back),
    );
    let mut by_reason: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for e in &s.events {
        *by_reason.entry((e.kind.as_str(), e.reason.as_str())).or_default() += 1;
    }
    f.family("clasp_rescalings_total", "Rescalings carried out, by reason.", MetricType::COUNTER);
    f.family(
        "clasp_recommendations_total",
        "Scaling decisions reported and not carried out (--scaling recommend), by reason.",
        MetricType::COUNTER,
    );
    for ((kind, reason), v) in by_reason {
        let name = if kind == "rescale" {
            "clasp_rescalings_total"
        } else {
            "clasp_recommendations_total"
        };
        f.counter(name, "", &[("reason", reason.into())], n(v));
    }
    f.counter(
        "clasp_migration_keys_moved_total",
        "Keys moved by migrations.",
        &[],
        n(c.keys_moved),
    );
    f.counter(
        "clasp_migration_moved_bytes_total",
        "State bytes moved by migrations.",
        &[],
        n(c.bytes_moved),
    );
    f.histogram(
        "clasp_migration_duration_seconds",
        "Migrations: plan issued to every worker done.",
        &s.migration_durations,
    );
    f.histogram(
        "clasp_migration_worker_pause_seconds",
        "Worker pauses during migrations (plan received to resumed), one per worker and migration.",
        &s.migration_pauses,
    );
    fault(&mut f, &s.fault);
    // A family without samples (no rescaling yet) is left out, as client libraries do.
    f.0.into_values().filter(|m| !m.get_metric().is_empty()).collect()
}

/// Checkpoints and recoveries (Flink's `numberOfCompletedCheckpoints`, `lastCheckpoint*`).
fn fault(f: &mut Families, v: &clasp_runtime::observe::FaultView) {
    let n = |x: u64| x as f64;
    f.counter("clasp_checkpoints_committed_total", "Checkpoints committed.", &[], n(v.committed));
    f.counter(
        "clasp_checkpoints_failed_total",
        "Checkpoints that failed (a worker could not write its key groups).",
        &[],
        n(v.failed),
    );
    f.counter("clasp_recoveries_total", "Recoveries from lost workers.", &[], n(v.recoveries));
    let Some(c) = &v.last else { return };
    f.gauge("clasp_checkpoint_last_id", "The last committed checkpoint's number.", &[], n(c.id));
    f.gauge(
        "clasp_checkpoint_last_duration_seconds",
        "The last committed checkpoint: boundary to committed manifest.",
        &[],
        c.duration_ms / 1e3,
    );
    f.gauge(
        "clasp_checkpoint_last_hold_seconds",
        "The last committed checkpoint: the longest a request after its boundary waited at keyed state for the mark.",
        &[],
        c.held_ms / 1e3,
    );
    f.gauge(
        "clasp_checkpoint_last_size_bytes",
        "The last committed checkpoint: state bytes written.",
        &[],
        n(c.bytes),
    );
}

/// The text exposition of `s`.
pub fn encode(s: &Snapshot) -> Result<Vec<u8>, prometheus::Error> {
    let mut out = Vec::new();
    TextEncoder::new().encode(&families(s), &mut out)?;
    Ok(out)
}
