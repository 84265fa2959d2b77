//! The edge engine: the Planner paper's deployment (§VI) on this machine — five devices and
//! the cloud, a taxi workflow all in the cloud or cut, over emulated WAN links (network
//! namespaces with shaped veths, or the user-space shaper on loopback). The `edge`
//! experiment ([`crate::experiments::edge`]) runs it for each workflow and bandwidth.
//!
//! For each workflow and bandwidth both deployments replay the same seeded trace at the same
//! speed. Measured: items and bytes over every device→cloud link (at the connectors, and on the
//! veths when namespaces are used), the makespan (start signal to the last chain's completion)
//! and the end-to-end latency of chains (from a device's read of the oldest raw record behind a
//! request to the completion of everything it caused in the cloud). The cut's results are
//! compared with all-in-cloud's, record for record and state entry for state entry (Theorem 1). w3 runs with a window lateness of 60 minutes of
//! event time, so that links of different speeds do not make events late and results stay
//! comparable.
//!
//! Given a Kafka broker ([`BenchOptions::kafka`]), every pair runs a second time with a Kafka
//! topic as the edge→cloud transport (a fresh topic per run, devices in this process, the
//! user-space shaper pacing what they produce), beside the TCP connector's pair
//! ([`kafka_rows`]).

use clasp_core::Pipeline;
use clasp_edge::EdgeError;
use clasp_edge::cloud::{Cloud, CloudOptions, CloudReport};
use clasp_edge::cut::Mode;
use clasp_edge::embedded::{self, EmbeddedOptions};
use clasp_edge::input::InputSpec;
use clasp_edge::netns::{self, Wan};
use clasp_edge::results::{CollectSink, RunResults};
use clasp_edge::shaper::LinkShape;
use clasp_edge::transport::Transport;
use clasp_plan::edgecut::{self, CostModel, Devices};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Which WAN emulation to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WanChoice {
    /// Namespaces when this process can make them, else user space.
    Auto,
    /// Namespaces with veth links shaped by tc tbf (needs root and the `clasp` binary).
    Netns,
    /// Loopback with the user-space shaper.
    #[serde(alias = "userspace")]
    UserSpace,
}

/// How to run the experiment.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// A short run (under a minute).
    pub quick: bool,
    /// Where the specs and device files the device processes read go (`<out>/edge-work`).
    pub out: PathBuf,
    /// WAN emulation.
    pub wan: WanChoice,
    /// The `clasp` binary, to start devices inside namespaces.
    pub exe: Option<PathBuf>,
    /// Seed of the traces.
    pub seed: u64,
    /// Bootstrap brokers (`HOST:PORT[,…]`) for the Kafka rows; none skips them.
    pub kafka: Option<String>,
}

/// One deployment of one workflow at one bandwidth.
#[derive(Clone, Debug, Serialize)]
pub struct Row {
    /// `w1`, `w2` or `w3`.
    pub workflow: String,
    /// `all-cloud` or `cut`.
    pub mode: String,
    /// `netns` or `user-space`.
    pub wan: String,
    /// The edge→cloud transport: `tcp` (the connector protocol) or `kafka` (a topic).
    pub transport: String,
    /// Bandwidth of every device link (kbit/s).
    pub bandwidth_kbit: f64,
    /// One-way delay of every link (ms).
    pub delay_ms: f64,
    /// Records in the trace (all sources).
    pub events: u64,
    /// Records over all device links.
    pub items: u64,
    /// Bytes over all device links, at the connectors (TCP: the connector protocol's preambles
    /// and frames as the cloud read them; Kafka: the keys, values and headers of the records
    /// the devices produced, produced-again ones included, without Kafka's own framing).
    pub bytes: u64,
    /// Bytes on the veths (with TCP/IP headers and retransmissions), when namespaces ran.
    pub wire_bytes: Option<u64>,
    /// Seconds from the start signal to the last chain's completion.
    pub makespan_s: f64,
    /// Median end-to-end latency (ms).
    pub p50_ms: f64,
    /// 95th percentile (ms).
    pub p95_ms: f64,
    /// 99th percentile (ms).
    pub p99_ms: f64,
    /// Records at the sinks.
    pub sink_records: u64,
    /// For a cut: whether its results equal all-in-cloud's.
    pub outputs_equal: Option<bool>,
}

