//! `end-to-end` (paper Fig. 14): every policy (with the -SP ablations) driving the cluster
//! through a burst and a gradual input: throughput, median and p95 latency, workers used,
//! and CLASP's ratios against each baseline.

pub mod attainable;
pub mod convergence;
pub mod criterion;
pub mod floor;
mod runtime;
mod sim;

use crate::engine::sim::{ClusterSettings, PAPER_APPS};
use crate::report::Output;
use crate::settings::values::{DispatchCosts, Fraction, Policies, Positive, Time, TimeOrZero};
use crate::{BenchError, Engine, Experiment, Options};
use clasp_plan::Policy;
use serde::{Deserialize, Serialize};

pub use sim::{EndToEndRow, Tuning, rows as sim_rows};

/// The policies of Fig. 14 (DS2 and the Flink autoscaler added).
pub const POLICIES: [Policy; 7] = [
    Policy::Clasp,
    Policy::FaasFlow,
    Policy::FaasFlowSp,
    Policy::Zhang24,
    Policy::Zhang24Sp,
    Policy::Ds2,
    Policy::Flink,
];

/// The paper's figures, under both engines' results.
const PAPER_NOTE: &str = "Paper (Fig. 14): CLASP up to x2.5 the throughput of FaaSFlow and x3.3 of Zhang24; median latency up to 75 % (FaaSFlow) and 76 % (Zhang24) lower; Zhang24-SP matches CLASP's throughput with more workers.";

/// `end-to-end`'s own settings on the simulator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimSettings {
    /// The policies; the first is the reference of the ratios.
    pub policies: Policies,
    /// Time scale of the patterns' stages (1: the paper's 5–10 s).
    pub pattern_scale: Positive,
    /// The time every policy plans to drain a backlog within (0: size for the rate alone).
    pub catch_up: TimeOrZero,
    /// How long a scale-in must stay decided before it is carried out (0: at once).
    pub scale_in_delay: TimeOrZero,
    /// CLASP's latency objective (`--latency-slo`); unset: the rate alone.
    pub latency_slo: Option<Time>,
    /// When every policy's first decision comes.
    pub first_decision: FirstDecision,
}

/// When the first decision of a simulated run comes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FirstDecision {
    /// As on the runtime: after the triggers' 2 s, or as soon as an interval finds the cluster
    /// behind.
    #[default]
    AtOnce,
    /// The paper's setup: after 10,000 input requests (or the pattern's first 5 s of input if
    /// fewer: the simulated applications are slower than the paper's).
    Paper,
}

impl SimSettings {
    /// Every policy; the paper's stages (quick: a quarter as long); the triggers' catch-up.
    pub fn preset(quick: bool) -> Self {
        let tuning = Tuning::default();
        Self {
            policies: Policies(POLICIES.to_vec()),
            pattern_scale: Positive(if quick { 0.25 } else { 1.0 }),
            catch_up: TimeOrZero::from_secs(tuning.catch_up_s),
            scale_in_delay: TimeOrZero::from_secs(tuning.scale_in_delay_s),
            latency_slo: None,
            first_decision: tuning.first_decision,
        }
    }
}

impl Default for SimSettings {
    fn default() -> Self {
        Self::preset(false)
    }
}

/// Which pattern the runtime's run drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PatternName {
    /// The paper's burst.
    Burst,
    /// The paper's gradual rise and fall.
    Gradual,
}

impl PatternName {
    /// `burst` or `gradual`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Burst => "burst",
            Self::Gradual => "gradual",
        }
    }
}

/// `end-to-end`'s settings on the runtime.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeSettings {
    /// Dispatch-cost regimes.
    pub dispatch_cost: DispatchCosts,
    /// The input pattern.
    pub pattern: PatternName,
    /// The pattern's maximum rate (requests/s of 16 lines).
    pub rate: Positive,
    /// Time scale of the pattern's stages (1: the paper's 5–10 s).
    pub pattern_scale: Positive,
    /// The policies; CLASP's ratios are against each of the others.
    pub policies: Policies,
    /// Sleeping service time of `count` per word.
    pub count_time: Time,
    /// CLASP's latency objective (`--latency-slo`); unset: the rate alone.
    pub latency_slo: Option<Time>,
    /// Fraction of W̄ every policy plans a worker to (the planner's headroom).
    pub headroom: Fraction,
}

impl RuntimeSettings {
    /// The burst up to 800 requests/s under every policy (quick: stages a quarter as long,
    /// CLASP, FaaSFlow and Zhang24).
    pub fn preset(quick: bool) -> Self {
        let policies = if quick {
            vec![Policy::Clasp, Policy::FaasFlow, Policy::Zhang24]
        } else {
            POLICIES.to_vec()
        };
        Self {
            dispatch_cost: DispatchCosts::Both,
            pattern: PatternName::Burst,
            rate: Positive(800.0),
            pattern_scale: Positive(if quick { 0.25 } else { 1.0 }),
            policies: Policies(policies),
            count_time: Time::from_micros(50.0),
            latency_slo: None,
            headroom: Fraction(clasp_plan::PlanConfig::default().headroom),
        }
    }
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        Self::preset(false)
    }
}

/// The simulator's cluster preset: the paper's applications (quick: WC and SD).
pub fn sim_cluster(quick: bool) -> ClusterSettings {
    ClusterSettings::preset(quick, if quick { &["wc", "sd"] } else { &PAPER_APPS })
}

/// Runs `end-to-end` on `o.engine`.
pub fn run(o: &Options) -> Result<Output, BenchError> {
    match o.engine {
        Engine::Sim => sim::run(o),
        Engine::Runtime => runtime::run(o),
        Engine::Edge => Err(super::unsupported(Experiment::EndToEnd, o.engine)),
    }
}
