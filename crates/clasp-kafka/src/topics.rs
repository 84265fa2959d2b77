//! Blocking administration of a cluster's topics, for scripts and tests that prepare the topics
//! a pipeline reads and writes: create a topic, and produce records to one partition exactly
//! as given (a record without a value included, which the sink never writes), and read where a
//! partition begins and ends.

use crate::address::KafkaAddress;
use crate::connect::Connection;
use crate::error::KafkaError;
use rskafka::chrono::DateTime;
use rskafka::client::partition::Compression;
use rskafka::record::Record;

/// One record to produce: key, value and timestamp (ms since the Unix epoch).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawRecord {
    /// The key, if any.
    pub key: Option<Vec<u8>>,
    /// The value, if any (none makes a tombstone).
    pub value: Option<Vec<u8>>,
    /// The record timestamp.
    pub timestamp_ms: i64,
}

fn connect(brokers: &str, topic: &str) -> Result<Connection, KafkaError> {
    Connection::open(KafkaAddress::parse(&format!("{brokers}/{topic}"), true)?)
}

/// Creates `topic` with `partitions` partitions (replication factor 1) on the cluster of
/// `brokers` (`host:port[,…]`).
pub fn create_topic(brokers: &str, topic: &str, partitions: i32) -> Result<(), KafkaError> {
    let c = connect(brokers, topic)?;
    let controller = c
        .client
        .controller_client()
        .map_err(|source| KafkaError::Handshake { brokers: brokers.to_owned(), source })?;
    c.runtime.block_on(controller.create_topic(topic, partitions, 1, 10_000)).map_err(|source| {
        KafkaError::Partition {
            operation: "creating the topic",
            topic: topic.to_owned(),
            partition: -1,
            source,
        }
    })
}

/// Produces `records` to partition `partition` of `topic`, in batches of at most
/// `batch` records, each acknowledged before the next; returns the offset of the first record.
pub fn produce(
    brokers: &str,
    topic: &str,
    partition: i32,
    records: impl IntoIterator<Item = RawRecord>,
    batch: usize,
) -> Result<Option<i64>, KafkaError> {
    let c = connect(brokers, topic)?;
    let client = c.partition(partition)?;
    let mut first = None;
    let mut pending = Vec::with_capacity(batch.max(1));
    let mut records = records.into_iter().peekable();
    while records.peek().is_some() {
        pending.clear();
        pending.extend(records.by_ref().take(batch.max(1)).map(|r| Record {
            key: r.key,
            value: r.value,
            headers: Default::default(),
            timestamp: DateTime::from_timestamp_millis(r.timestamp_ms).unwrap_or_default(),
        }));
        let offsets = c
            .runtime
            .block_on(client.produce(std::mem::take(&mut pending), Compression::NoCompression))
            .map_err(|source| KafkaError::Partition {
                operation: "producing",
                topic: topic.to_owned(),
                partition,
                source,
            })?;
        first = first.or(offsets.first().copied());
    }
    Ok(first)
}

/// The earliest retained offset of partition `partition` of `topic` and its log end offset
/// (one past its last record), as the source reads them.
pub fn retained_offsets(
    brokers: &str,
    topic: &str,
    partition: i32,
) -> Result<(i64, i64), KafkaError> {
    let c = connect(brokers, topic)?;
    let client = c.partition(partition)?;
    c.runtime.block_on(crate::connect::retained_offsets(&client)).map_err(|source| {
        KafkaError::Partition {
            operation: "reading the offsets",
            topic: topic.to_owned(),
            partition,
            source,
        }
    })
}

/// Whether tests must have a broker (`CLASP_REQUIRE_KAFKA` set, and not to 0).
pub fn broker_required() -> bool {
    std::env::var_os("CLASP_REQUIRE_KAFKA").is_some_and(|v| !v.is_empty() && v != "0")
}

/// The broker tests run against: `CLASP_KAFKA_BROKERS` (started by `scripts/kafka-broker.sh`).
/// `None`, with a message, when there is none and `CLASP_REQUIRE_KAFKA` is unset: the caller
/// then skips; with `CLASP_REQUIRE_KAFKA=1` a missing broker is a failure (a panic).
pub fn test_broker() -> Option<String> {
    let given = std::env::var("CLASP_KAFKA_BROKERS").ok().filter(|b| !b.is_empty());
    match (given, broker_required()) {
        (Some(b), _) => Some(b),
        (None, true) => panic!(
            "CLASP_REQUIRE_KAFKA is set but CLASP_KAFKA_BROKERS names no broker: start one with scripts/kafka-broker.sh (tansu, installed by scripts/setup.sh)"
        ),
        (None, false) => {
            eprintln!(
                "SKIPPED: no Kafka broker (start one with scripts/kafka-broker.sh and set CLASP_KAFKA_BROKERS; CLASP_REQUIRE_KAFKA=1 makes this a failure)"
            );
            None
        }
    }
}
