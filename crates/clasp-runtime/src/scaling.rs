//! The scaling controller loop (CLASP §4.2–4.4 on the live cluster): every stats interval it
//! feeds saturated workers' reports to the estimator (Eq. 2–4), asks the trigger state machine
//! whether to rescale, lets the chosen policy decide a worker count and placement from the
//! observed statistics, starts the workers it needs, migrates state and queued requests in one
//! decentralized round, and stops the workers it no longer needs.

use crate::cluster::{ClusterError, WorkerPool, scale_in, scale_out};
use crate::planner::stats::MigrationRecord;
use crate::planner::{Planner, PlannerError, Progress};
use crate::routing::RoutingPlan;
use clasp_core::Pipeline;
use clasp_core::placement::{KeyAssignment, Placement};
pub use clasp_core::stats::ScalingEvent;
use clasp_core::stats::{Coefficients, ObservedStats};
use clasp_plan::controller::{Controller, Sample, TriggerConfig};
use clasp_plan::estimator::{Estimator, EstimatorConfig, Observation};
use clasp_plan::keys::{assign_keys, remap_workers};
use clasp_plan::migration::plan_migration;
use clasp_plan::{LimitCache, PlanConfig, PlanInput, Policy};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// How the controller decides.
#[derive(Clone, Debug)]
pub struct ScalingConfig {
    /// The policy (`static` never rescales).
    pub policy: Policy,
    /// Planning parameters (worker limit, headroom, slots).
    pub plan: PlanConfig,
    /// When to rescale.
    pub triggers: TriggerConfig,
    /// The estimator; its normalization constants are also the initial α, β, γ.
    pub estimator: EstimatorConfig,
    /// Window of observations a decision is based on (s).
    pub window_s: f64,
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

/// The controller's state across intervals.
#[derive(Debug)]
pub struct Scaler {
    config: ScalingConfig,
    controller: Controller,
    estimator: Estimator,
    cache: LimitCache,
    placement: Placement,
    keys: KeyAssignment,
    epoch: u64,
    reports_seen: usize,
    saturated_rates: VecDeque<f64>,
    overhead: Vec<VecDeque<[f64; 2]>>,
    /// Rescalings done.
    pub events: Vec<ScalingEvent>,
    /// Decisions held back by the cooldown.
    pub held_back: u32,
    /// The estimates after every interval.
    pub coefficients: Vec<CoefficientSample>,
}

/// Why a rescaling failed.
#[derive(Debug, thiserror::Error)]
pub enum ScalingError {
    /// Starting or stopping workers failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The planner failed (a worker was lost, a migration failed).
    #[error(transparent)]
    Planner(#[from] PlannerError),
}

impl Scaler {
    /// A controller starting from the placement the cluster runs (epoch `epoch`).
    pub fn new(
        config: ScalingConfig,
        placement: Placement,
        keys: KeyAssignment,
        epoch: u64,
    ) -> Self {
        let ops = placement.operators.len();
        Self {
            controller: Controller::new(config.triggers.clone()),
            estimator: Estimator::new(config.estimator.clone()),
            cache: LimitCache::default(),
            placement,
            keys,
            epoch,
            reports_seen: 0,
            saturated_rates: VecDeque::new(),
            overhead: vec![VecDeque::new(); ops],
            events: Vec::new(),
            held_back: 0,
            coefficients: Vec::new(),
            config,
        }
    }

    /// The placement running now.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// The key assignment running now.
    pub fn keys(&self) -> &KeyAssignment {
        &self.keys
    }

    /// The current estimates.
    pub fn estimates(&self) -> Coefficients {
        self.estimator.coefficients()
    }

    /// One interval: estimate, maybe rescale. Returns the rescaling done, if any.
    pub fn step(
        &mut self,
        planner: &mut Planner,
        pool: &mut WorkerPool,
        p: &Progress,
    ) -> Result<Option<ScalingEvent>, ScalingError> {
        self.observe(planner, p);
        if self.config.policy == Policy::Static {
            return Ok(None);
        }
        let sample = Sample {
            t: p.t,
            input_rate: p.input_rate,
            throughput: p.throughput,
            requests: p.requests,
            interval: p.interval_s,
        };
        tracing::debug!("sample {sample:?}");
        let Some(trigger) = self.controller.observe(sample) else { return Ok(None) };
        if trigger.target_rate <= 0.0 {
            // The input paused or ended: nothing to plan for.
            return Ok(None);
        }
        let pipeline = planner.pipeline().clone();
        let stats = self.decision_stats(planner);
        let input = PlanInput {
            pipeline: &pipeline,
            stats: &stats,
            target_rate: trigger.target_rate,
            coefficients: self.estimator.coefficients(),
            config: &self.config.plan,
            current: Some(&self.placement),
        };
        let decision = match self.config.policy.decide_cached(&input, &mut self.cache) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!("{}: no decision at t = {:.1} s: {e}", self.config.policy, p.t);
                self.controller.planned(
                    p.t,
                    trigger.target_rate,
                    self.placement.workers,
                    self.placement.workers,
                );
                return Ok(None);
            }
        };
        let (from, to) = (self.placement.workers, decision.workers);
        tracing::debug!(
            "decision stats: input {:.0}/s, throughput {:.0}/s, operators {:?}",
            stats.input_rate,
            stats.throughput,
            stats
                .operators
                .iter()
                .map(|o| (o.name.as_str(), o.processed_rate.round(), o.exec_time_us.round()))
                .collect::<Vec<_>>()
        );
        tracing::info!(
            "t = {:.1} s: {} trigger, target {:.0} req/s -> {} decides {from} -> {to} workers (coefficients {:?}, observed throughput {:.0})",
            p.t,
            trigger.reason.as_str(),
            trigger.target_rate,
            self.config.policy,
            self.estimator.coefficients(),
            stats.throughput
        );
        let placement = remap_workers(&self.placement, decision.placement);
        if from == to && !moved_enough(&self.placement, &placement) {
            if instances_changed(&self.placement, &placement) {
                // Same workers and shares: only the instance limits change, nothing moves.
                self.epoch += 1;
                let keys = self.keys.clone();
                planner.install(RoutingPlan {
                    epoch: self.epoch,
                    placement: placement.clone(),
                    keys,
                })?;
                self.placement = placement;
            }
            self.controller.planned(p.t, trigger.target_rate, from, to);
            return Ok(None);
        }
        if !self.controller.admits(p.t, from, to) {
            self.held_back += 1;
            return Ok(None);
        }
        let record = self.migrate(planner, pool, &pipeline, placement)?;
        self.controller.planned(p.t, trigger.target_rate, from, to);
        let event = ScalingEvent {
            time_s: record.time_s,
            from_workers: from,
            to_workers: to,
            reason: trigger.reason.as_str().into(),
            target_rate: trigger.target_rate,
            planner_ms: record.planner_ms,
            max_worker_pause_ms: record.max_worker_pause_ms,
            groups_moved: record.groups,
            keys_moved: record.keys,
            bytes_moved: record.bytes,
            requests_moved: record.requests,
        };
        self.events.push(event.clone());
        Ok(Some(event))
    }

