//! Operator placement by bin packing (§4.3.2, Eq. 9 as derived from Eq. 8).
//!
//! Operators are placed in reverse-topological order ([`crate::order`]), so the workers of an
//! operator's successors are known when it is placed. Placing a fraction `f` of operator `o` on
//! worker `w` costs, by Eq. 8,
//!
//! ```text
//! f · (D̃_o + Σ_{o_s} Ẽ_{o→o_s}·(α·σ_{o_s}(w) + β·(1 − σ_{o_s}(w))))  +  γ·g_w
//! ```
//!
//! where `g_w` counts the workers running a successor that `w` does not yet reach. Per unit of
//! demand (`φ = f·D̃_o`) that is the per-unit cost
//! `m_w = 1 + Σ_{o_s} (Ẽ_{o→o_s}/D̃_o)·(α σ_{o_s}(w) + β (1−σ_{o_s}(w)))`, so the most that fits
//! is `φ^max = (w_rem − γ·g_w) / m_w` — Eq. 9 with the chained-request rate per unit of demand
//! that the printed equation drops (docs/model-notes.md). The packer works with fractions rather than
//! demand so that operators with no execution demand but chained requests are placed too.
//! Shares are continuous.

use crate::capacity::Fractions;
use crate::config::PackingVariant;
use crate::projection::Projection;
use clasp_core::placement::{OperatorPlacement, Placement, Share};
use clasp_core::stats::Coefficients;
use clasp_core::{OperatorId, WorkerId};

/// A remaining capacity below this fraction of the budget is treated as full, so no worker
/// receives a sliver of an operator.
const DUST: f64 = 1e-9;
/// A remaining fraction below this is float rounding: it joins the last piece.
const FRACTION_EPSILON: f64 = 1e-12;
/// `pack_into` stops bisecting the budget when the interval is this fraction of the budget.
const BUDGET_TOLERANCE: f64 = 1e-4;

/// Why operators could not be packed.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum PackError {
    /// The load needs more workers than allowed.
    #[error("the load does not fit in {limit} workers")]
    WorkerLimit {
        /// The worker limit.
        limit: u32,
    },
    /// Even an empty worker cannot host any of the operator: reaching the workers of its
    /// successors alone (γ per destination) exceeds the budget.
    #[error(
        "operator {operator} fits on no worker: reaching its successors' {destinations} workers costs more than the per-worker budget"
    )]
    FanOut {
        /// The operator.
        operator: OperatorId,
        /// Workers its chained requests reach.
        destinations: u32,
    },
    /// The order places an operator before one of its successors, or misses one.
    #[error("the placement order is not reverse-topological")]
    BadOrder,
}

/// Packs a projected pipeline onto workers of budget `budget` each.
#[derive(Clone, Copy, Debug)]
pub struct Packer<'a> {
    /// Demands and chained-request rates.
    pub projection: &'a Projection,
    /// Reverse-topological order ([`crate::order::placement_order`]).
    pub order: &'a [OperatorId],
    /// α, β, γ (W̄ is not used: the budget is).
    pub coefficients: Coefficients,
    /// Per-worker budget: W̄ · headroom (µs/s).
    pub budget: f64,
    /// Next-fit or affinity-first.
    pub variant: PackingVariant,
}

impl Packer<'_> {
    /// Packs every operator's demand onto at most `max_workers` workers. The placement has
    /// `Share::instances == 0` everywhere; [`crate::parallelism`] fills them in.
    pub fn pack(&self, max_workers: u32) -> Result<Placement, PackError> {
        if !self.order_is_valid() {
            return Err(PackError::BadOrder);
        }
        let mut state = State::new(self, max_workers);
        for &o in self.order {
            state.place(o.index())?;
        }
        Ok(state.into_placement())
    }

    /// The packing spread over `n` workers: CLASP's placement once its worker count is known
    /// (and the "-SP" ablations', which take the count from a baseline).
    ///
    /// Rule: the smallest per-worker budget (≤ the real one) at which the packing still fits in
    /// `n` workers, found by bisection to within 10⁻⁴ of the budget. Lowering the budget spreads
    /// the load over more workers, and the smallest budget that fits spreads it as evenly as the
    /// packing allows, so every worker ends up nearly equally loaded: packed at the full budget,
    /// every worker but the last runs at the budget and the slack is all on the last, where a
    /// load above the estimate (a hot key group, a rise before its trigger) finds none. It
    /// fails with `WorkerLimit` when `n` workers cannot hold the load even at the full budget.
    pub fn pack_into(&self, n: u32) -> Result<Placement, PackError> {
        let mut best = self.pack(n)?;
        let (mut lo, mut hi) = (0.0, self.budget);
        while hi - lo > BUDGET_TOLERANCE * self.budget {
            let mid = 0.5 * (lo + hi);
            match (Packer { budget: mid, ..*self }).pack(n) {
                Ok(p) => (hi, best) = (mid, p),
                Err(_) => lo = mid,
            }
        }
        Ok(best)
    }

    /// Every operator exactly once, after all its successors.
    fn order_is_valid(&self) -> bool {
        let n = self.projection.len();
        let mut pos = vec![usize::MAX; n];
        for (i, o) in self.order.iter().enumerate() {
            match pos.get_mut(o.index()) {
                Some(p) if *p == usize::MAX => *p = i,
                _ => return false,
            }
        }
        self.order.len() == n
            && (0..n).all(|o| self.projection.edges[o].iter().all(|e| pos[e.to.index()] < pos[o]))
    }
}

