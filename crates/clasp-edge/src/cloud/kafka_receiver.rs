//! The cut streams from a Kafka topic (`--uplink kafka:…`): one thread reads the topic
//! ([`crate::kafka_stream`] for its records), takes each stream's items in order once —
//! discarding numbers it already holds, which a device produces again after a failed
//! acknowledgement — and puts them on their connector's queue, as a device's receiver does for
//! the TCP connector; a connector's queue closes when every device sending it has ended it.
//!
//! There are no connections to watch, so the topic is: a device none of whose records arrived
//! within the join timeout of the start, or that produced nothing for the reconnect timeout
//! before ending its streams, fails the run, as one that does not join or does not connect
//! again does over TCP.

use super::connector::Frame;
use super::report::LinkReport;
use super::{Cloud, CloudReport};
use crate::error::EdgeError;
use crate::input::InputSpec;
use crate::kafka_stream::{self, Kind, StreamEnd};
use crate::protocol::{Fresh, Hello, Item, Received, SequenceError};
use clasp_core::sync::lock;
use clasp_core::{Registry, SourceId};
use clasp_kafka::records::{InRecord, Polled, RecordReader};
use clasp_runtime::cluster::Cluster;
use clasp_runtime::planner::SinkOutput;
use crossbeam_channel::Sender;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Connects to the topic of `spec` (`BROKERS/TOPIC[?OPTIONS]`, the source's options).
pub(super) fn open(spec: &str) -> Result<RecordReader, EdgeError> {
    RecordReader::open(spec).map_err(|source| EdgeError::Kafka {
        what: format!("the cloud: the Kafka uplink `{spec}`"),
        source,
    })
}

impl Cloud {
    /// [`Cloud::run`] with the cut streams read from `reader`'s topic.
    pub(super) fn run_kafka(
        &self,
        reader: RecordReader,
        mut cluster: Option<Cluster>,
        held: Vec<(SourceId, InputSpec)>,
        registry: &Registry,
        mut sink: Option<Box<dyn SinkOutput>>,
    ) -> Result<CloudReport, EdgeError> {
        let expected = self.expected_hellos()?;
        let (senders, receivers) = self.queues();
        let ingress_of = |c: &String| {
            self.graph.ingress.iter().position(|x| &x.name == c).expect("the cloud's connector")
        };
        let outs: Vec<Vec<Option<Sender<Frame>>>> = expected
            .iter()
            .map(|h| h.connectors.iter().map(|c| Some(senders[ingress_of(c)].clone())).collect())
            .collect();
        drop(senders);
        let senders_of: Vec<Vec<usize>> = self
            .graph
            .ingress
            .iter()
            .map(|c| (0..expected.len()).filter(|&d| expected[d].connectors.contains(&c.name)))
            .map(Iterator::collect)
            .collect();
        let links: Vec<Arc<Mutex<LinkReport>>> = expected
            .iter()
            .map(|h| {
                Arc::new(Mutex::new(LinkReport {
                    device: h.device.clone(),
                    records: h.connectors.iter().map(|c| (c.clone(), 0)).collect(),
                    ..LinkReport::default()
                }))
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let streams = Streams::new(expected, outs, links.clone(), &self.opts);
        let receiving = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("edge-from-kafka".into())
                .spawn(move || streams.receive(reader, &stop))
                .expect("spawn the Kafka receiver")
        };
        if let Some(started) = &self.opts.started {
            let _ = started.send(());
        }
        let started = Instant::now();
        let outcome = match cluster.as_mut() {
            Some(c) => self.run_runtime(c, receivers, &senders_of, held, registry),
            None => self.run_direct(receivers, held, sink.take().expect("unused")),
        };
        let makespan_s = started.elapsed().as_secs_f64();
        stop.store(true, Ordering::Release);
        let received = receiving
            .join()
            .unwrap_or_else(|_| Err(EdgeError::Runtime("the Kafka receiver panicked".into())));
        let report = self.conclude(cluster, outcome, &links, Vec::new(), makespan_s);
        received.and(report)
    }
}

/// What the cloud knows of every device's streams in the topic.
struct Streams {
    expected: Vec<Hello>,
    /// Per device, the queue of each of its connectors until the stream ends.
    outs: Vec<Vec<Option<Sender<Frame>>>>,
    links: Vec<Arc<Mutex<LinkReport>>>,
    /// Per device, the number of its first stream among all (its streams follow).
    first_stream: Vec<usize>,
    received: Received,
    /// Records taken per stream.
    records: Vec<u64>,
    ended: Vec<bool>,
    /// Per device, its run and when its last record arrived.
    heard: Vec<Option<(u64, Instant)>>,
    join_timeout: Duration,
    silence_timeout: Duration,
}

impl Streams {
    fn new(
        expected: Vec<Hello>,
        outs: Vec<Vec<Option<Sender<Frame>>>>,
        links: Vec<Arc<Mutex<LinkReport>>>,
        opts: &super::CloudOptions,
    ) -> Self {
        let mut first_stream = Vec::with_capacity(expected.len());
        let mut n = 0;
        for h in &expected {
            first_stream.push(n);
            n += h.connectors.len();
        }
        Self {
            heard: vec![None; expected.len()],
            expected,
            outs,
            links,
            first_stream,
            received: Received::new(n),
            records: vec![0; n],
            ended: vec![false; n],
            join_timeout: opts.join_timeout,
            silence_timeout: opts.reconnect_timeout,
        }
    }

    /// Reads the topic until every stream has ended (or `stop`: the run is over).
    fn receive(mut self, mut reader: RecordReader, stop: &AtomicBool) -> Result<(), EdgeError> {
        let start = Instant::now();
        let topic = reader.topic().to_owned();
        let kafka =
            |source| EdgeError::Kafka { what: format!("the cloud: topic `{topic}`"), source };
        while self.ended.iter().any(|e| !e) && !stop.load(Ordering::Acquire) {
            match reader.poll().map_err(kafka)? {
                Polled::Record(r) => self.take(&topic, r)?,
                Polled::Idle => {}
                Polled::End => {
                    return Err(self.stalled(&topic, "the topic's records ended (stop=latest)"));
                }
            }
            self.check_timeouts(&topic, start)?;
        }
        Ok(())
    }

    /// Devices that have not ended, with `why` the cloud stopped waiting for them.
    fn stalled(&self, topic: &str, why: &str) -> EdgeError {
        let open: Vec<&str> = (0..self.expected.len())
            .filter(|&d| !self.device_ended(d))
            .map(|d| self.expected[d].device.as_str())
            .collect();
        EdgeError::Protocol {
            peer: format!("the Kafka topic `{topic}`"),
            problem: format!("{why} before device(s) {} ended their streams", open.join(", ")),
        }
    }

    fn device_ended(&self, d: usize) -> bool {
        let first = self.first_stream[d];
        self.ended[first..first + self.expected[d].connectors.len()].iter().all(|e| *e)
    }

    /// A device not heard from within the join timeout, or silent for the reconnect timeout
    /// before its end, fails the run.
    fn check_timeouts(&self, topic: &str, start: Instant) -> Result<(), EdgeError> {
        let peer = || format!("the Kafka topic `{topic}`");
        let missing: Vec<&str> = (0..self.expected.len())
            .filter(|&d| self.heard[d].is_none())
            .map(|d| self.expected[d].device.as_str())
            .collect();
        if !missing.is_empty() && start.elapsed() > self.join_timeout {
            return Err(EdgeError::Protocol {
                peer: peer(),
                problem: format!(
                    "no record of device(s) {} arrived within {} s of the start (--join-timeout-s): start `clasp edge --device ID --uplink kafka:…` for each",
                    missing.join(", "),
                    self.join_timeout.as_secs()
                ),
            });
        }
        for (d, heard) in self.heard.iter().enumerate() {
            if let Some((_, at)) = heard
                && at.elapsed() > self.silence_timeout
                && !self.device_ended(d)
            {
                return Err(EdgeError::Protocol {
                    peer: peer(),
                    problem: format!(
                        "device `{}` produced nothing for {} s (--reconnect-timeout-s) and has not ended its streams",
                        self.expected[d].device,
                        self.silence_timeout.as_secs()
                    ),
                });
            }
        }
        Ok(())
    }

    /// Takes one record of the topic.
    fn take(&mut self, topic: &str, r: InRecord) -> Result<(), EdgeError> {
        let bad = |why: String| EdgeError::BadRecord {
            topic: topic.to_owned(),
            partition: r.partition,
            offset: r.offset,
            why,
        };
        let (d, c) = self.stream_of(r.key.as_deref()).map_err(bad)?;
        let (kind, run) = r
            .headers
            .get(kafka_stream::HEADER)
            .and_then(|h| kafka_stream::parse_header(h))
            .ok_or_else(|| {
                bad(format!(
                    "no valid `{}` header: not a record a device produced",
                    kafka_stream::HEADER
                ))
            })?;
        let device = &self.expected[d].device;
        match self.heard[d] {
            Some((known, _)) if known != run => {
                return Err(bad(format!(
                    "a record of another run of device `{device}` (it restarted, or the topic holds an earlier run): give every run a fresh topic, or start the cloud first with `?start=latest`"
                )));
            }
            _ => self.heard[d] = Some((run, Instant::now())),
        }
        let Some(value) = &r.value else {
            return Err(bad("the record has no value".into()));
        };
        lock(&self.links[d]).bytes += r.payload_bytes() as u64;
        let s = self.first_stream[d] + c;
        match kind {
            Kind::Item => {
                let item: Item = postcard::from_bytes(value)
                    .map_err(|e| bad(format!("the value is not a cut-stream item: {e}")))?;
                let fresh = self.received.accept(s, item.seq).map_err(|e| match e {
                    SequenceError::Gap { expected, got, .. } => bad(format!(
                        "device `{device}` stream `{}`: item {got} arrived, item {expected} was next; items are missing from the topic",
                        self.expected[d].connectors[c]
                    )),
                    other => bad(other.to_string()),
                })?;
                if fresh == Fresh::Duplicate {
                    lock(&self.links[d]).duplicates += 1;
                    return Ok(());
                }
                let Some(out) = &self.outs[d][c] else {
                    return Err(bad(format!("device `{device}`: an item after its stream's end")));
                };
                let n = item.records.len() as u64;
                self.records[s] += n;
                {
                    let mut l = lock(&self.links[d]);
                    l.frames += 1;
                    l.records[c].1 += n;
                }
                if out.send(Frame::of(d, item)).is_err() {
                    return Err(EdgeError::Runtime("the cloud stopped taking items".into()));
                }
            }
            Kind::End => {
                let end: StreamEnd = postcard::from_bytes(value)
                    .map_err(|e| bad(format!("the value is not a stream's end: {e}")))?;
                if self.ended[s] {
                    lock(&self.links[d]).duplicates += 1;
                    return Ok(());
                }
                self.check_end(d, c, &end).map_err(bad)?;
                self.ended[s] = true;
                // The stream is complete: its connector's input may end.
                self.outs[d][c] = None;
            }
        }
        Ok(())
    }

    /// The device and connector a key names.
    fn stream_of(&self, key: Option<&[u8]>) -> Result<(usize, usize), String> {
        let key =
            key.ok_or("the record has no key (a device keys its records DEVICE/CONNECTOR)")?;
        let (device, connector) = kafka_stream::parse_key(key).ok_or_else(|| {
            format!("key `{}` is not DEVICE/CONNECTOR", String::from_utf8_lossy(key))
        })?;
        let Some(d) = self.expected.iter().position(|h| h.device == device) else {
            let ids: Vec<&str> = self.expected.iter().map(|h| h.device.as_str()).collect();
            return Err(format!(
                "device `{device}` is not in the cloud's devices file (it declares: {})",
                ids.join(", ")
            ));
        };
        let connectors = &self.expected[d].connectors;
        let c = connectors.iter().position(|x| x == connector).ok_or_else(|| {
            format!(
                "device `{device}` has no connector `{connector}` in the cloud's cut (its connectors: {}): give devices and cloud the same pipeline, devices file and --all-cloud setting",
                connectors.join(", ")
            )
        })?;
        Ok((d, c))
    }

    /// Whether a stream's end matches what the cloud took and the part it expects.
    fn check_end(&self, d: usize, c: usize, end: &StreamEnd) -> Result<(), String> {
        let want = &self.expected[d];
        if end.pipeline != want.pipeline || end.mode != want.mode {
            return Err(format!(
                "device `{}` ran pipeline `{}` in mode `{}`, the cloud runs `{}` in `{}`",
                want.device, end.pipeline, end.mode, want.pipeline, want.mode
            ));
        }
        let s = self.first_stream[d] + c;
        let (items, records) = (self.received.held()[s], self.records[s]);
        if (end.items, end.records) != (items, records) {
            return Err(format!(
                "device `{}` produced {} items with {} records on stream `{}`, {items} items with {records} records arrived",
                want.device, end.items, end.records, want.connectors[c]
            ));
        }
        Ok(())
    }
}
