//! `validate` on the runtime: the simulator against the runtime on small configurations both
//! can run: the same pipeline, the same placement, the same emulated service times and the
//! runtime's own dispatch costs and delays. Unthrottled throughput and
//! median latency at fixed input rates must agree within 15 %.
//!
//! Everything the simulator is given comes from this machine, measured in the same command:
//!
//! - **service times**: each operator's mean execution time as the runtime's workers reported
//!   it in the run being compared (`Model::from_stats` on the runtime's observed statistics,
//!   which also carry the real fan-out, e.g. words per line);
//! - **α, β**: this runtime's dispatch CPU, measured at the start of the experiment
//!   (`clasp bench dispatch`'s measurement, [`crate::experiments::dispatch::measure`]), plus
//!   the emulated costs when they are on, γ with them: both take it from the worker's capacity
//!   (the simulator from its cores, the runtime's emulation by holding each execution's slot
//!   longer);
//! - **delays**: calibration runs of a SYN chain at low load on one worker (every hop local)
//!   and alternating over two workers (every hop remote) give the runtime's local and remote
//!   hop delays (planner → worker counts as remote, as in the simulator). A hop is three
//!   thread wake-ups (sender, receiver, executor), so its delay follows the load other work
//!   puts on this shared machine: the calibration runs right before each case's comparisons;
//! - **capacity**: W = slots × 10⁶ µs/s, the executions sleeping, as on the testbed.
//!
//! Both run paced arrivals (the runtime's sources are paced), the same warm-up and measured
//! period, the same chains in flight.

use super::RuntimeSettings;
use crate::engine::runtime::testbed::{
    Measured, Regime, Testbed, TestbedSettings, UNTHROTTLED_RATE,
};
use crate::experiments::dispatch;
use crate::plot::{Chart, Series};
use crate::progress::Progress;
use crate::report::{Output, Report, Table, num};
use crate::{BenchError, Options};
use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_core::placement::Placement;
use clasp_runtime::wire::DispatchCost;
use clasp_sim::{Arrivals, Deployment, Model, ServiceDist, SimConfig, SimSummary, Simulation};

/// Largest relative difference between simulator and runtime that passes.
pub const BOUND: f64 = 0.15;

/// The runtime's hop delays (µs), as the simulator takes them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Delays {
    /// A chained request to the same worker.
    pub local_us: f64,
    /// A request between two nodes (planner → worker, worker → worker).
    pub remote_us: f64,
}

/// One comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// Application.
    pub app: String,
    /// `native` or `emulated`.
    pub regime: &'static str,
    /// Workers.
    pub workers: u32,
    /// What is compared.
    pub metric: String,
    /// The runtime's value.
    pub runtime: f64,
    /// The simulator's value.
    pub simulated: f64,
    /// Unit of both.
    pub unit: &'static str,
    /// The hop delays the simulator was given.
    pub delays: Delays,
    /// How busy each runtime worker's slots were (executing), in %.
    pub busy: String,
}

impl Check {
    /// (simulated − runtime) / runtime.
    pub fn difference(&self) -> f64 {
        (self.simulated - self.runtime) / self.runtime
    }

    /// Whether both are positive numbers within [`BOUND`] of each other.
    pub fn passes(&self) -> bool {
        self.runtime > 0.0 && self.simulated > 0.0 && self.difference().abs() <= BOUND
    }
}

