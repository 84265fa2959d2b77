//! The messages of the migration protocol (CLASP §4.4, Fig. 7).

use super::request::Request;
use super::routing::RoutingPlan;
use clasp_core::placement::WorkerMigration;
use clasp_core::{KeyGroup, OperatorId, WorkerId};
use serde::{Deserialize, Serialize};

/// Planner → worker: your part of a migration.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MigrationOrder {
    /// The new epoch.
    pub epoch: u64,
    /// The new routing.
    pub routing: RoutingPlan,
    /// Whom to send to and wait for.
    pub part: WorkerMigration,
}

/// One key group's state.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StateGroup {
    /// The keyed operator.
    pub op: OperatorId,
    /// The group.
    pub group: KeyGroup,
    /// Keys in it.
    pub keys: u32,
    /// The store's encoding.
    #[serde(with = "clasp_core::batch::byte_vec")]
    pub bytes: Vec<u8>,
}

/// Worker → worker: everything one worker hands one peer in a migration.
#[derive(Debug, Serialize, Deserialize)]
pub struct MigrationData {
    /// The epoch migrated to.
    pub epoch: u64,
    /// The sender.
    pub from: WorkerId,
    /// State of the groups handed over.
    pub groups: Vec<StateGroup>,
    /// Queued requests that now belong to the receiver.
    pub requests: Vec<Request>,
}

/// Worker → planner: the migration finished here.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MigrationDone {
    /// The epoch migrated to.
    pub epoch: u64,
    /// The worker.
    pub worker: WorkerId,
    /// Plan received → resumed (µs).
    pub pause_us: u64,
    /// Time spent waiting for peers' data (µs).
    pub wait_us: u64,
    /// Peers this worker waited for.
    pub waited_for: Vec<WorkerId>,
    /// State bytes sent.
    pub bytes_sent: u64,
    /// Keys sent.
    pub keys_sent: u64,
    /// Queued requests handed over.
    pub requests_sent: u64,
    /// Why it failed, if it did.
    pub error: Option<String>,
}
