//! The simulator engine (`--engine sim`): the paper's cluster simulated at paper scale
//! (10 workers × 10 slots, the paper's α, β, γ, W̄ and 400 µs executions) or quick scale,
//! the settings every simulator experiment takes ([`ClusterSettings`]), and the runs the
//! experiments are made of: a placement under a pattern ([`run_static`]), a policy scaling
//! elastically ([`run_elastic`]), the maximum throughput of CLASP's placement
//! ([`max_throughput`]).

use crate::experiments::Experiment;
use crate::experiments::worker_count::Maxima;
use crate::settings::values::{Apps, Costs, Count, Fraction, Service, Time, TimeOrZero};
use crate::settings::{NoSettings, Scope};
use crate::{BenchError, Options};
use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_core::placement::Placement;
use clasp_core::stats::ObservedStats;
use clasp_plan::autoscaler::{AutoscalerConfig, UNTHROTTLED_RATE};
use clasp_plan::projection::spec_observation;
use clasp_plan::{PlanInput, Policy};
use clasp_sim::{
    Deployment, SimConfig, SimError, SimSummary, Simulation, placement_on, plan_config,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// The six applications of the paper's figures.
pub const PAPER_APPS: [&str; 6] = ["wc", "sd", "aa", "pl", "nwm", "etl"];

/// The simulated cluster and the lengths of the runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    /// The cluster (its `seed` seeds every run).
    pub sim: SimConfig,
    /// Simulated seconds of a run at a fixed input (after its warm-up).
    pub run_s: f64,
    /// Warm-up seconds of such a run.
    pub warmup_s: f64,
    /// Time scale of the burst and gradual patterns (1: the paper's 5–10 s stages).
    pub pattern_scale: f64,
    /// Input-rate levels of the worker-count experiment (fractions of the maximum).
    pub levels: Vec<f64>,
    /// Load of the scaling experiment's latency runs (fraction of the one-worker maximum).
    pub latency_load: f64,
    /// Chains in flight under an unthrottled input. The reference's 10,000 would make every
    /// chain wait ~10 s at these rates (longer than a run's warm-up); 1,000 still keeps every
    /// worker of a 10-worker cluster busy.
    pub unthrottled_in_flight: u32,
}

impl Setup {
    /// The paper's scale: 10 workers × 10 slots, its coefficients, 400 µs executions, 30 s
    /// runs, ten rate levels.
    pub fn paper(seed: u64) -> Self {
        Self {
            sim: SimConfig { seed, ..SimConfig::default() },
            run_s: 30.0,
            warmup_s: 5.0,
            pattern_scale: 1.0,
            levels: (1..=10).map(|l| f64::from(l) / 10.0).collect(),
            latency_load: 0.5,
            unthrottled_in_flight: 1_000,
        }
    }

    /// Short runs and four rate levels, for checks that finish in seconds.
    pub fn quick(seed: u64) -> Self {
        Self {
            run_s: 6.0,
            warmup_s: 2.0,
            pattern_scale: 0.25,
            levels: vec![0.25, 0.5, 0.75, 1.0],
            ..Self::paper(seed)
        }
    }

    /// The cluster configuration for one run of `run_s` after `warmup_s`.
    pub fn config(&self) -> SimConfig {
        SimConfig {
            duration_s: self.warmup_s + self.run_s,
            warmup_s: self.warmup_s,
            ..self.sim.clone()
        }
    }

    /// A pattern scaled in time by `pattern_scale` (stages shortened, rates kept).
    pub fn pattern(&self, pattern: &RatePattern) -> RatePattern {
        if (self.pattern_scale - 1.0).abs() < 1e-12 || pattern.stages().is_empty() {
            return pattern.clone();
        }
        let text: String = pattern
            .stages()
            .iter()
            .map(|s| format!("{} {}\n", s.duration_s * self.pattern_scale, s.rate))
            .collect();
        RatePattern::trace(&text, pattern.name()).unwrap_or_else(|_| pattern.clone())
    }
}

/// Settings every simulator experiment takes (except `validate`, which simulates single
/// queues): the simulated cluster and the length of a fixed-input run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterSettings {
    /// Applications.
    pub apps: Apps,
    /// Workers in the cluster.
    pub workers: Count<1, 1024>,
    /// Executor slots per worker.
    pub slots: Count<1, 1024>,
    /// Mean execution time of every operator.
    pub exec_time: Time,
    /// The simulated machines' true α, β, γ, W.
    pub coefficients: Costs,
    /// Distribution of execution times.
    pub service: Service,
    /// Measured length of a fixed-input run.
    pub run: Time,
    /// Unmeasured time before it.
    pub warmup: TimeOrZero,
    /// Network delay between nodes.
    pub remote_delay: TimeOrZero,
    /// Fraction of W̄ the policies plan a worker to.
    pub headroom: Fraction,
}

