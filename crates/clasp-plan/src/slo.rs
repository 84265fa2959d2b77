//! A latency objective on top of the rate (the CLASP paper's future work): the fewest workers
//! whose placement is predicted to keep the 95th percentile of end-to-end latency within an
//! SLO, not only to sustain the rate.
//!
//! The prediction is a queueing model of a placement at its projected rates:
//! - each worker is a queue of c servers that together deliver its capacity W̄ (c = W̄ in
//!   cores, rounded, each server W̄ / c fast), offered the requests its fractions route to it
//!   (Σ_o Ñ_o σ_o(w)) and busy for its Eq. 8 load, so that its utilization is L_w / W̄; a
//!   request waits 0 with probability 1 − C and an exponential time otherwise (Erlang C,
//!   [`crate::queueing::erlang_c`]), whose M/M/c mean is scaled by (c_a² + c_s²)/2 for the
//!   variability c_a² of the input's arrivals and c_s² of the worker's service, both measured
//!   (Allen–Cunneen);
//! - a hop of the chain into operator o waits the mixture of its workers' waits weighted by
//!   σ_o(w), then executes for τ̄_o plus the chained requests it sends (α local, β remote, as
//!   in Eq. 8), at the server's speed, with the variance / mean² of τ_o the workers measured
//!   (1, exponential, where they did not); an operator fed f requests per request of its
//!   predecessor completes its hop when the last of them does ([`copies`]). They arrive
//!   together: each worker's wait once (the slowest of the workers they reach), then their
//!   executions on the c servers of those workers, C = c / max_w σ_o(w) in all (as if pooled:
//!   spread as evenly as the busiest worker's share): up to C run at once and the rest queue
//!   behind them — for an exponential time the maximum of C (mean scaled by H_C) after f − C
//!   completions at C times the rate, for a constant one ⌈f/C⌉ rounds, in between a blend by
//!   the variability ([`slowest_of`]);
//! - a chain completes when its slowest path does: the path of largest mean, whose hops'
//!   means and variances add; its 95th percentile is that of a gamma distribution with the
//!   same mean and variance (Wilson–Hilferty).
//!
//! A worker at or over its capacity has an unbounded prediction.

use crate::capacity::{Fractions, WorkerLoad, placement_loads};
use crate::error::PlanError;
use crate::policy::clasp_on_workers;
use crate::projection::Projection;
use crate::queueing::erlang_c;
use crate::{Decision, PlanConfig, PlanInput, Policy};
use clasp_core::placement::Placement;
use clasp_core::stats::Coefficients;
use clasp_core::{OperatorId, Pipeline};

/// z of the 95th percentile of a standard normal distribution.
const Z95: f64 = 1.644_853_626_951_472_2;

/// Mean and variance of a latency (µs, µs²).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Moments {
    mean: f64,
    var: f64,
}

impl std::ops::Add for Moments {
    type Output = Self;
    fn add(self, o: Self) -> Self {
        Self { mean: self.mean + o.mean, var: self.var + o.var }
    }
}

/// The predicted 95th percentile of end-to-end latency (µs) of `placement` at the rates of
/// `proj`, with `loads` its Eq. 8 loads at those rates under coefficients `c`; infinite when
/// some worker is at or over its capacity.
pub fn predicted_p95_us(
    p: &Pipeline,
    proj: &Projection,
    placement: &Placement,
    loads: &[WorkerLoad],
    c: &Coefficients,
) -> f64 {
    let servers = Servers::of(c.capacity);
    let fractions = Fractions::of(placement);
    // Each operator's execution on a server (µs): its own time and its dispatch.
    let exec: Vec<Moments> = (0..p.operators.len())
        .map(|o| {
            let mean = (proj.exec_us[o] + dispatch_us(proj, &fractions, OperatorId::from(o), c))
                / servers.speed;
            // Variability above the exponential's is taken as exponential: the range the
            // fan-out's blend is fitted for, and a contended machine's overrun sleeps must not
            // price workers beyond the model that assumed exponential service throughout.
            Moments { mean, var: proj.exec_scv[o].min(1.0) * mean * mean }
        })
        .collect();
    let Some(waits) = worker_waits(proj, placement, loads, c, servers, &exec) else {
        return f64::INFINITY;
    };
    let hop = |o: OperatorId, fan_out: f64| -> Moments {
        let op = &placement.operators[o.index()];
        let (mut mean, mut second) = (0.0, 0.0);
        for s in op.shares.iter().filter(|s| s.fraction > 0.0) {
            let w = waits[s.worker.index()];
            mean += s.fraction * w.mean;
            second += s.fraction * (w.var + w.mean * w.mean);
        }
        let wait = Moments { mean, var: (second - mean * mean).max(0.0) };
        let busiest = op.shares.iter().map(|s| s.fraction).fold(0.0, f64::max);
        let reached = op.shares.iter().filter(|s| s.fraction > 0.0).count().max(1) as f64;
        let servers = f64::from(servers.count) / busiest.max(1e-9);
        copies(wait, exec[o.index()], fan_out, servers, reached)
    };
    // The slowest path into each operator, in topological order.
    let mut into: Vec<Moments> = vec![Moments::default(); p.operators.len()];
    for &o in p.topological_order() {
        let upstream = p
            .predecessors(o)
            .map(|u| {
                let fan_out = fan_out(proj, u, o);
                into[u.index()] + hop(o, fan_out)
            })
            .max_by(|a, b| a.mean.total_cmp(&b.mean));
        into[o.index()] = upstream.unwrap_or_else(|| hop(o, 1.0));
    }
    let slowest = into.iter().copied().max_by(|a, b| a.mean.total_cmp(&b.mean));
    slowest.map_or(0.0, gamma_p95)
}

