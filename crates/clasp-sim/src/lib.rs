//! clasp-sim: a discrete-event simulator of a clasp cluster — the planner and its workers —
//! driven by the same policy code (`clasp_plan`), input patterns (`clasp_core::pattern`) and
//! statistics schema (`clasp_core::stats`) as the runtime, so that experiments that need ten
//! 8-core workers can run on a laptop and be checked against the runtime where both can run.
//!
//! | module | what |
//! |---|---|
//! | [`config`] | the simulated cluster: slots, CPU, α/β/γ costs, delays, distributions |
//! | [`model`] | the pipeline compiled for simulation: execution times, requests per execution |
//! | [`engine`] | the event loop: [`Simulation`] and [`Deployment`]; the autoscaler's steps executed |
//! | [`worker`] | queues, executor slots with instance limits, a processor-shared CPU |
//! | [`routing`] | key-group and share-based routing of a placement |
//! | [`migration`] | the decentralized migration of §4.4, step by step |
//! | [`report`] | worker reports and their aggregation into observed statistics |
//! | [`summary`] | what a run reports |
//!
//! Build a simulation from a pipeline, a configuration, an input pattern and a deployment, and
//! run it:
//!
//! ```
//! use clasp_core::pattern::RatePattern;
//! use clasp_sim::{Deployment, SimConfig, Simulation, static_placement};
//!
//! let spec = "[[source]]\nname = \"in\"\n[[operator]]\nname = \"a\"\nkind = \"map\"\n\
//!             [[stream]]\nfrom = \"in\"\nto = \"a\"\n";
//! let p = clasp_core::spec::parse(spec, "a.toml").unwrap();
//! let cfg = SimConfig { duration_s: 5.0, warmup_s: 1.0, ..SimConfig::default() };
//! let placement = static_placement(&p, &cfg, 1000.0, 1).unwrap();
//! let sim = Simulation::from_spec(&p, cfg, RatePattern::constant(1000.0), Deployment::Static(placement))
//!     .unwrap();
//! let summary = sim.run();
//! assert!((summary.throughput - 1000.0).abs() < 100.0);
//! ```

pub mod chains;
pub mod config;
pub mod engine;
pub mod error;
pub mod events;
pub mod migration;
pub mod model;
pub mod planner;
pub mod report;
pub mod routing;
pub mod summary;
#[cfg(test)]
mod testing;
pub mod worker;

pub use config::{Arrivals, ServiceDist, SimConfig};
pub use engine::{Deployment, Simulation};
pub use error::SimError;
pub use model::Model;
pub use summary::{IntervalRow, Latency, ScalingEvent, SimSummary};

use clasp_core::Pipeline;
use clasp_core::placement::Placement;
use clasp_core::stats::ObservedStats;
use clasp_plan::policy::clasp_on_workers;
use clasp_plan::projection::spec_observation;
use clasp_plan::{AutoscalerConfig, PlanConfig, PlanInput, Policy};

/// CLASP's placement of `p` over exactly `workers` workers for `rate` requests/s (the highest
/// rate they sustain when they cannot hold `rate`), from spec-derived statistics and the
/// configuration's true costs: the placement `clasp sim --workers N` runs.
pub fn static_placement(
    p: &Pipeline,
    cfg: &SimConfig,
    rate: f64,
    workers: u32,
) -> Result<Placement, SimError> {
    let plan = plan_config(cfg, workers.max(cfg.max_workers));
    let stats = spec_observation(p, rate, &plan, &cfg.costs);
    placement_on(p, &stats, cfg, rate, workers)
}

/// CLASP's placement over exactly `workers` workers from the given statistics.
pub fn placement_on(
    p: &Pipeline,
    stats: &ObservedStats,
    cfg: &SimConfig,
    rate: f64,
    workers: u32,
) -> Result<Placement, SimError> {
    if workers == 0 || workers > cfg.max_workers {
        return Err(SimError::Config(format!(
            "--workers {workers} must be in 1..={} (the cluster's max_workers)",
            cfg.max_workers
        )));
    }
    let plan = plan_config(cfg, cfg.max_workers);
    let input = PlanInput {
        pipeline: p,
        stats,
        target_rate: rate,
        coefficients: cfg.costs,
        config: &plan,
        current: None,
    };
    Ok(clasp_on_workers(Policy::Clasp, &input, workers)?.placement)
}

/// The autoscaler of `policy` on a simulated cluster: planning parameters matching it
/// ([`plan_config`]) and the estimator starting from the paper's measured coefficients, as the
/// paper initializes it.
pub fn autoscaler_config(cfg: &SimConfig, policy: Policy) -> AutoscalerConfig {
    let mut plan = plan_config(cfg, cfg.max_workers);
    plan.estimator = plan.estimator.starting_at(clasp_core::stats::Coefficients::PAPER);
    AutoscalerConfig {
        window_s: cfg.window_s,
        ..AutoscalerConfig::with_policy(policy).with_plan(plan)
    }
}

/// Planning parameters matching a simulated cluster: its slots, `max_workers`, mean
/// execution time and planning headroom.
pub fn plan_config(cfg: &SimConfig, max_workers: u32) -> PlanConfig {
    PlanConfig {
        slots_per_worker: cfg.slots,
        max_workers: max_workers.min(cfg.max_workers).max(1),
        default_exec_us: cfg.default_exec_us,
        headroom: cfg.plan_headroom,
        ..PlanConfig::default()
    }
}
