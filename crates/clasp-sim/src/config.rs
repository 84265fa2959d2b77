//! What is simulated: the cluster's machines and costs, how execution times and arrivals are
//! drawn, the planner's limits and how the run is measured.
//!
//! Every value has the default of the CLASP paper's testbed or its reference implementation
//! (docs/model-notes.md) where one exists; [`SimConfig::validate`] rejects what cannot be simulated with a
//! message naming the field.

use crate::error::SimError;
use clasp_core::stats::Coefficients;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// How one execution time is drawn around an operator's mean.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ServiceDist {
    /// Always the mean.
    Deterministic,
    /// Exponential with the mean.
    Exponential,
    /// Log-normal with the mean and the given coefficient of variation (σ/μ).
    LogNormal {
        /// Coefficient of variation, > 0.
        cv: f64,
    },
}

impl fmt::Display for ServiceDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Deterministic => f.write_str("deterministic"),
            Self::Exponential => f.write_str("exponential"),
            Self::LogNormal { cv } => write!(f, "lognormal:{cv}"),
        }
    }
}

impl FromStr for ServiceDist {
    type Err = String;

    /// `deterministic`, `exponential`, `lognormal` (cv 1) or `lognormal:CV`.
    fn from_str(s: &str) -> Result<Self, String> {
        let help = "use deterministic, exponential, lognormal or lognormal:CV";
        match s.trim() {
            "deterministic" => Ok(Self::Deterministic),
            "exponential" => Ok(Self::Exponential),
            "lognormal" => Ok(Self::LogNormal { cv: 1.0 }),
            other => {
                let cv = other
                    .strip_prefix("lognormal:")
                    .ok_or_else(|| format!("unknown service distribution `{other}`; {help}"))?;
                match cv.parse::<f64>() {
                    Ok(cv) if cv.is_finite() && cv > 0.0 => Ok(Self::LogNormal { cv }),
                    _ => Err(format!("lognormal coefficient of variation `{cv}` must be > 0")),
                }
            }
        }
    }
}

/// How input requests arrive at the planner at the rate the pattern gives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arrivals {
    /// A Poisson process (exponential gaps) at the pattern's rate.
    #[default]
    Poisson,
    /// Evenly paced, as a runtime source paced by the pattern: record `n` at `due_time(n)`.
    Paced,
}

/// Everything about a simulation except the pipeline, the input pattern and the deployment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SimConfig {
    /// Executor slots per worker (the paper: 10).
    pub slots: u32,
    /// The simulated machines' true costs: α per local and β per remote chained request (µs of
    /// the sending executor's CPU), γ per distinct remote destination per second (µs/s of the
    /// worker's CPU), and W, the worker's CPU capacity (µs of work per second). The policies
    /// never read these: they see what the statistics show (and the estimator learns).
    pub costs: Coefficients,
    /// Network delay of a chained request that stays on its worker (µs).
    pub local_delay_us: f64,
    /// Network delay of a request between two nodes: planner to worker or worker to worker (µs).
    pub remote_delay_us: f64,
    /// Bytes per µs a worker sends migration data at (1,250 = 10 Gbit/s).
    pub bandwidth_bytes_per_us: f64,
    /// Fraction of W̄ the planner loads a worker to when it plans (`PlanConfig::headroom`;
    /// the reference implementation's 0.9).
    pub plan_headroom: f64,
    /// Workers that exist (the active ones are a prefix of them).
    pub max_workers: u32,
    /// How execution times are drawn around each operator's mean.
    pub service: ServiceDist,
    /// Mean execution time (µs) of operators whose spec gives no `service_time_us`.
    pub default_exec_us: f64,
    /// Extra execution time (µs) of every execution of a stateful operator, for state read
    /// from a remote state server instead of the worker's own (CLASP §2.4: 400 → 1,400 µs).
    /// Charged as execution time, as the paper's capacity model counts execution latency.
    pub remote_state_us: f64,
    /// Ordered stateful operators run one execution at a time per worker, as in the runtime.
    pub ordered_one_at_a_time: bool,
    /// Key groups per stateful operator.
    pub key_groups: u32,
    /// Keys held by each stateful operator (spread evenly over its key groups).
    pub state_keys: u64,
    /// Bytes of state per key, for migration transfer times.
    pub bytes_per_key: u64,
    /// Bytes per queued request handed over in a migration.
    pub request_bytes: u64,
    /// The arrival process.
    pub arrivals: Arrivals,
    /// Most input chains in flight; the planner's dispatcher waits beyond it (reference: 10,000).
    pub max_in_flight: u32,
    /// Capacity of the planner's input queue; a source finding it full waits (backpressure).
    pub planner_queue: u32,
    /// Length of a statistics interval: workers report, the controller looks (s).
    pub interval_s: f64,
    /// Window the observed statistics are averaged over (s).
    pub window_s: f64,
    /// A worker is saturated when its mean queue exceeds this ...
    pub saturation_queue: f64,
    /// ... and the mean queue wait exceeds this (ms) in the same interval.
    pub saturation_wait_ms: f64,
    /// Simulated time (s).
    pub duration_s: f64,
    /// Chains completing before this time (s) are not measured; rounded up to a whole number
    /// of intervals, so that the measured totals are whole intervals' reports.
    pub warmup_s: f64,
    /// Every random draw derives from it.
    pub seed: u64,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            slots: 10,
            costs: Coefficients::PAPER,
            local_delay_us: 5.0,
            remote_delay_us: 100.0,
            bandwidth_bytes_per_us: 1250.0,
            plan_headroom: 0.9,
            max_workers: 10,
            service: ServiceDist::Exponential,
            default_exec_us: 400.0,
            remote_state_us: 0.0,
            ordered_one_at_a_time: true,
            key_groups: 1024,
            state_keys: 40_000,
            bytes_per_key: 64,
            request_bytes: 128,
            arrivals: Arrivals::Poisson,
            max_in_flight: 10_000,
            planner_queue: 100_000,
            interval_s: 1.0,
            window_s: 10.0,
            saturation_queue: 500.0,
            saturation_wait_ms: 100.0,
            duration_s: 60.0,
            warmup_s: 5.0,
            seed: 1,
        }
    }
}

