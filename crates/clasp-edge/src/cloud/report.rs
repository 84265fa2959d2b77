//! What the cloud side did: traffic per device link, makespan, latency and results.

use clasp_runtime::planner::stats::Latency;
use serde::Serialize;

/// Traffic over one device's link, as the cloud received it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LinkReport {
    /// The device.
    pub device: String,
    /// Bytes received: preamble and frames (over Kafka: the keys, values and headers of the
    /// device's records read from the topic, duplicates included).
    pub bytes: u64,
    /// Data frames taken (each once).
    pub frames: u64,
    /// Times the device connected again after its link broke.
    pub reconnects: u64,
    /// Data frames it resent that the cloud already held, discarded.
    pub duplicates: u64,
    /// Records per connector: `(name, count)`.
    pub records: Vec<(String, u64)>,
}

/// What the cloud side did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CloudReport {
    /// The pipeline.
    pub pipeline: String,
    /// `cut` or `all-cloud`.
    pub mode: String,
    /// Operators the cloud ran.
    pub operators: Vec<String>,
    /// One entry per device.
    pub links: Vec<LinkReport>,
    /// Seconds from the start signal until every device finished and every chain completed.
    pub makespan_s: f64,
    /// End-to-end latency of completed chains, from the device's read of the oldest raw record
    /// behind a request to the completion of everything it caused in the cloud.
    pub latency: Latency,
    /// Chains completed.
    pub chains: u64,
    /// Records that reached the sinks.
    pub sink_records: u64,
    /// The keyed state (JSON lines), when asked for.
    #[serde(skip)]
    pub state: Option<Vec<u8>>,
}

impl CloudReport {
    /// Bytes over every device link.
    pub fn bytes(&self) -> u64 {
        self.links.iter().map(|l| l.bytes).sum()
    }

    /// Records over every device link.
    pub fn items(&self) -> u64 {
        self.links.iter().flat_map(|l| l.records.iter().map(|r| r.1)).sum()
    }
}
