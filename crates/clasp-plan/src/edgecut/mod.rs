//! edgecut: which part of a pipeline runs on edge devices and which in the cloud, so that as
//! little as possible crosses the wide-area links (the Planner paper; docs/model-notes.md).
//!
//! - [`model`]: selectivity, local replicability and aggregation per operator (Table I) and
//!   stream weights by Eq. 2;
//! - [`devices`]: the devices file — devices, their sources `g⁻¹(d)`, link costs `W_res` and
//!   constraints `C_d`;
//! - [`groups`]: devices with the same sources planned once, subgroups by constraint (§V-B3);
//! - Algorithm 1 in two phases: growing the largest admissible source-rooted set (`grow`), then
//!   an exact minimum (S, Border) cut by maximum flow (`cut`, on `flow`);
//! - [`part`]: the result — one [`DevicePart`] per subgroup with a [`Connector`] on each cut
//!   stream, and the [`CloudPart`]; [`report`] and [`dot`] render it.
//!
//! Every device set edgecut returns satisfies Eq. 7: it is closed under predecessors within the
//! device part (fed only by the device's sources), meets the device constraint, holds no sink;
//! and it has the least Eq. 5 cost among all such sets, ties broken by the rule in `cut`.

mod cut;
pub mod devices;
pub mod dot;
mod flow;
pub mod groups;
mod grow;
pub mod model;
pub mod part;
pub mod report;

pub use devices::{Constraint, Device, Devices, DevicesError};
pub use groups::{DeviceGroup, Subgroup, device_groups};
pub use model::{CostModel, ModelError, OperatorModel, SelectivityOrigin};
pub use part::{CloudPart, Connector, DevicePart, EdgeCut};
pub use report::CutReport;

use clasp_core::{Endpoint, Pipeline, SourceId, StreamId};
use cut::{Budget, Selection};
use grow::Grown;

/// Cuts pipeline `p` between `devices` and the cloud under the cost model `model`.
///
/// Each device group is grown once under the rules every device obeys (local replicability,
/// Eq. 6); each subgroup then grows within it under its own constraint and takes a minimum
/// cut, so the work grows with the number of subgroups, not of devices.
pub fn cut(p: &Pipeline, model: &CostModel, devices: &Devices) -> EdgeCut {
    let inputs = Inputs { p, model, devices };
    let mut parts = Vec::new();
    for (g, group) in device_groups(devices).iter().enumerate() {
        let parent = grow::grow(p, &group.sources, |o| model.operator(o).replicable);
        for sub in &group.subgroups {
            parts.push(inputs.plan_subgroup(g, &group.sources, sub, &parent));
        }
    }
    let cloud = part::cloud_part(p, &parts, &devices.cloud_sources);
    EdgeCut {
        cost: parts.iter().map(|g| g.cost).sum(),
        all_cloud_cost: parts.iter().map(|g| g.all_cloud_cost).sum(),
        groups: parts,
        cloud,
    }
}

/// What every subgroup is planned from.
struct Inputs<'a> {
    p: &'a Pipeline,
    model: &'a CostModel,
    devices: &'a Devices,
}

impl Inputs<'_> {
    /// Algorithm 1 for subgroup `sub` of group `g` (sources `sources`): growth within the
    /// group's set `parent`, then the best cut.
    fn plan_subgroup(
        &self,
        g: usize,
        sources: &[SourceId],
        sub: &Subgroup,
        parent: &Grown,
    ) -> DevicePart {
        let (p, constraint) = (self.p, &sub.constraint);
        let grown = grow::grow(p, sources, |o| {
            parent.current[o.index()]
                && constraint.admits(p.operator(o), self.model.operator(o).replicable)
        });
        let weights = self.device_weights(sources);
        let link_cost: f64 = sub.devices.iter().map(|&d| self.devices.devices[d].link_cost).sum();
        let cost: Vec<f64> = weights.iter().map(|w| link_cost * w).collect();
        let budget = Budget {
            max_operators: constraint.max_operators,
            max_load: constraint.max_load,
            load: operator_loads(p, &weights),
        };
        let chosen = cut::best_cut(p, &grown, &cost, &budget);
        let all_cloud = cut::cut_cost(p, &grown, &vec![false; p.operators.len()], &cost);
        DevicePart {
            group: g,
            devices: sub.devices.iter().map(|&d| self.devices.devices[d].id.clone()).collect(),
            sources: sources.to_vec(),
            constraint: constraint.clone(),
            link_cost,
            operators: p
                .topological_order()
                .iter()
                .copied()
                .filter(|o| chosen.on_device[o.index()])
                .collect(),
            streams: device_streams(p, &grown, &chosen),
            connectors: connectors(p, &grown, &chosen, &weights, link_cost),
            cost: chosen.cost,
            all_cloud_cost: all_cloud,
        }
    }

    /// Eq. 2 on one device holding `sources`: each weighs its rate times the device's share.
    fn device_weights(&self, sources: &[SourceId]) -> Vec<f64> {
        let (model, devices) = (self.model, self.devices);
        model.weights_from(self.p, |s| {
            if sources.contains(&s) {
                model.source_rates[s.index()] * devices.share(s)
            } else {
                0.0
            }
        })
    }
}

/// Items per second entering each operator, given stream weights.
fn operator_loads(p: &Pipeline, weights: &[f64]) -> Vec<f64> {
    p.operators.iter().map(|op| p.inputs(op.id).iter().map(|s| weights[s.index()]).sum()).collect()
}

fn on_device(chosen: &Selection, grown: &Grown, e: Endpoint) -> bool {
    match e {
        Endpoint::Operator(o) => chosen.on_device[o.index()],
        _ => grown.holds(e),
    }
}

/// Streams with both ends on the device.
fn device_streams(p: &Pipeline, grown: &Grown, chosen: &Selection) -> Vec<StreamId> {
    p.streams
        .iter()
        .filter(|s| {
            on_device(chosen, grown, s.from)
                && matches!(s.to, Endpoint::Operator(o) if chosen.on_device[o.index()])
        })
        .map(|s| s.id)
        .collect()
}

/// A connector on every stream leaving the device.
fn connectors(
    p: &Pipeline,
    grown: &Grown,
    chosen: &Selection,
    weights: &[f64],
    link_cost: f64,
) -> Vec<Connector> {
    let leaves = |to: Endpoint| !matches!(to, Endpoint::Operator(o) if chosen.on_device[o.index()]);
    p.streams
        .iter()
        .filter(|s| on_device(chosen, grown, s.from) && leaves(s.to))
        .map(|s| Connector {
            stream: s.id,
            from: s.from,
            to: s.to,
            weight: weights[s.id.index()],
            cost: link_cost * weights[s.id.index()],
        })
        .collect()
}