/// One worker being filled.
#[derive(Clone, Debug)]
struct Bin {
    /// w_rem (µs/s).
    rem: f64,
    /// Other workers this one already sends chained requests to (sorted).
    reach: Vec<u32>,
}

/// The packing in progress.
struct State<'p, 'a> {
    packer: &'p Packer<'a>,
    bins: Vec<Bin>,
    fractions: Fractions,
    max_workers: u32,
}

impl<'p, 'a> State<'p, 'a> {
    fn new(packer: &'p Packer<'a>, max_workers: u32) -> Self {
        let fractions = Fractions::new(packer.projection.len());
        Self { packer, bins: Vec::new(), fractions, max_workers }
    }

    /// Places all of operator `o`: first on already-open workers (the current one for
    /// next-fit, every one by affinity otherwise), then on new workers.
    fn place(&mut self, o: usize) -> Result<(), PackError> {
        let dests = self.fractions.destinations(self.packer.projection, o);
        let mut left = 1.0;
        for w in self.open_candidates(o) {
            left = self.fill(o, w, left, &dests);
            if left == 0.0 {
                return Ok(());
            }
        }
        while left > 0.0 {
            if self.bins.len() as u32 >= self.max_workers {
                return Err(PackError::WorkerLimit { limit: self.max_workers });
            }
            self.bins.push(Bin { rem: self.packer.budget, reach: Vec::new() });
            let before = left;
            left = self.fill(o, self.bins.len() as u32 - 1, left, &dests);
            if left == before {
                let destinations = dests.len() as u32;
                return Err(PackError::FanOut { operator: OperatorId::from(o), destinations });
            }
        }
        Ok(())
    }

    /// Open workers to try before opening new ones.
    fn open_candidates(&self, o: usize) -> Vec<u32> {
        match self.packer.variant {
            PackingVariant::NextFit => {
                self.bins.len().checked_sub(1).map(|w| w as u32).into_iter().collect()
            }
            PackingVariant::Affinity => {
                let mut ws: Vec<(u32, f64)> =
                    (0..self.bins.len() as u32).map(|w| (w, self.affinity(o, w))).collect();
                ws.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
                ws.into_iter().map(|(w, _)| w).collect()
            }
        }
    }

    /// Σ_b Ẽ_{o→b}·(β−α)·σ_b(w): the dispatch cost saved by running `o` next to its successors
    /// on `w` (the reference implementation's affinity, up to the constant factor 1/D̃_o).
    fn affinity(&self, o: usize, w: u32) -> f64 {
        let c = &self.packer.coefficients;
        let edges = &self.packer.projection.edges[o];
        edges
            .iter()
            .map(|e| e.rate * (c.beta - c.alpha) * self.fractions.get(e.to.index(), w))
            .sum()
    }

    /// Eq. 8's cost of the whole of `o` on `w`, without fan-out: D̃_o·m_w.
    fn unit_cost(&self, o: usize, w: u32) -> f64 {
        let (c, proj) = (&self.packer.coefficients, self.packer.projection);
        let dispatch: f64 = proj.edges[o]
            .iter()
            .map(|e| {
                let local = self.fractions.get(e.to.index(), w);
                e.rate * (c.alpha * local + c.beta * (1.0 - local))
            })
            .sum();
        proj.demand[o] + dispatch
    }

    /// Puts as much as fits of the `left` fraction of `o` on worker `w`; returns what is left.
    fn fill(&mut self, o: usize, w: u32, left: f64, dests: &[u32]) -> f64 {
        let bin = &self.bins[w as usize];
        let new_dests = dests.iter().filter(|&&d| d != w && bin.reach.binary_search(&d).is_err());
        let fan = self.packer.coefficients.gamma * new_dests.count() as f64;
        let cost = self.unit_cost(o, w);
        let mut take = if cost * left + fan <= bin.rem {
            left
        } else {
            let avail = bin.rem - fan;
            if avail <= DUST * self.packer.budget {
                return left;
            }
            (avail / cost).min(left)
        };
        if left - take < FRACTION_EPSILON {
            take = left;
        }
        let bin = &mut self.bins[w as usize];
        bin.rem -= take * cost + fan;
        bin.reach.extend(dests.iter().filter(|&&d| d != w));
        bin.reach.sort_unstable();
        bin.reach.dedup();
        self.fractions.add(o, w, take);
        left - take
    }

