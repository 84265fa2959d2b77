//! What a device runs on its raw data: its part of the cut, one instance of each operator,
//! single-threaded ([`LocalDriver`]), or a forwarder when it runs no operator.
//!
//! Each connector has a watermark: with operators, that of the sub-pipeline's sink (the
//! minimum over the sources and timed operators upstream of it); when forwarding, that of the
//! source (its bounded out-of-orderness over the event times read). The end of the input
//! raises every watermark to the end of time.

use crate::error::EdgeError;
use crate::subgraph::DeviceGraph;
use clasp_core::local::{LocalDriver, LocalOptions};
use clasp_core::registry::EventTimeFn;
use clasp_core::time::BoundedOutOfOrderness;
use clasp_core::{Batch, Endpoint, Pipeline, Registry, SinkId, SourceId};

/// The device's operators (or forwarder), and the watermark each connector last carried.
pub(crate) struct Engine {
    run: Run,
    sent_watermarks: Vec<Option<u64>>,
}

/// The device's operators, or a forwarder when it runs none.
enum Run {
    Driver {
        driver: Box<LocalDriver>,
        /// Sub-pipeline source of each input (in device source order).
        sources: Vec<SourceId>,
        /// Sub-pipeline sink of each connector.
        sinks: Vec<SinkId>,
    },
    Forward {
        /// Connectors fed by each input.
        routes: Vec<Vec<usize>>,
        /// Records per connector.
        out: Vec<Batch>,
        /// Per input: its event-time function and watermark.
        times: Vec<(Option<EventTimeFn>, BoundedOutOfOrderness)>,
        /// The input feeding each connector.
        input_of: Vec<usize>,
        /// Whether the input ended.
        ended: bool,
    },
}

impl Engine {
    pub(crate) fn new(
        p: &Pipeline,
        graph: &DeviceGraph,
        registry: &Registry,
        batch_size: usize,
    ) -> Result<Self, EdgeError> {
        let connectors = graph.connectors.len();
        let run = Self::run(p, graph, registry, batch_size)?;
        Ok(Self { run, sent_watermarks: vec![None; connectors] })
    }

    fn run(
        p: &Pipeline,
        graph: &DeviceGraph,
        registry: &Registry,
        batch_size: usize,
    ) -> Result<Run, EdgeError> {
        let Some(dp) = &graph.pipeline else {
            let feeds = |s: SourceId, c: usize| {
                p.stream(graph.connectors[c].stream).from == Endpoint::Source(s)
            };
            let routes: Vec<Vec<usize>> = graph
                .sources
                .iter()
                .map(|&s| (0..graph.connectors.len()).filter(|&c| feeds(s, c)).collect())
                .collect();
            let input_of = (0..graph.connectors.len())
                .map(|c| routes.iter().position(|r| r.contains(&c)).unwrap_or(0))
                .collect();
            let functions =
                registry.event_times(p).map_err(|e| EdgeError::Registry(e.to_string()))?;
            let times = graph
                .sources
                .iter()
                .map(|s| {
                    let bound = p.sources[s.index()].out_of_orderness;
                    (functions[s.index()].clone(), BoundedOutOfOrderness::new(bound))
                })
                .collect();
            let out = vec![Batch::new(); graph.connectors.len()];
            return Ok(Run::Forward { routes, out, times, input_of, ended: false });
        };
        let options = LocalOptions { batch_size: batch_size.max(1), ..LocalOptions::default() };
        let driver = LocalDriver::new(dp, registry, options)
            .map_err(|e| EdgeError::Registry(e.to_string()))?;
        let id_of = |name: &str| dp.sources.iter().find(|s| s.name == name).map(|s| s.id);
        let sources = graph
            .sources
            .iter()
            .map(|s| {
                id_of(&p.sources[s.index()].name).expect("the device part declares its sources")
            })
            .collect();
        let sinks = graph
            .connectors
            .iter()
            .map(|c| {
                dp.sinks
                    .iter()
                    .find(|k| k.name == c.name)
                    .map(|k| k.id)
                    .expect("a sink per connector")
            })
            .collect();
        Ok(Run::Driver { driver: Box::new(driver), sources, sinks })
    }

    pub(crate) fn push(&mut self, input: usize, key: &[u8], value: &[u8]) {
        match &mut self.run {
            Run::Driver { driver, sources, .. } => driver.push(sources[input], key, value),
            Run::Forward { routes, out, times, .. } => {
                // The cloud reads a raw record's time from the record, as the device does.
                let (function, watermark) = &mut times[input];
                if let Some(t) = function.as_ref().and_then(|f| f(value)) {
                    watermark.observe(t);
                }
                for &c in &routes[input] {
                    out[c].push(key, value);
                }
            }
        }
    }

