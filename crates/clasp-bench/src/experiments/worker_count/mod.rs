//! `worker-count` (paper Fig. 11–13): how close each policy's worker count comes to the
//! observed optimum.
//!
//! For every application, CLASP's placement over exactly `n` workers runs unthrottled for
//! `n = 1..=N`; the largest of those throughputs is the application's maximum ([`Maxima`]),
//! and the input-rate levels are fractions of it. The observed optimal worker count (OOWC)
//! of a level is the fewest workers whose maximum reaches it. Then every policy runs
//! elastically at each source level and, from what it observed there, predicts the worker
//! count of every other level as the target. The error of a transition ([`Transition`]) is
//! |predicted − OOWC(target)|; mean absolute errors ([`Mae`]) are reported per target level,
//! application, gap between the levels and direction, for each policy.

mod runtime;
mod sim;

use crate::engine::runtime::testbed::TestbedSettings;
use crate::engine::sim::{ClusterSettings, PAPER_APPS};
use crate::report::Output;
use crate::settings::values::{Count, DispatchCosts, Fraction, Policies, Time};
use crate::{BenchError, Engine, Experiment, Options};
use clasp_plan::Policy;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use sim::{WorkerCountReport, rows as sim_rows};

/// The paper's findings, under both engines' results.
const PAPER_NOTE: &str = "Paper (Faasm, 10 workers, 10 levels): CLASP's error below 0.25 workers per application and 0.3 per gap; FaaSFlow under-provisions when scaling up and over-provisions when scaling down; Zhang24 uses all workers from 50-60 % of the maximum.";

/// The policies of Fig. 13 (DS2 added).
pub const POLICIES: [Policy; 4] = [Policy::Clasp, Policy::FaasFlow, Policy::Zhang24, Policy::Ds2];

/// An application's maximum throughput on each worker count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Maxima {
    /// Application.
    pub app: String,
    /// Index `n − 1`: throughput of CLASP's placement over exactly `n` workers (chains/s).
    pub throughput: Vec<f64>,
}

impl Maxima {
    /// The largest throughput over all worker counts.
    pub fn max(&self) -> f64 {
        self.throughput.iter().copied().fold(0.0, f64::max)
    }

    /// The throughput on the most workers measured (the end-to-end patterns' maximum rate).
    pub fn on_most_workers(&self) -> f64 {
        self.throughput.last().copied().unwrap_or(0.0)
    }

    /// The observed optimal worker count for `rate`: the fewest workers reaching it (the
    /// best count when none does).
    pub fn optimal(&self, rate: f64) -> u32 {
        let best = self.throughput.iter().copied().fold(0.0, f64::max);
        let n = self.throughput.iter().position(|&t| t >= rate.min(best)).unwrap_or(0);
        n as u32 + 1
    }
}

/// One source → target transition.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Transition {
    /// Application.
    pub app: String,
    /// Policy.
    pub policy: String,
    /// Source level (% of the maximum).
    pub source_pct: u32,
    /// Target level (% of the maximum).
    pub target_pct: u32,
    /// Target rate (chains/s).
    pub target_rate: f64,
    /// Workers the policy predicts.
    pub predicted: u32,
    /// Observed optimal worker count at the target.
    pub optimal: u32,
    /// |predicted − optimal|.
    pub error: u32,
}

/// A mean absolute error over a group of transitions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mae {
    /// Policy.
    pub policy: String,
    /// `all`, `target`, `app`, `gap` or `direction`.
    pub by: String,
    /// The group's key (`40`, `wc`, `up`, ...).
    pub key: String,
    /// Mean absolute worker-count error.
    pub mae: f64,
    /// Transitions in the group.
    pub transitions: usize,
}

/// How a transition is grouped.
type GroupKey = fn(&Transition) -> String;

/// Mean absolute errors per policy: overall, per target level, application, gap, direction.
pub fn errors(transitions: &[Transition], policies: &[Policy]) -> Vec<Mae> {
    let mut out = Vec::new();
    for policy in policies {
        let mine: Vec<&Transition> =
            transitions.iter().filter(|t| t.policy == policy.name()).collect();
        let groups: [(&str, GroupKey); 5] = [
            ("all", |_| "all".to_owned()),
            ("target", |t| format!("{:03}", t.target_pct)),
            ("app", |t| t.app.clone()),
            ("gap", |t| format!("{:03}", t.source_pct.abs_diff(t.target_pct))),
            (
                "direction",
                |t| if t.target_pct > t.source_pct { "up".into() } else { "down".into() },
            ),
        ];
        for (by, key) in groups {
            let mut buckets: BTreeMap<String, Vec<f64>> = BTreeMap::new();
            for t in &mine {
                buckets.entry(key(t)).or_default().push(f64::from(t.error));
            }
            for (k, errs) in buckets {
                out.push(Mae {
                    policy: policy.name().to_owned(),
                    by: by.to_owned(),
                    key: k.trim_start_matches('0').to_owned(),
                    mae: super::mean(&errs),
                    transitions: errs.len(),
                });
            }
        }
    }
    out
}

