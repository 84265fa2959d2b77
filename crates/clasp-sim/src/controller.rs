//! The scaling controller loop, as the planner runs it every statistics interval: feed
//! saturated workers to the online estimator (Eq. 2–4), ask the trigger state machine whether
//! to rescale, and when it fires, aggregate the reports of the current placement into observed
//! statistics and ask the policy (the `clasp_plan` code the runtime calls) for a new placement.
//!
//! **The runtime's triggers.** Whether to rescale is decided by
//! [`clasp_plan::controller::Controller`], the state machine the runtime's scaling loop
//! (`clasp_runtime::scaling::Scaler`) drives, with the same [`TriggerConfig`] and defaults (the
//! paper's rule: the input rate more than 10 % away from the rate last planned for, on one
//! side, for 2 s, or throughput more than 5 % below the input for 3 s; the first decision after
//! 10,000 inputs; a change back to the previous worker count within 10 s held back; the
//! reference implementation's rule as an option), fed the same samples: input rate,
//! throughput, inputs so far and interval length. What follows a trigger is the runtime's step
//! as well: a target rate ≤ 0 plans nothing; a policy error, or a placement on the same
//! workers whose fractions moved by at most [`MIN_MOVE`], is recorded as planned without a
//! migration (changed instance limits are installed in place); a change the cooldown holds
//! back is counted and left for a later trigger.
//!
//! **The simulator's own rules**, each explicit:
//! - no sample is fed while a migration runs: the runtime's loop is blocked in the migration
//!   then (a simulated migration lasts milliseconds, so this drops at most one sample);
//! - [`ControllerConfig::settle_s`] (default 0: off) keeps samples out for that long after a
//!   migration ends as well, for studies of how a migration's transient affects the triggers;
//! - under an unthrottled input every trigger plans for [`UNTHROTTLED_RATE`] (more than any
//!   cluster sustains), while the rate the triggers compare against stays the measured one.

use crate::report::{ReportLog, Window, observe};
use clasp_core::Pipeline;
use clasp_core::placement::Placement;
use clasp_core::stats::{Coefficients, ObservedStats};
use clasp_plan::controller::{self as triggers, Trigger, TriggerConfig};
use clasp_plan::estimator::{Estimator, Observation};
use clasp_plan::{LimitCache, PlanConfig, PlanError, PlanInput, Policy};
use std::collections::VecDeque;

pub use clasp_plan::controller::Reason;

/// Settings of the scaling controller.
#[derive(Clone, Debug, PartialEq)]
pub struct ControllerConfig {
    /// The policy deciding worker counts and placements.
    pub policy: Policy,
    /// Planning parameters handed to the policy (worker limit, headroom, estimator, ...).
    pub plan: PlanConfig,
    /// When to rescale: the runtime's trigger settings (warm-up, rule, cooldown).
    pub triggers: TriggerConfig,
    /// Simulator only: seconds after a migration during which no sample reaches the triggers
    /// (0, the default, matches the runtime).
    pub settle_s: f64,
    /// Whether α, β, γ and W̄ are learnt online; otherwise `initial` is used throughout.
    pub learn: bool,
    /// The coefficients the policy starts from (the paper initializes to its measured values).
    pub initial: Coefficients,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            policy: Policy::Clasp,
            plan: PlanConfig::default(),
            triggers: TriggerConfig::default(),
            settle_s: 0.0,
            learn: true,
            initial: Coefficients::PAPER,
        }
    }
}

impl ControllerConfig {
    /// The controller of `policy` with every other setting at its default.
    pub fn with_policy(policy: Policy) -> Self {
        Self { policy, ..Self::default() }
    }

    /// The same, with the first decision after `requests` inputs.
    pub fn with_warmup(mut self, requests: u64) -> Self {
        self.triggers.warmup_requests = requests;
        self
    }
}

/// A decision to move to a new placement.
#[derive(Clone, Debug)]
pub struct Step {
    /// The new placement (worker labels remapped to move as little as possible).
    pub placement: Placement,
    /// What fired.
    pub reason: Reason,
    /// The rate decided for (requests/s).
    pub target_rate: f64,
    /// The statistics decided from.
    pub stats: ObservedStats,
    /// Whether state and requests must move (otherwise only instance limits change).
    pub migrate: bool,
}

