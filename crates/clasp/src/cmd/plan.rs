//! `clasp plan`: one scaling decision (worker count, placement, parallelism, loads) for a
//! pipeline at an input rate, from observed or spec-derived statistics.

use anyhow::{Context, Result, bail};
use clasp_core::Pipeline;
use clasp_core::stats::{Coefficients, ObservedStats};
use clasp_plan::projection::spec_observation;
use clasp_plan::report::PlanReport;
use clasp_plan::{Decision, PlanConfig, PlanInput, Policy};
use std::path::{Path, PathBuf};

/// Arguments of `clasp plan`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Pipeline spec file (TOML).
    pub spec: PathBuf,
    /// Input rate to sustain, in requests per second (> 0).
    #[arg(long, value_parser = super::bounds::parse_rate, allow_negative_numbers = true)]
    pub rate: f64,
    /// Scaling policy: clasp, faasflow, zhang24, ds2, flink, faasflow-sp, zhang24-sp or static.
    #[arg(long, default_value = "clasp")]
    pub policy: Policy,
    /// Worker limit (default 10).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_workers: Option<u32>,
    /// Observed statistics (JSON, docs/stats-schema.md); default: derived from the spec.
    #[arg(long, value_name = "FILE")]
    pub stats: Option<PathBuf>,
    /// Capacity-model coefficients `alpha,beta,gamma,W` (µs, µs, µs/s, µs/s); default: those
    /// in the statistics file, else the paper's 38.5,275,51500,850000.
    #[arg(long, value_parser = Coefficients::parse)]
    pub coefficients: Option<Coefficients>,
    /// Print the decision as JSON (docs/plan-json.md) instead of tables.
    #[arg(long)]
    pub json: bool,
}

/// Runs `clasp plan`.
pub fn run(args: &Args) -> Result<()> {
    let p = super::load_pipeline(&args.spec)?;
    let mut config = PlanConfig::default();
    if let Some(n) = args.max_workers {
        config.max_workers = n;
    }
    let (stats, coefficients) = statistics(args, &p, &config)?;
    let input = PlanInput {
        pipeline: &p,
        stats: &stats,
        target_rate: args.rate,
        coefficients,
        config: &config,
        current: None,
    };
    let decision = args
        .policy
        .decide(&input)
        .with_context(|| format!("planning `{}` at {} requests/s", p.name, args.rate))?;
    let report = PlanReport::new(&decision, &p, &coefficients, &config);
    if args.json {
        print!("{}", report.to_json());
    } else {
        print!("{}", human(&decision, &report));
    }
    Ok(())
}

/// The statistics and coefficients to plan with.
fn statistics(
    args: &Args,
    p: &Pipeline,
    config: &PlanConfig,
) -> Result<(ObservedStats, Coefficients)> {
    let Some(path) = &args.stats else {
        let c = args.coefficients.unwrap_or(Coefficients::PAPER);
        return Ok((spec_observation(p, args.rate, config, &c), c));
    };
    let stats = read_stats(path, p)?;
    let c = args.coefficients.or(stats.coefficients).unwrap_or(Coefficients::PAPER);
    let valid = [c.alpha, c.beta, c.gamma].iter().all(|v| v.is_finite() && *v >= 0.0);
    if !(valid && c.capacity.is_finite() && c.capacity > 0.0) {
        bail!(
            "{}: coefficients {c:?} are invalid (alpha, beta, gamma must be >= 0 and W > 0)\n  \
             help: give --coefficients alpha,beta,gamma,W",
            path.display()
        );
    }
    Ok((stats, c))
}

fn read_stats(path: &Path, p: &Pipeline) -> Result<ObservedStats> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{file}: cannot read the statistics file"))?;
    Ok(ObservedStats::from_json(&text, &file, p)?)
}

/// Tables per worker: operators with shares and instances, Eq. 8 load against capacity, and
/// the worker's chained-request rates.
fn human(d: &Decision, r: &PlanReport) -> String {
    let c = &r.coefficients;
    let mut out = format!(
        "pipeline `{}`, policy {}: {} worker(s) sustain {:.1} requests/s{}\n",
        r.pipeline,
        r.policy,
        r.workers,
        r.target_rate,
        if r.limited {
            format!(
                " (requested {:.1}: no more fits in {} worker(s); limit {})",
                r.requested_rate, r.workers, r.max_workers
            )
        } else {
            format!(" (worker limit {})", r.max_workers)
        }
    );
    out += &format!(
        "coefficients: alpha {} us, beta {} us, gamma {} us/s, W {} us/s; capacity per worker {:.0} us/s (headroom {})\n",
        c.alpha,
        c.beta,
        c.gamma,
        c.capacity,
        c.capacity * r.headroom,
        r.headroom
    );
    out += &format!("placement order: {}\n", r.order.join(", "));
    for l in &r.load {
        out += &format!(
            "\nworker {}: load {:.0} / {:.0} us/s ({:.1} %); chained requests: {:.1}/s local, {:.1}/s remote to {} worker(s)\n",
            l.worker,
            l.load,
            l.capacity,
            100.0 * l.load / l.capacity,
            l.local_rate,
            l.remote_rate,
            l.remote_destinations
        );
        out += &format!(
            "  {:<20} {:>14} {:>9} {:>11}\n",
            "operator", "share (us/s)", "fraction", "parallelism"
        );
        for e in r.placement.iter().filter(|e| e.worker == l.worker) {
            out += &format!(
                "  {:<20} {:>14.1} {:>9.4} {:>11}\n",
                e.operator, e.share, e.fraction, e.parallelism
            );
        }
    }
    let total: u32 =
        d.placement.operators.iter().flat_map(|o| &o.shares).map(|s| s.instances).sum();
    out += &format!("\ntotal parallelism: {total} instances\n");
    out
}
