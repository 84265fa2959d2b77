//! `clasp run` (and `clasp planner`): run a pipeline on a cluster of workers, elastically
//! under a scaling policy, with live progress and a summary.

use anyhow::{Context, Result, anyhow, bail};
use clasp_core::Pipeline;
use clasp_core::input::{FileLines, LineSource, MemoryLines};
use clasp_core::pattern::{PatternSpec, RatePattern};
use clasp_core::pipeline::{ServiceMode, ServicePer, ServiceTime};
use clasp_core::stats::Coefficients;
use clasp_plan::autoscaler::AutoscalerConfig;
use clasp_plan::estimator::EstimatorConfig;
use clasp_plan::triggers::{TriggerConfig, TriggerRule};
use clasp_plan::{PlanConfig, Policy};
use clasp_runtime::cluster::Launch;
use clasp_runtime::job::{self, Job, RescaleAt};
use clasp_runtime::planner::{Input, PlannerConfig, Progress};
use clasp_runtime::scaling::ScalingEvent;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `clasp run` and `clasp planner`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Pipeline spec (TOML).
    pub spec: PathBuf,
    /// Workers at the start.
    #[arg(long, default_value_t = 1)]
    pub workers: u32,
    /// Executor slots per worker.
    #[arg(long, default_value_t = 10)]
    pub slots: u32,
    /// Input of a source: `[SOURCE=]file:PATH` (lines of a file) or `[SOURCE=]gen[:COUNT]`
    /// (the application's seeded generator, default 100000 records). Repeat per source.
    #[arg(long, value_name = "SPEC")]
    pub input: Vec<String>,
    /// Input requests per second (the maximum for burst and gradual); without it the input is
    /// unthrottled.
    #[arg(long)]
    pub rate: Option<f64>,
    /// How the rate varies: constant, unthrottled, burst, gradual or trace:FILE.
    #[arg(long, default_value = "constant")]
    pub pattern: String,
    /// Stop feeding input after this long (e.g. 30s, 2m, or seconds); default: when the input or the
    /// pattern ends.
    #[arg(long, value_parser = super::duration::parse)]
    pub duration: Option<Duration>,
    /// Scaling policy: clasp, faasflow, zhang24, ds2, flink, faasflow-sp, zhang24-sp or static.
    #[arg(long, default_value = "static")]
    pub policy: Policy,
    /// Most workers a policy may use.
    #[arg(long, default_value_t = 10)]
    pub max_workers: u32,
    /// With `--policy clasp`: also keep the predicted 95th percentile of end-to-end latency
    /// within this many milliseconds, choosing the fewest workers that do.
    #[arg(long, value_name = "P95_MS")]
    pub latency_slo: Option<f64>,
    /// Start from this placement (the JSON of `clasp plan --json`).
    #[arg(long)]
    pub placement: Option<PathBuf>,
    /// Records per request.
    #[arg(long, default_value_t = 256)]
    pub batch: u32,
    /// Seed for generators, patterns and routing draws.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write sink records here as JSON lines.
    #[arg(long)]
    pub output: Option<PathBuf>,
    /// Write the final keyed state here as JSON lines.
    #[arg(long)]
    pub state_dump: Option<PathBuf>,
    /// Write the observed statistics and scaling history here (JSON).
    #[arg(long)]
    pub stats: Option<PathBuf>,
    /// Run workers as separate OS processes instead of threads of this process.
    #[arg(long)]
    pub processes: bool,
    /// Emulated service time: `OPERATOR=MICROS[:spin|:sleep]`, `*` for every operator.
    #[arg(long = "service-time", value_name = "OP=MICROS[:MODE]")]
    pub service_time: Vec<String>,
    /// Emulated chained-request costs `local=US,remote=US,fanout=US[:spin|:sleep]`, spent by
    /// the sending executor on top of the real cost (to run the paper's cost regime, e.g.
    /// `local=38.5,remote=275,fanout=51500`).
    #[arg(long, value_name = "COSTS")]
    pub dispatch_cost: Option<String>,
    /// Load the whole input into memory before starting (for measurements).
    #[arg(long)]
    pub preload: bool,
    /// Metrics interval in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// Key groups per keyed operator.
    #[arg(long, default_value_t = 1024)]
    pub key_groups: u32,
    /// Initial estimates `alpha,beta,gamma,W` (µs, µs, µs/s, µs/s); default: this runtime's
    /// order of magnitude (0.2, 1, 100, slots × 10⁶).
    #[arg(long)]
    pub coefficients: Option<String>,
    /// Trigger rule: paper (rate changed for 2 s, or lagging for 3 s) or reference.
    #[arg(long, default_value = "paper", value_parser = parse_rule)]
    pub trigger: TriggerRule,
    /// Input requests before the first scaling decision (the paper's setup: 10000).
    #[arg(long, default_value_t = 0)]
    pub warmup: u64,
    /// Time before the first scaling decision.
    #[arg(long, default_value = "2s", value_parser = super::duration::parse_or_zero)]
    pub warmup_time: Duration,
    /// A backlog is sized to drain within this time after a load jump (0s: size for the rate
    /// alone, as the paper does).
    #[arg(long, default_value = "10s", value_parser = super::duration::parse_or_zero)]
    pub catch_up: Duration,
    /// A scale-in goes ahead only if it is still decided this long after it first was.
    #[arg(long, default_value = "5s", value_parser = super::duration::parse_or_zero)]
    pub scale_in_delay: Duration,
    /// Seconds during which a decision undoing the last one is held back.
    #[arg(long, default_value_t = 10.0)]
    pub cooldown: f64,
    /// Rescales to make whatever the policy decides: `REQUESTS:WORKERS`, comma-separated, e.g.
    /// `20000:3,60000:1` moves to CLASP's placement on 3 workers once 20,000 input requests
    /// entered the planner, then back to 1 after 60,000.
    #[arg(long, value_delimiter = ',', value_name = "REQUESTS:WORKERS")]
    pub rescale_at: Vec<RescaleAt>,
    /// Address workers join (`clasp planner`; `clasp run` uses loopback).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: String,
    /// No live progress line.
    #[arg(long)]
    pub quiet: bool,
    /// Checkpoints and recovery.
    #[command(flatten)]
    pub fault: super::fault::FaultArgs,
}

