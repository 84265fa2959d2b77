//! `validate`: the simulator against queueing theory (Erlang C, Pollaczek–Khinchine, Little's
//! law, the throughput cap), and its speed in events per second of wall time.

use super::SimSettings;
use super::queueing::{self as validation, Check};
use crate::plot::{Chart, Series};
use crate::progress::Progress;
use crate::report::{Output, Report, Table, num};
use crate::settings::Scope;
use crate::{BenchError, Options};
use clasp_core::pattern::RatePattern;
use clasp_sim::{Deployment, SimConfig, Simulation, static_placement};
use std::time::Instant;

/// Runs the experiment on the simulator.
pub(super) fn run(o: &Options) -> Result<Output, BenchError> {
    let s = Scope::new("validate", o).one(&SimSettings::preset(o.quick))?;
    let customers = s.customers.0;
    let seeds = s.seeds.get();
    let speed_s = s.speed_run.secs();
    let mut progress = Progress::new("validate", 4);
    progress.step("waiting times");
    let mut checks = validation::waiting_times(customers, seeds);
    progress.step("Little's law");
    checks.extend(validation::littles_law(customers * 0.4));
    progress.step("throughput cap");
    checks.extend(validation::throughput_cap(customers * 0.1));
    progress.step("speed");
    let speed = speed(speed_s, o.seed)?;
    let mut table = Table::new(
        "validate",
        &["check", "slots", "load", "simulated", "closed form", "unit", "error (%)", "within"],
    );
    for c in &checks {
        table.row(vec![
            c.name.clone(),
            c.slots.to_string(),
            num(c.load, 2),
            num(c.simulated, 3),
            num(c.exact, 3),
            c.unit.clone(),
            num(100.0 * c.error, 2),
            bound(c).to_string(),
        ]);
    }
    let failed: Vec<&Check> = checks.iter().filter(|c| c.error >= bound_of(c)).collect();
    let setup = vec![
        format!("engine: sim, scale: {}, seed {}", o.scale(), o.seed),
        format!(
            "one worker, W = c x 10^6 us/s, no dispatch costs or delays, Poisson arrivals, {} us mean service; M/M/c rows average {seeds} seed(s) of {customers} arrivals",
            validation::SERVICE_US
        ),
    ];
    let mut notes = vec![if failed.is_empty() {
        format!(
            "All {} checks are within their bounds (waits 5 %, Little's law 1 %, throughput 3 %).",
            checks.len()
        )
    } else {
        let names: Vec<String> = failed
            .iter()
            .map(|c| format!("{} (c = {}, load {})", c.name, c.slots, c.load))
            .collect();
        format!(
            "{} of {} checks are outside their bounds (more arrivals narrow the sampling error: --set customers=N --set seeds=N): {}",
            failed.len(),
            checks.len(),
            names.join("; ")
        )
    }];
    notes.push(speed.note.clone());
    let report = Report {
        title: "validate: the simulator against queueing theory".into(),
        setup,
        tables: vec![table, speed.table],
        notes,
    };
    Ok(Output { report, charts: vec![chart(&checks)] })
}

fn bound_of(c: &Check) -> f64 {
    if c.name.starts_with("Little") {
        0.01
    } else if c.name.starts_with("throughput") {
        0.03
    } else {
        0.05
    }
}

fn bound(c: &Check) -> &'static str {
    if c.error < bound_of(c) { "yes" } else { "NO" }
}

fn chart(checks: &[Check]) -> Chart {
    let labels: Vec<String> = checks
        .iter()
        .map(|c| {
            let kind = c.name.split_whitespace().next().unwrap_or("");
            format!("{kind} {}", num(c.load, 1))
        })
        .collect();
    Chart::bars("Simulator vs closed forms: relative error", "check (queue, load)", "error (%)")
        .named("validate")
        .categories(&labels)
        .series(Series::new("error", checks.iter().map(|c| 100.0 * c.error).collect()))
}

/// The speed run's table and note.
struct Speed {
    table: Table,
    note: String,
}

/// WC on 10 workers × 10 slots at the paper's costs, `seconds` simulated at 750 chains/s.
fn speed(seconds: f64, seed: u64) -> Result<Speed, BenchError> {
    let p = clasp_apps::pipeline("wc")?;
    let cfg = SimConfig { duration_s: seconds, warmup_s: 0.0, seed, ..SimConfig::default() };
    let rate = 750.0;
    let placement = static_placement(&p, &cfg, rate, 10)?;
    let sim =
        Simulation::from_spec(&p, cfg, RatePattern::constant(rate), Deployment::Static(placement))?;
    let start = Instant::now();
    let s = sim.run();
    let wall = start.elapsed().as_secs_f64();
    let per_s = s.events as f64 / wall.max(1e-9);
    let mut table = Table::new(
        "validate-speed",
        &[
            "run",
            "simulated (s)",
            "events",
            "wall (s)",
            "events per second",
            "simulated s per wall s",
        ],
    );
    table.row(vec![
        format!("wc, 10 workers x 10 slots, {rate} chains/s"),
        num(seconds, 0),
        s.events.to_string(),
        num(wall, 3),
        num(per_s, 0),
        num(seconds / wall.max(1e-9), 1),
    ]);
    let note = format!(
        "Speed: {:.2} M events per second of wall time ({} events, {seconds} simulated s in {wall:.2} s; issue target >= 5 M; depends on the build profile and the machine's load).",
        per_s / 1e6,
        s.events
    );
    Ok(Speed { table, note })
}
