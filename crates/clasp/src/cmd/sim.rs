//! `clasp sim`: runs a pipeline in the discrete-event simulator on a fixed number of workers
//! or under a scaling policy, and prints throughput, latency, workers over time and scaling
//! events. Every argument is checked before anything runs.

use anyhow::{Context, Result, bail};
use clasp_core::pattern::PatternSpec;
use clasp_core::stats::Coefficients;
use clasp_plan::AutoscalerConfig;
use clasp_plan::Policy;
use clasp_sim::{Deployment, Model, ServiceDist, SimConfig, Simulation};
use serde::Serialize;
use std::path::PathBuf;

/// Arguments of `clasp sim`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("deployment").required(true).args(["workers", "policy"])))]
pub struct Args {
    /// Pipeline spec file (TOML).
    pub spec: PathBuf,
    /// Run CLASP's placement over exactly this many workers for the whole run.
    #[arg(long, value_parser = parse_workers)]
    pub workers: Option<u32>,
    /// Start on one worker and scale with this policy: clasp, faasflow, zhang24, ds2, flink,
    /// faasflow-sp, zhang24-sp or static.
    #[arg(long)]
    pub policy: Option<Policy>,
    /// Input pattern: constant, unthrottled, burst, gradual, gradual:STAGE_S (every stage that
    /// many seconds) or trace:FILE.
    #[arg(long, default_value = "constant")]
    pub pattern: PatternSpec,
    /// Input rate in requests per second (> 0): the constant rate, or the maximum of burst and
    /// gradual.
    #[arg(long, value_parser = super::bounds::parse_rate, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    /// Simulated time, in seconds or with a unit (e.g. 120s, 2m; default: the pattern's
    /// length, else 60 s).
    #[arg(long, value_parser = super::duration::seconds)]
    pub duration: Option<f64>,
    /// Seconds at the start that are not measured (default 5, 0 with --policy).
    #[arg(long, value_parser = parse_non_negative)]
    pub warmup: Option<f64>,
    /// Seed of every random draw.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The simulated machines' costs `alpha,beta,gamma,W` (µs, µs, µs/s, µs/s); default the
    /// paper's 38.5,275,51500,850000.
    #[arg(long, value_parser = Coefficients::parse)]
    pub coefficients: Option<Coefficients>,
    /// Mean execution time of every operator (µs); default: the spec's service times, 400
    /// where none is given.
    #[arg(long, value_parser = parse_non_negative)]
    pub exec_us: Option<f64>,
    /// Execution time distribution: exponential, deterministic, lognormal or lognormal:CV.
    #[arg(long, default_value = "exponential")]
    pub service: ServiceDist,
    /// Executor slots per worker.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub slots: u32,
    /// Workers in the cluster (the policy's limit).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub max_workers: u32,
    /// With `--policy clasp`: the fewest workers whose predicted 95th percentile of end-to-end
    /// latency at the input rate is within this many milliseconds, in place of the headroom's
    /// margin (when none is, no more than those the model says lower it); a backlog's catch-up
    /// is sized for at full capacity but not judged.
    #[arg(long, value_name = "P95_MS")]
    pub latency_slo: Option<f64>,
    /// Write the last window's statistics (clasp.stats/1) with the scaling events to FILE.
    #[arg(long, value_name = "FILE")]
    pub stats: Option<PathBuf>,
    /// Print the whole summary as JSON.
    #[arg(long)]
    pub json: bool,
}

fn parse_workers(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(0) => Err("0 workers cannot run anything; give 1 or more".into()),
        Ok(n) if n > super::bounds::MAX_WORKERS => {
            Err(format!("{n} is more than the most workers, {}", super::bounds::MAX_WORKERS))
        }
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{s}` is not a worker count; give a whole number >= 1")),
    }
}

fn parse_non_negative(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("`{s}` must be a number >= 0")),
    }
}

/// The statistics file: the `clasp.stats/1` fields plus the scaling events.
#[derive(Serialize)]
struct StatsFile<'a> {
    #[serde(flatten)]
    stats: &'a clasp_core::stats::ObservedStats,
    scaling_events: &'a [clasp_sim::ScalingEvent],
}

/// Runs `clasp sim`.
pub fn run(args: &Args) -> Result<()> {
    let p = super::load_pipeline(&args.spec)?;
    let pattern = args.pattern.build(args.rate, args.seed)?;
    let duration = args.duration.or(pattern.duration()).unwrap_or(60.0);
    let elastic = args.policy.is_some();
    let warmup = args.warmup.unwrap_or(if elastic { 0.0 } else { 5.0 });
    if warmup >= duration {
        bail!("--warmup {warmup} s leaves nothing to measure in --duration {duration} s");
    }
    if let Some(n) = args.workers
        && n > args.max_workers
    {
        bail!("--workers {n} is more than the cluster's --max-workers {}", args.max_workers);
    }
    let cfg = SimConfig {
        slots: args.slots,
        costs: args.coefficients.unwrap_or(Coefficients::PAPER),
        max_workers: args.max_workers,
        service: args.service,
        default_exec_us: args.exec_us.unwrap_or(400.0),
        duration_s: duration,
        warmup_s: warmup,
        seed: args.seed,
        ..SimConfig::default()
    };
    let mut model = Model::from_spec(&p, &cfg);
    if let Some(us) = args.exec_us {
        model = model.with_exec_us(us);
    }
    let deployment = match (args.workers, args.policy) {
        (Some(n), _) => {
            let rate = args.rate.filter(|_| !pattern.rate_at(0.0).is_infinite());
            let rate = rate.unwrap_or(clasp_plan::autoscaler::UNTHROTTLED_RATE);
            Deployment::Static(clasp_sim::static_placement(&p, &cfg, rate, n)?)
        }
        (None, Some(policy)) => {
            // The estimator starts at the simulated cluster's true costs.
            let mut plan = clasp_sim::plan_config(&cfg, args.max_workers);
            plan.estimator = plan.estimator.starting_at(cfg.costs);
            let autoscaler = AutoscalerConfig {
                window_s: cfg.window_s,
                latency_slo_ms: args.latency_slo,
                ..AutoscalerConfig::with_policy(policy).with_plan(plan)
            };
            autoscaler.validate()?;
            Deployment::Elastic(Box::new(autoscaler))
        }
        (None, None) => bail!("give --workers N or --policy P"),
    };
    let sim = Simulation::new(&p, model, cfg, pattern, deployment)
        .with_context(|| format!("simulating `{}`", p.name))?;
    let summary = sim.run();
    if let Some(path) = &args.stats {
        let file = StatsFile { stats: &summary.stats, scaling_events: &summary.scaling_events };
        let text = serde_json::to_string_pretty(&file)?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("{}: cannot write the statistics file", path.display()))?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", summary.human());
    }
    Ok(())
}
