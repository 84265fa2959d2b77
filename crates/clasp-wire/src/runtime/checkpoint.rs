//! The messages of checkpoints and recovery.
//!
//! A checkpoint: the planner starts a new cut (chains dispatched from then on carry it, and
//! wait at keyed state until their worker marked it); once every chain of the earlier cuts
//! completed, it sends every worker a [`CheckpointOrder`]; each marks the key groups it owns
//! (copy on write), lets the waiting requests run and answers [`CheckpointMarked`] at once; it
//! then writes its groups to the store as one blob and answers [`CheckpointWritten`] with the
//! blob's index. A recovery: the
//! planner sends `Rollback`, each worker drops its queue and state and answers `RolledBack`
//! (after which nothing it had in flight is sent); then a [`RestoreOrder`] names the groups
//! each worker owns under the new routing and where in the store their state is.

use super::routing::RoutingPlan;
use clasp_core::{KeyGroup, OperatorId, WorkerId};
use serde::{Deserialize, Serialize};

/// Planner → worker: mark and write your key groups for checkpoint `id`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointOrder {
    /// The checkpoint.
    pub id: u64,
    /// The cut its boundary started: requests of it may touch state once marked.
    pub cut: u64,
    /// The routing epoch at its boundary.
    pub epoch: u64,
    /// Where to write (a store location).
    pub store: String,
    /// The blob name to write.
    pub blob: String,
}

/// Worker → planner: the groups of checkpoint `id` are marked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointMarked {
    /// The checkpoint.
    pub id: u64,
    /// How long the first request of the new cut waited for the mark (µs; 0: none waited).
    pub held_us: u64,
}

/// Where one key group's state is inside a blob.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupIndex {
    /// The keyed operator.
    pub op: OperatorId,
    /// The group.
    pub group: KeyGroup,
    /// Byte offset in the blob.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
    /// Keys in it.
    pub keys: u64,
    /// CRC-32 of its bytes.
    pub crc32: u32,
}

/// One blob of a checkpoint: a worker's key groups.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlobIndex {
    /// Its name in the store.
    pub name: String,
    /// The worker that wrote it.
    pub worker: WorkerId,
    /// Its length.
    pub bytes: u64,
    /// CRC-32 of the whole blob.
    pub crc32: u32,
    /// The groups in it.
    pub groups: Vec<GroupIndex>,
}

/// Worker → planner: the groups of checkpoint `id` are written (or why not).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointWritten {
    /// The checkpoint.
    pub id: u64,
    /// The worker.
    pub worker: WorkerId,
    /// The blob, when written.
    pub blob: Option<BlobIndex>,
    /// Encoding and writing time (µs).
    pub write_us: u64,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// One key group to restore, and where its state is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RestoreGroup {
    /// The keyed operator.
    pub op: OperatorId,
    /// The group.
    pub group: KeyGroup,
    /// The blob holding it.
    pub blob: String,
    /// Byte offset in the blob.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
    /// Keys in it.
    pub keys: u64,
    /// CRC-32 of its bytes.
    pub crc32: u32,
}

/// Planner → worker: take this routing and restore these groups from the store.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RestoreOrder {
    /// The recovery this belongs to.
    pub generation: u64,
    /// The routing after the recovery (its epoch is above every earlier one).
    pub routing: RoutingPlan,
    /// The store (a location), empty when there is nothing to restore.
    pub store: String,
    /// The groups this worker owns under `routing`, with their state's place.
    pub groups: Vec<RestoreGroup>,
    /// Checkpoint boundaries so far: requests of this cut run at once.
    pub cut: u64,
}

/// Worker → planner: restored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restored {
    /// The recovery.
    pub generation: u64,
    /// The worker.
    pub worker: WorkerId,
    /// Keys staged.
    pub keys: u64,
    /// State bytes read.
    pub bytes: u64,
    /// Why it failed, if it did.
    pub error: Option<String>,
}
