//! An independent reference for edgecut: Eq. 2 by recursion, Eq. 7 checked literally, and the
//! best device set of each device by enumerating every subset of operators.

#![allow(dead_code)]

use clasp_core::{Endpoint, OperatorKind, Pipeline};
use clasp_plan::edgecut::{Device, Devices};

/// Per stream, the items per second on device `d` (Eq. 2, written out recursively).
pub fn device_weights(p: &Pipeline, devices: &Devices, d: &Device, sel: &[f64]) -> Vec<f64> {
    let rates = source_rates(p);
    let holders = |s: usize| {
        devices.devices.iter().filter(|x| x.sources.iter().any(|y| y.index() == s)).count()
    };
    let weight_of_source = |s: usize| {
        if d.sources.iter().any(|x| x.index() == s) { rates[s] / holders(s) as f64 } else { 0.0 }
    };
    fn out_of(p: &Pipeline, op: usize, sel: &[f64], src: &dyn Fn(usize) -> f64) -> f64 {
        let inputs: Vec<f64> =
            p.inputs(p.operators[op].id).iter().map(|s| weight(p, s.index(), sel, src)).collect();
        let combined = match p.operators[op].kind {
            OperatorKind::Connect => inputs.iter().copied().fold(f64::INFINITY, f64::min),
            _ => inputs.iter().sum(),
        };
        sel[op] * combined
    }
    fn weight(p: &Pipeline, stream: usize, sel: &[f64], src: &dyn Fn(usize) -> f64) -> f64 {
        match p.streams[stream].from {
            Endpoint::Source(s) => src(s.index()),
            Endpoint::Operator(o) => out_of(p, o.index(), sel, src),
            Endpoint::Sink(_) => unreachable!("sinks produce nothing"),
        }
    }
    (0..p.streams.len()).map(|s| weight(p, s, sel, &weight_of_source)).collect()
}

/// Source rates: the spec's, else the mean of those given, else 1.
pub fn source_rates(p: &Pipeline) -> Vec<f64> {
    let given: Vec<f64> = p.sources.iter().filter_map(|s| s.rate).collect();
    let fill = if given.is_empty() { 1.0 } else { given.iter().sum::<f64>() / given.len() as f64 };
    p.sources.iter().map(|s| s.rate.unwrap_or(fill)).collect()
}

/// Selectivities from the spec: the hint, else 1.
pub fn spec_selectivities(p: &Pipeline) -> Vec<f64> {
    p.operators.iter().map(|o| o.selectivity.unwrap_or(1.0)).collect()
}

/// Eq. 7 for device `d` and operator set `set` (by index): closed under predecessors, fed only
/// by the device's sources, every operator admitted by the constraint, budgets met. Sinks are
/// not operators, so they are never in `set`.
pub fn eq7(p: &Pipeline, d: &Device, set: &[bool], w: &[f64]) -> Result<(), String> {
    let replicable = [
        OperatorKind::Map,
        OperatorKind::FlatMap,
        OperatorKind::Filter,
        OperatorKind::Split,
        OperatorKind::Select,
        OperatorKind::Union,
        OperatorKind::User,
    ];
    let c = &d.constraint;
    for (i, op) in p.operators.iter().enumerate().filter(|(i, _)| set[*i]) {
        if op.stateful || !replicable.contains(&op.kind) {
            return Err(format!("{} is not locally replicable", op.name));
        }
        if c.kinds.as_ref().is_some_and(|k| !k.contains(&op.kind)) {
            return Err(format!("{}: kind not supported", op.name));
        }
        let pattern_ok = |pat: &String| match pat.strip_suffix('*') {
            Some(prefix) => op.function.starts_with(prefix),
            None => *pat == op.function,
        };
        if c.functions.as_ref().is_some_and(|f| !f.iter().any(pattern_ok)) {
            return Err(format!("{}: function not supported", op.name));
        }
        for s in p.inputs(op.id) {
            let ok = match p.stream(*s).from {
                Endpoint::Source(src) => d.sources.contains(&src),
                Endpoint::Operator(o) => set[o.index()],
                Endpoint::Sink(_) => false,
            };
            if !ok {
                return Err(format!(
                    "{}: an input is neither a device source nor on the device",
                    op.name
                ));
            }
        }
        let _ = i;
    }
    let count = set.iter().filter(|x| **x).count();
    if c.max_operators.is_some_and(|m| count > m) {
        return Err(format!("{count} operators exceed the budget"));
    }
    let load: f64 = p
        .operators
        .iter()
        .filter(|o| set[o.id.index()])
        .flat_map(|o| p.inputs(o.id).iter().map(|s| w[s.index()]))
        .sum();
    if c.max_load.is_some_and(|m| load > m + 1e-9 * m.max(1.0)) {
        return Err(format!("load {load} exceeds the budget"));
    }
    Ok(())
}

/// Eq. 5 for one device: link cost times the weight of every stream leaving `S ∪ set`.
pub fn cost(p: &Pipeline, d: &Device, set: &[bool], w: &[f64]) -> f64 {
    let inside = |e: Endpoint| match e {
        Endpoint::Source(s) => d.sources.contains(&s),
        Endpoint::Operator(o) => set[o.index()],
        Endpoint::Sink(_) => false,
    };
    let crossing: f64 = p
        .streams
        .iter()
        .filter(|s| inside(s.from) && !matches!(s.to, Endpoint::Operator(o) if set[o.index()]))
        .map(|s| w[s.id.index()])
        .sum();
    d.link_cost * crossing
}

/// The best feasible set of one device and every feasible set of minimum cost.
#[derive(Debug)]
pub struct Best {
    /// The set the tie rule picks (most operators, then smallest ids), as operator names.
    pub chosen: Vec<String>,
    /// Its cost.
    pub cost: f64,
    /// How many feasible sets reach the minimum cost.
    pub ties: usize,
}

/// Enumerates every subset of operators of `p` for device `d`.
pub fn best(p: &Pipeline, devices: &Devices, d: &Device, sel: &[f64]) -> Best {
    let w = device_weights(p, devices, d, sel);
    let n = p.operators.len();
    let all_cloud = cost(p, d, &vec![false; n], &w);
    let tol = 1e-9 * all_cloud.max(1.0);
    let mut feasible: Vec<(f64, Vec<usize>)> = Vec::new();
    for mask in 0u32..(1 << n) {
        let set: Vec<bool> = (0..n).map(|i| mask & (1 << i) != 0).collect();
        if eq7(p, d, &set, &w).is_ok() {
            feasible.push((cost(p, d, &set, &w), (0..n).filter(|&i| set[i]).collect()));
        }
    }
    let min = feasible.iter().map(|f| f.0).fold(f64::INFINITY, f64::min);
    let mut ties: Vec<Vec<usize>> =
        feasible.into_iter().filter(|f| f.0 <= min + tol).map(|f| f.1).collect();
    ties.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    let chosen = ties[0].iter().map(|&i| p.operators[i].name.clone()).collect();
    Best { chosen, cost: min, ties: ties.len() }
}
