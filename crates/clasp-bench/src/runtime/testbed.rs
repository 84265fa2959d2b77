//! The emulated testbed the runtime versions of the paper's figures run on (`scaling`,
//! `placement`, `worker-count`, `validate`, `state-locality`).
//!
//! This machine has two cores shared with other work; the paper's workers have eight cores
//! each. Spinning cannot add capacity here, so a worker's capacity is emulated: every
//! operator's execution *sleeps* its service time (`exec_us`, default the paper's 400 µs per
//! record), holding an executor slot without using a core. A worker with `slots` slots then
//! has a capacity of W = `slots` × 10⁶ µs of execution per second whatever the host's cores,
//! and adding workers adds capacity — as long as the real CPU of the data path stays well
//! below the two cores, which every run reports (`CPU (cores)`). One slot is the default: its
//! W = 10⁶ µs/s is closest to the paper's measured W̄ ≈ 850,000 µs/s (a Faasm worker with ten
//! slots had capacity for 0.85 executions at a time), so α, β and γ weigh against a worker's
//! capacity as they did on the paper's testbed. One record per request (`batch 1`), as the
//! paper's tuples. Workers run as processes of the `clasp` binary (`--set launch=threads`
//! for threads of the bench process), so a run leaves nothing behind.
//!
//! Dispatch costs come in two regimes ([`Regime`]): this runtime's **native** costs (α, β a
//! few hundred ns of real CPU, `clasp bench dispatch`), or the paper's **emulated** ones
//! (`--set dispatch_cost=local=38.5,remote=275,fanout=51500`, the default second regime),
//! spent by the sending executor on top of the real cost (`WorkerSettings::dispatch_cost`,
//! sleeping, so they hold the slot the way Faasm's dispatch held a worker's capacity).
//! Every report names the regime of each row.

use super::{app_pipeline, cpu_so_far, worker_processes, worker_threads};
use crate::{BenchError, Options};
use clasp_core::pipeline::{ServiceMode, ServicePer, ServiceTime};
use clasp_core::placement::Placement;
use clasp_core::report::WorkerReport;
use clasp_core::stats::{Coefficients, ObservedStats};
use clasp_core::{Pipeline, SourceId};
use clasp_plan::estimator::EstimatorConfig;
use clasp_plan::keys::assign_keys;
use clasp_plan::policy::clasp_on_workers;
use clasp_plan::{PlanConfig, PlanInput, Policy};
use clasp_runtime::cluster::{Cluster, ClusterError, Launch};
use clasp_runtime::planner::stats::{ReportLog, RunSummary};
use clasp_runtime::planner::{DiscardSink, Input, PlannerConfig, PlannerError, Progress};
use clasp_runtime::routing::RoutingPlan;
use clasp_runtime::wire::DispatchCost;
use std::time::{Duration, Instant};

/// The paper's dispatch costs (§5.3): α = 38.5 µs per local and β = 275 µs per remote
/// chained request, γ = 51,500 µs per remote destination per second.
pub const PAPER_COST: &str = "local=38.5,remote=275,fanout=51500";

/// This runtime's own costs as the policies plan with them under native costs: α and β as
/// `clasp bench dispatch` measures them on this machine (≈ 0.34 and 0.57 µs of worker CPU per
/// local and remote chained request), γ a small nominal value (no fan-out cost is measurable).
pub const NATIVE_ALPHA_US: f64 = 0.35;
/// See [`NATIVE_ALPHA_US`].
pub const NATIVE_BETA_US: f64 = 0.6;
/// See [`NATIVE_ALPHA_US`].
pub const NATIVE_GAMMA_US: f64 = 100.0;

/// Key groups of every keyed operator.
pub const KEY_GROUPS: u32 = 1024;

/// A rate no cluster here sustains: what the policies plan for under an unthrottled input.
pub const UNTHROTTLED_RATE: f64 = 20_000_000.0;

/// Which dispatch costs a run has: native, or emulated on top of native.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Regime {
    /// The emulated costs, `None` for native.
    pub cost: Option<DispatchCost>,
}

impl Regime {
    /// This runtime's own costs, nothing emulated.
    pub fn native() -> Self {
        Self { cost: None }
    }