/// What the runs measured.
#[derive(Clone, Debug)]
pub struct EdgeRuns {
    /// Every run: all-in-cloud then cut, per workflow and bandwidth.
    pub rows: Vec<Row>,
    /// Which emulation ran, and why.
    pub wan: String,
    /// What the runs were: devices, traces, replay speed, delay.
    pub plan: String,
    /// Whether the Kafka rows ran, and on which broker, or why not.
    pub kafka: String,
}

/// A workflow of the experiment.
struct Workflow {
    name: &'static str,
    app: &'static str,
    events: u64,
}

/// Sizes of the two variants.
struct Plan {
    workflows: Vec<Workflow>,
    bandwidths: Vec<f64>,
    speed: f64,
    delay: Duration,
}

fn plan(quick: bool) -> Plan {
    let wf = |name, app, events| Workflow { name, app, events };
    if quick {
        Plan {
            workflows: vec![
                wf("w1", "taxi-w1", 3000),
                wf("w2", "taxi-w2", 3000),
                wf("w3", "taxi-w3", 3000),
            ],
            bandwidths: vec![256.0, 1024.0],
            speed: 3.0,
            delay: Duration::from_millis(20),
        }
    } else {
        Plan {
            workflows: vec![
                wf("w1", "taxi-w1", 20_000),
                wf("w2", "taxi-w2", 60_000),
                wf("w3", "taxi-w3", 20_000),
            ],
            bandwidths: vec![256.0, 512.0, 1024.0, 2048.0, 8192.0],
            speed: 4.0,
            delay: Duration::from_millis(20),
        }
    }
}

/// The spec the experiment runs for `app` (w3's windows close by the watermark, or at the
/// end of the input in the cloud, so no lateness is needed).
fn spec_text(app: &str) -> String {
    clasp_apps::spec_text(app).unwrap_or_default().to_owned()
}

/// The five devices of the paper's setup for `app`.
fn devices_text(app: &str) -> &'static str {
    match app {
        "taxi-w1" => include_str!("../../../../devices/taxi-w1.toml"),
        "taxi-w2" => include_str!("../../../../devices/taxi-w2.toml"),
        _ => include_str!("../../../../devices/taxi-w3.toml"),
    }
}

/// Runs every workflow at every bandwidth, all in the cloud and cut.
pub fn run(opts: &BenchOptions) -> Result<EdgeRuns, EdgeError> {
    let (wan, wan_note) = choose_wan(opts)?;
    let plan = plan(opts.quick);
    let work = opts.out.join("edge-work");
    std::fs::create_dir_all(&work)
        .map_err(|error| EdgeError::Output { what: work.display().to_string(), error })?;
    let kafka = kafka_rows(opts, wan.is_some());
    let mut rows = Vec::new();
    for w in &plan.workflows {
        let ctx = Context::new(w, opts, &plan, &work)?;
        for &bw in &plan.bandwidths {
            let tcp = Transport::Connector;
            let (all, all_out) = ctx.run(Mode::AllCloud, bw, wan.as_ref(), &tcp)?;
            let (mut cut, cut_out) = ctx.run(Mode::Cut, bw, wan.as_ref(), &tcp)?;
            let difference = all_out.difference(&cut_out);
            if let Some(d) = &difference {
                eprintln!(
                    "{} @ {bw} kbit/s: the cut's results differ from all-in-cloud's: {d}",
                    w.name
                );
            }
            cut.outputs_equal = Some(difference.is_none());
            eprintln!("{}", progress_line(&all, &cut));
            rows.push(all);
            rows.push(cut);
            if let Ok(brokers) = &kafka {
                // Both Kafka runs against the TCP connector's all-in-cloud run.
                let (k_all, k_all_out) = ctx.run(Mode::AllCloud, bw, None, &ctx.topic(brokers)?)?;
                let (mut k_cut, k_cut_out) = ctx.run(Mode::Cut, bw, None, &ctx.topic(brokers)?)?;
                let same =
                    all_out.difference(&k_all_out).or_else(|| all_out.difference(&k_cut_out));
                if let Some(d) = &same {
                    eprintln!("{} @ {bw} kbit/s over Kafka: the results differ: {d}", w.name);
                }
                k_cut.outputs_equal = Some(same.is_none());
                eprintln!("{}", progress_line(&k_all, &k_cut));
                rows.push(k_all);
                rows.push(k_cut);
            }
        }
    }
    let kafka = match kafka {
        Ok(brokers) => format!(
            "Kafka rows: the same runs with a Kafka topic as the edge→cloud transport, on the broker at {brokers} (a fresh topic of {KAFKA_PARTITIONS} partitions per run, devices in this process)"
        ),
        Err(why) => format!("Kafka rows skipped: {why}"),
    };
    Ok(EdgeRuns { rows, wan: wan_note, plan: plan.note(), kafka })
}

