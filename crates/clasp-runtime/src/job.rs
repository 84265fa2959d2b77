//! A whole run: start the cluster, place the pipeline, feed the inputs (pacing them), rescale
//! as the policy decides, and collect the outputs, the final state and the statistics.

use crate::cluster::{Cluster, ClusterError, Launch};
use crate::fault::catalog::{self, CatalogError};
use crate::fault::runner::{positions_of, restore_orders};
use crate::fault::store::{self, StoreError};
use crate::fault::{CheckpointRecord, FaultNote, FaultTolerance, JobHooks, RecoveryRecord};
use crate::observe::Observatory;
use crate::planner::stats::{MigrationRecord, RunSummary};
use crate::planner::{Input, PlannerConfig, PlannerError, Progress, SinkOutput};
use crate::routing::RoutingPlan;
use crate::scaling::{CoefficientSample, ScalingError, ScalingEvent, ScalingLoop};
use clasp_core::placement::Placement;
use clasp_core::stats::ObservedStats;
use clasp_core::{Pipeline, WorkerId};
use clasp_plan::autoscaler::{AutoscalerConfig, Recommendation};
use clasp_plan::keys::assign_keys;
use clasp_plan::policy::clasp_on_workers;
use clasp_plan::{PlanInput, Policy};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::time::Duration;

/// What to run and how.
#[derive(Debug)]
pub struct Job {
    /// The pipeline.
    pub pipeline: Pipeline,
    /// Workers at the start.
    pub workers: u32,
    /// Executor slots per worker.
    pub slots: u32,
    /// Planner settings (batch size, intervals, limits).
    pub planner: PlannerConfig,
    /// How workers are started.
    pub launch: Launch,
    /// The placement to start from; default: CLASP's placement of the spec's rates on
    /// `workers` workers (Eq. 12's allocation on one worker).
    pub placement: Option<Placement>,
    /// The autoscaler: policy, triggers, estimator.
    pub scaling: AutoscalerConfig,
    /// Stop the inputs after this long.
    pub duration: Option<Duration>,
    /// The rate the initial placement is planned for (requests/s).
    pub initial_rate: f64,
    /// Rescales to carry out whatever the policy decides, in order of `after_requests`.
    pub rescales: Vec<RescaleAt>,
    /// Checkpoints and recovery.
    pub fault: FaultTolerance,
}

/// A rescale at a point of the input: once `after_requests` input requests entered the
/// planner, move to CLASP's placement over `workers` workers (at the next interval).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RescaleAt {
    /// Input requests before the rescale.
    pub after_requests: u64,
    /// Workers after it.
    pub workers: u32,
}

impl std::str::FromStr for RescaleAt {
    type Err = String;

    /// `REQUESTS:WORKERS`, e.g. `20000:3`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (n, w) = s
            .split_once(':')
            .ok_or_else(|| format!("`{s}`: expected REQUESTS:WORKERS, e.g. 20000:3"))?;
        let after_requests =
            n.trim().parse().map_err(|_| format!("`{s}`: `{n}` is not a request count"))?;
        let workers: u32 =
            w.trim().parse().map_err(|_| format!("`{s}`: `{w}` is not a worker count"))?;
        if workers == 0 {
            return Err(format!("`{s}`: a rescale needs at least 1 worker"));
        }
        Ok(Self { after_requests, workers })
    }
}

/// Everything `--stats` writes: the observed statistics (the schema `clasp plan --stats`
/// reads) plus the run's scaling history.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunStats {
    /// Table 2 metrics over the run.
    #[serde(flatten)]
    pub observed: ObservedStats,
    /// The policy.
    pub policy: String,
    /// Rescalings.
    pub scaling_events: Vec<ScalingEvent>,
    /// Every migration, with per-worker pauses.
    pub migrations: Vec<MigrationRecord>,
    /// Estimates after every interval.
    pub coefficients_over_time: Vec<CoefficientSample>,
    /// Decisions the cooldown held back.
    pub held_back: u32,
    /// Decisions made but not carried out (`--scaling recommend`), with their times (s).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recommendations: Vec<RecommendationRecord>,
    /// Checkpoints taken.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checkpoints: Vec<CheckpointRecord>,
    /// Recoveries from lost workers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recoveries: Vec<RecoveryRecord>,
    /// Totals.
    pub summary: RunSummary,
    /// Set when the run failed: why, the statistics covering it up to then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// What a run produced.