    /// Ends the input: runs what is buffered and fires every pending timer.
    pub(crate) fn finish(&mut self) {
        match &mut self.run {
            Run::Driver { driver, .. } => driver.finish(),
            Run::Forward { ended, .. } => *ended = true,
        }
    }

    /// Connector `c`'s watermark: no record it carries later has a time at or below it.
    fn watermark(&self, c: usize) -> Option<u64> {
        match &self.run {
            Run::Driver { driver, sinks, .. } => driver.sink_watermark(sinks[c]),
            Run::Forward { ended: true, .. } => Some(u64::MAX),
            Run::Forward { times, input_of, .. } => times[input_of[c]].1.watermark(),
        }
    }

    /// Runs everything buffered and hands `f` each connector's records with its watermark
    /// after them, for every connector that has records or whose watermark advanced.
    pub(crate) fn drain(
        &mut self,
        mut f: impl FnMut(usize, &Batch, Option<u64>) -> Result<(), EdgeError>,
    ) -> Result<(), EdgeError> {
        if let Run::Driver { driver, .. } = &mut self.run {
            driver.flush();
        }
        for c in 0..self.sent_watermarks.len() {
            let watermark = self.watermark(c);
            let records = match &mut self.run {
                Run::Driver { driver, sinks, .. } => driver.take_sink_records(sinks[c]),
                Run::Forward { out, .. } => std::mem::take(&mut out[c]),
            };
            if !records.is_empty() || watermark > self.sent_watermarks[c] {
                f(c, &records, watermark)?;
                self.sent_watermarks[c] = watermark;
            }
            if let Run::Forward { out, .. } = &mut self.run {
                // Keep the grown buffer.
                let mut records = records;
                records.clear();
                out[c] = records;
            }
        }
        Ok(())
    }

    pub(crate) fn rejections(&self) -> Vec<(String, String, u64)> {
        match &self.run {
            Run::Driver { driver, .. } => {
                driver.rejections().into_iter().map(|(o, r, n)| (o, r.to_owned(), n)).collect()
            }
            Run::Forward { .. } => Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::subgraph::Connector;
    use clasp_core::StreamId;

    /// A device part holding a window: readings are averaged as the device's watermark passes
    /// them, and the end of the input averages the rest.
    #[test]
    fn the_end_of_the_input_fires_every_pending_timer() {
        let spec = r#"
[[source]]
name = "readings"
key_field = 3
event_time = "sd.time"
[[operator]]
name = "moving_avg"
function = "sd.moving_avg"
stateful = true
key = "sensor"
[operator.params]
window = 2
[[sink]]
name = "moving_avg.out"
[[stream]]
from = "readings"
to = "moving_avg"
[[stream]]
from = "moving_avg"
to = "moving_avg.out"
"#;
        let p = clasp_core::spec::parse(spec, "device.toml").unwrap();
        let connectors = vec![Connector { name: "moving_avg.out".into(), stream: StreamId(1) }];
        let graph =
            DeviceGraph { pipeline: Some(p.clone()), sources: vec![SourceId(0)], connectors };
        let mut engine = Engine::new(&p, &graph, &clasp_apps::registry(), 1).unwrap();
        for second in 1..=3 {
            let line = format!("2004-03-01 00:00:0{second}.000000 1 7 2{second}.0 1 1 1");
            engine.push(0, b"7", line.as_bytes());
        }
        let mut sent = Vec::new();
        let mut watermarks = Vec::new();
        let mut take = |engine: &mut Engine| {
            engine
                .drain(|_, records, watermark| {
                    sent.extend(
                        records.iter().map(|r| String::from_utf8_lossy(r.value).into_owned()),
                    );
                    watermarks.push(watermark);
                    Ok(())
                })
                .unwrap();
            sent.len()
        };
        assert_eq!(take(&mut engine), 2, "the last reading waits for the watermark");
        engine.finish();
        assert_eq!(take(&mut engine), 3, "and is averaged at the end of the input");
        // Out of order by 0: the source's watermark trails the last reading's time by 1, and
        // the window fired up to there; the end of the input is the end of time.
        let time = clasp_apps::registry().event_times(&p).unwrap()[0].clone().unwrap();
        let third = time(b"2004-03-01 00:00:03.000000 1 7 23.0 1 1 1").unwrap();
        assert_eq!(watermarks, [Some(third - 1), Some(u64::MAX)]);
        assert_eq!(sent[2], "7,23.0000,22.5000");
    }
}
