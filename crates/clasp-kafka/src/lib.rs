//! Kafka connectors of clasp: [`KafkaSource`] reads a topic on the source API (record key and
//! value, the record timestamp as event time, the next offset of every partition as the replay
//! position a checkpoint stores), and [`KafkaSink`] writes the records reaching a pipeline's
//! sinks to a topic, by checkpoint when checkpoints are on (exactly once). Both take the spec after `kafka:` in `--input` and `--output`
//! ([`address`]), and speak the Kafka protocol through `rskafka`. [`topics`] creates topics
//! and produces records for scripts and tests; [`records`] carries records another layer
//! encodes (the edge runner's cut streams).

pub mod address;
mod connect;
pub mod error;
pub mod position;
mod publisher;
pub mod records;
pub mod segment;
pub mod sink;
pub mod source;
mod staging;
pub mod topics;

pub use address::KafkaAddress;
pub use error::KafkaError;
pub use sink::KafkaSink;
pub use source::{KafkaSource, SourceOptions};

/// The source of `--input kafka:SPEC`.
pub fn open_source(spec: &str, options: SourceOptions) -> Result<KafkaSource, KafkaError> {
    KafkaSource::open(KafkaAddress::parse(spec, false)?, options)
}

/// The sink of `--output kafka:SPEC`.
pub fn open_sink(spec: &str) -> Result<KafkaSink, KafkaError> {
    KafkaSink::open(KafkaAddress::parse(spec, true)?)
}

/// The exactly-once sink of `--output kafka:SPEC` with checkpoints in `store`, resuming from
/// committed checkpoint `resume` if given (see [`KafkaSink::open_exactly_once`]).
pub fn open_exactly_once_sink(
    spec: &str,
    store: std::sync::Arc<dyn clasp_runtime::fault::store::CheckpointStore>,
    resume: Option<u64>,
) -> Result<KafkaSink, KafkaError> {
    KafkaSink::open_exactly_once(KafkaAddress::parse(spec, true)?, store, resume)
}

pub use staging::{CHECKPOINT_HEADER, SEQ_HEADER};