    /// The paper's costs, emulated.
    pub fn paper() -> Self {
        Self { cost: Some(DispatchCost::parse(PAPER_COST).expect("the paper's costs parse")) }
    }

    /// `native`, or `emulated` for a table column.
    pub fn label(&self) -> &'static str {
        if self.cost.is_some() { "emulated" } else { "native" }
    }

    /// What the regime is, for a report's setup lines.
    pub fn describe(&self) -> String {
        match self.cost {
            None => "native dispatch costs (this runtime's own, nothing emulated)".into(),
            Some(c) => format!(
                "EMULATED dispatch costs: local {} us, remote {} us, fanout {} us/s ({:?}), on top of the native ones",
                c.local_us, c.remote_us, c.fanout_us, c.mode
            ),
        }
    }

    /// The true costs of a worker with `slots` sleeping slots: what the policies plan with.
    pub fn coefficients(&self, slots: u32) -> Coefficients {
        let capacity = f64::from(slots) * 1e6;
        match self.cost {
            None => Coefficients {
                alpha: NATIVE_ALPHA_US,
                beta: NATIVE_BETA_US,
                gamma: NATIVE_GAMMA_US,
                capacity,
            },
            Some(c) => Coefficients {
                alpha: NATIVE_ALPHA_US + c.local_us,
                beta: NATIVE_BETA_US + c.remote_us,
                gamma: NATIVE_GAMMA_US + c.fanout_us,
                capacity,
            },
        }
    }
}

/// The regimes `--set dispatch_cost=` asks for: absent or `both`, native and the paper's;
/// `native`; `paper`; or `local=US,remote=US,fanout=US[:spin|:sleep]` alone.
pub fn regimes(o: &Options) -> Result<Vec<Regime>, BenchError> {
    match o.setting("dispatch_cost") {
        None | Some("both") => Ok(vec![Regime::native(), Regime::paper()]),
        Some("native") => Ok(vec![Regime::native()]),
        Some("paper") => Ok(vec![Regime::paper()]),
        Some(s) => DispatchCost::parse(s).map(|c| vec![Regime { cost: Some(c) }]).map_err(|e| {
            BenchError::Config(format!("--set dispatch_cost={s}: {e}; or use both, native, paper"))
        }),
    }
}

/// Checks that every `--set` key of `o` is one of `keys` (before anything runs).
pub fn check_keys(o: &Options, experiment: &str, keys: &[&str]) -> Result<(), BenchError> {
    for (k, _) in &o.settings {
        if !keys.contains(&k.as_str()) {
            return Err(BenchError::Config(format!(
                "unknown setting `{k}` for `{experiment}` on the runtime; it takes: {}",
                keys.join(", ")
            )));
        }
    }
    Ok(())
}

/// Keys every testbed experiment takes.
pub const TESTBED_KEYS: [&str; 6] =
    ["dispatch_cost", "slots", "exec_us", "warmup_s", "run_s", "apps"];

/// A whole number setting in `min..=max`, or `default`.
pub fn count(o: &Options, key: &str, default: u32, min: u32, max: u32) -> Result<u32, BenchError> {
    match o.setting(key) {
        None => Ok(default),
        Some(v) => v.parse::<u32>().ok().filter(|n| (min..=max).contains(n)).ok_or_else(|| {
            BenchError::Config(format!("--set {key}={v}: expected a whole number in {min}..={max}"))
        }),
    }
}

