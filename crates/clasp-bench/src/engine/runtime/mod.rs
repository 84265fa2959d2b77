//! The runtime engine (`--engine runtime`): the real runtime on this machine, planner and
//! workers over loopback TCP, as threads of this process or as worker processes of the
//! `clasp` binary; most experiments run on its emulated testbed ([`testbed`]).

pub mod testbed;
pub mod watch;

use crate::BenchError;
use clasp_core::Pipeline;
use clasp_runtime::cluster::Launch;
use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::time::TimeVal;
use std::time::Duration;

/// CPU time (user + system) of every child process waited for so far.
pub fn children_cpu() -> Duration {
    rusage_cpu(UsageWho::RUSAGE_CHILDREN)
}

/// CPU time (user + system) of this process and of the children it waited for, so far.
pub fn cpu_so_far() -> Duration {
    rusage_cpu(UsageWho::RUSAGE_SELF) + children_cpu()
}

/// User + system CPU time that `getrusage(who)` reports (zero if the kernel refuses, which
/// it does only for an invalid `who`).
fn rusage_cpu(who: UsageWho) -> Duration {
    let Ok(usage) = getrusage(who) else { return Duration::ZERO };
    let tv = |t: TimeVal| {
        Duration::new(t.tv_sec().max(0) as u64, (t.tv_usec().max(0) as u32).saturating_mul(1000))
    };
    tv(usage.user_time()) + tv(usage.system_time())
}

/// Workers as processes of the `clasp` binary running this experiment.
pub fn worker_processes() -> Result<Launch, BenchError> {
    let exe = std::env::current_exe()
        .map_err(|e| BenchError::Config(format!("locating the clasp binary: {e}")))?;
    let is_clasp = exe.file_stem().is_some_and(|s| s == "clasp");
    if !is_clasp {
        return Err(BenchError::Config(format!(
            "this experiment starts worker processes and must run from the clasp binary (`clasp bench`), not {}",
            exe.display()
        )));
    }
    Ok(Launch::Processes { exe, args: vec!["worker".into()] })
}

/// Workers as threads of this process.
pub fn worker_threads() -> Launch {
    Launch::Threads(clasp_apps::registry())
}

/// A pipeline from spec text (experiments generate specs such as SYN chains of any length).
pub fn pipeline_from(text: &str, name: &str) -> Result<Pipeline, BenchError> {
    clasp_core::spec::parse(text, name).map_err(|e| BenchError::Config(e.to_string()))
}

/// A pipeline of `pipelines/` (next to the binary's source tree or the current directory).
pub fn app_pipeline(app: &str) -> Result<Pipeline, BenchError> {
    Ok(clasp_apps::pipeline(app)?)
}

/// The middle of `values` (the upper one of an even count; NaN for none).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Formats a number with 3 significant digits.
pub fn sig(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.digits$}")
}
