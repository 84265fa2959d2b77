//! The largest values the command line accepts, and the checks of numbers at the boundary:
//! every flag is finite and in range before anything runs (documented in `clasp <cmd>
//! --help` and docs/security.md).

use anyhow::{Result, bail};
use std::time::Duration;

/// Most input requests per second a rate may ask for.
pub const MAX_RATE: f64 = clasp_core::spec::MAX_RATE;
/// Most executor slots per worker (each is a thread).
pub const MAX_SLOTS: u32 = 1024;
/// Most records per request.
pub const MAX_BATCH: u32 = 65_536;
/// Most workers of a cluster (worker ids are below it).
pub const MAX_WORKERS: u32 = clasp_runtime::wire::MAX_WORKERS;
/// Most key groups per keyed operator.
pub const MAX_KEY_GROUPS: u32 = clasp_runtime::wire::MAX_KEY_GROUPS;
/// Longest emulated service time (µs): one minute.
pub const MAX_SERVICE_US: f64 = clasp_core::spec::MAX_SERVICE_US;
/// Longest duration a flag may give: 30 days.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 24 * 3600);
/// Metrics interval range (ms).
pub const INTERVAL_MS: std::ops::RangeInclusive<u64> = 10..=3_600_000;

/// A rate in requests per second: finite, above 0, at most [`MAX_RATE`].
pub fn parse_rate(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 && r <= MAX_RATE => Ok(r),
        Ok(r) if r.is_finite() && r > MAX_RATE => {
            Err(format!("{r} is more than the largest rate, {MAX_RATE} requests per second"))
        }
        Ok(r) => Err(format!("{r} is not a positive rate; give requests per second > 0")),
        Err(_) => Err(format!("`{s}` is not a number; give requests per second > 0")),
    }
}

/// `value` of flag `flag` must lie in `lo..=hi`.
pub fn check_range<T: PartialOrd + std::fmt::Display>(
    flag: &str,
    value: T,
    lo: T,
    hi: T,
) -> Result<()> {
    if value < lo || value > hi {
        bail!("{flag} {value} must be between {lo} and {hi}");
    }
    Ok(())
}

/// Seconds that fit a duration of at most [`MAX_DURATION`].
pub fn duration_of_seconds(what: &str, secs: f64) -> Result<Duration, String> {
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(format!("{what}: {secs} is not a number of seconds >= 0"));
    }
    if secs > MAX_DURATION.as_secs_f64() {
        return Err(format!("{what}: {secs} s is longer than the longest allowed, 30 days"));
    }
    Ok(Duration::from_secs_f64(secs))
}
