//! Load derivation (§4.3.1, Eq. 5–7): observed per-operator rates and chained-request rates,
//! projected from the input rate Λ they were observed at to the target input rate λ_p. Λ is the
//! input requests the entry operators executed in the window ([`entry_rate`]); the completed
//! chains per second where those cannot be told apart.

use crate::error::PlanError;
use clasp_core::stats::ObservedStats;
use clasp_core::{OperatorId, Pipeline};
use std::collections::HashMap;

/// A chained-request stream out of an operator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Edge {
    /// The successor o_s.
    pub to: OperatorId,
    /// Ẽ_{o→o_s}: chained requests per second at the target rate (Eq. 6).
    pub rate: f64,
}

/// What the planner knows about one operator from the observation, before scaling.
#[derive(Clone, Debug, PartialEq)]
struct Observed {
    /// N_o (requests/s at Λ).
    processed: f64,
    /// Records per second those requests carried (0 where not measured).
    records: f64,
    /// τ̄_o (µs).
    exec_us: f64,
    /// Variance / mean² of τ_o.
    exec_scv: f64,
    /// E_{o→o_s} at Λ, in output-port order, operator successors only.
    edges: Vec<Edge>,
    /// Records per second along each of `edges` (0 where not measured).
    edge_records: Vec<f64>,
    /// Instances configured while observed.
    instances: u32,
}

/// The pipeline's load at a target rate.
#[derive(Clone, Debug, PartialEq)]
pub struct Projection {
    /// Λ: the input rate the statistics were observed at (input requests/s the entry
    /// operators executed; the throughput where those cannot be told apart).
    pub observed_rate: f64,
    /// λ_p: the rate projected to.
    pub target_rate: f64,
    /// s = λ_p / Λ (Eq. 5).
    pub scale: f64,
    /// Σ_o P_o^cur: instances configured while observed (the P_tot^cur of Eq. 10).
    pub current_instances: u32,
    /// Ñ_o = s·N_o, indexed by operator (Eq. 6).
    pub rate: Vec<f64>,
    /// τ̄_o (µs), left unscaled.
    pub exec_us: Vec<f64>,
    /// Variance / mean² of τ_o: as measured, 1 (exponential) where it was not.
    pub exec_scv: Vec<f64>,
    /// Variance / mean² of the times between input requests: as measured, 1 (Poisson) where
    /// it was not.
    pub arrival_scv: f64,
    /// D̃_o = Ñ_o·τ̄_o (µs/s, Eq. 7).
    pub demand: Vec<f64>,
    /// Ẽ out of each operator (Eq. 6).
    pub edges: Vec<Vec<Edge>>,
    observed: Vec<Observed>,
}

/// A measured variance / mean², or 1 (exponential times, Poisson arrivals) where there is none.
fn scv_or_one(measured: Option<f64>) -> f64 {
    measured.filter(|v| v.is_finite()).map_or(1.0, |v| v.max(0.0))
}

impl Projection {
    /// Projects `stats` of `p` to `target_rate`. Operators missing from the statistics have
    /// rate 0 and execution time `default_exec_us`; missing edges carry no requests.
    /// `fallback_instances` stands in for P_tot^cur when the statistics record none.
    pub fn new(
        p: &Pipeline,
        stats: &ObservedStats,
        target_rate: f64,
        default_exec_us: f64,
        fallback_instances: u32,
    ) -> Result<Self, PlanError> {
        if !(target_rate.is_finite() && target_rate > 0.0) {
            return Err(PlanError::InvalidRate(target_rate));
        }
        if !(stats.throughput.is_finite() && stats.throughput > 0.0) {
            return Err(PlanError::NoThroughput(stats.throughput));
        }
        let mut observed = observe(p, stats, default_exec_us);
        let observed_rate = entry_rate(p, &observed).unwrap_or(stats.throughput);
        settle(p, &mut observed);
        let recorded: u32 = observed.iter().map(|o| o.instances).sum();
        let current = if recorded > 0 { recorded } else { fallback_instances };
        let mut proj = Self {
            observed_rate,
            target_rate,
            scale: 0.0,
            current_instances: current,
            rate: Vec::new(),
            exec_us: observed.iter().map(|o| o.exec_us).collect(),
            exec_scv: observed.iter().map(|o| o.exec_scv).collect(),
            arrival_scv: scv_or_one(stats.arrival_scv),
            demand: Vec::new(),
            edges: Vec::new(),
            observed,
        };
        proj.rescale(target_rate);
        Ok(proj)
    }

