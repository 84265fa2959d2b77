//! The Flink Kubernetes operator's autoscaler (apache/flink-kubernetes-operator, module
//! `flink-autoscaler`), with its defaults, over clasp's statistics. A Flink job vertex is a
//! clasp operator and a subtask an instance.
//!
//! **Evaluation** (`ScalingMetricEvaluator`), per operator in topological order:
//! - true processing rate TPR = records processed per second / busy fraction of a subtask
//!   (the busiest one, `metrics.busy-time.aggregator` = `MAX`): what the operator would process
//!   with every subtask busy all the time;
//! - target data rate: the source's input rate, flowing downstream through each edge's observed
//!   output ratio (records on the edge per record the producer took in), as in [`super::ds2`];
//! - catch-up data rate: the backlog over `catch-up.duration`, flowing downstream likewise;
//! - target capacity = round(catch-up + input·`restart.time`/`catch-up.duration` +
//!   input / `utilization.target`);
//! - the utilization bounds: the capacities at utilization `target + boundary` (scale-up
//!   threshold, without the restart term) and `target − boundary` (scale-down threshold); while
//!   processing a backlog (backlog > `backlog-processing.lag-threshold` of input) 1 and 0.
//!
//! **Parallelism** (`JobVertexScaler`): scale factor = target capacity / TPR, within
//! [1 − `scale-down.max-factor`, 1 + `scale-up.max-factor`]; P = ⌈factor · P_cur⌉ within
//! [min(P_cur, `vertex.min-parallelism`), min(max parallelism, max(P_cur,
//! `vertex.max-parallelism`))]; a keyed operator's changed P is aligned to its key groups (the
//! max parallelism) by `scaling.parallelism-alignment.mode` = `BALANCED`: the first P from the
//! computed one towards the bound (up to P_cur when scaling down) that divides the key groups
//! or gives every subtask fewer of them, else the computed P.
//!
//! **Execution** (`ScalingExecutor`): nothing changes unless some operator whose parallelism
//! changes has its TPR outside the utilization bounds; then every changed operator changes.
//!
//! **Placement**: slot sharing. Subtask i of every operator shares slot i, slots are spread
//! round-robin over ⌈max_o P_o / slots⌉ workers (slot i on worker i mod W), so each worker
//! holds ⌊P_o/W⌋ or ⌈P_o/W⌉ subtasks of every operator. A keyed operator's requests follow
//! its key groups (subtask i of P owns the range Flink's `KeyGroupRangeAssignment` gives it),
//! the others' follow the subtasks.
//!
//! **Where clasp's statistics stand in for Flink's metrics**: busy time is the execution time
//! per operator, except on saturated workers, where every subtask counts as busy all the time
//! ([`super::busy`]; the statistics do not say how busy the subtasks of other workers were);
//! records are requests; the source's input rate is the target rate decided for (the
//! planner's arrivals, which already include what Flink adds as the lag's growth rate); the
//! backlog is the planner queue plus the requests queued at workers, counted in inputs
//! (divided by the requests one input makes). Observations are averaged over the state
//! machine's decision window, not `metrics.window` (15 min).
//!
//! **Not modelled**: the observed-TPR switch while catching up (it needs the lag over time),
//! restart-time tracking (off by default), ineffective scale-up detection (off by default),
//! memory tuning and GC / heap vetoes, excluded periods and vertices, and the observed
//! scalability coefficient (off by default). `stabilization.interval` (5 min without
//! decisions after a rescale) and `scale-down.interval` (a scale-down waits 1 h, then takes the
//! largest parallelism recommended meanwhile) need memory across decisions, which a policy
//! here does not keep: the state machine's window, which never reaches back past the last
//! rescale, and its cooldown, which holds back a scale-in back to the previous worker count,
//! stand in for them. The cluster has `max_workers` workers: where Flink's resource check
//! would veto a scaling beyond the cluster, every parallelism is capped at the slots it has.

use super::busy::{OperatorBusy, busy_times};
use super::{Observed, Slice, build_placement, finite_non_negative};
use clasp_core::placement::Placement;
use clasp_core::stats::ObservedStats;
use clasp_core::{Pipeline, WorkerId};
use serde::{Deserialize, Serialize};

