//! The exactly-once Kafka sink: records are produced by checkpoint.
//!
//! The records of an epoch are staged in memory. A checkpoint's boundary seals them into a
//! [`Segment`] with each partition's end offset, and puts the segment into the checkpoint
//! store (named after the checkpoint, so it is part of it: written before the manifest, pruned
//! with it). Once the checkpoint's manifest is written, the segment's records are produced on
//! the sink's own thread ([`crate::publisher`]), each carrying headers `clasp-checkpoint` (the
//! checkpoint's id) and `clasp-seq` (its index in the segment), and the segment is deleted
//! from the store. A recovery drops what is staged and sealed but not committed: the replay
//! produces those records again.
//!
//! The one window is a planner that dies after the manifest is written and before the
//! produce is acknowledged: some of the committed checkpoint's records may be in the topic.
//! A job resumed from that checkpoint ([`complete`]) finds its segment still in the store,
//! reads each partition from the segment's end offsets for records of that checkpoint, and
//! produces only the sequence numbers missing. So the topic holds every result exactly once,
//! as long as nothing else writes records with these headers to it and the partitions still
//! retain the offsets the segment names.

use crate::error::KafkaError;
use crate::publisher::Publisher;
use crate::segment::{self, Segment, StagedRecord};
use crate::sink::{BATCH_RECORDS, KafkaSink, SINK_HEADER};
use clasp_runtime::fault::store::CheckpointStore;
use rskafka::chrono::DateTime;
use rskafka::record::Record;
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// The header holding the id of the checkpoint a record was committed with (decimal).
pub const CHECKPOINT_HEADER: &str = "clasp-checkpoint";

/// The header holding a record's index in its checkpoint's segment (decimal).
pub const SEQ_HEADER: &str = "clasp-seq";

/// The staged and sealed records of an exactly-once sink.
pub(crate) struct Staging {
    store: Arc<dyn CheckpointStore>,
    /// The records since the last boundary, and the sink names they refer to.
    pending: Vec<StagedRecord>,
    sinks: Vec<String>,
    /// Sealed segments not yet committed, oldest first.
    sealed: Vec<Segment>,
    /// Produces the committed ones.
    pub(crate) publisher: Publisher,
}

impl Staging {
    pub(crate) fn new(store: Arc<dyn CheckpointStore>, publisher: Publisher) -> Self {
        Self { store, pending: Vec::new(), sinks: Vec::new(), sealed: Vec::new(), publisher }
    }

    /// Stages one record for partition index `partition`.
    pub(crate) fn stage(
        &mut self,
        sink: &str,
        partition: usize,
        timestamp_ms: i64,
        key: &[u8],
        value: &[u8],
    ) {
        let sink = match self.sinks.iter().position(|s| s == sink) {
            Some(i) => i,
            None => {
                self.sinks.push(sink.to_owned());
                self.sinks.len() - 1
            }
        };
        // A topic's partitions and a pipeline's sinks number far below 2^32.
        self.pending.push(StagedRecord {
            partition: partition as u32,
            sink: sink as u32,
            timestamp_ms,
            key: (!key.is_empty()).then(|| key.to_vec()),
            value: value.to_vec(),
        });
    }

    /// Seals the staged records as checkpoint `checkpoint`'s and puts them into the store.
    pub(crate) fn seal(
        &mut self,
        checkpoint: u64,
        ends: Vec<(i32, i64)>,
    ) -> Result<(), KafkaError> {
        let segment = Segment {
            checkpoint,
            ends,
            sinks: std::mem::take(&mut self.sinks),
            records: std::mem::take(&mut self.pending),
        };
        let name = segment::name(checkpoint);
        self.store.put(&name, &segment.encode()).map_err(|source| KafkaError::Store {
            operation: "writing",
            name,
            source,
        })?;
        self.sealed.push(segment);
        Ok(())
    }

    /// Checkpoint `checkpoint` committed: hands its segment (and any older one) to the
    /// publisher, which produces it and then deletes it from the store.
    pub(crate) fn publish(&mut self, checkpoint: u64) -> Result<(), KafkaError> {
        while let Some(pos) = self.sealed.iter().position(|s| s.checkpoint <= checkpoint) {
            self.publisher.submit(self.sealed.remove(pos))?;
        }
        Ok(())
    }

    /// A recovery: drops every record not committed, and the sealed segments from the store.
    pub(crate) fn discard(&mut self) -> Result<(), KafkaError> {
        self.pending.clear();
        self.sinks.clear();
        for s in std::mem::take(&mut self.sealed) {
            delete_segment(&*self.store, s.checkpoint)?;
        }
        Ok(())
    }
}

