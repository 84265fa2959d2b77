//! The cloud side: the edge ingress that devices join, and the cloud part of the cut on the
//! elastic runtime with the cut streams as its sources.
//!
//! [`Cloud::bind`] opens the ingress; [`Cloud::run`] starts the runtime (planner and workers,
//! loopback TCP), admits every device of the devices file — each must state the part the
//! cloud computed for it — then tells them all to start. Each device has a receiver thread
//! that puts its items on the queue of their connector, acknowledges them, and takes the
//! device back when it connects again after its link broke; each connector is one input of
//! the runtime ([`ConnectorInput`]) with the devices' event times and watermarks, which ends
//! when every device sending it has ended. The run finishes when every device has finished
//! and every chain completed.
//!
//! A cloud part without operators (every operator runs on the devices) writes what arrives to
//! the sinks directly.
//!
//! - `options`, `report`: [`CloudOptions`], and the [`CloudReport`] of a run;
//! - `admission`: the edge ingress that accepts devices and checks their hellos;
//! - `receiver`: the receiving thread per device, across its connections;
//! - `connector`: [`ConnectorInput`], a connector as an input of the runtime;
//! - `direct`: the run without cloud operators;
//! - `kafka_receiver`: the cut streams from a Kafka topic instead of device connections
//!   (cargo feature `kafka`).

mod admission;
mod connector;
mod direct;
#[cfg(feature = "kafka")]
mod kafka_receiver;
mod options;
mod receiver;
mod report;

pub use connector::ConnectorInput;
pub use options::CloudOptions;
pub use report::{CloudReport, LinkReport};

