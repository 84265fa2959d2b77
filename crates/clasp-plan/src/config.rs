//! Planning parameters, with the defaults of the CLASP paper and its reference implementation
//! (docs/model-notes.md). Read from TOML or JSON; unknown keys are rejected so a typo cannot be ignored.

use crate::error::PlanError;
use crate::estimator::EstimatorConfig;
use serde::{Deserialize, Serialize};

/// How operators are packed onto workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PackingVariant {
    /// The paper's next-fit (§4.3.2): fill the current worker, open a new one when it is full,
    /// never go back to an earlier worker.
    #[default]
    NextFit,
    /// The reference implementation's variant: every already-open worker is tried first, in
    /// descending affinity Σ_b (Ẽ_{o→b}/D̃_o)·(β−α)·σ_b(k) (the saving per unit of `o` from
    /// calling its successors locally on `k`), then new workers are opened.
    Affinity,
}

/// Parameters of every planning decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlanConfig {
    /// Fraction of W̄ a worker may be loaded to (per-worker budget = W̄ · headroom).
    pub headroom: f64,
    /// τ̄ (µs) for operators whose spec gives no service time, in spec-derived statistics.
    pub default_exec_us: f64,
    /// Executor slots per worker: P_max of Eq. 12.
    pub slots_per_worker: u32,
    /// Worker limit of the cluster.
    pub max_workers: u32,
    /// Relative width at which the worker-limit rate search stops: the rate found is within
    /// this fraction of the lowest rate found not to fit.
    pub rate_tolerance: f64,
    /// Absolute width (requests/s) at which the worker-limit rate search stops regardless.
    pub rate_floor: f64,
    /// Relative change of workers, coefficients or load profile under which a cached
    /// worker-limit rate is reused.
    pub cache_tolerance: f64,
    /// Packing strategy.
    pub packing: PackingVariant,
    /// The online coefficient estimator (Eq. 2–4).
    pub estimator: EstimatorConfig,
}

impl Default for PlanConfig {
    fn default() -> Self {
        Self {
            headroom: 0.9,
            default_exec_us: 400.0,
            slots_per_worker: 10,
            max_workers: 10,
            rate_tolerance: 0.01,
            rate_floor: 1e-3,
            cache_tolerance: 0.10,
            packing: PackingVariant::NextFit,
            estimator: EstimatorConfig::default(),
        }
    }
}

impl PlanConfig {
    /// Checks every value is in range.
    pub fn validate(&self) -> Result<(), PlanError> {
        let bad = |m: String| Err(PlanError::InvalidConfig(m));
        if !(self.headroom > 0.0 && self.headroom <= 1.0) {
            return bad(format!("headroom = {} must be in (0, 1]", self.headroom));
        }
        if !(self.default_exec_us.is_finite() && self.default_exec_us >= 0.0) {
            return bad(format!("default_exec_us = {} must be >= 0", self.default_exec_us));
        }
        if self.slots_per_worker == 0 {
            return bad("slots_per_worker must be >= 1".into());
        }
        if self.max_workers == 0 {
            return bad("max_workers must be >= 1".into());
        }
        if !(self.rate_tolerance > 0.0 && self.rate_tolerance < 1.0) {
            return bad(format!(
                "rate_tolerance = {} must be in (0, 1): a fraction of the rate",
                self.rate_tolerance
            ));
        }
        if !(self.rate_floor.is_finite() && self.rate_floor > 0.0) {
            return bad(format!("rate_floor = {} must be > 0 (requests/s)", self.rate_floor));
        }
        if !(self.cache_tolerance.is_finite() && self.cache_tolerance >= 0.0) {
            return bad(format!("cache_tolerance = {} must be >= 0", self.cache_tolerance));
        }
        self.estimator.validate()
    }

    /// Per-worker budget W̄ · headroom for a capacity W̄.
    pub fn budget(&self, capacity: f64) -> f64 {
        capacity * self.headroom
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_papers() {
        let c = PlanConfig::default();
        assert_eq!((c.headroom, c.default_exec_us), (0.9, 400.0));
        assert_eq!((c.slots_per_worker, c.max_workers), (10, 10));
        assert_eq!((c.rate_tolerance, c.rate_floor, c.cache_tolerance), (0.01, 1e-3, 0.10));
        assert_eq!(c.packing, PackingVariant::NextFit);
        c.validate().unwrap();
    }

    #[test]
    fn toml_is_partial_and_strict() {
        let c: PlanConfig = toml::from_str("max_workers = 4\npacking = \"affinity\"").unwrap();
        assert_eq!(c.max_workers, 4);
        assert_eq!(c.packing, PackingVariant::Affinity);
        assert_eq!(c.headroom, 0.9);
        let e = toml::from_str::<PlanConfig>("max_worker = 4").unwrap_err().to_string();
        assert!(e.contains("unknown field"), "{e}");
    }

    #[test]
    fn out_of_range_values_are_rejected() {
        let cases = [
            PlanConfig { headroom: 0.0, ..PlanConfig::default() },
            PlanConfig { headroom: 1.5, ..PlanConfig::default() },
            PlanConfig { slots_per_worker: 0, ..PlanConfig::default() },
            PlanConfig { max_workers: 0, ..PlanConfig::default() },
            PlanConfig { rate_tolerance: 0.0, ..PlanConfig::default() },
            PlanConfig { rate_tolerance: 50.0, ..PlanConfig::default() },
            PlanConfig { rate_floor: 0.0, ..PlanConfig::default() },
            PlanConfig { default_exec_us: f64::NAN, ..PlanConfig::default() },
        ];
        for c in cases {
            assert!(matches!(c.validate(), Err(PlanError::InvalidConfig(_))), "{c:?}");
        }
    }
}
