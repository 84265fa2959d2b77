//! Every experiment on the simulator (`--engine sim`): the `clasp_sim::experiments` functions
//! run at paper scale (10 workers × 10 slots, the paper's α, β, γ, W and 400 µs executions)
//! or quick scale, their rows turned into tables, charts and notes that set the figures beside
//! the paper's.
//!
//! Settings (`--set KEY=VALUE`) are checked by [`check`] before anything runs; see
//! [`settings`] for the keys each experiment takes.

mod coefficients;
mod end_to_end;
mod migration;
mod placement;
mod scaling;
pub mod settings;
mod state_locality;
mod validate;
mod worker_count;

use crate::report::Output;
use crate::{BenchError, Options, check_experiment};
use clasp_core::Pipeline;
use clasp_sim::SimError;
use clasp_sim::experiments::Setup;
use settings::Settings;

/// The six applications of the paper's figures.
pub const PAPER_APPS: [&str; 6] = ["wc", "sd", "aa", "pl", "nwm", "etl"];

/// Everything an experiment runs with: the options, the checked settings, the simulated
/// cluster and the applications.
#[derive(Clone, Debug)]
pub struct Ctx {
    /// The command's options.
    pub opts: Options,
    /// The checked settings.
    pub settings: Settings,
    /// The simulated cluster and run lengths.
    pub setup: Setup,
    /// The applications, parsed.
    pub apps: Vec<Pipeline>,
    /// Progress on stderr.
    pub quiet: bool,
}

impl Ctx {
    /// Checks `opts` for `experiment` and builds the context (nothing runs yet).
    pub fn new(experiment: &str, opts: &Options) -> Result<Self, BenchError> {
        check_experiment(experiment)?;
        if crate::RUNTIME_ONLY.contains(&experiment) {
            return Err(BenchError::Config(format!(
                "`{experiment}` measures this runtime's own costs and runs only on the runtime engine; use --engine runtime"
            )));
        }
        let settings = Settings::parse(experiment, opts)?;
        let setup = settings.setup(opts);
        settings.check_cluster(experiment, &setup)?;
        let names = settings.apps().unwrap_or_else(|| default_apps(experiment, opts.quick));
        let apps = names
            .iter()
            .map(|a| clasp_apps::pipeline(a).map_err(BenchError::Config))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { opts: opts.clone(), settings, setup, apps, quiet: false })
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
}

/// The applications an experiment runs unless `apps=` says otherwise.
pub fn default_apps(experiment: &str, quick: bool) -> Vec<String> {
    let list: &[&str] = match (experiment, quick) {
        ("scaling", false) => &["wc", "sd", "aa", "pl", "nwm", "etl", "syn"],
        ("scaling", true) => &["wc", "syn"],
        ("state-locality", true) => &["wc", "pl"],
        ("placement", true) => &["wc", "nwm"],
        ("validate", _) => &[],
        (_, true) => &["wc", "sd"],
        (_, false) => &PAPER_APPS,
    };
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// Checks `opts` for `experiment` on the simulator without running anything.
pub fn check(experiment: &str, opts: &Options) -> Result<(), BenchError> {
    Ctx::new(experiment, opts).map(|_| ())
}

/// Runs `experiment` on the simulator.
pub fn run(experiment: &str, opts: &Options) -> Result<Output, BenchError> {
    let ctx = Ctx::new(experiment, opts)?;
    run_ctx(experiment, &ctx)
}

/// Runs `experiment` in a checked context.
pub fn run_ctx(experiment: &str, ctx: &Ctx) -> Result<Output, BenchError> {
    match experiment {
        "scaling" => scaling::run(ctx),
        "state-locality" => state_locality::run(ctx),
        "migration" => migration::run(ctx),
        "coefficients" => coefficients::run(ctx),
        "placement" => placement::run(ctx),
        "worker-count" => worker_count::run(ctx),
        "end-to-end" => end_to_end::run(ctx),
        "validate" => validate::run(ctx),
        other => check_experiment(other).map(|()| Output::default()),
    }
}

/// A simulator error as the experiment's error.
pub(crate) fn sim_err(e: SimError) -> BenchError {
    BenchError::Run(e.to_string())
}

/// Runs `f` on every application with a progress line each, concatenating the rows.
pub(crate) fn per_app<T>(
    ctx: &Ctx,
    name: &str,
    mut f: impl FnMut(&Pipeline) -> Result<Vec<T>, SimError>,
) -> Result<Vec<T>, BenchError> {
    let mut progress = ctx.progress(name, ctx.apps.len());
    let mut rows = Vec::new();
    for p in &ctx.apps {
        progress.step(&p.name);
        rows.extend(f(p).map_err(sim_err)?);
    }
    Ok(rows)
}

/// The names of the applications in order of first appearance in `rows`.
pub(crate) fn apps_of<T>(rows: &[T], app: impl Fn(&T) -> &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        if !out.iter().any(|a| a == app(r)) {
            out.push(app(r).to_owned());
        }
    }
    out
}

/// The value of the row of `app` and `key` in `rows`, NaN when there is none.
pub(crate) fn lookup<T>(rows: &[T], pick: impl Fn(&T) -> Option<f64>) -> f64 {
    rows.iter().find_map(pick).unwrap_or(f64::NAN)
}
