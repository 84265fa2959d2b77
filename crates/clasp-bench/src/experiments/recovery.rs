//! `recovery`: what fault tolerance costs on this runtime. Word count on two worker processes
//! at two state sizes: the throughput of an unthrottled run with checkpoints against one
//! without, each checkpoint's pause, duration and size, and — in a paced run where one worker
//! is killed (`SIGKILL`) — the time from the kill to the first chain completed after the
//! restore.

use crate::engine::runtime::{app_pipeline, median, sig, worker_processes};
use crate::plot::{Chart, Series};
use crate::report::{Output, Report, Table};
use crate::settings::Scope;
use crate::settings::values::{Count, Fraction, Time};
use crate::{BenchError, Options};
use clasp_core::SourceId;
use clasp_core::input::{InputRecord, Next};
use clasp_core::rng::SeededRng;
use clasp_core::source::{Source, SourceError, SourcePosition};
use clasp_plan::AutoscalerConfig;
use clasp_runtime::fault::inject::{KillPlan, KillPoint};
use clasp_runtime::fault::{CheckpointEvery, CheckpointRecord, FaultTolerance, RecoveryRecord};
use clasp_runtime::job::{self, Job, JobOutput};
use clasp_runtime::planner::{DiscardSink, Input, PlannerConfig};
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// `recovery`'s settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Distinct words of the smaller state.
    pub keys: Count<1, 10_000_000>,
    /// Distinct words of the larger state (0: only the smaller one).
    pub large_keys: Count<0, 10_000_000>,
    /// Time between checkpoints.
    pub checkpoint: Time,
    /// Length of each run, in checkpoint intervals.
    pub intervals: Count<2, 100>,
    /// The paced run's rate, a fraction of the unthrottled throughput without checkpoints.
    pub load: Fraction,
    /// Unthrottled pairs (without, then with checkpoints) per state size; the throughputs are
    /// their medians, since one pair differs by more than the checkpoints' cost on a shared
    /// machine.
    pub repeats: Count<1, 20>,
}

impl Settings {
    /// 40,000 and 1,000,000 keys, checkpoints every 10 s, runs of 3 intervals, 3 pairs
    /// (quick: 20,000 keys only, every 1 s, runs of 4, one pair).
    pub fn preset(quick: bool) -> Self {
        Self {
            keys: Count(if quick { 20_000 } else { 40_000 }),
            large_keys: Count(if quick { 0 } else { 1_000_000 }),
            checkpoint: Time::from_secs(if quick { 1.0 } else { 10.0 }),
            intervals: Count(if quick { 4 } else { 3 }),
            load: Fraction(0.4),
            repeats: Count(if quick { 1 } else { 3 }),
        }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Self::preset(false)
    }
}

/// Lines per input request.
const BATCH: u32 = 256;

/// Words per line.
const WORDS: u64 = 10;

/// A pool of lines cycled through: the first name every one of `keys` words once, in order,
/// the rest draw words uniformly, so the state holds every key from the first pass on.
fn pool(keys: u64, seed: u64) -> Arc<Vec<Vec<u8>>> {
    let mut rng = SeededRng::seed_from_u64(seed);
    let lines = keys.div_ceil(WORDS).max(100_000);
    Arc::new(
        (0..lines)
            .map(|i| {
                let words: Vec<String> = (0..WORDS)
                    .map(|j| {
                        let k = i * WORDS + j;
                        let word = if k < keys { k } else { rng.random_range(0..keys) };
                        format!("w{word}")
                    })
                    .collect();
                words.join(" ").into_bytes()
            })
            .collect(),
    )
}

/// The pool read round and round (a position is a record index, so it rewinds anywhere).
struct Cycle {
    lines: Arc<Vec<Vec<u8>>>,
    next: u64,
}

impl Source for Cycle {
    fn next_record(&mut self, rec: &mut InputRecord) -> std::io::Result<Next> {
        let line = &self.lines[(self.next % self.lines.len() as u64) as usize];
        rec.value.clear();
        rec.value.extend_from_slice(line);
        self.next += 1;
        Ok(Next::Record)
    }

    fn position(&self) -> SourcePosition {
        SourcePosition::at(self.next)
    }

    fn position_into(&self, out: &mut SourcePosition) {
        out.set_number(self.next);
    }

    fn seek(&mut self, position: &SourcePosition) -> Result<(), SourceError> {
        self.next = position.number()?;
        Ok(())
    }

    fn rewindable(&self) -> bool {
        true
    }
}

