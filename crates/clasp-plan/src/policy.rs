//! Scaling policies behind one interface: every policy turns the same observed statistics and
//! target rate into a [`Decision`] (worker count, placement, parallelism, Eq. 8 loads).
//!
//! Adding a policy takes a variant in [`Policy`], its name in [`Policy::name`] and
//! [`Policy::ALL`], and an arm in [`Policy::decide_cached`] that builds a placement and hands it
//! to [`Decision::new`]; an "-SP" ablation (a baseline's worker count with CLASP's placement)
//! is one call to [`clasp_on_workers`].

use crate::baselines::{ds2, faasflow, flink, zhang24};
use crate::capacity::{WorkerLoad, placement_loads, share_busy_time};
use crate::config::PlanConfig;
use crate::error::PlanError;
use crate::limit::{LimitCache, RateSearch};
use crate::order::placement_order;
use crate::packing::{PackError, Packer};
use crate::parallelism;
use crate::projection::Projection;
use clasp_core::placement::Placement;
use clasp_core::stats::{Coefficients, ObservedStats};
use clasp_core::{OperatorId, Pipeline};
use std::fmt;
use std::str::FromStr;

/// A scaling and placement policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Policy {
    /// CLASP (§4.3): reverse-topological packing with the chained-request cost model.
    Clasp,
    /// FaaSFlow: slot-based worker count, operators grouped along heavy edges.
    FaasFlow,
    /// Zhang24: fitted overhead model, instances spread by affinity and balance.
    Zhang24,
    /// DS2: instances from true processing rates.
    Ds2,
    /// Flink's Kubernetes-operator autoscaler: parallelism from busy-time true rates at a
    /// target utilization, slot-sharing placement.
    Flink,
    /// FaaSFlow's worker count with CLASP's placement (ablation, §5.6).
    FaasFlowSp,
    /// Zhang24's worker count with CLASP's placement (ablation, §5.6).
    Zhang24Sp,
    /// Keep the current placement (everything on one worker if there is none); reports the
    /// rate that placement sustains.
    Static,
}

