//! The Kafka source: records of a topic's partitions, interleaved one at a time, key and value
//! as the record's, the record timestamp (ms since the Unix epoch) as event time, and the next
//! offset of every partition as the replay position.

use crate::address::{KafkaAddress, Start, Stop};
use crate::connect::Connection;
use crate::error::KafkaError;
use crate::position;
use clasp_core::input::{InputRecord, Next};
use clasp_core::registry::EventTimeFn;
use clasp_core::source::{Source, SourceError, SourcePosition};
use rskafka::client::partition::PartitionClient;
use rskafka::record::RecordAndOffset;
use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most bytes one fetch asks of one partition.
const FETCH_BYTES: i32 = 1 << 20;

/// How long a fetch waits on the broker for new records when a partition has none.
const FETCH_WAIT_MS: i32 = 100;

/// How long records past a gap in a partition's offsets are held back for the gap to fill.
/// A broker may show a batch before an earlier one that is still being written (tansu assigns
/// a batch its offsets, then stores it, and concurrent producers' batches land in either
/// order): reading past the gap would skip the earlier batch for good. A gap that lasts is
/// taken as permanent (compacted records, transaction markers).
const GAP_WAIT: Duration = Duration::from_millis(100);

/// How the source maps records.
#[derive(Clone, Default)]
pub struct SourceOptions {
    /// Reads each record's event time from its value (the spec's `event_time`); without it,
    /// the record timestamp is the event time.
    pub event_time: Option<EventTimeFn>,
    /// Whether the Kafka record key keys the clasp record; when the spec's source has a
    /// `key_field`, it keys records instead and this is false.
    pub record_keys: bool,
}

impl std::fmt::Debug for SourceOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceOptions")
            .field("event_time", &self.event_time.is_some())
            .field("record_keys", &self.record_keys)
            .finish()
    }
}

/// One partition being read.
pub(crate) struct Partition {
    pub(crate) id: i32,
    client: Arc<PartitionClient>,
    /// The next offset to hand out.
    pub(crate) next: i64,
    /// The earliest offset retained when the source opened: how far back a fetch may go.
    earliest: i64,
    /// Where a bounded read ends (exclusive).
    end: Option<i64>,
    buffered: VecDeque<RecordAndOffset>,
    /// Since when the records fetched have begun past `next`.
    gap_since: Option<Instant>,
}

impl Partition {
    pub(crate) fn finished(&self) -> bool {
        self.buffered.is_empty() && self.end.is_some_and(|end| self.next >= end)
    }
}

/// Records of a topic on the source API.
pub struct KafkaSource {
    pub(crate) connection: Connection,
    pub(crate) partitions: Vec<Partition>,
    /// Indices of `partitions` in partition order (how a position lists them).
    by_id: Vec<usize>,
    /// The partition the next record is taken from.
    turn: usize,
    options: SourceOptions,
}

impl std::fmt::Debug for KafkaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaSource")
            .field("address", &self.connection.address)
            .field("next", &self.next_offsets())
            .finish_non_exhaustive()
    }
}

impl KafkaSource {
    /// Connects, checks the topic and its partitions, and finds where each begins and ends.
    pub fn open(address: KafkaAddress, options: SourceOptions) -> Result<Self, KafkaError> {
        let connection = Connection::open(address)?;
        let all = connection.partitions()?;
        let address = &connection.address;
        let chosen = match &address.partitions {
            Some(list) => list.clone(),
            None => all.clone(),
        };
        let mut partitions = Vec::with_capacity(chosen.len());
        for id in chosen {
            if !all.contains(&id) {
                return Err(KafkaError::NoSuchPartition {
                    topic: address.topic.clone(),
                    partition: id,
                    count: all.len(),
                });
            }
            let client = connection.partition(id)?;
            let (earliest, latest) = connection
                .runtime
                .block_on(crate::connect::retained_offsets(&client))
                .map_err(|source| KafkaError::Partition {
                    operation: "reading the offsets",
                    topic: address.topic.clone(),
                    partition: id,
                    source,
                })?;
            let next = match &address.start {
                Start::Earliest => earliest,
                Start::Latest => latest,
                Start::Offsets(map) => match map.get(&id) {
                    Some(&o) if o < earliest || o > latest => {
                        return Err(KafkaError::StartOutOfRange {
                            topic: address.topic.clone(),
                            partition: id,
                            offset: o,
                            earliest,
                            latest,
                        });
                    }
                    Some(&o) => o,
                    None => earliest,
                },
            };
            let end = (address.stop == Stop::Latest).then_some(latest);
            partitions.push(Partition {
                id,
                client,
                next,
                earliest,
                end,
                buffered: VecDeque::new(),
                gap_since: None,
            });
        }
        if let Start::Offsets(map) = &address.start
            && let Some(p) = map.keys().find(|p| !partitions.iter().any(|q| q.id == **p))
        {
            return Err(KafkaError::ForeignPartition {
                topic: address.topic.clone(),
                partition: *p,
            });
        }
        let mut by_id: Vec<usize> = (0..partitions.len()).collect();
        by_id.sort_unstable_by_key(|&i| partitions[i].id);
        Ok(Self { connection, partitions, by_id, turn: 0, options })
    }

