//! What a device runs on its raw data: its part of the cut, one instance of each operator,
//! single-threaded ([`LocalDriver`]), or a forwarder when it runs no operator.

use crate::error::EdgeError;
use crate::subgraph::DeviceGraph;
use clasp_core::local::{LocalDriver, LocalOptions};
use clasp_core::{Batch, Endpoint, Pipeline, Registry, SinkId, SourceId};

/// The device's operators, or a forwarder when it runs none.
pub(crate) enum Engine {
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
    },
}

impl Engine {
    pub(crate) fn new(
        p: &Pipeline,
        graph: &DeviceGraph,
        registry: &Registry,
        batch_size: usize,
    ) -> Result<Self, EdgeError> {
        let Some(dp) = &graph.pipeline else {
            let routes = graph
                .sources
                .iter()
                .map(|&s| {
                    (0..graph.connectors.len())
                        .filter(|&c| {
                            p.stream(graph.connectors[c].stream).from == Endpoint::Source(s)
                        })
                        .collect()
                })
                .collect();
            return Ok(Self::Forward { routes, out: vec![Batch::new(); graph.connectors.len()] });
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
        Ok(Self::Driver { driver: Box::new(driver), sources, sinks })
    }

    pub(crate) fn push(&mut self, input: usize, key: &[u8], value: &[u8]) {
        match self {
            Self::Driver { driver, sources, .. } => driver.push(sources[input], key, value),
            Self::Forward { routes, out } => {
                for &c in &routes[input] {
                    out[c].push(key, value);
                }
            }
        }
    }

    /// Ends the input: runs what is buffered and fires every pending timer.
    pub(crate) fn finish(&mut self) {
        if let Self::Driver { driver, .. } = self {
            driver.finish();
        }
    }

    /// Runs everything buffered and hands each connector's records to `f`.
    pub(crate) fn drain(
        &mut self,
        mut f: impl FnMut(usize, &Batch) -> Result<(), EdgeError>,
    ) -> Result<(), EdgeError> {
        match self {
            Self::Driver { driver, sinks, .. } => {
                driver.flush();
                for (c, &sink) in sinks.iter().enumerate() {
                    let records = driver.take_sink_records(sink);
                    if !records.is_empty() {
                        f(c, &records)?;
                    }
                }
            }
            Self::Forward { out, .. } => {
                for (c, records) in out.iter_mut().enumerate() {
                    if !records.is_empty() {
                        f(c, records)?;
                        records.clear();
                    }
                }
            }
        }
        Ok(())
    }

    pub(crate) fn rejections(&self) -> Vec<(String, String, u64)> {
        match self {
            Self::Driver { driver, .. } => {
                driver.rejections().into_iter().map(|(o, r, n)| (o, r.to_owned(), n)).collect()
            }
            Self::Forward { .. } => Vec::new(),
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
        let mut take = |engine: &mut Engine| {
            engine
                .drain(|_, records| {
                    sent.extend(
                        records.iter().map(|r| String::from_utf8_lossy(r.value).into_owned()),
                    );
                    Ok(())
                })
                .unwrap();
            sent.len()
        };
        assert_eq!(take(&mut engine), 2, "the last reading waits for the watermark");
        engine.finish();
        assert_eq!(take(&mut engine), 3, "and is averaged at the end of the input");
        assert_eq!(sent[2], "7,23.0000,22.5000");
    }
}