/// A level as a whole percentage.
pub fn pct(level: f64) -> u32 {
    (level * 100.0).round() as u32
}

/// The mean absolute error of `policy` in group `by`/`key` (NaN when there is none).
pub fn mae_of(mae: &[Mae], policy: &str, by: &str, key: &str) -> f64 {
    mae.iter()
        .find(|m| m.policy == policy && m.by == by && m.key == key)
        .map_or(f64::NAN, |m| m.mae)
}

/// Mean predicted workers at a target level (the mean OOWC with `policy` `None`).
pub fn mean_workers(t: &[Transition], policy: Option<&str>, target: u32) -> f64 {
    let v: Vec<f64> = t
        .iter()
        .filter(|x| x.target_pct == target && policy.is_none_or(|p| x.policy == p))
        .map(|x| f64::from(if policy.is_some() { x.predicted } else { x.optimal }))
        .collect();
    if v.is_empty() { f64::NAN } else { super::mean(&v) }
}

/// `levels` levels: 1/levels, 2/levels, …, 1.
pub fn levels(levels: u32) -> Vec<f64> {
    (1..=levels).map(|l| f64::from(l) / f64::from(levels)).collect()
}

/// `worker-count`'s own settings on the simulator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimSettings {
    /// The policies.
    pub policies: Policies,
    /// Input-rate levels (fractions 1/levels … 1 of the maximum).
    pub levels: Count<2, 20>,
}

impl SimSettings {
    /// Ten levels (quick: four).
    pub fn preset(quick: bool) -> Self {
        Self { policies: Policies(POLICIES.to_vec()), levels: Count(if quick { 4 } else { 10 }) }
    }
}

impl Default for SimSettings {
    fn default() -> Self {
        Self::preset(false)
    }
}

/// `worker-count`'s own settings on the runtime.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeSettings {
    /// Maxima over 1..=`workers` workers.
    pub workers: Count<1, 16>,
    /// Input-rate levels (fractions 1/levels … 1 of the maximum).
    pub levels: Count<2, 10>,
    /// The policies.
    pub policies: Policies,
}

impl RuntimeSettings {
    /// Six workers and six levels (quick: three and three).
    pub fn preset(quick: bool) -> Self {
        let n = if quick { 3 } else { 6 };
        Self { workers: Count(n), levels: Count(n), policies: Policies(POLICIES.to_vec()) }
    }
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        Self::preset(false)
    }
}

/// The simulator's cluster preset. The policies plan workers to their full capacity
/// (`headroom` 1: the observed optimum is measured at saturation, so a planning margin would
/// count as error) and, at paper scale, the maxima are measured over 60 s (less sampling
/// noise where a level falls right at a worker count's maximum).
pub fn sim_cluster(quick: bool) -> ClusterSettings {
    let base = ClusterSettings::preset(quick, if quick { &["wc", "sd"] } else { &PAPER_APPS });
    ClusterSettings {
        headroom: Fraction(1.0),
        run: if quick { base.run } else { Time::from_secs(60.0) },
        ..base
    }
}

/// The runtime's testbed preset: WC and SYN in both regimes (quick: WC, emulated costs only).
pub fn testbed(quick: bool) -> TestbedSettings {
    let base = TestbedSettings::preset(quick, if quick { &["wc"] } else { &["wc", "syn"] });
    TestbedSettings {
        dispatch_cost: if quick { DispatchCosts::Paper } else { DispatchCosts::Both },
        ..base
    }
}

/// Runs `worker-count` on `o.engine`.
pub fn run(o: &Options) -> Result<Output, BenchError> {
    match o.engine {
        Engine::Sim => sim::run(o),
        Engine::Runtime => runtime::run(o),
        Engine::Edge => Err(super::unsupported(Experiment::WorkerCount, o.engine)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optimal_counts_are_the_fewest_workers_that_reach_the_rate() {
        let m = Maxima { app: "x".into(), throughput: vec![100.0, 190.0, 260.0, 250.0] };
        assert_eq!(m.max(), 260.0);
        assert_eq!((m.optimal(50.0), m.optimal(100.0), m.optimal(150.0)), (1, 1, 2));
        assert_eq!((m.optimal(255.0), m.optimal(260.0), m.optimal(999.0)), (3, 3, 3));
    }

    #[test]
    fn errors_group_by_every_key() {
        let t = |s, g, e| Transition {
            app: "wc".into(),
            policy: "clasp".into(),
            source_pct: s,
            target_pct: g,
            target_rate: 0.0,
            predicted: 0,
            optimal: 0,
            error: e,
        };
        let all = [t(10, 20, 1), t(20, 10, 0), t(10, 30, 2)];
        let mae = errors(&all, &[Policy::Clasp]);
        let get =
            |by: &str, key: &str| mae.iter().find(|m| m.by == by && m.key == key).unwrap().mae;
        assert_eq!(get("all", "all"), 1.0);
        assert_eq!(get("direction", "up"), 1.5);
        assert_eq!(get("direction", "down"), 0.0);
        assert_eq!(get("gap", "10"), 0.5);
        assert_eq!(get("target", "30"), 2.0);
    }
}