use crate::cut;
use crate::error::EdgeError;
use crate::input::{self, InputSpec, Replay, ReplayInput, Share};
use crate::protocol::ToDevice;
use crate::subgraph::{self, CloudGraph};
use crate::transport::Transport;
use clasp_core::source::{Source, from_lines};
use clasp_core::sync::lock;
use clasp_core::{Pipeline, Registry};
use clasp_plan::edgecut::{CostModel, Devices};
use clasp_runtime::cluster::{Cluster, Launch, contiguous_keys, spread};
use clasp_runtime::planner::stats::Latency;
use clasp_runtime::planner::{Input, PlannerConfig, SinkOutput};
use clasp_runtime::routing::RoutingPlan;
use clasp_wire::write_frame;
use connector::Frame;
use crossbeam_channel::{Receiver, Sender};
use receiver::{Receiving, spawn_receiver};
use std::net::{SocketAddr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Frames queued per connector before device connections are held back.
const QUEUE_FRAMES: usize = 256;

/// A bound edge ingress with the cloud part it will run.
pub struct Cloud {
    p: Pipeline,
    devices: Devices,
    model: CostModel,
    graph: CloudGraph,
    /// The edge ingress, with the TCP connector.
    listener: Option<TcpListener>,
    addr: SocketAddr,
    /// The topic the cut streams arrive in, with a Kafka uplink.
    #[cfg(feature = "kafka")]
    kafka: Option<clasp_kafka::records::RecordReader>,
    opts: CloudOptions,
}

impl std::fmt::Debug for Cloud {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cloud").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl Cloud {
    /// Computes the cut and opens the ingress on `opts.listen`, or, with a Kafka uplink,
    /// connects to the topic (failing at once if no broker answers or the topic is missing).
    pub fn bind(
        p: &Pipeline,
        devices: &Devices,
        model: &CostModel,
        opts: CloudOptions,
    ) -> Result<Self, EdgeError> {
        let cut = cut::plan(p, model, devices, opts.mode);
        let graph = subgraph::cloud_graph(p, &cut)?;
        let mut cloud = Self {
            p: p.clone(),
            devices: devices.clone(),
            model: model.clone(),
            graph,
            listener: None,
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            #[cfg(feature = "kafka")]
            kafka: None,
            opts,
        };
        match &cloud.opts.uplink {
            Transport::Connector => {
                let listen = &cloud.opts.listen;
                let error = |error| EdgeError::Listen { addr: listen.clone(), error };
                let listener = TcpListener::bind(listen).map_err(error)?;
                cloud.addr = listener.local_addr().map_err(error)?;
                cloud.listener = Some(listener);
            }
            #[cfg(feature = "kafka")]
            Transport::Kafka(spec) => cloud.kafka = Some(kafka_receiver::open(spec)?),
            #[cfg(not(feature = "kafka"))]
            Transport::Kafka(spec) => {
                return Err(EdgeError::Transport {
                    given: format!("{}{spec}", crate::transport::KAFKA_PREFIX),
                    problem: "this clasp is built without Kafka support".into(),
                });
            }
        }
        Ok(cloud)
    }

    /// The address devices join (with a Kafka uplink nothing listens: `0.0.0.0:0`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where devices send their cut streams, for messages: the ingress address, or the topic.
    pub fn uplink(&self) -> String {
        match &self.opts.uplink {
            Transport::Connector => self.addr.to_string(),
            Transport::Kafka(spec) => format!("{}{spec}", crate::transport::KAFKA_PREFIX),
        }
    }

    /// Operators the cloud runs.
    pub fn operators(&self) -> Vec<String> {
        self.graph
            .pipeline
            .as_ref()
            .map_or_else(Vec::new, |cp| cp.operators.iter().map(|o| o.name.clone()).collect())
    }

    /// Runs until every device has finished and every chain completed; sink records go to
    /// `sink`.
    pub fn run(
        #[cfg_attr(not(feature = "kafka"), allow(unused_mut))] mut self,
        registry: &Registry,
        sink: Box<dyn SinkOutput>,
    ) -> Result<CloudReport, EdgeError> {
        let held = input::assign(&self.p, &self.graph.sources, &self.opts.inputs, "the cloud")?;
        let mut sink = Some(sink);
        let mut cluster = match &self.graph.pipeline {
            Some(cp) => Some(self.start_cluster(cp, registry, sink.take().expect("unused"))?),
            None => None,
        };
        #[cfg(feature = "kafka")]
        if let Some(reader) = self.kafka.take() {
            return self.run_kafka(reader, cluster, held, registry, sink);
        }
        let admitted = match self.admit() {
            Ok(a) => a,
            Err(e) => {
                if let Some(c) = cluster {
                    let _ = c.shutdown();
                }
                return Err(e);
            }
        };
        let admission::Admitted { joined, rejoins, live, acceptor } = admitted;
        let (senders, receivers) = self.queues();
        let links: Vec<Arc<Mutex<LinkReport>>> = joined
            .iter()
            .map(|j| {
                Arc::new(Mutex::new(LinkReport {
                    device: j.hello.device.clone(),
                    bytes: j.bytes,
                    records: j.hello.connectors.iter().map(|c| (c.clone(), 0)).collect(),
                    ..LinkReport::default()
                }))
            })
            .collect();
        // The devices sending each connector, for its watermark.
        let senders_of: Vec<Vec<usize>> = self
            .graph
            .ingress
            .iter()
            .map(|c| {
                joined.iter().filter(|j| j.hello.connectors.contains(&c.name)).map(|j| j.index)
            })
            .map(Iterator::collect)
            .collect();
        let errors: Arc<Mutex<Vec<String>>> = Arc::default();
        let mut streams = Vec::new();
        for j in &joined {
            let mut s = &j.stream;
            write_frame(&mut s, &ToDevice::Start, &mut Vec::new()).map_err(|e| {
                EdgeError::Protocol { peer: j.hello.device.clone(), problem: e.to_string() }
            })?;
        }
        let started = Instant::now();
        let mut rejoins: Vec<Option<_>> = rejoins.into_iter().map(Some).collect();
        for (j, link) in joined.into_iter().zip(&links) {
            let outs: Vec<Sender<Frame>> = j
                .hello
                .connectors
                .iter()
                .map(|c| {
                    let i =
                        self.graph.ingress.iter().position(|x| &x.name == c).expect("validated");
                    senders[i].clone()
                })
                .collect();
            let r = Receiving {
                rejoins: rejoins[j.index].take().expect("one connection per device"),
                live: live[j.index].clone(),
                outs,
                link: link.clone(),
                reconnect_timeout: self.opts.reconnect_timeout,
            };
            streams.push(spawn_receiver(j, r, errors.clone()));
        }
        drop(senders);
        let outcome = match cluster.as_mut() {
            Some(c) => self.run_runtime(c, receivers, &senders_of, held, registry),
            None => self.run_direct(receivers, held, sink.take().expect("unused")),
        };
        let makespan_s = started.elapsed().as_secs_f64();
        for t in streams {
            let _ = t.join();
        }
        drop(acceptor);
        let errors = std::mem::take(&mut *lock(&errors));
        self.conclude(cluster, outcome, &links, errors, makespan_s)
    }

    /// Collects the keyed state if asked, stops the runtime, and reports the run, or the
    /// errors of the devices' streams.
    fn conclude(
        &self,
        mut cluster: Option<Cluster>,
        outcome: Result<(Latency, u64, u64), EdgeError>,
        links: &[Arc<Mutex<LinkReport>>],
        errors: Vec<String>,
        makespan_s: f64,
    ) -> Result<CloudReport, EdgeError> {
        let mut state = None;
        if let (Some(c), true, Ok(_)) = (cluster.as_mut(), self.opts.dump_state, &outcome) {
            let mut dump = Vec::new();
            c.planner.dump_state(&mut dump).map_err(|e| EdgeError::Runtime(e.to_string()))?;
            state = Some(dump);
        }
        if let Some(c) = cluster {
            c.shutdown().map_err(|e| EdgeError::Runtime(e.to_string()))?;
        }
        if !errors.is_empty() {
            return Err(EdgeError::Protocol { peer: "devices".into(), problem: errors.join("; ") });
        }
        let (latency, chains, sink_records) = outcome?;
        Ok(CloudReport {
            pipeline: self.p.name.clone(),
            mode: self.opts.mode.as_str().to_owned(),
            operators: self.operators(),
            links: links.iter().map(|l| lock(l).clone()).collect(),
            makespan_s,
            latency,
            chains,
            sink_records,
            state,
        })
    }

    fn start_cluster(
        &self,
        cp: &Pipeline,
        registry: &Registry,
        sink: Box<dyn SinkOutput>,
    ) -> Result<Cluster, EdgeError> {
        let mut config =
            PlannerConfig { batch_size: self.opts.batch_size, ..PlannerConfig::default() };
        config.settings.batch_size = self.opts.batch_size;
        config.settings.interval_ms = 200;
        let groups = config.settings.key_groups;
        let workers = self.opts.workers.max(1);
        let c = Cluster::start(
            cp.clone(),
            config,
            sink,
            Launch::Threads(registry.clone()),
            workers,
            self.opts.slots,
        )
        .map_err(|e| EdgeError::Runtime(e.to_string()))?;
        let placement = spread(cp, workers as u32, self.opts.slots);
        let keys = contiguous_keys(cp, &placement, groups);
        c.planner
            .install(RoutingPlan { epoch: 1, placement, keys })
            .map_err(|e| EdgeError::Runtime(e.to_string()))?;
        Ok(c)
    }

    /// One queue per connector arriving in the cloud.
    fn queues(&self) -> (Vec<Sender<Frame>>, Vec<Receiver<Frame>>) {
        self.graph.ingress.iter().map(|_| crossbeam_channel::bounded(QUEUE_FRAMES)).unzip()
    }

    /// Inputs of the runtime: connectors first, then the cloud's own sources.
    fn inputs(
        &self,
        cp: &Pipeline,
        receivers: Vec<Receiver<Frame>>,
        senders_of: &[Vec<usize>],
        held: Vec<(clasp_core::SourceId, InputSpec)>,
        registry: &Registry,
    ) -> Result<Vec<Input>, EdgeError> {
        let event_times =
            registry.event_times(cp).map_err(|e| EdgeError::Runtime(e.to_string()))?;
        let mut inputs = Vec::new();
        for ((c, rx), devices) in self.graph.ingress.iter().zip(receivers).zip(senders_of) {
            let source = cp.source_id(&c.name).expect("the cloud part has a source per connector");
            let event_time = event_times[source.index()].clone();
            let reader: Box<dyn Source> =
                Box::new(ConnectorInput::new(rx, self.opts.idle, devices, event_time));
            inputs.push(Input { source, reader, rate: Box::new(|_| None) });
        }
        for (s, spec) in held {
            let rate = self.model.source_rates[s.index()];
            let replay = Replay::open(&self.p, s, &spec, Share::ALL, 1, rate, 0.0)?;
            let source = cp.source_id(&self.p.sources[s.index()].name).expect("cloud source");
            let per_request = rate * self.opts.speed / f64::from(self.opts.batch_size.max(1));
            let paced = self.opts.speed > 0.0;
            inputs.push(Input {
                source,
                reader: from_lines(
                    Box::new(ReplayInput(replay)),
                    event_times[source.index()].clone(),
                ),
                rate: Box::new(move |_| paced.then_some(per_request)),
            });
        }
        Ok(inputs)
    }

    fn run_runtime(
        &self,
        cluster: &mut Cluster,
        receivers: Vec<Receiver<Frame>>,
        senders_of: &[Vec<usize>],
        held: Vec<(clasp_core::SourceId, InputSpec)>,
        registry: &Registry,
    ) -> Result<(Latency, u64, u64), EdgeError> {
        let cp = self.graph.pipeline.as_ref().expect("a runtime run has a cloud pipeline");
        let inputs = self.inputs(cp, receivers, senders_of, held, registry)?;
        let summary = cluster
            .planner
            .run(inputs, None, |_| {}, |_, _| Ok(()))
            .map_err(|e| EdgeError::Runtime(e.to_string()))?;
        Ok((summary.latency, summary.completed, summary.sink_records))
    }
}