    /// The same observation projected to another rate (`rate >= 0`).
    pub fn at_rate(&self, rate: f64) -> Self {
        let mut p = self.clone();
        p.rescale(rate);
        p
    }

    fn rescale(&mut self, rate: f64) {
        let s = rate / self.observed_rate;
        self.target_rate = rate;
        self.scale = s;
        self.rate = self.observed.iter().map(|o| s * o.processed).collect();
        self.demand = self.observed.iter().map(|o| s * o.processed * o.exec_us).collect();
        self.edges = self
            .observed
            .iter()
            .map(|o| o.edges.iter().map(|e| Edge { to: e.to, rate: s * e.rate }).collect())
            .collect();
    }

    /// Number of operators.
    pub fn len(&self) -> usize {
        self.observed.len()
    }

    /// Whether the pipeline has no operators.
    pub fn is_empty(&self) -> bool {
        self.observed.is_empty()
    }

    /// N_o·τ̄_o as observed: the weights of Eq. 11 and Eq. 12.
    pub fn observed_demand(&self) -> Vec<f64> {
        self.observed.iter().map(|o| o.processed * o.exec_us).collect()
    }

    /// The load of the whole pipeline on one worker, per request/s of input: everything local,
    /// so Σ_o D̃_o + α·Σ Ẽ (Eq. 8 with every σ = 1 and no remote destination), divided by λ_p.
    pub fn single_worker_cost_per_rate(&self, alpha: f64) -> f64 {
        let per = |o: &Observed| o.processed * o.exec_us + alpha * edge_sum(&o.edges);
        self.observed.iter().map(per).sum::<f64>() / self.observed_rate
    }
}

/// The warm-up observation a spec implies, for planning without a run (`clasp plan` without
/// `--stats`): the spec's rates ([`ObservedStats::from_spec`]) scaled to the rate at which one
/// worker saturates with the whole pipeline local on it (budget / (Σ N_o τ̄_o + α Σ E) per
/// request/s), running Eq. 12's initial allocation of `slots_per_worker` instances. This is
/// what the paper's warm-up phase observes, and it makes Eq. 10's instance total meaningful
/// (P_max instances at the single-worker rate, scaled by s from there).
pub fn spec_observation(
    p: &Pipeline,
    target_rate: f64,
    config: &crate::config::PlanConfig,
    coefficients: &clasp_core::stats::Coefficients,
) -> ObservedStats {
    let mut stats = ObservedStats::from_spec(p, target_rate, config.default_exec_us);
    let demand: Vec<f64> =
        stats.operators.iter().map(|o| o.processed_rate * o.exec_time_us).collect();
    let calls: f64 = stats.edges.iter().map(|e| e.rate).sum();
    let cost = demand.iter().sum::<f64>() + coefficients.alpha * calls;
    let saturation = config.budget(coefficients.capacity) * stats.throughput / cost;
    if cost > 0.0 && saturation.is_finite() && saturation > 0.0 {
        let f = saturation / stats.throughput;
        for o in &mut stats.operators {
            o.processed_rate *= f;
            o.records_rate *= f;
        }
        for e in &mut stats.edges {
            e.rate *= f;
            e.records_rate *= f;
        }
        stats.throughput = saturation;
    }
    let instances = crate::parallelism::initial_allocation(&demand, config.slots_per_worker);
    for (o, n) in stats.operators.iter_mut().zip(instances) {
        o.parallelism = n;
    }
    stats.workers_used = 1;
    stats
}

/// Λ as the operator rates of the same window imply it: the input requests the entry
/// operators executed per second (their requests less those from operators, over the streams
/// each source feeds). Completed chains per second lag it by a chain's latency, so outside a
/// steady state (a backlog draining, a rescale in the window) they are not the rate the
/// observed N_o and E belong to, and Eq. 5's scale would carry the difference to every
/// operator. `None` where inputs cannot be told apart (an operator fed by two source
/// streams) or none were executed.
fn entry_rate(p: &Pipeline, observed: &[Observed]) -> Option<f64> {
    let mut from_operators = vec![0.0; observed.len()];
    for o in observed {
        for e in &o.edges {
            from_operators[e.to.index()] += e.rate;
        }
    }
    let mut rate = 0.0;
    for source in &p.sources {
        let entries: Vec<OperatorId> =
            p.source_outputs(source.id).iter().filter_map(|s| p.stream(*s).to.operator()).collect();
        for &o in &entries {
            if source_streams(p, o) > 1 {
                return None;
            }
            let executed = (observed[o.index()].processed - from_operators[o.index()]).max(0.0);
            rate += executed / entries.len() as f64;
        }
    }
    (rate.is_finite() && rate > 0.0).then_some(rate)
}

