//! The autoscaler: clasp's one scaling state machine (CLASP §4.2–4.4 with the triggers of
//! §5.1.1). Each statistics interval goes in as an [`Interval`]; a [`Step`] comes out. The
//! runtime's planner and the simulator both execute its steps and never decide themselves, so
//! a recorded sequence of intervals gives the same steps in both.
//!
//! Per interval it
//! 1. feeds saturated workers' reports to the online estimator (Eq. 2–4) and keeps the window
//!    of measurements the policies decide from;
//! 2. unless a rescale is in flight or settling, asks the [`Triggers`] whether to rescale;
//! 3. on a trigger, lets the policy decide a worker count and placement for the target rate,
//!    relabels its workers to move as little as possible, and answers with the step:
//!    nothing material changed, only instance limits changed ([`Step::Install`]), the cooldown
//!    holds the change back, or a [`Rescale`] with its key assignment and migration plan.
//!
//! ```text
//!            interval ┌──────────┐  Step::Rescale   ┌───────────┐
//!          ┌─────────▶│ Watching │─────────────────▶│ Rescaling │
//!          └──────────│          │◀─────────────────│           │
//!                     └──────────┘ rescaled / failed└───────────┘
//! ```
//!
//! In [`Mode::Recommend`] the same decisions come out as [`Step::Recommend`] and nothing is
//! ever executed, as the Flink autoscaler's `scaling.enabled: false`.

mod decide;
mod history;
mod recover;
#[cfg(test)]
mod tests;

pub use decide::{MIN_MOVE, instances_changed, measured_workers, moved_enough, plan_rescale};
pub use history::Interval;
pub use recover::{CheckpointEvery, MAX_BOUNDARY_DRAIN_S, MAX_POSTPONED_CADENCES, Recover};

use crate::error::PlanError;
use crate::estimator::{Estimator, Observation};
use crate::keys::remap_workers;
use crate::triggers::{Reason, Trigger, TriggerConfig, Triggers};
use crate::{LimitCache, PlanConfig, PlanInput, Policy};
use clasp_core::Pipeline;
use clasp_core::placement::{KeyAssignment, MigrationPlan, Placement};
use clasp_core::stats::{Coefficients, ObservedStats};
use decide::PendingScaleIn;
use history::History;
use serde::{Deserialize, Serialize};

/// Whether decisions are carried out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Rescale as decided.
    #[default]
    Act,
    /// Decide and report, never rescale (metrics-only).
    Recommend,
}

/// The autoscaler's settings.
#[derive(Clone, Debug, PartialEq)]
pub struct AutoscalerConfig {
    /// The policy deciding worker counts and placements (`static` never rescales).
    pub policy: Policy,
    /// Planning parameters handed to the policy; its `estimator` is the online estimator's
    /// configuration, whose normalization constants are also the initial α, β, γ, W̄.
    pub plan: PlanConfig,
    /// When to rescale.
    pub triggers: TriggerConfig,
    /// Seconds of measurements a decision is based on (never reaching back past the end of the
    /// last rescale: older reports describe a placement no longer running).
    pub window_s: f64,
    /// Seconds after a rescale ends during which no interval reaches the triggers (0: none),
    /// for studies of how a migration's transient affects them.
    pub settle_s: f64,
    /// Whether α, β, γ and W̄ are learnt online; otherwise the estimator's start is kept.
    pub learn: bool,
    /// Act or only recommend.
    pub mode: Mode,
    /// The input has no rate of its own (it is read as fast as the cluster takes it): every
    /// decision plans for [`UNTHROTTLED_RATE`], while the triggers keep comparing measured rates.
    pub unthrottled: bool,
    /// Records per input request, for the observed statistics.
    pub batch_size: u32,
    /// A scale-in goes ahead only when the load at the target rate would keep the current
    /// workers below this fraction of their budget (W̄ · headroom) on average: the lower edge
    /// of the utilization band whose upper edge is the budget itself.
    pub scale_in_below: f64,
    /// A scale-in must free at least this fraction of the workers.
    pub min_scale_in_gain: f64,
    /// A scale-in is carried out only if it is still decided this long after it first was
    /// (0: at once).
    pub scale_in_delay_s: f64,
    /// With the CLASP policy: the fewest workers whose placement is predicted to keep the
    /// 95th percentile of end-to-end latency within this many ms ([`crate::slo`]), not only to
    /// sustain the rate.
    pub latency_slo_ms: Option<f64>,
}

