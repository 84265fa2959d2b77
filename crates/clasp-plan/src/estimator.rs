//! Online estimation of the capacity model's coefficients (§4.2.1, Eq. 2–4).
//!
//! A saturated worker runs at its capacity W, so its execution load is
//! `E_w = W − α R^l_w − β R^r_w − γ δ_w`. Differencing two saturated observations cancels W
//! and leaves one linear equation in θ = [α, β, γ] (Eq. 2), solved by recursive least squares
//! (RLS) with forgetting. Every variable is divided by a fixed constant of its typical
//! magnitude first, so the regression is well conditioned and the normalized coefficients start
//! at 1.0 (the paper's measured values). With θ fixed, each saturated observation gives one
//! estimate of W (Eq. 3), smoothed by an exponential moving average into W̄ (Eq. 4).
//!
//! One estimator serves the whole cluster (workers are homogeneous, so W, α, β, γ are shared)
//! and is fed once per saturated worker per statistics round.
//!
//! **What is differenced.** By default each observation is differenced against the previous
//! saturated observation of the pooled stream, whichever worker it came from. The paper indexes
//! Eq. 2 by that pooled sequence; W cancels across workers because the cluster is homogeneous;
//! and workers of one placement run different operator mixes, so their local, remote and
//! fan-out rates differ widely, which is exactly the variation the regression needs. Differencing
//! a worker against its own previous sample instead mostly yields deltas near zero (a worker's
//! mix is constant between rescalings), which are skipped, so it learns far more slowly; it is
//! available as [`Differencing::PerWorker`] for clusters that are not quite homogeneous.

use crate::error::PlanError;
use clasp_core::stats::{Coefficients, WorkerStats};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What an observation is differenced against.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Differencing {
    /// The previous saturated observation of any worker (the paper's pooled sequence).
    #[default]
    Pooled,
    /// The previous saturated observation of the same worker.
    PerWorker,
}

/// Estimator parameters (defaults: the reference implementation's, DESIGN §7).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EstimatorConfig {
    /// Normalizer of the execution load E (and of W).
    pub load_scale: f64,
    /// α's normalizer: the normalized α is α / `local_scale`.
    pub local_scale: f64,
    /// β's normalizer.
    pub remote_scale: f64,
    /// γ's normalizer.
    pub destinations_scale: f64,
    /// RLS forgetting factor ρ ∈ (0, 1].
    pub forgetting: f64,
    /// Initial covariance: this times the identity.
    pub initial_covariance: f64,
    /// Largest change of a normalized coefficient in one step.
    pub max_step: f64,
    /// Observations with fewer remote chained requests per second are not used for θ.
    pub min_remote_rate: f64,
    /// A difference whose normalized terms are all below this is "no change" and skipped.
    pub min_delta: f64,
    /// EMA weight η of each new capacity estimate (Eq. 4).
    pub capacity_smoothing: f64,
    /// W̄ before any observation (µs/s).
    pub initial_capacity: f64,
    /// What observations are differenced against.
    pub differencing: Differencing,
}

impl Default for EstimatorConfig {
    fn default() -> Self {
        Self {
            load_scale: 800_000.0,
            local_scale: 38.5,
            remote_scale: 275.0,
            destinations_scale: 51_500.0,
            forgetting: 0.97,
            initial_covariance: 0.1,
            max_step: 0.15,
            min_remote_rate: 100.0,
            min_delta: 1e-9,
            capacity_smoothing: 0.05,
            initial_capacity: 880_000.0,
            differencing: Differencing::Pooled,
        }
    }
}

impl EstimatorConfig {
    /// Checks every value is in range.
    pub fn validate(&self) -> Result<(), PlanError> {
        let positive = [
            ("load_scale", self.load_scale),
            ("local_scale", self.local_scale),
            ("remote_scale", self.remote_scale),
            ("destinations_scale", self.destinations_scale),
            ("initial_covariance", self.initial_covariance),
            ("max_step", self.max_step),
            ("initial_capacity", self.initial_capacity),
        ];
        for (name, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return Err(PlanError::InvalidConfig(format!(
                    "estimator.{name} = {v} must be > 0"
                )));
            }
        }
        let unit =
            [("forgetting", self.forgetting), ("capacity_smoothing", self.capacity_smoothing)];
        for (name, v) in unit {
            if !(v > 0.0 && v <= 1.0) {
                return Err(PlanError::InvalidConfig(format!(
                    "estimator.{name} = {v} must be in (0, 1]"
                )));
            }
        }
        if !(self.min_remote_rate >= 0.0 && self.min_delta >= 0.0) {
            return Err(PlanError::InvalidConfig(
                "estimator.min_remote_rate and min_delta must be >= 0".into(),
            ));
        }
        Ok(())
    }

    fn scales(&self) -> [f64; 3] {
        [self.local_scale, self.remote_scale, self.destinations_scale]
    }
}

/// One saturated worker's metrics over a statistics round (Table 2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// E_w = Σ_o N_{w,o} τ̄_{w,o} (µs/s).
    pub exec_load: f64,
    /// R^l_w: local chained requests per second.
    pub local_rate: f64,
    /// R^r_w: remote chained requests per second.
    pub remote_rate: f64,
    /// δ_w: distinct remote workers reached.
    pub remote_destinations: f64,
}

impl From<&WorkerStats> for Observation {
    fn from(w: &WorkerStats) -> Self {
        Self {
            exec_load: w.exec_load,
            local_rate: w.local_rate,
            remote_rate: w.remote_rate,
            remote_destinations: w.remote_destinations,
        }
    }
}

