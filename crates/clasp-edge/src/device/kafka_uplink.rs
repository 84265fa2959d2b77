//! The device's Kafka uplink: every cut stream's items produced to one topic
//! ([`crate::kafka_stream`] for the records), each stream's end after its last item.
//!
//! Each flush hands the items of that flush to a producing thread, which sends them when the
//! emulated link would have delivered them (the same token bucket and delay as the TCP
//! connector's shaper, on the records' bytes) and waits for the partition leaders'
//! acknowledgements. A produce that fails is sent again, on a new connection if need be, until
//! [`KafkaLinkOptions::reconnect_timeout`]: an item is in the topic at least once, and the
//! cloud discards the numbers it already holds, so each is taken once. Items not yet
//! acknowledged are bounded in bytes ([`KafkaLinkOptions::resend_buffer`]): when they fill it
//! the device waits before it reads on.

use super::uplink::LinkCounts;
use crate::error::EdgeError;
use crate::kafka_stream::{self, StreamEnd};
use crate::protocol::{Hello, Item};
use crate::shaper::LinkShape;
use clasp_core::Batch;
use clasp_core::sync::lock;
use clasp_kafka::records::{OutRecord, RecordProducer};
use crossbeam_channel::Sender;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How a device reaches the topic.
#[derive(Clone, Debug)]
pub(super) struct KafkaLinkOptions {
    /// `BROKERS/TOPIC[?timeout_ms=N]`.
    pub(super) spec: String,
    pub(super) shape: LinkShape,
    pub(super) reconnect_timeout: Duration,
    pub(super) resend_buffer: usize,
}

/// Bytes handed to the producing thread and not yet acknowledged; whether it stopped.
#[derive(Default)]
struct InFlight {
    state: Mutex<(usize, bool)>,
    changed: Condvar,
}

impl InFlight {
    fn release(&self, bytes: usize) {
        lock(&self.state).0 -= bytes;
        self.changed.notify_all();
    }

    fn stopped(&self) {
        lock(&self.state).1 = true;
        self.changed.notify_all();
    }

    /// Waits until `bytes` more fit under `limit` (one flush larger than it still goes,
    /// alone) and counts them; false if the thread stopped.
    fn reserve(&self, bytes: usize, limit: usize) -> bool {
        let mut s = lock(&self.state);
        while s.0 > 0 && s.0 + bytes > limit && !s.1 {
            s = self.changed.wait(s).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        s.0 += bytes;
        !s.1
    }
}

/// One flush's records, due when the emulated link delivers them.
struct Flight {
    records: Vec<OutRecord>,
    bytes: usize,
    due: Instant,
}

/// What the producing thread did.
#[derive(Default)]
struct Delivered {
    reconnects: u64,
    resent: u64,
    resent_bytes: u64,
}

/// The device's uplink through a Kafka topic.
pub(super) struct KafkaUplink {
    opts: KafkaLinkOptions,
    hello: Hello,
    keys: Vec<Vec<u8>>,
    run: u64,
    next_seq: Vec<u64>,
    counts: LinkCounts,
    pending: Vec<OutRecord>,
    pending_bytes: usize,
    /// When the emulated link is free again.
    free: Instant,
    in_flight: Arc<InFlight>,
    tx: Option<Sender<Flight>>,
    thread: Option<JoinHandle<Result<Delivered, EdgeError>>>,
}

impl KafkaUplink {
    /// Connects to the topic's cluster (failing at once if no broker answers) and starts the
    /// producing thread.
    pub(super) fn open(opts: KafkaLinkOptions, hello: &Hello) -> Result<Self, EdgeError> {
        let what = || format!("device `{}`: the Kafka uplink `{}`", hello.device, opts.spec);
        let producer = RecordProducer::open(&opts.spec)
            .map_err(|source| EdgeError::Kafka { what: what(), source })?;
        let n = hello.connectors.len();
        let in_flight = Arc::new(InFlight::default());
        let (tx, rx) = crossbeam_channel::unbounded::<Flight>();
        let (shared, spec, timeout, who) =
            (in_flight.clone(), opts.spec.clone(), opts.reconnect_timeout, what());
        let thread = std::thread::Builder::new()
            .name(format!("kafka-uplink-{}", hello.device))
            .spawn(move || {
                let result = deliver(producer, &rx, &shared, &spec, timeout, &who);
                shared.stopped();
                result
            })
            .expect("spawn the Kafka uplink");
        Ok(Self {
            keys: hello.connectors.iter().map(|c| kafka_stream::key(&hello.device, c)).collect(),
            run: kafka_stream::new_run(),
            next_seq: vec![0; n],
            counts: LinkCounts { sent: vec![0; n], ..LinkCounts::default() },
            pending: Vec::new(),
            pending_bytes: 0,
            free: Instant::now(),
            in_flight,
            tx: Some(tx),
            thread: Some(thread),
            opts,
            hello: hello.clone(),
        })
    }