/// Partitions of each run's topic.
const KAFKA_PARTITIONS: i32 = 4;

/// The brokers the Kafka rows run on, or why they are skipped: no broker given, the bench
/// built without the `kafka` feature, or devices in network namespaces (the broker listens on
/// this host's loopback, which they do not reach). A broker given but not reachable is no
/// reason to skip: creating the first topic fails and names it.
pub fn kafka_rows(opts: &BenchOptions, netns: bool) -> Result<String, String> {
    let Some(brokers) = &opts.kafka else {
        return Err(
            "no broker given (`--set kafka=HOST:PORT` or CLASP_KAFKA_BROKERS; scripts/kafka-broker.sh starts one)"
                .into(),
        );
    };
    if !cfg!(feature = "kafka") {
        return Err(format!(
            "a broker is given ({brokers}) but this clasp is built without the `kafka` feature (`--features clasp/kafka`)"
        ));
    }
    if netns {
        return Err(
            "the devices run in network namespaces, which do not reach the broker on loopback: use `--set wan=user-space`"
                .into(),
        );
    }
    Ok(brokers.clone())
}

fn write_file(path: &Path, text: &str) -> Result<(), EdgeError> {
    std::fs::write(path, text)
        .map_err(|error| EdgeError::Output { what: path.display().to_string(), error })
}

/// Picks the WAN emulation; the note says which ran and why.
fn choose_wan(opts: &BenchOptions) -> Result<(Option<Wan>, String), EdgeError> {
    let user_space = |why: String| {
        (None, format!("user-space shaper on loopback (token bucket + delay line): {why}"))
    };
    match opts.wan {
        WanChoice::UserSpace => Ok(user_space("chosen with --wan user-space".into())),
        WanChoice::Netns | WanChoice::Auto => {
            let ready = match (&opts.exe, netns::available()) {
                (None, _) => Err("no clasp binary to start the devices with".to_owned()),
                (_, Err(e)) => Err(format!("cannot make network namespaces ({e})")),
                (Some(_), Ok(())) => Ok(()),
            };
            match ready {
                Ok(()) => Ok((
                    Some(Wan::create(5)?),
                    "network namespaces: one per device, veth links shaped by tc tbf, delay added in user space (no netem in this kernel)".into(),
                )),
                Err(why) if opts.wan == WanChoice::Auto => Ok(user_space(why)),
                Err(why) => Err(EdgeError::Wan(why)),
            }
        }
    }
}

/// One workflow's pipeline, devices and trace.
struct Context<'a> {
    w: &'a Workflow,
    p: Pipeline,
    devices: Devices,
    model: CostModel,
    inputs: Vec<(String, InputSpec)>,
    /// Records in the trace, all sources.
    events: u64,
    spec_path: PathBuf,
    devices_path: PathBuf,
    opts: &'a BenchOptions,
    speed: f64,
    delay: Duration,
}

impl<'a> Context<'a> {
    fn new(
        w: &'a Workflow,
        opts: &'a BenchOptions,
        plan: &Plan,
        work: &Path,
    ) -> Result<Self, EdgeError> {
        let spec = spec_text(w.app);
        let spec_path = work.join(format!("{}.toml", w.app));
        let devices_path = work.join(format!("{}-devices.toml", w.app));
        write_file(&spec_path, &spec)?;
        write_file(&devices_path, devices_text(w.app))?;
        let p = clasp_core::spec::parse(&spec, &spec_path.display().to_string()).map_err(|e| {
            EdgeError::Subgraph { part: "experiment pipeline".into(), error: Box::new(e) }
        })?;
        let devices =
            edgecut::devices::parse(devices_text(w.app), &devices_path.display().to_string(), &p)
                .map_err(|e| EdgeError::Wan(e.to_string()))?;
        let inputs = p
            .sources
            .iter()
            .map(|s| (s.name.clone(), InputSpec::Generated { count: w.events, seed: opts.seed }))
            .collect();
        let events = clasp_apps::profile::generate(w.app, w.events, opts.seed)
            .map_or(0, |l| l.iter().map(|(_, v)| v.len() as u64).sum());
        Ok(Self {
            w,
            events,
            model: CostModel::from_spec(&p),
            p,
            devices,
            inputs,
            spec_path,
            devices_path,
            opts,
            speed: plan.speed,
            delay: plan.delay,
        })
    }

