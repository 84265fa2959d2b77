//! The second phase of Algorithm 1 (line 17): an exact minimum (S, Border) cut in the grown
//! subgraph `F`, by maximum flow — extended to budgets by branch and bound.
//!
//! The network has a super-source joined to every source of `S` and every border node joined to
//! a super-sink, both with a capacity above any cut. A stream `(u, v)` leaving `S ∪ Current`
//! has the capacity of its cost `C_ξ`; when `v` is in `Current`, the reverse edge `v → u` has
//! the large capacity too, so that the source side is closed under predecessors (Eq. 7). The
//! source side's operators are then exactly a device set minimising Eq. 5.
//!
//! **Tie rule.** Among device sets of minimum cost, edgecut keeps the one with the most
//! operators; if several have as many (possible only when a budget binds), the one whose
//! operator ids, ascending, are lexicographically smallest (operators declared earlier in the
//! spec first). Without a budget the minimum cuts are closed under union, so the rule selects
//! the unique largest one: the maximal source side, read off the residual graph.
//!
//! **Budgets.** A budget (`max_operators`, `max_load`) makes the problem a knapsack, which
//! Algorithm 1 only approximates (§V-B3 of the Planner paper). edgecut keeps budgets out of
//! the growth phase and solves them exactly: if the minimum cut exceeds the budget, it branches
//! on an operator of the cut (forced onto the device with its predecessors, or forced to the
//! cloud with its successors), solving a minimum cut with those operators pinned in each branch
//! and pruning branches whose cut already costs more than the best device set found. Without a
//! budget, or when the minimum cut fits it, that is one maximum flow; the branching is
//! exponential only in the worst case, in the operators the budget keeps off the device.

use super::flow::FlowNetwork;
use super::grow::{Grown, endpoint_key};
use clasp_core::{Endpoint, OperatorId, Pipeline};
use std::collections::HashMap;

/// The operators one device runs and what its cut costs.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Selection {
    /// Indexed by [`OperatorId`]: whether the device runs the operator.
    pub on_device: Vec<bool>,
    /// Eq. 5: the cost of the streams leaving `S ∪ on_device`.
    pub cost: f64,
}

impl Selection {
    fn count(&self) -> usize {
        self.on_device.iter().filter(|x| **x).count()
    }

    /// Whether `self` beats `other` under the tie rule, costs within `tol` counting as equal.
    fn beats(&self, other: &Selection, tol: f64) -> bool {
        if (self.cost - other.cost).abs() > tol {
            return self.cost < other.cost;
        }
        if self.count() != other.count() {
            return self.count() > other.count();
        }
        let ids = |s: &Selection| -> Vec<usize> {
            s.on_device.iter().enumerate().filter(|(_, x)| **x).map(|(i, _)| i).collect()
        };
        ids(self) < ids(other)
    }
}

/// The budgets of a constraint, with each operator's load on one device.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Budget {
    /// At most this many operators.
    pub max_operators: Option<usize>,
    /// At most this much load.
    pub max_load: Option<f64>,
    /// Items per second entering each operator on one device, indexed by [`OperatorId`].
    pub load: Vec<f64>,
}

impl Budget {
    fn is_set(&self) -> bool {
        self.max_operators.is_some() || self.max_load.is_some()
    }

    /// Whether the device set `set` stays within the budget.
    pub fn fits(&self, set: &[bool]) -> bool {
        let count = set.iter().filter(|x| **x).count();
        let load: f64 = self.load.iter().zip(set).filter(|(_, x)| **x).map(|(l, _)| l).sum();
        self.max_operators.is_none_or(|m| count <= m)
            && self.max_load.is_none_or(|m| load <= m + 1e-9 * m.max(1.0))
    }
}

/// Eq. 5: the cost of the streams from `S ∪ set` to outside `set`, `cost` being per stream.
pub(crate) fn cut_cost(p: &Pipeline, grown: &Grown, set: &[bool], cost: &[f64]) -> f64 {
    let inside = |e: Endpoint| match e {
        Endpoint::Operator(o) => set[o.index()],
        _ => grown.holds(e),
    };
    p.streams
        .iter()
        .filter(|s| inside(s.from) && !matches!(s.to, Endpoint::Operator(o) if set[o.index()]))
        .map(|s| cost[s.id.index()])
        .sum()
}