impl ClusterSettings {
    /// The paper's (or the quick) cluster running `apps`.
    pub fn preset(quick: bool, apps: &[&str]) -> Self {
        let s = if quick { Setup::quick(0) } else { Setup::paper(0) };
        Self {
            apps: Apps::of(apps),
            workers: Count(u64::from(s.sim.max_workers)),
            slots: Count(u64::from(s.sim.slots)),
            exec_time: Time::from_micros(s.sim.default_exec_us),
            coefficients: Costs(s.sim.costs),
            service: Service(s.sim.service),
            run: Time::from_secs(s.run_s),
            warmup: TimeOrZero::from_secs(s.warmup_s),
            remote_delay: TimeOrZero::from_micros(s.sim.remote_delay_us),
            headroom: Fraction(s.sim.plan_headroom),
        }
    }

    /// The simulated cluster these settings describe, seeded with `seed`.
    pub fn setup(&self, quick: bool, seed: u64) -> Setup {
        let mut s = if quick { Setup::quick(seed) } else { Setup::paper(seed) };
        s.sim.max_workers = self.workers.u32();
        s.sim.slots = self.slots.u32();
        s.sim.default_exec_us = self.exec_time.micros();
        s.sim.costs = self.coefficients.0;
        s.sim.service = self.service.0;
        s.run_s = self.run.secs();
        s.warmup_s = self.warmup.secs();
        s.sim.remote_delay_us = self.remote_delay.micros();
        s.sim.plan_headroom = self.headroom.0;
        s
    }
}

impl Default for ClusterSettings {
    fn default() -> Self {
        Self::preset(false, &PAPER_APPS)
    }
}

/// Everything a simulator experiment runs with: the options, the checked cluster settings,
/// the simulated cluster and the applications.
#[derive(Clone, Debug)]
pub struct Ctx {
    /// The command's options.
    pub opts: Options,
    /// The checked cluster settings.
    pub cluster: ClusterSettings,
    /// The simulated cluster and run lengths.
    pub setup: Setup,
    /// The applications, parsed.
    pub apps: Vec<Pipeline>,
    /// No progress on stderr.
    pub quiet: bool,
}

impl Ctx {
    /// Reads `opts`'s settings over the presets (the cluster's and the experiment's own) and
    /// builds the context; nothing runs yet.
    pub fn new<E>(
        experiment: Experiment,
        opts: &Options,
        cluster: &ClusterSettings,
        own: &E,
    ) -> Result<(Self, E), BenchError>
    where
        E: Serialize + DeserializeOwned,
    {
        let (cluster, own) = Scope::new(experiment.name(), opts).two(cluster, own)?;
        let setup = cluster.setup(opts.quick, opts.seed);
        setup
            .config()
            .validate()
            .map_err(|e| BenchError::Config(format!("impossible cluster: {e}")))?;
        let apps = cluster
            .apps
            .0
            .iter()
            .map(|a| clasp_apps::pipeline(a).map_err(BenchError::from))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((Self { opts: opts.clone(), cluster, setup, apps, quiet: false }, own))
    }

    /// A context of the cluster alone (experiments without settings of their own).
    pub fn cluster_only(
        experiment: Experiment,
        opts: &Options,
        cluster: &ClusterSettings,
    ) -> Result<Self, BenchError> {
        Self::new(experiment, opts, cluster, &NoSettings {}).map(|(ctx, _)| ctx)
    }

    /// A progress counter of `total` steps for `name`.
    pub fn progress(&self, name: &str, total: usize) -> crate::progress::Progress {
        let p = crate::progress::Progress::new(name, total);
        if self.quiet { p.quiet() } else { p }
    }

    /// The lines every report starts with: engine, scale, cluster, seed, applications.
    pub fn setup_lines(&self) -> Vec<String> {
        let c = &self.setup.sim;
        vec![
            format!(
                "engine: sim (discrete-event simulator), scale: {}, seed {}",
                self.opts.scale(),
                self.opts.seed
            ),
            format!(
                "cluster: {} workers x {} slots; true costs alpha {} us, beta {} us, gamma {} us/s, W {} us/s; mean execution {} us ({}); planning headroom {}",
                c.max_workers,
                c.slots,
                c.costs.alpha,
                c.costs.beta,
                c.costs.gamma,
                c.costs.capacity,
                c.default_exec_us,
                c.service,
                c.plan_headroom
            ),
            format!(
                "runs: {} s measured after {} s warm-up; applications: {}",
                self.setup.run_s,
                self.setup.warmup_s,
                self.apps.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")
            ),
        ]
    }

    /// Runs `f` on every application with a progress line each, concatenating the rows.
    pub fn per_app<T>(
        &self,
        name: &str,
        mut f: impl FnMut(&Pipeline) -> Result<Vec<T>, SimError>,
    ) -> Result<Vec<T>, BenchError> {
        let mut progress = self.progress(name, self.apps.len());
        let mut rows = Vec::new();
        for p in &self.apps {
            progress.step(&p.name);
            rows.extend(f(p)?);
        }
        Ok(rows)
    }
}