/// `job.autoscaler.utilization.target`.
pub const UTILIZATION_TARGET: f64 = 0.7;
/// `job.autoscaler.target.utilization.boundary`.
pub const UTILIZATION_BOUNDARY: f64 = 0.3;
/// `job.autoscaler.scale-down.max-factor`.
pub const MAX_SCALE_DOWN_FACTOR: f64 = 0.6;
/// `job.autoscaler.scale-up.max-factor`.
pub const MAX_SCALE_UP_FACTOR: f64 = 100_000.0;
/// `job.autoscaler.catch-up.duration` (30 min), in seconds.
pub const CATCH_UP_DURATION_S: f64 = 1800.0;
/// `job.autoscaler.restart.time` (5 min), in seconds.
pub const RESTART_TIME_S: f64 = 300.0;
/// `job.autoscaler.backlog-processing.lag-threshold` (5 min), in seconds.
pub const BACKLOG_LAG_THRESHOLD_S: f64 = 300.0;
/// `job.autoscaler.vertex.min-parallelism`.
pub const VERTEX_MIN_PARALLELISM: u32 = 1;
/// `job.autoscaler.vertex.max-parallelism`.
pub const VERTEX_MAX_PARALLELISM: u32 = 200;
/// Max parallelism (key groups) of a job without `pipeline.max-parallelism`: the lower bound of
/// Flink's `KeyGroupRangeAssignment.computeDefaultMaxParallelism`, which applies to any job
/// first deployed with parallelism ≤ 85.
pub const DEFAULT_MAX_PARALLELISM: u32 = 128;

/// `job.autoscaler.metrics.busy-time.aggregator`: how subtasks' busy times combine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BusyTimeAggregator {
    /// The busiest subtask (Flink's default).
    #[default]
    Max,
    /// The mean over subtasks.
    Avg,
}

/// `job.autoscaler.scaling.parallelism-alignment.mode` for keyed operators.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Alignment {
    /// Accept a divisor of the key groups or fewer key groups per subtask (Flink's default).
    #[default]
    Balanced,
    /// Accept only a divisor of the key groups.
    EvenlySpread,
    /// No alignment.
    Off,
}

/// The autoscaler's settings: Flink's defaults, with clasp's slots and worker limit.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Executor slots per worker (Flink: `taskmanager.numberOfTaskSlots`).
    pub slots: u32,
    /// Workers in the cluster.
    pub max_workers: u32,
    /// [`UTILIZATION_TARGET`].
    pub utilization_target: f64,
    /// [`UTILIZATION_BOUNDARY`].
    pub utilization_boundary: f64,
    /// [`MAX_SCALE_DOWN_FACTOR`].
    pub max_scale_down_factor: f64,
    /// [`MAX_SCALE_UP_FACTOR`].
    pub max_scale_up_factor: f64,
    /// [`CATCH_UP_DURATION_S`].
    pub catch_up_duration_s: f64,
    /// [`RESTART_TIME_S`].
    pub restart_time_s: f64,
    /// [`BACKLOG_LAG_THRESHOLD_S`].
    pub backlog_lag_threshold_s: f64,
    /// [`VERTEX_MIN_PARALLELISM`].
    pub vertex_min_parallelism: u32,
    /// [`VERTEX_MAX_PARALLELISM`].
    pub vertex_max_parallelism: u32,
    /// [`DEFAULT_MAX_PARALLELISM`]: key groups of keyed operators, and every operator's bound.
    pub max_parallelism: u32,
    /// How subtasks' busy times combine.
    pub busy_time_aggregator: BusyTimeAggregator,
    /// Alignment of keyed operators to their key groups.
    pub alignment: Alignment,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            slots: 10,
            max_workers: 10,
            utilization_target: UTILIZATION_TARGET,
            utilization_boundary: UTILIZATION_BOUNDARY,
            max_scale_down_factor: MAX_SCALE_DOWN_FACTOR,
            max_scale_up_factor: MAX_SCALE_UP_FACTOR,
            catch_up_duration_s: CATCH_UP_DURATION_S,
            restart_time_s: RESTART_TIME_S,
            backlog_lag_threshold_s: BACKLOG_LAG_THRESHOLD_S,
            vertex_min_parallelism: VERTEX_MIN_PARALLELISM,
            vertex_max_parallelism: VERTEX_MAX_PARALLELISM,
            max_parallelism: DEFAULT_MAX_PARALLELISM,
            busy_time_aggregator: BusyTimeAggregator::Max,
            alignment: Alignment::Balanced,
        }
    }
}

