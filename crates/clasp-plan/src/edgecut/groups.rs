//! Device groups (§V-B3 of the Planner paper): devices with the same sources `g⁻¹(d)` form a
//! group; within a group, devices with the same constraint form a subgroup, planned once.

use super::devices::{Constraint, Devices};
use clasp_core::SourceId;

/// Devices with the same sources.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceGroup {
    /// `g⁻¹(d)`, shared by every device of the group, sorted.
    pub sources: Vec<SourceId>,
    /// Its subgroups, in order of their first device in the file.
    pub subgroups: Vec<Subgroup>,
}

/// Devices of one group with the same constraint: they run the same operators.
#[derive(Clone, Debug, PartialEq)]
pub struct Subgroup {
    /// Indices into [`Devices::devices`], in file order.
    pub devices: Vec<usize>,
    /// The constraint they share.
    pub constraint: Constraint,
}

/// Groups and subgroups of `devices`, in order of their first device in the file.
pub fn device_groups(devices: &Devices) -> Vec<DeviceGroup> {
    let mut groups: Vec<DeviceGroup> = Vec::new();
    for (i, d) in devices.devices.iter().enumerate() {
        let g = match groups.iter().position(|g| g.sources == d.sources) {
            Some(g) => g,
            None => {
                groups.push(DeviceGroup { sources: d.sources.clone(), subgroups: Vec::new() });
                groups.len() - 1
            }
        };
        let subgroups = &mut groups[g].subgroups;
        match subgroups.iter_mut().find(|s| s.constraint == d.constraint) {
            Some(s) => s.devices.push(i),
            None => subgroups.push(Subgroup { devices: vec![i], constraint: d.constraint.clone() }),
        }
    }
    groups
}
