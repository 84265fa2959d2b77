//! Zhang24 (Zhang et al., HPCC 2024) as re-implemented by the CLASP authors: parallelism from
//! a per-operator scheduling-overhead model, instances placed by a fixed blend of data
//! affinity and load balance.
//!
//! - **Overhead model**: the share of a request's time spent waiting to be scheduled,
//!   r = t_s / (t_s + t_e) (t_s queueing and dispatch, t_e execution), is modelled as
//!   r(p) = b·(1 − e^{−k·p}) in the parallelism p. It is fitted to each operator's newest
//!   observations `[p, r]` by least squares: k on a grid of log-spaced values, b in closed
//!   form for each k and clamped. With too few observations a prior is used.
//! - **Parallelism**: the smallest p with p·c·(1 − r(p))·headroom ≥ the operator's projected
//!   rate, c = 10⁶ / t_e requests per second per instance, at most the slots of the largest
//!   cluster allowed. The overhead term makes it ask for more instances the more it runs.
//! - **Worker count**: the slots those instances need, ⌈Σ_o P_o / slots⌉, up to the maximum;
//!   because of the overhead term it reaches the maximum well before the cluster is busy.
//! - **Placement**: operators in topological order, each instance to the worker with the best
//!   `affinity_weight`·affinity + `balance_weight`·balance, workers whose slots are all taken
//!   last. Affinity of worker h for the next instance of o is the share of o's input produced
//!   on h (producers' instances weighted by their observed chained-call rate into o) minus the
//!   share of o's instances already on h: instances follow their input, but once a worker has
//!   its share the balance term, the free fraction of its slots, moves them elsewhere. Every
//!   worker given is used as soon as there are instances enough, so an operator's successors
//!   are scattered and each worker sends to many others; neither term prices that.

use super::{Observed, Slice, build_placement, clamp_workers, finite_non_negative};
use clasp_core::placement::Placement;
use clasp_core::stats::ObservedStats;
use clasp_core::{OperatorId, Pipeline, WorkerId};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Zhang24's settings; the defaults are the reference implementation's.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Executor slots per worker (default 10).
    pub slots: u32,
    /// Most workers the policy may use (default 10).
    pub max_workers: u32,
    /// Smallest k of the fitting grid (default 0.01).
    pub k_min: f64,
    /// Largest k of the fitting grid (default 5).
    pub k_max: f64,
    /// Log-spaced k values tried (default 40).
    pub k_steps: u32,
    /// Upper clamp of the fitted b (default 0.95).
    pub b_max: f64,
    /// Fewest observations to fit; below, the prior is used (default 3).
    pub min_samples: usize,
    /// Newest observations used per operator (default 64).
    pub max_samples: usize,
    /// Prior k (default 0.155).
    pub prior_k: f64,
    /// Prior b (default 0.335).
    pub prior_b: f64,
    /// Fraction of the modelled rate an operator is planned to use (default 0.9).
    pub headroom: f64,
    /// Weight of data affinity in the placement score (default 0.5).
    pub affinity_weight: f64,
    /// Weight of load balance in the placement score (default 0.5).
    pub balance_weight: f64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            slots: 10,
            max_workers: 10,
            k_min: 0.01,
            k_max: 5.0,
            k_steps: 40,
            b_max: 0.95,
            min_samples: 3,
            max_samples: 64,
            prior_k: 0.155,
            prior_b: 0.335,
            headroom: 0.9,
            affinity_weight: 0.5,
            balance_weight: 0.5,
        }
    }
}

/// r(p) = b·(1 − e^{−k·p}): the overhead ratio expected at parallelism p.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct OverheadModel {
    /// Growth rate of the overhead with parallelism.
    pub k: f64,
    /// Limit of the overhead ratio at high parallelism.
    pub b: f64,
}

impl OverheadModel {
    /// The modelled overhead ratio at parallelism `p`.
    pub fn ratio(&self, p: f64) -> f64 {
        self.b * (1.0 - (-self.k * p).exp())
    }
}

/// The k values tried: `k_steps` log-spaced values from `k_min` to `k_max`, both included.
pub fn k_grid(cfg: &Config) -> Vec<f64> {
    let steps = cfg.k_steps.max(1);
    if steps == 1 {
        return vec![cfg.k_min];
    }
    let ratio = cfg.k_max / cfg.k_min;
    (0..steps).map(|i| cfg.k_min * ratio.powf(f64::from(i) / f64::from(steps - 1))).collect()
}

