//! `clasp run` (and `clasp planner`): run a pipeline on a cluster of workers, elastically
//! under a scaling policy, with live progress and a summary.

use super::bounds;
use anyhow::{Context, Result, anyhow, bail};
use clasp_core::Pipeline;
use clasp_core::input::{LineReader, LineSource, MemoryLines};
use clasp_core::operator::Registry;
use clasp_core::pattern::{PatternSpec, RatePattern};
use clasp_core::pipeline::{ServiceMode, ServicePer, ServiceTime};
use clasp_core::source::{FileSource, Replayable, Source, from_lines};
use clasp_core::stats::Coefficients;
use clasp_plan::PlanConfig;
use clasp_plan::autoscaler::AutoscalerConfig;
use clasp_plan::autoscaler::Mode;
use clasp_plan::estimator::EstimatorConfig;
use clasp_plan::triggers::TriggerConfig;
use clasp_runtime::cluster::Launch;
use clasp_runtime::job::{self, Job};
use clasp_runtime::observe::Observatory;
use clasp_runtime::planner::{Input, PlannerConfig, timers_of};
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

mod args;
mod display;
mod kafka;
pub use args::{Args, ScalingMode};
use display::{event_line, live_line, summary};

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
        if micros > bounds::MAX_SERVICE_US {
            bail!(
                "--service-time `{spec}`: {micros} µs is longer than the longest allowed, {} µs",
                bounds::MAX_SERVICE_US
            );
        }
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