impl Config {
    /// The most subtasks of one operator the cluster's slots hold under slot sharing.
    pub fn cluster_slots(&self) -> u32 {
        self.max_workers.max(1).saturating_mul(self.slots.max(1))
    }

    /// `AutoScalerUtils.getTargetProcessingCapacity`: the rate to provision for a target data
    /// rate `target` and catch-up rate `catch_up` at `utilization`, with or without the restart
    /// catch-up term.
    fn capacity(&self, target: f64, catch_up: f64, utilization: f64, restart: bool) -> f64 {
        let utilization = utilization.clamp(0.0, 1.0);
        if utilization == 0.0 {
            return f64::INFINITY;
        }
        let restart_rate = if restart && self.catch_up_duration_s > 0.0 {
            target * self.restart_time_s / self.catch_up_duration_s
        } else {
            0.0
        };
        (catch_up + restart_rate + target / utilization).round()
    }
}

/// One operator's evaluation and decision.
#[derive(Clone, Debug, PartialEq)]
pub struct Vertex {
    /// Subtasks running while observed.
    pub current: u32,
    /// TPR (records/s with every subtask busy); infinite when nothing was processed or no
    /// busy time observed.
    pub true_rate: f64,
    /// Target data rate (records/s).
    pub target_rate: f64,
    /// Catch-up data rate (records/s).
    pub catch_up_rate: f64,
    /// Target capacity (records/s).
    pub target_capacity: f64,
    /// Scale-up threshold: a TPR below it is too low.
    pub scale_up_threshold: f64,
    /// Scale-down threshold: a TPR above it is too high.
    pub scale_down_threshold: f64,
    /// The parallelism `JobVertexScaler` computes, before the job-wide utilization check.
    pub computed: u32,
}

impl Vertex {
    /// Whether the TPR is outside the utilization bounds.
    pub fn outside_bounds(&self) -> bool {
        self.true_rate < self.scale_up_threshold || self.true_rate > self.scale_down_threshold
    }
}

/// The evaluation of every operator and the job-wide decision.
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    /// Per operator.
    pub vertices: Vec<Vertex>,
    /// The backlog (input requests).
    pub backlog: f64,
    /// Whether the backlog exceeds the lag threshold (bounds widen to utilization 1 and 0).
    pub processing_backlog: bool,
    /// Whether the job rescales: some changed operator is outside its bounds.
    pub scales: bool,
    /// The decided parallelism per operator, capped at the cluster's slots.
    pub parallelism: Vec<u32>,
}

/// Evaluates every operator of `p` for `target_rate` (module docs). `current` is the running
/// placement (its instances are the current parallelism, else the statistics' record, else 1).
pub fn evaluate(
    p: &Pipeline,
    stats: &ObservedStats,
    target_rate: f64,
    current: Option<&Placement>,
    cfg: &Config,
) -> Evaluation {
    let busy = busy_times(p, stats, current);
    let per_input = super::ds2::target_rates(p, stats, 1.0);
    let input = finite_non_negative(target_rate);
    let backlog = backlog(stats);
    let consumed = finite_non_negative(stats.throughput);
    let processing_backlog = consumed > 0.0 && backlog / consumed > cfg.backlog_lag_threshold_s;
    let catch_up =
        if cfg.catch_up_duration_s > 0.0 { backlog / cfg.catch_up_duration_s } else { 0.0 };
    let (upper, lower) = if processing_backlog {
        (1.0, 0.0)
    } else {
        let (t, b) = (cfg.utilization_target, cfg.utilization_boundary);
        (t + b, t - b)
    };
    let vertices: Vec<Vertex> = p
        .operators
        .iter()
        .map(|op| {
            let o = op.id.index();
            let current = current_parallelism(p, stats, current, o);
            let target = input * per_input[o];
            let catch_up = catch_up * per_input[o];
            let mut v = Vertex {
                current,
                true_rate: true_rate(&busy[o], current, cfg.busy_time_aggregator),
                target_rate: target,
                catch_up_rate: catch_up,
                target_capacity: cfg.capacity(target, catch_up, cfg.utilization_target, true),
                scale_up_threshold: cfg.capacity(target, catch_up, upper, false),
                scale_down_threshold: cfg.capacity(target, catch_up, lower, true),
                computed: current,
            };
            v.computed = scale(&v, op.stateful, cfg);
            v
        })
        .collect();
    let scales = vertices.iter().any(|v| v.computed != v.current && v.outside_bounds());
    let cap = cfg.cluster_slots();
    let parallelism = vertices
        .iter()
        .map(|v| if scales { v.computed } else { v.current }.clamp(1, cap))
        .collect();
    Evaluation { vertices, backlog, processing_backlog, scales, parallelism }
}