/// When no worker count meets the objective, a count is taken over a smaller one only if its
/// predicted p95 is lower by at least this fraction: workers the model says do not help are
/// not bought.
pub const MIN_GAIN_BEYOND_REACH: f64 = 0.05;

/// CLASP's placement on the fewest workers whose predicted p95 at `steady_rate` (or the rate
/// a placement sustains, if lower) is within `slo_ms`, each count's placement holding
/// `input`'s rate at full capacity. When none is, the fewest whose prediction no larger count
/// lowers by [`MIN_GAIN_BEYOND_REACH`].
///
/// The objective is the margin here, in place of the configured headroom: a count the budget
/// would reject for running its workers above W̄ · headroom is taken when its queues are
/// predicted to keep the objective, and a count whose queues are not is passed over however
/// far under the budget it runs.
///
/// The placements are sized for `input`'s rate, which may add a backlog's catch-up to the
/// input rate; the objective is for the rate that stays. Judged at the catch-up rate, a jump's
/// first decision buys workers for the latency of a drain that lasts seconds by design.
pub fn fewest_workers_within(
    input: &PlanInput<'_>,
    slo_ms: f64,
    steady_rate: f64,
) -> Result<Decision, PlanError> {
    let full = PlanConfig { headroom: 1.0, ..input.config.clone() };
    let input = PlanInput { config: &full, ..*input };
    let fewest = Policy::Clasp.decide(&input)?;
    let proj = input.projection()?;
    let c = &input.coefficients;
    let predict = |d: &Decision| {
        if steady_rate >= d.target_rate {
            let at = proj.at_rate(d.target_rate);
            return predicted_p95_us(input.pipeline, &at, &d.placement, &d.loads, c);
        }
        let at = proj.at_rate(steady_rate);
        let loads = placement_loads(&at, &d.placement, c, input.budget());
        predicted_p95_us(input.pipeline, &at, &d.placement, &loads, c)
    };
    let slo_us = slo_ms * 1e3;
    let mut best_p95 = predict(&fewest);
    if best_p95 <= slo_us {
        return Ok(fewest);
    }
    let mut best = fewest;
    for k in best.workers + 1..=input.config.max_workers {
        let Ok(d) = clasp_on_workers(Policy::Clasp, &input, k) else { break };
        let p95 = predict(&d);
        if p95 <= slo_us {
            return Ok(d);
        }
        if p95 < best_p95 * (1.0 - MIN_GAIN_BEYOND_REACH) {
            (best, best_p95) = (d, p95);
        }
    }
    Ok(best)
}

/// The servers a worker of capacity W̄ is modelled with.
#[derive(Clone, Copy, Debug)]
struct Servers {
    /// How many.
    count: u32,
    /// Each one's speed, in cores.
    speed: f64,
}

impl Servers {
    fn of(capacity: f64) -> Self {
        let cores = (capacity / 1e6).max(1e-6);
        let count = cores.round().clamp(1.0, 4096.0) as u32;
        Self { count, speed: cores / f64::from(count) }
    }
}

/// The CPU an execution of `o` spends sending its chained requests (µs): per request of `o`,
/// Σ_s (Ẽ_{o→s} / Ñ_o) · (α P(local) + β P(remote)), a request to `s` staying local with the
/// probability that `s` runs on the sender's worker, Σ_w σ_o(w) σ_s(w).
fn dispatch_us(proj: &Projection, fr: &Fractions, o: OperatorId, c: &Coefficients) -> f64 {
    let rate = proj.rate[o.index()];
    if rate <= 0.0 {
        return 0.0;
    }
    proj.edges[o.index()]
        .iter()
        .map(|e| {
            let local: f64 =
                fr.of_op(o.index()).iter().map(|&(w, f)| f * fr.get(e.to.index(), w)).sum();
            e.rate / rate * (c.alpha * local + c.beta * (1.0 - local))
        })
        .sum()
}

