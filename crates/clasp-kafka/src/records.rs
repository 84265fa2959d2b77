//! A topic as a carrier of records whose bytes another layer encodes (the edge runner's cut
//! streams): [`RecordProducer`] sends records to the partition of their key (murmur2, as
//! Kafka's own clients and [`crate::KafkaSink`] do, so one key's records stay in order) and
//! waits for the partition leader's acknowledgement; [`RecordReader`] reads every partition
//! with the source's fetch logic ([`crate::KafkaSource`]) and hands out each record with its
//! partition, offset and headers.

use crate::address::KafkaAddress;
use crate::connect::Connection;
use crate::error::KafkaError;
use crate::sink::{murmur2, now_ms};
use crate::source::{KafkaSource, SourceOptions};
use rskafka::chrono::DateTime;
use rskafka::client::partition::{Compression, PartitionClient};
use rskafka::record::Record;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Most payload bytes sent in one produce request: below the 1 MiB a Kafka broker accepts per
/// record batch by default (`message.max.bytes`). A single larger record still goes, alone.
const PRODUCE_BYTES: usize = 512 << 10;

/// One record to produce.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OutRecord {
    /// The key: it picks the partition.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// Headers.
    pub headers: BTreeMap<String, Vec<u8>>,
}

impl OutRecord {
    /// Bytes of its key, value, header names and header values: what it adds to the topic
    /// besides Kafka's own record and batch framing.
    pub fn payload_bytes(&self) -> usize {
        self.key.len()
            + self.value.len()
            + self.headers.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
    }
}

/// A produce that failed: the error, and the records not acknowledged (in their order), for
/// the caller to send again.
#[derive(Debug)]
pub struct ProduceFailed {
    /// Why.
    pub error: KafkaError,
    /// The records not acknowledged.
    pub unacked: Vec<OutRecord>,
}

/// Produces records to a topic, each acknowledged before the call returns.
pub struct RecordProducer {
    connection: Connection,
    partitions: Vec<(i32, Arc<PartitionClient>)>,
}

impl std::fmt::Debug for RecordProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordProducer")
            .field("address", &self.connection.address)
            .finish_non_exhaustive()
    }
}

impl RecordProducer {
    /// Connects to the cluster of `spec` (`BROKERS/TOPIC[?timeout_ms=N]`, as `--output
    /// kafka:…`) and checks that the topic exists.
    pub fn open(spec: &str) -> Result<Self, KafkaError> {
        let connection = Connection::open(KafkaAddress::parse(spec, true)?)?;
        let partitions = connection
            .partitions()?
            .into_iter()
            .map(|id| connection.partition(id).map(|c| (id, c)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { connection, partitions })
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.connection.address.topic
    }

    /// The bootstrap brokers, as given.
    pub fn brokers(&self) -> String {
        self.connection.address.brokers_text()
    }

    /// Produces `records`, each to the partition of its key, in their order within each
    /// partition, and waits for every acknowledgement. On a failure returns the records not
    /// acknowledged: some of them may have been written all the same (an acknowledgement
    /// lost), so a receiver must recognise records it already has.
    pub fn produce(&mut self, records: Vec<OutRecord>) -> Result<(), ProduceFailed> {
        let n = self.partitions.len();
        let mut by_partition: Vec<Vec<OutRecord>> = vec![Vec::new(); n];
        for r in records {
            let i = (murmur2(&r.key) & 0x7fff_ffff) as usize % n;
            by_partition[i].push(r);
        }
        let mut failed: Option<ProduceFailed> = None;
        for (i, mut queue) in by_partition.into_iter().enumerate() {
            if let Some(f) = &mut failed {
                f.unacked.append(&mut queue);
                continue;
            }
            while !queue.is_empty() {
                let mut take = 0;
                let mut bytes = 0;
                while take < queue.len() && (take == 0 || bytes < PRODUCE_BYTES) {
                    bytes += queue[take].payload_bytes();
                    take += 1;
                }
                let batch: Vec<Record> = queue[..take].iter().map(to_record).collect();
                let (id, client) = &self.partitions[i];
                match self
                    .connection
                    .runtime
                    .block_on(client.produce(batch, Compression::NoCompression))
                {
                    Ok(_) => {
                        queue.drain(..take);
                    }
                    Err(source) => {
                        let error = KafkaError::Partition {
                            operation: "producing",
                            topic: self.connection.address.topic.clone(),
                            partition: *id,
                            source,
                        };
                        failed = Some(ProduceFailed { error, unacked: std::mem::take(&mut queue) });
                    }
                }
            }
        }
        failed.map_or(Ok(()), Err)
    }
}

fn to_record(r: &OutRecord) -> Record {
    Record {
        key: Some(r.key.clone()),
        value: Some(r.value.clone()),
        headers: r.headers.clone(),
        timestamp: DateTime::from_timestamp_millis(now_ms()).unwrap_or_default(),
    }
}

/// A record read, where it was.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InRecord {
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// Its key, if any.
    pub key: Option<Vec<u8>>,
    /// Its value, if any.
    pub value: Option<Vec<u8>>,
    /// Its headers.
    pub headers: BTreeMap<String, Vec<u8>>,
}

impl InRecord {
    /// Bytes of its key, value, header names and header values (see
    /// [`OutRecord::payload_bytes`]).
    pub fn payload_bytes(&self) -> usize {
        self.key.as_ref().map_or(0, Vec::len)
            + self.value.as_ref().map_or(0, Vec::len)
            + self.headers.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>()
    }
}

/// What [`RecordReader::poll`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Polled {
    /// The next record.
    Record(InRecord),
    /// Nothing new within the broker's fetch wait.
    Idle,
    /// A bounded read (`stop=latest`) reached its end.
    End,
}

/// Reads every record of a topic's partitions, interleaved, each partition in order.
pub struct RecordReader {
    source: KafkaSource,
}

impl std::fmt::Debug for RecordReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.source.fmt(f)
    }
}

impl RecordReader {
    /// Connects to the cluster of `spec` (`BROKERS/TOPIC[?start=…&stop=…&partitions=…&
    /// timeout_ms=…]`, as `--input kafka:…`), checks the topic and finds where each partition
    /// begins.
    pub fn open(spec: &str) -> Result<Self, KafkaError> {
        let address = KafkaAddress::parse(spec, false)?;
        Ok(Self { source: KafkaSource::open(address, SourceOptions::default())? })
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.source.connection.address.topic
    }

    /// The bootstrap brokers, as given.
    pub fn brokers(&self) -> String {
        self.source.connection.address.brokers_text()
    }

    /// The next record, fetching when none is buffered.
    pub fn poll(&mut self) -> Result<Polled, KafkaError> {
        loop {
            if let Some((i, r)) = self.source.take() {
                let p = &mut self.source.partitions[i];
                p.next = r.offset + 1;
                return Ok(Polled::Record(InRecord {
                    partition: p.id,
                    offset: r.offset,
                    key: r.record.key,
                    value: r.record.value,
                    headers: r.record.headers,
                }));
            }
            if self.source.partitions.iter().all(|p| p.finished()) {
                return Ok(Polled::End);
            }
            if self.source.fetch()? == 0 {
                return Ok(Polled::Idle);
            }
        }
    }
}