#[derive(Debug)]
pub struct JobOutput {
    /// Totals.
    pub summary: RunSummary,
    /// Statistics for `--stats`.
    pub stats: RunStats,
    /// The placement at the end.
    pub placement: Placement,
    /// Lines written to the state dump.
    pub state_lines: usize,
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// Cluster trouble.
    #[error(transparent)]
    Cluster(#[from] ClusterError),
    /// Planner trouble.
    #[error(transparent)]
    Planner(#[from] PlannerError),
    /// Planning failed.
    #[error("planning the initial placement: {0}")]
    Plan(#[from] clasp_plan::PlanError),
    /// The placement given does not fit the pipeline.
    #[error("the placement does not fit the pipeline: {0}")]
    Placement(String),
    /// The checkpoint store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// No usable checkpoint.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// Checkpoints need every source to replay.
    #[error(
        "source `{source_name}` cannot replay its input, so a recovery would lose or repeat its records: exactly-once needs a replayable input (a file or a generator), or run with --checkpoint none"
    )]
    NotReplayable {
        /// The source.
        source_name: String,
    },
    /// A resumed source could not go back to its checkpoint's position.
    #[error("resuming source `{source_name}`: {error}")]
    Resume {
        /// The source.
        source_name: String,
        /// Why.
        #[source]
        error: clasp_core::source::SourceError,
    },
    /// Fault injection needs worker processes.
    #[error("killing workers needs them as processes (--processes)")]
    KillsNeedProcesses,
    /// The run failed after it started; what could be saved was written.
    #[error("the run failed; partial results: {saved}")]
    Failed {
        /// Why it failed.
        #[source]
        error: Box<JobError>,
        /// What was written anyway.
        saved: String,
        /// The statistics up to the failure (for `--stats`).
        stats: Box<RunStats>,
    },
}

impl From<ScalingError> for JobError {
    fn from(e: ScalingError) -> Self {
        match e {
            ScalingError::Cluster(e) => Self::Cluster(e),
            ScalingError::Planner(e) => Self::Planner(e),
            ScalingError::Plan(e) => Self::Plan(e),
        }
    }
}

/// A decision of the recommend mode, as the stats file records it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RecommendationRecord {
    /// When it was made (s since the start).
    pub time_s: f64,
    /// What fired.
    pub reason: String,
    /// The rate decided for (requests/s).
    pub target_rate: f64,
    /// Workers running.
    pub from_workers: u32,
    /// Workers it asks for.
    pub to_workers: u32,
}

impl RecommendationRecord {
    fn new(time_s: f64, r: &Recommendation) -> Self {
        Self {
            time_s,
            reason: r.reason.as_str().into(),
            target_rate: r.target_rate,
            from_workers: r.from,
            to_workers: r.to,
        }
    }
}

/// The placement to start from.
pub fn initial_placement(job: &Job) -> Result<Placement, JobError> {
    if let Some(p) = &job.placement {
        p.check(&job.pipeline).map_err(JobError::Placement)?;
        return Ok(p.clone());
    }
    let plan = &job.scaling.plan;
    let stats = clasp_plan::projection::spec_observation(
        &job.pipeline,
        job.initial_rate,
        plan,
        &clasp_core::stats::Coefficients::PAPER,
    );
    let input = PlanInput {
        pipeline: &job.pipeline,
        stats: &stats,
        target_rate: job.initial_rate,
        coefficients: clasp_core::stats::Coefficients::PAPER,
        config: plan,
        current: None,
    };
    let decision = if job.workers <= 1 {
        Policy::Static.decide(&input)?
    } else {
        clasp_on_workers(Policy::Clasp, &input, job.workers)?
    };
    Ok(decision.placement)
}

/// Runs `job` on `inputs`; `progress` sees every interval, `on_event` every rescaling. With
/// `state_dump`, the final keyed state is written there as JSON lines.
pub fn run(
    job: Job,
    inputs: Vec<Input>,
    sink: Box<dyn SinkOutput>,
    state_dump: Option<&mut dyn Write>,
    progress: impl FnMut(&Progress),
    on_event: impl FnMut(&ScalingEvent),
) -> Result<JobOutput, JobError> {
    run_with_faults(job, inputs, sink, state_dump, progress, on_event, |_| {}, None)
}