impl Default for AutoscalerConfig {
    fn default() -> Self {
        Self {
            policy: Policy::Clasp,
            plan: PlanConfig::default(),
            triggers: TriggerConfig::default(),
            window_s: 10.0,
            settle_s: 0.0,
            learn: true,
            mode: Mode::Act,
            unthrottled: false,
            batch_size: 1,
            scale_in_below: 0.9,
            min_scale_in_gain: 0.0,
            scale_in_delay_s: 2.0,
            latency_slo_ms: None,
        }
    }
}

impl AutoscalerConfig {
    /// `policy` with every other setting at its default.
    pub fn with_policy(policy: Policy) -> Self {
        Self { policy, ..Self::default() }
    }

    /// The paper's setup for the reproduction experiments: its triggers
    /// ([`TriggerConfig::paper`]) and every scale-in the policy decides carried out at once.
    pub fn paper(policy: Policy) -> Self {
        Self {
            triggers: TriggerConfig::paper(),
            scale_in_below: f64::INFINITY,
            scale_in_delay_s: 0.0,
            ..Self::with_policy(policy)
        }
    }

    /// The same, with planning parameters `plan`.
    pub fn with_plan(mut self, plan: PlanConfig) -> Self {
        self.plan = plan;
        self
    }

    /// The same, with the first decision after `requests` inputs.
    pub fn with_warmup(mut self, requests: u64) -> Self {
        self.triggers.warmup_requests = requests;
        self
    }

    /// Checks every value is in range.
    pub fn validate(&self) -> Result<(), PlanError> {
        self.plan.validate()?;
        self.plan.estimator.validate()?;
        self.triggers.validate()?;
        let durations = [
            ("window_s", self.window_s),
            ("settle_s", self.settle_s),
            ("scale_in_delay_s", self.scale_in_delay_s),
        ];
        for (name, v) in durations {
            if !(v.is_finite() && (0.0..=crate::triggers::MAX_DURATION_S).contains(&v)) {
                return Err(PlanError::InvalidConfig(format!(
                    "{name} = {v} must be a duration >= 0"
                )));
            }
        }
        if self.window_s <= 0.0 {
            return Err(PlanError::InvalidConfig("window_s must be > 0".into()));
        }
        if self.scale_in_below.is_nan() || self.scale_in_below <= 0.0 {
            return Err(PlanError::InvalidConfig(format!(
                "scale_in_below = {} must be > 0",
                self.scale_in_below
            )));
        }
        if let Some(slo) = self.latency_slo_ms
            && !(slo.is_finite() && slo > 0.0)
        {
            return Err(PlanError::InvalidConfig(format!(
                "latency_slo_ms = {slo} must be a number of milliseconds > 0"
            )));
        }
        if !(0.0..1.0).contains(&self.min_scale_in_gain) {
            return Err(PlanError::InvalidConfig(format!(
                "min_scale_in_gain = {} must be in [0, 1)",
                self.min_scale_in_gain
            )));
        }
        Ok(())
    }
}

/// The rate an unthrottled input is planned for: more than any cluster here sustains.
pub const UNTHROTTLED_RATE: f64 = 20_000_000.0;

/// Moving to a new placement.
#[derive(Clone, Debug)]
pub struct Rescale {
    /// The epoch of the new routing.
    pub epoch: u64,
    /// What fired ([`Reason::Requested`] for a rescale asked for from outside).
    pub reason: Reason,
    /// The rate planned for (requests/s).
    pub target_rate: f64,
    /// Workers before.
    pub from: u32,
    /// Workers after.
    pub to: u32,
    /// The new placement (workers relabelled to move as little as possible).
    pub placement: Placement,
    /// The new owners of every key group.
    pub keys: KeyAssignment,
    /// What each worker sends and receives.
    pub migration: MigrationPlan,
}

