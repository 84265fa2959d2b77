//! What an observer sees of a run: plain, serializable views of the pipeline, the placement, the
//! workers, the estimates, the events and the counters. They are the JSON the admin API serves
//! (docs/admin-api.md) and what its metrics are computed from.

use clasp_core::stats::Coefficients;
use clasp_core::{Endpoint, Pipeline};
use clasp_plan::autoscaler::CoefficientSample;
use serde::{Deserialize, Serialize};

/// The pipeline: operators in topological order and the streams between them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PipelineView {
    /// Pipeline name.
    pub name: String,
    /// Sources' names.
    pub sources: Vec<String>,
    /// Operators, in spec order (an operator's index is its id).
    pub operators: Vec<OperatorView>,
    /// Sinks' names.
    pub sinks: Vec<String>,
    /// Every stream.
    pub streams: Vec<StreamView>,
    /// Operator names in topological order.
    pub topological: Vec<String>,
}

/// One operator.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OperatorView {
    /// Name.
    pub name: String,
    /// Kind (map, filter, ...).
    pub kind: String,
    /// The function it runs.
    pub function: String,
    /// Whether it keeps keyed state.
    pub stateful: bool,
    /// Its key field, if keyed.
    pub key: Option<String>,
}

/// One stream.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamView {
    /// What it comes from: `source`, `operator` or `sink`.
    pub from_kind: String,
    /// Its name.
    pub from: String,
    /// What it goes to.
    pub to_kind: String,
    /// Its name.
    pub to: String,
}

fn endpoint(p: &Pipeline, e: Endpoint) -> (String, String) {
    let kind = match e {
        Endpoint::Source(_) => "source",
        Endpoint::Operator(_) => "operator",
        Endpoint::Sink(_) => "sink",
    };
    (kind.into(), p.endpoint_name(e).into())
}

impl PipelineView {
    /// The view of `p`.
    pub fn of(p: &Pipeline) -> Self {
        Self {
            name: p.name.clone(),
            sources: p.sources.iter().map(|s| s.name.clone()).collect(),
            operators: p
                .operators
                .iter()
                .map(|o| OperatorView {
                    name: o.name.clone(),
                    kind: o.kind.to_string(),
                    function: o.function.clone(),
                    stateful: o.stateful,
                    key: o.key.clone(),
                })
                .collect(),
            sinks: p.sinks.iter().map(|s| s.name.clone()).collect(),
            streams: p
                .streams
                .iter()
                .map(|s| {
                    let (from_kind, from) = endpoint(p, s.from);
                    let (to_kind, to) = endpoint(p, s.to);
                    StreamView { from_kind, from, to_kind, to }
                })
                .collect(),
            topological: p
                .topological_order()
                .iter()
                .map(|o| p.operator(*o).name.clone())
                .collect(),
        }
    }
}

/// The placement running now.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlacementView {
    /// Routing epoch.
    pub epoch: u64,
    /// Workers in the placement.
    pub workers: u32,
    /// Key groups per keyed operator.
    pub key_groups: u32,
    /// Per operator, in spec order.
    pub operators: Vec<OperatorPlacementView>,
}

/// Where one operator runs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OperatorPlacementView {
    /// Operator name.
    pub operator: String,
    /// Instances over every worker (its parallelism).
    pub parallelism: u32,
    /// One entry per worker hosting a share.
    pub shares: Vec<ShareView>,
}

/// An operator's share on one worker.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ShareView {
    /// Worker id.
    pub worker: u32,
    /// σ_o(w): the fraction of the operator's requests it takes.
    pub fraction: f64,
    /// Instances there.
    pub instances: u32,
    /// Key groups it owns (0 for a stateless operator).
    pub key_groups: u32,
}

/// A worker as last reported.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerView {
    /// Worker id.
    pub id: u32,
    /// Its peer address.
    pub addr: String,
    /// Its process id.
    pub pid: u32,
    /// Executor slots.
    pub slots: u32,
    /// Execution load in its last interval (µs of executor time per second).
    pub load_us_per_s: f64,
    /// W̄: the capacity the estimator credits a worker with (µs per second).
    pub capacity_us_per_s: f64,
    /// Load over capacity.
    pub utilization: f64,
    /// Mean queue over its last interval (requests).
    pub queue: f64,
    /// Queue at the end of its last interval.
    pub queue_now: u64,
    /// Keys in its keyed state.
    pub state_keys: u64,
    /// Local chained requests per second.
    pub local_rate: f64,
    /// Remote chained requests per second.
    pub remote_rate: f64,
    /// Local chained requests it dispatched since it joined.
    pub local_requests: u64,
    /// Remote chained requests it dispatched since it joined.
    pub remote_requests: u64,
    /// δ_w: distinct remote workers reached in its last interval.
    pub destinations: u32,
    /// Whether it was saturated in its last interval.
    pub saturated: bool,
    /// When its last report arrived (s since the start).
    pub reported_at_s: f64,
}