/// Deletes checkpoint `checkpoint`'s segment from `store`.
pub(crate) fn delete_segment(
    store: &dyn CheckpointStore,
    checkpoint: u64,
) -> Result<(), KafkaError> {
    let name = segment::name(checkpoint);
    store.delete(&name).map_err(|source| KafkaError::Store { operation: "deleting", name, source })
}

/// Produces the records of `segment` whose sequence numbers are not in `skip`, a round of up
/// to [`BATCH_RECORDS`] per partition at a time, so only a round is ever built as Kafka records.
pub(crate) fn produce_segment(
    sink: &mut KafkaSink,
    segment: Segment,
    skip: &HashSet<u64>,
) -> Result<(), KafkaError> {
    let checkpoint = segment.checkpoint.to_string().into_bytes();
    let round = BATCH_RECORDS * sink.partitions.len();
    let (mut batches, mut built): (BTreeMap<usize, Vec<Record>>, usize) = Default::default();
    for (seq, r) in segment.records.into_iter().enumerate() {
        let seq = seq as u64;
        if skip.contains(&seq) {
            continue;
        }
        let (id, _) = segment.ends[r.partition as usize];
        let Some(index) = sink.partitions.iter().position(|(p, _)| *p == id) else {
            return Err(KafkaError::ForeignPartition {
                topic: sink.connection.address.topic.clone(),
                partition: id,
            });
        };
        let headers = [
            (SINK_HEADER.to_owned(), segment.sinks[r.sink as usize].as_bytes().to_vec()),
            (CHECKPOINT_HEADER.to_owned(), checkpoint.clone()),
            (SEQ_HEADER.to_owned(), seq.to_string().into_bytes()),
        ]
        .into();
        batches.entry(index).or_default().push(Record {
            key: r.key,
            value: Some(r.value),
            headers,
            timestamp: DateTime::from_timestamp_millis(r.timestamp_ms).unwrap_or_default(),
        });
        built += 1;
        if built >= round {
            sink.produce(std::mem::take(&mut batches).into_iter().collect())?;
            built = 0;
        }
    }
    sink.produce(batches.into_iter().collect())
}

/// A resumed job starts from committed checkpoint `id`: if its segment is still in the store
/// (the previous run died before its produce was acknowledged and the segment deleted),
/// produces the records of it the topic does not have yet.
pub(crate) fn complete(
    sink: &mut KafkaSink,
    store: &dyn CheckpointStore,
    id: u64,
) -> Result<(), KafkaError> {
    let name = segment::name(id);
    let Some(bytes) = store.get(&name).map_err(|source| KafkaError::Store {
        operation: "reading",
        name: name.clone(),
        source,
    })?
    else {
        return Ok(());
    };
    let segment = Segment::decode(&bytes)
        .map_err(|source| KafkaError::Segment { name: name.clone(), source })?;
    if segment.checkpoint != id {
        return Err(KafkaError::Segment {
            name,
            source: segment::SegmentError::Inconsistent { why: "it names another checkpoint" },
        });
    }
    let there = produced_of(sink, &segment)?;
    produce_segment(sink, segment, &there)?;
    delete_segment(store, id)
}

/// The sequence numbers of `segment`'s records already in the topic: those of its checkpoint
/// after each partition's end offset at its boundary.
fn produced_of(sink: &KafkaSink, segment: &Segment) -> Result<HashSet<u64>, KafkaError> {
    let checkpoint = segment.checkpoint.to_string().into_bytes();
    let mut there = HashSet::new();
    for (id, from) in segment.ends_by_partition() {
        let Some(index) = sink.partitions.iter().position(|(p, _)| *p == id) else {
            return Err(KafkaError::ForeignPartition {
                topic: sink.connection.address.topic.clone(),
                partition: id,
            });
        };
        let client = sink.partitions[index].1.clone();
        let failed = |source| KafkaError::Partition {
            operation: "reading what a checkpoint produced",
            topic: sink.connection.address.topic.clone(),
            partition: id,
            source,
        };
        let runtime = &sink.connection.runtime;
        let (earliest, end) =
            runtime.block_on(crate::connect::retained_offsets(&client)).map_err(failed)?;
        let mut next = from.max(earliest);
        while next < end {
            let (records, _) = runtime
                .block_on(crate::source::fetch_holding(&client, next, earliest))
                .map_err(failed)?;
            let Some(last) = records.last().map(|r| r.offset) else { break };
            for r in records.iter().filter(|r| r.offset >= next) {
                let headers = &r.record.headers;
                if headers.get(CHECKPOINT_HEADER) == Some(&checkpoint)
                    && let Some(seq) = headers
                        .get(SEQ_HEADER)
                        .and_then(|s| std::str::from_utf8(s).ok())
                        .and_then(|s| s.parse().ok())
                {
                    there.insert(seq);
                }
            }
            next = last + 1;
        }
    }
    Ok(there)
}