/// The wait of a request at every worker, `None` when one is at or over its capacity. The
/// M/M/c wait is scaled by (c_a² + c_s²)/2 (Allen–Cunneen): c_a² the variance / mean² of the
/// times between input requests, as measured (taken at most the Poisson process's 1: a window
/// straddling a change of the rate mixes two paces), c_s² that of the worker's service, the
/// mixture of the executions (`exec`) it is offered. Its fan-out cost, γ for each other worker
/// it reaches every second (Eq. 8's δ_w γ), is capacity taken from all its servers (as the
/// simulator and the runtime's emulation spend it): the executions share W̄ − δ_w γ, each
/// stretched by W̄ / (W̄ − δ_w γ), which leaves the mixture's shape as it is.
fn worker_waits(
    proj: &Projection,
    placement: &Placement,
    loads: &[WorkerLoad],
    coefficients: &Coefficients,
    servers: Servers,
    exec: &[Moments],
) -> Option<Vec<Moments>> {
    let capacity = coefficients.capacity;
    let gamma = coefficients.gamma.max(0.0);
    let c = f64::from(servers.count);
    let arrival_scv = proj.arrival_scv.clamp(0.0, 1.0);
    (0..placement.workers as usize)
        .map(|w| {
            let (mut arrivals, mut first, mut second) = (0.0, 0.0, 0.0);
            for (o, op) in placement.operators.iter().enumerate() {
                for s in op.shares.iter().filter(|s| s.worker.index() == w) {
                    let rate = proj.rate[o] * s.fraction;
                    let e = exec[o];
                    arrivals += rate;
                    first += rate * e.mean;
                    second += rate * (e.var + e.mean * e.mean);
                }
            }
            let (load, fan_out) = loads
                .get(w)
                .map_or((0.0, 0.0), |l| (l.load, gamma * f64::from(l.remote_destinations)));
            if arrivals <= 0.0 || load <= 0.0 {
                return Some(Moments::default());
            }
            let utilization = (load - fan_out).max(0.0) / (capacity - fan_out);
            if utilization.is_nan() || !(0.0..1.0).contains(&utilization) {
                return None;
            }
            // c servers busy ρ of the time: a = c·ρ Erlangs, mean service a / λ.
            let a = c * utilization;
            let service_us = a / arrivals * 1e6;
            let waits = erlang_c(servers.count, a);
            let scv = if first > 0.0 { second * arrivals / (first * first) - 1.0 } else { 1.0 };
            // A request that waits at all waits an exponential time of this mean.
            let beyond = service_us / (c - a) * (arrival_scv + scv.max(0.0)) / 2.0;
            Some(Moments { mean: waits * beyond, var: waits * (2.0 - waits) * beyond * beyond })
        })
        .collect()
}

/// Requests into `to` per request of `from`: Ẽ_{from→to} / Ñ_from (at least 1).
fn fan_out(proj: &Projection, from: OperatorId, to: OperatorId) -> f64 {
    let rate = proj.rate[from.index()];
    let edge: f64 = proj.edges[from.index()].iter().filter(|e| e.to == to).map(|e| e.rate).sum();
    if rate > 0.0 { (edge / rate).max(1.0) } else { 1.0 }
}

/// When the last of `f` copies sent together into an operator on `servers` servers over
/// `reached` workers completes, each worker's queue ahead of them waiting `wait` and each copy
/// executing for `exec`. The copies arrive together, so on one worker they wait for the
/// work ahead of them once and then for each other's executions in rounds: the slowest of the
/// workers' waits, then the slowest of the executions ([`slowest_of`]).
fn copies(wait: Moments, exec: Moments, f: f64, servers: f64, reached: f64) -> Moments {
    let workers = reached.min(f.round().max(1.0));
    slowest_of(wait, workers, workers) + slowest_of(exec, f, servers)
}