    /// The next offset of every partition read.
    pub fn next_offsets(&self) -> BTreeMap<i32, i64> {
        self.partitions.iter().map(|p| (p.id, p.next)).collect()
    }

    /// Fetches from every partition that has nothing buffered and is not finished, at once;
    /// returns how many records arrived.
    pub(crate) fn fetch(&mut self) -> Result<usize, KafkaError> {
        let wanted: Vec<(usize, Arc<PartitionClient>, i64, i64)> = self
            .partitions
            .iter()
            .enumerate()
            .filter(|(_, p)| p.buffered.is_empty() && !p.finished())
            .map(|(i, p)| (i, p.client.clone(), p.next, p.earliest))
            .collect();
        let timeout = self.connection.address.timeout;
        let results = self.connection.runtime.block_on(async move {
            let mut set = tokio::task::JoinSet::new();
            for (i, client, next, earliest) in wanted {
                set.spawn(async move {
                    let answer =
                        tokio::time::timeout(timeout, fetch_holding(&client, next, earliest)).await;
                    (i, answer)
                });
            }
            let mut results = Vec::new();
            while let Some(done) = set.join_next().await {
                results.push(done);
            }
            results
        });
        let mut arrived = 0;
        for done in results {
            let (i, result) = done.map_err(|e| KafkaError::Runtime(io::Error::other(e)))?;
            let p = &mut self.partitions[i];
            let address = &self.connection.address;
            let result = result.map_err(|_| address.timed_out("fetching records", p.id))?;
            let (records, _high_watermark) = result.map_err(|source| KafkaError::Partition {
                operation: "fetching records",
                topic: address.topic.clone(),
                partition: p.id,
                source,
            })?;
            let (next, end) = (p.next, p.end);
            // A fetch returns whole batches: records before the offset asked for are dropped,
            // and so are those past a bounded read's end.
            let records: Vec<RecordAndOffset> = records
                .into_iter()
                .filter(|r| r.offset >= next && end.is_none_or(|end| r.offset < end))
                .collect();
            let run = contiguous_run(records.iter().map(|r| r.offset), next);
            let take = take_now(run, records.len(), &mut p.gap_since, Instant::now());
            // Records past a gap are fetched again: the gap may fill meanwhile.
            p.buffered.extend(records.into_iter().take(take));
            arrived += p.buffered.len();
        }
        Ok(arrived)
    }

    /// Takes the next buffered record, partitions in turn.
    pub(crate) fn take(&mut self) -> Option<(usize, RecordAndOffset)> {
        let n = self.partitions.len();
        for k in 0..n {
            let i = (self.turn + k) % n;
            if let Some(r) = self.partitions[i].buffered.pop_front() {
                self.turn = (i + 1) % n;
                return Some((i, r));
            }
        }
        None
    }

    fn fill(&self, partition: i32, r: RecordAndOffset, rec: &mut InputRecord) -> io::Result<()> {
        let Some(value) = r.record.value else {
            return Err(KafkaError::BadRecord {
                topic: self.connection.address.topic.clone(),
                partition,
                offset: r.offset,
                why: "the record has no value (a tombstone), which is no clasp record",
            }
            .into());
        };
        rec.value = value;
        if self.options.record_keys
            && let Some(key) = r.record.key
        {
            rec.key = key;
            rec.keyed = true;
        }
        rec.time = match &self.options.event_time {
            Some(f) => f(&rec.value),
            None => u64::try_from(r.record.timestamp.timestamp_millis()).ok(),
        };
        Ok(())
    }
}

/// How many of `offsets` (ascending) continue `next` without a gap: `next`, `next + 1`, …
fn contiguous_run(offsets: impl Iterator<Item = i64>, next: i64) -> usize {
    offsets.zip(next..).take_while(|(offset, expected)| offset == expected).count()
}

/// How many of `fetched` records to take at `now`, the first `run` of them without a gap: those,
/// or when the gap comes first, none until it has lasted [`GAP_WAIT`] (since `gap_since`,
/// which this keeps), then all.
fn take_now(run: usize, fetched: usize, gap_since: &mut Option<Instant>, now: Instant) -> usize {
    if run > 0 || fetched == 0 {
        *gap_since = None;
        return run;
    }
    let since = *gap_since.get_or_insert(now);
    if now.saturating_duration_since(since) < GAP_WAIT {
        return 0;
    }
    *gap_since = None;
    fetched
}

