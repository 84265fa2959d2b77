//! The worker capacity model: Eq. 1 (load of a worker from its observed metrics) and Eq. 8
//! (load of every worker under a placement, at projected rates).

use crate::projection::Projection;
use clasp_core::WorkerId;
use clasp_core::placement::{Placement, Share};
use clasp_core::stats::{Coefficients, WorkerStats};
use serde::{Deserialize, Serialize};

/// Eq. 1: W_w = Σ_o N_{w,o}·τ̄_{w,o} + α·R^l_w + β·R^r_w + γ·δ_w (µs of capacity per second).
pub fn worker_load(w: &WorkerStats, c: &Coefficients) -> f64 {
    w.exec_load + c.alpha * w.local_rate + c.beta * w.remote_rate + c.gamma * w.remote_destinations
}

/// One worker's load under a placement (Eq. 8) and its parts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerLoad {
    /// The worker.
    pub worker: WorkerId,
    /// L_w(Φ) (µs/s).
    pub load: f64,
    /// The budget the placement was packed against: W̄ · headroom (µs/s).
    pub budget: f64,
    /// Σ_o φ_{o,w}: execution demand (µs/s).
    pub exec: f64,
    /// Chained requests per second that stay on the worker.
    pub local_rate: f64,
    /// Chained requests per second sent to other workers.
    pub remote_rate: f64,
    /// δ_w(Φ): distinct other workers those remote requests reach.
    pub remote_destinations: u32,
}

/// σ_o(w) of every operator, indexed for lookup by worker.
#[derive(Clone, Debug, Default)]
pub(crate) struct Fractions {
    /// Per operator: `(worker, fraction)` sorted by worker, fractions > 0 only.
    by_op: Vec<Vec<(u32, f64)>>,
}

impl Fractions {
    /// Empty fractions for `n` operators.
    pub(crate) fn new(n: usize) -> Self {
        Self { by_op: vec![Vec::new(); n] }
    }

    /// The fractions of a placement.
    pub(crate) fn of(placement: &Placement) -> Self {
        let by_op = placement
            .operators
            .iter()
            .map(|op| {
                let mut v: Vec<(u32, f64)> = op
                    .shares
                    .iter()
                    .filter(|s| s.fraction > 0.0)
                    .map(|s| (s.worker.0, s.fraction))
                    .collect();
                v.sort_by_key(|&(w, _)| w);
                v
            })
            .collect();
        Self { by_op }
    }

    /// σ_op(w).
    pub(crate) fn get(&self, op: usize, w: u32) -> f64 {
        let v = &self.by_op[op];
        v.binary_search_by_key(&w, |&(x, _)| x).map_or(0.0, |i| v[i].1)
    }

    /// Adds `f` to σ_op(w).
    pub(crate) fn add(&mut self, op: usize, w: u32, f: f64) {
        let v = &mut self.by_op[op];
        match v.binary_search_by_key(&w, |&(x, _)| x) {
            Ok(i) => v[i].1 += f,
            Err(i) => v.insert(i, (w, f)),
        }
    }

    /// `(worker, fraction)` of `op`, by worker.
    pub(crate) fn of_op(&self, op: usize) -> &[(u32, f64)] {
        &self.by_op[op]
    }

    /// Workers reached by `op`'s chained requests: those running a successor fed by a stream
    /// that carries requests. Sorted, without duplicates.
    pub(crate) fn destinations(&self, proj: &Projection, op: usize) -> Vec<u32> {
        let mut d: Vec<u32> = proj.edges[op]
            .iter()
            .filter(|e| e.rate > 0.0)
            .flat_map(|e| self.by_op[e.to.index()].iter().map(|&(w, _)| w))
            .collect();
        d.sort_unstable();
        d.dedup();
        d
    }
}

/// Eq. 8: the load of every worker `0..placement.workers` under `placement` at the rates of
/// `proj`. A chained request from `o` on `w` to `o_s` stays local with probability σ_{o_s}(w)
/// (requests are routed in proportion to the successor's fractions); δ_w counts the other
/// workers that run a successor of an operator on `w`.
pub fn placement_loads(
    proj: &Projection,
    placement: &Placement,
    c: &Coefficients,
    budget: f64,
) -> Vec<WorkerLoad> {
    let n = placement.workers as usize;
    let fr = Fractions::of(placement);
    let mut loads: Vec<WorkerLoad> = (0..n)
        .map(|w| WorkerLoad {
            worker: WorkerId::from(w),
            load: 0.0,
            budget,
            exec: 0.0,
            local_rate: 0.0,
            remote_rate: 0.0,
            remote_destinations: 0,
        })
        .collect();
    let mut dest: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (o, op) in placement.operators.iter().enumerate() {
        let reach = fr.destinations(proj, o);
        for s in op.shares.iter().filter(|s| s.fraction > 0.0) {
            let w = s.worker.0;
            let l = &mut loads[w as usize];
            let (local, remote) = chained_rates(proj, &fr, o, s);
            l.exec += s.share;
            l.local_rate += local;
            l.remote_rate += remote;
            dest[w as usize].extend(reach.iter().filter(|&&d| d != w));
        }
    }
    for (l, d) in loads.iter_mut().zip(&mut dest) {
        d.sort_unstable();
        d.dedup();
        l.remote_destinations = d.len() as u32;
        l.load = l.exec
            + c.alpha * l.local_rate
            + c.beta * l.remote_rate
            + c.gamma * f64::from(l.remote_destinations);
    }
    loads
}