/// One operator's totals on one worker, and its last interval's ratios.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OperatorWorkerView {
    /// Operator name.
    pub operator: String,
    /// Worker id.
    pub worker: u32,
    /// Requests executed.
    pub requests_in: u64,
    /// Records in them.
    pub records_in: u64,
    /// Chained requests sent downstream.
    pub requests_out: u64,
    /// Records emitted.
    pub records_out: u64,
    /// Executor time (s).
    pub busy_s: f64,
    /// Time its requests waited in the worker's queue (s).
    pub queue_wait_s: f64,
    /// Executor time over the worker's executor time available, last interval.
    pub busy_ratio: f64,
    /// Queue wait over queue wait plus execution, last interval: how much of a request's time
    /// at this operator is spent held back.
    pub backpressure_ratio: f64,
}

/// The estimates and how they got there.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CoefficientsView {
    /// α, β, γ, W̄ now (µs, µs, µs/s, µs/s).
    pub current: Option<Coefficients>,
    /// Saturated observations used.
    pub observations: u64,
    /// After every interval.
    pub history: Vec<CoefficientSample>,
}

/// A scaling decision, carried out (`rescale`) or only reported (`recommendation`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EventView {
    /// `rescale` or `recommendation`.
    pub kind: String,
    /// When (s since the start).
    pub time_s: f64,
    /// What fired (a trigger reason, or `requested`).
    pub reason: String,
    /// The rate decided for (requests/s).
    pub target_rate: f64,
    /// Workers before.
    pub from_workers: u32,
    /// Workers after (or asked for).
    pub to_workers: u32,
    /// Plan issued → every worker done (ms), rescales only.
    pub planner_ms: Option<f64>,
    /// The longest worker pause (ms), rescales only.
    pub max_worker_pause_ms: Option<f64>,
    /// Keys moved.
    pub keys_moved: u64,
    /// State bytes moved.
    pub bytes_moved: u64,
}

/// What the autoscaler is set to and what it waits on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AutoscalerView {
    /// The policy.
    pub policy: String,
    /// `act` or `recommend`.
    pub mode: String,
    /// Workers the last decision asked for (the placement's count when none was made).
    pub desired_workers: u32,
    /// Decisions the cooldown held back.
    pub held_back: u32,
    /// A scale-in waiting for its delay.
    pub pending_scale_in: Option<PendingView>,
    /// Whether a rescale is in flight.
    pub rescaling: bool,
}

/// A scale-in decided but not yet carried out.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PendingView {
    /// When it was first decided (s).
    pub since_s: f64,
    /// What fired.
    pub reason: String,
    /// The rate it plans for (requests/s).
    pub target_rate: f64,
}

/// The run's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CountersView {
    /// Seconds since the start.
    pub elapsed_s: f64,
    /// Whether the run ended.
    pub finished: bool,
    /// Input requests that entered the planner.
    pub input_requests: u64,
    /// Records in them.
    pub input_records: u64,
    /// Chains completed.
    pub completed: u64,
    /// Chains in flight.
    pub in_flight: u64,
    /// Records that reached sinks.
    pub sink_records: u64,
    /// Local chained requests.
    pub local_requests: u64,
    /// Remote chained requests.
    pub remote_requests: u64,
    /// Rescalings carried out.
    pub rescalings: u64,
    /// Decisions reported and not carried out.
    pub recommendations: u64,
    /// Keys moved by migrations.
    pub keys_moved: u64,
    /// State bytes moved.
    pub bytes_moved: u64,
}

/// Checkpoints and recoveries so far (all zero without checkpoints).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FaultView {
    /// Checkpoints committed.
    pub committed: u64,
    /// Checkpoints that failed (a worker could not write).
    pub failed: u64,
    /// Recoveries from lost workers.
    pub recoveries: u64,
    /// The last committed checkpoint, if any.
    pub last: Option<crate::fault::CheckpointRecord>,
}

/// One interval of the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SeriesPoint {
    /// Seconds since the start.
    pub t: f64,
    /// Input requests per second.
    pub input_rate: f64,
    /// Input records per second.
    pub input_records: f64,
    /// Chains completed per second.
    pub throughput: f64,
    /// Median latency of the interval's chains (ms).
    pub p50_ms: f64,
    /// Their 95th percentile (ms).
    pub p95_ms: f64,
    /// Workers in the placement.
    pub workers: u32,
    /// Workers the last decision asked for.
    pub desired_workers: u32,
    /// Planner queue.
    pub planner_queue: u64,
    /// Local chained requests per second.
    pub local_rate: f64,
    /// Remote chained requests per second.
    pub remote_rate: f64,
}

/// A cumulative histogram: counts at or below each bound.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Buckets {
    /// Upper bounds (s).
    pub bounds_s: Vec<f64>,
    /// Observations at or below each bound.
    pub cumulative: Vec<u64>,
    /// Every observation.
    pub count: u64,
    /// Their sum (s).
    pub sum_s: f64,
}

impl Buckets {
    /// `values` (s) counted against `bounds_s`.
    pub fn of(bounds_s: &[f64], values: impl Iterator<Item = f64> + Clone) -> Self {
        Self {
            bounds_s: bounds_s.to_vec(),
            cumulative: bounds_s
                .iter()
                .map(|b| values.clone().filter(|v| v <= b).count() as u64)
                .collect(),
            count: values.clone().count() as u64,
            sum_s: values.sum(),
        }
    }
}

/// Bounds of the end-to-end latency histogram (s).
pub const LATENCY_BOUNDS_S: [f64; 14] =
    [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// Bounds of the migration duration and pause histograms (s).
pub const MIGRATION_BOUNDS_S: [f64; 10] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0];