/// The operator and edge rates the entries' executions imply once every queue between
/// operators is steady. Records, not requests, are followed along the chain: an operator
/// receives the records its predecessors sent, as settled, plus those its sources fed it as
/// executed, and its requests and outgoing edges scale with the ratio of those to the records it
/// executed (requests are split when a migration re-routes them, records are not). In a steady
/// window every ratio is 1. Where an operator lags its predecessors (saturated, a queue building
/// in front of it) it executed fewer records than the entries' inputs imply, and where it drains
/// a backlog more; Eq. 6's s·N_o would carry either difference to the target rate, sizing a
/// rise observed on a saturated worker for the share the bottleneck managed to execute. Where
/// some stream's records were not measured the observation stays as it is.
fn settle(p: &Pipeline, observed: &mut [Observed]) {
    let unmeasured =
        |o: &Observed| o.edges.iter().zip(&o.edge_records).any(|(e, r)| e.rate > 0.0 && *r <= 0.0);
    if observed.iter().any(unmeasured) {
        return;
    }
    let mut arriving = vec![0.0; observed.len()];
    for o in observed.iter() {
        for (e, r) in o.edges.iter().zip(&o.edge_records) {
            arriving[e.to.index()] += r;
        }
    }
    // From here on, the records each operator's sources fed it; predecessors add theirs, as
    // settled, in topological order.
    for op in &p.operators {
        let i = op.id.index();
        let fed = source_streams(p, op.id) > 0;
        arriving[i] = if fed { (observed[i].records - arriving[i]).max(0.0) } else { 0.0 };
    }
    for &o in p.topological_order() {
        let ob = &mut observed[o.index()];
        let scale = arriving[o.index()] / ob.records;
        // Nothing executed (or records beyond f64's range): the observation stays.
        let scale = if ob.records > 0.0 && scale.is_finite() { scale } else { 1.0 };
        ob.processed *= scale;
        ob.records *= scale;
        for (e, r) in ob.edges.iter_mut().zip(&mut ob.edge_records) {
            e.rate *= scale;
            *r *= scale;
            arriving[e.to.index()] += *r;
        }
    }
}

/// Streams from sources into operator `o`.
fn source_streams(p: &Pipeline, o: OperatorId) -> usize {
    p.inputs(o).iter().filter(|s| p.stream(**s).from.operator().is_none()).count()
}

fn edge_sum(edges: &[Edge]) -> f64 {
    edges.iter().map(|e| e.rate).sum()
}