/// Worker counts from `--set workers=`: a list `1,5,10`, or `N` for `1..=N`; or `default`.
/// Counts are sorted, distinct and in `1..=max`.
pub fn worker_counts(o: &Options, default: &[u32], max: u32) -> Result<Vec<u32>, BenchError> {
    let Some(v) = o.setting("workers") else { return Ok(default.to_vec()) };
    let bad = || {
        BenchError::Config(format!(
            "--set workers={v}: give N (for 1..=N) or a list such as 1,5,10, each in 1..={max}"
        ))
    };
    let list: Vec<u32> = v
        .split(',')
        .map(|n| n.trim().parse::<u32>().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    if list.iter().any(|&n| n == 0 || n > max) {
        return Err(bad());
    }
    let mut counts = match list.as_slice() {
        [n] => (1..=*n).collect(),
        _ => list,
    };
    counts.sort_unstable();
    counts.dedup();
    Ok(counts)
}

/// Applications from `--set apps=a,b`, or `default`; each checked.
pub fn apps(o: &Options, default: &[&str]) -> Result<Vec<String>, BenchError> {
    let list: Vec<String> = match o.setting("apps") {
        Some(v) => {
            v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect()
        }
        None => default.iter().map(|s| (*s).to_owned()).collect(),
    };
    if list.is_empty() {
        return Err(BenchError::Config("--set apps=: give at least one application".into()));
    }
    for a in &list {
        app_pipeline(a)?;
        clasp_apps::inputs::source(a, None).map_err(BenchError::Config)?;
    }
    Ok(list)
}

/// Policies from `--set policies=a,b`, or `default`.
pub fn policies(o: &Options, default: &[Policy]) -> Result<Vec<Policy>, BenchError> {
    match o.setting("policies") {
        None => Ok(default.to_vec()),
        Some(list) => list
            .split(',')
            .map(|s| {
                s.trim()
                    .parse::<Policy>()
                    .map_err(|e| BenchError::Config(format!("--set policies={list}: {e}")))
            })
            .collect(),
    }
}

/// The emulated cluster: slots per worker, service time per record, dispatch-cost regime and
/// run lengths.
#[derive(Clone, Debug)]
pub struct Testbed {
    /// Executor slots per worker.
    pub slots: u32,
    /// Sleeping service time of every operator, per record (µs).
    pub exec_us: f64,
    /// Dispatch costs.
    pub regime: Regime,
    /// Seed of the inputs and routing draws.
    pub seed: u64,
    /// Unmeasured seconds at the start of a run.
    pub warmup_s: f64,
    /// Measured seconds after the warm-up.
    pub run_s: f64,
    /// Statistics interval (ms): the measurement's granularity.
    pub interval_ms: u64,
    /// Workers as processes of the `clasp` binary (the default: a run leaves nothing behind)
    /// or as threads of this process.
    pub processes: bool,
    /// Chains in flight per executor slot under an unthrottled input: enough to keep every
    /// slot busy. More would lengthen the queues and the drain at the end of a run, and make
    /// the completions come in waves (a worker serves its queue oldest first, so a closed loop
    /// moves its chains through the operators together) too long to average over a run.
    pub unthrottled_in_flight: usize,
}

impl Testbed {
    /// The testbed `o` describes (`slots`, `exec_us`, `warmup_s`, `run_s`), in `regime`.
    pub fn new(o: &Options, regime: Regime) -> Result<Self, BenchError> {
        Ok(Self {
            slots: count(o, "slots", 1, 1, 64)?,
            exec_us: super::number(o, "exec_us", 400.0)?,
            regime,
            seed: o.seed,
            warmup_s: super::number(o, "warmup_s", if o.quick { 1.0 } else { 3.0 })?,
            run_s: super::number(o, "run_s", if o.quick { 2.0 } else { 8.0 })?,
            interval_ms: 250,
            processes: match o.setting("launch") {
                None | Some("processes") => true,
                Some("threads") => false,
                Some(v) => {
                    return Err(BenchError::Config(format!(
                        "--set launch={v}: use processes or threads"
                    )));
                }
            },
            unthrottled_in_flight: 10,
        })
    }

    /// The lines every report of a testbed experiment starts with.
    pub fn setup_lines(&self, o: &Options) -> Vec<String> {
        vec![
            format!(
                "engine: runtime (planner and workers over loopback TCP, workers as {}), scale: {} (reduced), seed {}",
                if self.processes {
                    "processes of the clasp binary"
                } else {
                    "threads of one process"
                },
                if o.quick { "quick" } else { "full" },
                self.seed
            ),
            format!(
                "emulated capacity: {} executor slot(s) per worker; every operator sleeps {} us per record (holds its slot, not a core: spinning on 2 shared cores could not add capacity), one record per request; worker capacity W = {} us/s (paper: 850,000)",
                self.slots,
                self.exec_us,
                f64::from(self.slots) * 1e6
            ),
            format!(
                "runs: {} s measured after {} s warm-up, throughput and latency averaged over {} ms intervals",
                self.run_s, self.warmup_s, self.interval_ms
            ),
        ]
    }

    /// `app`'s pipeline with every operator sleeping `exec_us` per record.
    pub fn pipeline(&self, app: &str) -> Result<Pipeline, BenchError> {
        let mut p = app_pipeline(app)?;
        for op in &mut p.operators {
            op.service = Some(ServiceTime {
                micros: self.exec_us,
                mode: ServiceMode::Sleep,
                per: ServicePer::Record,
            });
        }
        Ok(p)
    }

    /// How workers are started.
    pub fn launch(&self) -> Result<Launch, BenchError> {
        if self.processes { worker_processes() } else { Ok(worker_threads()) }
    }

    /// What the policies plan with: this testbed's true costs and capacity.
    pub fn coefficients(&self) -> Coefficients {
        self.regime.coefficients(self.slots)
    }

    /// The online estimator, started at this testbed's true costs (as the paper starts its
    /// estimator at the values it converges to, §5.1.1), normalized by them.
    pub fn estimator(&self) -> EstimatorConfig {
        let c = self.coefficients();
        EstimatorConfig {
            load_scale: c.capacity,
            initial_capacity: c.capacity,
            local_scale: c.alpha,
            remote_scale: c.beta,
            destinations_scale: c.gamma,
            min_remote_rate: 0.0,
            ..EstimatorConfig::default()
        }
    }

    /// Planning parameters for at most `max_workers` workers.
    pub fn plan_config(&self, max_workers: u32) -> PlanConfig {
        PlanConfig {
            slots_per_worker: self.slots,
            max_workers: max_workers.max(1),
            default_exec_us: self.exec_us,
            ..PlanConfig::default()
        }
    }

    /// Planner settings: one record per request, the regime's dispatch costs, `in_flight`
    /// chains at most (and as many queued at the planner, so that the inputs queued when a run
    /// stops drain quickly), saturation as the planner sees it at this scale.
    pub fn planner_config(&self, in_flight: usize) -> PlannerConfig {
        let mut cfg = PlannerConfig {
            batch_size: 1,
            max_in_flight: in_flight,
            queue_capacity: in_flight.max(256),
            ..PlannerConfig::default()
        };
        cfg.settings.batch_size = 1;
        cfg.settings.interval_ms = self.interval_ms;
        cfg.settings.seed = self.seed;
        cfg.settings.dispatch_cost = self.regime.cost;
        cfg.settings.saturation_queue = 50.0;
        cfg.settings.saturation_wait_ms = 20.0;
        cfg
    }

    /// Spec-derived statistics of `p` at `rate`, with this testbed's costs.
    pub fn spec_stats(&self, p: &Pipeline, rate: f64, max_workers: u32) -> ObservedStats {
        clasp_plan::projection::spec_observation(
            p,
            rate,
            &self.plan_config(max_workers),
            &self.coefficients(),
        )
    }

    /// CLASP's placement of `p` over exactly `workers` workers for `rate`.
    pub fn clasp_on(&self, p: &Pipeline, rate: f64, workers: u32) -> Result<Placement, BenchError> {
        let stats = self.spec_stats(p, rate, workers);
        let plan = self.plan_config(workers);
        let input = self.plan_input(p, &stats, rate, &plan);
        clasp_on_workers(Policy::Clasp, &input, workers)
            .map(|d| d.placement)
            .map_err(|e| BenchError::Run(format!("{}: CLASP on {workers} workers: {e}", p.name)))
    }

    /// `policy`'s placement of `p` for `rate` within `max_workers`, from spec statistics.
    pub fn policy_placement(
        &self,
        p: &Pipeline,
        policy: Policy,
        rate: f64,
        max_workers: u32,
    ) -> Result<Placement, BenchError> {
        let stats = self.spec_stats(p, rate, max_workers);
        let plan = self.plan_config(max_workers);
        policy
            .decide(&self.plan_input(p, &stats, rate, &plan))
            .map(|d| d.placement)
            .map_err(|e| BenchError::Run(format!("{}: {policy}: {e}", p.name)))
    }

    fn plan_input<'a>(
        &self,
        p: &'a Pipeline,
        stats: &'a ObservedStats,
        rate: f64,
        plan: &'a PlanConfig,
    ) -> PlanInput<'a> {
        PlanInput {
            pipeline: p,
            stats,
            target_rate: rate,
            coefficients: self.coefficients(),
            config: plan,
            current: None,
        }
    }

    /// Starts a cluster running `placement` of `p` (epoch 1) with at most `in_flight` chains.
    pub fn start(
        &self,
        p: &Pipeline,
        placement: &Placement,
        in_flight: usize,
    ) -> Result<Cluster, BenchError> {
        let err = |e: &dyn std::fmt::Display| BenchError::Run(format!("{}: {e}", p.name));
        let launch = self.launch()?;
        let start = || {
            Cluster::start(
                p.clone(),
                self.planner_config(in_flight),
                Box::new(DiscardSink),
                launch.clone(),
                placement.workers as usize,
                self.slots,
            )
            .map_err(|e| {
                (matches!(e, ClusterError::Planner(PlannerError::Timeout { .. })), err(&e))
            })
        };
        // A cluster whose workers did not all connect in time is started once more (seen once
        // in hundreds of starts of ten worker processes on this loaded machine).
        let mut c = match start() {
            Err((true, e)) => {
                eprintln!("{e}; starting the cluster again");
                start().map_err(|(_, e)| e)?
            }
            other => other.map_err(|(_, e)| e)?,
        };
        let keys = assign_keys(p, placement, KEY_GROUPS, None);
        if let Err(e) =
            c.planner.install(RoutingPlan { epoch: 1, placement: placement.clone(), keys })
        {
            c.pool.kill_all();
            return Err(err(&e));
        }
        Ok(c)
    }

    /// `p`'s generated input at `rate` chains/s (`None`: unthrottled) for `secs` seconds.
    pub fn input(&self, p: &Pipeline, rate: Option<f64>, secs: f64) -> Result<Input, BenchError> {
        let count = rate.map_or(u64::MAX / 2, |r| (r * secs) as u64 + 16);
        let def = clasp_apps::inputs::source(&p.name, None).map_err(BenchError::Config)?;
        Ok(Input {
            source: SourceId(0),
            reader: def.generator(count, self.seed),
            rate: Box::new(move |_| rate),
        })
    }

    /// Chains in flight for a run at `rate` (`None`: unthrottled) on `workers` workers.
    pub fn in_flight(&self, rate: Option<f64>, workers: u32) -> usize {
        match rate {
            Some(_) => 10_000,
            None => self.unthrottled_in_flight * (self.slots * workers) as usize,
        }
    }

    /// Runs `placement` of `p` at `rate` chains/s (`None`: unthrottled) for the warm-up and
    /// the measured period.
    pub fn run(
        &self,
        p: &Pipeline,
        placement: &Placement,
        rate: Option<f64>,
    ) -> Result<Measured, BenchError> {
        let err = |e: &dyn std::fmt::Display| BenchError::Run(format!("{}: {e}", p.name));
        let secs = self.warmup_s + self.run_s;
        let (cpu0, wall0) = (cpu_so_far(), Instant::now());
        let mut attempt = 0;
        let (c, samples, summary) = loop {
            attempt += 1;
            let mut c = self.start(p, placement, self.in_flight(rate, placement.workers))?;
            let input = self.input(p, rate, secs)?;
            let mut samples = Vec::new();
            let run = c.planner.run(
                vec![input],
                Some(Duration::from_secs_f64(secs)),
                |g| samples.push(Sample::of(g)),
                |_, _| Ok(()),
            );
            match run {
                Ok(s) => break (c, samples, s),
                // A lost completion (rare; docs/runtime.md, known issues): the run is
                // repeated once rather than reported on incomplete results.
                Err(e @ PlannerError::Stalled { .. }) if attempt == 1 => {
                    eprintln!("{}: {e}; running it again", p.name);
                    c.pool.kill_all();
                }
                Err(e) => {
                    c.pool.kill_all();
                    return Err(err(&e));
                }
            }
        };
        let stats = c.planner.observed(self.run_s);
        let busy = busy(&c.planner.reports, self.warmup_s, secs, placement.workers);
        let saturated = c
            .planner
            .reports
            .window(self.warmup_s, secs)
            .filter(|r| r.saturated)
            .cloned()
            .collect();
        c.shutdown().map_err(|e| err(&e))?;
        let cpu_cores = (cpu_so_far() - cpu0).as_secs_f64() / wall0.elapsed().as_secs_f64();
        let mut m = Measured::new(&samples, self.warmup_s, secs, cpu_cores, summary, stats);
        m.busy = busy;
        m.saturated = saturated;
        Ok(m)
    }
}