impl SimConfig {
    /// Checks every value, naming the first bad field.
    pub fn validate(&self) -> Result<(), SimError> {
        let bad = |m: String| Err(SimError::Config(m));
        if self.slots == 0 {
            return bad("slots must be >= 1".into());
        }
        if self.max_workers == 0 || self.max_workers > 1024 {
            return bad(format!("max_workers = {} must be in 1..=1024", self.max_workers));
        }
        if !(self.plan_headroom > 0.0 && self.plan_headroom <= 1.0) {
            return bad(format!("plan_headroom = {} must be in (0, 1]", self.plan_headroom));
        }
        let c = self.costs;
        if ![c.alpha, c.beta, c.gamma].iter().all(|v| v.is_finite() && *v >= 0.0) {
            return bad(format!("costs {c:?}: alpha, beta and gamma must be finite and >= 0"));
        }
        if !(c.capacity.is_finite() && c.capacity > 0.0) {
            return bad(format!("costs.capacity (W) = {} must be > 0", c.capacity));
        }
        let non_negative = [
            ("local_delay_us", self.local_delay_us),
            ("remote_delay_us", self.remote_delay_us),
            ("default_exec_us", self.default_exec_us),
            ("remote_state_us", self.remote_state_us),
            ("warmup_s", self.warmup_s),
            ("saturation_queue", self.saturation_queue),
            ("saturation_wait_ms", self.saturation_wait_ms),
        ];
        for (name, v) in non_negative {
            if !(v.is_finite() && v >= 0.0) {
                return bad(format!("{name} = {v} must be finite and >= 0"));
            }
        }
        let positive = [
            ("bandwidth_bytes_per_us", self.bandwidth_bytes_per_us),
            ("interval_s", self.interval_s),
            ("window_s", self.window_s),
            ("duration_s", self.duration_s),
        ];
        for (name, v) in positive {
            if !(v.is_finite() && v > 0.0) {
                return bad(format!("{name} = {v} must be > 0"));
            }
        }
        if self.key_groups == 0 || self.key_groups > u32::from(u16::MAX) {
            return bad(format!("key_groups = {} must be in 1..=65535", self.key_groups));
        }
        if self.max_in_flight == 0 || self.planner_queue == 0 {
            return bad("max_in_flight and planner_queue must be >= 1".into());
        }
        if let ServiceDist::LogNormal { cv } = self.service
            && !(cv.is_finite() && cv > 0.0)
        {
            return bad(format!("lognormal cv = {cv} must be > 0"));
        }
        Ok(())
    }

    /// A configuration of one machine type for queueing checks: `slots` executors, CPU enough
    /// for all of them (W = slots · 10⁶ µs/s), no dispatch costs and no network delay, so a
    /// worker is exactly an M/G/c queue.
    pub fn queueing(slots: u32) -> Self {
        Self {
            slots,
            costs: Coefficients {
                alpha: 0.0,
                beta: 0.0,
                gamma: 0.0,
                capacity: f64::from(slots) * 1e6,
            },
            local_delay_us: 0.0,
            remote_delay_us: 0.0,
            max_workers: 1,
            max_in_flight: u32::MAX,
            planner_queue: u32::MAX,
            ordered_one_at_a_time: false,
            ..Self::default()
        }
    }

    /// CPU cores a worker's executors share: W / 10⁶.
    pub fn cores(&self) -> f64 {
        self.costs.capacity / 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distributions_parse_with_clear_errors() {
        assert_eq!("exponential".parse::<ServiceDist>(), Ok(ServiceDist::Exponential));
        assert_eq!("lognormal:0.5".parse::<ServiceDist>(), Ok(ServiceDist::LogNormal { cv: 0.5 }));
        assert!("gamma".parse::<ServiceDist>().unwrap_err().contains("unknown"));
        assert!("lognormal:-1".parse::<ServiceDist>().unwrap_err().contains("> 0"));
        let d = ServiceDist::LogNormal { cv: 0.25 };
        assert_eq!(d.to_string().parse::<ServiceDist>(), Ok(d));
    }

    #[test]
    fn bad_values_name_their_field() {
        assert!(SimConfig::default().validate().is_ok());
        for (cfg, field) in [
            (SimConfig { slots: 0, ..SimConfig::default() }, "slots"),
            (SimConfig { max_workers: 0, ..SimConfig::default() }, "max_workers"),
            (SimConfig { duration_s: 0.0, ..SimConfig::default() }, "duration_s"),
            (SimConfig { remote_delay_us: -1.0, ..SimConfig::default() }, "remote_delay_us"),
            (SimConfig { key_groups: 70_000, ..SimConfig::default() }, "key_groups"),
        ] {
            let e = cfg.validate().unwrap_err().to_string();
            assert!(e.contains(field), "{e}");
        }
    }
}
