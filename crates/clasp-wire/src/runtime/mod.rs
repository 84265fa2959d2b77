//! The protocol between the runtime's nodes: a planner and its workers.
//!
//! Every connection starts with [`PROTOCOL`]'s preamble and the proof of the cluster secret
//! ([`crate::auth`]: the planner proves `planner`, a worker `worker:N`, or `worker` when it
//! asks the planner for an id); the connecting side then sends a [`Hello`] that must agree with
//! the identity it proved, and the frames that follow carry [`Message`]s. Receivers check every decoded
//! message against their [`Limits`] before using its ids.

mod checkpoint;
mod limits;
mod migration;
mod request;
mod routing;

pub use checkpoint::{
    BlobIndex, CheckpointMarked, CheckpointOrder, CheckpointWritten, GroupIndex, RestoreGroup,
    RestoreOrder, Restored,
};
pub use limits::Limits;
pub use migration::{MigrationData, MigrationDone, MigrationOrder, StateGroup};
pub use request::{ChainTime, Cut, Fire, Request};
pub use routing::RoutingPlan;

use crate::frame::Protocol;
use clasp_core::pipeline::ServiceMode;
use clasp_core::{Batch, OperatorId, Pipeline, SinkId, WorkerId};
use serde::{Deserialize, Serialize};

/// The runtime protocol: its version is bumped on every incompatible change of [`Message`].
pub const PROTOCOL: Protocol = Protocol {
    name: "clasp",
    magic: *b"CLASP\x00\r\n",
    version: 5,
    on_mismatch: "connection refused",
};

/// Most workers a cluster may have: worker ids are below it (it also sizes the destination
/// bitsets of the metrics).
pub const MAX_WORKERS: u32 = 4096;

/// Most key groups per keyed operator a worker accepts (each is a lock and a table).
pub const MAX_KEY_GROUPS: u32 = 1 << 20;

/// How many epochs a request or a migration message may be ahead of its receiver's routing.
/// A peer is ahead by the installs this node has not read yet, a handful at most; an epoch
/// beyond this is not from a live cluster, and would be held forever.
pub const EPOCH_LOOKAHEAD: u64 = 1024;

/// The identity the planner proves.
pub const PLANNER_IDENTITY: &str = "planner";

/// The identity a worker proves: `worker:N`, or `worker` when it asks for an id.
pub fn worker_identity(w: Option<WorkerId>) -> String {
    w.map_or_else(|| "worker".to_owned(), |w| format!("worker:{}", w.0))
}

/// The worker id an identity names (`Some(None)` for `worker`), or `None` if it names no
/// worker.
pub fn parse_worker_identity(identity: &str) -> Option<Option<WorkerId>> {
    match identity.strip_prefix("worker") {
        Some("") => Some(None),
        Some(rest) => {
            let n: u32 = rest.strip_prefix(':')?.parse().ok()?;
            (n < MAX_WORKERS && rest[1..] == n.to_string()).then_some(Some(WorkerId(n)))
        }
        None => None,
    }
}

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// The central node.
    Planner,
    /// A worker node.
    Worker,
}

/// Sent first on every connection, after the preamble.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Sender's role.
    pub role: Role,
    /// Sender's worker id (a joining worker may ask for one; the planner assigns it).
    pub worker: Option<WorkerId>,
    /// Executor slots the sender offers.
    pub slots: u32,
    /// Address the sender accepts peer connections on.
    pub listen: String,
    /// Operating-system process id, for logs.
    pub pid: u32,
}

/// Settings a worker receives when it joins.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerSettings {
    /// Records per chained request.
    pub batch_size: u32,
    /// Key groups of every keyed operator (fixed for the cluster's lifetime).
    pub key_groups: u32,
    /// Metrics interval (ms).
    pub interval_ms: u64,
    /// How long an executor may hold chained requests for another worker to batch them per
    /// destination (µs); 0 sends each one at once.
    pub flush_deadline_us: u64,
    /// Largest frame accepted.
    pub max_frame: u32,
    /// Seed for routing draws.
    pub seed: u64,
    /// Emulated dispatch costs: α and β spent by the sending executor on top of the real cost,
    /// γ taken from the worker's capacity.
    pub dispatch_cost: Option<DispatchCost>,
    /// Saturation thresholds: mean queue size and mean queue wait (ms).
    pub saturation_queue: f64,
    /// See `saturation_queue`.
    pub saturation_wait_ms: f64,
}

