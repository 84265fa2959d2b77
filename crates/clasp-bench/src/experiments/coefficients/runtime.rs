//! What the online estimator (Eq. 2–4) converges to on this runtime (CLASP Fig. 9), on the
//! emulated testbed ([`crate::engine::runtime::testbed`]). Per regime and application, one estimator started
//! away from the truth learns from the saturated worker reports of a sequence of unthrottled
//! runs: CLASP's, FaaSFlow's and Zhang24's placements on 1, 2, … workers, which load the
//! workers with different mixes of local and remote chained requests and destinations (the
//! excitation a regression needs; one placement alone only varies by noise). In the emulated
//! regime the truth is known — the costs the executors spend on top of this runtime's own,
//! which the experiment measures first (`clasp bench dispatch`'s measurement, in the same run)
//! — and the estimates are compared with it.

use super::RuntimeSettings;
use crate::engine::runtime::sig;
use crate::engine::runtime::testbed::{Regime, Testbed, TestbedSettings, UNTHROTTLED_RATE};
use crate::experiments::dispatch;
use crate::plot::{Chart, Series};
use crate::progress::Progress;
use crate::report::{Output, Report, Table, num};
use crate::{BenchError, Options};
use clasp_core::stats::Coefficients;
use clasp_plan::Policy;
use clasp_plan::estimator::{Estimator, EstimatorConfig, Observation};

/// The estimator's starting point on this runtime's native costs (its normalization
/// constants), for `slots` executor slots per worker.
pub fn native_estimator(slots: u32) -> EstimatorConfig {
    EstimatorConfig {
        local_scale: 0.2,
        remote_scale: 1.0,
        destinations_scale: 100.0,
        load_scale: f64::from(slots) * 1e6,
        initial_capacity: f64::from(slots) * 1e6,
        min_remote_rate: 0.0,
        ..EstimatorConfig::default()
    }
}

/// The estimator starts with α, β, γ this many times the truth (the simulator's experiment
/// starts 1.9–3.6 times away)…
const START_COST_FACTOR: f64 = 2.5;
/// …and W̄ at this fraction of it.
const START_CAPACITY_FACTOR: f64 = 0.7;

/// Chains in flight per executor slot: enough for queues beyond the saturation threshold
/// (50 requests waiting 20 ms) on every worker a placement loads.
const IN_FLIGHT_PER_SLOT: usize = 100;

/// The estimator after one run.
#[derive(Clone, Debug)]
struct Step {
    regime: &'static str,
    app: String,
    policy: Policy,
    workers: u32,
    saturated: usize,
    updates: u64,
    learnt: Coefficients,
}

/// Runs the experiment on the runtime.
pub(super) fn run(o: &Options) -> Result<Output, BenchError> {
    let (settings, own) = TestbedSettings::read(
        "coefficients",
        o,
        &super::testbed(o.quick),
        &RuntimeSettings::preset(o.quick),
    )?;
    let apps = settings.apps.0.clone();
    let policies = own.policies.0.clone();
    let counts = own.workers.0.clone();
    let runs_per_app: usize = counts.iter().map(|&n| if n == 1 { 1 } else { policies.len() }).sum();
    let regime_count = Regime::all(settings.dispatch_cost).len();
    let total = 1 + regime_count * apps.len() * runs_per_app;
    let mut progress = Progress::new("coefficients", total);
    progress.step("measuring this runtime's alpha and beta");
    let measured = dispatch::measure(own.dispatch_inputs.get(), settings.slots.u32())?;
    let mut beds = Testbed::each_regime(&settings, o.seed, measured.native());
    let regimes: Vec<_> = beds.iter().map(|b| b.regime).collect();
    for bed in &mut beds {
        bed.unthrottled_in_flight = IN_FLIGHT_PER_SLOT;
        // One report per worker per second: the period the emulated fan-out cost γ is charged
        // over (once per destination per second), so that each report carries the γ it
        // counts destinations for; longer runs make up for the fewer reports.
        bed.interval_ms = 1000;
    }
    let mut steps = Vec::new();
    let mut truths = Vec::new();
    for bed in &beds {
        for app in &apps {
            truths.push((bed.regime.label(), app.clone(), bed.coefficients()));
            steps.extend(learn(bed, app, &counts, &policies, &mut progress)?);
        }
    }
    let mut setup = beds[0].setup_lines(o.quick);
    setup.extend(
        measured.setup_lines().into_iter().map(|l| format!("alpha and beta measured first: {l}")),
    );
    for r in &regimes {
        setup.push(format!("regime `{}`: {}", r.label(), r.describe()));
    }
    setup.push(format!(
        "per regime and application one estimator (RLS, Eq. 2-4, forgetting 0.97) fed the saturated worker reports (queue > 50 and wait > 20 ms) of unthrottled runs ({IN_FLIGHT_PER_SLOT} chains in flight per slot), in this order: CLASP on 1 worker, then {} on each of {} workers; it starts at {START_COST_FACTOR} x the true alpha, beta, gamma and {START_CAPACITY_FACTOR} x W",
        policies.iter().map(|p| p.name()).collect::<Vec<_>>().join(", "),
        counts.iter().filter(|&&n| n > 1).map(u32::to_string).collect::<Vec<_>>().join(", "),
    ));
    let report = Report {
        title: "coefficients (Fig. 9) on the runtime: what the estimator converges to".into(),
        setup,
        tables: vec![trajectory_table(&steps), summary_table(&steps, &truths), measured.table()],
        notes: notes(&beds[0]),
    };
    Ok(Output { report, charts: charts(&steps, &truths) })
}

