//! Placement order (§4.3.2): reverse-topological, so that when an operator is placed the
//! workers of all its successors, and with them its chained-request cost, are already known.

use crate::projection::Projection;
use clasp_core::{OperatorId, Pipeline};

/// The order in which operators are placed.
///
/// A depth-first traversal from the terminal operators (those with no operator successor) over
/// reverse edges. At each operator its predecessors are visited by descending chained-request
/// rate, so heavily communicating operators are placed one after the other (and so tend to share
/// a worker). An operator is placed only once all its successors are: if one is still unplaced
/// the operator is skipped, and it is reached again from that successor once it is placed.
/// Terminals are started in descending projected request rate. Every tie is broken by the
/// smaller operator id, so the order is deterministic.
pub fn placement_order(p: &Pipeline, proj: &Projection) -> Vec<OperatorId> {
    let n = p.operators.len();
    let preds = sorted_predecessors(p, proj);
    let mut unplaced_succ: Vec<usize> =
        (0..n).map(|o| p.successors(OperatorId::from(o)).count()).collect();
    let mut placed = vec![false; n];
    let mut order = Vec::with_capacity(n);
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for t in terminals(p, proj) {
        if placed[t] {
            continue;
        }
        place(t, p, &mut placed, &mut unplaced_succ, &mut order);
        stack.push((t, 0));
        while let Some((o, next)) = stack.last_mut() {
            let Some(&q) = preds[*o].get(*next) else {
                stack.pop();
                continue;
            };
            *next += 1;
            if !placed[q] && unplaced_succ[q] == 0 {
                place(q, p, &mut placed, &mut unplaced_succ, &mut order);
                stack.push((q, 0));
            }
        }
    }
    order
}

fn place(
    o: usize,
    p: &Pipeline,
    placed: &mut [bool],
    unplaced_succ: &mut [usize],
    order: &mut Vec<OperatorId>,
) {
    placed[o] = true;
    order.push(OperatorId::from(o));
    for q in p.predecessors(OperatorId::from(o)) {
        unplaced_succ[q.index()] -= 1;
    }
}

/// Each operator's predecessors, by descending rate of the stream into it, then by id.
fn sorted_predecessors(p: &Pipeline, proj: &Projection) -> Vec<Vec<usize>> {
    let mut preds: Vec<Vec<(usize, f64)>> = vec![Vec::new(); p.operators.len()];
    for (from, edges) in proj.edges.iter().enumerate() {
        for e in edges {
            preds[e.to.index()].push((from, e.rate));
        }
    }
    preds
        .into_iter()
        .map(|mut v| {
            v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            v.into_iter().map(|(o, _)| o).collect()
        })
        .collect()
}

/// Terminal operators by descending projected rate, then id.
fn terminals(p: &Pipeline, proj: &Projection) -> Vec<usize> {
    let mut t: Vec<usize> = p.terminal_operators().iter().map(|o| o.index()).collect();
    t.sort_by(|&a, &b| proj.rate[b].total_cmp(&proj.rate[a]).then(a.cmp(&b)));
    t
}

/// Whether `order` places every operator of `p` exactly once and each after all its
/// successors.
pub fn is_reverse_topological(p: &Pipeline, order: &[OperatorId]) -> bool {
    let mut pos = vec![usize::MAX; p.operators.len()];
    for (i, o) in order.iter().enumerate() {
        match pos.get_mut(o.index()) {
            Some(slot) if *slot == usize::MAX => *slot = i,
            _ => return false,
        }
    }
    pos.iter().all(|&i| i != usize::MAX)
        && p.operators
            .iter()
            .all(|o| p.successors(o.id).all(|s| pos[s.index()] < pos[o.id.index()]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clasp_core::spec::{load, parse};
    use clasp_core::stats::ObservedStats;
    use std::path::PathBuf;

    fn order_names(p: &Pipeline) -> Vec<String> {
        let stats = ObservedStats::from_spec(p, 100.0, 400.0);
        let proj = Projection::new(p, &stats, 100.0, 400.0, 1).unwrap();
        let order = placement_order(p, &proj);
        assert!(is_reverse_topological(p, &order));
        order.iter().map(|o| p.operator(*o).name.clone()).collect()
    }

    #[test]
    fn fig6_order_is_e_c_b_d_a() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../pipelines/fig6.toml");
        let p = load(&path).unwrap();
        assert_eq!(order_names(&p), ["E", "C", "B", "D", "A"]);
    }

    #[test]
    fn every_spec_gives_a_reverse_topological_order() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../pipelines");
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let p = load(&path).unwrap();
                assert_eq!(order_names(&p).len(), p.operators.len(), "{}", path.display());
            }
        }
    }

    #[test]
    fn ties_break_by_operator_id() {
        // Two terminals with equal rate and a fork with equal edge rates.
        let p = parse(
            r#"
[[source]]
name = "in"
[[operator]]
name = "root"
[[operator]]
name = "y"
[[operator]]
name = "x"
[[stream]]
from = "in"
to = "root"
[[stream]]
from = "root"
to = "y"
[[stream]]
from = "root"
to = "x"
"#,
            "t.toml",
        )
        .unwrap();
        assert_eq!(order_names(&p), ["y", "x", "root"]);
    }

    #[test]
    fn bad_orders_are_detected() {
        let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../pipelines/wc.toml");
        let p = load(&path).unwrap();
        assert!(is_reverse_topological(&p, &[OperatorId(1), OperatorId(0)]));
        assert!(!is_reverse_topological(&p, &[OperatorId(0), OperatorId(1)]));
        assert!(!is_reverse_topological(&p, &[OperatorId(1)]));
        assert!(!is_reverse_topological(&p, &[OperatorId(1), OperatorId(1)]));
    }
}
