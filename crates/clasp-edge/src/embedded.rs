//! Devices and cloud in one process: the cloud's ingress on loopback, every device of the
//! devices file on a thread of its own, connected by real TCP (through the user-space shaper
//! when a link shape is given), or through a Kafka topic (`uplink`). For a quick look, for
//! tests, and for the experiment when no network namespaces can be made.

use crate::cloud::{Cloud, CloudOptions, CloudReport};
use crate::cut::Mode;
use crate::device::{self, DeviceOptions, DeviceReport};
use crate::error::EdgeError;
use crate::input::InputSpec;
use crate::shaper::LinkShape;
use crate::transport::Transport;
use clasp_core::{Pipeline, Registry};
use clasp_plan::edgecut::{CostModel, Devices};
use clasp_runtime::planner::SinkOutput;
use std::time::Duration;

/// How to run devices and cloud together.
#[derive(Clone, Debug)]
pub struct EmbeddedOptions {
    /// The cut or everything in the cloud.
    pub mode: Mode,
    /// The whole trace of every source; each device keeps its share.
    pub inputs: Vec<(String, InputSpec)>,
    /// Replay speed relative to the sources' rates (0: as fast as possible).
    pub speed: f64,
    /// Every device link, emulated in user space.
    pub shape: LinkShape,
    /// Longest a record waits on a device before it is sent.
    pub flush: Duration,
    /// How the cut streams reach the cloud: loopback TCP, or a Kafka topic.
    pub uplink: Transport,
    /// The cloud side (its `listen` and `mode` are set here).
    pub cloud: CloudOptions,
}

impl EmbeddedOptions {
    /// Defaults: the cut, unpaced, unshaped links.
    pub fn new(inputs: Vec<(String, InputSpec)>) -> Self {
        Self {
            mode: Mode::Cut,
            inputs,
            speed: 0.0,
            shape: LinkShape::default(),
            flush: Duration::from_millis(10),
            uplink: Transport::Connector,
            cloud: CloudOptions::default(),
        }
    }
}

/// What an embedded run did.
#[derive(Clone, Debug)]
pub struct EmbeddedReport {
    /// The cloud side.
    pub cloud: CloudReport,
    /// Every device, in file order.
    pub devices: Vec<DeviceReport>,
}

/// Runs every device of `devices` and the cloud in this process.
pub fn run(
    p: &Pipeline,
    devices: &Devices,
    model: &CostModel,
    registry: &Registry,
    opts: &EmbeddedOptions,
    sink: Box<dyn SinkOutput>,
) -> Result<EmbeddedReport, EdgeError> {
    let mut cloud_opts = opts.cloud.clone();
    cloud_opts.listen = "127.0.0.1:0".into();
    cloud_opts.mode = opts.mode;
    cloud_opts.uplink = opts.uplink.clone();
    // Over Kafka nothing holds the devices back until the cloud runs: they start when it does.
    let (started_tx, started) = crossbeam_channel::bounded(1);
    cloud_opts.started = Some(started_tx);
    // Devices and cloud are all started here: they share a secret made for the run.
    cloud_opts.security = cloud_opts.security.or_generated()?;
    let security = cloud_opts.security.clone();
    let cloud_inputs: Vec<String> =
        devices.cloud_sources.iter().map(|s| p.sources[s.index()].name.clone()).collect();
    cloud_opts.inputs =
        opts.inputs.iter().filter(|(n, _)| cloud_inputs.contains(n)).cloned().collect();
    let cloud = Cloud::bind(p, devices, model, cloud_opts)?;
    let join = cloud.addr().to_string();
    let mut prepared = Vec::new();
    for d in &devices.devices {
        let held: Vec<&str> =
            d.sources.iter().map(|s| p.sources[s.index()].name.as_str()).collect();
        let inputs =
            opts.inputs.iter().filter(|(n, _)| held.contains(&n.as_str())).cloned().collect();
        let mut o = DeviceOptions::new(&d.id, &join, inputs);
        o.mode = opts.mode;
        o.speed = opts.speed;
        o.shape = opts.shape;
        o.flush = opts.flush;
        o.uplink = opts.uplink.clone();
        o.split_files = true;
        o.security = security.clone();
        prepared.push((device::prepare(p, devices, model, registry, &o)?, o));
    }
    let registry = registry.clone();
    let cloud_thread = std::thread::Builder::new()
        .name("edge-cloud".into())
        .spawn(move || cloud.run(&registry, sink))
        .expect("spawn the cloud");
    if matches!(opts.uplink, Transport::Kafka(_)) && started.recv().is_err() {
        // The cloud stopped before it started taking items: its error says why.
        return Err(cloud_thread
            .join()
            .unwrap_or_else(|_| Err(EdgeError::Runtime("the cloud panicked".into())))
            .err()
            .unwrap_or_else(|| EdgeError::Runtime("the cloud ended before it started".into())));
    }
    let device_threads: Vec<_> = prepared
        .into_iter()
        .map(|(prep, o)| {
            std::thread::Builder::new()
                .name(format!("device-{}", o.device))
                .spawn(move || device::execute(prep, &o))
                .expect("spawn a device")
        })
        .collect();
    let mut reports = Vec::new();
    let mut first_error = None;
    for t in device_threads {
        match t.join().unwrap_or_else(|_| Err(EdgeError::Runtime("a device panicked".into()))) {
            Ok(r) => reports.push(r),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    let cloud = cloud_thread
        .join()
        .unwrap_or_else(|_| Err(EdgeError::Runtime("the cloud panicked".into())));
    // The cloud's error says why devices lost their connection; a device's error says why the
    // cloud saw it go.
    match (cloud, first_error) {
        (Ok(cloud), None) => Ok(EmbeddedReport { cloud, devices: reports }),
        (Err(e), _) | (Ok(_), Some(e)) => Err(e),
    }
}