fn parse_rule(s: &str) -> Result<TriggerRule, String> {
    match s {
        "paper" => Ok(TriggerRule::Paper),
        "reference" => Ok(TriggerRule::Reference),
        _ => Err(format!("unknown trigger rule `{s}`; use paper or reference")),
    }
}

/// Applies `--service-time` overrides.
fn apply_service_times(p: &mut Pipeline, specs: &[String]) -> Result<()> {
    for spec in specs {
        let (op, rest) = spec.split_once('=').ok_or_else(|| {
            anyhow!("--service-time `{spec}`: expected OPERATOR=MICROS[:spin|:sleep]")
        })?;
        let (micros, mode) = match rest.split_once(':') {
            Some((m, "spin")) => (m, ServiceMode::Spin),
            Some((m, "sleep")) => (m, ServiceMode::Sleep),
            Some((_, other)) => {
                bail!("--service-time `{spec}`: mode `{other}` is not spin or sleep")
            }
            None => (rest, ServiceMode::Spin),
        };
        let micros: f64 =
            micros.parse().ok().filter(|m: &f64| m.is_finite() && *m >= 0.0).ok_or_else(|| {
                anyhow!("--service-time `{spec}`: `{micros}` is not a number of microseconds >= 0")
            })?;
        let service = Some(ServiceTime { micros, mode, per: ServicePer::Record });
        if op == "*" {
            p.operators.iter_mut().for_each(|o| o.service = service);
        } else {
            let names =
                || p.operators.iter().map(|o| o.name.as_str()).collect::<Vec<_>>().join(", ");
            let id = p.operator_id(op).ok_or_else(|| {
                anyhow!("--service-time `{spec}`: no operator `{op}`; operators: {}", names())
            })?;
            p.operators[id.index()].service = service;
        }
    }
    Ok(())
}

