//! Which cut a run uses: edgecut's (the Planner paper's Algorithm 1 with an exact minimum cut)
//! or none at all (every device sends its raw data to the cloud, the paper's baseline).

use clasp_core::Pipeline;
use clasp_plan::edgecut::{self, CostModel, Devices, EdgeCut};

/// Where the operators run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// The minimum cut: locally replicable operators on the devices where that saves traffic.
    #[default]
    Cut,
    /// Everything in the cloud; devices send their raw data.
    AllCloud,
}

impl Mode {
    /// The spelling used on the command line and in results.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cut => "cut",
            Self::AllCloud => "all-cloud",
        }
    }
}

/// The cut of `p` over `devices` in `mode`.
pub fn plan(p: &Pipeline, model: &CostModel, devices: &Devices, mode: Mode) -> EdgeCut {
    match mode {
        Mode::Cut => edgecut::cut(p, model, devices),
        Mode::AllCloud => all_in_cloud_with(p, model, devices),
    }
}

/// Everything in the cloud, by the spec's cost model.
pub fn all_in_cloud(p: &Pipeline, devices: &Devices) -> EdgeCut {
    all_in_cloud_with(p, &CostModel::from_spec(p), devices)
}

/// Everything in the cloud: edgecut's own cut of devices that may run no operator, so the
/// cloud part, the connectors (one per raw stream) and the costs come from the same code.
fn all_in_cloud_with(p: &Pipeline, model: &CostModel, devices: &Devices) -> EdgeCut {
    let mut none = devices.clone();
    for d in &mut none.devices {
        d.constraint.max_operators = Some(0);
    }
    edgecut::cut(p, model, &none)
}