/// One run of word count on two worker processes for `duration`: unthrottled when `rate` is
/// `None`; checkpointing every `every` when given, into a scratch directory; with `kill`.
fn run_wc(
    lines: &Arc<Vec<Vec<u8>>>,
    duration: Duration,
    rate: Option<f64>,
    every: Option<Duration>,
    kill: Option<KillPoint>,
    seed: u64,
) -> Result<JobOutput, BenchError> {
    let store = std::env::temp_dir().join(format!("clasp-bench-recovery-{}", std::process::id()));
    let mut planner = PlannerConfig { batch_size: BATCH, ..PlannerConfig::default() };
    planner.settings.batch_size = BATCH;
    planner.settings.seed = seed;
    // Kills are carried out at interval ends: short intervals put them where they are asked.
    planner.settings.interval_ms = 250;
    let fault = FaultTolerance {
        checkpoint: every.map(|d| CheckpointEvery::Seconds(d.as_secs_f64())),
        store: store.display().to_string(),
        kills: KillPlan { workers: kill.into_iter().collect(), planner: None, seed },
        ..FaultTolerance::default()
    };
    let job = Job {
        pipeline: app_pipeline("wc")?,
        workers: 2,
        slots: 2,
        planner,
        launch: worker_processes()?,
        placement: None,
        scaling: AutoscalerConfig::with_policy(clasp_plan::Policy::Static),
        duration: Some(duration),
        initial_rate: rate.unwrap_or(1_000.0),
        rescales: Vec::new(),
        fault,
    };
    let input = Input {
        source: SourceId(0),
        reader: Box::new(Cycle { lines: lines.clone(), next: 0 }),
        rate: Box::new(move |_| rate),
    };
    let out = job::run(job, vec![input], Box::new(DiscardSink), None, |_| {}, |_| {});
    let _ = std::fs::remove_dir_all(&store);
    out.map_err(|e| BenchError::Run(format!("word count with checkpoints {every:?}: {e}")))
}

/// The committed checkpoints of a run.
fn committed(out: &JobOutput) -> Vec<&CheckpointRecord> {
    out.stats.checkpoints.iter().filter(|c| c.committed).collect()
}

fn max_of(v: impl Iterator<Item = f64>) -> f64 {
    v.fold(f64::NAN, f64::max)
}

fn mean_of(v: &[f64]) -> f64 {
    if v.is_empty() { f64::NAN } else { v.iter().sum::<f64>() / v.len() as f64 }
}

