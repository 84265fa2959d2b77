//! The scaling controller loop, as the planner runs it every statistics interval: feed
//! saturated workers to the online estimator (Eq. 2–4), watch the triggers, and when one
//! fires, aggregate the reports of the current placement into observed statistics and ask the
//! policy (the `clasp_plan` code the runtime calls) for a new placement.
//!
//! Triggers (CLASP §5.1.1, all configurable):
//! - **warm-up**: the first decision once `warmup_requests` inputs have been dispatched;
//! - **rate**: every input-rate sample of the last `rate_persist_s` seconds is more than
//!   `rate_change` away from the rate of the last decision, in the same direction;
//! - **lag**: throughput below `(1 − lag_tolerance)` × the input rate in every sample of the
//!   last `lag_persist_s` seconds.
//!
//! No decision is taken during a migration or in the `settle_s` after one (its statistics would
//! describe the migration, not the placement). A decision that would go back to the worker
//! count in force before the current one within `flap_hold_s` of the last change is held back.

use crate::report::{ReportLog, Window, observe};
use clasp_core::Pipeline;
use clasp_core::placement::Placement;
use clasp_core::stats::{Coefficients, ObservedStats};
use clasp_plan::estimator::{Estimator, Observation};
use clasp_plan::{LimitCache, PlanConfig, PlanError, PlanInput, Policy};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Settings of the scaling controller.
#[derive(Clone, Debug, PartialEq)]
pub struct ControllerConfig {
    /// The policy deciding worker counts and placements.
    pub policy: Policy,
    /// Planning parameters handed to the policy (worker limit, headroom, estimator, ...).
    pub plan: PlanConfig,
    /// Input requests dispatched before the first decision (the paper: 10,000).
    pub warmup_requests: u64,
    /// Relative input-rate change that counts as a change.
    pub rate_change: f64,
    /// Seconds a rate change must persist (the paper: 2).
    pub rate_persist_s: f64,
    /// Throughput may fall this far below the input rate without counting as lag.
    pub lag_tolerance: f64,
    /// Seconds throughput must lag the input rate (the paper: 3).
    pub lag_persist_s: f64,
    /// Seconds after a migration before the next decision.
    pub settle_s: f64,
    /// A return to the previous worker count within this many seconds of a change is held.
    pub flap_hold_s: f64,
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
            warmup_requests: 10_000,
            rate_change: 0.1,
            rate_persist_s: 2.0,
            lag_tolerance: 0.05,
            lag_persist_s: 3.0,
            settle_s: 2.0,
            flap_hold_s: 4.0,
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
}

/// What fired a decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    /// The warm-up is over.
    Warmup,
    /// The input rate changed and stayed changed.
    Rate,
    /// Throughput stayed below the input rate.
    Lag,
}

impl Reason {
    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Warmup => "warm-up",
            Self::Rate => "rate change",
            Self::Lag => "throughput below input",
        }
    }
}

/// A decision to move to a new placement.
#[derive(Clone, Debug)]
pub struct Step {
    /// The new placement (worker labels not yet remapped).
    pub placement: Placement,
    /// What fired.
    pub reason: Reason,
    /// The rate decided for (requests/s).
    pub target_rate: f64,
    /// The statistics decided from.
    pub stats: ObservedStats,
}

/// Per-interval measurements the controller sees.
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    /// End of the interval (s).
    pub time_s: f64,
    /// Input requests per second entering the planner.
    pub input_rate: f64,
    /// Chains completed per second.
    pub throughput: f64,
    /// Mean planner queue.
    pub planner_queue: f64,
    /// Workers active.
    pub workers: u32,
}

/// The controller's state.
#[derive(Debug)]
pub struct Controller {
    cfg: ControllerConfig,
    estimator: Estimator,
    cache: LimitCache,
    samples: Vec<Sample>,
    baseline: Option<f64>,
    quiet_until: f64,
    last_change_s: f64,
    previous_workers: Option<u32>,
    per_worker_rates: VecDeque<f64>,
    overhead: Vec<VecDeque<[f64; 2]>>,
}