/// Largest emulated dispatch cost (µs): one second.
pub const MAX_DISPATCH_COST_US: f64 = 1e6;

/// Emulated chained-request costs (to run the paper's cost regime on this runtime): µs per
/// local and per remote chained request, and µs per distinct remote destination per second.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DispatchCost {
    /// α: per local chained request (µs).
    pub local_us: f64,
    /// β: per remote chained request (µs).
    pub remote_us: f64,
    /// γ: per distinct remote worker reached, once per second (µs).
    pub fanout_us: f64,
    /// Spin (uses a core) or sleep (holds the executor only).
    pub mode: ServiceMode,
}

impl DispatchCost {
    /// Parses `local=US,remote=US,fanout=US[:spin|:sleep]` (missing terms are 0).
    pub fn parse(s: &str) -> Result<Self, String> {
        let (terms, mode) = match s.rsplit_once(':') {
            Some((t, "spin")) => (t, ServiceMode::Spin),
            Some((t, "sleep")) => (t, ServiceMode::Sleep),
            Some((_, m)) => return Err(format!("`{m}` is not spin or sleep")),
            None => (s, ServiceMode::Sleep),
        };
        let mut c = Self { local_us: 0.0, remote_us: 0.0, fanout_us: 0.0, mode };
        for term in terms.split(',').filter(|t| !t.trim().is_empty()) {
            let (k, v) = term
                .split_once('=')
                .ok_or_else(|| format!("`{term}`: expected NAME=MICROSECONDS"))?;
            let v: f64 =
                v.trim().parse().ok().filter(|v: &f64| v.is_finite() && *v >= 0.0).ok_or_else(
                    || format!("`{term}`: `{v}` is not a number of microseconds >= 0"),
                )?;
            if v > MAX_DISPATCH_COST_US {
                return Err(format!(
                    "`{term}`: {v} µs is more than the largest emulated cost, {MAX_DISPATCH_COST_US} µs"
                ));
            }
            match k.trim() {
                "local" => c.local_us = v,
                "remote" => c.remote_us = v,
                "fanout" => c.fanout_us = v,
                other => return Err(format!("`{other}` is not local, remote or fanout")),
            }
        }
        Ok(c)
    }
}

/// The planner's answer to a joining worker.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Welcome {
    /// The id assigned.
    pub worker: WorkerId,
    /// The pipeline, with any command-line overrides applied.
    #[serde(with = "pipeline_as_json")]
    pub pipeline: Pipeline,
    /// Settings.
    pub settings: WorkerSettings,
    /// Workers already in the cluster and their addresses.
    pub peers: Vec<(WorkerId, String)>,
    /// The current routing, if the pipeline is already placed.
    pub routing: Option<RoutingPlan>,
    /// Checkpoint boundaries so far: chains of later cuts wait for the next mark.
    pub cut: u64,
}