#[cfg(test)]
mod tests {
    //! Against a real broker (`CLASP_KAFKA_BROKERS`; skipped without one unless
    //! `CLASP_REQUIRE_KAFKA=1`).

    use super::*;
    use crate::source::{KafkaSource, SourceOptions};
    use crate::topics::test_broker as broker;
    use clasp_core::Batch;
    use clasp_core::input::{InputRecord, Next};
    use clasp_core::source::Source;
    use clasp_runtime::planner::SinkOutput;

    fn batch(from: u32, n: u32) -> Batch {
        let mut b = Batch::default();
        for i in from..from + n {
            b.push(format!("k{}", i % 7).as_bytes(), format!("v{i}").as_bytes());
        }
        b
    }

    /// Every value in the topic, sorted.
    fn values(broker: &str, topic: &str) -> Vec<String> {
        let address = crate::KafkaAddress::parse(&format!("{broker}/{topic}?stop=latest"), false);
        let mut source = KafkaSource::open(address.unwrap(), SourceOptions::default()).unwrap();
        let (mut rec, mut all) = (InputRecord::default(), Vec::new());
        loop {
            clasp_core::source::reset(&mut rec);
            match source.next_record(&mut rec).unwrap() {
                Next::Record => all.push(String::from_utf8(rec.value.clone()).unwrap()),
                Next::Idle => {}
                Next::End => break,
            }
        }
        all.sort_unstable();
        all
    }

    fn expected(n: u32) -> Vec<String> {
        let mut v: Vec<String> = (0..n).map(|i| format!("v{i}")).collect();
        v.sort_unstable();
        v
    }

    /// Records reach the topic only once their checkpoint commits; a recovery drops the rest;
    /// and a planner that died after a commit with part of its produce done is completed by
    /// the resumed job without duplicates.
    #[test]
    fn records_go_out_by_checkpoint_and_a_resume_completes_a_cut_produce_once() {
        let Some(broker) = broker() else { return };
        let topic = format!("clasp-unit-{}-staging", std::process::id());
        crate::topics::create_topic(&broker, &topic, 3).unwrap();
        let dir = std::env::temp_dir().join(format!("clasp-kafka-{}-staging", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = clasp_runtime::fault::store::open(&dir.display().to_string()).unwrap();
        let spec = format!("{broker}/{topic}");
        let mut sink = crate::open_exactly_once_sink(&spec, store.clone(), None).unwrap();
        sink.write("counts", &batch(0, 100)).unwrap();
        sink.seal(1).unwrap();
        assert!(values(&broker, &topic).is_empty(), "nothing before the commit");
        sink.publish(1).unwrap();
        sink.flush().unwrap();
        assert_eq!(values(&broker, &topic), expected(100));
        assert_eq!(store.get(&segment::name(1)).unwrap(), None, "produced, then deleted");
        // Sealed and staged records of a dropped epoch never reach the topic.
        sink.write("counts", &batch(100, 30)).unwrap();
        sink.seal(2).unwrap();
        sink.write("counts", &batch(130, 5)).unwrap();
        sink.discard().unwrap();
        assert_eq!(store.get(&segment::name(2)).unwrap(), None);
        // Checkpoint 3 commits; the planner dies with half of its records produced.
        sink.write("counts", &batch(100, 60)).unwrap();
        sink.seal(3).unwrap();
        let mut staging = sink.staging.take().unwrap();
        let segment = staging.sealed.remove(0);
        let odd: HashSet<u64> = (0..60).filter(|s| s % 2 == 1).collect();
        produce_segment(&mut sink, segment, &odd).unwrap();
        drop(sink);
        assert_eq!(values(&broker, &topic).len(), 130);
        let resumed = crate::open_exactly_once_sink(&spec, store.clone(), Some(3)).unwrap();
        assert_eq!(values(&broker, &topic), expected(160), "each record once");
        assert_eq!(store.get(&segment::name(3)).unwrap(), None);
        drop(resumed);
        // Resuming again from the same checkpoint produces nothing more.
        drop(crate::open_exactly_once_sink(&spec, store, Some(3)).unwrap());
        assert_eq!(values(&broker, &topic), expected(160));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