/// Newest per-worker throughputs FaaSFlow averages.
const PER_WORKER_SAMPLES: usize = 10;

impl Controller {
    /// A controller for a pipeline of `ops` operators.
    pub fn new(cfg: ControllerConfig, ops: usize) -> Result<Self, PlanError> {
        cfg.plan.validate()?;
        let c = cfg.initial;
        let mut est = cfg.plan.estimator.clone();
        est.local_scale = positive_or(c.alpha, est.local_scale);
        est.remote_scale = positive_or(c.beta, est.remote_scale);
        est.destinations_scale = positive_or(c.gamma, est.destinations_scale);
        est.initial_capacity = c.capacity;
        est.validate()?;
        Ok(Self {
            estimator: Estimator::new(est),
            cfg,
            cache: LimitCache::default(),
            samples: Vec::new(),
            baseline: None,
            quiet_until: 0.0,
            last_change_s: f64::NEG_INFINITY,
            previous_workers: None,
            per_worker_rates: VecDeque::new(),
            overhead: vec![VecDeque::new(); ops],
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

    /// Notes that a migration ended at `t` (s): the next decision waits `settle_s`.
    pub fn migration_ended(&mut self, t: f64) {
        self.quiet_until = t + self.cfg.settle_s;
    }

    /// Whether a trigger fires at the latest sample; the rate to decide for.
    pub fn trigger(&self, dispatched: u64, unthrottled: bool) -> Option<(Reason, f64)> {
        let last = self.samples.last()?;
        if dispatched < self.cfg.warmup_requests || last.time_s < self.quiet_until {
            return None;
        }
        let target = |n: usize| -> f64 {
            if unthrottled {
                UNTHROTTLED_RATE
            } else {
                let tail = &self.samples[self.samples.len().saturating_sub(n)..];
                tail.iter().map(|s| s.input_rate).sum::<f64>() / tail.len() as f64
            }
        };
        let Some(baseline) = self.baseline else {
            return Some((Reason::Warmup, target(self.intervals(self.cfg.rate_persist_s))));
        };
        let n = self.intervals(self.cfg.rate_persist_s);
        if let Some(tail) = self.recent(n) {
            let away = |s: &Sample| (s.input_rate - baseline) / baseline.max(1e-9);
            let up = tail.iter().all(|s| away(s) > self.cfg.rate_change);
            let down = tail.iter().all(|s| away(s) < -self.cfg.rate_change);
            if (up || down) && !unthrottled {
                return Some((Reason::Rate, target(n)));
            }
        }
        let n = self.intervals(self.cfg.lag_persist_s);
        let lagging = |s: &Sample| s.throughput < (1.0 - self.cfg.lag_tolerance) * s.input_rate;
        if self.recent(n).is_some_and(|tail| tail.iter().all(lagging)) {
            return Some((Reason::Lag, target(n)));
        }
        None
    }

    /// The last `n` samples, if there are that many since the controller last went quiet.
    fn recent(&self, n: usize) -> Option<&[Sample]> {
        let tail = &self.samples[self.samples.len().checked_sub(n)?..];
        tail.iter().all(|s| s.time_s > self.quiet_until - self.cfg.settle_s).then_some(tail)
    }

    fn intervals(&self, seconds: f64) -> usize {
        let dt = match self.samples.as_slice() {
            [.., a, b] => (b.time_s - a.time_s).max(1e-9),
            _ => 1.0,
        };
        ((seconds / dt).round() as usize).max(1)
    }

    /// Decides for `target_rate` from the reports of the current placement; `None` when the
    /// policy keeps the current placement or the decision is held back as flapping.
    #[allow(clippy::too_many_arguments)]
    pub fn decide(
        &mut self,
        p: &Pipeline,
        log: &ReportLog,
        window: (f64, f64),
        current: &Placement,
        reason: Reason,
        target_rate: f64,
    ) -> Result<Option<Step>, PlanError> {
        let stats = self.statistics(p, log, window, current);
        if stats.throughput.is_nan() || stats.throughput <= 0.0 {
            return Ok(None);
        }
        let input = PlanInput {
            pipeline: p,
            stats: &stats,
            target_rate,
            coefficients: self.coefficients(),
            config: &self.cfg.plan,
            current: Some(current),
        };
        let decision = self.cfg.policy.decide_cached(&input, &mut self.cache)?;
        let now = window.1;
        let placement = clasp_plan::keys::remap_workers(current, decision.placement);
        if same_placement(current, &placement) {
            self.baseline = Some(target_rate);
            return Ok(None);
        }
        let back = self.previous_workers == Some(placement.workers)
            && placement.workers != current.workers
            && now - self.last_change_s < self.cfg.flap_hold_s;
        if back {
            return Ok(None);
        }
        self.baseline = Some(target_rate);
        if placement.workers != current.workers {
            self.previous_workers = Some(current.workers);
            self.last_change_s = now;
        }
        Ok(Some(Step { placement, reason, target_rate, stats }))
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

/// Same workers, fractions and instances (fractions within 10⁻³).
fn same_placement(a: &Placement, b: &Placement) -> bool {
    a.workers == b.workers
        && a.operators.iter().zip(&b.operators).all(|(x, y)| {
            x.shares.len() == y.shares.len()
                && x.shares.iter().zip(&y.shares).all(|(s, t)| {
                    s.worker == t.worker
                        && s.instances == t.instances
                        && (s.fraction - t.fraction).abs() < 1e-3
                })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, input: f64, out: f64) -> Sample {
        Sample { time_s: t, input_rate: input, throughput: out, planner_queue: 0.0, workers: 1 }
    }

    fn controller() -> Controller {
        let mut c = Controller::new(ControllerConfig::default(), 2).unwrap();
        c.baseline = Some(1000.0);
        c
    }

    #[test]
    fn warmup_comes_first() {
        let mut c = Controller::new(ControllerConfig::default(), 2).unwrap();
        c.samples.push(sample(1.0, 800.0, 800.0));
        assert_eq!(c.trigger(9_999, false), None);
        assert_eq!(c.trigger(10_000, false), Some((Reason::Warmup, 800.0)));
    }

    #[test]
    fn a_rate_change_must_persist_in_one_direction() {
        let mut c = controller();
        c.samples.push(sample(1.0, 1500.0, 1500.0));
        assert_eq!(c.trigger(20_000, false), None);
        c.samples.push(sample(2.0, 1300.0, 1300.0));
        assert_eq!(c.trigger(20_000, false), Some((Reason::Rate, 1400.0)));
        c.samples.push(sample(3.0, 700.0, 700.0));
        assert_eq!(c.trigger(20_000, false), None);
        c.samples.push(sample(4.0, 850.0, 850.0));
        assert_eq!(c.trigger(20_000, false), Some((Reason::Rate, 775.0)));
    }

    #[test]
    fn lag_must_last_three_seconds_and_migrations_quieten() {
        let mut c = controller();
        for t in 1..=2 {
            c.samples.push(sample(f64::from(t), 1050.0, 800.0));
        }
        assert_eq!(c.trigger(20_000, false), None);
        c.samples.push(sample(3.0, 1050.0, 800.0));
        assert_eq!(c.trigger(20_000, false), Some((Reason::Lag, 1050.0)));
        c.migration_ended(3.0);
        for t in 4..=5 {
            c.samples.push(sample(f64::from(t), 1050.0, 800.0));
            assert_eq!(c.trigger(20_000, false), None, "t = {t}: samples up to the end count not");
        }
        c.samples.push(sample(6.0, 1050.0, 800.0));
        assert_eq!(c.trigger(20_000, false), Some((Reason::Lag, 1050.0)));
    }
}
