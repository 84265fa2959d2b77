//! Paper Fig. 11–13: how close each policy's worker count comes to the observed optimum.
//!
//! For every application, CLASP's placement over exactly `n` workers runs unthrottled for
//! `n = 1..=10`; the largest of those throughputs is the application's maximum, and the input
//! rate levels are fractions of it. The observed optimal worker count (OOWC) of a level is the
//! smallest `n` whose maximum reaches the level. Then, for every policy and every source level,
//! the policy runs elastically at the source rate (its warm-up decision, then its own
//! placement), and from the statistics of that placement — observed, with the estimator's
//! coefficients — it predicts the worker count for every other level as the target. The error
//! of a transition is |predicted − OOWC(target)|; mean absolute errors are reported per target
//! level, per application, per gap between the levels and per direction, for each policy.

use super::{Setup, max_throughput, mean, run_elastic};
use crate::error::SimError;
use crate::plan_config;
use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_plan::{PlanInput, Policy};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// Everything the experiment measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerCountReport {
    /// Per application.
    pub maxima: Vec<Maxima>,
    /// Every transition.
    pub transitions: Vec<Transition>,
    /// Mean absolute errors.
    pub mae: Vec<Mae>,
}

/// Runs the experiment for every application and policy.
pub fn run(
    apps: &[Pipeline],
    setup: &Setup,
    policies: &[Policy],
) -> Result<WorkerCountReport, SimError> {
    let mut report = WorkerCountReport::default();
    for p in apps {
        let maxima = Maxima {
            app: p.name.clone(),
            throughput: (1..=setup.sim.max_workers.min(10))
                .map(|n| max_throughput(p, setup, n))
                .collect::<Result<_, _>>()?,
        };
        for &policy in policies {
            report.transitions.extend(transitions(p, setup, policy, &maxima)?);
        }
        report.maxima.push(maxima);
    }
    report.mae = errors(&report.transitions, policies);
    Ok(report)
}

/// A policy's predictions from every source level to every other level.
fn transitions(
    p: &Pipeline,
    setup: &Setup,
    policy: Policy,
    maxima: &Maxima,
) -> Result<Vec<Transition>, SimError> {
    let rates: Vec<f64> = setup.levels.iter().map(|l| l * maxima.max()).collect();
    let plan = plan_config(&setup.sim, setup.sim.max_workers);
    let mut out = Vec::new();
    for (i, &source) in rates.iter().enumerate() {
        let duration = 2.0 * setup.warmup_s + setup.run_s;
        let warmup = (source * setup.warmup_s).max(100.0) as u64;
        let s = run_elastic(p, setup, policy, RatePattern::constant(source), duration, warmup)?;
        let (Some(current), Some(c)) = (s.placement.as_ref(), s.stats.coefficients) else {
            continue;
        };
        for (j, &target) in rates.iter().enumerate() {
            if i == j {
                continue;
            }
            let input = PlanInput {
                pipeline: p,
                stats: &s.stats,
                target_rate: target,
                coefficients: c,
                config: &plan,
                current: Some(current),
            };
            let Ok(d) = policy.decide(&input) else { continue };
            let optimal = maxima.optimal(target);
            out.push(Transition {
                app: p.name.clone(),
                policy: policy.name().to_owned(),
                source_pct: pct(setup.levels[i]),
                target_pct: pct(setup.levels[j]),
                target_rate: target,
                predicted: d.workers,
                optimal,
                error: d.workers.abs_diff(optimal),
            });
        }
    }
    Ok(out)
}

fn pct(level: f64) -> u32 {
    (level * 100.0).round() as u32
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
                    mae: mean(&errs),
                    transitions: errs.len(),
                });
            }
        }
    }
    out
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