/// One `--input`: the source it feeds and where its lines come from.
fn open_input(
    p: &Pipeline,
    spec: &str,
    seed: u64,
    preload: bool,
) -> Result<(clasp_core::SourceId, Box<dyn LineSource>)> {
    let (source, what) = match spec.split_once('=') {
        Some((s, w)) => (Some(s), w),
        None => (None, spec),
    };
    let id = match source {
        Some(name) => p.source_id(name).ok_or_else(|| {
            let known: Vec<&str> = p.sources.iter().map(|s| s.name.as_str()).collect();
            anyhow!(
                "--input `{spec}`: pipeline `{}` has no source `{name}`; its sources: {}",
                p.name,
                known.join(", ")
            )
        })?,
        None if p.sources.len() == 1 => p.sources[0].id,
        None => bail!(
            "--input `{spec}`: pipeline `{}` has several sources; write SOURCE={what}",
            p.name
        ),
    };
    let name = &p.sources[id.index()].name;
    let reader: Box<dyn LineSource> = if let Some(path) = what.strip_prefix("file:") {
        let file = std::fs::File::open(path)
            .with_context(|| format!("--input `{spec}`: cannot open `{path}`"))?;
        Box::new(FileLines::new(file))
    } else if what == "gen" || what.starts_with("gen:") {
        let count: u64 = match what.strip_prefix("gen:") {
            Some(n) => {
                n.parse().map_err(|_| anyhow!("--input `{spec}`: `{n}` is not a record count"))?
            }
            None => 100_000,
        };
        let def = clasp_apps::inputs::source(&p.name, Some(name))
            .map_err(|e| anyhow!("--input `{spec}`: {e}"))?;
        def.generator(count, seed)
    } else {
        bail!("--input `{spec}`: expected file:PATH or gen[:COUNT]");
    };
    if !preload {
        return Ok((id, reader));
    }
    let lines = Arc::new(read_all(reader).with_context(|| format!("--input `{spec}`"))?);
    Ok((id, Box::new(MemoryLines::new(lines, 0, 1))))
}

fn read_all(mut r: Box<dyn LineSource>) -> std::io::Result<Vec<Vec<u8>>> {
    let mut v = Vec::new();
    let mut line = Vec::new();
    while r.next_line(&mut line)? {
        v.push(line.clone());
    }
    Ok(v)
}

/// The inputs, each paced by its share of the pattern's rate (sources with a `rate` hint in
/// proportion to it, the others evenly).
fn inputs(p: &Pipeline, args: &Args, pattern: &Arc<RatePattern>) -> Result<Vec<Input>> {
    let specs: Vec<String> =
        if args.input.is_empty() { vec!["gen".into()] } else { args.input.clone() };
    let mut opened = Vec::new();
    for spec in &specs {
        let (id, reader) = open_input(p, spec, args.seed, args.preload)?;
        if opened.iter().any(|(i, _)| *i == id) {
            bail!("--input: source `{}` is given twice", p.sources[id.index()].name);
        }
        opened.push((id, reader));
    }
    for s in &p.sources {
        if !opened.iter().any(|(i, _)| *i == s.id) {
            bail!(
                "source `{}` has no input; give --input {}=file:PATH or {}=gen",
                s.name,
                s.name,
                s.name
            );
        }
    }
    let weights: Vec<f64> =
        opened.iter().map(|(i, _)| p.sources[i.index()].rate.unwrap_or(1.0)).collect();
    let total: f64 = weights.iter().sum::<f64>().max(1e-9);
    Ok(opened
        .into_iter()
        .zip(weights)
        .map(|((source, reader), w)| {
            let pattern = pattern.clone();
            let share = w / total;
            Input {
                source,
                reader,
                rate: Box::new(move |t| {
                    let r = pattern.rate_at(t);
                    r.is_finite().then_some(r * share)
                }),
            }
        })
        .collect())
}