/// Fits r(p) = b(1 − e^{−kp}) to the newest `max_samples` observations `[p, r]` (non-finite
/// ones ignored): for each k of the grid, b = Σxr / Σx² with x = 1 − e^{−kp}, clamped to
/// `[0, b_max]`; the (k, b) with the least squared error wins, the smaller k among equals.
/// Fewer than `min_samples` usable observations give the prior.
pub fn fit(samples: &[[f64; 2]], cfg: &Config) -> OverheadModel {
    let newest = &samples[samples.len().saturating_sub(cfg.max_samples)..];
    let usable: Vec<[f64; 2]> =
        newest.iter().copied().filter(|[p, r]| p.is_finite() && r.is_finite()).collect();
    if usable.len() < cfg.min_samples.max(1) {
        return OverheadModel { k: cfg.prior_k, b: cfg.prior_b };
    }
    let mut best: Option<(f64, OverheadModel)> = None;
    for k in k_grid(cfg) {
        let xs: Vec<f64> = usable.iter().map(|[p, _]| 1.0 - (-k * p).exp()).collect();
        let sxx: f64 = xs.iter().map(|x| x * x).sum();
        let sxr: f64 = xs.iter().zip(&usable).map(|(x, [_, r])| x * r).sum();
        let b = if sxx > 0.0 { (sxr / sxx).clamp(0.0, cfg.b_max) } else { 0.0 };
        let sse: f64 = xs.iter().zip(&usable).map(|(x, [_, r])| (r - b * x).powi(2)).sum();
        if best.is_none_or(|(e, _)| sse < e) {
            best = Some((sse, OverheadModel { k, b }));
        }
    }
    best.map_or(OverheadModel { k: cfg.prior_k, b: cfg.prior_b }, |(_, m)| m)
}

/// Most instances of one operator: every slot of the largest cluster the policy may use.
/// More could not run at once, and the cap keeps an unreachable target rate (an unthrottled
/// source) from asking for billions.
pub fn max_instances(cfg: &Config) -> u32 {
    cfg.max_workers.max(1).saturating_mul(cfg.slots.max(1))
}

/// The smallest p ≥ 1 with p·c·(1 − r(p))·headroom ≥ `rate`, c = 10⁶ / `exec_us`, at most
/// [`max_instances`].
///
/// Since 1 − r(p) ≥ 1 − b, p = ⌈rate / (c·(1 − b)·headroom)⌉ always qualifies, which bounds
/// the search; the product is not monotone in p for b near 1, hence a scan from 1.
pub fn instances_for(rate: f64, exec_us: f64, model: &OverheadModel, cfg: &Config) -> u32 {
    let (rate, exec_us) = (finite_non_negative(rate), finite_non_negative(exec_us));
    let headroom = finite_non_negative(cfg.headroom);
    if rate == 0.0 || exec_us == 0.0 || headroom == 0.0 {
        return 1;
    }
    let c = 1e6 / exec_us;
    let floor = (1.0 - model.b).max(1e-6);
    let cap = f64::from(max_instances(cfg));
    let bound = (rate / (c * floor * headroom)).ceil().clamp(1.0, cap) as u32;
    (1..bound)
        .find(|&p| {
            let p = f64::from(p);
            p * c * (1.0 - model.ratio(p)) * headroom >= rate
        })
        .unwrap_or(bound)
}

/// Every operator's parallelism for `target_rate`, indexed by operator: its fitted model
/// and its projected processed rate s·N_o.
pub fn parallelism(
    p: &Pipeline,
    stats: &ObservedStats,
    target_rate: f64,
    cfg: &Config,
) -> Vec<u32> {
    let observed = Observed::new(p, stats, target_rate);
    p.operators
        .iter()
        .map(|op| {
            let samples = stats.operator(p, op.id).map_or(&[][..], |o| &o.overhead_samples[..]);
            let model = fit(samples, cfg);
            let rate = observed.scale * observed.processed[op.id.index()];
            instances_for(rate, observed.exec_us[op.id.index()], &model, cfg)
        })
        .collect()
}

/// ⌈Σ_o P_o / slots⌉ within `1..=max_workers`.
pub fn worker_count(p: &Pipeline, stats: &ObservedStats, target_rate: f64, cfg: &Config) -> u32 {
    let total: f64 = parallelism(p, stats, target_rate, cfg).iter().map(|&x| f64::from(x)).sum();
    clamp_workers(total / f64::from(cfg.slots.max(1)), cfg.max_workers)
}