/// Runs the experiment on the runtime.
pub(super) fn run(o: &Options) -> Result<Output, BenchError> {
    let (settings, own) = TestbedSettings::read(
        "validate",
        o,
        &super::testbed(o.quick),
        &RuntimeSettings::preset(o.quick),
    )?;
    let regimes = Regime::all(settings.dispatch_cost);
    let apps = settings.apps.0.clone();
    let workers = own.workers.u32();
    let loads = own.loads.0.clone();
    let cases = apps.len() * regimes.len();
    let mut progress = Progress::new("validate", 1 + cases * (2 + loads.len()));
    progress.step("measuring this runtime's alpha and beta");
    let measured = dispatch::measure(own.dispatch_inputs.get(), settings.slots.u32())?;
    let native = Testbed::new(&settings, o.seed, Regime::native(), measured.native());
    let mut checks = Vec::new();
    for app in &apps {
        for &regime in &regimes {
            let bed = Testbed::new(&settings, o.seed, regime, measured.native());
            progress.step(&format!("{app} {}: calibrating hop delays", regime.label()));
            let delays = calibrate(&native)?;
            checks.extend(compare(app, &bed, workers, &loads, delays, &mut progress)?);
        }
    }
    let mut setup = native.setup_lines(o.quick);
    setup.extend(
        measured.setup_lines().into_iter().map(|l| format!("alpha and beta measured first: {l}")),
    );
    for r in &regimes {
        setup.push(format!("regime `{}`: {}", r.label(), r.describe()));
    }
    setup.push(format!(
        "CLASP's placement over exactly {workers} workers, the same in both; unthrottled throughput and median latency at {} of the runtime's maximum; bound {:.0} %",
        loads.iter().map(|l| format!("{:.0} %", 100.0 * l)).collect::<Vec<_>>().join(" and "),
        100.0 * BOUND
    ));
    setup.push(format!(
        "simulator given: the runtime's measured execution times and fan-out per operator, alpha {} us and beta {} us of dispatch CPU as measured above (plus the emulated costs), the hop delays calibrated before each case (in the table), W = slots x 10^6 us/s, deterministic sleeping executions, paced arrivals",
        crate::engine::runtime::sig(native.native.alpha_us),
        crate::engine::runtime::sig(native.native.beta_us)
    ));
    let report = Report {
        title: "validate on the runtime: the simulator against the runtime".into(),
        setup,
        tables: vec![table(&checks), measured.table()],
        notes: notes(&checks),
    };
    Ok(Output { report, charts: vec![chart(&checks)] })
}

/// Sum of the mean execution times of `p`'s operators in a run (µs).
fn execution_us(m: &Measured) -> f64 {
    m.summary.operators.iter().map(|o| o.mean_exec_us).sum()
}

/// The runtime's hop delays from two SYN runs of the testbed's length at 20 % of one worker's
/// capacity (no queueing under paced arrivals): all on one worker (the planner hop plus nine
/// local hops) and alternating over two (ten remote hops), each median latency less the
/// executions. The runs are as long as the compared ones, so both see the same warm-up.
fn calibrate(bed: &Testbed) -> Result<Delays, BenchError> {
    let p = bed.pipeline("syn")?;
    let hops = p.operators.len() as f64;
    let rate = 0.2 * f64::from(bed.slots) * 1e6 / (hops * bed.exec_us);
    let on_one = bed.run(&p, &Placement::alternating(&p, 1), Some(rate))?;
    let on_two = bed.run(&p, &Placement::alternating(&p, 2), Some(rate))?;
    let remote_us = ((on_two.p50_ms * 1e3 - execution_us(&on_two)) / hops).max(0.0);
    let local_us =
        ((on_one.p50_ms * 1e3 - execution_us(&on_one) - remote_us) / (hops - 1.0)).max(0.0);
    Ok(Delays { local_us, remote_us })
}