/// A decision not carried out ([`Mode::Recommend`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Recommendation {
    /// What fired.
    pub reason: Reason,
    /// The rate decided for (requests/s).
    pub target_rate: f64,
    /// Workers now.
    pub from: u32,
    /// Workers the decision asks for.
    pub to: u32,
    /// Whether state would move (otherwise only instance limits would change).
    pub migrate: bool,
    /// The placement it would move to.
    pub placement: Placement,
}

/// Why a trigger led to no change.
#[derive(Clone, Debug, PartialEq)]
pub enum Unchanged {
    /// The policy could not decide (for instance no throughput observed yet).
    NoDecision(PlanError),
    /// The decision is the current configuration, or moves too little to be worth it.
    Same,
    /// A scale-in that would free too little: the current workers' mean utilization of their
    /// budget at the target rate, and the fraction of workers it would free.
    Hysteresis {
        /// Mean utilization of the current workers' budget at the target rate.
        utilization: f64,
        /// Fraction of the workers it would free.
        gain: f64,
    },
    /// A scale-in waits for its delay; it goes ahead if still decided then.
    Delayed,
    /// A saturated trigger led to fewer workers: saturation says the running workers fall
    /// short, so the fewer the model asks for belong to a fall of the rate (or a drain in the
    /// window), which a rate-change trigger meets with its own hysteresis.
    SaturatedScaleIn,
}

/// What to do after an interval.
#[derive(Clone, Debug)]
pub enum Step {
    /// Nothing fired (or a rescale is in flight).
    Idle,
    /// A trigger fired and nothing is to change; the configuration counts as planned for
    /// the trigger's rate.
    Unchanged {
        /// What fired.
        trigger: Trigger,
        /// Why nothing changes.
        why: Unchanged,
    },
    /// Same workers and shares, new instance limits: install at once, nothing moves. The
    /// autoscaler already runs on the new placement.
    Install {
        /// What fired.
        trigger: Trigger,
        /// The epoch of the new routing.
        epoch: u64,
        /// The placement to install.
        placement: Placement,
    },
    /// A change back to the previous worker count within the cooldown was held back.
    HeldBack {
        /// What fired.
        trigger: Trigger,
        /// Workers now.
        from: u32,
        /// Workers decided.
        to: u32,
    },
    /// Move to a new placement; report the outcome with [`Autoscaler::rescaled`] or
    /// [`Autoscaler::rescale_failed`].
    Rescale(Box<Rescale>),
    /// What would be done, in [`Mode::Recommend`].
    Recommend(Box<Recommendation>),
}

/// Coefficients at one moment.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CoefficientSample {
    /// Seconds since the start.
    pub time_s: f64,
    /// The estimates.
    pub coefficients: Coefficients,
    /// Saturated observations used so far.
    pub observations: u64,
}

/// Where the state machine is.
#[derive(Clone, Debug)]
enum Phase {
    /// Watching intervals for a trigger.
    Watching,
    /// A rescale was issued and has not finished: no interval reaches the triggers.
    Rescaling(Box<Rescale>),
}

/// The scaling state machine.
#[derive(Debug)]
pub struct Autoscaler {
    cfg: AutoscalerConfig,
    triggers: Triggers,
    estimator: Estimator,
    /// The coefficients the estimator started from (used throughout when not learning).
    start: Coefficients,
    cache: LimitCache,
    history: History,
    phase: Phase,
    placement: Placement,
    keys: KeyAssignment,
    epoch: u64,
    /// Time of the latest interval (s).
    now: f64,
    /// The decision window never reaches back before this (s): the end of the last rescale.
    window_start: f64,
    /// Intervals starting before this (s) are kept from the triggers (`settle_s`).
    quiet_until: f64,
    held_back: u32,
    coefficient_history: Vec<CoefficientSample>,
    pending_scale_in: Option<PendingScaleIn>,
    fault: recover::FaultState,
}