/// Zhang24's placement of its instances on `workers` workers (module docs).
pub fn place(
    p: &Pipeline,
    stats: &ObservedStats,
    target_rate: f64,
    workers: u32,
    cfg: &Config,
) -> Placement {
    let workers = workers.max(1) as usize;
    let instances = parallelism(p, stats, target_rate, cfg);
    let mut count = vec![vec![0u32; workers]; p.operators.len()];
    let mut load = vec![0u32; workers];
    for &o in p.topological_order() {
        let upstream = upstream_share(p, stats, o, &count, &instances);
        let total = f64::from(instances[o.index()]);
        for _ in 0..instances[o.index()] {
            let score = |h: usize| {
                let affinity = upstream[h] - f64::from(count[o.index()][h]) / total;
                let balance = 1.0 - f64::from(load[h]) / f64::from(cfg.slots.max(1));
                cfg.affinity_weight * affinity + cfg.balance_weight * balance
            };
            let h = best_host(workers, &load, cfg.slots, score);
            count[o.index()][h] += 1;
            load[h] += 1;
        }
    }
    let slices = count
        .iter()
        .map(|per_host| {
            per_host
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(h, n)| Slice {
                    worker: WorkerId::from(h),
                    weight: f64::from(*n),
                    instances: *n,
                })
                .collect()
        })
        .collect();
    build_placement(p, &Observed::new(p, stats, target_rate), workers as u32, slices)
}

/// Share of `o`'s input produced on each worker: each producer's instances there, as a
/// share of its instances, weighted by its observed chained-call rate into `o` (equally when
/// none was observed). All zero for an operator fed only by sources.
fn upstream_share(
    p: &Pipeline,
    stats: &ObservedStats,
    o: OperatorId,
    count: &[Vec<u32>],
    instances: &[u32],
) -> Vec<f64> {
    let workers = count.first().map_or(0, Vec::len);
    let producers: BTreeSet<OperatorId> = p.predecessors(o).collect();
    let rates: Vec<f64> =
        producers.iter().map(|&q| finite_non_negative(stats.edge_rate(p, q, o))).collect();
    let sum: f64 = rates.iter().sum();
    let mut share = vec![0.0; workers];
    for (q, rate) in producers.iter().zip(&rates) {
        let weight = if sum > 0.0 { rate / sum } else { 1.0 / producers.len() as f64 };
        let total = f64::from(instances[q.index()].max(1));
        for (h, n) in count[q.index()].iter().enumerate() {
            share[h] += weight * f64::from(*n) / total;
        }
    }
    share
}

