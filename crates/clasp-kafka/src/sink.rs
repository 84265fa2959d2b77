//! The Kafka sink: the records reaching a pipeline's sinks, written to one topic. A record's
//! key picks its partition as Kafka's own clients do (murmur2 of the key, so a key's records
//! stay in order in one partition); unkeyed records go round the partitions. The sink's name
//! travels in header `clasp-sink`; the record's event time, when it has one, is the Kafka
//! timestamp (taken as ms since the Unix epoch), the time of writing otherwise. Records are
//! sent in batches of up to [`BATCH_RECORDS`] and every batch is acknowledged by the partition
//! leader before the next: a run's end flushes the rest.
//!
//! With checkpoints on, the sink is exactly-once ([`crate::staging`]): an epoch's records are
//! staged, kept in the checkpoint store with the checkpoint, and produced once it commits.

use crate::address::KafkaAddress;
use crate::connect::Connection;
use crate::error::KafkaError;
use crate::publisher::Publisher;
use crate::staging::Staging;
use clasp_core::Batch;
use clasp_runtime::fault::output::OutputMark;
use clasp_runtime::fault::store::CheckpointStore;
use clasp_runtime::planner::SinkOutput;
use rskafka::chrono::DateTime;
use rskafka::client::partition::{Compression, PartitionClient};
use rskafka::record::Record;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Records buffered before they are sent.
pub const BATCH_RECORDS: usize = 8192;

/// Bytes buffered before they are sent.
const BATCH_BYTES: usize = 1 << 20;

/// The header naming the pipeline sink a record reached.
pub const SINK_HEADER: &str = "clasp-sink";

/// Writes sink records to a topic.
pub struct KafkaSink {
    pub(crate) connection: Connection,
    pub(crate) partitions: Vec<(i32, Arc<PartitionClient>)>,
    /// Each partition's end offset as this sink last saw it (after its own produces).
    pub(crate) ends: Vec<i64>,
    /// The exactly-once staging, with checkpoints on.
    pub(crate) staging: Option<Staging>,
    pending: Vec<Vec<Record>>,
    pending_records: usize,
    pending_bytes: usize,
    next_unkeyed: usize,
    written: u64,
}

impl std::fmt::Debug for KafkaSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSink")
            .field("address", &self.connection.address)
            .field("written", &self.written)
            .finish_non_exhaustive()
    }
}

impl KafkaSink {
    /// Connects and checks that the topic exists.
    pub fn open(address: KafkaAddress) -> Result<Self, KafkaError> {
        let connection = Connection::open(address)?;
        let ids = connection.partitions()?;
        let partitions = ids
            .iter()
            .map(|&id| connection.partition(id).map(|c| (id, c)))
            .collect::<Result<Vec<_>, _>>()?;
        let pending = vec![Vec::new(); partitions.len()];
        let mut ends = Vec::with_capacity(partitions.len());
        for (id, client) in &partitions {
            let (_, end) = connection
                .runtime
                .block_on(crate::connect::retained_offsets(client))
                .map_err(|source| KafkaError::Partition {
                    operation: "reading the offsets",
                    topic: connection.address.topic.clone(),
                    partition: *id,
                    source,
                })?;
            ends.push(end);
        }
        Ok(Self {
            connection,
            partitions,
            ends,
            staging: None,
            pending,
            pending_records: 0,
            pending_bytes: 0,
            next_unkeyed: 0,
            written: 0,
        })
    }

    /// Connects, and makes the sink exactly-once with the checkpoints of `store`: records are
    /// produced when their checkpoint commits. With `resume` (the committed checkpoint a
    /// resumed job starts from), first completes that checkpoint's produce if the previous run
    /// died before it finished ([`crate::staging`]).
    pub fn open_exactly_once(
        address: KafkaAddress,
        store: Arc<dyn CheckpointStore>,
        resume: Option<u64>,
    ) -> Result<Self, KafkaError> {
        let mut sink = Self::open(address.clone())?;
        if let Some(id) = resume {
            crate::staging::complete(&mut sink, &*store, id)?;
        }
        let mut producer = Self::open(address)?;
        producer.ends.clone_from(&sink.ends);
        let publisher = Publisher::spawn(producer, store.clone())?;
        sink.staging = Some(Staging::new(store, publisher));
        Ok(sink)
    }