/// Per worker of `workers`, the fraction of its slots' time spent executing, over the
/// reports that arrived in `(from_s, to_s]`.
fn busy(reports: &ReportLog, from_s: f64, to_s: f64, workers: u32) -> Vec<f64> {
    let mut exec = vec![0.0; workers as usize];
    let mut time = vec![0.0; workers as usize];
    for r in reports.window(from_s, to_s) {
        if let Some(w) = exec.get_mut(r.worker.index()) {
            *w += r.ops.iter().map(|o| o.exec_us).sum::<f64>() / 1e6;
            time[r.worker.index()] += r.interval_s * f64::from(r.slots.max(1));
        }
    }
    exec.iter().zip(&time).map(|(e, t)| if *t > 0.0 { e / t } else { f64::NAN }).collect()
}

/// One statistics interval of a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// End of the interval (s).
    pub t: f64,
    /// Its length (s).
    pub dt: f64,
    /// Chains completed per second.
    pub throughput: f64,
    /// Median latency of the chains completed in it (µs).
    pub p50_us: f64,
    /// Their 95th percentile (µs).
    pub p95_us: f64,
    /// Local chained requests per second (latest worker reports).
    pub local_rate: f64,
    /// Remote chained requests per second.
    pub remote_rate: f64,
}

impl Sample {
    fn of(p: &Progress) -> Self {
        Self {
            t: p.t,
            dt: p.interval_s,
            throughput: p.throughput,
            p50_us: p.p50_us as f64,
            p95_us: p.p95_us as f64,
            local_rate: p.local_rate,
            remote_rate: p.remote_rate,
        }
    }
}