/// Per-interval measurements the controller sees.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// End of the interval (s).
    pub time_s: f64,
    /// Length of the interval (s).
    pub interval_s: f64,
    /// Input requests per second entering the planner.
    pub input_rate: f64,
    /// Chains completed per second.
    pub throughput: f64,
    /// Input requests dispatched so far.
    pub requests: u64,
    /// Mean planner queue.
    pub planner_queue: f64,
    /// Workers active.
    pub workers: u32,
}

impl Sample {
    /// The sample as the trigger state machine takes it.
    pub fn trigger_sample(&self) -> triggers::Sample {
        triggers::Sample {
            t: self.time_s,
            input_rate: self.input_rate,
            throughput: self.throughput,
            requests: self.requests,
            interval: self.interval_s,
        }
    }
}

/// A placement on the same workers is migrated to only when some operator's fraction on some
/// worker moves by more than this (the runtime's rule).
pub const MIN_MOVE: f64 = 0.1;

/// The controller's state.
#[derive(Debug)]
pub struct Controller {
    cfg: ControllerConfig,
    triggers: triggers::Controller,
    estimator: Estimator,
    cache: LimitCache,
    samples: Vec<Sample>,
    /// Samples ending before this (s) are kept from the triggers (`settle_s`).
    quiet_until: f64,
    per_worker_rates: VecDeque<f64>,
    overhead: Vec<VecDeque<[f64; 2]>>,
    held_back: u32,
}

/// Newest per-worker throughputs FaaSFlow averages.
const PER_WORKER_SAMPLES: usize = 10;

impl Controller {
    /// A controller for a pipeline of `ops` operators.
    pub fn new(cfg: ControllerConfig, ops: usize) -> Result<Self, PlanError> {
        cfg.plan.validate()?;
        cfg.triggers.validate().map_err(PlanError::InvalidConfig)?;
        if !(cfg.settle_s.is_finite() && cfg.settle_s >= 0.0) {
            return Err(PlanError::InvalidConfig(format!(
                "settle_s = {} must be a duration >= 0",
                cfg.settle_s
            )));
        }
        let c = cfg.initial;
        let mut est = cfg.plan.estimator.clone();
        est.local_scale = positive_or(c.alpha, est.local_scale);
        est.remote_scale = positive_or(c.beta, est.remote_scale);
        est.destinations_scale = positive_or(c.gamma, est.destinations_scale);
        est.initial_capacity = c.capacity;
        est.validate()?;
        Ok(Self {
            triggers: triggers::Controller::new(cfg.triggers.clone()),
            estimator: Estimator::new(est),
            cfg,
            cache: LimitCache::default(),
            samples: Vec::new(),
            quiet_until: f64::NEG_INFINITY,
            per_worker_rates: VecDeque::new(),
            overhead: vec![VecDeque::new(); ops],
            held_back: 0,
        })
    }

    /// The settings.
    pub fn config(&self) -> &ControllerConfig {
        &self.cfg
    }

    /// The coefficients the policy decides with now.
    pub fn coefficients(&self) -> Coefficients {
        if self.cfg.learn { self.estimator.coefficients() } else { self.cfg.initial }
    }

    /// Saturated observations that updated θ so far.
    pub fn observations_used(&self) -> u64 {
        self.estimator.observations_used()
    }

    /// Decisions the cooldown held back so far.
    pub fn held_back(&self) -> u32 {
        self.held_back
    }

    /// Takes one interval's reports: estimator, FaaSFlow's and Zhang24's samples.
    pub fn observe_interval(
        &mut self,
        p: &Pipeline,
        reports: &[&crate::report::WorkerReport],
        sample: Sample,
        parallelism: &[u32],
    ) {
        self.samples.push(sample);
        let mut saturated = false;
        for r in reports.iter().filter(|r| r.saturated) {
            saturated = true;
            self.estimator.observe(r.worker.0, &Observation::from(&r.worker_stats(p)));
        }
        if saturated && sample.workers > 0 {
            self.per_worker_rates.push_back(sample.throughput / f64::from(sample.workers));
            if self.per_worker_rates.len() > PER_WORKER_SAMPLES {
                self.per_worker_rates.pop_front();
            }
        }
        self.overhead_samples(reports, parallelism);
    }

