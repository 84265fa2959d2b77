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
//! that the printed equation drops (DESIGN §4). The packer works with fractions rather than
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

    /// CLASP's placement spread over `n` workers (for the "-SP" ablations, which take their
    /// worker count from a baseline).
    ///
    /// Rule: the smallest per-worker budget (≤ the real one) at which the packing still fits in
    /// `n` workers, found by bisection to within 10⁻⁴ of the budget. Lowering the budget spreads
    /// the load over more workers, and the smallest budget that fits spreads it as evenly as the
    /// packing allows, so every worker ends up nearly equally loaded. The result uses `n`
    /// workers unless fewer already fit at that budget; it fails with `WorkerLimit` when `n`
    /// workers cannot hold the load even at the full budget.
    pub fn pack_into(&self, n: u32) -> Result<Placement, PackError> {
        let mut best = self.pack(n)?;
        if best.workers >= n {
            return Ok(best);
        }
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