/// What a run measured over its measured period.
#[derive(Clone, Debug)]
pub struct Measured {
    /// Chains completed per second over the measured intervals.
    pub throughput: f64,
    /// Median end-to-end latency (ms): the intervals' medians weighted by their completions.
    pub p50_ms: f64,
    /// 95th percentile (ms), weighted the same way.
    pub p95_ms: f64,
    /// Remote share of chained requests.
    pub remote_share: f64,
    /// Cores of this machine the run used (planner, workers, emulation), start to shutdown.
    pub cpu_cores: f64,
    /// Per worker, the fraction of its slots' time spent executing in the measured period
    /// (execution time reported ÷ slots × reported time).
    pub busy: Vec<f64>,
    /// Measured intervals.
    pub intervals: usize,
    /// The run's totals (whole run, warm-up and drain included).
    pub summary: RunSummary,
    /// Observed statistics of the measured period (`clasp.stats/1`).
    pub stats: ObservedStats,
    /// The worker reports of the measured period that the planner saw as saturated: what an
    /// online estimator learns from.
    pub saturated: Vec<WorkerReport>,
}

impl Measured {
    /// Averages the samples ending in `(warmup_s, end_s]`.
    pub fn new(
        samples: &[Sample],
        warmup_s: f64,
        end_s: f64,
        cpu_cores: f64,
        summary: RunSummary,
        stats: ObservedStats,
    ) -> Self {
        let measured: Vec<&Sample> =
            samples.iter().filter(|s| s.t > warmup_s && s.t <= end_s + 1e-3).collect();
        let time: f64 = measured.iter().map(|s| s.dt).sum();
        let completed: f64 = measured.iter().map(|s| s.throughput * s.dt).sum();
        let weighted = |f: fn(&Sample) -> f64| {
            if completed > 0.0 {
                measured.iter().map(|s| f(s) * s.throughput * s.dt).sum::<f64>() / completed / 1e3
            } else {
                f64::NAN
            }
        };
        let local: f64 = measured.iter().map(|s| s.local_rate * s.dt).sum();
        let remote: f64 = measured.iter().map(|s| s.remote_rate * s.dt).sum();
        Self {
            throughput: if time > 0.0 { completed / time } else { f64::NAN },
            p50_ms: weighted(|s| s.p50_us),
            p95_ms: weighted(|s| s.p95_us),
            remote_share: if local + remote > 0.0 { remote / (local + remote) } else { 0.0 },
            cpu_cores,
            busy: Vec::new(),
            saturated: Vec::new(),
            intervals: measured.len(),
            summary,
            stats,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Engine;

    fn opts(settings: &[(&str, &str)]) -> Options {
        Options {
            engine: Engine::Runtime,
            quick: true,
            seed: 1,
            out: "out".into(),
            settings: settings.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect(),
        }
    }

    #[test]
    fn regimes_default_to_both_and_parse_costs() {
        let both = regimes(&opts(&[])).unwrap();
        assert_eq!(both.len(), 2);
        assert_eq!((both[0].label(), both[1].label()), ("native", "emulated"));
        let c = both[1].cost.unwrap();
        assert_eq!((c.local_us, c.remote_us, c.fanout_us), (38.5, 275.0, 51_500.0));
        let one = regimes(&opts(&[("dispatch_cost", "local=1,remote=2")])).unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].cost.unwrap().remote_us, 2.0);
        assert!(both[1].describe().contains("EMULATED"));
        let e = regimes(&opts(&[("dispatch_cost", "remote=x")])).unwrap_err().to_string();
        assert!(e.contains("dispatch_cost=remote=x"), "{e}");
    }

