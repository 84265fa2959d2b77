//! A cloud part without operators: what arrives goes straight to the sinks.

use super::Cloud;
use super::connector::Frame;
use crate::error::EdgeError;
use crate::input::{InputSpec, Replay, Share};
use clasp_core::sync::lock;
use clasp_core::{Batch, Endpoint, Pipeline};
use clasp_runtime::planner::SinkOutput;
use clasp_runtime::planner::stats::Latency;
use clasp_runtime::worker::executor::now_ns;
use crossbeam_channel::Receiver;
use hdrhistogram::Histogram;
use std::io;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

impl Cloud {
    /// Without cloud operators: what arrives goes to the sinks, one chain per request as in the
    /// runtime.
    pub(super) fn run_direct(
        &self,
        receivers: Vec<Receiver<Frame>>,
        held: Vec<(clasp_core::SourceId, InputSpec)>,
        sink: Box<dyn SinkOutput>,
    ) -> Result<(Latency, u64, u64), EdgeError> {
        let shared = Arc::new(Mutex::new(Direct::new(sink)));
        let mut threads: Vec<JoinHandle<()>> = Vec::new();
        for (c, rx) in self.graph.ingress.iter().zip(receivers) {
            let names = sinks_of(&self.p, &[c.stream]);
            let shared = shared.clone();
            threads.push(std::thread::spawn(move || {
                for f in rx {
                    lock(&shared).deliver(&names, &f.records, f.origin_ns);
                }
            }));
        }
        for (s, spec) in held {
            let mut replay = Replay::open(&self.p, s, &spec, Share::ALL, 1, 1.0, 0.0)?;
            let names = sinks_of(&self.p, self.p.source_outputs(s));
            let (shared, size) = (shared.clone(), self.opts.batch_size.max(1) as usize);
            threads.push(std::thread::spawn(move || {
                let mut line = Vec::new();
                let mut batch = Batch::new();
                loop {
                    let more = match replay.next(&mut line) {
                        Ok(m) => m.is_some(),
                        Err(e) => {
                            lock(&shared).error.get_or_insert(e.to_string());
                            false
                        }
                    };
                    if more {
                        batch.push(replay.key_of(&line), &line);
                    }
                    if batch.len() >= size || (!more && !batch.is_empty()) {
                        lock(&shared).deliver(&names, &batch, now_ns());
                        batch.clear();
                    }
                    if !more {
                        return;
                    }
                }
            }));
        }
        for t in threads {
            let _ = t.join();
        }
        let mut d = lock(&shared);
        if let Some(e) = d.error.take() {
            return Err(EdgeError::Output {
                what: "sink records".into(),
                error: io::Error::other(e),
            });
        }
        Ok((d.latency(), d.chains, d.records))
    }
}

/// The sinks that `streams` of `p` lead to.
fn sinks_of(p: &Pipeline, streams: &[clasp_core::StreamId]) -> Vec<String> {
    streams
        .iter()
        .filter_map(|s| match p.stream(*s).to {
            Endpoint::Sink(k) => Some(p.sinks[k.index()].name.clone()),
            _ => None,
        })
        .collect()
}

/// Sink writing and latency tracking without a runtime.
struct Direct {
    sink: Box<dyn SinkOutput>,
    hist: Histogram<u64>,
    chains: u64,
    records: u64,
    error: Option<String>,
}

impl Direct {
    fn new(sink: Box<dyn SinkOutput>) -> Self {
        let hist = Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds");
        Self { sink, hist, chains: 0, records: 0, error: None }
    }

    /// Writes one request's records to `sinks`; its chain ends now.
    fn deliver(&mut self, sinks: &[String], records: &Batch, origin_ns: u64) {
        for name in sinks {
            if let Err(e) = self.sink.write(name, records) {
                self.error.get_or_insert(e.to_string());
            }
            self.records += records.len() as u64;
        }
        let micros = (now_ns().saturating_sub(origin_ns) / 1000).max(1);
        let _ = self.hist.record(micros);
        self.chains += 1;
    }

    fn latency(&self) -> Latency {
        Latency::of(&self.hist)
    }
}
