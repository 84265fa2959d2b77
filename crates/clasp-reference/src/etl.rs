//! Extraction, transform and load: SenML messages parsed with `serde_json`, taken in order of
//! their time (`bt`; equal times in input order), each stage of the dataflow recomputed with
//! ordered maps.

use crate::numbers::{fixed, round_div, show};
use crate::{Outcome, Params};
use clasp_apps::etl;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// `(field, value)` of each reading of a message.
type Readings = Vec<(String, Option<i64>)>;

pub(crate) fn expected(lines: &[String], p: &Params<'_>, o: &mut Outcome) {
    let sensors = p.get("filter_bloom", "sensors", etl::SENSORS as f64) as u64;
    let window = p.get("interpolation", "window", 5.0) as usize;
    let n_fields = p.get("join", "fields", 3.0) as usize;
    let known: BTreeSet<String> = (0..sensors).map(etl::sensor_name).collect();
    let mut range: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut bloom: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut recent: BTreeMap<String, (VecDeque<i64>, u64)> = BTreeMap::new();
    let mut joins: BTreeMap<String, Vec<(String, Option<i64>)>> = BTreeMap::new();
    // (sensor, time, (field, value) of each reading) per well-formed message.
    let mut messages: Vec<(String, u64, Readings)> = Vec::new();
    for l in lines {
        let body = match l.find('{') {
            Some(0) => l.as_str(),
            Some(i) if l[..i - 1].parse::<u64>().is_ok() && l.as_bytes()[i - 1] == b',' => &l[i..],
            _ => continue,
        };
        let Ok(Value::Object(m)) = serde_json::from_str::<Value>(body) else { continue };
        let Some(Value::String(bn)) = m.get("bn") else { continue };
        let bt = match m.get("bt") {
            Some(Value::Number(n)) => n.as_u64(),
            Some(Value::String(s)) if !s.starts_with('+') => s.parse::<u64>().ok(),
            _ => None,
        };
        let (Some(bt), Some(Value::Array(entries))) = (bt, m.get("e")) else { continue };
        if bn.is_empty() || bn.contains([',', '@', ';', '=']) {
            continue;
        }
        let mut readings = Vec::new();
        let mut ok = true;
        for e in entries {
            let Value::Object(e) = e else {
                ok = false;
                break;
            };
            let Some(v) = e.get("v") else { continue };
            let name = match e.get("n") {
                Some(Value::String(n)) if !n.is_empty() && !n.contains([',', '/', ';', '=']) => n,
                _ => {
                    ok = false;
                    break;
                }
            };
            let value = match v {
                Value::Number(n) => fixed(&n.to_string(), 3),
                Value::String(s) => fixed(s, 3),
                _ => None,
            };
            readings.push((name.clone(), value));
        }
        if ok {
            messages.push((bn.clone(), bt, readings));
        }
    }
    messages.sort_by_key(|m| m.1);
    for (bn, bt, readings) in &messages {
        let (bn, bt) = (bn.as_str(), *bt);
        let msg = format!("{bn}@{bt}");
        for (field, value) in readings.iter().cloned() {
            let key = format!("{bn}/{field}");
            let bounds = match field.as_str() {
                "temperature" => Some((-40_000, 60_000)),
                "humidity" => Some((0, 100_000)),
                "light" => Some((0, 10_000_000)),
                _ => None,
            };
            let valid = match (value, bounds) {
                (Some(v), Some((lo, hi))) => v >= lo && v <= hi,
                _ => true,
            };
            let r = range.entry(key.clone()).or_default();
            r.0 += 1;
            r.1 += u64::from(!valid);
            let value = if valid { value } else { None };
            let b = bloom.entry(key.clone()).or_default();
            if !known.contains(bn) {
                b.1 += 1;
                continue;
            }
            b.0 += 1;
            let (hist, filled) = recent.entry(key).or_default();
            let value = match value {
                Some(v) => {
                    hist.push_back(v);
                    if hist.len() > window {
                        hist.pop_front();
                    }
                    Some(v)
                }
                None if hist.is_empty() => None,
                None => {
                    *filled += 1;
                    let sum: i64 = hist.iter().sum();
                    Some(round_div(sum.into(), hist.len() as i128) as i64)
                }
            };
            if readings.len() != n_fields {
                continue;
            }
            let parts = joins.entry(msg.clone()).or_default();
            if parts.iter().any(|(f, _)| *f == field) {
                continue;
            }
            parts.push((field, value));
            if parts.len() == n_fields {
                let mut parts = joins.remove(&msg).unwrap_or_default();
                parts.sort_by(|a, b| a.0.cmp(&b.0));
                emit_etl_row(bn, bt, &parts, o);
            }
        }
    }
    for (k, (seen, out)) in range {
        o.set_state("filter_range", &k, json!({"seen": seen, "out_of_range": out}));
    }
    for (k, (passed, dropped)) in bloom {
        o.set_state("filter_bloom", &k, json!({"passed": passed, "dropped": dropped}));
    }
    for (k, (values, filled)) in recent {
        let state = json!({"values": values, "interpolated": filled, "pending": []});
        o.set_state("interpolation", &k, state);
    }
    for (msg, mut parts) in joins {
        parts.sort_by(|a, b| a.0.cmp(&b.0));
        let fields: String = parts
            .iter()
            .map(|(f, v)| format!("{f}={};", v.map(|v| show(v, 3)).unwrap_or_default()))
            .collect();
        o.set_state("join", &msg, json!({"fields": fields, "count": parts.len()}));
    }
}

/// Where a sensor is installed: `sensor-N` is in building `N mod 3 + 1`, floor
/// `N / 3 mod 5 + 1`, room `N mod 20 + 1` (the deployment's plan); any other name is unknown.
fn location(sensor: &str) -> String {
    let number = sensor
        .strip_prefix("sensor-")
        .filter(|d| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()))
        .and_then(|d| d.parse::<u64>().ok());
    match number {
        Some(i) => format!("building-{}/floor-{}/room-{}", i % 3 + 1, i / 3 % 5 + 1, i % 20 + 1),
        None => "unknown".to_owned(),
    }
}

fn emit_etl_row(bn: &str, bt: u64, parts: &[(String, Option<i64>)], o: &mut Outcome) {
    let location = location(bn);
    let pairs: Vec<String> = parts
        .iter()
        .map(|(f, v)| format!("{f}={}", v.map(|v| show(v, 3)).unwrap_or_default()))
        .collect();
    let mut entries: Vec<String> = parts
        .iter()
        .map(|(f, v)| match v {
            Some(v) => format!("{{\"n\":\"{f}\",\"v\":{}}}", show(*v, 3)),
            None => format!("{{\"n\":\"{f}\"}}"),
        })
        .collect();
    entries.push(format!("{{\"n\":\"location\",\"vs\":\"{location}\"}}"));
    let senml = format!("{{\"bn\":\"{bn}\",\"bt\":{bt},\"e\":[{}]}}", entries.join(","));
    o.sink("published", format!("etl/{bn}"), senml);
    o.sink(
        "stored",
        bn,
        format!("PartitionKey={bn};RowKey={bt};{};location={location}", pairs.join(";")),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_follow_the_deployment_plan() {
        assert_eq!(location("sensor-007"), "building-2/floor-3/room-8");
        assert_eq!(location("sensor-"), "unknown");
        assert_eq!(location("rogue-01"), "unknown");
    }
}