impl Policy {
    /// Every policy, in the order they are listed to users.
    pub const ALL: &'static [Policy] = &[
        Policy::Clasp,
        Policy::FaasFlow,
        Policy::Zhang24,
        Policy::Ds2,
        Policy::Flink,
        Policy::FaasFlowSp,
        Policy::Zhang24Sp,
        Policy::Static,
    ];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Clasp => "clasp",
            Self::FaasFlow => "faasflow",
            Self::Zhang24 => "zhang24",
            Self::Ds2 => "ds2",
            Self::Flink => "flink",
            Self::FaasFlowSp => "faasflow-sp",
            Self::Zhang24Sp => "zhang24-sp",
            Self::Static => "static",
        }
    }

    /// Decides with a fresh worker-limit cache.
    pub fn decide(self, input: &PlanInput<'_>) -> Result<Decision, PlanError> {
        self.decide_cached(input, &mut LimitCache::default())
    }

    /// Decides, reusing (and updating) `cache` for the worker-limit search.
    pub fn decide_cached(
        self,
        input: &PlanInput<'_>,
        cache: &mut LimitCache,
    ) -> Result<Decision, PlanError> {
        input.validate()?;
        match self {
            Self::Clasp => clasp(self, input, cache),
            Self::FaasFlow => {
                let cfg = faasflow_config(input.config);
                let n =
                    faasflow::worker_count(input.pipeline, input.stats, input.target_rate, &cfg);
                let placement =
                    faasflow::place(input.pipeline, input.stats, input.target_rate, n, &cfg);
                baseline(self, input, placement)
            }
            Self::Zhang24 => {
                let cfg = zhang24_config(input.config);
                let n = zhang24::worker_count(input.pipeline, input.stats, input.target_rate, &cfg);
                let placement =
                    zhang24::place(input.pipeline, input.stats, input.target_rate, n, &cfg);
                baseline(self, input, placement)
            }
            Self::Ds2 => {
                let cfg = ds2_config(input.config);
                let (p, stats, rate) = (input.pipeline, input.stats, input.target_rate);
                let n = ds2::worker_count(p, stats, rate, input.current, &cfg);
                let placement = ds2::place(p, stats, rate, n, input.current, &cfg);
                baseline(self, input, placement)
            }
            Self::Flink => {
                let cfg = flink_config(input.config);
                let (p, stats, rate) = (input.pipeline, input.stats, input.target_rate);
                baseline(self, input, flink::place(p, stats, rate, input.current, &cfg))
            }
            Self::FaasFlowSp => {
                let cfg = faasflow_config(input.config);
                let n =
                    faasflow::worker_count(input.pipeline, input.stats, input.target_rate, &cfg);
                clasp_on_workers(self, input, n)
            }
            Self::Zhang24Sp => {
                let cfg = zhang24_config(input.config);
                let n = zhang24::worker_count(input.pipeline, input.stats, input.target_rate, &cfg);
                clasp_on_workers(self, input, n)
            }
            Self::Static => keep(self, input),
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown policy name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown policy `{given}`; valid policies: {valid}")]
pub struct UnknownPolicy {
    /// What was given.
    pub given: String,
    /// The valid names, comma-separated.
    pub valid: String,
}

impl FromStr for Policy {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        Self::ALL.iter().copied().find(|p| p.name() == wanted).ok_or_else(|| UnknownPolicy {
            given: s.to_string(),
            valid: Self::ALL.iter().map(|p| p.name()).collect::<Vec<_>>().join(", "),
        })
    }
}

/// Everything a policy decides from.
#[derive(Clone, Copy, Debug)]
pub struct PlanInput<'a> {
    /// The pipeline.
    pub pipeline: &'a Pipeline,
    /// Observed (or spec-derived) statistics.
    pub stats: &'a ObservedStats,
    /// λ_p: the input rate to sustain (requests/s).
    pub target_rate: f64,
    /// α, β, γ and W̄.
    pub coefficients: Coefficients,
    /// Planning parameters (worker limit, headroom, ...).
    pub config: &'a PlanConfig,
    /// The placement currently running, if any.
    pub current: Option<&'a Placement>,
}

impl PlanInput<'_> {
    /// The statistics projected to the target rate (Eq. 5–7). Statistics that record no
    /// parallelism are taken to have used every slot of the workers they were observed on.
    pub fn projection(&self) -> Result<Projection, PlanError> {
        let observed_slots = self.config.slots_per_worker * self.stats.workers_used.max(1);
        Projection::new(
            self.pipeline,
            self.stats,
            self.target_rate,
            self.config.default_exec_us,
            observed_slots,
        )
    }

    /// Checks the configuration and the coefficients.
    pub fn validate(&self) -> Result<(), PlanError> {
        self.config.validate()?;
        let c = self.coefficients;
        let costs_ok = [c.alpha, c.beta, c.gamma].iter().all(|v| v.is_finite() && *v >= 0.0);
        if costs_ok && c.capacity.is_finite() && c.capacity > 0.0 {
            Ok(())
        } else {
            let Coefficients { alpha, beta, gamma, capacity } = c;
            Err(PlanError::InvalidCoefficients { alpha, beta, gamma, capacity })
        }
    }

    /// The per-worker budget W̄ · headroom.
    pub fn budget(&self) -> f64 {
        self.config.budget(self.coefficients.capacity)
    }

    /// A packer over `proj` in `order` with this input's coefficients and budget.
    pub fn packer<'p>(&self, proj: &'p Projection, order: &'p [OperatorId]) -> Packer<'p> {
        Packer {
            projection: proj,
            order,
            coefficients: self.coefficients,
            budget: self.budget(),
            variant: self.config.packing,
        }
    }
}

