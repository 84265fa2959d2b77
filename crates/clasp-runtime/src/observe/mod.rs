//! What a running job shows its observers. The job's control thread hands the planner and the
//! scaling loop to [`Observatory::observe`] once per interval (and once more at the end);
//! the observatory folds the new worker reports into totals and keeps the latest views. Readers
//! (the admin server's threads) take the lock for as long as one answer takes. Nothing here runs
//! on the per-request path: the data plane's counters reach it only through the reports.

mod ingest;
pub mod view;

use crate::planner::Planner;
use crate::scaling::ScalingLoop;
use clasp_core::Pipeline;
use clasp_core::sync::lock;
use clasp_plan::autoscaler::Mode;
use std::collections::VecDeque;
use std::sync::Mutex;
pub use view::*;

/// Intervals of the time series kept (an hour of one-second intervals).
pub const SERIES_LEN: usize = 3_600;

/// Everything observers see, as of the last interval.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// The pipeline.
    pub pipeline: PipelineView,
    /// The placement running, once one is installed.
    pub placement: Option<PlacementView>,
    /// Connected workers.
    pub workers: Vec<WorkerView>,
    /// Per operator and worker.
    pub operators: Vec<OperatorWorkerView>,
    /// The estimates.
    pub coefficients: CoefficientsView,
    /// Decisions made.
    pub events: Vec<EventView>,
    /// The autoscaler's settings and what it waits on.
    pub autoscaler: AutoscalerView,
    /// Counters.
    pub counters: CountersView,
    /// The last [`SERIES_LEN`] intervals.
    pub series: VecDeque<SeriesPoint>,
    /// End-to-end latency of completed chains.
    pub latency: Buckets,
    /// Migration durations (plan issued → every worker done).
    pub migration_durations: Buckets,
    /// Worker pauses during migrations, one per worker and migration.
    pub migration_pauses: Buckets,
    /// Chained requests (local, remote) by worker id over the run, departed workers included.
    pub chained: std::collections::BTreeMap<u32, (u64, u64)>,
    /// Planner queue at the end of the last interval.
    pub planner_queue: u64,
    /// Checkpoints and recoveries.
    pub fault: FaultView,
}

impl Snapshot {
    /// Whether the cluster runs a placement on every worker it names.
    pub fn ready(&self) -> bool {
        self.placement
            .as_ref()
            .is_some_and(|p| p.epoch > 0 && self.workers.len() as u32 >= p.workers)
    }
}

/// The shared view of one running job.
#[derive(Debug)]
pub struct Observatory {
    state: Mutex<ingest::State>,
}

impl Observatory {
    /// An observatory of `p` run under `policy` in `mode`.
    pub fn new(p: &Pipeline, policy: &str, mode: Mode) -> Self {
        let snapshot = Snapshot {
            pipeline: PipelineView::of(p),
            autoscaler: AutoscalerView {
                policy: policy.into(),
                mode: match mode {
                    Mode::Act => "act",
                    Mode::Recommend => "recommend",
                }
                .into(),
                ..AutoscalerView::default()
            },
            latency: Buckets::of(&LATENCY_BOUNDS_S, std::iter::empty()),
            migration_durations: Buckets::of(&MIGRATION_BOUNDS_S, std::iter::empty()),
            migration_pauses: Buckets::of(&MIGRATION_BOUNDS_S, std::iter::empty()),
            ..Snapshot::default()
        };
        Self { state: Mutex::new(ingest::State::new(p, snapshot)) }
    }

    /// Takes in the planner and the scaling loop after an interval (with its progress) or at
    /// the end of the run (without).
    pub fn observe(
        &self,
        planner: &Planner,
        progress: Option<&crate::planner::Progress>,
        scaler: Option<&ScalingLoop>,
    ) {
        lock(&self.state).observe(planner, progress, scaler);
    }

    /// Takes the run's checkpoints and recoveries so far.
    pub fn observe_fault(
        &self,
        checkpoints: &[crate::fault::CheckpointRecord],
        recoveries: &[crate::fault::RecoveryRecord],
    ) {
        let committed = checkpoints.iter().filter(|c| c.committed).count() as u64;
        lock(&self.state).snapshot.fault = FaultView {
            committed,
            failed: checkpoints.len() as u64 - committed,
            recoveries: recoveries.len() as u64,
            last: checkpoints.iter().rev().find(|c| c.committed).cloned(),
        };
    }

    /// Marks the run ended (after a last [`Observatory::observe`]).
    pub fn finish(&self) {
        lock(&self.state).snapshot.counters.finished = true;
    }

    /// Reads the snapshot under the lock.
    pub fn read<R>(&self, f: impl FnOnce(&Snapshot) -> R) -> R {
        f(&lock(&self.state).snapshot)
    }
}