/// When the last of `f` copies of a latency with moments `m`, sent together to `servers`
/// servers, completes (both rounded). For an exponential latency: up to c = `servers` at once
/// the slowest of them, mean · H_c and variance mean² · Σ_{k≤c} 1/k²; the copies beyond queue,
/// and the f − c first completions come c times as fast, adding mean · (f − c)/c to the mean
/// and mean² · (f − c)/c² to the variance before the last c run. For a constant one: ⌈f/c⌉
/// rounds of it. In between, with k = var/mean² (taken at most 1): the spread of the slowest
/// of c scales with the standard deviation, mean · √k (H_c − 1), and the queued copies add
/// k (f − c)/c + (1 − k)(⌈f/c⌉ − 1) means; the variance scales with `m`'s.
fn slowest_of(m: Moments, f: f64, servers: f64) -> Moments {
    let n = f.round().clamp(1.0, 1e6) as u64;
    if n == 1 || m.mean <= 0.0 {
        return m;
    }
    let c = n.min(servers.round().clamp(1.0, 1e6) as u64);
    let k = (m.var / (m.mean * m.mean)).clamp(0.0, 1.0);
    let harmonic: f64 = (1..=c).map(|i| 1.0 / i as f64).sum();
    let squares: f64 = (1..=c).map(|i| 1.0 / (i * i) as f64).sum();
    let queued = (n - c) as f64 / c as f64;
    let rounds = n.div_ceil(c) as f64;
    let spread = k.sqrt() * (harmonic - 1.0);
    Moments {
        mean: m.mean * (1.0 + spread + k * queued + (1.0 - k) * (rounds - 1.0)),
        var: m.var * (squares + queued / c as f64),
    }
}