    /// Zhang24's `[p, r]`: r = t_s / (t_s + t_e), t_s queueing plus dispatch, per operator.
    fn overhead_samples(&mut self, reports: &[&crate::report::WorkerReport], parallelism: &[u32]) {
        let max = 64;
        for (o, samples) in self.overhead.iter_mut().enumerate() {
            let (mut n, mut ts, mut te) = (0u64, 0.0, 0.0);
            for r in reports {
                if let Some(op) = r.ops.get(o) {
                    n += op.processed;
                    ts += op.wait_us + op.dispatch_us;
                    te += op.exec_us;
                }
            }
            if n == 0 || ts + te <= 0.0 {
                continue;
            }
            let p = f64::from(parallelism.get(o).copied().unwrap_or(1));
            samples.push_back([p, ts / (ts + te)]);
            if samples.len() > max {
                samples.pop_front();
            }
        }
    }

    /// Notes that a migration ended at `t` (s): with `settle_s` > 0, samples are kept from the
    /// triggers until `t + settle_s`.
    pub fn migration_ended(&mut self, t: f64) {
        if self.cfg.settle_s > 0.0 {
            self.quiet_until = t + self.cfg.settle_s;
        }
    }

    /// Feeds `sample` to the triggers (unless a migration runs or the controller settles);
    /// the trigger that fires, if any. Under an unthrottled input the trigger's target is
    /// [`UNTHROTTLED_RATE`] (see [`Controller::decide`] for the rate recorded as planned).
    pub fn trigger(&mut self, sample: &Sample, migrating: bool) -> Option<Trigger> {
        let start = sample.time_s - sample.interval_s;
        if migrating || start < self.quiet_until - 1e-9 {
            return None;
        }
        self.triggers.observe(sample.trigger_sample())
    }

    /// Decides after `trigger` from the reports of the current placement, as the runtime's
    /// scaling step does; `None` when nothing is to change (recorded as planned), or when the
    /// cooldown holds the change back. Under an unthrottled input the policy plans for
    /// [`UNTHROTTLED_RATE`]; the triggers keep the measured rate as the one planned for.
    pub fn decide(
        &mut self,
        p: &Pipeline,
        log: &ReportLog,
        window: (f64, f64),
        current: &Placement,
        trigger: Trigger,
        unthrottled: bool,
    ) -> Option<Step> {
        let now = window.1;
        let measured = trigger.target_rate;
        if measured <= 0.0 {
            return None;
        }
        let target = if unthrottled { UNTHROTTLED_RATE } else { measured };
        let from = current.workers;
        let stats = self.statistics(p, log, window, current);
        let Some(decision) = self.policy_decision(p, &stats, current, target) else {
            self.triggers.planned(now, measured, from, from);
            return None;
        };
        let placement = clasp_plan::keys::remap_workers(current, decision.placement);
        let to = placement.workers;
        if from == to && !moved_enough(current, &placement) {
            self.triggers.planned(now, measured, from, to);
            let reason = trigger.reason;
            return instances_changed(current, &placement).then_some(Step {
                placement,
                reason,
                target_rate: target,
                stats,
                migrate: false,
            });
        }
        if !self.triggers.admits(now, from, to) {
            self.held_back += 1;
            return None;
        }
        self.triggers.planned(now, measured, from, to);
        Some(Step { placement, reason: trigger.reason, target_rate: target, stats, migrate: true })
    }

    /// The policy's decision for `target` from `stats`; `None` when the policy cannot decide
    /// (no throughput observed yet, or an error).
    fn policy_decision(
        &mut self,
        p: &Pipeline,
        stats: &ObservedStats,
        current: &Placement,
        target: f64,
    ) -> Option<clasp_plan::Decision> {
        if stats.throughput.is_nan() || stats.throughput <= 0.0 {
            return None;
        }
        let input = PlanInput {
            pipeline: p,
            stats,
            target_rate: target,
            coefficients: self.coefficients(),
            config: &self.cfg.plan,
            current: Some(current),
        };
        self.cfg.policy.decide_cached(&input, &mut self.cache).ok()
    }

