//! Experiments on the real runtime, on this machine: planner and workers over loopback TCP,
//! as threads of this process or as worker processes of the `clasp` binary.

pub mod coefficients;
pub mod dispatch;
pub mod end_to_end;
pub mod migration;
pub mod placement;
pub mod scaling;
pub mod state_locality;
pub mod testbed;
pub mod validate;
pub mod wc;
pub mod worker_count;

use crate::BenchError;
use clasp_core::Pipeline;
use clasp_runtime::cluster::Launch;
use std::path::PathBuf;
use std::time::Duration;

/// CPU time (user + system) of every child process waited for so far.
pub fn children_cpu() -> Duration {
    rusage_cpu(libc::RUSAGE_CHILDREN)
}

/// CPU time (user + system) of this process and of the children it waited for, so far.
pub fn cpu_so_far() -> Duration {
    rusage_cpu(libc::RUSAGE_SELF) + children_cpu()
}

/// User + system CPU time that `getrusage(who)` reports.
#[allow(unsafe_code)]
fn rusage_cpu(who: libc::c_int) -> Duration {
    // SAFETY: getrusage writes into the struct we pass and has no other effect.
    let usage = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(who, &mut u);
        u
    };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, (t.tv_usec as u32) * 1000);
    tv(usage.ru_utime) + tv(usage.ru_stime)
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
    clasp_apps::pipeline(app).map_err(BenchError::Config)
}

/// Where an experiment's files go.
pub fn out_dir(o: &crate::Options) -> PathBuf {
    o.out.clone()
}

/// A setting parsed as a number, or `default`.
pub fn number(o: &crate::Options, key: &str, default: f64) -> Result<f64, BenchError> {
    match o.setting(key) {
        None => Ok(default),
        Some(v) => v.parse::<f64>().ok().filter(|x| x.is_finite() && *x > 0.0).ok_or_else(|| {
            BenchError::Config(format!("--set {key}={v}: expected a positive number"))
        }),
    }
}

/// Formats a number with 3 significant digits.
pub fn sig(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = (2 - x.abs().log10().floor() as i32).max(0) as usize;
    format!("{x:.digits$}")
}
