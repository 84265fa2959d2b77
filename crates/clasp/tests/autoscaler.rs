//! The runtime and the simulator execute the same scaling decisions: one recorded sequence of
//! interval measurements, put through the runtime's adapter (`clasp_runtime::scaling::interval`,
//! from the planner's progress) and through the simulator's (`clasp_sim::engine::interval`,
//! from its tick counts), drives two autoscalers to the same steps, one for one.

use clasp_core::Pipeline;
use clasp_core::WorkerId;
use clasp_core::placement::Placement;
use clasp_core::report::{OpReport, WorkerReport};
use clasp_core::rng::SeededRng;
use clasp_plan::Policy;
use clasp_plan::autoscaler::{Autoscaler, AutoscalerConfig, Interval, Step};
use clasp_plan::triggers::TriggerConfig;
use clasp_runtime::planner::Progress;
use clasp_sim::engine::Tick;
use rand::{RngExt, SeedableRng};
use std::path::Path;

/// One recorded interval: what both the planner and the simulator measure.
#[derive(Clone, Debug)]
struct Recorded {
    t: f64,
    secs: f64,
    inputs: u64,
    completed: u64,
    requests: u64,
    queue: usize,
    in_flight: usize,
    workers: u32,
    reports: Vec<WorkerReport>,
}

fn pipeline() -> Pipeline {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines/wc.toml");
    clasp_core::spec::load(&path).unwrap()
}

/// A burst-shaped input on a cluster that completes up to 900 chains/s per worker, its worker
/// count following a script; intervals a few ms off one second, as a live planner's are.
fn record(seed: u64) -> Vec<Recorded> {
    let mut rng = SeededRng::seed_from_u64(seed);
    let (mut t, mut requests) = (0.0, 0);
    let mut out = Vec::new();
    for i in 0..160u32 {
        let secs = 1.0 + rng.random_range(-0.004..0.004);
        t += secs;
        let rate = match i {
            0..30 => 600.0,
            30..70 => 2_400.0,
            70..110 => 900.0,
            _ => 3_600.0,
        } * rng.random_range(0.97..1.03);
        let workers = match i {
            0..40 => 1,
            40..80 => 3,
            80..120 => 1,
            _ => 4,
        };
        let inputs = (rate * secs) as u64;
        let completed = inputs.min((900.0 * f64::from(workers) * secs) as u64);
        requests += inputs;
        let saturated = completed < inputs;
        let reports = (0..workers)
            .map(|w| {
                let n = completed / u64::from(workers);
                let mut op = |exec: f64| OpReport {
                    processed: n,
                    records: n * 16,
                    emitted: n * 10,
                    exec_us: n as f64 * exec * rng.random_range(0.9..1.1),
                    wait_us: n as f64 * if saturated { 20_000.0 } else { 30.0 },
                    touched: n,
                    state_keys: 1_000,
                    ..OpReport::default()
                };
                let ops = vec![op(300.0), op(500.0)];
                WorkerReport {
                    worker: WorkerId(w),
                    interval_s: secs,
                    slots: 4,
                    queue: if saturated { 800.0 } else { 2.0 },
                    queue_now: if saturated { 900 } else { 1 },
                    local: n * 6,
                    remote: n * 4 * u64::from(workers > 1),
                    destinations: workers - 1,
                    ops,
                    edges: vec![n, n * 10],
                    saturated,
                    ..WorkerReport::default()
                }
            })
            .collect();
        let queue = if saturated { (inputs - completed) as usize * 3 } else { 0 };
        let in_flight = (completed / 100) as usize;
        out.push(Recorded {
            t,
            secs,
            inputs,
            completed,
            requests,
            queue,
            in_flight,
            workers,
            reports,
        });
    }
    out
}

/// What the runtime's planner hands its scaling loop for `r`.
fn runtime_interval(r: &Recorded) -> Interval {
    let progress = Progress {
        t: r.t,
        input_rate: r.inputs as f64 / r.secs,
        throughput: r.completed as f64 / r.secs,
        planner_queue: r.queue,
        in_flight: r.in_flight,
        workers: r.workers,
        requests: r.requests,
        interval_s: r.secs,
        ..Progress::default()
    };
    clasp_runtime::scaling::interval(&progress, &r.reports)
}

/// What the simulator hands its autoscaler for `r`.
fn sim_interval(r: &Recorded) -> Interval {
    let tick = Tick {
        time_s: r.t,
        interval_s: r.secs,
        inputs: r.inputs,
        recent_inputs: 0,
        recent_s: 0.0,
        completed: r.completed,
        requests: r.requests,
        planner_queue: r.queue as f64,
        backlog: (r.queue + r.in_flight) as f64,
        workers: r.workers,
        arrival_gaps: Default::default(),
    };
    clasp_sim::engine::interval(&tick, r.reports.clone())
}

/// Every step of one autoscaler over `record`, in a comparable form; each rescale is
/// reported done at once.
fn steps(p: &Pipeline, record: &[Recorded], adapt: fn(&Recorded) -> Interval) -> Vec<String> {
    let placement = Placement::single_worker(p, &[2, 2]);
    let keys = clasp_plan::keys::assign_keys(p, &placement, 256, None);
    let cfg = AutoscalerConfig {
        policy: Policy::Clasp,
        triggers: TriggerConfig { warmup_s: 4.0, cooldown_s: 15.0, ..Default::default() },
        window_s: 5.0,
        ..AutoscalerConfig::default()
    };
    let mut a = Autoscaler::new(cfg, p, placement, keys, 1).unwrap();
    let mut out = Vec::new();
    for r in record {
        let step = a.step(p, adapt(r));
        let line = match &step {
            Step::Idle => continue,
            Step::Rescale(x) => {
                format!("{:.3} rescale {:?} {x:?}", r.t, a.coefficients())
            }
            other => format!("{:.3} {other:?}", r.t),
        };
        out.push(line);
        if matches!(step, Step::Rescale(_)) {
            a.rescaled(r.t);
        }
    }
    out
}

#[test]
fn the_runtime_and_the_simulator_get_the_same_steps_from_the_same_observations() {
    let p = pipeline();
    for seed in [1, 2, 3] {
        let record = record(seed);
        let runtime = steps(&p, &record, runtime_interval);
        let sim = steps(&p, &record, sim_interval);
        let rescales = runtime.iter().filter(|s| s.contains(" rescale ")).count();
        let others = runtime.len() - rescales;
        assert!(rescales >= 2 && others >= 1, "seed {seed}: too few paths taken: {runtime:#?}");
        assert_eq!(runtime.len(), sim.len(), "seed {seed}");
        for (a, b) in runtime.iter().zip(&sim) {
            assert_eq!(a, b, "seed {seed}");
        }
    }
}
