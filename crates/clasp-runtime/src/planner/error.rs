//! Why a planner call failed.

use clasp_core::WorkerId;

/// Why the planner failed.
#[derive(Debug, thiserror::Error)]
pub enum PlannerError {
    /// Could not listen.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// A worker disconnected.
    #[error("worker {worker} ({addr}) disconnected: {reason}")]
    WorkerLost {
        /// The worker.
        worker: WorkerId,
        /// Its address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// Workers did not show up in time.
    #[error("timed out waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
    },
    /// The inputs ended but chains stopped completing: their credit never came back.
    #[error(
        "{in_flight} chain(s) still in flight {secs} s after the last one completed, with every input read: their completions were lost (a bug; the run's results are incomplete)"
    )]
    Stalled {
        /// Chains not complete.
        in_flight: usize,
        /// Seconds without a completion.
        secs: u64,
    },
    /// An input could not be read.
    #[error("reading input `{source_name}`: {error}")]
    Input {
        /// The source.
        source_name: String,
        /// The error.
        error: String,
    },
    /// Writing an output failed.
    #[error("writing {what}: {error}")]
    Output {
        /// What.
        what: String,
        /// The error.
        error: std::io::Error,
    },
    /// A plan's key groups differ from the cluster's.
    #[error("the plan has {plan} key groups, the cluster {cluster}")]
    KeyGroups {
        /// The plan's.
        plan: u32,
        /// The cluster's.
        cluster: u32,
    },
    /// A migration failed.
    #[error("migration to epoch {epoch} failed: {reason}")]
    Migration {
        /// The epoch.
        epoch: u64,
        /// Why.
        reason: String,
    },
}