/// One estimator over the runs of `app` in `bed`'s regime.
fn learn(
    bed: &Testbed,
    app: &str,
    counts: &[u32],
    policies: &[Policy],
    progress: &mut Progress,
) -> Result<Vec<Step>, BenchError> {
    let p = bed.pipeline(app)?;
    let mut est = Estimator::new(start_away(&bed.coefficients()));
    let mut steps = Vec::new();
    for &n in counts {
        let on_n: &[Policy] = if n == 1 { &[Policy::Clasp] } else { policies };
        for &policy in on_n {
            progress.step(&format!("{} {app}: {policy} on {n}", bed.regime.label()));
            let placement = bed.policy_placement(&p, policy, UNTHROTTLED_RATE, n)?;
            let m = bed.run(&p, &placement, None)?;
            for r in &m.saturated {
                est.observe(r.worker.0, &Observation::from(r));
            }
            steps.push(Step {
                regime: bed.regime.label(),
                app: app.to_owned(),
                policy,
                workers: placement.workers,
                saturated: m.saturated.len(),
                updates: est.observations_used(),
                learnt: est.coefficients(),
            });
        }
    }
    Ok(steps)
}

/// An estimator normalized by, and starting at, costs [`START_COST_FACTOR`] times `truth`.
fn start_away(truth: &Coefficients) -> EstimatorConfig {
    EstimatorConfig {
        local_scale: truth.alpha * START_COST_FACTOR,
        remote_scale: truth.beta * START_COST_FACTOR,
        destinations_scale: truth.gamma * START_COST_FACTOR,
        load_scale: truth.capacity,
        initial_capacity: truth.capacity * START_CAPACITY_FACTOR,
        min_remote_rate: 0.0,
        ..EstimatorConfig::default()
    }
}

fn trajectory_table(steps: &[Step]) -> Table {
    let mut t = Table::new(
        "coefficients",
        &[
            "dispatch costs",
            "app",
            "run",
            "workers",
            "saturated reports",
            "updates so far",
            "alpha (us)",
            "beta (us)",
            "gamma (us/s)",
            "W (us/s)",
        ],
    );
    for s in steps {
        t.row(vec![
            s.regime.into(),
            s.app.clone(),
            s.policy.name().into(),
            s.workers.to_string(),
            s.saturated.to_string(),
            s.updates.to_string(),
            sig(s.learnt.alpha),
            sig(s.learnt.beta),
            sig(s.learnt.gamma),
            sig(s.learnt.capacity),
        ]);
    }
    t
}

/// The last estimate of each estimator beside the truth it should find.
fn summary_table(steps: &[Step], truths: &[(&'static str, String, Coefficients)]) -> Table {
    let mut t = Table::new(
        "coefficients-summary",
        &["dispatch costs", "app", "coefficient", "start", "learnt", "truth", "error (%)"],
    );
    for (regime, app, truth) in truths {
        let Some(last) = steps.iter().rev().find(|s| s.regime == *regime && s.app == *app) else {
            continue;
        };
        let start = Estimator::new(start_away(truth)).coefficients();
        for (name, f) in FIELDS {
            let error = 100.0 * (f(&last.learnt) - f(truth)) / f(truth);
            t.row(vec![
                (*regime).into(),
                app.clone(),
                name.into(),
                sig(f(&start)),
                sig(f(&last.learnt)),
                sig(f(truth)),
                num(error, 1),
            ]);
        }
    }
    t
}

/// Reads one coefficient.
type Field = fn(&Coefficients) -> f64;

/// The four coefficients by name.
const FIELDS: [(&str, Field); 4] = [
    ("alpha (us)", |c| c.alpha),
    ("beta (us)", |c| c.beta),
    ("gamma (us/s)", |c| c.gamma),
    ("W (us/s)", |c| c.capacity),
];

fn notes(bed: &Testbed) -> Vec<String> {
    vec![
        format!("Truth: emulated, the costs the executors spend on top of the native ones ({}) and W = slots x 10^6 us/s of slot time; native, only the native ones.", bed.native.describe()),
        "Native costs are three to four orders of magnitude below the 400 us executions, below the noise of the execution load the regression differences, so the native estimates say only that the costs are negligible at this scale.".into(),
        super::PAPER_NOTE.into(),
    ]
}

/// Per regime, each coefficient's estimate over the truth after every run.
fn charts(steps: &[Step], truths: &[(&'static str, String, Coefficients)]) -> Vec<Chart> {
    let mut regimes: Vec<&str> = truths.iter().map(|t| t.0).collect();
    regimes.dedup();
    regimes
        .into_iter()
        .map(|regime| {
            let mut chart = Chart::line(
                &format!("Fig. 9: estimate / truth after each run (runtime, {regime} costs)"),
                "run",
                "estimate / truth",
            )
            .named(&format!("coefficients-{regime}"));
            let mut longest = 0;
            for (_, app, truth) in truths.iter().filter(|t| t.0 == regime) {
                let mine: Vec<&Step> =
                    steps.iter().filter(|s| s.regime == regime && s.app == *app).collect();
                longest = longest.max(mine.len());
                for (name, f) in FIELDS {
                    let values = mine.iter().map(|s| f(&s.learnt) / f(truth)).collect();
                    let short = name.split(' ').next().unwrap_or(name);
                    chart = chart.series(Series::new(&format!("{app} {short}"), values));
                }
            }
            let xs: Vec<f64> = (1..=longest).map(|i| i as f64).collect();
            chart.xs(&xs)
        })
        .collect()
}
