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

mod history;
#[cfg(test)]
mod tests;

pub use history::Interval;

use crate::error::PlanError;
use crate::estimator::{Estimator, Observation};
use crate::keys::{assign_keys, remap_workers};
use crate::migration::plan_migration;
use crate::triggers::{Reason, Trigger, TriggerConfig, Triggers};
use crate::{LimitCache, PlanConfig, PlanInput, Policy};
use clasp_core::Pipeline;
use clasp_core::placement::{KeyAssignment, MigrationPlan, Placement};
use clasp_core::stats::{Coefficients, ObservedStats};
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
        }
    }
}

impl AutoscalerConfig {
    /// `policy` with every other setting at its default.
    pub fn with_policy(policy: Policy) -> Self {
        Self { policy, ..Self::default() }
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
        for (name, v) in [("window_s", self.window_s), ("settle_s", self.settle_s)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(PlanError::InvalidConfig(format!(
                    "{name} = {v} must be a duration >= 0"
                )));
            }
        }
        if self.window_s <= 0.0 {
            return Err(PlanError::InvalidConfig("window_s must be > 0".into()));
        }
        Ok(())
    }
}

/// The rate an unthrottled input is planned for: more than any cluster here sustains.
pub const UNTHROTTLED_RATE: f64 = 20_000_000.0;

/// A placement on the same workers is rescaled to only when some operator's fraction on some
/// worker moves by more than this.
pub const MIN_MOVE: f64 = 0.1;

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

    /// Takes one interval and says what to do.
    pub fn step(&mut self, p: &Pipeline, interval: Interval) -> Step {
        for r in interval.reports.iter().filter(|r| r.saturated) {
            self.estimator.observe(r.worker.0, &Observation::from(r));
        }
        self.now = interval.t;
        let sample = crate::triggers::Sample {
            t: interval.t,
            input_rate: interval.input_rate,
            throughput: interval.throughput,
            requests: interval.requests,
            interval: interval.interval_s,
        };
        let keep = self.cfg.window_s + interval.interval_s.max(1.0);
        self.history.push(interval, &self.placement, keep);
        self.coefficient_history.push(CoefficientSample {
            time_s: sample.t,
            coefficients: self.coefficients(),
            observations: self.estimator.observations_used(),
        });
        if self.cfg.policy == Policy::Static || self.rescaling() {
            return Step::Idle;
        }
        if sample.t - sample.interval < self.quiet_until - 1e-9 {
            return Step::Idle;
        }
        match self.triggers.observe(sample) {
            Some(trigger) if trigger.target_rate > 0.0 => self.decide(p, trigger),
            // No trigger, or the input paused or ended: nothing to plan for.
            _ => Step::Idle,
        }
    }

    /// The step after `trigger`.
    fn decide(&mut self, p: &Pipeline, trigger: Trigger) -> Step {
        let (now, measured) = (self.now, trigger.target_rate);
        let target = if self.cfg.unthrottled { UNTHROTTLED_RATE } else { measured };
        let from = self.placement.workers;
        let stats = self.window_stats(p);
        let decision = match self.policy_decision(p, &stats, target) {
            Ok(d) => d,
            Err(e) => {
                self.triggers.planned(now, measured, from, from);
                return Step::Unchanged { trigger, why: Unchanged::NoDecision(e) };
            }
        };
        let placement = remap_workers(&self.placement, decision.placement);
        let to = placement.workers;
        let migrate = from != to || moved_enough(&self.placement, &placement);
        if !migrate && !instances_changed(&self.placement, &placement) {
            self.triggers.planned(now, measured, from, to);
            return Step::Unchanged { trigger, why: Unchanged::Same };
        }
        if migrate && !self.triggers.admits(now, from, to) {
            self.held_back += 1;
            return Step::HeldBack { trigger, from, to };
        }
        self.triggers.planned(now, measured, from, to);
        if self.cfg.mode == Mode::Recommend {
            let reason = trigger.reason;
            return Step::Recommend(Box::new(Recommendation {
                reason,
                target_rate: target,
                from,
                to,
                migrate,
                placement,
            }));
        }
        if !migrate {
            self.epoch += 1;
            self.placement = placement.clone();
            return Step::Install { trigger, epoch: self.epoch, placement };
        }
        let rescale = self.plan(p, placement, trigger.reason, target);
        self.phase = Phase::Rescaling(Box::new(rescale.clone()));
        Step::Rescale(Box::new(rescale))
    }

    /// The policy's decision for `target` from `stats`.
    fn policy_decision(
        &mut self,
        p: &Pipeline,
        stats: &ObservedStats,
        target: f64,
    ) -> Result<crate::Decision, PlanError> {
        if stats.throughput.is_nan() || stats.throughput <= 0.0 {
            return Err(PlanError::NoThroughput(stats.throughput));
        }
        let input = PlanInput {
            pipeline: p,
            stats,
            target_rate: target,
            coefficients: self.coefficients(),
            config: &self.cfg.plan,
            current: Some(&self.placement),
        };
        self.cfg.policy.decide_cached(&input, &mut self.cache)
    }

    /// The rescale from the running configuration to `placement`.
    fn plan(
        &self,
        p: &Pipeline,
        placement: Placement,
        reason: Reason,
        target_rate: f64,
    ) -> Rescale {
        let (keys, migration) = plan_rescale(p, &self.placement, &self.keys, &placement);
        Rescale {
            epoch: self.epoch + 1,
            reason,
            target_rate,
            from: self.placement.workers,
            to: placement.workers,
            placement,
            keys,
            migration,
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
        let input = PlanInput {
            pipeline: p,
            stats: &stats,
            target_rate: rate,
            coefficients: self.coefficients(),
            config: &self.cfg.plan,
            current: Some(&self.placement),
        };
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
    pub fn rescale_failed(&mut self) {
        self.phase = Phase::Watching;
    }
}

/// The key assignment of `new` (moving as few key groups as possible from `keys`) and the
/// migration plan from `current` to it: what every rescale executes, whoever decided it.
pub fn plan_rescale(
    p: &Pipeline,
    current: &Placement,
    keys: &KeyAssignment,
    new: &Placement,
) -> (KeyAssignment, MigrationPlan) {
    let next = assign_keys(p, new, keys.groups, Some(keys));
    let migration = plan_migration(p, current, keys, new, &next);
    (next, migration)
}

/// Whether some operator's fraction on some worker differs by more than [`MIN_MOVE`].
pub fn moved_enough(old: &Placement, new: &Placement) -> bool {
    let fraction = |ops: &Placement, o: usize, w: u32| {
        ops.operators[o].shares.iter().find(|s| s.worker.0 == w).map_or(0.0, |s| s.fraction)
    };
    (0..old.operators.len()).any(|o| {
        (0..old.workers.max(new.workers))
            .any(|w| (fraction(old, o, w) - fraction(new, o, w)).abs() > MIN_MOVE)
    })
}

/// Whether some operator's instances on some worker differ.
pub fn instances_changed(old: &Placement, new: &Placement) -> bool {
    old.operators.iter().zip(&new.operators).any(|(a, b)| {
        b.shares.iter().any(|s| {
            a.shares.iter().find(|x| x.worker == s.worker).map_or(0, |x| x.instances) != s.instances
        })
    })
}
