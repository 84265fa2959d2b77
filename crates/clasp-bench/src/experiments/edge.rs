//! `edge` (the Planner paper's §VI): five devices and the cloud, the taxi workflows w1–w3
//! all in the cloud and cut, over emulated WAN links of several bandwidths, on the edge
//! engine ([`crate::engine::edge`]).
//!
//! For each workflow and bandwidth both deployments replay the same seeded trace at the same
//! speed. Measured: items and bytes over every device→cloud link, the makespan and the
//! end-to-end latency of chains; the cut's results are compared with all-in-cloud's
//! (Theorem 1). With a Kafka broker (`--set kafka=HOST:PORT`, or `CLASP_KAFKA_BROKERS`) every
//! pair runs again with a Kafka topic as the edge→cloud transport, beside the TCP connector's.
//! `edge.csv` holds every run; the markdown sets each cut beside its all-in-cloud run.

use crate::engine::edge::{self, BenchOptions, Row, WanChoice, change};
use crate::report::{Output, Report, Table};
use crate::settings::Scope;
use crate::{BenchError, Options};
use serde::{Deserialize, Serialize};

/// `edge`'s settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// WAN emulation: `auto` (namespaces when this process can make them), `netns` or
    /// `user-space`.
    pub wan: WanChoice,
    /// Bootstrap brokers (`HOST:PORT[,…]`) for the Kafka rows; without it, those of
    /// `CLASP_KAFKA_BROKERS`; without either the Kafka rows are skipped.
    pub kafka: Option<String>,
}

impl Default for Settings {
    fn default() -> Self {
        Self { wan: WanChoice::Auto, kafka: None }
    }
}

/// The environment variable naming the broker when `kafka` is not set.
const KAFKA_ENV: &str = "CLASP_KAFKA_BROKERS";

/// Runs the experiment.
pub fn run(o: &Options) -> Result<Output, BenchError> {
    let s = Scope::new("edge", o).one(&Settings::default())?;
    let opts = BenchOptions {
        quick: o.quick,
        out: o.out.clone(),
        wan: s.wan,
        exe: std::env::current_exe().ok(),
        seed: o.seed,
        kafka: s.kafka.or_else(|| std::env::var(KAFKA_ENV).ok()).filter(|b| !b.is_empty()),
    };
    let runs = edge::run(&opts)?;
    let report = Report {
        title: "edge (Planner §VI): the edge/cloud cut over emulated WAN links".into(),
        setup: vec![
            format!("engine: edge, scale: {}, seed {}", o.scale(), o.seed),
            format!("WAN emulation: {}", runs.wan),
            runs.plan.clone(),
            runs.kafka.clone(),
        ],
        tables: vec![comparison(&runs.rows), every_run(&runs.rows)],
        notes: vec![
            "\"network\" is the change in bytes over all device links at the connectors; \"results equal\" compares the cut's sink records and state with the all-in-cloud run's (Theorem 1).".into(),
            "Over Kafka, bytes are the keys, values and headers of the records the devices produced (produced-again ones included; Kafka's record and batch framing not counted), and \"results equal\" compares both Kafka runs with the TCP connector's all-in-cloud run.".into(),
        ],
    };
    Ok(Output::from(report))
}

/// Every run, one row each: the columns of `edge.csv`.
pub fn every_run(rows: &[Row]) -> Table {
    let mut t = Table::new(
        "edge",
        &[
            "workflow",
            "mode",
            "wan",
            "bandwidth_kbit",
            "delay_ms",
            "events",
            "items",
            "bytes",
            "wire_bytes",
            "makespan_s",
            "latency_p50_ms",
            "latency_p95_ms",
            "latency_p99_ms",
            "sink_records",
            "outputs_equal",
            "transport",
        ],
    );
    for r in rows {
        t.row(vec![
            r.workflow.clone(),
            r.mode.clone(),
            r.wan.clone(),
            r.bandwidth_kbit.to_string(),
            r.delay_ms.to_string(),
            r.events.to_string(),
            r.items.to_string(),
            r.bytes.to_string(),
            r.wire_bytes.map_or(String::new(), |b| b.to_string()),
            format!("{:.3}", r.makespan_s),
            format!("{:.2}", r.p50_ms),
            format!("{:.2}", r.p95_ms),
            format!("{:.2}", r.p99_ms),
            r.sink_records.to_string(),
            r.outputs_equal.map_or(String::new(), |e| e.to_string()),
            r.transport.clone(),
        ]);
    }
    t
}

/// One row per workflow and bandwidth: all-in-cloud → cut.
pub fn comparison(rows: &[Row]) -> Table {
    let mut t = Table::new(
        "edge-comparison",
        &[
            "workflow",
            "link kbit/s",
            "transport",
            "items all-cloud → cut",
            "bytes all-cloud → cut",
            "network",
            "makespan s all-cloud → cut",
            "makespan",
            "p50 latency ms",
            "p95 latency ms",
            "results equal",
        ],
    );
    for pair in rows.chunks(2) {
        let [all, cut] = pair else { continue };
        t.row(vec![
            all.workflow.clone(),
            all.bandwidth_kbit.to_string(),
            all.transport.clone(),
            format!("{} → {}", all.items, cut.items),
            format!("{} → {}", all.bytes, cut.bytes),
            change(all.bytes as f64, cut.bytes as f64),
            format!("{:.2} → {:.2}", all.makespan_s, cut.makespan_s),
            change(all.makespan_s, cut.makespan_s),
            format!("{:.0} → {:.0}", all.p50_ms, cut.p50_ms),
            format!("{:.0} → {:.0}", all.p95_ms, cut.p95_ms),
            cut.outputs_equal.map_or("-", |e| if e { "yes" } else { "no" }).into(),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(mode: &str, bytes: u64, equal: Option<bool>) -> Row {
        Row {
            workflow: "w1".into(),
            mode: mode.into(),
            wan: "user-space".into(),
            transport: "tcp".into(),
            bandwidth_kbit: 256.0,
            delay_ms: 20.0,
            events: 3000,
            items: bytes / 100,
            bytes,
            wire_bytes: None,
            makespan_s: 2.4512,
            p50_ms: 531.0,
            p95_ms: 1415.0,
            p99_ms: 1500.25,
            sink_records: 10,
            outputs_equal: equal,
        }
    }

    #[test]
    fn the_csv_keeps_its_columns_and_the_comparison_pairs_runs() {
        let rows = [row("all-cloud", 400_000, None), row("cut", 100_000, Some(true))];
        let csv = every_run(&rows).csv();
        let mut lines = csv.lines();
        assert_eq!(
            lines.next().unwrap(),
            "workflow,mode,wan,bandwidth_kbit,delay_ms,events,items,bytes,wire_bytes,makespan_s,latency_p50_ms,latency_p95_ms,latency_p99_ms,sink_records,outputs_equal,transport"
        );
        assert_eq!(
            lines.next().unwrap(),
            "w1,all-cloud,user-space,256,20,3000,4000,400000,,2.451,531.00,1415.00,1500.25,10,,tcp"
        );
        assert!(lines.next().unwrap().ends_with(",10,true,tcp"));
        let cmp = comparison(&rows);
        assert_eq!(cmp.rows.len(), 1);
        assert_eq!(cmp.rows[0][2], "tcp");
        assert_eq!(cmp.rows[0][4], "400000 → 100000");
        assert_eq!(cmp.rows[0][5], change(400_000.0, 100_000.0));
        assert_eq!(change(400_000.0, 100_000.0), "-75%");
        assert_eq!(cmp.rows[0][10], "yes");
    }
}
