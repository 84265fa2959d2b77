//! `--input [SOURCE=]kafka:BROKERS/TOPIC[?…]` and `--output kafka:BROKERS/TOPIC`, when the
//! binary is built with the cargo feature `kafka` (docs/connectors.md).

use anyhow::Result;
use clasp_core::registry::EventTimeFn;
use clasp_core::source::Source;
use clasp_runtime::fault::FaultTolerance;
use clasp_runtime::planner::SinkOutput;

/// What marks a Kafka spec in `--input` and `--output`.
pub const PREFIX: &str = "kafka:";

/// The Kafka source of `source` for the spec after [`PREFIX`]. The spec's `key_field`, when
/// the source declares one, keys records instead of the Kafka key, and its `event_time`
/// function times them instead of the record timestamp.
#[cfg(feature = "kafka")]
pub fn source(
    spec: &str,
    source: &clasp_core::pipeline::Source,
    event_time: Option<EventTimeFn>,
) -> Result<Box<dyn Source>> {
    let options =
        clasp_kafka::SourceOptions { event_time, record_keys: source.key_field.is_none() };
    Ok(Box::new(clasp_kafka::open_source(spec, options)?))
}

/// The Kafka sink for the spec after [`PREFIX`]: exactly-once (produced by checkpoint) when
/// checkpoints are on.
#[cfg(feature = "kafka")]
pub fn sink(spec: &str, fault: &FaultTolerance) -> Result<Box<dyn SinkOutput>> {
    use anyhow::Context;
    if fault.checkpoint.is_none() {
        return Ok(Box::new(clasp_kafka::open_sink(spec)?));
    }
    let store = clasp_runtime::fault::store::open(&fault.store)
        .with_context(|| format!("the checkpoint store {}", fault.store))?;
    let resume = fault.resume.as_ref().map(|m| m.id);
    Ok(Box::new(clasp_kafka::open_exactly_once_sink(spec, store, resume)?))
}

#[cfg(not(feature = "kafka"))]
const NOT_BUILT: &str =
    "this clasp is built without Kafka support: build it with `--features clasp/kafka`";

/// Without the feature, a Kafka spec is refused.
#[cfg(not(feature = "kafka"))]
pub fn source(
    _: &str,
    _: &clasp_core::pipeline::Source,
    _: Option<EventTimeFn>,
) -> Result<Box<dyn Source>> {
    anyhow::bail!(NOT_BUILT)
}

/// Without the feature, a Kafka spec is refused.
#[cfg(not(feature = "kafka"))]
pub fn sink(_: &str, _: &FaultTolerance) -> Result<Box<dyn SinkOutput>> {
    anyhow::bail!(NOT_BUILT)
}
