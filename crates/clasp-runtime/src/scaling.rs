//! The autoscaler on the live cluster: every stats interval the planner's measurements go to
//! [`clasp_plan::Autoscaler`] as one [`Interval`], and its steps are executed here — workers
//! started, state and queued requests migrated in one decentralized round, workers stopped,
//! instance limits installed. Nothing is decided here.

use crate::cluster::{ClusterError, WorkerPool, scale_in, scale_out};
use crate::planner::stats::MigrationRecord;
use crate::planner::{Planner, PlannerError, Progress};
use crate::routing::RoutingPlan;
use clasp_core::Pipeline;
use clasp_core::placement::{KeyAssignment, Placement};
use clasp_core::report::WorkerReport;
pub use clasp_core::stats::ScalingEvent;
use clasp_plan::PlanError;
pub use clasp_plan::autoscaler::CoefficientSample;
use clasp_plan::autoscaler::{
    Autoscaler, AutoscalerConfig, Interval, Recommendation, Rescale, Step, Unchanged,
};

/// Why a rescaling failed.
#[derive(Debug, thiserror::Error)]
pub enum ScalingError {
    /// Starting or stopping workers failed.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// The planner failed (a worker was lost, a migration failed).
    #[error(transparent)]
    Planner(#[from] PlannerError),
    /// The autoscaler refused its settings or a placement.
    #[error(transparent)]
    Plan(#[from] PlanError),
}

impl ScalingError {
    /// The planner's failure this is, wherever it arose (migrating, or starting and stopping
    /// workers); otherwise the error itself.
    pub fn into_planner(self) -> Result<PlannerError, Self> {
        match self {
            Self::Planner(e) | Self::Cluster(ClusterError::Planner(e)) => Ok(e),
            other => Err(other),
        }
    }
}

/// One interval of the planner as the autoscaler takes it: the progress of the interval and the
/// worker reports that arrived in it.
pub fn interval(p: &Progress, reports: &[WorkerReport]) -> Interval {
    Interval {
        t: p.t,
        interval_s: p.interval_s,
        input_rate: p.input_rate,
        recent_input_rate: p.recent_input_rate,
        throughput: p.throughput,
        requests: p.requests,
        planner_queue: p.planner_queue as f64,
        backlog: (p.planner_queue + p.in_flight) as f64,
        workers: p.workers,
        arrival_gaps: p.arrival_gaps,
        reports: reports.to_vec(),
    }
}

/// The autoscaler and what its executed steps produced.
#[derive(Debug)]
pub struct ScalingLoop {
    autoscaler: Autoscaler,
    reports_seen: usize,
    /// Rescalings done.
    pub events: Vec<ScalingEvent>,
    /// Decisions made but not carried out (recommend mode), with when they were made (s).
    pub recommendations: Vec<(f64, Recommendation)>,
}

impl ScalingLoop {
    /// The autoscaler of `cfg` for `p`, starting from the configuration the cluster runs.
    pub fn new(
        cfg: AutoscalerConfig,
        p: &Pipeline,
        placement: Placement,
        keys: KeyAssignment,
        epoch: u64,
    ) -> Result<Self, PlanError> {
        Ok(Self {
            autoscaler: Autoscaler::new(cfg, p, placement, keys, epoch)?,
            reports_seen: 0,
            events: Vec::new(),
            recommendations: Vec::new(),
        })
    }

    /// The state machine (estimates, placement, history).
    pub fn autoscaler(&self) -> &Autoscaler {
        &self.autoscaler
    }

    /// The state machine, to feed it checkpoint and failure observations.
    pub fn autoscaler_mut(&mut self) -> &mut Autoscaler {
        &mut self.autoscaler
    }

    /// One interval: the autoscaler's step, executed. Returns the rescaling done, if any.
    pub fn step(
        &mut self,
        planner: &mut Planner,
        pool: &mut WorkerPool,
        progress: &Progress,
    ) -> Result<Option<ScalingEvent>, ScalingError> {
        let new: Vec<WorkerReport> =
            planner.reports.since(self.reports_seen).iter().map(|(_, r)| r.clone()).collect();
        self.reports_seen += new.len();
        let pipeline = planner.pipeline().clone();
        let t = progress.t;
        match self.autoscaler.step(&pipeline, interval(progress, &new)) {
            Step::Idle => Ok(None),
            Step::Unchanged { trigger, why } => {
                match why {
                    Unchanged::NoDecision(e) => tracing::warn!(
                        "t = {t:.1} s: {} trigger, no decision by {}: {e}",
                        trigger.reason.as_str(),
                        self.autoscaler.config().policy
                    ),
                    Unchanged::Same => tracing::debug!(
                        "t = {t:.1} s: {} trigger, the configuration stays",
                        trigger.reason.as_str()
                    ),
                    Unchanged::Hysteresis { utilization, gain } => tracing::debug!(
                        "t = {t:.1} s: {} trigger: a scale-in would leave the workers at {:.0} % of their budget and free {:.0} % of them: too little",
                        trigger.reason.as_str(),
                        utilization * 1e2,
                        gain * 1e2
                    ),
                    Unchanged::Delayed => tracing::debug!(
                        "t = {t:.1} s: {} trigger: scale-in delayed",
                        trigger.reason.as_str()
                    ),
                    Unchanged::SaturatedScaleIn => tracing::debug!(
                        "t = {t:.1} s: saturated trigger asking for fewer workers: no scale-in"
                    ),
                }
                Ok(None)
            }
            Step::HeldBack { trigger, from, to } => {
                tracing::info!(
                    "t = {t:.1} s: {} trigger: {from} -> {to} workers held back by the cooldown",
                    trigger.reason.as_str()
                );
                Ok(None)
            }
            Step::Install { trigger, epoch, placement } => {
                tracing::info!(
                    "t = {t:.1} s: {} trigger: new instance limits on the same {} workers (epoch {epoch})",
                    trigger.reason.as_str(),
                    placement.workers
                );
                self.log_statistics(&pipeline, t);
                let keys = self.autoscaler.keys().clone();
                planner.install(RoutingPlan { epoch, placement, keys })?;
                Ok(None)
            }
            Step::Recommend(r) => {
                tracing::info!(
                    "t = {t:.1} s: {} trigger, target {:.0} req/s -> {} recommends {} -> {} workers (not applied)",
                    r.reason.as_str(),
                    r.target_rate,
                    self.autoscaler.config().policy,
                    r.from,
                    r.to
                );
                self.recommendations.push((t, *r));
                Ok(None)
            }
            Step::Rescale(r) => {
                tracing::info!(
                    "t = {t:.1} s: {} trigger, target {:.0} req/s -> {} decides {} -> {} workers (coefficients {:?})",
                    r.reason.as_str(),
                    r.target_rate,
                    self.autoscaler.config().policy,
                    r.from,
                    r.to,
                    self.autoscaler.coefficients(),
                );
                self.log_statistics(&pipeline, t);
                let record = self.execute(planner, pool, &r)?;
                Ok(Some(self.record(&r, &record)))
            }
        }
    }

    /// At debug level, the statistics a decision was made from, as `clasp plan --stats` reads
    /// them (docs/stats-schema.md), so a decision can be replayed and examined.
    fn log_statistics(&self, p: &Pipeline, t: f64) {
        if tracing::enabled!(tracing::Level::DEBUG) {
            match serde_json::to_string(&self.autoscaler.window_stats(p)) {
                Ok(json) => tracing::debug!("t = {t:.1} s: the decision's statistics: {json}"),
                Err(e) => tracing::debug!("t = {t:.1} s: statistics not printable: {e}"),
            }
        }
    }

    /// Moves the cluster to CLASP's placement over exactly `workers` workers now (an
    /// operator's scheduled rescale), recorded as a rescaling.
    pub fn rescale_to_workers(
        &mut self,
        planner: &mut Planner,
        pool: &mut WorkerPool,
        workers: u32,
    ) -> Result<ScalingEvent, ScalingError> {
        let pipeline = planner.pipeline().clone();
        let rescale = self.autoscaler.rescale_to_workers(&pipeline, workers)?;
        tracing::info!("requested rescale {} -> {} workers", rescale.from, rescale.to);
        let record = self.execute(planner, pool, &rescale)?;
        Ok(self.record(&rescale, &record))
    }

    /// Records rescale `r`, executed as `record`.
    fn record(&mut self, r: &Rescale, record: &MigrationRecord) -> ScalingEvent {
        let event = ScalingEvent {
            time_s: record.time_s,
            from_workers: r.from,
            to_workers: r.to,
            reason: r.reason.as_str().into(),
            target_rate: r.target_rate,
            planner_ms: record.planner_ms,
            max_worker_pause_ms: record.max_worker_pause_ms,
            groups_moved: record.groups,
            keys_moved: record.keys,
            bytes_moved: record.bytes,
            requests_moved: record.requests,
        };
        self.events.push(event.clone());
        event
    }

    /// Moves the cluster to `placement` now, planned as the autoscaler plans its own rescales
    /// (for experiments and tests that choose placements themselves).
    pub fn rescale_to(
        &mut self,
        planner: &mut Planner,
        pool: &mut WorkerPool,
        placement: Placement,
    ) -> Result<MigrationRecord, ScalingError> {
        let pipeline = planner.pipeline().clone();
        let rescale = self.autoscaler.rescale_to(&pipeline, placement)?;
        self.execute(planner, pool, &rescale)
    }

    /// Executes `r`: workers first started, state migrated, extra workers stopped; tells the
    /// autoscaler how it went.
    fn execute(
        &mut self,
        planner: &mut Planner,
        pool: &mut WorkerPool,
        r: &Rescale,
    ) -> Result<MigrationRecord, ScalingError> {
        let result = (|| {
            if r.to > r.from {
                scale_out(planner, pool, r.from, r.to)?;
            }
            let routing = RoutingPlan {
                epoch: r.epoch,
                placement: r.placement.clone(),
                keys: r.keys.clone(),
            };
            let record = planner.migrate(routing, &r.migration)?;
            if r.to < r.from {
                scale_in(planner, pool, r.from, r.to)?;
            }
            Ok::<_, ScalingError>(record)
        })();
        match &result {
            Ok(record) => self.autoscaler.rescaled(record.time_s),
            Err(_) => self.autoscaler.rescale_failed(),
        }
        result
    }
}