    #[test]
    fn emulated_coefficients_add_to_native_and_capacity_is_slot_time() {
        let c = Regime::paper().coefficients(2);
        assert_eq!(c.capacity, 2e6);
        assert!((c.beta - 275.6).abs() < 1e-9 && (c.alpha - 38.85).abs() < 1e-9);
        assert_eq!(Regime::native().coefficients(4).capacity, 4e6);
    }

    #[test]
    fn unknown_keys_and_bad_counts_are_refused() {
        let e = check_keys(&opts(&[("speed", "1")]), "scaling", &TESTBED_KEYS).unwrap_err();
        assert!(e.to_string().contains("unknown setting `speed`"), "{e}");
        let e = count(&opts(&[("slots", "0")]), "slots", 2, 1, 64).unwrap_err().to_string();
        assert!(e.contains("slots=0") && e.contains("1..=64"), "{e}");
        let e = apps(&opts(&[("apps", "wc,nope")]), &["wc"]).unwrap_err().to_string();
        assert!(e.contains("nope"), "{e}");
        let e = worker_counts(&opts(&[("workers", "0")]), &[1], 16).unwrap_err().to_string();
        assert!(e.contains("workers=0"), "{e}");
        assert!(worker_counts(&opts(&[("workers", "1,x")]), &[1], 16).is_err());
        assert!(worker_counts(&opts(&[("workers", "17")]), &[1], 16).is_err());
    }