impl Autoscaler {
    /// An autoscaler for `p`, starting from the configuration the cluster runs: `placement`
    /// with `keys` at routing epoch `epoch`.
    pub fn new(
        cfg: AutoscalerConfig,
        p: &Pipeline,
        placement: Placement,
        keys: KeyAssignment,
        epoch: u64,
    ) -> Result<Self, PlanError> {
        cfg.validate()?;
        placement.check(p).map_err(PlanError::PlacementMismatch)?;
        let estimator = Estimator::new(cfg.plan.estimator.clone());
        Ok(Self {
            triggers: Triggers::new(cfg.triggers.clone()),
            start: estimator.coefficients(),
            estimator,
            cache: LimitCache::default(),
            history: History::new(p.operators.len()),
            phase: Phase::Watching,
            placement,
            keys,
            epoch,
            now: 0.0,
            window_start: f64::NEG_INFINITY,
            quiet_until: f64::NEG_INFINITY,
            held_back: 0,
            coefficient_history: Vec::new(),
            pending_scale_in: None,
            fault: recover::FaultState::default(),
            cfg,
        })
    }

    /// The settings.
    pub fn config(&self) -> &AutoscalerConfig {
        &self.cfg
    }

    /// The placement the cluster runs (the last one installed or rescaled to).
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// The key assignment the cluster runs.
    pub fn keys(&self) -> &KeyAssignment {
        &self.keys
    }

    /// The routing epoch the cluster runs.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Whether a rescale is in flight.
    pub fn rescaling(&self) -> bool {
        matches!(self.phase, Phase::Rescaling(_))
    }

    /// The coefficients the policy decides with now.
    pub fn coefficients(&self) -> Coefficients {
        if self.cfg.learn { self.estimator.coefficients() } else { self.start }
    }

    /// Saturated observations that updated θ so far.
    pub fn observations_used(&self) -> u64 {
        self.estimator.observations_used()
    }

    /// Decisions the cooldown held back so far.
    pub fn held_back(&self) -> u32 {
        self.held_back
    }

    /// The scale-in waiting for its delay, if any: when it was first decided (s since the
    /// start) and the trigger it came from.
    pub fn pending_scale_in(&self) -> Option<(f64, Trigger)> {
        self.pending_scale_in.as_ref().map(|p| (p.since, p.trigger))
    }

    /// The coefficients after every interval.
    pub fn coefficient_history(&self) -> &[CoefficientSample] {
        &self.coefficient_history
    }

    /// Observed statistics of the decision window ending at the latest interval, as the
    /// policy sees them.
    pub fn window_stats(&self, p: &Pipeline) -> ObservedStats {
        let from = (self.now - self.cfg.window_s).max(self.window_start);
        let mut stats =
            self.history.statistics(p, (from, self.now), &self.placement, self.cfg.batch_size);
        stats.coefficients = Some(self.coefficients());
        stats
    }