    /// Observed statistics of the window, with everything the policies read.
    pub fn statistics(
        &self,
        p: &Pipeline,
        log: &ReportLog,
        (from, to): (f64, f64),
        current: &Placement,
    ) -> ObservedStats {
        let reports: Vec<&crate::report::WorkerReport> = log.window(from, to).collect();
        let tail: Vec<&Sample> =
            self.samples.iter().filter(|s| s.time_s > from && s.time_s <= to).collect();
        let inputs: Vec<f64> = tail.iter().map(|s| s.input_rate).collect();
        let completed: Vec<f64> = tail.iter().map(|s| s.throughput).collect();
        let queue = tail.iter().map(|s| s.planner_queue).sum::<f64>() / tail.len().max(1) as f64;
        let window = Window {
            inputs: &inputs,
            completed: &completed,
            planner_queue: queue,
            workers_used: current.workers,
            batch_size: 1,
        };
        let mut stats = observe(p, &reports, &window);
        for (o, s) in stats.operators.iter_mut().enumerate() {
            s.parallelism = current.operators[o].shares.iter().map(|x| x.instances.max(1)).sum();
            s.overhead_samples = self.overhead[o].iter().copied().collect();
        }
        stats.coefficients = Some(self.coefficients());
        stats.saturated_per_worker_rate = (!self.per_worker_rates.is_empty()).then(|| {
            self.per_worker_rates.iter().sum::<f64>() / self.per_worker_rates.len() as f64
        });
        stats
    }
}

/// The rate an unthrottled input is planned for: more than any cluster here sustains.
pub const UNTHROTTLED_RATE: f64 = 20_000_000.0;

fn positive_or(x: f64, fallback: f64) -> f64 {
    if x.is_finite() && x > 0.0 { x } else { fallback }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{even_placement, pipeline};

    fn sample(t: f64, input: f64, out: f64, requests: u64) -> Sample {
        Sample {
            time_s: t,
            interval_s: 1.0,
            input_rate: input,
            throughput: out,
            requests,
            planner_queue: 0.0,
            workers: 1,
        }
    }

    /// The simulator's controller fires exactly when the runtime's state machine, fed the
    /// same samples, does.
    #[test]
    fn triggers_are_the_runtimes() {
        let cfg = ControllerConfig::with_policy(Policy::Clasp).with_warmup(2_000);
        let mut sim = Controller::new(cfg.clone(), 2).unwrap();
        let mut runtime = triggers::Controller::new(cfg.triggers.clone());
        let inputs = [900.0, 900.0, 1000.0, 1000.0, 1500.0, 1500.0, 1500.0, 1500.0, 600.0, 600.0];
        let (mut n, mut fired) = (0, 0);
        for (i, &rate) in inputs.iter().enumerate() {
            n += rate as u64;
            let s = sample(i as f64 + 1.0, rate, 0.97 * rate, n);
            let a = sim.trigger(&s, false);
            let b = runtime.observe(s.trigger_sample());
            assert_eq!(a, b, "t = {}", s.time_s);
            if let Some(tr) = a {
                fired += 1;
                sim.triggers.planned(s.time_s, tr.target_rate, 1, 1);
                runtime.planned(s.time_s, tr.target_rate, 1, 1);
            }
        }
        assert_eq!(fired, 3, "warm-up, up to 1500, down to 600");
    }

    #[test]
    fn no_sample_reaches_the_triggers_during_a_migration_or_while_settling() {
        let cfg = ControllerConfig { settle_s: 2.0, ..ControllerConfig::default().with_warmup(0) };
        let mut c = Controller::new(cfg, 2).unwrap();
        assert_eq!(c.trigger(&sample(1.0, 500.0, 500.0, 500), true), None);
        c.migration_ended(1.5);
        assert_eq!(c.trigger(&sample(2.0, 500.0, 500.0, 1000), false), None);
        assert_eq!(c.trigger(&sample(3.0, 500.0, 500.0, 1500), false), None);
        let t = c.trigger(&sample(4.5, 500.0, 500.0, 2000), false).unwrap();
        assert_eq!(t.reason, Reason::WarmedUp);
    }

    #[test]
    fn small_moves_and_instance_changes_are_told_apart() {
        let p = pipeline("wc.toml");
        let a = even_placement(&p, 2);
        let mut b = a.clone();
        b.operators[0].shares[0].fraction += 0.05;
        b.operators[0].shares[1].fraction -= 0.05;
        assert!(!moved_enough(&a, &b) && !instances_changed(&a, &b));
        b.operators[1].shares[0].instances = 3;
        assert!(instances_changed(&a, &b));
        b.operators[0].shares[0].fraction += 0.1;
        assert!(moved_enough(&a, &b));
        assert!(moved_enough(&a, &even_placement(&p, 3)));
    }

    #[test]
    fn bad_settings_are_rejected() {
        let bad = ControllerConfig { settle_s: -1.0, ..ControllerConfig::default() };
        assert!(Controller::new(bad, 2).is_err());
        let mut bad = ControllerConfig::default();
        bad.triggers.change = 0.0;
        assert!(Controller::new(bad, 2).is_err());
    }
}