    #[test]
    fn worker_counts_take_a_maximum_or_a_list() {
        assert_eq!(worker_counts(&opts(&[]), &[1, 2], 16).unwrap(), [1, 2]);
        assert_eq!(worker_counts(&opts(&[("workers", "3")]), &[1], 16).unwrap(), [1, 2, 3]);
        let list = worker_counts(&opts(&[("workers", "10,1,5,5")]), &[1], 16).unwrap();
        assert_eq!(list, [1, 5, 10]);
    }

    #[test]
    fn measurements_average_the_measured_intervals_only() {
        let s = |t, thr, p50| Sample {
            t,
            dt: if t == 1.5 { 1.0 } else { 0.5 },
            throughput: thr,
            p50_us: p50,
            p95_us: 2.0 * p50,
            local_rate: 1.0,
            remote_rate: 3.0,
        };
        // Intervals of 0.5 s and 1 s: 50 + 300 chains in 1.5 s; medians weighted by chains.
        let samples = [s(0.5, 10.0, 9e3), s(1.0, 100.0, 1e3), s(1.5, 300.0, 3e3), s(2.5, 5.0, 1e3)];
        let m =
            Measured::new(&samples, 0.5, 2.0, 0.1, RunSummary::default(), ObservedStats::default());
        assert_eq!(m.intervals, 2);
        assert!((m.throughput - 350.0 / 1.5).abs() < 1e-9);
        let p50 = (50.0 * 1.0 + 300.0 * 3.0) / 350.0;
        assert!((m.p50_ms - p50).abs() < 1e-12 && (m.p95_ms - 2.0 * p50).abs() < 1e-12);
        assert_eq!(m.remote_share, 0.75);
    }
}