fn scaling_config(args: &Args, unthrottled: bool) -> Result<AutoscalerConfig> {
    if args.max_workers < 1 {
        bail!("--max-workers must be at least 1");
    }
    if args.workers < 1 || args.workers > args.max_workers {
        bail!(
            "--workers {} must be between 1 and --max-workers {}",
            args.workers,
            args.max_workers
        );
    }
    let mut plan = PlanConfig {
        max_workers: args.max_workers,
        slots_per_worker: args.slots,
        ..PlanConfig::default()
    };
    let initial = match &args.coefficients {
        Some(c) => Coefficients::parse(c).map_err(|e| anyhow!("--coefficients: {e}"))?,
        None => Coefficients {
            alpha: 0.2,
            beta: 1.0,
            gamma: 100.0,
            capacity: f64::from(args.slots) * 1e6,
        },
    };
    // The estimator starts from its normalization constants (normalized coefficients of 1).
    plan.estimator = EstimatorConfig {
        local_scale: initial.alpha.max(1e-3),
        remote_scale: initial.beta.max(1e-3),
        destinations_scale: initial.gamma.max(1e-3),
        load_scale: initial.capacity,
        initial_capacity: initial.capacity,
        min_remote_rate: 0.0,
        ..EstimatorConfig::default()
    };
    let triggers = TriggerConfig {
        rule: args.trigger,
        warmup_requests: args.warmup,
        warmup_s: args.warmup_time.as_secs_f64(),
        catch_up_s: args.catch_up.as_secs_f64(),
        cooldown_s: args.cooldown,
        ..TriggerConfig::default()
    };
    let cfg = AutoscalerConfig {
        policy: args.policy,
        plan,
        triggers,
        window_s: 5.0,
        unthrottled,
        batch_size: args.batch,
        scale_in_delay_s: args.scale_in_delay.as_secs_f64(),
        latency_slo_ms: args.latency_slo,
        ..AutoscalerConfig::default()
    };
    cfg.validate()?;
    Ok(cfg)
}

fn read_placement(path: &PathBuf, p: &Pipeline) -> Result<clasp_core::placement::Placement> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--placement: cannot read {}", path.display()))?;
    let report: clasp_plan::report::PlanReport = serde_json::from_str(&text).map_err(|e| {
        anyhow!("--placement {}: not the JSON of `clasp plan --json`: {e}", path.display())
    })?;
    report.to_placement(p).map_err(|e| anyhow!("--placement {}: {e}", path.display()))
}

/// Builds the job from the arguments.
fn job(args: &Args, launch: Launch) -> Result<(Job, Vec<Input>)> {
    if args.batch == 0 {
        bail!("--batch must be at least 1");
    }
    if args.slots == 0 {
        bail!("--slots must be at least 1");
    }
    let most = clasp_runtime::wire::MAX_KEY_GROUPS;
    if args.key_groups == 0 || args.key_groups > most {
        bail!("--key-groups {} must be between 1 and {most}", args.key_groups);
    }
    if let Some(r) = args.rescale_at.iter().find(|r| r.workers > args.max_workers) {
        bail!(
            "--rescale-at {}:{}: more workers than --max-workers {}",
            r.after_requests,
            r.workers,
            args.max_workers
        );
    }
    if let Some(r) = args.rate.filter(|r| !(r.is_finite() && *r > 0.0)) {
        bail!("--rate {r} must be a positive number of requests per second");
    }
    let mut pipeline = super::load_pipeline(&args.spec)?;
    apply_service_times(&mut pipeline, &args.service_time)?;
    let spec: PatternSpec = args.pattern.parse().map_err(|e| anyhow!("--pattern: {e}"))?;
    let pattern = match (&spec, args.rate) {
        (PatternSpec::Constant, None) => RatePattern::unthrottled(),
        _ => spec.build(args.rate, args.seed).map_err(|e| anyhow!("--pattern: {e}"))?,
    };
    let scaling = scaling_config(args, pattern.rate_at(0.0).is_infinite())?;
    let placement = args.placement.as_ref().map(|f| read_placement(f, &pipeline)).transpose()?;
    let mut planner = PlannerConfig {
        listen: args.listen.clone(),
        batch_size: args.batch,
        ..PlannerConfig::default()
    };
    planner.settings.batch_size = args.batch;
    planner.settings.key_groups = args.key_groups;
    planner.settings.interval_ms = args.interval_ms;
    planner.settings.seed = args.seed;
    planner.settings.dispatch_cost = args
        .dispatch_cost
        .as_deref()
        .map(clasp_runtime::wire::DispatchCost::parse)
        .transpose()
        .map_err(|e| anyhow!("--dispatch-cost: {e}"))?;
    let duration = args.duration.or_else(|| pattern.duration().map(Duration::from_secs_f64));
    let pattern = Arc::new(pattern);
    let inputs = inputs(&pipeline, args, &pattern)?;
    let initial_rate = args.rate.unwrap_or(1_000.0);
    let job = Job {
        pipeline,
        workers: placement.as_ref().map_or(args.workers, |p| p.workers),
        slots: args.slots,
        planner,
        launch,
        placement,
        scaling,
        duration,
        initial_rate,
        rescales: args.rescale_at.clone(),
        fault: Default::default(),
    };
    Ok((job, inputs))
}

