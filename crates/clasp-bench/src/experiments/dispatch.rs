//! α and β on this runtime: worker CPU per local and per remote chained request.
//!
//! SYN chains of no-op operators run on worker processes with one record per request: a
//! chain of 10 operators causes 9 chained requests per input, a chain of 1 none. The extra
//! worker CPU of the long chain, per chained request, is what dispatching (and running) one
//! chained request costs: all on one worker gives α, operators alternating between two
//! workers (every chained request crosses) gives β, send and receive sides together. CPU
//! is measured with `getrusage(RUSAGE_CHILDREN)` around each run, so it is exactly the
//! workers' own CPU.
//!
//! `coefficients` and `validate` on the runtime start with this measurement ([`measure`]):
//! the α and β they take as this runtime's true costs are the ones measured in the same run.

use crate::engine::runtime::testbed::NativeCosts;
use crate::engine::runtime::watch::{WatchCost, run_watched};
use crate::engine::runtime::{children_cpu, pipeline_from, sig, worker_processes};
use crate::report::{Output, Report, Table};
use crate::settings::Scope;
use crate::settings::values::Count;
use crate::{BenchError, Options};
use clasp_core::input::MemoryLines;
use clasp_core::{Pipeline, SourceId};
use clasp_plan::keys::assign_keys;
use clasp_runtime::cluster::Cluster;
use clasp_runtime::planner::{DiscardSink, Input, PlannerConfig};
use clasp_runtime::routing::RoutingPlan;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// Inputs of the measurement when another experiment runs it: enough for CPU differences of
/// a few hundred nanoseconds per request to stand above the runs' fixed start-up cost.
pub const QUICK_INPUTS: u64 = 50_000;

/// Floor of a measured cost (µs): a difference lost in noise still plans as a small cost,
/// never as zero (the estimator normalizes by it).
const MIN_COST_US: f64 = 1e-3;

/// `dispatch`'s settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Inputs of one record each per run.
    pub inputs: Count<1, 100_000_000>,
    /// Executor slots per worker.
    pub slots: Count<1, 64>,
    /// Run with the admin server up and scraped every second (to measure its overhead).
    pub admin: bool,
}

impl Settings {
    /// 300,000 inputs (quick: 50,000), one slot.
    pub fn preset(quick: bool) -> Self {
        Self {
            inputs: Count(if quick { QUICK_INPUTS } else { 300_000 }),
            slots: Count(1),
            admin: false,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self::preset(false)
    }
}

/// One run of the measurement.
#[derive(Clone, Debug)]
struct Case {
    name: &'static str,
    workers: u32,
    cpu: Duration,
    wall: Duration,
    local: u64,
    remote: u64,
    /// Worker CPU per chained request above the baseline (ns); `None` for the baseline.
    per_request_ns: Option<f64>,
}

/// α and β as measured, with the runs behind them.
#[derive(Clone, Debug)]
pub struct Measurement {
    cases: Vec<Case>,
    /// Inputs per run.
    pub inputs: u64,
    /// Executor slots per worker.
    pub slots: u32,
    /// α: worker CPU per local chained request (ns).
    pub alpha_ns: f64,
    /// What observing the runs cost (with the admin server).
    pub observing: Option<WatchCost>,
    /// β: worker CPU per remote chained request, send and receive sides (ns).
    pub beta_ns: f64,
}

impl Measurement {
    /// The measured costs as the testbed plans with them.
    pub fn native(&self) -> NativeCosts {
        NativeCosts {
            alpha_us: (self.alpha_ns / 1e3).max(MIN_COST_US),
            beta_us: (self.beta_ns / 1e3).max(MIN_COST_US),
            measured: true,
        }
    }

    /// Every run: chained requests, worker CPU, CPU per chained request, wall time.
    pub fn table(&self) -> Table {
        let mut t = Table::new(
            "dispatch",
            &[
                "case",
                "workers",
                "local chained",
                "remote chained",
                "worker CPU (s)",
                "CPU per chained request (ns)",
                "wall (s)",
            ],
        );
        for c in &self.cases {
            t.row(vec![
                c.name.into(),
                c.workers.to_string(),
                c.local.to_string(),
                c.remote.to_string(),
                sig(c.cpu.as_secs_f64()),
                c.per_request_ns.map_or("-".into(), sig),
                sig(c.wall.as_secs_f64()),
            ]);
        }
        t
    }