/// The runtime and the simulator on one application in one regime: unthrottled throughput,
/// then median latency at each load.
fn compare(
    app: &str,
    bed: &Testbed,
    workers: u32,
    loads: &[f64],
    delays: Delays,
    progress: &mut Progress,
) -> Result<Vec<Check>, BenchError> {
    let p = bed.pipeline(app)?;
    let placement = bed.clasp_on(&p, UNTHROTTLED_RATE, workers)?;
    let check = |metric: String, runtime: f64, simulated: f64, unit, m: &Measured| Check {
        app: app.to_owned(),
        regime: bed.regime.label(),
        workers,
        metric,
        runtime,
        simulated,
        unit,
        delays,
        busy: m.busy.iter().map(|b| num(100.0 * b, 0)).collect::<Vec<_>>().join("/"),
    };
    progress.step(&format!("{app} {} unthrottled", bed.regime.label()));
    let rt = bed.run(&p, &placement, None)?;
    let sim = simulate(&p, &placement, &rt, None, bed, delays)?;
    let mut out = vec![check(
        "unthrottled throughput".into(),
        rt.throughput,
        sim.throughput,
        "chains/s",
        &rt,
    )];
    for &load in loads {
        progress.step(&format!("{app} {} at {:.0} %", bed.regime.label(), 100.0 * load));
        let rate = load * rt.throughput;
        let at = bed.run(&p, &placement, Some(rate))?;
        let sim = simulate(&p, &placement, &at, Some(rate), bed, delays)?;
        out.push(check(
            format!("median latency at {:.0} % ({} chains/s)", 100.0 * load, num(rate, 0)),
            at.p50_ms,
            sim.latency.p50_us as f64 / 1e3,
            "ms",
            &at,
        ));
    }
    Ok(out)
}

/// The simulator's run of what `measured` ran: the same pipeline, placement, rate, run
/// lengths and chains in flight, with the runtime's execution times, costs and delays.
fn simulate(
    p: &Pipeline,
    placement: &Placement,
    measured: &Measured,
    rate: Option<f64>,
    bed: &Testbed,
    delays: Delays,
) -> Result<SimSummary, BenchError> {
    let in_flight = bed.in_flight(rate, placement.workers);
    let cfg = SimConfig {
        slots: bed.slots,
        costs: costs(bed),
        local_delay_us: delays.local_us,
        remote_delay_us: delays.remote_us,
        max_workers: placement.workers,
        service: ServiceDist::Deterministic,
        default_exec_us: bed.exec_us,
        arrivals: Arrivals::Paced,
        max_in_flight: in_flight as u32,
        planner_queue: bed.planner_config(in_flight).queue_capacity as u32,
        interval_s: bed.interval_ms as f64 / 1e3,
        window_s: bed.run_s,
        saturation_queue: 50.0,
        saturation_wait_ms: 20.0,
        duration_s: bed.warmup_s + bed.run_s,
        warmup_s: bed.warmup_s,
        seed: bed.seed,
        ..SimConfig::default()
    };
    let model = Model::from_stats(p, &measured.stats, &cfg).with_worker_shares(p, &measured.stats);
    let pattern = rate.map_or_else(RatePattern::unthrottled, RatePattern::constant);
    let sim = Simulation::new(p, model, cfg, pattern, Deployment::Static(placement.clone()))
        .map_err(|e| BenchError::Run(format!("{}: simulator: {e}", p.name)))?;
    Ok(sim.run())
}

/// The simulated machines' costs: the runtime's α and β plus the emulated ones, capacity
/// slots × 10⁶ µs/s.
fn costs(bed: &Testbed) -> clasp_core::stats::Coefficients {
    let mut c = bed.coefficients();
    let fanout = bed.regime.cost.map_or(0.0, |d: DispatchCost| d.fanout_us);
    c.gamma = fanout;
    c
}

fn table(checks: &[Check]) -> Table {
    let mut t = Table::new(
        "validate-runtime",
        &[
            "app",
            "dispatch costs",
            "workers",
            "metric",
            "runtime",
            "simulator",
            "unit",
            "difference (%)",
            "within 15 %",
            "runtime workers busy (%)",
            "hop delays local/remote (us)",
        ],
    );
    for c in checks {
        t.row(vec![
            c.app.clone(),
            c.regime.into(),
            c.workers.to_string(),
            c.metric.clone(),
            num(c.runtime, 2),
            num(c.simulated, 2),
            c.unit.into(),
            num(100.0 * c.difference(), 1),
            if c.passes() { "yes" } else { "NO" }.into(),
            c.busy.clone(),
            format!("{}/{}", num(c.delays.local_us, 1), num(c.delays.remote_us, 1)),
        ]);
    }
    t
}

