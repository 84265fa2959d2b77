//! The serialisable summary of a cut, by name: what `clasp cut --json` prints.

use super::part::EdgeCut;
use clasp_core::{Endpoint, OperatorId, Pipeline, SourceId};
use serde::Serialize;

/// A cut, by name.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CutReport {
    /// The pipeline's name.
    pub pipeline: String,
    /// One entry per device subgroup.
    pub groups: Vec<GroupReport>,
    /// The operators the cloud runs, in topological order.
    pub cloud: Vec<String>,
    /// Sources whose raw data is in the cloud.
    pub cloud_sources: Vec<String>,
    /// Every cut stream of every group.
    pub cut_streams: Vec<CutStreamReport>,
    /// Total edge→cloud cost per second.
    pub cost: f64,
    /// Edge→cloud cost per second with everything in the cloud.
    pub all_cloud_cost: f64,
    /// `1 − cost / all_cloud_cost`.
    pub saving: f64,
}

/// One device subgroup.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupReport {
    /// Index of the device group (same sources); subgroups share it.
    pub group: usize,
    /// Device ids.
    pub devices: Vec<String>,
    /// Sources whose raw data each device holds.
    pub sources: Vec<String>,
    /// Operators each device runs, in topological order.
    pub operators: Vec<String>,
    /// The group's edge→cloud cost.
    pub cost: f64,
    /// The group's edge→cloud cost with everything in the cloud.
    pub all_cloud_cost: f64,
}

/// One cut stream of one group.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CutStreamReport {
    /// Index into `groups` of the subgroup whose devices send it.
    pub group: usize,
    /// Producer (a source or operator on the devices).
    pub from: String,
    /// Consumer (an operator or sink in the cloud).
    pub to: String,
    /// Items per second on one device.
    pub weight: f64,
    /// How many devices send it.
    pub devices: usize,
    /// Its cost over all those devices' links.
    pub cost: f64,
}

impl CutReport {
    /// The report of `cut`, a cut of `p`.
    pub fn new(p: &Pipeline, cut: &EdgeCut) -> Self {
        let ops = |v: &[OperatorId]| v.iter().map(|o| p.operator(*o).name.clone()).collect();
        let srcs = |v: &[SourceId]| v.iter().map(|s| p.sources[s.index()].name.clone()).collect();
        let name = |e: Endpoint| p.endpoint_name(e).to_string();
        let groups = cut
            .groups
            .iter()
            .map(|g| GroupReport {
                group: g.group,
                devices: g.devices.clone(),
                sources: srcs(&g.sources),
                operators: ops(&g.operators),
                cost: g.cost,
                all_cloud_cost: g.all_cloud_cost,
            })
            .collect();
        let cut_streams = cut
            .groups
            .iter()
            .enumerate()
            .flat_map(|(i, g)| {
                g.connectors.iter().map(move |c| CutStreamReport {
                    group: i,
                    from: name(c.from),
                    to: name(c.to),
                    weight: c.weight,
                    devices: g.devices.len(),
                    cost: c.cost,
                })
            })
            .collect();
        Self {
            pipeline: p.name.clone(),
            groups,
            cloud: ops(&cut.cloud.operators),
            cloud_sources: srcs(&cut.cloud.sources),
            cut_streams,
            cost: cut.cost,
            all_cloud_cost: cut.all_cloud_cost,
            saving: cut.saving(),
        }
    }
}