/// Backlog in input requests: the planner queue, plus the requests queued at workers divided
/// by the requests one input makes (Σ_o N_o / Λ).
fn backlog(stats: &ObservedStats) -> f64 {
    let queued: f64 = stats.workers.iter().map(|w| finite_non_negative(w.queue)).sum();
    let requests: f64 = stats.operators.iter().map(|o| finite_non_negative(o.processed_rate)).sum();
    let throughput = finite_non_negative(stats.throughput);
    let in_flight = if requests > 0.0 { queued * throughput / requests } else { 0.0 };
    finite_non_negative(stats.planner_queue) + in_flight
}

/// Subtasks of operator `o` while observed.
fn current_parallelism(
    p: &Pipeline,
    stats: &ObservedStats,
    current: Option<&Placement>,
    o: usize,
) -> u32 {
    let placed = current
        .filter(|c| c.operators.len() == p.operators.len())
        .map_or(0, |c| c.operators[o].shares.iter().map(|s| s.instances).sum::<u32>());
    let recorded = stats.operator(p, p.operators[o].id).map_or(0, |s| s.parallelism);
    if placed > 0 { placed } else { recorded.max(1) }
}

/// TPR: records per second / busy fraction of a subtask. With nothing processed, or no busy
/// time, infinite (Flink assumes infinite processing power until data flows).
fn true_rate(busy: &OperatorBusy, current: u32, aggregator: BusyTimeAggregator) -> f64 {
    let avg = || busy.busy / (f64::from(current.max(1)) * 1e6);
    let fraction = match aggregator {
        BusyTimeAggregator::Max => busy.max_instance_busy().unwrap_or_else(avg),
        BusyTimeAggregator::Avg => avg(),
    };
    if busy.processed <= 0.0 || fraction <= 0.0 { f64::INFINITY } else { busy.processed / fraction }
}

/// `JobVertexScaler.computeScaleTargetParallelism` and `scale` for one operator.
fn scale(v: &Vertex, keyed: bool, cfg: &Config) -> u32 {
    let factor = v.target_capacity / v.true_rate;
    if factor.is_nan() {
        return v.current;
    }
    let factor = factor.max(1.0 - cfg.max_scale_down_factor).min(1.0 + cfg.max_scale_up_factor);
    let raw = (factor * f64::from(v.current)).ceil().min(f64::from(i32::MAX));
    let lower = v.current.min(cfg.vertex_min_parallelism);
    let upper = v.current.max(cfg.vertex_max_parallelism);
    let bound = cfg.max_parallelism.min(upper);
    let new = (raw as u32).max(lower).min(bound).max(1);
    if new == v.current || !keyed {
        return new;
    }
    align(v.current, new, upper, cfg)
}