/// The device set of least cost within the budget, chosen by the tie rule.
pub(crate) fn best_cut(p: &Pipeline, grown: &Grown, cost: &[f64], budget: &Budget) -> Selection {
    let n = p.operators.len();
    let tol = 1e-9 * cut_cost(p, grown, &vec![false; n], cost).max(1.0);
    let mut best: Option<Selection> = None;
    let mut stack = vec![(vec![false; n], vec![false; n])];
    while let Some((forced_in, forced_out)) = stack.pop() {
        let Some(x) = min_cut(p, grown, cost, &forced_in, &forced_out) else { continue };
        if best.as_ref().is_some_and(|b| x.cost > b.cost + tol) {
            continue;
        }
        if !budget.is_set() || budget.fits(&x.on_device) {
            if best.as_ref().is_none_or(|b| x.beats(b, tol)) {
                best = Some(x);
            }
            continue;
        }
        let order = p.topological_order();
        let Some(&o) = order.iter().find(|o| x.on_device[o.index()] && !forced_in[o.index()])
        else {
            continue;
        };
        let mut out = forced_out.clone();
        mark_closure(p, grown, o, &mut out, Direction::Successors);
        stack.push((forced_in.clone(), out));
        let mut inn = forced_in;
        mark_closure(p, grown, o, &mut inn, Direction::Predecessors);
        if budget.fits(&inn) {
            stack.push((inn, forced_out));
        }
    }
    best.unwrap_or_else(|| Selection {
        on_device: vec![false; n],
        cost: cut_cost(p, grown, &vec![false; n], cost),
    })
}

#[derive(Clone, Copy)]
enum Direction {
    Predecessors,
    Successors,
}

/// Marks `o` and every operator of `Current` it reaches in `dir`.
fn mark_closure(p: &Pipeline, grown: &Grown, o: OperatorId, set: &mut [bool], dir: Direction) {
    let mut stack = vec![o];
    while let Some(x) = stack.pop() {
        if set[x.index()] || !grown.current[x.index()] {
            continue;
        }
        set[x.index()] = true;
        match dir {
            Direction::Predecessors => stack.extend(p.predecessors(x)),
            Direction::Successors => stack.extend(p.successors(x)),
        }
    }
}

/// Operators pinned to one side of the cut in a branch.
struct Pins<'a> {
    /// On the device.
    on_device: &'a [bool],
    /// In the cloud.
    in_cloud: &'a [bool],
}

/// The minimum (S, Border) cut of `F` with the operators of `forced_in` on the device side and
/// those of `forced_out` on the cloud side; the largest one of minimum cost. `None` if the
/// pins contradict each other.
fn min_cut(
    p: &Pipeline,
    grown: &Grown,
    cost: &[f64],
    forced_in: &[bool],
    forced_out: &[bool],
) -> Option<Selection> {
    let pins = Pins { on_device: forced_in, in_cloud: forced_out };
    let (mut net, node, big) = network(p, grown, cost, &pins);
    if net.max_flow(SOURCE, SINK) >= big {
        return None;
    }
    let side = net.maximal_source_side(SINK);
    let mut on_device = vec![false; p.operators.len()];
    for o in grown.operators() {
        let at = node.get(&endpoint_key(Endpoint::Operator(o)));
        on_device[o.index()] = at.is_some_and(|&i| side[i]);
    }
    let cost = cut_cost(p, grown, &on_device, cost);
    Some(Selection { on_device, cost })
}

/// The super-source and super-sink of the flow network.
const SOURCE: usize = 0;
const SINK: usize = 1;

/// The flow network of `F` (see the module documentation), the node of every endpoint in it,
/// and the capacity standing for "never cut".
fn network(
    p: &Pipeline,
    grown: &Grown,
    cost: &[f64],
    pins: &Pins<'_>,
) -> (FlowNetwork, HashMap<(u8, usize), usize>, f64) {
    let mut node: HashMap<(u8, usize), usize> = HashMap::new();
    let mut id = |e: Endpoint| {
        let next = node.len() + 2;
        *node.entry(endpoint_key(e)).or_insert(next)
    };
    let streams: Vec<_> = p.streams.iter().filter(|s| grown.holds(s.from)).collect();
    let big = 1.0 + 2.0 * streams.iter().map(|s| cost[s.id.index()]).sum::<f64>();
    let mut edges = Vec::new();
    for s in &streams {
        let (u, v) = (id(s.from), id(s.to));
        edges.push((u, v, cost[s.id.index()]));
        if grown.holds(s.to) {
            edges.push((v, u, big));
        }
    }
    edges.extend(grown.sources.iter().map(|&s| (SOURCE, id(Endpoint::Source(s)), big)));
    edges.extend(grown.border.iter().map(|&b| (id(b), SINK, big)));
    for o in grown.operators() {
        if pins.on_device[o.index()] {
            edges.push((SOURCE, id(Endpoint::Operator(o)), big));
        }
        if pins.in_cloud[o.index()] {
            edges.push((id(Endpoint::Operator(o)), SINK, big));
        }
    }
    let mut net = FlowNetwork::new(node.len() + 2);
    edges.into_iter().for_each(|(u, v, c)| net.add_edge(u, v, c));
    (net, node, big)
}