    fn into_placement(self) -> Placement {
        let proj = self.packer.projection;
        let operators = (0..proj.len())
            .map(|o| OperatorPlacement {
                operator: OperatorId::from(o),
                demand: proj.demand[o],
                shares: self
                    .fractions
                    .of_op(o)
                    .iter()
                    .map(|&(w, f)| Share {
                        worker: WorkerId(w),
                        share: f * proj.demand[o],
                        fraction: f,
                        instances: 0,
                    })
                    .collect(),
            })
            .collect();
        Placement { workers: self.bins.len() as u32, operators }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capacity::placement_loads;
    use clasp_core::Pipeline;
    use clasp_core::spec::parse;
    use clasp_core::stats::ObservedStats;

    const B: f64 = 1000.0;

    /// Operators `(name, service µs)`, streams `(from, to)` with rates, source rate 1.
    fn pipeline(ops: &[(&str, f64)], streams: &[(&str, &str, f64)]) -> Pipeline {
        let mut s = String::from("[[source]]\nname = \"in\"\nrate = 1\n");
        for (n, t) in ops {
            s += &format!("[[operator]]\nname = \"{n}\"\nservice_time_us = {t}\n");
        }
        s += &format!("[[stream]]\nfrom = \"in\"\nto = \"{}\"\n", ops[0].0);
        for (f, t, r) in streams {
            s += &format!("[[stream]]\nfrom = \"{f}\"\nto = \"{t}\"\nrate = {r}\n");
        }
        parse(&s, "t.toml").unwrap()
    }

    fn projection(p: &Pipeline) -> Projection {
        let stats = ObservedStats::from_spec(p, 1.0, 0.0);
        Projection::new(p, &stats, 1.0, 0.0, 1).unwrap()
    }

    fn packer<'a>(proj: &'a Projection, order: &'a [OperatorId], c: Coefficients) -> Packer<'a> {
        Packer {
            projection: proj,
            order,
            coefficients: c,
            budget: B,
            variant: PackingVariant::NextFit,
        }
    }

    fn fractions(pl: &Placement, op: usize) -> Vec<f64> {
        pl.operators[op].shares.iter().map(|s| s.fraction).collect()
    }

    const FREE: Coefficients = Coefficients { alpha: 0.0, beta: 0.0, gamma: 0.0, capacity: B };

    #[test]
    fn one_operator_fills_workers_in_turn() {
        // Demand 2,500 (rate 1 × 2,500 µs) on budget 1,000: 0.4, 0.4, 0.2.
        let p = pipeline(&[("a", 2500.0)], &[]);
        let proj = projection(&p);
        let pl = packer(&proj, &[OperatorId(0)], FREE).pack(10).unwrap();
        assert_eq!(pl.workers, 3);
        for (f, want) in fractions(&pl, 0).iter().zip([0.4, 0.4, 0.2]) {
            assert!((f - want).abs() < 1e-12, "{f} vs {want}");
        }
        assert!((pl.operators[0].shares[2].share - 500.0).abs() < 1e-9);
        pl.check(&p).unwrap();
    }

    #[test]
    fn chain_split_by_hand() {
        // b (10 requests/s × 60 µs = 600) fills w0 to 400 left. a (500) calls b 10 times per second.
        // On w0 b is local: cost 500 + 10·α = 520 per unit → 400/520 fits. The rest goes to w1,
        // where b is remote: cost 500 + 10·β = 600 per unit, plus γ for the new destination w0.
        let p = pipeline(&[("a", 500.0), ("b", 60.0)], &[("a", "b", 10.0)]);
        let proj = projection(&p);
        let c = Coefficients { alpha: 2.0, beta: 10.0, gamma: 50.0, capacity: B };
        let order = [OperatorId(1), OperatorId(0)];
        let pl = packer(&proj, &order, c).pack(10).unwrap();
        assert_eq!(pl.workers, 2);
        let f0 = 400.0 / 520.0;
        let got = fractions(&pl, 0);
        assert!((got[0] - f0).abs() < 1e-12 && (got[1] - (1.0 - f0)).abs() < 1e-12, "{got:?}");
        let loads = placement_loads(&proj, &pl, &c, B);
        assert!((loads[0].load - 1000.0).abs() < 1e-9);
        let w1 = (1.0 - f0) * 600.0 + 50.0;
        assert!((loads[1].load - w1).abs() < 1e-9, "{} vs {w1}", loads[1].load);
        assert_eq!((loads[0].remote_destinations, loads[1].remote_destinations), (0, 1));
    }

    #[test]
    fn errors_name_the_cause() {
        let p = pipeline(&[("a", 500.0), ("b", 60.0)], &[("a", "b", 10.0)]);
        let proj = projection(&p);
        let order = [OperatorId(1), OperatorId(0)];
        let tight = Packer { budget: 700.0, ..packer(&proj, &order, FREE) };
        assert_eq!(tight.pack(1), Err(PackError::WorkerLimit { limit: 1 }));
        // b on two workers; a cannot reach both within the budget.
        let fan = Coefficients { gamma: 400.0, ..FREE };
        let pl = Packer { budget: 500.0, ..packer(&proj, &order, fan) }.pack(10);
        assert_eq!(pl, Err(PackError::FanOut { operator: OperatorId(0), destinations: 2 }));
        let bad = packer(&proj, &[OperatorId(0), OperatorId(1)], FREE);
        assert_eq!(bad.pack(10), Err(PackError::BadOrder));
        assert_eq!(packer(&proj, &[OperatorId(1)], FREE).pack(10), Err(PackError::BadOrder));
    }

    #[test]
    fn operators_without_demand_are_placed_whole() {
        let p = pipeline(&[("a", 0.0), ("b", 1500.0)], &[("a", "b", 1.0)]);
        let proj = projection(&p);
        let order = [OperatorId(1), OperatorId(0)];
        let pl = packer(&proj, &order, FREE).pack(10).unwrap();
        assert_eq!(fractions(&pl, 0), [1.0]);
        assert_eq!(pl.workers, 2);
    }

    #[test]
    fn pack_into_spreads_evenly_over_n() {
        // Demand 2,500: the smallest budget that fits 5 workers is 500 each.
        let p = pipeline(&[("a", 2500.0)], &[]);
        let proj = projection(&p);
        let pl = packer(&proj, &[OperatorId(0)], FREE).pack_into(5).unwrap();
        assert_eq!(pl.workers, 5);
        for f in fractions(&pl, 0) {
            assert!((f - 0.2).abs() < 1e-3, "{f}");
        }
        assert_eq!(
            packer(&proj, &[OperatorId(0)], FREE).pack_into(2),
            Err(PackError::WorkerLimit { limit: 2 })
        );
        assert_eq!(packer(&proj, &[OperatorId(0)], FREE).pack_into(3).unwrap().workers, 3);
    }

    #[test]
    fn affinity_goes_back_to_the_worker_running_the_successor() {
        // Order t2, t1, x, a. t2 (1,500) fills w0 and half of w1; t1 (400) leaves w1 100.
        // x calls t2 on w0 and w1: on w1 the new destination w0 costs γ = 200 > 100, so x
        // opens w2. a (50) calls t1, which runs only on w1.
        let p = pipeline(
            &[("a", 50.0), ("t1", 400.0), ("t2", 1500.0), ("x", 10.0)],
            &[("a", "t1", 1.0), ("a", "x", 0.0), ("x", "t2", 1.0)],
        );
        let proj = projection(&p);
        let c = Coefficients { alpha: 1.0, beta: 20.0, gamma: 200.0, capacity: B };
        let order = [OperatorId(2), OperatorId(1), OperatorId(3), OperatorId(0)];
        let on = |pl: &Placement, op: usize| -> Vec<u32> {
            pl.operators[op].shares.iter().map(|s| s.worker.0).collect()
        };
        // Next-fit stays on the current worker w2, calling t1 remotely (cost 50 + β).
        let nf = packer(&proj, &order, c).pack(10).unwrap();
        assert_eq!((nf.workers, on(&nf, 3), on(&nf, 0)), (3, vec![2], vec![2]));
        // Affinity (β − α)·σ_t1(w1) > 0 sends a back to w1, where its call is local (50 + α).
        let aff = Packer { variant: PackingVariant::Affinity, ..packer(&proj, &order, c) };
        let pl = aff.pack(10).unwrap();
        assert_eq!((pl.workers, on(&pl, 0)), (3, vec![1]));
        for pl in [&nf, &pl] {
            for l in placement_loads(&proj, pl, &c, B) {
                assert!(l.load <= B * (1.0 + 1e-12), "{l:?}");
            }
        }
        let w1 = &placement_loads(&proj, &pl, &c, B)[1];
        assert!((w1.load - (500.0 + 400.0 + 51.0)).abs() < 1e-9, "{w1:?}");
    }
}
