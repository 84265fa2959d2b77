//! The fault-tolerance options of `clasp run` and `clasp planner`: checkpoints, their store,
//! resuming a job, the transactional `--output`, and failures caused on purpose (tests,
//! `clasp bench recovery`).

use anyhow::{Context, Result, anyhow, bail};
use clasp_core::Pipeline;
use clasp_runtime::fault::inject::{KillPlan, KillPoint};
use clasp_runtime::fault::manifest::Manifest;
use clasp_runtime::fault::output::TransactionalOutput;
use clasp_runtime::fault::{CheckpointEvery, FaultNote, FaultTolerance, catalog, store};
use clasp_runtime::job::JobOutput;
use clasp_runtime::planner::{DiscardSink, JsonLinesSink, SinkOutput};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Checkpoint and recovery options.
#[derive(Debug, clap::Args)]
pub struct FaultArgs {
    /// How often to checkpoint the state, the sources' positions and the placement: a
    /// duration (10s, 500ms), `requests:N`, or `none` (a lost worker then ends the run).
    /// Default: every 10 s when every input can replay, else none (with a warning). While a
    /// backlog would hold a checkpoint's boundary over 1 s and the policy can rescale, a due
    /// checkpoint waits, for at most twice this interval.
    #[arg(long, value_parser = parse_every)]
    pub checkpoint: Option<Every>,
    /// Where checkpoints go: a directory, or `redis://HOST:PORT[/PREFIX]`; default: a
    /// directory in the system's temporary directory, removed after the run.
    #[arg(long, value_name = "DIR|redis://HOST:PORT")]
    pub checkpoint_store: Option<String>,
    /// Committed checkpoints kept in the store (older ones are deleted).
    #[arg(long, default_value_t = 3)]
    pub checkpoint_retain: usize,
    /// Resume the job from the last committed checkpoint in this store (a directory or a
    /// Redis location), after the planner was stopped or killed.
    #[arg(long, value_name = "DIR|redis://HOST:PORT")]
    pub resume: Option<String>,
    /// A worker silent this long (no heartbeat) is lost and recovered from.
    #[arg(long, default_value = "1500ms", value_parser = super::duration::parse)]
    pub heartbeat_timeout: Duration,
    /// Fault injection: `kill -9` a worker (chosen by --kill-seed) at `requests:N`,
    /// `checkpoint:N` (during the N-th checkpoint), `migration:N` or `restore:N` (during the
    /// N-th restore of a recovery). Repeatable; needs --processes.
    #[arg(long, value_name = "POINT", value_parser = parse_point)]
    pub kill_worker_at: Vec<KillPoint>,
    /// Fault injection: `kill -9` the planner itself at this point (resume with --resume).
    #[arg(long, value_name = "POINT", value_parser = parse_point)]
    pub kill_planner_at: Option<KillPoint>,
    /// Seed of the choice of worker to kill.
    #[arg(long, default_value_t = 1)]
    pub kill_seed: u64,
}

/// Seconds between checkpoints without `--checkpoint`.
const DEFAULT_CHECKPOINT_S: f64 = 10.0;

/// `--checkpoint`: an interval, or none.
#[derive(Clone, Copy, Debug)]
pub struct Every(pub Option<CheckpointEvery>);

fn parse_every(s: &str) -> Result<Every, String> {
    if s == "none" {
        return Ok(Every(None));
    }
    s.parse().map(|e| Every(Some(e)))
}

fn parse_point(s: &str) -> Result<KillPoint, String> {
    s.parse()
}

/// The store a run checkpoints into, and whether the run made it up (and removes it).
#[derive(Debug)]
pub struct Prepared {
    /// The job's fault tolerance.
    pub fault: FaultTolerance,
    /// A temporary directory to remove after a successful run.
    pub temporary: Option<PathBuf>,
    /// Damaged checkpoints passed over to find the one resumed from.
    pub warnings: Vec<String>,
}

