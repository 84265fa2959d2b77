//! The result of a cut: one part per device (sub)group, the cloud part, and a connector on every
//! cut stream — what an edge runner and the cloud runtime each need to run their share.

use super::devices::Constraint;
use clasp_core::{Endpoint, OperatorId, Pipeline, SourceId, StreamId};

/// A stream from a device part to the cloud: the device side sends it, the cloud ingests it.
#[derive(Clone, Debug, PartialEq)]
pub struct Connector {
    /// The pipeline stream that is cut.
    pub stream: StreamId,
    /// Its producer, on the device: one of the group's sources or operators.
    pub from: Endpoint,
    /// Its consumer, in the cloud: an operator or a sink.
    pub to: Endpoint,
    /// `W_st(ξ)` on one device of the group: items per second (Eq. 2 with the device's share
    /// of its sources' rates).
    pub weight: f64,
    /// `Σ_d W_res(d, ς) · W_st(ξ)` over the devices of the group.
    pub cost: f64,
}

/// What every device of one (sub)group runs.
#[derive(Clone, Debug, PartialEq)]
pub struct DevicePart {
    /// Index of the device group (same sources); subgroups of one group share it.
    pub group: usize,
    /// Device ids, in file order.
    pub devices: Vec<String>,
    /// `g⁻¹(d)`: the sources whose raw data each device holds, sorted.
    pub sources: Vec<SourceId>,
    /// The constraint the devices share.
    pub constraint: Constraint,
    /// `Σ_d W_res(d, ς)` over the devices.
    pub link_cost: f64,
    /// The operators each device runs (one replica per device), in topological order.
    pub operators: Vec<OperatorId>,
    /// Streams inside each device: from a source or device operator to a device operator.
    pub streams: Vec<StreamId>,
    /// The cut streams leaving each device, in stream order.
    pub connectors: Vec<Connector>,
    /// The group's edge→cloud cost: the sum of its connectors' costs (Eq. 5 over its devices).
    pub cost: f64,
    /// What the group's devices would cost sending all their raw data to the cloud.
    pub all_cloud_cost: f64,
}

/// What the cloud runs.
#[derive(Clone, Debug, PartialEq)]
pub struct CloudPart {
    /// The operators the cloud runs, in topological order: every operator that some raw data
    /// reaches without having passed it on a device. An operator may run both on the devices
    /// of one group and in the cloud, for the data of devices that do not run it.
    pub operators: Vec<OperatorId>,
    /// Sources whose raw data is in the cloud.
    pub sources: Vec<SourceId>,
    /// Streams inside the cloud: from a cloud source or operator to a cloud operator or sink.
    pub streams: Vec<StreamId>,
    /// Streams arriving from devices through connectors (distinct, in stream order).
    pub ingress: Vec<StreamId>,
}

/// A pipeline cut between edge devices and the cloud.
#[derive(Clone, Debug, PartialEq)]
pub struct EdgeCut {
    /// One part per device subgroup, groups in order of their first device in the file.
    pub groups: Vec<DevicePart>,
    /// The cloud's part.
    pub cloud: CloudPart,
    /// Total edge→cloud cost (Eq. 3): the sum over groups.
    pub cost: f64,
    /// The edge→cloud cost of running everything in the cloud.
    pub all_cloud_cost: f64,
}

impl EdgeCut {
    /// The relative saving against all-in-cloud, `1 − cost / all_cloud_cost` (0 if nothing
    /// would cross the links anyway).
    pub fn saving(&self) -> f64 {
        if self.all_cloud_cost > 0.0 { 1.0 - self.cost / self.all_cloud_cost } else { 0.0 }
    }

    /// The device part serving device `id`.
    pub fn part_of(&self, id: &str) -> Option<&DevicePart> {
        self.groups.iter().find(|g| g.devices.iter().any(|d| d == id))
    }
}

/// The cloud part of a pipeline whose device parts are `groups`.
pub(crate) fn cloud_part(
    p: &Pipeline,
    groups: &[DevicePart],
    cloud_sources: &[SourceId],
) -> CloudPart {
    let n = p.operators.len();
    let mut in_cloud = vec![false; n];
    for &s in cloud_sources {
        mark_reachable(p, s, &vec![false; n], &mut in_cloud);
    }
    for g in groups {
        let mut on_device = vec![false; n];
        g.operators.iter().for_each(|o| on_device[o.index()] = true);
        for &s in &g.sources {
            mark_reachable(p, s, &on_device, &mut in_cloud);
        }
    }
    let cloud_end = |e: Endpoint| match e {
        Endpoint::Source(s) => cloud_sources.contains(&s),
        Endpoint::Operator(o) => in_cloud[o.index()],
        Endpoint::Sink(_) => true,
    };
    let streams = p.streams.iter().filter(|s| cloud_end(s.from) && cloud_end(s.to)).map(|s| s.id);
    let mut ingress: Vec<StreamId> =
        groups.iter().flat_map(|g| g.connectors.iter().map(|c| c.stream)).collect();
    ingress.sort();
    ingress.dedup();
    CloudPart {
        operators: p.topological_order().iter().copied().filter(|o| in_cloud[o.index()]).collect(),
        sources: cloud_sources.to_vec(),
        streams: streams.collect(),
        ingress,
    }
}

/// Marks in `in_cloud` the operators the data of source `s` reaches once past `on_device`.
fn mark_reachable(p: &Pipeline, s: SourceId, on_device: &[bool], in_cloud: &mut [bool]) {
    let mut stack: Vec<OperatorId> =
        p.source_outputs(s).iter().filter_map(|st| p.stream(*st).to.operator()).collect();
    let mut seen = vec![false; p.operators.len()];
    while let Some(o) = stack.pop() {
        if std::mem::replace(&mut seen[o.index()], true) {
            continue;
        }
        if !on_device[o.index()] {
            in_cloud[o.index()] = true;
        }
        stack.extend(p.successors(o));
    }
}