/// Spec-derived statistics at `rate` with the cluster's true costs (as `clasp plan` makes).
pub fn spec_stats(p: &Pipeline, setup: &Setup, rate: f64) -> ObservedStats {
    spec_observation(p, rate, &plan_config(&setup.sim, setup.sim.max_workers), &setup.sim.costs)
}

/// `policy`'s placement of `p` for `rate` from `stats`, within `max_workers`.
pub fn policy_placement(
    p: &Pipeline,
    setup: &Setup,
    stats: &ObservedStats,
    policy: Policy,
    rate: f64,
    max_workers: u32,
) -> Result<Placement, SimError> {
    let plan = plan_config(&setup.sim, max_workers);
    let input = PlanInput {
        pipeline: p,
        stats,
        target_rate: rate,
        coefficients: setup.sim.costs,
        config: &plan,
        current: None,
    };
    Ok(policy.decide(&input)?.placement)
}

/// Runs `placement` under `pattern` for one run of the setup.
pub fn run_static(
    p: &Pipeline,
    setup: &Setup,
    placement: Placement,
    pattern: RatePattern,
) -> Result<SimSummary, SimError> {
    let mut cfg = setup.config();
    if pattern.rate_at(0.0).is_infinite() {
        cfg.max_in_flight = setup.unthrottled_in_flight;
    }
    Ok(Simulation::from_spec(p, cfg, pattern, Deployment::Static(placement))?.run())
}

/// The autoscaler [`run_elastic`] runs for `policy` on the simulated cluster, its first
/// decision after `warmup_requests` inputs.
pub fn elastic_config(setup: &Setup, policy: Policy, warmup_requests: u64) -> AutoscalerConfig {
    clasp_sim::autoscaler_config(&setup.sim, policy).with_warmup(warmup_requests)
}

/// Runs `autoscaler` elastically under `pattern` for `duration_s` (no measurement warm-up).
pub fn run_elastic(
    p: &Pipeline,
    setup: &Setup,
    autoscaler: AutoscalerConfig,
    pattern: RatePattern,
    duration_s: f64,
) -> Result<SimSummary, SimError> {
    let cfg = SimConfig { duration_s, warmup_s: 0.0, ..setup.sim.clone() };
    Ok(Simulation::from_spec(p, cfg, pattern, Deployment::Elastic(Box::new(autoscaler)))?.run())
}

/// The throughput of CLASP's placement over exactly `workers` workers under unthrottled input.
pub fn max_throughput(p: &Pipeline, setup: &Setup, workers: u32) -> Result<f64, SimError> {
    let stats = spec_stats(p, setup, UNTHROTTLED_RATE);
    let placement = placement_on(p, &stats, &setup.sim, UNTHROTTLED_RATE, workers)?;
    Ok(run_static(p, setup, placement, RatePattern::unthrottled())?.throughput)
}

/// The throughput of CLASP's placement over each worker count `1..=up_to`.
pub fn maxima(p: &Pipeline, setup: &Setup, up_to: u32) -> Result<Maxima, SimError> {
    let throughput = (1..=up_to).map(|n| max_throughput(p, setup, n)).collect::<Result<_, _>>()?;
    Ok(Maxima { app: p.name.clone(), throughput })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Engine;

    fn opts(settings: &[(&str, &str)]) -> Options {
        Options {
            engine: Engine::Sim,
            quick: true,
            seed: 1,
            out: "out".into(),
            settings: settings.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect(),
        }
    }

    #[test]
    fn the_presets_are_the_setups_they_stand_for() {
        for quick in [false, true] {
            let setup = ClusterSettings::preset(quick, &["wc"]).setup(quick, 3);
            let direct = if quick { Setup::quick(3) } else { Setup::paper(3) };
            assert_eq!(setup, direct, "quick {quick}");
        }
    }

    #[test]
    fn settings_shape_the_cluster() {
        let o = opts(&[("workers", "4"), ("exec_time", "200us"), ("apps", "wc,sd")]);
        let preset = ClusterSettings::preset(true, &["syn"]);
        let ctx = Ctx::cluster_only(Experiment::Scaling, &o, &preset).unwrap();
        assert_eq!((ctx.setup.sim.max_workers, ctx.setup.sim.default_exec_us), (4, 200.0));
        let names: Vec<&str> = ctx.apps.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["wc", "sd"]);
    }

    #[test]
    fn old_spellings_point_to_the_new_keys() {
        let preset = ClusterSettings::preset(true, &["syn"]);
        for (old, new) in [("exec-us", "exec_time"), ("run-s", "run"), ("warmup_s", "warmup")] {
            let o = opts(&[(old, "1")]);
            let e = Ctx::cluster_only(Experiment::Scaling, &o, &preset).unwrap_err().to_string();
            assert!(e.contains(&format!("did you mean `{new}`?")), "{old}: {e}");
        }
    }
}