    /// Records acknowledged by the cluster so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    fn partition_of(&mut self, key: &[u8]) -> usize {
        partition_index(key, self.partitions.len(), &mut self.next_unkeyed)
    }

    /// Sends every buffered record, all partitions at once, and waits for the acknowledgements.
    fn send(&mut self) -> Result<(), KafkaError> {
        let batches: Vec<(usize, Vec<Record>)> = self
            .pending
            .iter_mut()
            .enumerate()
            .filter(|(_, b)| !b.is_empty())
            .map(|(i, b)| (i, std::mem::take(b)))
            .collect();
        self.pending_records = 0;
        self.pending_bytes = 0;
        self.produce(batches)
    }

    /// Produces each partition's records (by partition index), all partitions at once, in
    /// batches of at most [`BATCH_RECORDS`] each acknowledged before the next.
    pub(crate) fn produce(&mut self, batches: Vec<(usize, Vec<Record>)>) -> Result<(), KafkaError> {
        let work: Vec<(usize, Arc<PartitionClient>, Vec<Record>)> = batches
            .into_iter()
            .filter(|(_, b)| !b.is_empty())
            .map(|(i, b)| (i, self.partitions[i].1.clone(), b))
            .collect();
        let timeout = self.connection.address.timeout;
        let results = self.connection.runtime.block_on(async move {
            let mut set = tokio::task::JoinSet::new();
            for (i, client, mut records) in work {
                set.spawn(async move {
                    let (mut acked, mut end) = (0u64, None);
                    while !records.is_empty() {
                        let rest = records.split_off(records.len().min(BATCH_RECORDS));
                        let n = records.len() as u64;
                        let produced = client.produce(records, Compression::NoCompression);
                        match tokio::time::timeout(timeout, produced).await {
                            Ok(Ok(offsets)) => {
                                acked += n;
                                end = offsets.last().map(|o| o + 1).or(end);
                            }
                            Ok(Err(e)) => return (i, acked, end, Err(Some(e))),
                            Err(_) => return (i, acked, end, Err(None)),
                        }
                        records = rest;
                    }
                    (i, acked, end, Ok(()))
                });
            }
            let mut results = Vec::new();
            while let Some(done) = set.join_next().await {
                results.push(done);
            }
            results
        });
        let mut first_error = None;
        for done in results {
            let (i, acked, end, result) =
                done.map_err(|e| KafkaError::Runtime(std::io::Error::other(e)))?;
            self.written += acked;
            if let Some(end) = end {
                self.ends[i] = self.ends[i].max(end);
            }
            let partition = self.partitions[i].0;
            let address = &self.connection.address;
            match result {
                Ok(()) => {}
                Err(Some(source)) => {
                    first_error.get_or_insert(KafkaError::Partition {
                        operation: "producing",
                        topic: address.topic.clone(),
                        partition,
                        source,
                    });
                }
                Err(None) => {
                    first_error.get_or_insert(address.timed_out("producing", partition));
                }
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// The record timestamp of a sink record: its event time (ms since the Unix epoch) if it has
/// one, `now` otherwise.
pub(crate) fn timestamp_ms(time: Option<u64>, now_ms: i64) -> i64 {
    time.and_then(|t| i64::try_from(t).ok())
        .filter(|t| DateTime::from_timestamp_millis(*t).is_some())
        .unwrap_or(now_ms)
}

/// The time now, ms since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    i64::try_from(clasp_core::time::now_ns() / 1_000_000).unwrap_or(i64::MAX)
}

impl SinkOutput for KafkaSink {
    fn write(&mut self, name: &str, batch: &Batch) -> std::io::Result<()> {
        let now = now_ms();
        let n = self.partitions.len();
        if let Some(staging) = &mut self.staging {
            for (r, time) in batch.iter_timed() {
                let partition = partition_index(r.key, n, &mut self.next_unkeyed);
                staging.stage(name, partition, timestamp_ms(time, now), r.key, r.value);
            }
            return Ok(());
        }
        let headers: BTreeMap<String, Vec<u8>> =
            [(SINK_HEADER.to_owned(), name.as_bytes().to_vec())].into();
        for (r, time) in batch.iter_timed() {
            let timestamp =
                DateTime::from_timestamp_millis(timestamp_ms(time, now)).unwrap_or_default();
            let i = self.partition_of(r.key);
            self.pending[i].push(Record {
                key: (!r.key.is_empty()).then(|| r.key.to_vec()),
                value: Some(r.value.to_vec()),
                headers: headers.clone(),
                timestamp,
            });
            self.pending_records += 1;
            self.pending_bytes += r.key.len() + r.value.len();
            if self.pending_records >= BATCH_RECORDS || self.pending_bytes >= BATCH_BYTES {
                self.send()?;
            }
        }
        Ok(())
    }

    /// Without checkpoints, sends what is buffered; with them, waits until the committed
    /// checkpoints are produced: records not sealed into a committed checkpoint are never
    /// produced.
    fn flush(&mut self) -> std::io::Result<()> {
        match &self.staging {
            Some(s) => Ok(s.publisher.wait_idle()?),
            None => Ok(self.send()?),
        }
    }

    /// Waits for the previous checkpoint's produce first (the planner starts a checkpoint only
    /// once it is done, so this rarely waits): a segment records each partition's end before
    /// its records, and at most one committed segment is ever outstanding.
    fn seal(&mut self, checkpoint: u64) -> std::io::Result<Option<OutputMark>> {
        let Some(s) = &mut self.staging else { return Ok(None) };
        s.publisher.wait_idle()?;
        let ends = self.partitions.iter().map(|(id, _)| *id).zip(s.publisher.ends()).collect();
        s.seal(checkpoint, ends)?;
        Ok(None)
    }

    /// Hands the committed records to the sink's own thread and returns.
    fn publish(&mut self, checkpoint: u64) -> std::io::Result<()> {
        match &mut self.staging {
            Some(s) => Ok(s.publish(checkpoint)?),
            None => Ok(()),
        }
    }

    fn publishing(&self) -> bool {
        self.staging.as_ref().is_some_and(|s| s.publisher.busy())
    }

    fn discard(&mut self) -> std::io::Result<()> {
        if let Some(s) = &mut self.staging {
            s.discard()?;
        }
        Ok(())
    }
}

/// The partition index of a record with `key` among `n`: murmur2 of the key, as Kafka's own
/// clients do, or round the partitions for unkeyed records.
fn partition_index(key: &[u8], n: usize, next_unkeyed: &mut usize) -> usize {
    if key.is_empty() {
        *next_unkeyed = (*next_unkeyed + 1) % n;
        return *next_unkeyed;
    }
    (murmur2(key) & 0x7fff_ffff) as usize % n
}

/// Kafka's murmur2 (the hash of its clients' default partitioner, `Utils.murmur2`).
pub fn murmur2(data: &[u8]) -> i32 {
    const M: i32 = 0x5bd1_e995;
    const SEED: u32 = 0x9747_b28c;
    // Kafka hashes the length as a Java int; a key is far below 2 GiB (it fits one frame).
    let mut h = (SEED as i32) ^ (data.len() as i32);
    let mut chunks = data.chunks_exact(4);
    for c in chunks.by_ref() {
        let mut k = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= ((k as u32) >> 24) as i32;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() == 3 {
        h ^= i32::from(rest[2]) << 16;
    }
    if rest.len() >= 2 {
        h ^= i32::from(rest[1]) << 8;
    }
    if let Some(&b) = rest.first() {
        h ^= i32::from(b);
        h = h.wrapping_mul(M);
    }
    h ^= ((h as u32) >> 13) as i32;
    h = h.wrapping_mul(M);
    h ^= ((h as u32) >> 15) as i32;
    h
}

#[cfg(test)]
mod tests {
    use super::murmur2;

    /// The cases of Kafka's own `UtilsTest.testMurmur2`.
    #[test]
    fn murmur2_matches_kafkas_clients() {
        let cases: [(&[u8], i32); 6] = [
            (b"21", -973_932_308),
            (b"foobar", -790_332_482),
            (b"a-little-bit-long-string", -985_981_536),
            (b"a-little-bit-longer-string", -1_486_304_829),
            (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58_897_971),
            (b"abc", 479_470_107),
        ];
        for (data, hash) in cases {
            assert_eq!(murmur2(data), hash, "{}", String::from_utf8_lossy(data));
        }
    }
}