impl FaultArgs {
    /// The job's fault tolerance; with `--resume`, the checkpoint to start from. `replayable`:
    /// whether every input can go back to an earlier position (checkpoints are on by default
    /// only then; asked for explicitly, the job refuses an input that cannot).
    pub fn prepare(&self, p: &Pipeline, key_groups: u32, replayable: bool) -> Result<Prepared> {
        let mut temporary = None;
        let location = match (&self.resume, &self.checkpoint_store) {
            (Some(r), Some(s)) if r != s => {
                return Err(anyhow!(
                    "--resume {r} and --checkpoint-store {s} name different stores"
                ));
            }
            (Some(r), _) => r.clone(),
            (None, Some(s)) => s.clone(),
            (None, None) => {
                let dir = std::env::temp_dir().join(format!(
                    "clasp-checkpoints-{}-{}",
                    p.name,
                    std::process::id()
                ));
                temporary = Some(dir.clone());
                dir.display().to_string()
            }
        };
        let mut warnings = Vec::new();
        let checkpoint = match self.checkpoint {
            Some(Every(every)) => every,
            None if replayable => Some(CheckpointEvery::Seconds(DEFAULT_CHECKPOINT_S)),
            None => {
                warnings.push(
                    "an input cannot go back to an earlier position, so the run takes no checkpoints: a lost worker ends it (--checkpoint none says so)"
                        .to_owned(),
                );
                None
            }
        };
        let resume = match &self.resume {
            None => None,
            Some(r) => {
                let s = store::open(r).with_context(|| format!("--resume {r}"))?;
                let found =
                    catalog::latest(&*s, p, key_groups).with_context(|| format!("--resume {r}"))?;
                warnings = found.warnings;
                let m = found.manifest;
                Some(m.ok_or_else(|| {
                    anyhow!(
                        "--resume {r}: no whole committed checkpoint there ({})",
                        warnings.join("; ")
                    )
                })?)
            }
        };
        if checkpoint.is_none() && resume.is_some() {
            return Err(anyhow!("--resume needs checkpoints; drop --checkpoint none"));
        }
        let kills = KillPlan {
            workers: self.kill_worker_at.clone(),
            planner: self.kill_planner_at,
            seed: self.kill_seed,
        };
        let fault = FaultTolerance {
            checkpoint,
            store: location,
            retain: self.checkpoint_retain.max(1),
            heartbeat_timeout: self.heartbeat_timeout,
            resume,
            kills,
        };
        Ok(Prepared { fault, temporary: temporary.filter(|_| checkpoint.is_some()), warnings })
    }
}

/// The sink of `--output`: transactional (visible by checkpoint) when checkpoints are on.
pub fn output_sink(path: Option<&Path>, fault: &FaultTolerance) -> Result<Box<dyn SinkOutput>> {
    let Some(path) = path else { return Ok(Box::new(DiscardSink)) };
    if fault.checkpoint.is_none() {
        let f = std::fs::File::create(path)
            .with_context(|| format!("--output: cannot create {}", path.display()))?;
        return Ok(Box::new(JsonLinesSink(BufWriter::new(f))));
    }
    if let Ok(meta) = std::fs::metadata(path)
        && !meta.is_file()
    {
        bail!(
            "--output {} is not a regular file: exactly-once output stages each epoch beside it and appends it on commit; write to a file, or run with --checkpoint none",
            path.display()
        );
    }
    let committed = fault.resume.as_ref().and_then(|m: &Manifest| m.output.as_ref());
    let out = TransactionalOutput::open(path, committed)
        .with_context(|| format!("--output {}", path.display()))?;
    Ok(Box::new(out))
}

/// The live line of a checkpoint or recovery.
pub fn note_line(n: &FaultNote) -> String {
    match n {
        FaultNote::Checkpoint(c) if c.committed => format!(
            "[{:>6.1}s] checkpoint {} committed: pause {:.2} ms, drain {:.1} ms (held up to {:.1} ms), write {:.1} ms, {:.1} ms in all, {} keys, {} bytes",
            c.time_s,
            c.id,
            c.pause_ms,
            c.drain_ms,
            c.held_ms,
            c.write_ms,
            c.duration_ms,
            c.keys,
            c.bytes
        ),
        FaultNote::Checkpoint(c) => {
            format!("[{:>6.1}s] checkpoint {} failed (a worker could not write)", c.time_s, c.id)
        }
        FaultNote::Recovered(r) => format!(
            "[{:>6.1}s] recovery from the loss of worker(s) {:?} ({}): {} on {} worker(s), {} keys ({} bytes) restored in {:.1} ms",
            r.time_s,
            r.lost,
            r.reason,
            r.checkpoint.map_or("started over".to_owned(), |c| format!("checkpoint {c}")),
            r.workers,
            r.keys,
            r.bytes,
            r.duration_ms
        ),
        FaultNote::Warning(w) => format!("warning: {w}"),
    }
}

/// The summary's lines about checkpoints and recoveries (none without checkpoints).
pub fn summary_lines(out: &JobOutput) -> String {
    let cs = &out.stats.checkpoints;
    let rs = &out.stats.recoveries;
    if cs.is_empty() && rs.is_empty() {
        return String::new();
    }
    let committed: Vec<_> = cs.iter().filter(|c| c.committed).collect();
    let max_pause = committed.iter().map(|c| c.pause_ms).fold(0.0, f64::max);
    let bytes = committed.last().map_or(0, |c| c.bytes);
    let mut text = format!(
        "checkpoint {} committed, {} failed; longest pause {max_pause:.2} ms; last {bytes} bytes\n",
        committed.len(),
        cs.len() - committed.len()
    );
    for r in rs {
        text += &format!(
            "recovery   at {:.1} s, worker(s) {:?} lost: {} in {:.1} ms{}\n",
            r.time_s,
            r.lost,
            r.checkpoint.map_or("started over".to_owned(), |c| format!("checkpoint {c}")),
            r.duration_ms,
            r.first_completion_ms
                .map_or(String::new(), |f| format!(", first chain {f:.1} ms later"))
        );
    }
    text
}