/// Says when dispatch costs are emulated, so no report is mistaken for native costs.
fn emulation_note(job: &Job) -> String {
    match job.planner.settings.dispatch_cost {
        Some(c) => format!(
            "; EMULATED dispatch costs: local {} us, remote {} us, fanout {} us/s ({:?})",
            c.local_us, c.remote_us, c.fanout_us, c.mode
        ),
        None => String::new(),
    }
}

fn create(path: &PathBuf, what: &str) -> Result<BufWriter<std::fs::File>> {
    let f = std::fs::File::create(path)
        .with_context(|| format!("{what}: cannot create {}", path.display()))?;
    Ok(BufWriter::new(f))
}

/// Runs `clasp run`.
pub fn run(args: &Args) -> Result<()> {
    let launch = if args.processes {
        let exe = std::env::current_exe()
            .context("locating this executable to start worker processes")?;
        Launch::Processes { exe, args: vec!["worker".into()] }
    } else {
        Launch::Threads(clasp_apps::registry())
    };
    execute(args, launch)
}

/// Runs `clasp planner`: like `clasp run`, with workers joining from elsewhere.
pub fn run_planner(args: &Args) -> Result<()> {
    eprintln!("planner: waiting for {} worker(s) to join at {}", args.workers, args.listen);
    execute(args, Launch::External)
}

fn execute(args: &Args, launch: Launch) -> Result<()> {
    let (mut job, inputs) = job(args, launch)?;
    let prepared = args.fault.prepare(&job.pipeline, args.key_groups)?;
    for w in &prepared.warnings {
        eprintln!("warning: {w}");
    }
    if let Some(m) = &prepared.fault.resume {
        eprintln!(
            "clasp: resuming from checkpoint {} ({} input requests done, epoch {})",
            m.id, m.requests, m.epoch
        );
    }
    job.fault = prepared.fault;
    let sink = super::fault::output_sink(args.output.as_deref(), &job.fault)?;
    let mut dump = args.state_dump.as_ref().map(|p| create(p, "--state-dump")).transpose()?;
    let name = job.pipeline.name.clone();
    let policy = job.scaling.policy;
    let note = emulation_note(&job);
    eprintln!(
        "clasp: running `{name}` with policy {policy} on {} worker(s) (max {}), {} records per request{}{}",
        job.workers,
        args.max_workers,
        args.batch,
        if args.processes { ", workers as processes" } else { "" },
        emulation_note(&job)
    );
    let quiet = args.quiet;
    let out = job::run_with_faults(
        job,
        inputs,
        sink,
        dump.as_mut().map(|d| d as &mut dyn Write),
        |p| {
            if !quiet {
                eprintln!("{}", live_line(p));
            }
        },
        |e| eprintln!("{}", event_line(e)),
        |n| eprintln!("{}", super::fault::note_line(n)),
    )?;
    if let Some(dir) = &prepared.temporary {
        let _ = std::fs::remove_dir_all(dir);
    }
    if let Some(d) = &mut dump {
        d.flush().context("--state-dump")?;
    }
    if let Some(path) = &args.stats {
        let mut w = create(path, "--stats")?;
        serde_json::to_writer_pretty(&mut w, &out.stats).context("--stats")?;
        w.flush().context("--stats")?;
    }
    print!("{}", summary(&name, policy, &out));
    print!("{}", super::fault::summary_lines(&out));
    if !note.is_empty() {
        println!("note       {}", note.trim_start_matches("; "));
    }
    Ok(())
}