/// The pipeline travels as JSON text inside the frame: operators' `params` are free-form JSON
/// values, which postcard (not self-describing) can encode but never decode.
mod pipeline_as_json {
    use clasp_core::Pipeline;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(p: &Pipeline, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&serde_json::to_string(p).map_err(serde::ser::Error::custom)?)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Pipeline, D::Error> {
        serde_json::from_str(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// Credit returned by finished leaf requests of one chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreditReturn {
    /// The chain.
    pub chain: u64,
    /// Credit returned.
    pub credit: u64,
    /// Latest completion time among the returning requests (ns since the Unix epoch).
    pub done_ns: u64,
}

/// Everything nodes say to each other.
#[derive(Debug, Serialize, Deserialize)]
pub enum Message {
    /// First frame on every connection.
    Hello(Hello),
    /// The receiver refuses the connection, and why.
    Reject(String),
    /// Planner → joining worker.
    Welcome(Box<Welcome>),
    /// Planner → workers: a worker joined; the one with the higher id connects.
    PeerJoined {
        /// The new worker.
        worker: WorkerId,
        /// Its peer address.
        addr: String,
    },
    /// Planner → workers: a worker left the cluster.
    PeerLeft(WorkerId),
    /// Worker → planner: the peers it is connected to.
    MeshReady(Vec<WorkerId>),
    /// Data: planner → worker (inputs) or worker → worker (chained requests).
    Request(Request),
    /// Data: several requests for one worker, batched by the sending executor.
    Requests(Vec<Request>),
    /// Worker → planner: credit of finished chains.
    Credits(Vec<CreditReturn>),
    /// Worker → planner: records that reached a sink.
    Sink {
        /// The sink.
        sink: SinkId,
        /// The checkpoint boundary their chains were dispatched after (which epoch of the
        /// output they belong to).
        cut: Cut,
        /// The records.
        batch: Batch,
    },
    /// Worker → planner: metrics of the last interval.
    Report(Box<clasp_core::report::WorkerReport>),
    /// Planner → workers: use this routing (nothing to move).
    Install(Box<RoutingPlan>),
    /// Planner → worker: migrate to a new placement.
    Migrate(Box<MigrationOrder>),
    /// Worker → worker: state and queued requests handed over in a migration.
    MigrationData(Box<MigrationData>),
    /// Worker → planner: migration finished on this worker.
    MigrationDone(MigrationDone),
    /// Planner → worker: report the metrics of the interval so far now, tagged with this number.
    ReportNow(u64),
    /// Planner → worker: send the keyed state as JSON lines.
    DumpState,
    /// Worker → planner: part of a state dump.
    StateLines {
        /// The operator.
        operator: OperatorId,
        /// JSON lines.
        lines: Vec<u8>,
    },
    /// Worker → planner: the state dump is complete.
    StateDone,
    /// Planner → worker: stop.
    Shutdown,
    /// Worker → planner: alive (sent a few times a second, so a stopped worker is noticed).
    Heartbeat,
    /// Planner → workers: mark and write your key groups for a checkpoint.
    Checkpoint(CheckpointOrder),
    /// Worker → planner: the groups of this checkpoint are marked.
    CheckpointMarked(CheckpointMarked),
    /// Worker → planner: the groups of a checkpoint are written.
    CheckpointWritten(Box<CheckpointWritten>),
    /// Planner → workers: drop queue, in-flight work and state (recovery number).
    Rollback(u64),
    /// Worker → planner: rolled back; nothing sent before the rollback follows this.
    RolledBack(u64),
    /// Planner → worker: take a routing and restore key groups from a checkpoint.
    Restore(Box<RestoreOrder>),
    /// Worker → planner: restored.
    Restored(Restored),
}

impl Message {
    /// The variant's name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Hello(_) => "Hello",
            Self::Reject(_) => "Reject",
            Self::Welcome(_) => "Welcome",
            Self::PeerJoined { .. } => "PeerJoined",
            Self::PeerLeft(_) => "PeerLeft",
            Self::MeshReady(_) => "MeshReady",
            Self::Request(_) => "Request",
            Self::Requests(_) => "Requests",
            Self::Credits(_) => "Credits",
            Self::Sink { .. } => "Sink",
            Self::Report(_) => "Report",
            Self::Install(_) => "Install",
            Self::Migrate(_) => "Migrate",
            Self::MigrationData(_) => "MigrationData",
            Self::MigrationDone(_) => "MigrationDone",
            Self::ReportNow(_) => "ReportNow",
            Self::DumpState => "DumpState",
            Self::StateLines { .. } => "StateLines",
            Self::StateDone => "StateDone",
            Self::Shutdown => "Shutdown",
            Self::Heartbeat => "Heartbeat",
            Self::Checkpoint(_) => "Checkpoint",
            Self::CheckpointMarked(_) => "CheckpointMarked",
            Self::CheckpointWritten(_) => "CheckpointWritten",
            Self::Rollback(_) => "Rollback",
            Self::RolledBack(_) => "RolledBack",
            Self::Restore(_) => "Restore",
            Self::Restored(_) => "Restored",
        }
    }
}
