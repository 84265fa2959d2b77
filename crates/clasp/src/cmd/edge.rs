//! `clasp edge`: run a pipeline cut between edge devices and the cloud — one device
//! (`--device ID --join ADDR`), the cloud side (`--cloud`), or both in one process
//! (`--embedded`). The WAN experiment is `clasp bench edge` (clasp-bench). See docs/edge.md.

use anyhow::{Context, Result, anyhow, bail};
use clasp_edge::cloud::{Cloud, CloudOptions, CloudReport};
use clasp_edge::device::{self, DeviceOptions, DeviceReport};
use clasp_edge::embedded::{self, EmbeddedOptions};
use clasp_edge::input::{self, InputSpec};
use clasp_edge::shaper::LinkShape;
use clasp_edge::{Mode, Transport};
use clasp_plan::edgecut::{self, CostModel, Devices};
use clasp_runtime::planner::{DiscardSink, JsonLinesSink, SinkOutput};
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `clasp edge`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Pipeline spec (TOML).
    pub pipeline: PathBuf,
    /// Devices file (TOML, see docs/devices-format.md).
    #[arg(long)]
    pub devices: PathBuf,
    /// Run this device's part (needs --join, or --uplink kafka:…).
    #[arg(long, conflicts_with_all = ["cloud", "embedded"])]
    pub device: Option<String>,
    /// The cloud's edge ingress, HOST:PORT (with --device and the TCP uplink).
    #[arg(long)]
    pub join: Option<String>,
    /// How the cut streams reach the cloud: `tcp` (the connector protocol to --join / on
    /// --listen) or `kafka:BROKERS/TOPIC[?OPTIONS]` (a topic devices produce to and the cloud
    /// consumes; with the `kafka` feature; docs/edge.md).
    #[arg(long, default_value = "tcp", value_name = "tcp|kafka:BROKERS/TOPIC")]
    pub uplink: String,
    /// Run the cloud side: the edge ingress and the cloud part on the runtime.
    #[arg(long, conflicts_with = "embedded")]
    pub cloud: bool,
    /// Run every device and the cloud in this process, over loopback TCP.
    #[arg(long)]
    pub embedded: bool,
    /// Raw data of a source: SOURCE=FILE or SOURCE=gen:COUNT[:SEED] (repeat per source).
    #[arg(long = "input", value_name = "SOURCE=SPEC")]
    pub inputs: Vec<String>,
    /// Everything in the cloud: devices send their raw data (the paper's baseline).
    #[arg(long)]
    pub all_cloud: bool,
    /// Replay speed relative to the spec's source rates (0: as fast as possible).
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Emulated bandwidth of each device link, kbit/s (user-space shaper).
    #[arg(long)]
    pub bandwidth_kbit: Option<f64>,
    /// Emulated one-way delay of each device link, ms (user-space delay line).
    #[arg(long, default_value_t = 0.0)]
    pub delay_ms: f64,
    /// Longest a record waits on a device before it is sent, ms.
    #[arg(long, default_value_t = 10)]
    pub flush_ms: u64,
    /// How long a device keeps trying to reach the cloud, s.
    #[arg(long, default_value_t = 10.0)]
    pub connect_timeout_s: f64,
    /// Where the cloud listens for devices (with --cloud); loopback unless told otherwise,
    /// e.g. `--listen 0.0.0.0:7450` to take devices from other hosts.
    #[arg(long, default_value = "127.0.0.1:7450")]
    pub listen: String,
    /// How long the cloud waits for every device to join, s.
    #[arg(long, default_value_t = 60.0)]
    pub join_timeout_s: f64,
    /// After a link broke: how long a device keeps trying to reach the cloud again, and how
    /// long the cloud waits for it, s.
    #[arg(long, default_value_t = 60.0)]
    pub reconnect_timeout_s: f64,
    /// Bytes of cut-stream items a device keeps until the cloud acknowledges them, KiB; when
    /// they fill it the device waits (backpressure) rather than drop any.
    #[arg(long, default_value_t = 16 << 10)]
    pub resend_buffer_kib: usize,
    /// Runtime workers in the cloud.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    /// Executor slots per worker.
    #[arg(long, default_value_t = 4)]
    pub slots: u32,
    /// Sink records as JSON lines to this file (default: counted and discarded).
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// The cloud's keyed state at the end, as JSON lines, to this file.
    #[arg(long)]
    pub dump_state: Option<PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// The cluster secret and TLS (`--embedded` makes a secret for its own run).
    #[command(flatten)]
    pub security: super::security::SecurityArgs,
}

