//! Spike detection: each sensor's readings sorted by their time (dates by counting days), a
//! window of the last ones, averaged from scratch.

use crate::numbers::{fixed, round_div, show};
use crate::taxi::unix_time;
use crate::{Outcome, Params};
use serde_json::json;
use std::collections::{BTreeMap, VecDeque};

/// µs since the epoch of `YYYY-MM-DD` and `HH:MM:SS[.ffffff]`.
fn micros(date: &str, time: &str) -> Option<u64> {
    let (hms, fraction) = time.split_once('.').unwrap_or((time, ""));
    if fraction.len() > 6 || !fraction.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let secs = u64::try_from(unix_time(&format!("{date} {hms}"))?).ok()?;
    let padded = format!("{fraction:0<6}");
    Some(secs * 1_000_000 + padded.parse::<u64>().ok()?)
}

pub(crate) fn expected(lines: &[String], p: &Params<'_>, o: &mut Outcome) {
    let window = p.get("moving_avg", "window", 100.0) as usize;
    let ppm = (p.get("spike_detect", "threshold", 0.03) * 1e6).round() as i128;
    // Per sensor: (time, value) of every well-formed reading.
    let mut readings: BTreeMap<String, Vec<(u64, i64)>> = BTreeMap::new();
    for l in lines {
        let f: Vec<&str> = l.split_ascii_whitespace().collect();
        if f.len() != 8 {
            continue;
        }
        let (Some(v), Some(t)) = (fixed(f[4], 4), micros(f[0], f[1])) else { continue };
        readings.entry(f[3].to_owned()).or_default().push((t, v));
    }
    for (sensor, mut rs) in readings {
        rs.sort_unstable();
        let mut values: VecDeque<i64> = VecDeque::new();
        for &(_, v) in &rs {
            values.push_back(v);
            if values.len() > window {
                values.pop_front();
            }
            let sum: i64 = values.iter().sum();
            let avg = round_div(sum.into(), values.len() as i128) as i64;
            if i128::from((v - avg).abs()) * 1_000_000 > ppm * i128::from(avg) {
                o.sink("spikes", &sensor, format!("{sensor},{},{}", show(v, 4), show(avg, 4)));
            }
        }
        let sum: i64 = values.iter().sum();
        let state = json!({"values": values, "sum": sum, "seen": rs.len(), "pending": []});
        o.set_state("moving_avg", &sensor, state);
    }
}