    /// How it was measured, for a report's setup lines.
    pub fn setup_lines(&self) -> Vec<String> {
        vec![
            format!("{} inputs of one record each; worker processes with {} executor slot(s); loopback TCP", self.inputs, self.slots),
            "CPU per chained request = (worker CPU of SYN-10 - worker CPU of SYN-1) / chained requests; it includes running the no-op request it causes".into(),
        ]
    }
}

/// Measures α and β: SYN-1 on one worker (the baseline), SYN-10 on one worker (every chained
/// request local) and alternating over two (every one remote).
pub fn measure(inputs: u64, slots: u32) -> Result<Measurement, BenchError> {
    measure_watched(inputs, slots, false)
}

/// [`measure`], with the admin server up and scraped during every run when `admin`.
pub fn measure_watched(inputs: u64, slots: u32, admin: bool) -> Result<Measurement, BenchError> {
    let n = usize::try_from(inputs)
        .map_err(|_| BenchError::Config(format!("--set inputs={inputs}: too many")))?;
    let short = pipeline_from(&syn_chain(1), "syn1")?;
    let long = pipeline_from(&syn_chain(10), "syn10")?;
    let mut cost = WatchCost::default();
    let (base_cpu, base_wall, _, _) = run_syn(&short, 1, n, 1, slots, admin, &mut cost)?;
    let mut cases = vec![Case {
        name: "SYN-1 (no chained requests)",
        workers: 1,
        cpu: base_cpu,
        wall: base_wall,
        local: 0,
        remote: 0,
        per_request_ns: None,
    }];
    for (name, workers) in [("SYN-10, all local (alpha)", 1), ("SYN-10, all remote (beta)", 2)] {
        let (cpu, wall, local, remote) = run_syn(&long, workers, n, 1, slots, admin, &mut cost)?;
        let chained = (local + remote).max(1);
        let ns = (cpu.as_secs_f64() - base_cpu.as_secs_f64()).max(0.0) * 1e9 / chained as f64;
        cases.push(Case { name, workers, cpu, wall, local, remote, per_request_ns: Some(ns) });
    }
    let alpha_ns = cases[1].per_request_ns.unwrap_or(0.0);
    let beta_ns = cases[2].per_request_ns.unwrap_or(0.0);
    let observing = admin.then_some(cost);
    Ok(Measurement { cases, inputs, slots, alpha_ns, beta_ns, observing })
}

/// A SYN chain of `n` no-op operators.
pub fn syn_chain(n: usize) -> String {
    let mut s = format!("[pipeline]\nname = \"syn{n}\"\n[[source]]\nname = \"input\"\n");
    for i in 1..=n {
        s += &format!("[[operator]]\nname = \"op{i}\"\nkind = \"map\"\nfunction = \"syn.noop\"\n");
    }
    s += "[[stream]]\nfrom = \"input\"\nto = \"op1\"\n";
    for i in 1..n {
        s += &format!("[[stream]]\nfrom = \"op{i}\"\nto = \"op{}\"\n", i + 1);
    }
    s
}

/// Worker CPU and wall time of one run of `inputs` single-record requests.
fn run_syn(
    p: &Pipeline,
    workers: u32,
    inputs: usize,
    batch: u32,
    slots: u32,
    admin: bool,
    cost: &mut WatchCost,
) -> Result<(Duration, Duration, u64, u64), BenchError> {
    let lines: Arc<Vec<Vec<u8>>> =
        Arc::new((0..inputs).map(|i| format!("r{i}").into_bytes()).collect());
    let mut cfg = PlannerConfig { batch_size: batch, ..PlannerConfig::default() };
    cfg.settings.batch_size = batch;
    let err = |e: &dyn std::fmt::Display| BenchError::Run(e.to_string());
    let before = children_cpu();
    let mut c = Cluster::start(
        p.clone(),
        cfg,
        Box::new(DiscardSink),
        worker_processes()?,
        workers as usize,
        slots,
    )
    .map_err(|e| err(&e))?;
    let placement = clasp_core::placement::Placement::alternating(p, workers);
    let keys = assign_keys(p, &placement, 1024, None);
    c.planner.install(RoutingPlan { epoch: 1, placement, keys }).map_err(|e| err(&e))?;
    let input = Input {
        source: SourceId(0),
        reader: clasp_core::source::from_lines(Box::new(MemoryLines::new(lines, 0, 1)), None),
        rate: Box::new(|_| None),
    };
    let s = run_watched(&mut c.planner, p, input, admin, cost)?;
    c.shutdown().map_err(|e| err(&e))?;
    Ok((
        children_cpu() - before,
        Duration::from_secs_f64(s.duration_s),
        s.local_requests,
        s.remote_requests,
    ))
}

/// Runs the experiment.
pub fn run(o: &Options) -> Result<Output, BenchError> {
    let s = Scope::new("dispatch", o).one(&Settings::preset(o.quick))?;
    let m = measure_watched(s.inputs.get(), s.slots.u32(), s.admin)?;
    let mut summary = Table::new(
        "coefficients",
        &["coefficient", "this runtime (ns)", "paper, Faasm (ns)", "ratio"],
    );
    for (name, ours, paper) in [
        ("alpha (local)", m.alpha_ns, 38_500.0),
        ("beta (remote, amortized)", m.beta_ns, 275_000.0),
    ] {
        summary.row(vec![
            name.into(),
            sig(ours),
            sig(paper),
            format!("{}x", sig(paper / ours.max(1e-9))),
        ]);
    }
    let mut setup = vec![match &m.observing {
        Some(cost) => {
            let wall = m.cases.iter().map(|c| c.wall).sum();
            format!(
                "engine runtime; admin server up, /metrics and /api/v1/series fetched every second; {}",
                cost.line(wall)
            )
        }
        None => "engine runtime; no admin server".to_owned(),
    }];
    setup.extend(m.setup_lines());
    Ok(Output::from(Report {
        title: "Dispatch costs on this runtime (alpha, beta)".into(),
        setup,
        tables: vec![m.table(), summary],
        notes: vec!["Targets: alpha <= 100 ns, beta <= 300 ns. The paper's values were measured on Faasm with 8-core workers.".into()],
    }))
}
