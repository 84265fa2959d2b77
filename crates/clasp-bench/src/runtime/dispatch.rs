//! α and β on this runtime: worker CPU per local and per remote chained request.
//!
//! SYN chains of no-op operators run on worker processes with one record per request: a
//! chain of 10 operators causes 9 chained requests per input, a chain of 1 none. The extra
//! worker CPU of the long chain, per chained request, is what dispatching (and running) one
//! chained request costs: all on one worker gives α, operators alternating between two
//! workers (every chained request crosses) gives β, send and receive sides together. CPU
//! is measured with `getrusage(RUSAGE_CHILDREN)` around each run, so it is exactly the
//! workers' own CPU.

use super::{children_cpu, pipeline_from, sig, worker_processes};
use crate::report::{Report, Table};
use crate::{BenchError, Options};
use clasp_core::input::MemoryLines;
use clasp_core::{Pipeline, SourceId};
use clasp_plan::keys::assign_keys;
use clasp_runtime::cluster::Cluster;
use clasp_runtime::planner::{DiscardSink, Input, PlannerConfig};
use clasp_runtime::routing::RoutingPlan;
use std::sync::Arc;
use std::time::Duration;

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
fn measure(
    p: &Pipeline,
    workers: u32,
    inputs: usize,
    batch: u32,
    slots: u32,
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
        reader: Box::new(MemoryLines::new(lines, 0, 1)),
        rate: Box::new(|_| None),
    };
    let s = c.planner.run(vec![input], None, |_| {}, |_, _| Ok(())).map_err(|e| err(&e))?;
    c.shutdown().map_err(|e| err(&e))?;
    Ok((
        children_cpu() - before,
        Duration::from_secs_f64(s.duration_s),
        s.local_requests,
        s.remote_requests,
    ))
}

/// Runs the experiment.
pub fn run(o: &Options) -> Result<Report, BenchError> {
    let inputs = super::number(o, "inputs", if o.quick { 50_000.0 } else { 300_000.0 })? as usize;
    let slots = super::number(o, "slots", 1.0)? as u32;
    let short = pipeline_from(&syn_chain(1), "syn1")?;
    let long = pipeline_from(&syn_chain(10), "syn10")?;
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
    let (base_cpu, base_wall, _, _) = measure(&short, 1, inputs, 1, slots)?;
    t.row(vec![
        "SYN-1 (no chained requests)".into(),
        "1".into(),
        "0".into(),
        "0".into(),
        sig(base_cpu.as_secs_f64()),
        "-".into(),
        sig(base_wall.as_secs_f64()),
    ]);
    let mut per_request = Vec::new();
    for (case, workers) in [("SYN-10, all local (alpha)", 1), ("SYN-10, all remote (beta)", 2)] {
        let (cpu, wall, local, remote) = measure(&long, workers, inputs, 1, slots)?;
        let chained = (local + remote).max(1);
        let ns = (cpu.as_secs_f64() - base_cpu.as_secs_f64()).max(0.0) * 1e9 / chained as f64;
        per_request.push(ns);
        t.row(vec![
            case.into(),
            workers.to_string(),
            local.to_string(),
            remote.to_string(),
            sig(cpu.as_secs_f64()),
            sig(ns),
            sig(wall.as_secs_f64()),
        ]);
    }
    let mut summary = Table::new(
        "coefficients",
        &["coefficient", "this runtime (ns)", "paper, Faasm (ns)", "ratio"],
    );
    for (name, ours, paper) in [
        ("alpha (local)", per_request[0], 38_500.0),
        ("beta (remote, amortized)", per_request[1], 275_000.0),
    ] {
        summary.row(vec![
            name.into(),
            sig(ours),
            sig(paper),
            format!("{}x", sig(paper / ours.max(1e-9))),
        ]);
    }
    Ok(Report {
        title: "Dispatch costs on this runtime (alpha, beta)".into(),
        setup: vec![
            format!("engine runtime; {inputs} inputs of one record each; worker processes with {slots} executor slot(s); loopback TCP"),
            "CPU per chained request = (worker CPU of SYN-10 - worker CPU of SYN-1) / chained requests; it includes running the no-op request it causes".into(),
        ],
        tables: vec![t, summary],
        notes: vec!["Targets: alpha <= 100 ns, beta <= 300 ns. The paper's values were measured on Faasm with 8-core workers.".into()],
    })
}
