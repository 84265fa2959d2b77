//! Spike detection: a window of the last readings per sensor, averaged from scratch.

use crate::numbers::{fixed, round_div, show};
use crate::{Outcome, Params};
use serde_json::json;
use std::collections::{BTreeMap, VecDeque};

pub(crate) fn expected(lines: &[String], p: &Params<'_>, o: &mut Outcome) {
    let window = p.get("moving_avg", "window", 100.0) as usize;
    let ppm = (p.get("spike_detect", "threshold", 0.03) * 1e6).round() as i128;
    let mut sensors: BTreeMap<String, (VecDeque<i64>, u64)> = BTreeMap::new();
    for l in lines {
        let f: Vec<&str> = l.split_ascii_whitespace().collect();
        if f.len() != 8 {
            continue;
        }
        let Some(v) = fixed(f[4], 4) else { continue };
        let (values, seen) = sensors.entry(f[3].to_owned()).or_default();
        values.push_back(v);
        if values.len() > window {
            values.pop_front();
        }
        *seen += 1;
        let sum: i64 = values.iter().sum();
        let avg = round_div(sum.into(), values.len() as i128) as i64;
        if i128::from((v - avg).abs()) * 1_000_000 > ppm * i128::from(avg) {
            o.sink("spikes", f[3], format!("{},{},{}", f[3], show(v, 4), show(avg, 4)));
        }
    }
    for (s, (values, seen)) in sensors {
        let sum: i64 = values.iter().sum();
        o.set_state("moving_avg", &s, json!({"values": values, "sum": sum, "seen": seen}));
    }
}