    fn cloud_options(&self, mode: Mode, listen: &str) -> CloudOptions {
        CloudOptions { listen: listen.into(), mode, dump_state: true, ..CloudOptions::default() }
    }

    /// A fresh topic for one run on `brokers`, as the Kafka transport to it.
    #[cfg(feature = "kafka")]
    fn topic(&self, brokers: &str) -> Result<Transport, EdgeError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static RUNS: AtomicU64 = AtomicU64::new(0);
        let run = RUNS.fetch_add(1, Ordering::Relaxed);
        let topic = format!("clasp-bench-edge-{}-{}-{run}", std::process::id(), self.w.name);
        clasp_kafka::topics::create_topic(brokers, &topic, KAFKA_PARTITIONS).map_err(|source| {
            EdgeError::Kafka {
                what: format!("creating topic `{topic}` for the Kafka rows"),
                source,
            }
        })?;
        Ok(Transport::Kafka(format!("{brokers}/{topic}")))
    }

    /// Without the `kafka` feature [`kafka_rows`] skips the Kafka rows.
    #[cfg(not(feature = "kafka"))]
    fn topic(&self, brokers: &str) -> Result<Transport, EdgeError> {
        Err(EdgeError::Transport {
            given: format!("kafka:{brokers}"),
            problem: "this clasp is built without Kafka support".into(),
        })
    }

    /// One run; returns its row and its results.
    fn run(
        &self,
        mode: Mode,
        kbit: f64,
        wan: Option<&Wan>,
        transport: &Transport,
    ) -> Result<(Row, RunResults), EdgeError> {
        let sink = CollectSink::default();
        let (report, wire) = match wan {
            None => (self.run_user_space(mode, kbit, transport, sink.clone())?, None),
            Some(wan) => {
                let (r, w) = self.run_netns(mode, kbit, wan, sink.clone())?;
                (r, Some(w))
            }
        };
        let (report, produced) = report;
        let mut results = sink.results();
        results.add_state_dump(report.state.as_deref().unwrap_or_default());
        let mut row = self.row(mode, kbit, &report, wire, wan.is_some());
        row.transport = transport.name().into();
        if matches!(transport, Transport::Kafka(_)) {
            row.bytes = produced;
        }
        Ok((row, results))
    }

    /// Devices and cloud in this process; returns the cloud's report and the bytes the devices
    /// wrote to their links.
    fn run_user_space(
        &self,
        mode: Mode,
        kbit: f64,
        transport: &Transport,
        sink: CollectSink,
    ) -> Result<(CloudReport, u64), EdgeError> {
        let mut o = EmbeddedOptions::new(self.inputs.clone());
        o.mode = mode;
        o.speed = self.speed;
        o.shape = LinkShape { bandwidth_bps: Some(kbit * 1000.0), delay: self.delay };
        o.uplink = transport.clone();
        o.cloud = self.cloud_options(mode, "127.0.0.1:0");
        let registry = clasp_apps::registry();
        let r = embedded::run(&self.p, &self.devices, &self.model, &registry, &o, Box::new(sink))?;
        let produced = r.devices.iter().map(|d| d.bytes).sum();
        Ok((r.cloud, produced))
    }

    /// Devices as processes in their namespaces, the cloud in this process.
    fn run_netns(
        &self,
        mode: Mode,
        kbit: f64,
        wan: &Wan,
        sink: CollectSink,
    ) -> Result<((CloudReport, u64), u64), EdgeError> {
        wan.shape(Some(kbit))?;
        let n = self.devices.devices.len();
        let before: Vec<u64> = (0..n).map(|i| wan.rx_bytes(i)).collect();
        let mut opts = self.cloud_options(mode, &format!("{}:0", wan.cloud_ip()));
        // The device processes prove a secret made for this run (given in their environment).
        opts.security = opts.security.or_generated()?;
        let secret = opts.security.secret.clone().expect("just made");
        let cloud = Cloud::bind(&self.p, &self.devices, &self.model, opts)?;
        let join = cloud.addr().to_string();
        let registry = clasp_apps::registry();
        let cloud_thread = std::thread::spawn(move || cloud.run(&registry, Box::new(sink)));
        let children = (0..n)
            .map(|i| self.spawn_device(i, &join, mode, wan, &secret))
            .collect::<Result<Vec<_>, _>>()?;
        let mut failures = Vec::new();
        for (i, child) in children.into_iter().enumerate() {
            match child.wait_with_output() {
                Ok(out) if out.status.success() => {}
                Ok(out) => failures.push(format!(
                    "{}: {}",
                    self.devices.devices[i].id,
                    String::from_utf8_lossy(&out.stderr).trim()
                )),
                Err(e) => failures.push(format!("{}: {e}", self.devices.devices[i].id)),
            }
        }
        let report =
            cloud_thread.join().map_err(|_| EdgeError::Runtime("the cloud panicked".into()))?;
        if !failures.is_empty() {
            return Err(EdgeError::Wan(format!("devices failed: {}", failures.join("; "))));
        }
        let wire = (0..n).map(|i| wan.rx_bytes(i).saturating_sub(before[i])).sum();
        let report = report?;
        let bytes = report.bytes();
        Ok(((report, bytes), wire))
    }

    fn spawn_device(
        &self,
        i: usize,
        join: &str,
        mode: Mode,
        wan: &Wan,
        secret: &clasp_wire::Secret,
    ) -> Result<std::process::Child, EdgeError> {
        let exe = self.opts.exe.as_ref().ok_or_else(|| EdgeError::Wan("no clasp binary".into()))?;
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", wan.namespace(i)]).arg(exe).arg("edge").arg(&self.spec_path);
        cmd.arg("--devices").arg(&self.devices_path);
        cmd.args(["--device", &self.devices.devices[i].id, "--join", join]);
        for (s, spec) in &self.inputs {
            cmd.args(["--input", &format!("{s}={spec}")]);
        }
        cmd.args(["--speed", &self.speed.to_string()]);
        cmd.args(["--delay-ms", &(self.delay.as_secs_f64() * 1000.0).to_string()]);
        if mode == Mode::AllCloud {
            cmd.arg("--all-cloud");
        }
        cmd.env(clasp_wire::secret::TOKEN_ENV, secret.expose());
        cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
        cmd.spawn()
            .map_err(|e| EdgeError::Wan(format!("starting device {i} in its namespace: {e}")))
    }

    fn row(&self, mode: Mode, kbit: f64, r: &CloudReport, wire: Option<u64>, netns: bool) -> Row {
        let ms = |us: u64| us as f64 / 1000.0;
        Row {
            workflow: self.w.name.into(),
            mode: mode.as_str().into(),
            wan: if netns { "netns" } else { "user-space" }.into(),
            transport: "tcp".into(),
            bandwidth_kbit: kbit,
            delay_ms: self.delay.as_secs_f64() * 1000.0,
            events: self.events,
            items: r.items(),
            bytes: r.bytes(),
            wire_bytes: wire,
            makespan_s: r.makespan_s,
            p50_ms: ms(r.latency.p50_us),
            p95_ms: ms(r.latency.p95_us),
            p99_ms: ms(r.latency.p99_us),
            sink_records: r.sink_records,
            outputs_equal: None,
        }
    }
}

