//! Fault tolerance: consistent checkpoints, recovery from a lost worker or a restarted planner,
//! exactly-once state and output.
//!
//! **Consistency in the chained-request model.** A checkpoint's boundary is a cut in the
//! sequence of chains: under the lock every chain opens under, the planner starts a new cut
//! and reads the sources' positions after the last chain before it; dispatch goes on. Requests
//! of the new cut run through stateless operators, but wait at keyed state on their worker
//! until it marked the boundary, and their sink records wait for the seal. Once every chain of
//! the earlier cuts completed (their latency: milliseconds unless the workers are backlogged),
//! the output is sealed, and each worker marks the key groups it owns (copy on write:
//! O(groups), nothing copied) and lets its waiting requests run: every input before the
//! boundary then has its whole chain in the workers' state and nothing after it does. Workers
//! then encode their groups — each group before its first change after the mark, or by the
//! writer, whichever first — and write them to the [`store`] as one blob each, in parallel;
//! the planner writes the [`manifest`] last (sources' positions, placement, blob checksums,
//! the output's length), so a crash before it leaves the previous checkpoint in force.
//!
//! **Recovery.** A worker lost (its connection closed, or no heartbeat within the timeout)
//! makes the planner stop dispatching and reading, drop the queued inputs and chains in flight
//! and the output since the last commit, and roll every surviving worker back (queue, gated
//! and held requests, in-flight outputs and state dropped). The scaling state machine chooses
//! the placement to restore onto ([`clasp_plan::autoscaler::Recover`]); replacement workers
//! take the lost ids; every worker stages the groups it owns under that placement from the
//! store (the staging path a migration uses); the sources go back to the checkpoint's
//! positions and dispatch resumes. A failure during a migration or a checkpoint is recovered
//! the same way: neither commits anything until it completes.
//!
//! **Output.** With checkpoints, `--output` is [`output::TransactionalOutput`]: an epoch's
//! records become visible when its checkpoint commits.

pub mod catalog;
pub mod inject;
pub mod manifest;
pub mod output;
pub(crate) mod runner;
pub mod store;

pub use clasp_plan::autoscaler::CheckpointEvery;
pub(crate) use runner::JobHooks;

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How a job checkpoints and recovers.
#[derive(Clone, Debug)]
pub struct FaultTolerance {
    /// When checkpoints are taken (`None`: never; a lost worker then ends the run).
    pub checkpoint: Option<CheckpointEvery>,
    /// Where they are kept (a store location, see [`store::open`]).
    pub store: String,
    /// Committed checkpoints kept; older ones are deleted.
    pub retain: usize,
    /// A worker silent for this long is lost.
    pub heartbeat_timeout: Duration,
    /// The checkpoint a resumed job starts from.
    pub resume: Option<manifest::Manifest>,
    /// Failures to cause, for tests.
    pub kills: inject::KillPlan,
}

impl Default for FaultTolerance {
    fn default() -> Self {
        Self {
            checkpoint: None,
            store: String::new(),
            retain: 3,
            heartbeat_timeout: DEFAULT_HEARTBEAT_TIMEOUT,
            resume: None,
            kills: inject::KillPlan::default(),
        }
    }
}

/// How long a worker may be silent before it counts as lost: well within the 2 s budget for
/// noticing a loss, and several heartbeats ([`crate::worker::HEARTBEAT`]) long.
pub const DEFAULT_HEARTBEAT_TIMEOUT: Duration = Duration::from_millis(1500);

/// One checkpoint, as the stats file records it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CheckpointRecord {
    /// Its number.
    pub id: u64,
    /// When its boundary was taken (s since the start).
    pub time_s: f64,
    /// How long dispatch was paused to start the boundary's cut (ms).
    pub pause_ms: f64,
    /// Boundary to the last chain before it completed (ms); dispatch runs meanwhile.
    pub drain_ms: f64,
    /// The longest a chain after the boundary waited at keyed state for the mark (ms).
    #[serde(default)]
    pub held_ms: f64,
    /// The slowest worker's encoding and writing (ms).
    pub write_ms: f64,
    /// Boundary to committed manifest (ms).
    pub duration_ms: f64,
    /// State bytes written.
    pub bytes: u64,
    /// Keys written.
    pub keys: u64,
    /// Whether it committed (otherwise a failure cancelled it).
    pub committed: bool,
}

/// One recovery, as the live output, the summary and the stats file show it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecoveryRecord {
    /// When the loss was noticed (s since the start).
    pub time_s: f64,
    /// The workers lost.
    pub lost: Vec<u32>,
    /// Why.
    pub reason: String,
    /// The checkpoint restored (`None`: started over).
    pub checkpoint: Option<u64>,
    /// Workers after it.
    pub workers: u32,
    /// Noticed to resumed (ms).
    pub duration_ms: f64,
    /// Resumed to the first chain completed after it (ms).
    pub first_completion_ms: Option<f64>,
    /// From the kill that caused it (fault injection only) to the first chain completed after
    /// the restore (ms).
    pub kill_to_first_completion_ms: Option<f64>,
    /// Keys restored.
    pub keys: u64,
    /// State bytes read.
    pub bytes: u64,
    /// Checkpoints found damaged and passed over.
    pub warnings: Vec<String>,
}

/// What a job tells about checkpoints and recoveries as they happen.
#[derive(Clone, Debug)]
pub enum FaultNote {
    /// A checkpoint committed or failed.
    Checkpoint(CheckpointRecord),
    /// A recovery finished.
    Recovered(RecoveryRecord),
    /// Something to warn about (a damaged checkpoint passed over, a failed write).
    Warning(String),
}