    /// Adds one item of connector `c` to the next flush.
    pub(super) fn data(
        &mut self,
        c: usize,
        origin_ns: u64,
        watermark: Option<u64>,
        records: &Batch,
    ) -> Result<(), EdgeError> {
        let item = Item { seq: self.next_seq[c], origin_ns, watermark, records };
        let record = kafka_stream::item_record(&self.keys[c], self.run, &item);
        self.next_seq[c] += 1;
        self.counts.sent[c] += records.len() as u64;
        self.counts.frames += 1;
        self.push(record);
        Ok(())
    }

    fn push(&mut self, record: OutRecord) {
        let bytes = record.payload_bytes();
        self.counts.bytes += bytes as u64;
        self.pending_bytes += bytes;
        self.pending.push(record);
    }

    /// Hands the items added since the last flush to the producing thread, waiting first while
    /// the bytes not yet acknowledged fill the resend buffer.
    pub(super) fn flush(&mut self) -> Result<(), EdgeError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let bytes = std::mem::take(&mut self.pending_bytes);
        let now = Instant::now();
        let due = if self.opts.shape.is_shaped() {
            self.opts.shape.delivery(now, bytes, &mut self.free)
        } else {
            now
        };
        let flight = Flight { records: std::mem::take(&mut self.pending), bytes, due };
        let sent = self.in_flight.reserve(bytes, self.opts.resend_buffer)
            && self.tx.as_ref().is_some_and(|tx| tx.send(flight).is_ok());
        if sent { Ok(()) } else { Err(self.stopped()) }
    }

    /// The producing thread's error, once it has stopped.
    fn stopped(&mut self) -> EdgeError {
        self.tx.take();
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(Err(e))) => e,
            _ => EdgeError::Runtime(format!(
                "device `{}`: the Kafka uplink stopped producing",
                self.hello.device
            )),
        }
    }

    /// Produces every stream's end after its items, waits until all are acknowledged and
    /// returns what the link did.
    pub(super) fn finish(mut self) -> Result<LinkCounts, EdgeError> {
        for c in 0..self.keys.len() {
            let end = StreamEnd {
                items: self.next_seq[c],
                records: self.counts.sent[c],
                pipeline: self.hello.pipeline.clone(),
                mode: self.hello.mode.clone(),
            };
            let record = kafka_stream::end_record(&self.keys[c], self.run, &end);
            self.push(record);
        }
        self.flush()?;
        self.tx.take();
        let delivered = match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result?,
            _ => return Err(EdgeError::Runtime("the Kafka uplink panicked".into())),
        };
        let mut counts = std::mem::take(&mut self.counts);
        counts.reconnects = delivered.reconnects;
        counts.resent = delivered.resent;
        counts.bytes += delivered.resent_bytes;
        Ok(counts)
    }
}

/// Produces every flight when due, each until acknowledged: after a failure the records not
/// acknowledged go again, on a new connection when the old one will not take them, until
/// `timeout` has passed without success.
fn deliver(
    mut producer: RecordProducer,
    rx: &crossbeam_channel::Receiver<Flight>,
    in_flight: &InFlight,
    spec: &str,
    timeout: Duration,
    what: &str,
) -> Result<Delivered, EdgeError> {
    let mut done = Delivered::default();
    for flight in rx {
        let wait = flight.due.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        let mut records = flight.records;
        let mut deadline = None;
        while let Err(failed) = producer.produce(records) {
            let deadline = *deadline.get_or_insert_with(|| Instant::now() + timeout);
            if Instant::now() >= deadline {
                return Err(EdgeError::Kafka {
                    what: format!("{what}: producing failed for {} s", timeout.as_secs()),
                    source: failed.error,
                });
            }
            tracing::warn!("{what}: {}; producing again", failed.error);
            records = failed.unacked;
            done.resent += records.len() as u64;
            done.resent_bytes += records.iter().map(|r| r.payload_bytes() as u64).sum::<u64>();
            std::thread::sleep(Duration::from_millis(100));
            match RecordProducer::open(spec) {
                Ok(p) => {
                    producer = p;
                    done.reconnects += 1;
                }
                Err(e) => tracing::warn!("{what}: connecting again: {e}"),
            }
        }
        in_flight.release(flight.bytes);
    }
    Ok(done)
}