/// A policy's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The policy that decided.
    pub policy: Policy,
    /// Workers used.
    pub workers: u32,
    /// The rate asked for (requests/s).
    pub requested_rate: f64,
    /// The rate the placement sustains: the requested rate, or less when `limited`.
    pub target_rate: f64,
    /// Whether the requested rate does not fit in the available workers.
    pub limited: bool,
    /// s = target_rate / Λ (Eq. 5).
    pub scale: f64,
    /// Placement order (operators), for policies that have one.
    pub order: Vec<OperatorId>,
    /// Shares, fractions and instances per operator, at `target_rate`.
    pub placement: Placement,
    /// Eq. 8 load of every worker at `target_rate`.
    pub loads: Vec<WorkerLoad>,
}

impl Decision {
    /// Completes a decision from a placement made at projection `proj` (whose rate is the one
    /// the placement sustains): computes the Eq. 8 loads. Instances are taken as they are.
    pub fn new(
        policy: Policy,
        input: &PlanInput<'_>,
        proj: &Projection,
        order: Vec<OperatorId>,
        placement: Placement,
    ) -> Self {
        let loads = placement_loads(proj, &placement, &input.coefficients, input.budget());
        Self {
            policy,
            workers: placement.workers,
            requested_rate: input.target_rate,
            target_rate: proj.target_rate,
            limited: proj.target_rate < input.target_rate,
            scale: proj.scale,
            order,
            placement,
            loads,
        }
    }

    /// The largest Eq. 8 load over workers.
    pub fn max_load(&self) -> f64 {
        self.loads.iter().map(|l| l.load).fold(0.0, f64::max)
    }
}

/// The baselines' settings, with the slots and worker limit of the shared configuration.
fn faasflow_config(c: &PlanConfig) -> faasflow::Config {
    faasflow::Config { slots: c.slots_per_worker, max_workers: c.max_workers }
}

fn zhang24_config(c: &PlanConfig) -> zhang24::Config {
    zhang24::Config {
        slots: c.slots_per_worker,
        max_workers: c.max_workers,
        ..zhang24::Config::default()
    }
}

fn ds2_config(c: &PlanConfig) -> ds2::Config {
    ds2::Config { slots: c.slots_per_worker, max_workers: c.max_workers }
}

fn flink_config(c: &PlanConfig) -> flink::Config {
    flink::Config {
        slots: c.slots_per_worker,
        max_workers: c.max_workers,
        ..flink::Config::default()
    }
}

/// A baseline's own placement, with its Eq. 8 loads under the CLASP model for comparison.
fn baseline(
    policy: Policy,
    input: &PlanInput<'_>,
    placement: Placement,
) -> Result<Decision, PlanError> {
    let proj = input.projection()?;
    let order = placement_order(input.pipeline, &proj);
    Ok(Decision::new(policy, input, &proj, order, placement))
}

/// CLASP: pack at the target rate within the worker limit (Eq. 8, reverse topological), then
/// spread the load evenly over the workers that took ([`Packer::pack_into`]); if it does not
/// fit, the highest rate that does (binary search, cached); then parallelism by Eq. 10–11.
fn clasp(
    policy: Policy,
    input: &PlanInput<'_>,
    cache: &mut LimitCache,
) -> Result<Decision, PlanError> {
    let proj = input.projection()?;
    let order = placement_order(input.pipeline, &proj);
    let max = input.config.max_workers;
    let packer = input.packer(&proj, &order);
    match packer.pack(max) {
        Ok(packed) => {
            let placement = packer.pack_into(packed.workers).unwrap_or(packed);
            Ok(finish(policy, input, &proj, order, placement))
        }
        Err(PackError::BadOrder) => Err(PackError::BadOrder.into()),
        Err(_) => {
            let search = rate_search(input, &proj, &order, max);
            let found = search.run_cached(cache, input.config.cache_tolerance)?;
            Ok(finish(policy, input, &found.projection, order, found.placement))
        }
    }
}