/// Fetches the records from offset `next` on: the batch holding `next` and those after it
/// (records before `next` included, for the caller to drop), and the high watermark.
///
/// A Kafka broker answers a fetch with the batch that holds the offset asked for. Some
/// Kafka-protocol brokers (tansu 0.6) answer with the batches that *begin* at or after it, so
/// an offset inside a batch — where a checkpoint, a recovery or explicit start offsets put a
/// source — would skip the rest of that batch. When the first record is past `next`, or none
/// comes though the high watermark is past it, the fetch is repeated from twice as far back
/// each time until a batch holds `next` or the partition's earliest offset is reached (a gap
/// left there is a real one: compacted or control records).
/// Fetches from batch boundaries, a source's usual case, answer the first time.
pub(crate) async fn fetch_holding(
    client: &PartitionClient,
    next: i64,
    earliest: i64,
) -> Result<(Vec<RecordAndOffset>, i64), rskafka::client::error::Error> {
    let first = client.fetch_records(next, 1..FETCH_BYTES, FETCH_WAIT_MS).await?;
    // Holding `next`: the first record is at or before it, or there is nothing from it on.
    let holds = |(records, high_watermark): &(Vec<RecordAndOffset>, i64)| match records.first() {
        Some(r) => r.offset <= next,
        None => next >= *high_watermark,
    };
    if holds(&first) || next <= earliest {
        return Ok(first);
    }
    let mut back = 1i64;
    loop {
        let from = next.saturating_sub(back).max(earliest);
        let answer = client.fetch_records(from, 1..FETCH_BYTES, 0).await?;
        if holds(&answer) || from == earliest {
            return Ok(answer);
        }
        back = back.saturating_mul(2);
    }
}

impl Source for KafkaSource {
    fn next_record(&mut self, rec: &mut InputRecord) -> io::Result<Next> {
        loop {
            if let Some((i, r)) = self.take() {
                let id = self.partitions[i].id;
                self.partitions[i].next = r.offset + 1;
                self.fill(id, r, rec)?;
                return Ok(Next::Record);
            }
            if self.partitions.iter().all(Partition::finished) {
                return Ok(Next::End);
            }
            if self.fetch()? == 0 {
                return Ok(Next::Idle);
            }
        }
    }

    fn position(&self) -> SourcePosition {
        let mut at = SourcePosition::default();
        self.position_into(&mut at);
        at
    }

    /// Asked before every record: written in place, without the map of `next_offsets`.
    fn position_into(&self, out: &mut SourcePosition) {
        let next = self.by_id.iter().map(|&i| (self.partitions[i].id, self.partitions[i].next));
        position::encode_into(&mut out.0, next);
    }

    /// Offsets go back as well as forward, while the broker retains them.
    fn rewindable(&self) -> bool {
        true
    }

    fn seek(&mut self, to: &SourcePosition) -> Result<(), SourceError> {
        let topic = || self.connection.address.topic.clone();
        let next = position::decode(&to.0)
            .map_err(|source| io::Error::from(KafkaError::Seek { topic: topic(), source }))?;
        if let Some(p) = next.keys().find(|p| !self.partitions.iter().any(|q| q.id == **p)) {
            return Err(io::Error::from(KafkaError::ForeignPartition {
                topic: topic(),
                partition: *p,
            })
            .into());
        }
        for p in &mut self.partitions {
            if let Some(&o) = next.get(&p.id) {
                p.next = o;
                p.buffered.clear();
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{GAP_WAIT, contiguous_run, take_now};
    use std::time::{Duration, Instant};

    #[test]
    fn records_past_a_gap_wait_for_it_and_then_are_taken() {
        let t0 = Instant::now();
        let mut since = None;
        // The gap comes first: nothing yet, however many fetches.
        assert_eq!(take_now(0, 3, &mut since, t0), 0);
        assert_eq!(take_now(0, 3, &mut since, t0 + GAP_WAIT / 2), 0);
        // It filled: the run is taken and the wait forgotten.
        assert_eq!(take_now(2, 3, &mut since, t0 + GAP_WAIT / 2), 2);
        assert_eq!(since, None);
        // A gap that lasts is taken as permanent, counted from when it was first seen.
        let t1 = t0 + Duration::from_secs(1);
        assert_eq!(take_now(0, 3, &mut since, t1), 0);
        assert_eq!(take_now(0, 3, &mut since, t1 + GAP_WAIT - Duration::from_millis(1)), 0);
        assert_eq!(take_now(0, 3, &mut since, t1 + GAP_WAIT), 3);
        assert_eq!(since, None);
        // Nothing fetched is no gap.
        assert_eq!(take_now(0, 0, &mut since, t1), 0);
        assert_eq!(since, None);
    }

    #[test]
    fn the_run_stops_at_the_first_gap() {
        assert_eq!(contiguous_run([45, 46, 47].into_iter(), 45), 3);
        // A batch still being written at 46: 47 and 48 wait for it.
        assert_eq!(contiguous_run([45, 47, 48].into_iter(), 45), 1);
        assert_eq!(contiguous_run([47, 48].into_iter(), 45), 0);
        assert_eq!(contiguous_run(std::iter::empty(), 45), 0);
    }
}