/// Why an observation did not update θ (W̄ is updated by every observation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Skip {
    /// Nothing to difference against yet.
    First,
    /// Fewer remote chained requests than `min_remote_rate`: β and γ are not identifiable.
    FewRemoteCalls(f64),
    /// The difference to the previous observation is ~0 in every term.
    NoChange,
    /// A value was negative or not finite; the observation was ignored entirely.
    Invalid,
}

/// What [`Estimator::observe`] did with an observation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Outcome {
    /// θ took an RLS step.
    Updated,
    /// θ was left as it was.
    Skipped(Skip),
}

/// The cluster's online estimator of α, β, γ (RLS, Eq. 2) and W̄ (EMA, Eq. 3–4).
#[derive(Clone, Debug)]
pub struct Estimator {
    cfg: EstimatorConfig,
    /// Normalized θ = [α/local_scale, β/remote_scale, γ/destinations_scale].
    theta: [f64; 3],
    /// RLS covariance.
    cov: [[f64; 3]; 3],
    capacity: f64,
    pooled: Option<Observation>,
    per_worker: BTreeMap<u32, Observation>,
    used: u64,
}

impl Estimator {
    /// An estimator at its starting point: normalized θ = 1 (the normalizers themselves), W̄ at
    /// `initial_capacity`, covariance `initial_covariance`·I.
    pub fn new(cfg: EstimatorConfig) -> Self {
        let c = cfg.initial_covariance;
        Self {
            theta: [1.0; 3],
            cov: [[c, 0.0, 0.0], [0.0, c, 0.0], [0.0, 0.0, c]],
            capacity: cfg.initial_capacity,
            pooled: None,
            per_worker: BTreeMap::new(),
            used: 0,
            cfg,
        }
    }

    /// Feeds one saturated observation of `worker`.
    pub fn observe(&mut self, worker: u32, obs: &Observation) -> Outcome {
        let values = [obs.exec_load, obs.local_rate, obs.remote_rate, obs.remote_destinations];
        if values.iter().any(|v| !(v.is_finite() && *v >= 0.0)) {
            return Outcome::Skipped(Skip::Invalid);
        }
        let previous = match self.cfg.differencing {
            Differencing::Pooled => self.pooled.replace(*obs),
            Differencing::PerWorker => self.per_worker.insert(worker, *obs),
        };
        let outcome = match previous {
            None => Outcome::Skipped(Skip::First),
            Some(_) if obs.remote_rate < self.cfg.min_remote_rate => {
                Outcome::Skipped(Skip::FewRemoteCalls(obs.remote_rate))
            }
            Some(prev) => self.step(&prev, obs),
        };
        self.smooth_capacity(obs);
        outcome
    }

    /// One RLS step on the normalized Eq. 2: y = φᵀθ with y = ΔE / load_scale and
    /// φ_i = −Δx_i · scale_i / load_scale (x = R^l, R^r, δ).
    fn step(&mut self, prev: &Observation, obs: &Observation) -> Outcome {
        let y = (obs.exec_load - prev.exec_load) / self.cfg.load_scale;
        let dx = [
            obs.local_rate - prev.local_rate,
            obs.remote_rate - prev.remote_rate,
            obs.remote_destinations - prev.remote_destinations,
        ];
        let scales = self.cfg.scales();
        let phi: [f64; 3] = std::array::from_fn(|i| -dx[i] * scales[i] / self.cfg.load_scale);
        if phi.iter().all(|p| p.abs() < self.cfg.min_delta) {
            return Outcome::Skipped(Skip::NoChange);
        }
        let p_phi: [f64; 3] = std::array::from_fn(|i| dot(&self.cov[i], &phi));
        let denom = self.cfg.forgetting + dot(&phi, &p_phi);
        let gain: [f64; 3] = std::array::from_fn(|i| p_phi[i] / denom);
        let error = y - dot(&phi, &self.theta);
        for (t, k) in self.theta.iter_mut().zip(gain) {
            // Clamped so one outlier cannot throw a coefficient far; costs are never negative.
            let delta = (k * error).clamp(-self.cfg.max_step, self.cfg.max_step);
            *t = (*t + delta).max(0.0);
        }
        // P ← (P − k φᵀ P) / ρ; P is symmetric, so φᵀP = (Pφ)ᵀ.
        for (i, row) in self.cov.iter_mut().enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                *v = (*v - gain[i] * p_phi[j]) / self.cfg.forgetting;
            }
        }
        self.used += 1;
        Outcome::Updated
    }

    /// Eq. 3–4: Ŵ = E + α R^l + β R^r + γ δ with the current θ; W̄ ← (1−η) W̄ + η Ŵ.
    fn smooth_capacity(&mut self, obs: &Observation) {
        let c = self.coefficients();
        let estimate = obs.exec_load
            + c.alpha * obs.local_rate
            + c.beta * obs.remote_rate
            + c.gamma * obs.remote_destinations;
        let eta = self.cfg.capacity_smoothing;
        self.capacity = (1.0 - eta) * self.capacity + eta * estimate;
    }

    /// The current α, β, γ (rescaled to µs) and W̄.
    pub fn coefficients(&self) -> Coefficients {
        let s = self.cfg.scales();
        Coefficients {
            alpha: self.theta[0] * s[0],
            beta: self.theta[1] * s[1],
            gamma: self.theta[2] * s[2],
            capacity: self.capacity,
        }
    }

    /// How many observations have updated θ.
    pub fn observations_used(&self) -> u64 {
        self.used
    }

    /// The configuration.
    pub fn config(&self) -> &EstimatorConfig {
        &self.cfg
    }
}

fn dot(a: &[f64; 3], b: &[f64; 3]) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}