/// The chained requests per second that `o`'s share `s` sends: (staying on its worker, sent
/// to others), routed in proportion to each successor's fractions.
fn chained_rates(proj: &Projection, fr: &Fractions, o: usize, s: &Share) -> (f64, f64) {
    proj.edges[o].iter().fold((0.0, 0.0), |(local, remote), e| {
        let out = e.rate * s.fraction;
        let here = out * fr.get(e.to.index(), s.worker.0);
        (local + here, remote + out - here)
    })
}

/// Per operator, per share (in `shares` order): the time per second the executors of that
/// share are busy. An executor runs the share's executions (φ) and also sends their chained
/// requests, so the sender's dispatch cost is part of its busy time: α per local and β per
/// remote request, and γ for each other worker the operator reaches from there (Eq. 1's terms,
/// charged to the operator that sends). This is what the share's instances must cover, one
/// execution at a time each.
pub fn share_busy_time(
    proj: &Projection,
    placement: &Placement,
    c: &Coefficients,
) -> Vec<Vec<f64>> {
    let fr = Fractions::of(placement);
    placement
        .operators
        .iter()
        .enumerate()
        .map(|(o, op)| {
            let reach = fr.destinations(proj, o);
            op.shares
                .iter()
                .map(|s| {
                    if s.fraction <= 0.0 {
                        return 0.0;
                    }
                    let (local, remote) = chained_rates(proj, &fr, o, s);
                    let others = reach.iter().filter(|&&d| d != s.worker.0).count();
                    s.share + c.alpha * local + c.beta * remote + c.gamma * others as f64
                })
                .collect()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clasp_core::placement::OperatorPlacement;
    use clasp_core::spec::parse;
    use clasp_core::stats::ObservedStats;
    use clasp_core::{OperatorId, Pipeline};

    const C: Coefficients = Coefficients { alpha: 2.0, beta: 10.0, gamma: 1000.0, capacity: 1e6 };

    #[test]
    fn eq1_sums_execution_and_dispatch_costs() {
        let w = WorkerStats {
            exec_load: 500_000.0,
            local_rate: 1000.0,
            remote_rate: 200.0,
            remote_destinations: 3.0,
            ..WorkerStats::default()
        };
        assert_eq!(worker_load(&w, &C), 500_000.0 + 2_000.0 + 2_000.0 + 3_000.0);
    }

    fn chain() -> Pipeline {
        parse(
            r#"
[[source]]
name = "in"
rate = 100
[[operator]]
name = "a"
service_time_us = 10
[[operator]]
name = "b"
service_time_us = 20
[[stream]]
from = "in"
to = "a"
[[stream]]
from = "a"
to = "b"
"#,
            "c.toml",
        )
        .unwrap()
    }

    fn split(op: usize, demand: f64, parts: &[(u32, f64)]) -> OperatorPlacement {
        OperatorPlacement {
            operator: OperatorId::from(op),
            demand,
            shares: parts
                .iter()
                .map(|&(w, f)| Share {
                    worker: WorkerId(w),
                    share: f * demand,
                    fraction: f,
                    instances: 1,
                })
                .collect(),
        }
    }

    #[test]
    fn eq8_by_hand_on_a_split_chain() {
        let p = chain();
        let stats = ObservedStats::from_spec(&p, 100.0, 0.0);
        let proj = Projection::new(&p, &stats, 100.0, 0.0, 1).unwrap();
        // a: 100 req/s × 10 µs = 1000, all on w0. b: 100 × 20 = 2000, ¼ on w0, ¾ on w1.
        let placement = Placement {
            workers: 2,
            operators: vec![
                split(0, 1000.0, &[(0, 1.0)]),
                split(1, 2000.0, &[(0, 0.25), (1, 0.75)]),
            ],
        };
        let l = placement_loads(&proj, &placement, &C, 5.0);
        // w0: exec 1000 + 500; 100 chained requests, 25 local, 75 remote, 1 destination.
        assert_eq!((l[0].exec, l[0].local_rate, l[0].remote_rate), (1500.0, 25.0, 75.0));
        assert_eq!(l[0].remote_destinations, 1);
        assert_eq!(l[0].load, 1500.0 + 2.0 * 25.0 + 10.0 * 75.0 + 1000.0);
        // w1: only b's share, a terminal operator: no chained requests.
        assert_eq!((l[1].load, l[1].remote_destinations, l[1].budget), (1500.0, 0, 5.0));
        // The same costs, charged to the operator whose executors send them: a on w0 sends
        // all 100 chained requests (25 local, 75 remote, 1 other worker); b sends none.
        let busy = share_busy_time(&proj, &placement, &C);
        assert_eq!(busy, [vec![1000.0 + 2.0 * 25.0 + 10.0 * 75.0 + 1000.0], vec![500.0, 1500.0]]);
        // Summed per worker they are Eq. 8's loads.
        assert_eq!(busy[0][0] + busy[1][0], l[0].load);
    }
}