/// `ParallelismAligner.firstAlignedInRegion` with the built-in modes: the first P from `new`
/// up to the region's end (the bound when scaling up, the current parallelism when scaling
/// down) that divides the key groups N, or (`Balanced`) gives every subtask fewer of them
/// than `new` does; `new` itself if there is none.
fn align(current: u32, new: u32, upper: u32, cfg: &Config) -> u32 {
    let n = cfg.max_parallelism.max(1);
    let accept_load_reducing = match cfg.alignment {
        Alignment::Off => return new,
        Alignment::Balanced => true,
        Alignment::EvenlySpread => false,
    };
    let bound = n.min(cfg.max_parallelism.min(upper));
    let end = if new > current { bound } else { current.min(bound) };
    (new..=end)
        .find(|&p| n.is_multiple_of(p) || (accept_load_reducing && n / p < n / new))
        .unwrap_or(new)
}

/// The decided parallelism of every operator.
pub fn parallelism(
    p: &Pipeline,
    stats: &ObservedStats,
    target_rate: f64,
    current: Option<&Placement>,
    cfg: &Config,
) -> Vec<u32> {
    evaluate(p, stats, target_rate, current, cfg).parallelism
}

/// Workers slot sharing needs: ⌈max_o P_o / slots⌉, within `1..=max_workers`.
pub fn workers_for(parallelism: &[u32], cfg: &Config) -> u32 {
    let most = parallelism.iter().copied().max().unwrap_or(1);
    most.div_ceil(cfg.slots.max(1)).clamp(1, cfg.max_workers.max(1))
}

/// The decided worker count.
pub fn worker_count(
    p: &Pipeline,
    stats: &ObservedStats,
    target_rate: f64,
    current: Option<&Placement>,
    cfg: &Config,
) -> u32 {
    workers_for(&parallelism(p, stats, target_rate, current, cfg), cfg)
}

/// The decision's placement: the running one if the job does not rescale (with its shares of
/// the demand at `target_rate`), else the decided parallelism placed with slot sharing.
pub fn place(
    p: &Pipeline,
    stats: &ObservedStats,
    target_rate: f64,
    current: Option<&Placement>,
    cfg: &Config,
) -> Placement {
    let e = evaluate(p, stats, target_rate, current, cfg);
    if let Some(running) = current.filter(|c| !e.scales && c.check(p).is_ok()) {
        let observed = Observed::new(p, stats, target_rate);
        let mut kept = running.clone();
        for op in &mut kept.operators {
            op.demand = observed.demand(op.operator);
            for s in &mut op.shares {
                s.share = s.fraction * op.demand;
            }
        }
        return kept;
    }
    let workers = workers_for(&e.parallelism, cfg);
    spread(p, stats, target_rate, &e.parallelism, workers, cfg)
}

/// `parallelism` with subtask i of every operator on worker i mod `workers`.
pub fn spread(
    p: &Pipeline,
    stats: &ObservedStats,
    target_rate: f64,
    parallelism: &[u32],
    workers: u32,
    cfg: &Config,
) -> Placement {
    let workers = workers.max(1);
    let observed = Observed::new(p, stats, target_rate);
    let slices = p
        .operators
        .iter()
        .map(|op| {
            let subtasks = parallelism.get(op.id.index()).copied().unwrap_or(1).max(1);
            let on = workers.min(subtasks);
            let mut slices: Vec<Slice> =
                (0..on).map(|w| Slice { worker: WorkerId(w), weight: 0.0, instances: 0 }).collect();
            for i in 0..subtasks {
                let s = &mut slices[(i % workers) as usize];
                s.instances += 1;
                s.weight +=
                    if op.stateful { key_groups(i, subtasks, cfg.max_parallelism) } else { 1.0 };
            }
            slices
        })
        .collect();
    build_placement(p, &observed, workers, slices)
}

/// Key groups of subtask `i` of `p` over `n` groups (`KeyGroupRangeAssignment`: subtask i owns
/// groups ⌈i·n/p⌉ ..= ⌊((i+1)·n − 1)/p⌋).
fn key_groups(i: u32, p: u32, n: u32) -> f64 {
    let (i, p, n) = (u64::from(i), u64::from(p), u64::from(n.max(1)));
    let start = (i * n).div_ceil(p);
    let end = ((i + 1) * n - 1) / p;
    (end + 1).saturating_sub(start) as f64
}

#[cfg(test)]
mod tests;
