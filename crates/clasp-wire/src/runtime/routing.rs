//! The placement and key assignment the planner broadcasts.

use clasp_core::placement::{KeyAssignment, Placement};
use serde::{Deserialize, Serialize};

/// A placement and key assignment, as broadcast by the planner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoutingPlan {
    /// Increases with every new placement.
    pub epoch: u64,
    /// Shares and instances per operator.
    pub placement: Placement,
    /// Owners of key groups.
    pub keys: KeyAssignment,
}