fn si(x: f64) -> String {
    match x.abs() {
        v if v >= 1e9 => format!("{:.2}G", x / 1e9),
        v if v >= 1e6 => format!("{:.2}M", x / 1e6),
        v if v >= 1e4 => format!("{:.1}k", x / 1e3),
        _ => format!("{x:.0}"),
    }
}

fn ms(us: u64) -> String {
    format!("{:.2}ms", us as f64 / 1e3)
}

/// The live progress line.
pub fn live_line(p: &Progress) -> String {
    let queues: Vec<String> = p.worker_queues.iter().map(u64::to_string).collect();
    format!(
        "[{:>6.1}s] in {} req/s ({} rec/s) | done {} req/s | p50 {} p95 {} | queue planner {} workers [{}] | chained {}/s local {}/s remote | workers {}",
        p.t,
        si(p.input_rate),
        si(p.input_records),
        si(p.throughput),
        ms(p.p50_us),
        ms(p.p95_us),
        p.planner_queue,
        queues.join(","),
        si(p.local_rate),
        si(p.remote_rate),
        p.workers
    )
}

/// One scaling event.
pub fn event_line(e: &ScalingEvent) -> String {
    format!(
        "[{:>6.1}s] scaling {} -> {} workers ({}, target {} req/s): planner {:.2} ms, worst worker pause {:.2} ms, {} keys ({} bytes) moved",
        e.time_s,
        e.from_workers,
        e.to_workers,
        e.reason,
        si(e.target_rate),
        e.planner_ms,
        e.max_worker_pause_ms,
        e.keys_moved,
        e.bytes_moved
    )
}

fn summary(name: &str, policy: Policy, out: &job::JobOutput) -> String {
    let s = &out.summary;
    let mut text = format!(
        "\n== `{name}` with policy {policy}: {:.1} s\n\
         input      {} requests, {} records ({} records/s)\n\
         completed  {} chains ({} req/s)\n\
         latency    p50 {} | p95 {} | p99 {} | max {} | mean {:.2}ms\n\
         chained    {} local, {} remote requests\n\
         sinks      {} records\n\
         workers    {} at the end; {} rescalings\n",
        s.duration_s,
        s.input_requests,
        s.input_records,
        si(s.records_per_s),
        s.completed,
        si(s.throughput),
        ms(s.latency.p50_us),
        ms(s.latency.p95_us),
        ms(s.latency.p99_us),
        ms(s.latency.max_us),
        s.latency.mean_us / 1e3,
        s.local_requests,
        s.remote_requests,
        s.sink_records,
        out.placement.workers,
        out.stats.scaling_events.len(),
    );
    text += "operators  name             requests    records    emitted  mean exec  state keys\n";
    for o in &s.operators {
        text += &format!(
            "           {:<16} {:>9} {:>10} {:>10} {:>8.1}us {:>11}\n",
            o.name, o.processed, o.records, o.emitted, o.mean_exec_us, o.state_keys
        );
    }
    let rejected = s.rejected();
    if rejected > 0 {
        text += &format!("rejected   {rejected} records:\n");
        for o in &s.operators {
            for (reason, n) in &o.rejected {
                text += &format!("           {}: {n} ({reason})\n", o.name);
            }
        }
    }
    if out.state_lines > 0 {
        text += &format!("state      {} keys dumped\n", out.state_lines);
    }
    text
}