/// Runs `clasp edge`.
pub fn run(args: &Args) -> Result<()> {
    check_numbers(args)?;
    let p = super::load_pipeline(&args.pipeline)?;
    let devices = edgecut::devices::load(&args.devices, &p).map_err(|e| anyhow!("{e}"))?;
    let model = CostModel::from_spec(&p);
    let inputs = args
        .inputs
        .iter()
        .map(|a| input::parse_input(a))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("{e}"))?;
    let mode = if args.all_cloud { Mode::AllCloud } else { Mode::Cut };
    let uplink = Transport::parse(&args.uplink).map_err(|e| anyhow!("{e}"))?;
    let registry = crate::registry();
    if let Some(id) = &args.device {
        let join = match (&uplink, args.join.as_deref()) {
            (Transport::Connector, None) => {
                bail!(
                    "--device needs --join HOST:PORT (the cloud's edge ingress), or --uplink kafka:BROKERS/TOPIC"
                )
            }
            (_, join) => join.unwrap_or_default(),
        };
        let mut opts = device_options(args, id, join, mode, inputs);
        opts.uplink = uplink;
        opts.security = args.security.required("clasp edge --device")?;
        let report =
            device::run(&p, &devices, &model, registry, &opts).map_err(|e| anyhow!("{e}"))?;
        return print_device(&report, args.json);
    }
    if args.cloud {
        let mut opts = cloud_options(args, mode, inputs);
        opts.security = args.security.required("clasp edge --cloud")?;
        opts.uplink = uplink;
        let cloud = Cloud::bind(&p, &devices, &model, opts).map_err(|e| anyhow!("{e}"))?;
        eprintln!(
            "edge ingress on {}; cloud runs {}; waiting for {} device(s)",
            cloud.uplink(),
            describe(&cloud.operators()),
            devices.devices.len()
        );
        let report = cloud.run(registry, sink(args)?).map_err(|e| anyhow!("{e}"))?;
        return finish_cloud(args, &report, &[]);
    }
    if args.embedded {
        return run_embedded(args, &p, &devices, &model, mode, inputs, uplink);
    }
    bail!("say what to run: --device ID --join ADDR, --cloud, or --embedded")
}

fn shape(args: &Args) -> LinkShape {
    LinkShape {
        bandwidth_bps: args.bandwidth_kbit.map(|k| k * 1000.0),
        delay: Duration::from_secs_f64(args.delay_ms.max(0.0) / 1000.0),
    }
}

fn device_options(
    args: &Args,
    id: &str,
    join: &str,
    mode: Mode,
    inputs: Vec<(String, InputSpec)>,
) -> DeviceOptions {
    let mut o = DeviceOptions::new(id, join, inputs);
    o.mode = mode;
    o.speed = args.speed;
    o.shape = shape(args);
    o.flush = Duration::from_millis(args.flush_ms.max(1));
    o.connect_timeout = seconds(args.connect_timeout_s);
    o.reconnect_timeout = seconds(args.reconnect_timeout_s);
    o.resend_buffer = args.resend_buffer_kib << 10;
    o
}

/// Seconds checked at parse ([`check_numbers`]).
fn seconds(s: f64) -> Duration {
    Duration::from_secs_f64(s.clamp(0.0, super::bounds::MAX_DURATION.as_secs_f64()))
}

/// The numbers of the flags: finite and in range.
fn check_numbers(args: &Args) -> Result<()> {
    use super::bounds::{MAX_SLOTS, MAX_WORKERS, check_range, duration_of_seconds};
    let finite = |flag: &str, v: f64, lo: f64, hi: f64| {
        if !(v.is_finite() && v >= lo && v <= hi) {
            bail!("{flag} {v} must be a number between {lo} and {hi}");
        }
        Ok(())
    };
    finite("--speed", args.speed, 0.0, 1e6)?;
    finite("--delay-ms", args.delay_ms, 0.0, 60_000.0)?;
    if let Some(k) = args.bandwidth_kbit {
        finite("--bandwidth-kbit", k, 1e-3, 1e9)?;
    }
    duration_of_seconds("--connect-timeout-s", args.connect_timeout_s).map_err(|e| anyhow!(e))?;
    duration_of_seconds("--join-timeout-s", args.join_timeout_s).map_err(|e| anyhow!(e))?;
    duration_of_seconds("--reconnect-timeout-s", args.reconnect_timeout_s)
        .map_err(|e| anyhow!(e))?;
    check_range("--resend-buffer-kib", args.resend_buffer_kib, 1, 4 << 20)?;
    check_range("--workers", args.workers, 1, MAX_WORKERS as usize)?;
    check_range("--slots", args.slots, 1, MAX_SLOTS)?;
    check_range("--flush-ms", args.flush_ms, 0, 60_000)?;
    Ok(())
}

