//! Connecting to a cluster: a TCP probe of the bootstrap brokers first, so an unreachable
//! broker fails at once with its address, then the Kafka client with a retry deadline, so a
//! broker that goes away mid-run surfaces as an error instead of a hang.

use crate::address::KafkaAddress;
use crate::error::KafkaError;
use rskafka::BackoffConfig;
use rskafka::client::error::Error as ClientError;
use rskafka::client::partition::{OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::{Client, ClientBuilder};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Runtime;

/// How long the probe waits for one address to accept a connection.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// The client's name in the broker's logs and metrics.
const CLIENT_ID: &str = "clasp";

/// A client on its own single-threaded runtime: the connectors are called from the runtime's
/// synchronous threads and block on each request.
pub(crate) struct Connection {
    pub(crate) runtime: Runtime,
    pub(crate) client: Client,
    pub(crate) address: KafkaAddress,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("address", &self.address).finish_non_exhaustive()
    }
}

/// Whether some bootstrap broker accepts TCP connections; the error names the last one tried.
fn probe(address: &KafkaAddress) -> Result<(), KafkaError> {
    let mut last = None;
    for broker in &address.brokers {
        let attempt = broker.to_socket_addrs().and_then(|mut addrs| {
            let mut error = std::io::Error::other("the name resolves to no address");
            for a in addrs.by_ref() {
                match TcpStream::connect_timeout(&a, PROBE_TIMEOUT) {
                    Ok(_) => return Ok(()),
                    Err(e) => error = e,
                }
            }
            Err(error)
        });
        match attempt {
            Ok(()) => return Ok(()),
            Err(e) => last = Some((broker.clone(), e)),
        }
    }
    let (address, source) =
        last.unwrap_or_else(|| (String::new(), std::io::Error::other("no bootstrap broker given")));
    Err(KafkaError::Unreachable { address, timeout: PROBE_TIMEOUT, source })
}

impl Connection {
    /// Connects to the cluster of `address`.
    pub(crate) fn open(address: KafkaAddress) -> Result<Self, KafkaError> {
        probe(&address)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(KafkaError::Runtime)?;
        let backoff = BackoffConfig {
            init_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(1),
            base: 2.0,
            deadline: Some(address.timeout),
        };
        let client = runtime
            .block_on(
                ClientBuilder::new(address.brokers.clone())
                    .client_id(CLIENT_ID)
                    .backoff_config(backoff)
                    .build(),
            )
            .map_err(|source| KafkaError::Handshake { brokers: address.brokers_text(), source })?;
        Ok(Self { runtime, client, address })
    }

    /// The partitions of the topic, in order; a missing topic names the topics there are.
    pub(crate) fn partitions(&self) -> Result<Vec<i32>, KafkaError> {
        let topics = self.runtime.block_on(self.client.list_topics()).map_err(|source| {
            KafkaError::Handshake { brokers: self.address.brokers_text(), source }
        })?;
        match topics.iter().find(|t| t.name == self.address.topic) {
            Some(t) if !t.partitions.is_empty() => Ok(t.partitions.iter().copied().collect()),
            _ => {
                let mut names: Vec<&str> = topics.iter().map(|t| t.name.as_str()).collect();
                names.sort_unstable();
                Err(KafkaError::NoSuchTopic {
                    topic: self.address.topic.clone(),
                    brokers: self.address.brokers_text(),
                    known: if names.is_empty() { "none".into() } else { names.join(", ") },
                })
            }
        }
    }

    /// A client of one partition of the topic.
    pub(crate) fn partition(&self, partition: i32) -> Result<Arc<PartitionClient>, KafkaError> {
        let client = self.runtime.block_on(self.client.partition_client(
            self.address.topic.clone(),
            partition,
            UnknownTopicHandling::Error,
        ));
        client.map(Arc::new).map_err(|source| KafkaError::Partition {
            operation: "connecting to the leader",
            topic: self.address.topic.clone(),
            partition,
            source,
        })
    }
}

/// The offsets a partition holds: its earliest retained offset and its log end offset (the
/// offset its next record gets, one past the last record: the high watermark).
///
/// The end comes from a fetch's high watermark, not from ListOffsets alone: some
/// Kafka-protocol brokers (tansu 0.6) answer ListOffsets(latest) with the last record batch's
/// base offset plus one, which falls inside that batch whenever it holds more than one record.
/// A fetch of at most a byte returns at most one batch, and its answer always carries the high
/// watermark. The larger of the two is the end, so a broker that answers either way is read to
/// its last record.
pub(crate) async fn retained_offsets(client: &PartitionClient) -> Result<(i64, i64), ClientError> {
    let earliest = client.get_offset(OffsetAt::Earliest).await?;
    let listed = client.get_offset(OffsetAt::Latest).await?;
    let (_, high_watermark) = client.fetch_records(earliest, 1..2, 0).await?;
    Ok((earliest, listed.max(high_watermark)))
}