/// One `--input`: the source it feeds and where its records come from.
fn open_input(
    p: &Pipeline,
    spec: &str,
    seed: u64,
    preload: bool,
    registry: &Registry,
) -> Result<(clasp_core::SourceId, Box<dyn Source>)> {
    // A source name has no `:`; an `=` after one belongs to the input (`kafka:…?stop=latest`).
    let (source, what) = match spec.split_once('=') {
        Some((s, w)) if !s.contains(':') => (Some(s), w),
        _ => (None, spec),
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
    let event_time = registry.event_times(p).map_err(|e| anyhow!("{e}"))?[id.index()].clone();
    if let Some(kafka) = what.strip_prefix(kafka::PREFIX) {
        let source = kafka::source(kafka, &p.sources[id.index()], event_time)
            .with_context(|| format!("--input `{spec}`"))?;
        return Ok((id, source));
    }
    let lines: Box<dyn LineSource> = if let Some(path) = what.strip_prefix("file:") {
        if !preload {
            let file = FileSource::open(path.as_ref())
                .with_context(|| format!("--input `{spec}`: cannot open `{path}`"))?;
            return Ok((id, Box::new(file.with_event_time(event_time))));
        }
        let file = std::fs::File::open(path)
            .with_context(|| format!("--input `{spec}`: cannot open `{path}`"))?;
        Box::new(LineReader::new(file))
    } else if what == "gen" || what.starts_with("gen:") {
        let count: u64 = match what.strip_prefix("gen:") {
            Some(n) => {
                n.parse().map_err(|_| anyhow!("--input `{spec}`: `{n}` is not a record count"))?
            }
            None => 100_000,
        };
        let def = clasp_apps::inputs::source(&p.name, Some(name))
            .map_err(|e| anyhow!("--input `{spec}`: {e}"))?;
        if !preload {
            // Seeded, so a recovery replays it from any position.
            let reopen = Box::new(move || Ok(def.generator(count, seed)));
            let source =
                Replayable::new(reopen, event_time).with_context(|| format!("--input `{spec}`"))?;
            return Ok((id, Box::new(source)));
        }
        def.generator(count, seed)
    } else if let Some((kind, arg)) = what.split_once(':')
        && let Some(open) = registry.source(kind)
    {
        let source = open(arg, seed).map_err(|e| anyhow!("--input `{spec}`: {e}"))?;
        return Ok((id, source));
    } else {
        let kinds: Vec<String> = registry.source_names().map(|k| format!(", {k}:ARG")).collect();
        bail!(
            "--input `{spec}`: expected file:PATH, gen[:COUNT] or kafka:BROKERS/TOPIC{}",
            kinds.concat()
        );
    };
    if !preload {
        return Ok((id, from_lines(lines, event_time)));
    }
    let lines = Arc::new(read_all(lines).with_context(|| format!("--input `{spec}`"))?);
    Ok((id, from_lines(Box::new(MemoryLines::new(lines, 0, 1)), event_time)))
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
fn inputs(
    p: &Pipeline,
    args: &Args,
    pattern: &Arc<RatePattern>,
    registry: &Registry,
) -> Result<Vec<Input>> {
    let specs: Vec<String> =
        if args.input.is_empty() { vec!["gen".into()] } else { args.input.clone() };
    let mut opened = Vec::new();
    for spec in &specs {
        let (id, reader) = open_input(p, spec, args.seed, args.preload, registry)?;
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
    let fall_s = TriggerConfig::default().change_for_s;
    if args.rise_after.as_secs_f64() > fall_s {
        bail!(
            "--rise-after {:?} must be at most {fall_s} s: a rise of the input rate is acted on no later than a fall",
            args.rise_after
        );
    }
    let triggers = TriggerConfig {
        rule: args.trigger,
        warmup_requests: args.warmup,
        warmup_s: args.warmup_time.as_secs_f64(),
        rise_for_s: args.rise_after.as_secs_f64(),
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
        mode: match args.scaling {
            ScalingMode::Act => Mode::Act,
            ScalingMode::Recommend => Mode::Recommend,
        },
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
    bounds::check_range("--batch", args.batch, 1, bounds::MAX_BATCH)?;
    bounds::check_range("--slots", args.slots, 1, bounds::MAX_SLOTS)?;
    bounds::check_range("--key-groups", args.key_groups, 1, bounds::MAX_KEY_GROUPS)?;
    if args.max_workers > bounds::MAX_WORKERS {
        bail!("--max-workers {} must be between 1 and {}", args.max_workers, bounds::MAX_WORKERS);
    }
    let (lo, hi) = (*bounds::INTERVAL_MS.start(), *bounds::INTERVAL_MS.end());
    bounds::check_range("--interval-ms", args.interval_ms, lo, hi)?;
    if !(args.cooldown.is_finite()
        && (0.0..=bounds::MAX_DURATION.as_secs_f64()).contains(&args.cooldown))
    {
        bail!("--cooldown {} must be a number of seconds between 0 and 30 days", args.cooldown);
    }
    if let Some(slo) = args.latency_slo.filter(|s| !(s.is_finite() && *s > 0.0 && *s <= 3.6e6)) {
        bail!("--latency-slo {slo} must be a number of milliseconds between 0 and one hour");
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
    if let Some(r) = args.rate.filter(|r| *r > bounds::MAX_RATE) {
        bail!("--rate {r} is more than the largest rate, {} requests per second", bounds::MAX_RATE);
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
    let security = match launch {
        Launch::External => args.security.required("clasp planner")?,
        _ => args.security.own_cluster()?,
    };
    let mut planner = PlannerConfig {
        listen: args.listen.clone(),
        batch_size: args.batch,
        // --duration ends the run; a pattern's end only the input.
        stop_at_duration: args.duration.is_some(),
        security,
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
    let registry = crate::registry();
    planner.timers = timers_of(&pipeline, registry).map_err(|e| anyhow!("{e}"))?;
    let inputs = inputs(&pipeline, args, &pattern, registry)?;
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
        Launch::Threads(crate::registry().clone())
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
    let replayable = inputs.iter().all(|i| i.reader.rewindable());
    let prepared = args.fault.prepare(&job.pipeline, args.key_groups, replayable)?;
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
    let kafka_output = args.output.as_ref().and_then(|p| p.to_str()?.strip_prefix(kafka::PREFIX));
    let sink = match kafka_output {
        Some(spec) => kafka::sink(spec, &job.fault)
            .with_context(|| format!("--output `{}{spec}`", kafka::PREFIX))?,
        None => super::fault::output_sink(args.output.as_deref(), &job.fault)?,
    };
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
    stop_on_signals(&job.planner.interrupt)?;
    let quiet = args.quiet;
    let observatory = Arc::new(Observatory::new(&job.pipeline, policy.name(), job.scaling.mode));
    let access = match &job.planner.security.secret {
        Some(secret) => clasp_admin::Access::Token(secret.clone()),
        None if args.security.insecure => clasp_admin::Access::Insecure,
        None => clasp_admin::Access::Loopback,
    };
    let admin = (!args.no_admin)
        .then(|| clasp_admin::AdminServer::start(&args.admin_address, observatory.clone(), access))
        .transpose()?;
    if let Some(a) = &admin {
        if !a.addr().ip().is_loopback() {
            tracing::warn!(
                "the admin server listens on {}, beyond this machine, in plain HTTP{}",
                a.addr(),
                if a.token().is_some() { "" } else { " and open to anyone (--insecure)" }
            );
        }
        eprintln!("clasp: admin server at {} (metrics at {}metrics)", a.url(), a.url());
        if a.token().is_some() {
            eprintln!(
                "clasp: dashboard at {} ; other clients send `Authorization: Bearer <token>` (`clasp admin-token` prints it)",
                a.dashboard_url()
            );
        }
    }
    let result = job::run_with_faults(
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
        Some(&observatory),
    );
    if let Some(a) = admin {
        a.stop()?;
    }
    if let Some(dir) = &prepared.temporary {
        let _ = std::fs::remove_dir_all(dir);
    }
    let out = match result {
        Ok(out) => out,
        Err(job::JobError::Failed { error, saved, stats }) => {
            // What the run got through is written, and said to be partial.
            let mut saved: Vec<String> = [saved].into_iter().filter(|s| !s.is_empty()).collect();
            if let Some(d) = &mut dump {
                saved.push(match d.flush() {
                    Ok(()) => "the state dump is written".into(),
                    Err(e) => format!("--state-dump: {e}"),
                });
            }
            if let Some(path) = &args.stats {
                saved.push(match write_stats(path, &stats) {
                    Ok(()) => format!("--stats {} covers the run until it failed", path.display()),
                    Err(e) => crate::report_error::chain(&e),
                });
            }
            if saved.is_empty() {
                saved.push("none (no --state-dump or --stats asked for)".into());
            }
            return Err(anyhow::Error::new(*error)
                .context(format!("the run failed; partial results: {}", saved.join("; "))));
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(d) = &mut dump {
        d.flush().context("--state-dump")?;
    }
    if let Some(path) = &args.stats {
        write_stats(path, &out.stats)?;
    }
    print!("{}", summary(&name, policy, &out));
    print!("{}", super::fault::summary_lines(&out));
    if !note.is_empty() {
        println!("note       {}", note.trim_start_matches("; "));
    }
    if out.summary.interrupted {
        bail!("interrupted by a signal: the results written are partial");
    }
    Ok(())
}

fn write_stats(path: &PathBuf, stats: &job::RunStats) -> Result<()> {
    let mut w = create(path, "--stats")?;
    serde_json::to_writer_pretty(&mut w, stats).context("--stats")?;
    w.flush().context("--stats")
}

/// A first SIGINT or SIGTERM stops the run as its duration would, so that what it got through
/// is written; a second one ends the process at once.
fn stop_on_signals(interrupt: &Arc<std::sync::atomic::AtomicBool>) -> Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    for signal in [SIGINT, SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(signal, 130, interrupt.clone())
            .and_then(|_| signal_hook::flag::register(signal, interrupt.clone()))
            .with_context(|| format!("installing the handler of signal {signal}"))?;
    }
    Ok(())
}
