//! What can go wrong between clasp and a Kafka cluster, each error naming the address, topic,
//! partition or offset it concerns.

use std::time::Duration;

/// A Kafka connector's error.
#[derive(Debug, thiserror::Error)]
pub enum KafkaError {
    /// The connector spec does not parse.
    #[error("kafka spec `{spec}`: {why}")]
    Spec {
        /// The spec as given.
        spec: String,
        /// What is wrong with it.
        why: String,
    },
    /// No bootstrap broker accepted a TCP connection.
    #[error("cannot reach the Kafka broker at {address} (within {timeout:?})")]
    Unreachable {
        /// The broker address tried (the last of the bootstrap list).
        address: String,
        /// How long a connection was waited for.
        timeout: Duration,
        /// Why the connection failed.
        #[source]
        source: std::io::Error,
    },
    /// The broker accepted the connection but the Kafka handshake or metadata request failed.
    #[error("the Kafka broker at {brokers} did not answer as a Kafka broker")]
    Handshake {
        /// The bootstrap brokers.
        brokers: String,
        /// The client's error.
        #[source]
        source: rskafka::client::error::Error,
    },
    /// The topic does not exist on the cluster.
    #[error(
        "topic `{topic}` does not exist on the Kafka cluster at {brokers} (its topics: {known})"
    )]
    NoSuchTopic {
        /// The topic asked for.
        topic: String,
        /// The bootstrap brokers.
        brokers: String,
        /// The topics it has.
        known: String,
    },
    /// A partition named in the spec is not one of the topic's.
    #[error("topic `{topic}` has no partition {partition} (it has {count})")]
    NoSuchPartition {
        /// The topic.
        topic: String,
        /// The partition asked for.
        partition: i32,
        /// How many it has.
        count: usize,
    },
    /// A request about one partition failed (the broker went away, or refused it).
    #[error("{operation} on topic `{topic}` partition {partition} failed")]
    Partition {
        /// What was being done: "fetching records", "producing", "reading the offsets".
        operation: &'static str,
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The client's error.
        #[source]
        source: rskafka::client::error::Error,
    },
    /// A request about one partition got no answer in time: the broker went away (the client
    /// keeps reconnecting otherwise).
    #[error(
        "{operation} on topic `{topic}` partition {partition}: no answer from the brokers {brokers} within {} ms",
        after.as_millis()
    )]
    TimedOut {
        /// What was being done.
        operation: &'static str,
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The bootstrap brokers.
        brokers: String,
        /// The spec's `timeout_ms`.
        after: Duration,
    },
    /// A record cannot become a clasp record.
    #[error("topic `{topic}` partition {partition} offset {offset}: {why}")]
    BadRecord {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The record's offset.
        offset: i64,
        /// What is wrong with it.
        why: &'static str,
    },
    /// A start offset outside what the partition retains.
    #[error(
        "start offset {offset} of topic `{topic}` partition {partition} is outside its retained offsets {earliest}..{latest}"
    )]
    StartOutOfRange {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The offset asked for.
        offset: i64,
        /// The partition's earliest retained offset.
        earliest: i64,
        /// Its next offset to be produced.
        latest: i64,
    },
    /// A position to seek to that this source did not produce.
    #[error("topic `{topic}`: cannot seek there")]
    Seek {
        /// The topic.
        topic: String,
        /// Why.
        #[source]
        source: crate::position::PositionError,
    },
    /// A position names a partition this source does not read.
    #[error(
        "topic `{topic}`: a position names partition {partition}, which this source does not read"
    )]
    ForeignPartition {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
    },
    /// The checkpoint store refused a staged segment of the exactly-once sink.
    #[error("{operation} the sink's checkpoint segment `{name}` in the checkpoint store")]
    Store {
        /// "writing", "reading" or "deleting".
        operation: &'static str,
        /// The segment's name in the store.
        name: String,
        /// The store's error.
        #[source]
        source: clasp_runtime::fault::store::StoreError,
    },
    /// A staged segment in the checkpoint store is damaged.
    #[error("the sink's checkpoint segment `{name}` cannot be read")]
    Segment {
        /// The segment's name in the store.
        name: String,
        /// What is wrong with it.
        #[source]
        source: crate::segment::SegmentError,
    },
    /// The exactly-once sink's producer stopped at an error reported before.
    #[error("topic `{topic}`: the sink's producer stopped after an earlier error")]
    PublisherStopped {
        /// The topic.
        topic: String,
    },
    /// Starting the connector's I/O runtime failed.
    #[error("starting the Kafka client's runtime")]
    Runtime(#[source] std::io::Error),
}

impl From<KafkaError> for std::io::Error {
    fn from(e: KafkaError) -> Self {
        std::io::Error::other(e)
    }
}