    /// What a policy plans from: `stats` at `target_rate`, with this autoscaler's
    /// coefficients, planning settings and running placement.
    fn plan_input<'a>(
        &'a self,
        p: &'a Pipeline,
        stats: &'a ObservedStats,
        target_rate: f64,
    ) -> PlanInput<'a> {
        PlanInput {
            pipeline: p,
            stats,
            target_rate,
            coefficients: self.coefficients(),
            config: &self.cfg.plan,
            current: Some(&self.placement),
        }
    }

    /// Takes one interval and says what to do.
    pub fn step(&mut self, p: &Pipeline, interval: Interval) -> Step {
        for r in interval.reports.iter().filter(|r| r.saturated) {
            self.estimator.observe(r.worker.0, &Observation::from(r));
        }
        self.now = interval.t;
        let sample = crate::triggers::Sample {
            t: interval.t,
            input_rate: interval.input_rate,
            recent_input_rate: interval.recent_input_rate,
            throughput: interval.throughput,
            requests: interval.requests,
            interval: interval.interval_s,
            saturated: interval.reports.iter().any(|r| r.saturated),
            backlog: interval.backlog,
            reported: !interval.reports.is_empty(),
        };
        let keep = self.cfg.window_s + interval.interval_s.max(1.0);
        self.history.push(interval, &self.placement, keep);
        self.coefficient_history.push(CoefficientSample {
            time_s: sample.t,
            coefficients: self.coefficients(),
            observations: self.estimator.observations_used(),
        });
        if self.cfg.policy == Policy::Static || self.rescaling() || self.recovering() {
            return Step::Idle;
        }
        if sample.t - sample.interval < self.quiet_until - 1e-9 {
            return Step::Idle;
        }
        let fired = self.triggers.observe(sample);
        if let Some(due) = self.pending_due()
            && fired.is_none_or(|t| t.target_rate <= 0.0)
        {
            return self.decide(p, due);
        }
        match fired {
            Some(trigger) if trigger.target_rate > 0.0 => self.decide(p, trigger),
            // No trigger, or the input paused or ended: nothing to plan for.
            _ => Step::Idle,
        }
    }

    /// A rescale to `placement` asked for from outside (an operator, an experiment), planned
    /// as the autoscaler plans its own; report its outcome as for [`Step::Rescale`].
    pub fn rescale_to(&mut self, p: &Pipeline, placement: Placement) -> Result<Rescale, PlanError> {
        self.requested(p, placement, 0.0)
    }

    /// Begins a requested rescale to `placement`, planned for `target_rate`.
    fn requested(
        &mut self,
        p: &Pipeline,
        placement: Placement,
        target_rate: f64,
    ) -> Result<Rescale, PlanError> {
        if self.rescaling() {
            return Err(PlanError::InvalidConfig(
                "a rescale is already in flight: wait for it to finish".into(),
            ));
        }
        placement.check(p).map_err(PlanError::PlacementMismatch)?;
        let rescale = self.plan(p, placement, Reason::Requested, target_rate);
        self.phase = Phase::Rescaling(Box::new(rescale.clone()));
        Ok(rescale)
    }

    /// A rescale to CLASP's placement over exactly `workers` workers for the input rate of the
    /// decision window (the spec's rates before anything was measured), asked for from outside
    /// (an operator's scheduled rescale); report its outcome as for [`Step::Rescale`].
    pub fn rescale_to_workers(&mut self, p: &Pipeline, workers: u32) -> Result<Rescale, PlanError> {
        if workers == 0 || workers > self.cfg.plan.max_workers {
            return Err(PlanError::InvalidConfig(format!(
                "{workers} workers: a rescale needs 1..={} (the worker limit)",
                self.cfg.plan.max_workers
            )));
        }
        let measured = self.window_stats(p);
        let (stats, rate) = if measured.throughput > 0.0 {
            let rate = measured.input_rate.max(measured.throughput);
            (measured, rate)
        } else {
            let rate = 1_000.0;
            (
                crate::projection::spec_observation(p, rate, &self.cfg.plan, &self.coefficients()),
                rate,
            )
        };
        let input = self.plan_input(p, &stats, rate);
        let decision = crate::policy::clasp_on_workers(Policy::Clasp, &input, workers)?;
        let placement = remap_workers(&self.placement, decision.placement);
        self.requested(p, placement, decision.target_rate)
    }

    /// The rescale in flight finished at `t` (s): the cluster runs its placement now.
    pub fn rescaled(&mut self, t: f64) {
        if let Phase::Rescaling(r) = std::mem::replace(&mut self.phase, Phase::Watching) {
            let r = *r;
            self.epoch = r.epoch;
            self.placement = r.placement;
            self.keys = r.keys;
            self.window_start = t;
            self.quiet_until = t + self.cfg.settle_s;
        }
    }

    /// The rescale in flight did not happen: the cluster still runs the previous placement.
    /// Its epoch stays used (some workers may have installed it), so the next routing gets a
    /// higher one.
    pub fn rescale_failed(&mut self) {
        if let Phase::Rescaling(r) = std::mem::replace(&mut self.phase, Phase::Watching) {
            self.epoch = self.epoch.max(r.epoch);
        }
    }
}