    /// Moves the cluster to `placement`: workers first started, state migrated, extra workers
    /// stopped.
    pub fn migrate(
        &mut self,
        planner: &mut Planner,
        pool: &mut WorkerPool,
        p: &Pipeline,
        placement: Placement,
    ) -> Result<MigrationRecord, ScalingError> {
        let (from, to) = (self.placement.workers, placement.workers);
        if to > from {
            scale_out(planner, pool, from, to)?;
        }
        let keys = assign_keys(p, &placement, self.keys.groups, Some(&self.keys));
        let plan = plan_migration(p, &self.placement, &self.keys, &placement, &keys);
        self.epoch += 1;
        let record = planner.migrate(
            RoutingPlan { epoch: self.epoch, placement: placement.clone(), keys: keys.clone() },
            &plan,
        )?;
        if to < from {
            scale_in(planner, pool, from, to)?;
        }
        self.placement = placement;
        self.keys = keys;
        Ok(record)
    }

    /// Feeds the reports that arrived since the last step to the estimator and to the
    /// baselines' inputs.
    fn observe(&mut self, planner: &Planner, p: &Progress) {
        let new = planner.reports.since(self.reports_seen);
        self.reports_seen += new.len();
        let mut any_saturated = false;
        for (_, r) in new {
            for (o, op) in r.ops.iter().enumerate().take(self.overhead.len()) {
                if op.processed > 0 {
                    let (wait, exec) =
                        (op.wait_us / op.processed as f64, op.exec_us / op.processed as f64);
                    let instances: u32 =
                        self.placement.operators[o].shares.iter().map(|s| s.instances).sum();
                    let q = &mut self.overhead[o];
                    q.push_back([f64::from(instances), wait / (wait + exec).max(1e-9)]);
                    if q.len() > 64 {
                        q.pop_front();
                    }
                }
            }
            if !r.saturated {
                continue;
            }
            any_saturated = true;
            self.estimator.observe(r.worker.0, &Observation::from(r));
        }
        if any_saturated && p.workers > 0 {
            self.saturated_rates.push_back(p.throughput / f64::from(p.workers));
            if self.saturated_rates.len() > 10 {
                self.saturated_rates.pop_front();
            }
        }
        self.coefficients.push(CoefficientSample {
            time_s: p.t,
            coefficients: self.estimator.coefficients(),
            observations: self.estimator.observations_used(),
        });
    }

    /// Observed statistics of the decision window, with what the baselines need: what the
    /// policy decides from (public so that an experiment can ask the policy what it would
    /// decide for other rates).
    pub fn decision_stats(&self, planner: &Planner) -> ObservedStats {
        let mut stats = planner.observed(self.config.window_s);
        stats.coefficients = Some(self.estimator.coefficients());
        if !self.saturated_rates.is_empty() {
            stats.saturated_per_worker_rate =
                Some(self.saturated_rates.iter().sum::<f64>() / self.saturated_rates.len() as f64);
        }
        for (o, op) in stats.operators.iter_mut().enumerate() {
            op.parallelism = self.placement.operators[o].shares.iter().map(|s| s.instances).sum();
            op.overhead_samples = self.overhead[o].iter().copied().collect();
        }
        stats
    }
}

/// Whether some operator's instances on some worker differ.
fn instances_changed(old: &Placement, new: &Placement) -> bool {
    old.operators.iter().zip(&new.operators).any(|(a, b)| {
        b.shares.iter().any(|s| {
            a.shares.iter().find(|x| x.worker == s.worker).map_or(0, |x| x.instances) != s.instances
        })
    })
}

/// Whether a placement on the same workers differs enough to be worth a migration: some
/// operator's fraction on some worker moved by more than 0.1.
fn moved_enough(old: &Placement, new: &Placement) -> bool {
    old.operators.iter().zip(&new.operators).any(|(a, b)| {
        (0..old.workers.max(new.workers)).any(|w| {
            let w = clasp_core::WorkerId(w);
            let fa = a.shares.iter().find(|s| s.worker == w).map_or(0.0, |s| s.fraction);
            let fb = b.shares.iter().find(|s| s.worker == w).map_or(0.0, |s| s.fraction);
            (fa - fb).abs() > 0.1
        })
    })
}
