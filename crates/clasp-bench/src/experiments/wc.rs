//! Word count throughput on this runtime: words per second on one worker (threads of one
//! process) and on two worker processes, on a corpus file, the whole corpus loaded before the
//! clock starts.

use crate::engine::runtime::watch::{WatchCost, run_watched};
use crate::engine::runtime::{app_pipeline, median, sig, worker_processes, worker_threads};
use crate::report::{Output, Report, Table};
use crate::settings::Scope;
use crate::settings::values::Count;
use crate::{BenchError, Options};
use clasp_core::input::{LineReader, LineSource, MemoryLines};
use clasp_core::{Pipeline, SourceId};
use clasp_plan::keys::assign_keys;
use clasp_runtime::cluster::{Cluster, Launch, spread};
use clasp_runtime::planner::{DiscardSink, Input, PlannerConfig};
use clasp_runtime::routing::RoutingPlan;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::Arc;

/// `wc`'s settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// A corpus file (instead of generated lines).
    pub corpus: Option<PathBuf>,
    /// Generated lines of `clasp gen wc`.
    pub lines: Count<1, 1_000_000_000>,
    /// Runs per deployment (the median is reported).
    pub repeats: Count<1, 100>,
    /// Lines per input request.
    pub batch: Count<1, 65_536>,
    /// Run with the admin server up and scraped every second (to measure its overhead).
    pub admin: bool,
}

impl Settings {
    /// 2,000,000 generated lines, 3 runs (quick: 200,000, 1), 256 lines per request.
    pub fn preset(quick: bool) -> Self {
        Self {
            corpus: None,
            lines: Count(if quick { 200_000 } else { 2_000_000 }),
            repeats: Count(if quick { 1 } else { 3 }),
            batch: Count(256),
            admin: false,
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self::preset(false)
    }
}

/// Lines held in memory.
type Lines = Arc<Vec<Vec<u8>>>;

/// Loads the corpus: `--set corpus=PATH`, else `lines` lines of `clasp gen wc`.
fn corpus(s: &Settings, seed: u64) -> Result<(Lines, String), BenchError> {
    let mut lines = Vec::new();
    let mut line = Vec::new();
    let (mut reader, what): (Box<dyn LineSource>, String) = match &s.corpus {
        Some(path) => {
            let f = std::fs::File::open(path).map_err(|source| BenchError::Io {
                path: format!("--set corpus={}", path.display()),
                source,
            })?;
            (Box::new(LineReader::new(f)), path.display().to_string())
        }
        None => {
            let n = s.lines.get();
            let def = clasp_apps::inputs::source("wc", None)?;
            (def.generator(n, seed), format!("{n} lines of `clasp gen wc --seed {seed}`"))
        }
    };
    while reader.next_line(&mut line).map_err(|e| BenchError::Run(e.to_string()))? {
        lines.push(line.clone());
    }
    Ok((Arc::new(lines), what))
}

fn words(lines: &[Vec<u8>]) -> u64 {
    let mut n = 0;
    for l in lines {
        clasp_apps::wc::for_each_word(l, |_| n += 1);
    }
    n
}

/// One unthrottled run; returns words/s and the duration.
#[allow(clippy::too_many_arguments)]
fn run_once(
    p: &Pipeline,
    lines: &Arc<Vec<Vec<u8>>>,
    total_words: u64,
    workers: u32,
    slots: u32,
    launch: Launch,
    batch: u32,
    admin: bool,
    cost: &mut WatchCost,
) -> Result<(f64, f64), BenchError> {
    let err = |e: &dyn std::fmt::Display| BenchError::Run(e.to_string());
    let mut cfg = PlannerConfig { batch_size: batch, ..PlannerConfig::default() };
    cfg.settings.batch_size = batch;
    let mut c =
        Cluster::start(p.clone(), cfg, Box::new(DiscardSink), launch, workers as usize, slots)
            .map_err(|e| err(&e))?;
    let placement = spread(p, workers, slots);
    let keys = assign_keys(p, &placement, 1024, None);
    c.planner.install(RoutingPlan { epoch: 1, placement, keys }).map_err(|e| err(&e))?;
    let input = Input {
        source: SourceId(0),
        reader: clasp_core::source::from_lines(
            Box::new(MemoryLines::new(lines.clone(), 0, 1)),
            None,
        ),
        rate: Box::new(|_| None),
    };
    let s = run_watched(&mut c.planner, p, input, admin, cost)?;
    c.shutdown().map_err(|e| err(&e))?;
    if s.operators[1].records != total_words {
        return Err(BenchError::Run(format!(
            "counted {} words, the corpus has {total_words}",
            s.operators[1].records
        )));
    }
    Ok((total_words as f64 / s.duration_s, s.duration_s))
}

/// Runs the experiment.
pub fn run(o: &Options) -> Result<Output, BenchError> {
    let s = Scope::new("wc", o).one(&Settings::preset(o.quick))?;
    let p = app_pipeline("wc")?;
    let (lines, what) = corpus(&s, o.seed)?;
    let total = words(&lines);
    let repeats = s.repeats.usize();
    let batch = s.batch.u32();
    let mut t = Table::new(
        "wc_throughput",
        &["deployment", "words/s (median)", "runs (words/s)", "seconds per run"],
    );
    let mut cost = WatchCost::default();
    let mut wall = 0.0;
    for (name, workers, procs) in
        [("1 worker (threads)", 1, false), ("2 worker processes", 2, true)]
    {
        let mut rates = Vec::new();
        let mut secs = Vec::new();
        for _ in 0..repeats {
            let launch = if procs { worker_processes()? } else { worker_threads() };
            let (r, d) =
                run_once(&p, &lines, total, workers, 10, launch, batch, s.admin, &mut cost)?;
            wall += d;
            rates.push(r);
            secs.push(d);
        }
        t.row(vec![
            name.into(),
            sig(median(&rates)),
            rates.iter().map(|r| sig(*r)).collect::<Vec<_>>().join(" "),
            secs.iter().map(|s| sig(*s)).collect::<Vec<_>>().join(" "),
        ]);
    }
    Ok(Output::from(Report {
        title: "Word count throughput on this runtime".into(),
        setup: vec![
            format!(
                "engine runtime; corpus: {what} ({} lines, {total} words), loaded before timing",
                lines.len()
            ),
            format!(
                "{batch} lines per input request; 10 executor slots per worker; every chain completed before the clock stops"
            ),
            if s.admin {
                format!(
                    "admin server up, /metrics and /api/v1/series fetched every second; {}",
                    cost.line(std::time::Duration::from_secs_f64(wall))
                )
            } else {
                "no admin server".into()
            },
        ],
        tables: vec![t],
        notes: vec![
            "Target: >= 9 M words/s on one worker (timely dataflow's level on this machine)."
                .into(),
        ],
    }))
}