/// The best-scoring worker with a free slot, or the best of all when every slot is taken;
/// the lowest id among equal scores.
fn best_host(workers: usize, load: &[u32], slots: u32, score: impl Fn(usize) -> f64) -> usize {
    let any_free = load.iter().any(|l| *l < slots);
    let mut best: Option<(usize, f64)> = None;
    for h in (0..workers).filter(|h| !any_free || load[*h] < slots) {
        let s = score(h);
        if best.is_none_or(|(_, b)| s > b) {
            best = Some((h, s));
        }
    }
    best.map_or(0, |(h, _)| h)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::baselines::ds2;
    use crate::testing::pipeline;
    use clasp_core::stats::{EdgeStats, OperatorStats};

    const CHAIN: &str = r#"
[[source]]
name = "in"
[[operator]]
name = "a"
kind = "map"
[[operator]]
name = "b"
kind = "reduce"
stateful = true
key = "k"
[[stream]]
from = "in"
to = "a"
[[stream]]
from = "a"
to = "b"
"#;

    /// a and b each process 1000/s at Λ = 1000/s, 1 ms per request, with the given samples.
    fn chain_stats(samples: Vec<[f64; 2]>) -> ObservedStats {
        let op = |name: &str| OperatorStats {
            name: name.into(),
            processed_rate: 1000.0,
            exec_time_us: 1000.0,
            overhead_samples: samples.clone(),
            ..OperatorStats::default()
        };
        ObservedStats {
            throughput: 1000.0,
            input_rate: 1000.0,
            operators: vec![op("a"), op("b")],
            edges: vec![EdgeStats {
                from: "a".into(),
                to: "b".into(),
                rate: 1000.0,
                ..EdgeStats::default()
            }],
            ..ObservedStats::default()
        }
    }

    fn curve(k: f64, b: f64, ps: impl Iterator<Item = u32>) -> Vec<[f64; 2]> {
        let m = OverheadModel { k, b };
        ps.map(|p| [f64::from(p), m.ratio(f64::from(p))]).collect()
    }

    #[test]
    fn the_grid_is_log_spaced_between_the_bounds() {
        let g = k_grid(&Config::default());
        assert_eq!(g.len(), 40);
        assert!((g[0] - 0.01).abs() < 1e-15 && (g[39] - 5.0).abs() < 1e-12);
        let step = g[1] / g[0];
        assert!(g.windows(2).all(|w| (w[1] / w[0] - step).abs() < 1e-9));
        assert!((step - 500f64.powf(1.0 / 39.0)).abs() < 1e-12);
    }

    #[test]
    fn fit_recovers_a_curve_on_the_grid() {
        let cfg = Config::default();
        let k = k_grid(&cfg)[25];
        let m = fit(&curve(k, 0.42, 1..=12), &cfg);
        assert!((m.k - k).abs() < 1e-12 && (m.b - 0.42).abs() < 1e-9, "{m:?}");
    }

    #[test]
    fn fit_uses_the_prior_below_three_samples() {
        let cfg = Config::default();
        let prior = OverheadModel { k: 0.155, b: 0.335 };
        assert_eq!(fit(&[], &cfg), prior);
        assert_eq!(fit(&curve(1.0, 0.5, 1..=2), &cfg), prior);
        assert_eq!(fit(&[[1.0, f64::NAN], [2.0, 0.1], [f64::INFINITY, 0.2]], &cfg), prior);
        assert_ne!(fit(&curve(1.0, 0.5, 1..=3), &cfg), prior);
    }

    #[test]
    fn fit_uses_only_the_newest_samples_and_clamps_b() {
        let cfg = Config::default();
        let k = k_grid(&cfg)[10];
        let mut samples = vec![[3.0, 0.9]; 30];
        samples.extend(curve(k, 0.2, (1..=64).map(|i| 1 + i % 16)));
        let m = fit(&samples, &cfg);
        assert!((m.k - k).abs() < 1e-12 && (m.b - 0.2).abs() < 1e-9, "{m:?}");
        // Overhead ratios near 1 would need b > 0.95.
        let m = fit(&[[1.0, 0.99], [5.0, 0.99], [20.0, 0.99]], &cfg);
        assert_eq!(m.b, 0.95);
    }

    #[test]
    fn parallelism_matches_closed_forms() {
        let cfg = Config::default();
        // No overhead (b = 0): p = ⌈rate / (0.9·c)⌉ with c = 1000/s.
        let none = OverheadModel { k: 1.0, b: 0.0 };
        assert_eq!(instances_for(9000.0, 1000.0, &none, &cfg), 10);
        assert_eq!(instances_for(9001.0, 1000.0, &none, &cfg), 11);
        assert_eq!(instances_for(0.0, 1000.0, &none, &cfg), 1);
        assert_eq!(instances_for(5e6, 0.0, &none, &cfg), 1);
        // Prior model at 2000/s: p(1 − r(p)) must reach 2000 / 900 = 2.22.
        // p = 2: r = 0.335(1 − e^−0.31) = 0.0893, 2 × 0.9107 = 1.82; p = 3: r = 0.1246, 2.63.
        let prior = OverheadModel { k: 0.155, b: 0.335 };
        assert_eq!(instances_for(2000.0, 1000.0, &prior, &cfg), 3);
        // At high parallelism the rate per instance tends to c(1 − b)·0.9 = 598.5/s.
        let big = Config { max_workers: 1000, ..Config::default() };
        let p = instances_for(1e6, 1000.0, &prior, &big);
        assert_eq!(p, (1e6_f64 / 598.5).ceil() as u32);
        // An unreachable rate asks for every slot of the largest cluster, no more.
        assert_eq!(instances_for(2e7, 1000.0, &prior, &cfg), 100);
    }

    #[test]
    fn asks_for_every_worker_at_half_load() {
        let p = pipeline(CHAIN);
        // Observed overhead ratios up to 0.5, as queueing grows with parallelism.
        let stats = chain_stats(curve(k_grid(&Config::default())[30], 0.5, 1..=10));
        // 10 workers × 10 slots at 1 ms per request and 2 operators: 50,000/s of execution.
        // At 25,000/s DS2 needs 25 instances per operator; Zhang24, with r(p) ≈ 0.5 beyond a
        // few instances, p·1000·0.5·0.9 ≥ 25,000 → 56 each, 112 slots, capped at 10 workers.
        let (zhang, ds2_cfg) = (Config::default(), ds2::Config::default());
        assert_eq!(ds2::worker_count(&p, &stats, 25_000.0, None, &ds2_cfg), 5);
        assert_eq!(worker_count(&p, &stats, 25_000.0, &zhang), 10);
        let placement = place(&p, &stats, 25_000.0, 10, &zhang);
        assert!(placement.check(&p).is_ok());
        for w in 0..10 {
            for op in &placement.operators {
                assert!(op.shares.iter().any(|s| s.worker.0 == w), "worker {w} misses an operator");
            }
        }
        // At a tenth of the load (p·450 ≥ 5000 → 12 each, 24 slots) it still asks for three
        // times DS2's single worker.
        assert_eq!(ds2::worker_count(&p, &stats, 5_000.0, None, &ds2_cfg), 1);
        assert_eq!(worker_count(&p, &stats, 5_000.0, &zhang), 3);
    }

    #[test]
    fn instances_follow_their_input_then_spread() {
        let p = pipeline(CHAIN);
        let stats = chain_stats(Vec::new());
        let cfg = Config::default();
        // 1000/s with the prior: p(1 − r(p)) ≥ 1/0.9 → 2 instances each.
        assert_eq!(parallelism(&p, &stats, 1000.0, &cfg), [2, 2]);
        let placement = place(&p, &stats, 1000.0, 4, &cfg);
        let on = |o: usize| -> Vec<u32> {
            placement.operators[o].shares.iter().map(|s| s.worker.0).collect()
        };
        // a spreads by balance; b joins a's instances rather than the empty workers 2 and 3.
        assert_eq!(on(0), [0, 1]);
        assert_eq!(on(1), [0, 1]);
        // With six times the load, b's instances beyond a's footprint go to empty workers.
        let placement = place(&p, &stats, 6000.0, 4, &cfg);
        let used: BTreeSet<u32> =
            placement.operators[1].shares.iter().map(|s| s.worker.0).collect();
        assert_eq!(used.len(), 4);
    }

    #[test]
    fn full_workers_come_last() {
        let p = pipeline(CHAIN);
        let stats = chain_stats(Vec::new());
        let cfg = Config { slots: 2, ..Config::default() };
        // 9000/s needs p(1 − r(p)) ≥ 10: 15 instances each, 30 on 2 workers of 2 slots. Once
        // both are full, balance keeps overfilling them evenly.
        let placement = place(&p, &stats, 9000.0, 2, &cfg);
        let per_worker: Vec<u32> = (0..2)
            .map(|w| {
                placement
                    .operators
                    .iter()
                    .flat_map(|o| &o.shares)
                    .filter(|s| s.worker.0 == w)
                    .map(|s| s.instances)
                    .sum()
            })
            .collect();
        let total: u32 = parallelism(&p, &stats, 9000.0, &cfg).iter().sum();
        assert_eq!(per_worker.iter().sum::<u32>(), total);
        assert!(per_worker[0].abs_diff(per_worker[1]) <= 1, "{per_worker:?}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 300, rng_seed: proptest::test_runner::RngSeed::Fixed(5), ..proptest::prelude::ProptestConfig::default() })]

        /// The parallelism is the smallest qualifying p, checked by scanning every smaller p.
        #[test]
        fn parallelism_is_the_smallest_sufficient(
            rate in 0.0f64..200_000.0, exec in 1.0f64..5000.0, k in 0.01f64..5.0, b in 0.0f64..0.95,
        ) {
            let cfg = Config::default();
            let model = OverheadModel { k, b };
            let p = instances_for(rate, exec, &model, &cfg);
            let enough = |q: u32| {
                let q = f64::from(q);
                q * (1e6 / exec) * (1.0 - b * (1.0 - (-k * q).exp())) * 0.9 >= rate
            };
            proptest::prop_assert!(p >= 1 && p <= max_instances(&cfg));
            proptest::prop_assert!(enough(p) || p == max_instances(&cfg));
            proptest::prop_assert!((1..p).all(|q| !enough(q)));
        }
    }
}