/// Looks every operator and edge of `p` up in `stats` once (by name, hashed, so that large
/// pipelines are not quadratic).
fn observe(p: &Pipeline, stats: &ObservedStats, default_exec_us: f64) -> Vec<Observed> {
    let ops: HashMap<&str, usize> =
        stats.operators.iter().enumerate().map(|(i, o)| (o.name.as_str(), i)).collect();
    let mut edge_rates: HashMap<(&str, &str), (f64, f64)> = HashMap::new();
    for e in &stats.edges {
        let rates = edge_rates.entry((e.from.as_str(), e.to.as_str())).or_default();
        rates.0 += e.rate;
        rates.1 += e.records_rate;
    }
    p.operators
        .iter()
        .map(|op| {
            let seen = ops.get(op.name.as_str()).map(|&i| &stats.operators[i]);
            let (edges, edge_records) = p
                .successors(op.id)
                .map(|to| {
                    let key = (op.name.as_str(), p.operator(to).name.as_str());
                    let (rate, records) = edge_rates.get(&key).copied().unwrap_or_default();
                    (Edge { to, rate: rate.max(0.0) }, records.max(0.0))
                })
                .unzip();
            Observed {
                processed: seen.map_or(0.0, |s| s.processed_rate.max(0.0)),
                records: seen.map_or(0.0, |s| s.records_rate.max(0.0)),
                exec_us: seen.map_or(default_exec_us, |s| s.exec_time_us.max(0.0)),
                exec_scv: scv_or_one(seen.and_then(|s| s.exec_time_scv)),
                edges,
                edge_records,
                instances: seen.map_or(0, |s| s.parallelism),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clasp_core::spec::parse;
    use clasp_core::stats::{EdgeStats, OperatorStats, STATS_SCHEMA};

    const CHAIN: &str = r#"
[[source]]
name = "in"
[[operator]]
name = "a"
[[operator]]
name = "b"
[[stream]]
from = "in"
to = "a"
[[stream]]
from = "a"
to = "b"
"#;

    fn stats() -> ObservedStats {
        let op = |name: &str, rate, exec, par| OperatorStats {
            name: name.into(),
            processed_rate: rate,
            records_rate: rate,
            exec_time_us: exec,
            parallelism: par,
            ..OperatorStats::default()
        };
        ObservedStats {
            schema: STATS_SCHEMA.into(),
            throughput: 200.0,
            operators: vec![op("a", 200.0, 100.0, 3), op("b", 600.0, 50.0, 2)],
            edges: vec![EdgeStats {
                from: "a".into(),
                to: "b".into(),
                rate: 600.0,
                records_rate: 600.0,
            }],
            ..ObservedStats::default()
        }
    }

    #[test]
    fn eq5_to_7_scale_rates_not_execution_times() {
        let p = parse(CHAIN, "c.toml").unwrap();
        let proj = Projection::new(&p, &stats(), 500.0, 400.0, 1).unwrap();
        assert_eq!(proj.scale, 2.5);
        assert_eq!(proj.rate, [500.0, 1500.0]);
        assert_eq!(proj.exec_us, [100.0, 50.0]);
        assert_eq!(proj.demand, [50_000.0, 75_000.0]);
        assert_eq!(proj.edges[0], [Edge { to: OperatorId(1), rate: 1500.0 }]);
        assert!(proj.edges[1].is_empty());
        assert_eq!(proj.current_instances, 5);
        assert_eq!(proj.observed_demand(), [20_000.0, 30_000.0]);
        let half = proj.at_rate(100.0);
        assert_eq!((half.scale, half.demand[1]), (0.5, 15_000.0));
    }

    /// A window in which chains complete at a third of the rate the operators executed
    /// inputs (a backlog draining behind them): Λ is the entry operator's input requests, so
    /// the projection is that of the steady window, per input request of the entry.
    #[test]
    fn the_observed_rate_is_the_inputs_the_entry_executed() {
        let p = parse(CHAIN, "c.toml").unwrap();
        let mut lagging = stats();
        lagging.throughput = 200.0 / 3.0;
        let proj = Projection::new(&p, &lagging, 500.0, 400.0, 1).unwrap();
        assert_eq!(proj.observed_rate, 200.0);
        assert_eq!(proj.rate, [500.0, 1500.0], "b: 3 requests per input, a: 1");
        assert_eq!(proj, Projection::new(&p, &stats(), 500.0, 400.0, 1).unwrap());
        // An operator fed by two sources: its inputs cannot be told apart, Λ is the throughput.
        let two =
            format!("{CHAIN}[[source]]\nname = \"in2\"\n[[stream]]\nfrom = \"in2\"\nto = \"a\"\n");
        let p2 = parse(&two, "c.toml").unwrap();
        let proj = Projection::new(&p2, &lagging, 500.0, 400.0, 1).unwrap();
        assert_eq!(proj.observed_rate, 200.0 / 3.0);
    }

    /// b executed half the records a sent it (saturated, a queue building), then one and a
    /// half times as many (draining that queue), each in requests of another size (split by a
    /// migration's re-routing): all project as the steady window does, from the records a sent
    /// per record it executed.
    #[test]
    fn a_lagging_or_draining_operator_projects_at_the_rate_its_inputs_imply() {
        let p = parse(CHAIN, "c.toml").unwrap();
        let steady = Projection::new(&p, &stats(), 500.0, 400.0, 1).unwrap();
        for (records, per_request) in [(300.0, 1.0), (900.0, 1.0), (300.0, 0.5), (900.0, 2.0)] {
            let mut s = stats();
            s.operators[1].records_rate = records;
            s.operators[1].processed_rate = records / per_request;
            s.operators[1].exec_time_us = 50.0 * per_request;
            let proj = Projection::new(&p, &s, 500.0, 400.0, 1).unwrap();
            let demand = proj.demand[1];
            assert!((demand - steady.demand[1]).abs() < 1e-9 * demand, "{records}: {demand}");
            assert_eq!(proj.edges, steady.edges);
            assert_eq!(proj.rate[1] * per_request, steady.rate[1], "{records} records/s");
        }
        // Without records measured, the observation is taken as it is.
        let mut s = stats();
        s.operators[1].records_rate = 0.0;
        s.operators[1].processed_rate = 300.0;
        let proj = Projection::new(&p, &s, 500.0, 400.0, 1).unwrap();
        assert_eq!(proj.rate[1], 750.0);
        // a itself behind its source: Λ is what a executed, b follows a.
        let mut s = stats();
        s.operators[0].processed_rate = 100.0;
        s.operators[0].records_rate = 100.0;
        s.edges[0].rate = 300.0;
        s.edges[0].records_rate = 300.0;
        let proj = Projection::new(&p, &s, 500.0, 400.0, 1).unwrap();
        assert_eq!((proj.observed_rate, proj.rate.clone()), (100.0, vec![500.0, 1500.0]));
    }

    /// a sends every record to both b and c (two output streams), b lags and c drains: each
    /// follows its own stream's records, independently of the other.
    #[test]
    fn each_branch_of_a_fork_follows_its_own_stream() {
        let fork =
            format!("{CHAIN}[[operator]]\nname = \"c\"\n[[stream]]\nfrom = \"a\"\nto = \"c\"\n");
        let p = parse(&fork, "f.toml").unwrap();
        let op = |name: &str, rate: f64| OperatorStats {
            name: name.into(),
            processed_rate: rate,
            records_rate: rate,
            exec_time_us: 10.0,
            ..OperatorStats::default()
        };
        let edge = |to: &str, rate: f64| EdgeStats {
            from: "a".into(),
            to: to.into(),
            rate,
            records_rate: rate,
        };
        let stats = |b: f64, c: f64| ObservedStats {
            schema: STATS_SCHEMA.into(),
            throughput: 100.0,
            operators: vec![op("a", 100.0), op("b", b), op("c", c)],
            edges: vec![edge("b", 100.0), edge("c", 100.0)],
            ..ObservedStats::default()
        };
        let steady = Projection::new(&p, &stats(100.0, 100.0), 300.0, 1.0, 1).unwrap();
        assert_eq!(steady.rate, [300.0, 300.0, 300.0]);
        let uneven = Projection::new(&p, &stats(50.0, 170.0), 300.0, 1.0, 1).unwrap();
        assert_eq!(uneven, steady);
    }

    #[test]
    fn missing_operators_and_edges_default() {
        let p = parse(CHAIN, "c.toml").unwrap();
        let mut s = stats();
        s.operators.truncate(1);
        s.edges.clear();
        let proj = Projection::new(&p, &s, 200.0, 400.0, 7).unwrap();
        assert_eq!((proj.rate[1], proj.exec_us[1]), (0.0, 400.0));
        assert_eq!(proj.edges[0][0].rate, 0.0);
        assert_eq!(proj.current_instances, 3);
    }

    #[test]
    fn bad_rates_and_empty_observations_are_errors() {
        let p = parse(CHAIN, "c.toml").unwrap();
        for r in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(matches!(
                Projection::new(&p, &stats(), r, 1.0, 1),
                Err(PlanError::InvalidRate(_))
            ));
        }
        let s = ObservedStats { throughput: 0.0, ..stats() };
        assert_eq!(Projection::new(&p, &s, 1.0, 1.0, 1), Err(PlanError::NoThroughput(0.0)));
    }

    #[test]
    fn spec_observation_saturates_one_worker_with_eq12_instances() {
        let p = parse(CHAIN, "c.toml").unwrap();
        let cfg = crate::config::PlanConfig { default_exec_us: 100.0, ..Default::default() };
        let c =
            clasp_core::stats::Coefficients { alpha: 10.0, beta: 0.0, gamma: 0.0, capacity: 1e6 };
        let s = spec_observation(&p, 50.0, &cfg, &c);
        // Per request/s: a 100 µs + b 100 µs + one local call 10 µs = 210 µs; budget 900,000.
        let lambda1 = 900_000.0 / 210.0;
        assert!((s.throughput - lambda1).abs() < 1e-9 * lambda1);
        assert!((s.operators[1].processed_rate - lambda1).abs() < 1e-9 * lambda1);
        assert!((s.edges[0].rate - lambda1).abs() < 1e-9 * lambda1);
        assert_eq!((s.operators[0].parallelism, s.operators[1].parallelism), (5, 5));
        assert_eq!(s.input_rate, 50.0);
    }

    #[test]
    fn single_worker_cost_is_demand_plus_local_calls() {
        let p = parse(CHAIN, "c.toml").unwrap();
        let proj = Projection::new(&p, &stats(), 200.0, 400.0, 1).unwrap();
        // (200·100 + 600·50 + 2·600) / 200
        assert_eq!(proj.single_worker_cost_per_rate(2.0), 51_200.0 / 200.0);
    }
}