/// CLASP's placement over exactly `workers` workers ([`Packer::pack_into`]), for the "-SP"
/// ablations that take the worker count from a baseline. When `workers` cannot hold the
/// target rate, the highest rate they hold (uncached: the count is the baseline's, not the
/// cluster's limit).
pub fn clasp_on_workers(
    policy: Policy,
    input: &PlanInput<'_>,
    workers: u32,
) -> Result<Decision, PlanError> {
    let proj = input.projection()?;
    let order = placement_order(input.pipeline, &proj);
    let workers = workers.max(1);
    match input.packer(&proj, &order).pack_into(workers) {
        Ok(placement) => Ok(finish(policy, input, &proj, order, placement)),
        Err(PackError::BadOrder) => Err(PackError::BadOrder.into()),
        Err(_) => {
            let found = rate_search(input, &proj, &order, workers).run()?;
            Ok(finish(policy, input, &found.projection, order, found.placement))
        }
    }
}

fn rate_search<'a>(
    input: &PlanInput<'_>,
    proj: &'a Projection,
    order: &'a [OperatorId],
    max_workers: u32,
) -> RateSearch<'a> {
    RateSearch {
        projection: proj,
        order,
        coefficients: input.coefficients,
        budget: input.budget(),
        variant: input.config.packing,
        max_workers,
        tolerance: input.config.rate_tolerance,
        floor: input.config.rate_floor,
    }
}

/// Parallelism (Eq. 10–11) and loads for a CLASP placement.
fn finish(
    policy: Policy,
    input: &PlanInput<'_>,
    proj: &Projection,
    order: Vec<OperatorId>,
    mut placement: Placement,
) -> Decision {
    parallelism::assign(&mut placement, proj);
    let busy = share_busy_time(proj, &placement, &input.coefficients);
    let per_instance = parallelism::instance_budget(input.config.headroom);
    parallelism::cover_busy_time(
        &mut placement,
        &busy,
        per_instance,
        input.config.slots_per_worker,
    );
    Decision::new(policy, input, proj, order, placement)
}

/// Static: the current placement (or one worker running Eq. 12's allocation), at the highest
/// rate up to the target that it sustains.
fn keep(policy: Policy, input: &PlanInput<'_>) -> Result<Decision, PlanError> {
    let proj = input.projection()?;
    let order = placement_order(input.pipeline, &proj);
    let base = match input.current {
        Some(current) => {
            current.check(input.pipeline).map_err(PlanError::PlacementMismatch)?;
            current.clone()
        }
        None => {
            let slots = input.config.slots_per_worker;
            let instances = parallelism::initial_allocation(&proj.observed_demand(), slots);
            Placement::single_worker(input.pipeline, &instances)
        }
    };
    let at_target = reshare(base, &proj);
    let rate = sustained_rate(input, &proj, &at_target);
    let proj = proj.at_rate(rate);
    let placement = reshare(at_target, &proj);
    Ok(Decision::new(policy, input, &proj, order, placement))
}

/// The placement's fractions applied to the demands of `proj`: φ_{o,w} = σ_o(w)·D̃_o.
fn reshare(mut placement: Placement, proj: &Projection) -> Placement {
    for op in &mut placement.operators {
        op.demand = proj.demand[op.operator.index()];
        for s in &mut op.shares {
            s.share = s.fraction * op.demand;
        }
    }
    placement
}

/// The highest rate ≤ the target at which every worker's Eq. 8 load is within budget. With
/// fractions fixed, L_w(λ) = a_w·λ + γ·δ_w (only the fan-out term does not scale with the
/// rate), so each worker's limit is (budget − γ δ_w)/a_w in closed form.
fn sustained_rate(input: &PlanInput<'_>, proj: &Projection, placement: &Placement) -> f64 {
    let budget = input.budget();
    let loads = placement_loads(proj, placement, &input.coefficients, budget);
    let limit = |l: &WorkerLoad| {
        let fixed = input.coefficients.gamma * f64::from(l.remote_destinations);
        let per_rate = (l.load - fixed) / proj.target_rate;
        if fixed > budget {
            0.0
        } else if per_rate > 0.0 {
            (budget - fixed) / per_rate
        } else {
            f64::INFINITY
        }
    };
    loads.iter().map(limit).fold(proj.target_rate, f64::min)
}

#[cfg(test)]
mod tests;