/// The cut's change against all-in-cloud, in %.
pub fn change(all: f64, cut: f64) -> String {
    if all > 0.0 { format!("{:+.0}%", 100.0 * (cut - all) / all) } else { "n/a".into() }
}

fn progress_line(all: &Row, cut: &Row) -> String {
    format!(
        "{} @ {} kbit/s over {}: bytes {} -> {} ({}), makespan {:.2} -> {:.2} s ({}), p50 {:.1} -> {:.1} ms, equal: {}",
        all.workflow,
        all.bandwidth_kbit,
        all.transport,
        all.bytes,
        cut.bytes,
        change(all.bytes as f64, cut.bytes as f64),
        all.makespan_s,
        cut.makespan_s,
        change(all.makespan_s, cut.makespan_s),
        all.p50_ms,
        cut.p50_ms,
        cut.outputs_equal.map_or("-", |e| if e { "yes" } else { "NO" })
    )
}

impl Plan {
    /// What the table's caption says about the runs.
    fn note(&self) -> String {
        let traces: Vec<String> =
            self.workflows.iter().map(|w| format!("{} {} ride events", w.name, w.events)).collect();
        format!(
            "Five devices; traces: {} (w2 with their fares); replay at {}× the spec rates; one-way delay {} ms on every link.",
            traces.join(", "),
            self.speed,
            self.delay.as_millis()
        )
    }
}