fn chart(checks: &[Check]) -> Chart {
    let labels: Vec<String> = checks
        .iter()
        .map(|c| {
            let what = if c.unit == "ms" { "p50" } else { "max" };
            format!("{} {} {what}", c.app, c.regime)
        })
        .collect();
    Chart::bars(
        "Simulator vs runtime: difference (bound +-15 %)",
        "comparison (app, costs, metric)",
        "simulator - runtime (% of runtime)",
    )
    .named("validate-runtime")
    .categories(&labels)
    .series(Series::new("difference", checks.iter().map(|c| 100.0 * c.difference()).collect()))
}

fn notes(checks: &[Check]) -> Vec<String> {
    let failed: Vec<&Check> = checks.iter().filter(|c| !c.passes()).collect();
    let worst = checks.iter().map(|c| c.difference().abs()).fold(0.0, f64::max);
    let verdict = if failed.is_empty() {
        format!(
            "PASS: all {} comparisons within {:.0} % (largest difference {:.1} %).",
            checks.len(),
            100.0 * BOUND,
            100.0 * worst
        )
    } else {
        let names: Vec<String> = failed
            .iter()
            .map(|c| {
                format!("{} {} {} ({:+.1} %)", c.app, c.regime, c.metric, 100.0 * c.difference())
            })
            .collect();
        format!(
            "FAIL: {} of {} comparisons outside {:.0} %: {}.",
            failed.len(),
            checks.len(),
            100.0 * BOUND,
            names.join("; ")
        )
    };
    vec![
        verdict,
        "The simulator takes the key skew of the compared run (each keyed operator's share of requests per worker). What it does not model: the runtime's per-request CPU outside the measured execution (scheduler, wake-ups, the last 20 us of each sleep spun), remote requests held for up to the flush deadline, and the timing noise of a shared 2-core machine; runs of a few seconds also carry sampling noise.".into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(runtime: f64, simulated: f64) -> Check {
        Check {
            app: "syn".into(),
            regime: "native",
            workers: 2,
            metric: "m".into(),
            runtime,
            simulated,
            unit: "ms",
            delays: Delays { local_us: 1.0, remote_us: 50.0 },
            busy: "90/80".into(),
        }
    }

    #[test]
    fn checks_pass_within_the_bound_only() {
        assert!(check(100.0, 114.0).passes() && check(100.0, 86.0).passes());
        assert!(!check(100.0, 116.0).passes() && !check(100.0, 84.0).passes());
        assert!(!check(0.0, 0.0).passes() && !check(100.0, f64::NAN).passes());
        assert!((check(100.0, 110.0).difference() - 0.1).abs() < 1e-12);
    }

    #[test]
    fn notes_say_pass_or_fail_with_numbers() {
        let n = notes(&[check(100.0, 105.0)]);
        assert!(n[0].starts_with("PASS") && n[0].contains("5.0 %"), "{}", n[0]);
        let n = notes(&[check(100.0, 105.0), check(100.0, 130.0)]);
        assert!(n[0].starts_with("FAIL: 1 of 2") && n[0].contains("+30.0 %"), "{}", n[0]);
    }

    #[test]
    fn alternating_places_neighbours_apart() {
        let p = clasp_apps::pipeline("syn").unwrap();
        let a = Placement::alternating(&p, 2);
        let on: Vec<u32> = a.operators.iter().map(|o| o.shares[0].worker.0).collect();
        assert_eq!(on, [0, 1, 0, 1, 0, 1, 0, 1, 0, 1]);
        a.check(&p).unwrap();
    }
}