fn cloud_options(args: &Args, mode: Mode, inputs: Vec<(String, InputSpec)>) -> CloudOptions {
    CloudOptions {
        listen: args.listen.clone(),
        mode,
        workers: args.workers.max(1),
        slots: args.slots.max(1),
        join_timeout: seconds(args.join_timeout_s),
        reconnect_timeout: seconds(args.reconnect_timeout_s),
        inputs,
        speed: args.speed,
        dump_state: args.dump_state.is_some(),
        ..CloudOptions::default()
    }
}

fn run_embedded(
    args: &Args,
    p: &clasp_core::Pipeline,
    devices: &Devices,
    model: &CostModel,
    mode: Mode,
    inputs: Vec<(String, InputSpec)>,
    uplink: Transport,
) -> Result<()> {
    let mut o = EmbeddedOptions::new(inputs.clone());
    o.mode = mode;
    o.uplink = uplink;
    o.speed = args.speed;
    o.shape = shape(args);
    o.flush = Duration::from_millis(args.flush_ms.max(1));
    o.cloud = cloud_options(args, mode, inputs);
    o.cloud.security = args.security.own_cluster()?;
    let report = embedded::run(p, devices, model, crate::registry(), &o, sink(args)?)
        .map_err(|e| anyhow!("{e}"))?;
    finish_cloud(args, &report.cloud, &report.devices)
}

fn sink(args: &Args) -> Result<Box<dyn SinkOutput>> {
    Ok(match &args.output {
        Some(path) => {
            let f = std::fs::File::create(path)
                .with_context(|| format!("{}: cannot create the output file", path.display()))?;
            Box::new(JsonLinesSink(std::io::BufWriter::new(f)))
        }
        None => Box::new(DiscardSink),
    })
}

fn describe(ops: &[String]) -> String {
    if ops.is_empty() { "no operator (sinks only)".into() } else { ops.join(" -> ") }
}

fn finish_cloud(args: &Args, report: &CloudReport, devices: &[DeviceReport]) -> Result<()> {
    if let (Some(path), Some(state)) = (&args.dump_state, &report.state) {
        std::fs::write(path, state)
            .with_context(|| format!("{}: cannot write the state dump", path.display()))?;
    }
    if args.json {
        let v = serde_json::json!({ "cloud": report, "devices": devices });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!(
        "pipeline `{}` ({}); cloud ran {}",
        report.pipeline,
        report.mode,
        describe(&report.operators)
    );
    for d in devices {
        println!("  device {:<10} ran {}", d.device, describe(&d.operators));
    }
    for l in &report.links {
        let items: u64 = l.records.iter().map(|r| r.1).sum();
        println!(
            "  link {:<12} {:>10} bytes {:>9} items {:>6} frames",
            l.device, l.bytes, items, l.frames
        );
        if l.reconnects > 0 {
            println!(
                "    reconnected {} time(s); {} resent frame(s) it already held discarded",
                l.reconnects, l.duplicates
            );
        }
    }
    let lat = &report.latency;
    println!(
        "total {} bytes, {} items over the links; makespan {:.3} s; {} chains, latency p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms; {} sink records",
        report.bytes(),
        report.items(),
        report.makespan_s,
        report.chains,
        lat.p50_us as f64 / 1000.0,
        lat.p95_us as f64 / 1000.0,
        lat.p99_us as f64 / 1000.0,
        report.sink_records
    );
    Ok(())
}

fn print_device(r: &DeviceReport, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(r)?);
        return Ok(());
    }
    println!(
        "device {} ran {}: read {} records, sent {:?} ({} bytes, {} frames) in {:.3} s",
        r.device,
        describe(&r.operators),
        r.records_read,
        r.sent,
        r.bytes,
        r.frames,
        r.seconds
    );
    for (op, reason, n) in &r.rejected {
        println!("  {op} rejected {n} record(s): {reason}");
    }
    if r.reconnects > 0 {
        println!("  reconnected {} time(s), resent {} frame(s)", r.reconnects, r.resent);
    }
    Ok(())
}