/// The 95th percentile of a gamma distribution with `m`'s mean and variance
/// (Wilson–Hilferty: the cube root of a gamma variable is nearly normal).
fn gamma_p95(m: Moments) -> f64 {
    if m.mean <= 0.0 {
        return 0.0;
    }
    if m.var <= 0.0 {
        return m.mean;
    }
    let k = m.mean * m.mean / m.var;
    let theta = m.var / m.mean;
    let h = 1.0 / (9.0 * k);
    k * theta * (1.0 - h + Z95 * h.sqrt()).max(0.0).powi(3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::pipeline;
    use clasp_core::stats::ObservedStats;

    /// `placement` with its shares at the demand of `proj`.
    fn at(proj: &Projection, mut placement: Placement) -> Placement {
        for (o, op) in placement.operators.iter_mut().enumerate() {
            op.demand = proj.demand[o];
            for s in &mut op.shares {
                s.share = s.fraction * proj.demand[o];
            }
        }
        placement
    }

    const ONE_OP: &str = "[[source]]\nname = \"in\"\n[[operator]]\nname = \"a\"\nkind = \"map\"\n\
        [[stream]]\nfrom = \"in\"\nto = \"a\"\n";

    /// The exponential distribution's 95th percentile: −ln(0.05) · mean.
    #[test]
    fn a_single_exponential_hop_on_an_idle_worker_is_its_own_p95() {
        let m = Moments { mean: 400.0, var: 160_000.0 };
        let exact = -(0.05f64).ln() * 400.0;
        assert!((gamma_p95(m) - exact).abs() / exact < 0.01, "{} vs {exact}", gamma_p95(m));
    }

    #[test]
    fn a_one_slot_worker_is_an_m_m_1_queue() {
        // One operator, 400 µs per request, 1,500 requests/s on one single-slot worker of
        // W̄ = 10⁶ µs/s: ρ = 0.6. The M/M/1 sojourn time is exponential with rate μ − λ, so its
        // 95th percentile is −ln(0.05) / (μ − λ).
        let p = pipeline(ONE_OP);
        let stats = ObservedStats::from_spec(&p, 1_500.0, 400.0);
        let proj = Projection::new(&p, &stats, 1_500.0, 400.0, 1).unwrap();
        let placement = at(&proj, Placement::single_worker(&p, &[1]));
        let c = Coefficients { alpha: 0.0, beta: 0.0, gamma: 0.0, capacity: 1e6 };
        let loads = placement_loads(&proj, &placement, &c, 1e6);
        assert!((loads[0].load - 600_000.0).abs() < 1e-6);
        let got = predicted_p95_us(&p, &proj, &placement, &loads, &c);
        let exact = -(0.05f64).ln() / (2_500.0 - 1_500.0) * 1e6;
        // The gamma approximation of the wait-plus-service mixture against the exact sojourn.
        assert!((got - exact).abs() / exact < 0.05, "{got} vs {exact}");
    }

    #[test]
    fn a_saturated_worker_has_no_bounded_latency_and_more_load_means_more_latency() {
        let p = pipeline(ONE_OP);
        let c = Coefficients { alpha: 0.0, beta: 0.0, gamma: 0.0, capacity: 4e6 };
        let predict = |rate: f64| {
            let stats = ObservedStats::from_spec(&p, rate, 400.0);
            let proj = Projection::new(&p, &stats, rate, 400.0, 4).unwrap();
            let placement = at(&proj, Placement::single_worker(&p, &[4]));
            let loads = placement_loads(&proj, &placement, &c, 4e6);
            predicted_p95_us(&p, &proj, &placement, &loads, &c)
        };
        assert!(predict(10_000.0).is_infinite(), "ρ = 1");
        let (low, high) = (predict(2_000.0), predict(9_000.0));
        assert!(low.is_finite() && high > low, "{low} {high}");
    }

    #[test]
    fn fan_out_waits_for_the_slowest_copy() {
        let m = Moments { mean: 100.0, var: 10_000.0 };
        let three = slowest_of(m, 3.0, 8.0);
        assert!((three.mean - 100.0 * (1.0 + 0.5 + 1.0 / 3.0)).abs() < 1e-9);
        assert_eq!(slowest_of(m, 1.0, 8.0), m);
    }

    /// n jobs of mean 1 dealt in turn to `workers` workers of c servers each, simulated: the
    /// mean and variance of when the last completes. Each job's time is Erlang with `phases`
    /// phases (variance / mean² = 1/phases: 1 is exponential), constant for 0 phases.
    fn simulated_fork(n: usize, workers: usize, c: usize, runs: usize, phases: u32) -> Moments {
        use clasp_core::rng::SeededRng;
        use rand::{RngExt, SeedableRng};
        let mut rng = SeededRng::seed_from_u64(7);
        let mut done = Vec::with_capacity(runs);
        for _ in 0..runs {
            // Each server's next free time; a job starts on its worker's earliest.
            let mut free = vec![vec![0.0f64; c]; workers];
            let mut last = 0.0f64;
            for job in 0..n {
                let free = &mut free[job % workers];
                let (i, start) = free
                    .iter()
                    .copied()
                    .enumerate()
                    .min_by(|a, b| a.1.total_cmp(&b.1))
                    .expect("c > 0");
                let service = if phases == 0 {
                    1.0
                } else {
                    (0..phases).map(|_| -(1.0 - rng.random::<f64>()).ln()).sum::<f64>()
                        / f64::from(phases)
                };
                free[i] = start + service;
                last = last.max(free[i]);
            }
            done.push(last);
        }
        let mean = done.iter().sum::<f64>() / runs as f64;
        let var = done.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / runs as f64;
        Moments { mean, var }
    }

    #[test]
    fn copies_beyond_the_servers_queue_behind_each_other() {
        let m = Moments { mean: 1.0, var: 1.0 };
        // On one worker the model is exact for exponential service.
        for (n, c) in [(3, 8), (12, 3), (6, 3), (4, 3), (20, 1), (40, 10)] {
            let model = slowest_of(m, n as f64, c as f64);
            let sim = simulated_fork(n, 1, c, 40_000, 1);
            let (dm, dv) = ((model.mean - sim.mean) / sim.mean, (model.var - sim.var) / sim.var);
            assert!(dm.abs() < 0.02 && dv.abs() < 0.06, "{n} on {c}: {model:?} vs {sim:?}");
        }
        // Spread over workers, pooling their servers errs a little low: a request cannot move
        // to another worker's idle server.
        for (n, workers, c) in [(12, 2, 3), (12, 3, 3), (12, 4, 3), (30, 3, 10)] {
            let model = slowest_of(m, n as f64, (workers * c) as f64);
            let sim = simulated_fork(n, workers, c, 40_000, 1);
            let dm = (model.mean - sim.mean) / sim.mean;
            assert!((-0.06..0.01).contains(&dm), "{n} on {workers} x {c}: {model:?} vs {sim:?}");
        }
    }

    #[test]
    fn constant_copies_take_whole_rounds_and_variable_ones_lie_between() {
        // Constant time: exactly ⌈n/c⌉ rounds, on one worker or pooled over several.
        let constant = Moments { mean: 1.0, var: 0.0 };
        for (n, workers, c) in [(12, 1, 3), (12, 2, 3), (12, 3, 3), (11, 4, 3), (3, 1, 8)] {
            let model = slowest_of(constant, n as f64, (workers * c) as f64);
            let sim = simulated_fork(n, workers, c, 10, 0);
            assert_eq!(model, sim, "{n} on {workers} x {c}");
        }
        // Erlang times (variance / mean² of 1/10, 1/4, 1/2): within 8 % of the simulation where
        // the copies fill whole rounds of the servers; above it (≤ 25 %) where the last round
        // is partial, whose copies start as the first of the round before end, not after all.
        for phases in [2u32, 4, 10] {
            let m = Moments { mean: 1.0, var: 1.0 / f64::from(phases) };
            let cases = [(3, 1, 8), (12, 1, 3), (12, 2, 3), (6, 1, 3), (40, 1, 10), (12, 3, 3)];
            for (n, workers, c) in cases.into_iter().chain([(4, 1, 3), (12, 4, 3)]) {
                let model = slowest_of(m, n as f64, (workers * c) as f64);
                let sim = simulated_fork(n, workers, c, 20_000, phases);
                let dm = (model.mean - sim.mean) / sim.mean;
                let whole = n <= workers * c || n % (workers * c) == 0;
                let ok = if whole { dm.abs() < 0.08 } else { (-0.05..0.25).contains(&dm) };
                assert!(ok, "{phases} phases, {n} on {workers} x {c}: {model:?} vs {sim:?}");
            }
        }
    }

    #[test]
    fn a_one_slot_worker_with_a_constant_service_waits_as_pollaczek_khinchine_says() {
        // M/D/1: the mean wait is ρ s / (2 (1 − ρ)), half the M/M/1 wait.
        let p = pipeline(ONE_OP);
        let (rate, s) = (1_500.0, 400.0);
        let mut stats = ObservedStats::from_spec(&p, rate, s);
        stats.operators[0].exec_time_scv = Some(0.0);
        let proj = Projection::new(&p, &stats, rate, s, 1).unwrap();
        let placement = at(&proj, Placement::single_worker(&p, &[1]));
        let c = Coefficients { alpha: 0.0, beta: 0.0, gamma: 0.0, capacity: 1e6 };
        let loads = placement_loads(&proj, &placement, &c, 1e6);
        let exec = [Moments { mean: s, var: 0.0 }];
        let waits = worker_waits(&proj, &placement, &loads, &c, Servers::of(1e6), &exec).unwrap();
        let rho = rate * s / 1e6;
        let exact = rho * s / (2.0 * (1.0 - rho));
        assert!((waits[0].mean - exact).abs() / exact < 1e-9, "{:?} vs {exact}", waits[0]);
        // And its p95 is below the exponential service's at the same load.
        let constant = predicted_p95_us(&p, &proj, &placement, &loads, &c);
        stats.operators[0].exec_time_scv = None;
        let proj = Projection::new(&p, &stats, rate, s, 1).unwrap();
        let exponential = predicted_p95_us(&p, &proj, &placement, &loads, &c);
        assert!(constant < exponential, "{constant} vs {exponential}");
    }

    /// The waits of `ONE_OP` at 1,500 requests/s of `s` µs on one single-slot worker, with
    /// the given variability of the arrivals and the service.
    fn one_slot_waits(arrival_scv: Option<f64>, exec_scv: f64) -> Moments {
        let p = pipeline(ONE_OP);
        let (rate, s) = (1_500.0, 400.0);
        let mut stats = ObservedStats::from_spec(&p, rate, s);
        stats.arrival_scv = arrival_scv;
        let proj = Projection::new(&p, &stats, rate, s, 1).unwrap();
        let placement = at(&proj, Placement::single_worker(&p, &[1]));
        let c = Coefficients { alpha: 0.0, beta: 0.0, gamma: 0.0, capacity: 1e6 };
        let loads = placement_loads(&proj, &placement, &c, 1e6);
        let exec = [Moments { mean: s, var: exec_scv * s * s }];
        worker_waits(&proj, &placement, &loads, &c, Servers::of(1e6), &exec).unwrap()[0]
    }

    #[test]
    fn paced_arrivals_wait_less_than_poisson_ones() {
        // D/D/1 below capacity: nobody waits.
        assert_eq!(one_slot_waits(Some(0.0), 0.0), Moments::default());
        // D/M/1 at ρ = 0.6: the exact mean wait is σ s / (1 − σ), σ the root of
        // σ = exp(−(1 − σ)/ρ); the model lies between it and the M/M/1 wait ρ s / (1 − ρ).
        let (rho, s) = (0.6f64, 400.0);
        let mut sigma = 0.5f64;
        for _ in 0..200 {
            sigma = (-(1.0 - sigma) / rho).exp();
        }
        let exact = sigma * s / (1.0 - sigma);
        let paced = one_slot_waits(Some(0.0), 1.0).mean;
        let poisson = one_slot_waits(None, 1.0).mean;
        assert!((poisson - rho * s / (1.0 - rho)).abs() < 1e-6, "{poisson}");
        assert!(exact < paced && paced < poisson, "{exact} < {paced} < {poisson}");
        // Burstier than Poisson is taken as Poisson.
        assert_eq!(one_slot_waits(Some(3.0), 1.0), one_slot_waits(None, 1.0));
    }

    #[test]
    fn the_fan_out_cost_waits_as_the_capacity_it_takes() {
        // One single-slot worker reaching `k` other workers, 1,200 exponential requests/s of
        // 400 µs: the fan-out takes kγ of W̄ = 1 s/s, so each execution holds the server
        // s' = s·W̄/(W̄ − kγ). M/M/1 on s': the mean wait is ρ s' / (1 − ρ), ρ = λ s'.
        let p = pipeline(ONE_OP);
        let (rate, s, gamma) = (1_200.0, 400.0, 50_000.0);
        let stats = ObservedStats::from_spec(&p, rate, s);
        let proj = Projection::new(&p, &stats, rate, s, 1).unwrap();
        let placement = at(&proj, Placement::single_worker(&p, &[1]));
        let c = Coefficients { alpha: 0.0, beta: 0.0, gamma, capacity: 1e6 };
        let exec = [Moments { mean: s, var: s * s }];
        let wait = |k: u32| {
            let mut loads = placement_loads(&proj, &placement, &c, 1e6);
            loads[0].remote_destinations = k;
            loads[0].load = rate * s + f64::from(k) * gamma;
            worker_waits(&proj, &placement, &loads, &c, Servers::of(1e6), &exec).unwrap()[0].mean
        };
        for k in [0u32, 1, 3, 9] {
            let stretched = s * 1e6 / (1e6 - f64::from(k) * gamma);
            let rho = rate * stretched / 1e6;
            let exact = rho * stretched / (1.0 - rho);
            let got = wait(k);
            assert!((got - exact).abs() / exact < 1e-9, "{k} destinations: {got} vs {exact}");
        }
        // Reaching more workers than the capacity leaves for the executions: no prediction.
        let mut loads = placement_loads(&proj, &placement, &c, 1e6);
        loads[0].remote_destinations = 12;
        loads[0].load = rate * s + 12.0 * gamma;
        assert!(worker_waits(&proj, &placement, &loads, &c, Servers::of(1e6), &exec).is_none());
    }

    #[test]
    fn copies_sent_together_wait_for_the_work_ahead_once() {
        // A constant wait W ahead on each of two workers, then 12 constant copies on 3 servers
        // each: W, then ⌈12/6⌉ rounds — not W in every round.
        let (w, e) = (500.0, 100.0);
        let wait = Moments { mean: w, var: 0.0 };
        let exec = Moments { mean: e, var: 0.0 };
        assert_eq!(copies(wait, exec, 12.0, 6.0, 2.0), Moments { mean: w + 2.0 * e, var: 0.0 });
        // One copy is the hop itself.
        assert_eq!(copies(wait, exec, 1.0, 6.0, 2.0), wait + exec);
        // Exponential waits on two workers: the slower of two, H_2 = 1.5 times the mean.
        let exp = Moments { mean: w, var: w * w };
        assert!((copies(exp, exec, 12.0, 6.0, 2.0).mean - (1.5 * w + 2.0 * e)).abs() < 1e-9);
    }

    /// The word-count pipeline of `pipelines/wc.toml`.
    fn word_count() -> Pipeline {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines/wc.toml");
        clasp_core::spec::load(&path).unwrap()
    }

    /// A plan of `p` for `target_rate` under the paper's coefficients, from no placement.
    fn paper_input<'a>(
        p: &'a Pipeline,
        stats: &'a ObservedStats,
        config: &'a PlanConfig,
        target_rate: f64,
    ) -> PlanInput<'a> {
        let coefficients = Coefficients::PAPER;
        PlanInput { pipeline: p, stats, target_rate, coefficients, config, current: None }
    }

    #[test]
    fn the_objective_is_judged_at_the_rate_that_stays_not_at_the_catch_up() {
        // Placements sized for twice the input rate (a backlog's catch-up): the fewest whose
        // prediction at the input rate, with their loads at that rate, meets the objective.
        let cfg = PlanConfig { max_workers: 8, headroom: 1.0, ..Default::default() };
        let (rate, catch_up) = (150.0, 300.0);
        let p = word_count();
        let stats = ObservedStats::from_spec(&p, rate, 400.0);
        let input = paper_input(&p, &stats, &cfg, catch_up);
        let decision = Policy::Clasp.decide(&input).unwrap();
        let at = input.projection().unwrap().at_rate(rate);
        let steady: Vec<(u32, f64)> = (decision.workers..=cfg.max_workers)
            .filter_map(|k| clasp_on_workers(Policy::Clasp, &input, k).ok())
            .map(|d| {
                let loads = placement_loads(&at, &d.placement, &input.coefficients, input.budget());
                (d.workers, predicted_p95_us(&p, &at, &d.placement, &loads, &input.coefficients))
            })
            .collect();
        let at_catch_up = sweep(&input);
        let mut fewer = false;
        for &(_, p95) in &steady {
            let slo_ms = p95 * 1.001 / 1e3;
            let want = steady.iter().find(|(_, q)| *q <= slo_ms * 1e3).unwrap().0;
            let got = fewest_workers_within(&input, slo_ms, rate).unwrap();
            assert_eq!(got.workers, want, "objective {slo_ms} ms over {steady:?}");
            // Where the catch-up's predictions reach the objective too, they need as many
            // workers at least (out of reach, either falls back to the counts that help).
            if at_catch_up.iter().any(|&(k, q)| k >= decision.workers && q <= slo_ms * 1e3) {
                let judged_at_target =
                    fewest_workers_within(&input, slo_ms, f64::INFINITY).unwrap();
                assert!(got.workers <= judged_at_target.workers, "{steady:?} vs {at_catch_up:?}");
                fewer |= got.workers < judged_at_target.workers;
            }
        }
        assert!(fewer, "the catch-up never costs a worker here: {steady:?} vs {at_catch_up:?}");
    }

    /// Every worker count's CLASP placement for `input` and its predicted p95.
    fn sweep(input: &PlanInput<'_>) -> Vec<(u32, f64)> {
        let proj = input.projection().unwrap();
        (1..=input.config.max_workers)
            .filter_map(|k| clasp_on_workers(Policy::Clasp, input, k).ok())
            .map(|d| {
                let at = proj.at_rate(d.target_rate);
                let c = &input.coefficients;
                (d.workers, predicted_p95_us(input.pipeline, &at, &d.placement, &d.loads, c))
            })
            .collect()
    }

    #[test]
    fn the_objective_takes_the_fewest_workers_that_meet_it_or_that_help() {
        // A limit far enough that the predictions flatten out before it.
        let cfg = PlanConfig { max_workers: 16, headroom: 1.0, ..Default::default() };
        let rate = 150.0;
        let p = word_count();
        let stats = ObservedStats::from_spec(&p, rate, 400.0);
        let input = paper_input(&p, &stats, &cfg, rate);
        let decision = Policy::Clasp.decide(&input).unwrap();
        let all = sweep(&input);
        let from = |w: u32| all.iter().copied().filter(move |(k, _)| *k >= w);
        // Objectives between the predictions: the first count at or under it.
        for (_, p95) in from(decision.workers) {
            let slo_ms = p95 * 1.001 / 1e3;
            let want = from(decision.workers).find(|(_, q)| *q <= slo_ms * 1e3).unwrap().0;
            let got = fewest_workers_within(&input, slo_ms, f64::INFINITY).unwrap();
            assert_eq!(got.workers, want, "objective {slo_ms} ms over {all:?}");
        }
        // Out of reach: no larger count would lower the chosen one's prediction by 5 %.
        let got = fewest_workers_within(&input, 1e-6, f64::INFINITY).unwrap();
        let chosen = all.iter().find(|(k, _)| *k == got.workers).unwrap().1;
        assert!(
            from(got.workers).all(|(_, q)| q >= chosen * (1.0 - MIN_GAIN_BEYOND_REACH)),
            "{} workers over {all:?}",
            got.workers
        );
        assert!(got.workers < cfg.max_workers, "the limit only if it helps: {all:?}");
    }

    #[test]
    fn the_objective_replaces_the_headroom_margin() {
        // Rates where the 0.9 budget needs more workers than full capacity does: an objective
        // the full-capacity count's queues keep takes that count, below the budget's.
        let budget = PlanConfig { max_workers: 16, ..Default::default() };
        let full = PlanConfig { headroom: 1.0, ..budget.clone() };
        let p = word_count();
        let mut below_budget = 0;
        for rate in (1..=40).map(|i| 25.0 * f64::from(i)) {
            let stats = ObservedStats::from_spec(&p, rate, 400.0);
            let input = paper_input(&p, &stats, &budget, rate);
            let at_budget = Policy::Clasp.decide(&input).unwrap();
            // The counts whose full-capacity placements hold the rate.
            let full_input = paper_input(&p, &stats, &full, rate);
            let holding = |k: &u32| {
                clasp_on_workers(Policy::Clasp, &full_input, *k)
                    .is_ok_and(|d| d.target_rate >= rate * (1.0 - 1e-9))
            };
            let all: Vec<_> = sweep(&full_input).into_iter().filter(|(k, _)| holding(k)).collect();
            let fewest = all[0].0;
            for &(k, p95) in all.iter().filter(|(_, q)| q.is_finite()) {
                let slo_ms = p95 * 1.001 / 1e3;
                let want = all.iter().find(|(_, q)| *q <= slo_ms * 1e3).unwrap().0;
                let got = fewest_workers_within(&input, slo_ms, rate).unwrap();
                assert_eq!(got.workers, want, "{rate}/s, objective {slo_ms} ms over {all:?}");
                assert!(got.target_rate >= rate * (1.0 - 1e-9), "{rate}/s: {got:?}");
                below_budget += usize::from(k == fewest && got.workers < at_budget.workers);
            }
        }
        assert!(below_budget > 0, "no rate where the budget's margin costs a worker");
    }
}