/// Runs the experiment on the runtime.
pub fn run(o: &Options) -> Result<Output, BenchError> {
    let s = Scope::new("recovery", o).one(&Settings::preset(o.quick))?;
    let every = Duration::from_secs_f64(s.checkpoint.secs());
    let duration = every * s.intervals.u32();
    let sizes: Vec<u64> =
        [s.keys.get(), s.large_keys.get()].into_iter().filter(|k| *k > 0).collect();
    let mut cost = Table::new(
        "recovery_cost",
        &[
            "keys",
            "throughput, no checkpoints (words/s)",
            "throughput, checkpoints (words/s)",
            "overhead (%)",
            "checkpoints (unthrottled + paced)",
            "longest dispatch pause, unthrottled (ms)",
            "longest dispatch pause, paced (ms)",
            "longest hold at state, unthrottled (ms)",
            "longest hold at state, paced (ms)",
            "boundary to commit (ms)",
            "bytes per checkpoint",
        ],
    );
    let mut rec = Table::new(
        "recovery_time",
        &[
            "keys",
            "paced rate (req/s)",
            "kill to first completion (ms)",
            "noticed to resumed (ms)",
            "keys restored",
            "bytes read",
            "checkpoint restored",
        ],
    );
    let repeats = s.repeats.get() as usize;
    let mut progress = crate::progress::Progress::new("recovery", sizes.len() * (2 * repeats + 1));
    let (mut without, mut with) = (Vec::new(), Vec::new());
    let mut spreads = Vec::new();
    let words = |out: &JobOutput| out.summary.records_per_s * WORDS as f64;
    let each =
        |runs: &[JobOutput]| runs.iter().map(|r| sig(words(r))).collect::<Vec<_>>().join(", ");
    for &keys in &sizes {
        let lines = pool(keys, o.seed);
        let (mut plains, mut checkeds) = (Vec::new(), Vec::new());
        for i in 1..=repeats {
            progress.step(&format!("{keys} keys, no checkpoints ({i} of {repeats})"));
            plains.push(run_wc(&lines, duration, None, None, None, o.seed)?);
            let every_s = sig(every.as_secs_f64());
            progress
                .step(&format!("{keys} keys, checkpoints every {every_s} s ({i} of {repeats})"));
            checkeds.push(run_wc(&lines, duration, None, Some(every), None, o.seed)?);
        }
        spreads.push(format!(
            "{keys} keys, words/s of each run: without checkpoints {}; with {}.",
            each(&plains),
            each(&checkeds)
        ));
        let plain_words = median(&plains.iter().map(words).collect::<Vec<_>>());
        let checked_words = median(&checkeds.iter().map(words).collect::<Vec<_>>());
        let plain_throughput =
            median(&plains.iter().map(|p| p.summary.throughput).collect::<Vec<_>>());
        let rate = (s.load.0 * plain_throughput).max(1.0);
        // The kill comes halfway through the paced run, after at least one checkpoint.
        let kill_at = (rate * duration.as_secs_f64() / 2.0) as u64;
        progress.step(&format!("{keys} keys, paced at {} req/s, one worker killed", sig(rate)));
        let killed = run_wc(
            &lines,
            duration,
            Some(rate),
            Some(every),
            Some(KillPoint::Requests(kill_at)),
            o.seed,
        )?;
        let unthrottled: Vec<&CheckpointRecord> = checkeds.iter().flat_map(committed).collect();
        let paced = committed(&killed);
        let overhead = 100.0 * (1.0 - checked_words / plain_words);
        without.push(plain_words);
        with.push(checked_words);
        cost.row(vec![
            keys.to_string(),
            sig(plain_words),
            sig(checked_words),
            sig(overhead),
            format!("{} + {}", unthrottled.len(), paced.len()),
            sig(max_of(unthrottled.iter().map(|c| c.pause_ms))),
            sig(max_of(paced.iter().map(|c| c.pause_ms))),
            sig(max_of(unthrottled.iter().map(|c| c.held_ms))),
            sig(max_of(paced.iter().map(|c| c.held_ms))),
            sig(mean_of(&paced.iter().map(|c| c.duration_ms).collect::<Vec<_>>())),
            sig(mean_of(&paced.iter().map(|c| c.bytes as f64).collect::<Vec<_>>())),
        ]);
        let recovered: Vec<&RecoveryRecord> = killed.stats.recoveries.iter().collect();
        let Some(r) = recovered.first() else {
            return Err(BenchError::Run(format!(
                "{keys} keys: the killed worker was not recovered from (kill at request {kill_at})"
            )));
        };
        rec.row(vec![
            keys.to_string(),
            sig(rate),
            r.kill_to_first_completion_ms.map_or_else(|| "-".into(), sig),
            sig(r.duration_ms),
            r.keys.to_string(),
            r.bytes.to_string(),
            r.checkpoint.map_or_else(|| "none (from the start)".into(), |c| c.to_string()),
        ]);
    }
    let labels: Vec<String> = sizes.iter().map(|k| format!("{k} keys")).collect();
    let chart = Chart::bars(
        "Word count throughput with and without checkpoints",
        "state",
        "throughput (words/s)",
    )
    .named("recovery")
    .categories(&labels)
    .series(Series::new("no checkpoints", without))
    .series(Series::new(&format!("checkpoints every {} s", sig(every.as_secs_f64())), with));
    let report = Report {
        title: "Fault tolerance cost on this runtime".into(),
        setup: vec![
            format!(
                "engine runtime; word count on 2 worker processes of 2 slots, {BATCH} lines of {WORDS} words per request, every key in the state from the first pass over the input"
            ),
            format!(
                "each run lasts {} s; checkpoints every {} s into a local directory; throughput: the median of {} unthrottled runs without and {} with checkpoints, alternated",
                sig(duration.as_secs_f64()),
                sig(every.as_secs_f64()),
                repeats,
                repeats
            ),
            format!(
                "recovery: a paced run at {} of the unthrottled throughput without checkpoints, one worker killed with SIGKILL halfway",
                sig(s.load.0)
            ),
        ],
        tables: vec![cost, rec],
        notes: [
            "Targets: throughput overhead <= 5 %, longest pause <= 5 ms, kill to first completion <= 2 s at 1,000,000 keys.".to_owned(),
            "The dispatch pause starts the boundary's cut; a chain after the boundary then waits at keyed state (the hold) only until the chains before it completed and its worker marked its snapshot.".to_owned(),
        ]
        .into_iter()
        .chain(spreads)
        .collect(),
    };
    Ok(Output { report, charts: vec![chart] })
}