/// [`run`], showing the run to `observatory` after every interval and at the end.
pub fn run_observed(
    job: Job,
    inputs: Vec<Input>,
    sink: Box<dyn SinkOutput>,
    state_dump: Option<&mut dyn Write>,
    progress: impl FnMut(&Progress),
    on_event: impl FnMut(&ScalingEvent),
    observatory: Option<&Observatory>,
) -> Result<JobOutput, JobError> {
    run_with_faults(job, inputs, sink, state_dump, progress, on_event, |_| {}, observatory)
}

/// [`run`], with `on_note` seeing every checkpoint and recovery, and the run shown to
/// `observatory` after every interval and at the end.
#[allow(clippy::too_many_arguments)]
pub fn run_with_faults(
    job: Job,
    mut inputs: Vec<Input>,
    sink: Box<dyn SinkOutput>,
    state_dump: Option<&mut dyn Write>,
    mut progress: impl FnMut(&Progress),
    mut on_event: impl FnMut(&ScalingEvent),
    mut on_note: impl FnMut(&FaultNote),
    observatory: Option<&Observatory>,
) -> Result<JobOutput, JobError> {
    let checkpoints = job.fault.checkpoint.is_some();
    if !job.fault.kills.is_empty() && !matches!(job.launch, Launch::Processes { .. }) {
        return Err(JobError::KillsNeedProcesses);
    }
    let store = if checkpoints {
        if let Some(i) = inputs.iter().find(|i| !i.reader.rewindable()) {
            let source_name = job.pipeline.sources[i.source.index()].name.clone();
            return Err(JobError::NotReplayable { source_name });
        }
        Some(store::open(&job.fault.store)?)
    } else {
        None
    };
    let resume = job.fault.resume.clone();
    let groups = job.planner.settings.key_groups;
    let (placement, keys, epoch) = match &resume {
        Some(m) => (m.placement.clone(), m.keys.clone(), m.epoch + 1),
        None => {
            let placement = initial_placement(&job)?;
            let keys = assign_keys(&job.pipeline, &placement, groups, None);
            (placement, keys, 1)
        }
    };
    // Where each source resumes, with the watermark it had there.
    let mut resumed_watermarks = vec![None; job.pipeline.sources.len()];
    if let Some(m) = &resume {
        let positions = positions_of(&job.pipeline, Some(m), None);
        for input in &mut inputs {
            let Some(to) = positions.get(input.source.index()).cloned().flatten() else {
                continue;
            };
            input.reader.seek(&to.position).map_err(|error| JobError::Resume {
                source_name: job.pipeline.sources[input.source.index()].name.clone(),
                error,
            })?;
            resumed_watermarks[input.source.index()] = to.watermark;
        }
    }
    let first_id = match &store {
        Some(s) if resume.is_none() => {
            // A fresh job: checkpoints of an earlier one in this store are not its own.
            for name in s.list("ckpt-")? {
                s.delete(&name)?;
            }
            1
        }
        Some(s) => {
            catalog::prune(&**s, job.fault.retain)?;
            catalog::next_id(&**s)?
        }
        None => 1,
    };
    let workers = placement.workers as usize;
    let policy = job.scaling.policy;
    let mut planner_config = job.planner.clone();
    if checkpoints {
        planner_config.heartbeat_timeout = Some(job.fault.heartbeat_timeout);
    }
    let mut cluster = Cluster::start(
        job.pipeline.clone(),
        planner_config,
        sink,
        job.launch.clone(),
        workers,
        job.slots,
    )?;
    let routing = RoutingPlan { epoch, placement: placement.clone(), keys: keys.clone() };
    cluster.planner.install(routing.clone())?;
    if let (Some(m), Some(s)) = (&resume, &store) {
        let orders = restore_orders(&job.pipeline, &routing, Some(m), 0, &s.location());
        if let Err(e) = cluster.planner.restore(orders) {
            cluster.pool.kill_all();
            return Err(e.into());
        }
    }
    let mut scaler = ScalingLoop::new(job.scaling.clone(), &job.pipeline, placement, keys, epoch)?;
    if let Some(o) = observatory {
        o.observe(&cluster.planner, None, Some(&scaler));
    }
    scaler.autoscaler_mut().set_checkpoints(
        job.fault.checkpoint,
        first_id,
        resume.as_ref().map(|m| m.id),
    );
    let fault = store.map(|s| crate::fault::runner::FaultRun::new(job.fault.clone(), s));
    if let Some(f) = &fault
        && !job.fault.kills.is_empty()
    {
        let kills = f.kills.clone();
        cluster.planner.set_migration_hook(Box::new(move |w| {
            clasp_core::sync::lock(&kills).at_migration(w);
        }));
    }
    let Cluster { planner, pool } = &mut cluster;
    let mut rescales = job.rescales.clone();
    rescales.sort_by_key(|r| std::cmp::Reverse(r.after_requests));
    let mut hooks = JobHooks {
        scaler: &mut scaler,
        pool,
        rescales,
        on_event: &mut on_event,
        on_note: &mut on_note,
        fault,
        failure: None,
        observatory,
    };
    planner.resume_watermarks(resumed_watermarks);
    let result = planner.run_with(inputs, job.duration, &mut progress, &mut hooks);
    let failure = hooks.failure.take();
    if let Some(f) = hooks.fault.as_mut() {
        f.note_first_completion(planner);
    }
    let (checkpoints, recoveries) =
        hooks.fault.take().map(|f| (f.checkpoints, f.recoveries)).unwrap_or_default();
    drop(hooks);
    let error: JobError = match (result, failure) {
        (Ok(summary), None) => {
            if let Some(o) = observatory {
                o.observe(&cluster.planner, None, Some(&scaler));
                o.finish();
            }
            let state_lines = match state_dump {
                Some(out) => cluster.planner.dump_state(out)?,
                None => 0,
            };
            let mut stats = run_stats(&cluster.planner, &scaler, policy, summary.clone());
            stats.checkpoints = checkpoints;
            stats.recoveries = recoveries;
            let placement = scaler.autoscaler().placement().clone();
            cluster.shutdown()?;
            return Ok(JobOutput { summary, stats, placement, state_lines });
        }
        (Ok(_), Some(e)) => e.into(),
        (Err(e), _) => e.into(),
    };
    if let Some(o) = observatory {
        o.finish();
    }
    // What arrived is kept: the sink records so far and the keyed state of the workers still
    // alive, saved before they are stopped.
    let mut saved = Vec::new();
    let output_failed = matches!(error, JobError::Planner(PlannerError::Output { .. }));
    match cluster.planner.flush_output() {
        Ok(()) => saved.push("the sink records that arrived are written".to_string()),
        // Already the run's error.
        Err(_) if output_failed => {}
        Err(e) => saved.push(format!("writing the sink records failed too: {e}")),
    }
    if let Some(out) = state_dump {
        saved.push(match cluster.planner.dump_surviving_state(out, Duration::from_secs(30)) {
            Ok((lines, workers)) => {
                let workers: Vec<String> = workers.iter().map(WorkerId::to_string).collect();
                format!("--state-dump holds {lines} keys, of workers {} only", workers.join(", "))
            }
            Err(e) => format!("the state dump failed too: {e}"),
        });
    }
    let mut stats = run_stats(&cluster.planner, &scaler, policy, cluster.planner.partial_summary());
    stats.checkpoints = checkpoints;
    stats.recoveries = recoveries;
    stats.failed = Some(error.to_string());
    cluster.pool.kill_all();
    Err(JobError::Failed {
        error: Box::new(error),
        saved: saved.join("; "),
        stats: Box::new(stats),
    })
}

/// The statistics of a run for `--stats`: observed over the whole run, and the scaling history.
fn run_stats(
    planner: &crate::planner::Planner,
    scaler: &ScalingLoop,
    policy: Policy,
    summary: RunSummary,
) -> RunStats {
    let mut observed = planner.observed(summary.duration_s + 1.0);
    let autoscaler = scaler.autoscaler();
    observed.coefficients = Some(autoscaler.coefficients());
    RunStats {
        observed,
        policy: policy.name().into(),
        scaling_events: scaler.events.clone(),
        migrations: summary.migrations.clone(),
        coefficients_over_time: autoscaler.coefficient_history().to_vec(),
        held_back: autoscaler.held_back(),
        recommendations: scaler
            .recommendations
            .iter()
            .map(|(t, r)| RecommendationRecord::new(*t, r))
            .collect(),
        checkpoints: Vec::new(),
        recoveries: Vec::new(),
        summary,
        failed: None,
    }
}
