//! Independent single-threaded implementations of every application, for checking a run.
//!
//! Each function here recomputes an app from its input lines with plain, obviously correct
//! code — `String`s, `serde_json`, ordered maps — sharing nothing with the operators but the
//! apps' fixed data tables (the YSB ad table, the page catalog, the sensor list) and the
//! documented output formats. The result is an [`Outcome`]: the records every sink received
//! (as a multiset) and the final keyed state of every stateful operator, in the JSON that
//! state dumps use (`{"operator":…,"key":…,"value":…}` lines).
//!
//! A run of any engine — the local driver, or the distributed runtime on any number of
//! workers — is turned into an [`Outcome`] too ([`Outcome::add_sink`],
//! [`Outcome::add_state_line`], [`Outcome::from_driver`]) and checked with [`check`]:
//! sinks and state must be equal, and for windowed apps (AA, taxi-w3) the counts are also
//! compared window by window (emitted windows together with those still open in the state).
//!
//! Results that depend on the order in which a key's records arrive (SD's moving average,
//! PL's blocks of 1,000, ETL's interpolated values, which windows are already emitted) are
//! exact when every key's records arrive in input order, as in the local driver.
//! [`check_order_insensitive`] compares only what no reordering can change — use it for
//! parallel runs that do not keep per-key order.

use crate::{aa, etl, pl};
use clasp_core::Pipeline;
use clasp_core::local::LocalDriver;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// Per-source input lines: `(source name, lines)`.
pub type Inputs = [crate::inputs::SourceLines];

/// What a run produced, in comparable form.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Per sink, the `(key, value)` records received, sorted.
    pub sinks: BTreeMap<String, Vec<(String, String)>>,
    /// Per stateful operator, key → state value.
    pub state: BTreeMap<String, BTreeMap<String, Value>>,
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl Outcome {
    /// Records one sink record.
    pub fn add_sink(&mut self, sink: &str, key: &[u8], value: &[u8]) {
        let v = self.sinks.entry(sink.to_owned()).or_default();
        let rec = (text(key), text(value));
        let at = v.partition_point(|r| *r <= rec);
        v.insert(at, rec);
    }

    /// Records one line of a state dump (`{"operator":…,"key":…,"value":…}`).
    pub fn add_state_line(&mut self, line: &str) -> Result<(), String> {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("bad state line: {e}"))?;
        let op = v["operator"].as_str().ok_or("state line without operator")?;
        let key = v["key"].as_str().ok_or("state line without key")?;
        self.set_state(op, key, v["value"].clone());
        Ok(())
    }

    fn set_state(&mut self, op: &str, key: &str, value: Value) {
        self.state.entry(op.to_owned()).or_default().insert(key.to_owned(), value);
    }

    /// The sinks and final state of a local run.
    pub fn from_driver(d: &LocalDriver) -> Result<Outcome, String> {
        let mut o = Outcome::default();
        let p = d.pipeline();
        for s in &p.sinks {
            o.sinks.entry(s.name.clone()).or_default();
            for r in d.sink_records(s.id) {
                o.add_sink(&s.name, r.key, r.value);
            }
        }
        for op in &p.operators {
            if d.keeps_state(op.id) {
                o.state.entry(op.name.clone()).or_default();
            }
        }
        let mut dump = Vec::new();
        d.dump_state(&mut dump).map_err(|e| e.to_string())?;
        for line in String::from_utf8_lossy(&dump).lines() {
            o.add_state_line(line)?;
        }
        Ok(o)
    }

    fn sink(&mut self, sink: &str, key: impl Into<String>, value: impl Into<String>) {
        self.add_sink(sink, key.into().as_bytes(), value.into().as_bytes());
    }
}

/// The expected outcome of `app` (whose spec is `p`, for its parameters) on `inputs`.
pub fn expected(app: &str, p: &Pipeline, inputs: &Inputs) -> Result<Outcome, String> {
    let lines = |source: &str| -> Result<Vec<String>, String> {
        inputs
            .iter()
            .find(|(s, _)| s == source)
            .map(|(_, ls)| ls.iter().map(|l| text(l)).collect())
            .ok_or_else(|| format!("no input for source `{source}`"))
    };
    let params = Params(p);
    let mut o = Outcome::default();
    for s in &p.sinks {
        o.sinks.entry(s.name.clone()).or_default();
    }
    for op in p.operators.iter().filter(|op| op.stateful) {
        o.state.entry(op.name.clone()).or_default();
    }
    match app {
        "wc" => word_count(&lines("lines")?, &mut o),
        // SYN forwards records to no sink and keeps no state: nothing to expect.
        "syn" => {}
        "sd" => spike_detection(&lines("readings")?, &params, &mut o),
        "aa" => ad_analytics(&lines("events")?, &params, &mut o),
        "pl" => page_load(&lines("page_loads")?, &params, &mut o),
        "nwm" => network_monitor(&lines("logins")?, &params, &mut o),
        "etl" => extract_transform_load(&lines("senml")?, &params, &mut o),
        "taxi-w1" => taxi_w1(&lines("rides")?, &params, &mut o),
        "taxi-w2" => taxi_w2(&lines("rides")?, &lines("fares")?, &params, &mut o),
        "taxi-w3" => taxi_w3(&lines("rides")?, &params, &mut o),
        _ => return Err(format!("no reference for `{app}`")),
    }
    Ok(o)
}

/// Reads `[operator.params]` of the spec by operator name.
struct Params<'a>(&'a Pipeline);

impl Params<'_> {
    fn get(&self, op: &str, name: &str, default: f64) -> f64 {
        self.0
            .operators
            .iter()
            .find(|o| o.name == op)
            .and_then(|o| o.params.get(name))
            .and_then(Value::as_f64)
            .unwrap_or(default)
    }
}

/// A plain decimal as an integer scaled by 10^decimals, rounded half away from zero.
fn fixed(s: &str, decimals: usize) -> Option<i64> {
    let s = s.trim_start_matches('+');
    let (neg, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (int, frac) = s.split_once('.').unwrap_or((s, ""));
    let digits = |t: &str| t.chars().all(|c| c.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits(int) || !digits(frac) || int.len() > 16 {
        return None;
    }
    let mut padded: String = frac.chars().take(decimals).collect();
    while padded.len() < decimals {
        padded.push('0');
    }
    let mut v: i64 = format!("{}{padded}", if int.is_empty() { "0" } else { int }).parse().ok()?;
    if frac.len() > decimals && frac.as_bytes()[decimals] >= b'5' {
        v += 1;
    }
    // Operators refuse magnitudes above 2^53 so that sums cannot overflow.
    if v > 1 << 53 {
        return None;
    }
    Some(if neg { -v } else { v })
}

/// `v / 10^decimals` written with exactly `decimals` decimals.
fn show(v: i64, decimals: u32) -> String {
    let scale = 10i64.pow(decimals);
    let sign = if v < 0 { "-" } else { "" };
    let a = v.abs();
    if decimals == 0 {
        return format!("{v}");
    }
    format!("{sign}{}.{:0width$}", a / scale, a % scale, width = decimals as usize)
}

/// Integer division rounded half away from zero.
fn round_div(n: i128, d: i128) -> i128 {
    let q = (n.abs() * 2 + d) / (2 * d);
    if n < 0 { -q } else { q }
}

fn word_count(lines: &[String], o: &mut Outcome) {
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for l in lines {
        for w in l.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
            *counts.entry(w.to_lowercase()).or_default() += 1;
        }
    }
    for (w, n) in counts {
        o.set_state("count", &w, json!(n));
    }
}

fn spike_detection(lines: &[String], p: &Params<'_>, o: &mut Outcome) {
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

fn ad_analytics(lines: &[String], p: &Params<'_>, o: &mut Outcome) {
    let campaigns = p.get("join", "campaigns", aa::CAMPAIGNS as f64) as usize;
    let per = p.get("join", "ads_per_campaign", aa::ADS_PER_CAMPAIGN as f64) as usize;
    let window = p.get("campaign", "window_ms", 10_000.0) as u64;
    let lateness = p.get("campaign", "lateness_ms", window as f64) as u64;
    let cat = aa::catalog(campaigns, per);
    let table: BTreeMap<&str, &str> =
        cat.ads.iter().map(|(ad, c)| (ad.as_str(), cat.campaigns[*c].as_str())).collect();
    struct Windows {
        open: BTreeMap<u64, u64>,
        watermark: u64,
        late: u64,
    }
    let mut per_campaign: BTreeMap<String, Windows> = BTreeMap::new();
    for l in lines {
        let Ok(Value::Object(ev)) = serde_json::from_str::<Value>(l) else { continue };
        let field = |name: &str| match ev.get(name) {
            Some(Value::String(s)) if !s.contains('\t') => Some(s.clone()),
            Some(Value::Number(n)) if name == "event_time" => Some(n.to_string()),
            _ => None,
        };
        let all: Option<Vec<String>> = aa::FIELDS.iter().map(|f| field(f)).collect();
        let Some(all) = all else { continue };
        let Ok(time) = all[5].parse::<u64>() else { continue };
        if all[5].starts_with('+') || all[4] != "view" {
            continue;
        }
        let Some(&campaign) = table.get(all[2].as_str()) else { continue };
        o.set_state("join", &all[2], json!(campaign));
        let w = per_campaign.entry(campaign.to_owned()).or_insert(Windows {
            open: BTreeMap::new(),
            watermark: 0,
            late: 0,
        });
        let start = time / window * window;
        if start + window + lateness <= w.watermark {
            w.late += 1;
            continue;
        }
        *w.open.entry(start).or_default() += 1;
        w.watermark = w.watermark.max(time);
        let closed: Vec<u64> =
            w.open.keys().copied().filter(|s| s + window + lateness <= w.watermark).collect();
        for s in closed {
            let n = w.open.remove(&s).unwrap_or(0);
            o.sink("window_counts", campaign, format!("{s},{n}"));
        }
    }
    for (c, w) in per_campaign {
        let windows: Vec<Value> = w.open.iter().map(|(s, n)| json!([s, n])).collect();
        o.set_state(
            "campaign",
            &c,
            json!({"windows": windows, "watermark": w.watermark, "late": w.late}),
        );
    }
}

fn page_load(lines: &[String], p: &Params<'_>, o: &mut Outcome) {
    let max_ms = p.get("filter", "max_load_ms", 90.0) as u64;
    let every = p.get("aggregation", "reset_every", 1000.0) as u64;
    let mut cats: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        if f.len() != 3 || f[0].is_empty() || f[1].is_empty() {
            continue;
        }
        let Ok(ms) = f[2].parse::<u64>() else { continue };
        if f[2].starts_with('+') {
            continue;
        }
        let url = f[0];
        let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"));
        let Some(rest) = rest else { continue };
        let path = rest.find('/').map_or("", |i| &rest[i..]);
        if path == "/healthz" || path.starts_with("/static/") {
            continue;
        }
        let Some(path) = url.strip_prefix(pl::SITE) else { continue };
        let Some((_, cat)) = pl::PAGES.iter().find(|(pg, _)| *pg == path) else { continue };
        if ms > max_ms {
            continue;
        }
        let (count, sum, blocks) = cats.entry((*cat).to_owned()).or_default();
        *count += 1;
        *sum += ms;
        if *count == every {
            *blocks += 1;
            let mean = round_div(i128::from(*sum) * 1000, i128::from(*count)) as i64;
            o.sink("category_means", *cat, format!("{cat},{blocks},{}", show(mean, 3)));
            (*count, *sum) = (0, 0);
        }
    }
    for (c, (count, sum, blocks)) in cats {
        o.set_state("aggregation", &c, json!({"count": count, "sum": sum, "blocks": blocks}));
    }
}

fn network_monitor(lines: &[String], p: &Params<'_>, o: &mut Outcome) {
    let min = p.get("filter", "min_failures", 3.0) as u64;
    let keep = |op: &str| p.get(op, "days_kept", 3.0) as usize;
    // host → day → (failures, successes)
    let mut days: BTreeMap<String, BTreeMap<u64, (u64, u64)>> = BTreeMap::new();
    for l in lines {
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        if f.len() != 4 || f[1].is_empty() {
            continue;
        }
        let Ok(day) = f[0].parse::<u32>() else { continue };
        if f[0].starts_with('+') {
            continue;
        }
        let e = days.entry(f[1].to_owned()).or_default().entry(day.into()).or_default();
        match f[3] {
            "failure" => e.0 += 1,
            "success" => e.1 += 1,
            _ => {}
        }
    }
    for (host, per_day) in &days {
        let last = |n: usize, pick: &dyn Fn(&(u64, u64)) -> Option<Value>| -> Vec<Value> {
            let v: Vec<Value> =
                per_day.iter().filter_map(|(d, c)| pick(c).map(|x| json!([d, x]))).collect();
            v[v.len().saturating_sub(n)..].to_vec()
        };
        let failures = last(keep("aggregation"), &|c| (c.0 > 0).then(|| json!(c.0)));
        if !failures.is_empty() {
            o.set_state("aggregation", host, json!({"days": failures, "late": 0}));
        }
        let flagged = last(keep("functor"), &|c| (c.0 >= min).then_some(json!(true)));
        if !flagged.is_empty() {
            o.set_state("functor", host, json!({"days": flagged, "late": 0}));
        }
        let pairing = |c: &(u64, u64)| {
            let (s, f) = (c.1 > 0, c.0 >= min);
            (s || f).then(|| json!({"success": s, "flagged": f, "locked": s && f}))
        };
        let joined = last(keep("join"), &pairing);
        if !joined.is_empty() {
            o.set_state("join", host, json!({"days": joined, "late": 0}));
        }
        for (d, c) in per_day {
            if c.1 > 0 && c.0 >= min {
                o.sink("locked_hosts", host.clone(), d.to_string());
            }
        }
    }
}

fn extract_transform_load(lines: &[String], p: &Params<'_>, o: &mut Outcome) {
    let sensors = p.get("filter_bloom", "sensors", etl::SENSORS as f64) as u64;
    let window = p.get("interpolation", "window", 5.0) as usize;
    let n_fields = p.get("join", "fields", 3.0) as usize;
    let known: BTreeSet<String> = (0..sensors).map(etl::sensor_name).collect();
    let mut range: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut bloom: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut recent: BTreeMap<String, (VecDeque<i64>, u64)> = BTreeMap::new();
    let mut joins: BTreeMap<String, Vec<(String, Option<i64>)>> = BTreeMap::new();
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
        if !ok {
            continue;
        }
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
            if !known.contains(bn.as_str()) {
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
        o.set_state("interpolation", &k, json!({"values": values, "interpolated": filled}));
    }
    for (msg, parts) in joins {
        let fields: String = parts
            .iter()
            .map(|(f, v)| format!("{f}={};", v.map(|v| show(v, 3)).unwrap_or_default()))
            .collect();
        o.set_state("join", &msg, json!({"fields": fields, "count": parts.len()}));
    }
}

fn emit_etl_row(bn: &str, bt: u64, parts: &[(String, Option<i64>)], o: &mut Outcome) {
    let location = etl::location(bn.as_bytes());
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

/// A TaxiRide line, parsed independently of the operators.
#[derive(Clone, Debug)]
struct RideRow {
    id: String,
    start_event: bool,
    start: i64,
    end: i64,
    /// µ°: start lon, start lat, end lon, end lat.
    at: [i64; 4],
    passengers: u64,
}

fn unix_time(s: &str) -> Option<i64> {
    let (date, time) = s.trim().split_once(' ')?;
    let d: Vec<i64> = date.split('-').map(|x| x.parse().ok()).collect::<Option<_>>()?;
    let t: Vec<i64> = time.split(':').map(|x| x.parse().ok()).collect::<Option<_>>()?;
    if d.len() != 3 || t.len() != 3 || date.len() != 10 || time.len() != 8 {
        return None;
    }
    if !(1..=12).contains(&d[1]) || !(1..=31).contains(&d[2]) || t[0] > 23 || t[1] > 59 || t[2] > 60
    {
        return None;
    }
    // Days since the epoch by counting: years, then months of the year.
    let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let mut days: i64 = (1970..d[0]).map(|y| if leap(y) { 366 } else { 365 }).sum();
    let months = [31, if leap(d[0]) { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    days += months[..(d[1] - 1) as usize].iter().sum::<i64>() + d[2] - 1;
    Some(days * 86_400 + t[0] * 3600 + t[1] * 60 + t[2])
}

fn ride_row(l: &str) -> Option<RideRow> {
    let f: Vec<&str> = l.split(',').map(str::trim).collect();
    if f.len() != 11 || f[0].parse::<u64>().is_err() || f[0].starts_with('+') {
        return None;
    }
    let start_event = match f[1] {
        "START" => true,
        "END" => false,
        _ => return None,
    };
    let c = |s: &str| fixed(s, 6);
    Some(RideRow {
        id: f[0].to_owned(),
        start_event,
        start: unix_time(f[2])?,
        end: unix_time(f[3])?,
        at: [c(f[4])?, c(f[5])?, c(f[6])?, c(f[7])?],
        passengers: if f[8].starts_with('+') { return None } else { f[8].parse().ok()? },
    })
}

fn in_nyc(lon: i64, lat: i64) -> bool {
    (-74_050_000..=-73_700_000).contains(&lon) && (40_500_000..=41_000_000).contains(&lat)
}

fn taxi_w1(lines: &[String], p: &Params<'_>, o: &mut Outcome) {
    let max_s = p.get("filter_duration", "max_duration_min", 120.0) as i64 * 60;
    for l in lines {
        let Some(r) = ride_row(l) else { continue };
        let d = r.end - r.start;
        if !r.start_event && in_nyc(r.at[0], r.at[1]) && d > 0 && d <= max_s {
            o.sink("kafka", r.id.clone(), l.clone());
        }
    }
}

fn fare_fields(l: &str) -> Option<(String, String, i64, i64, i64)> {
    let f: Vec<&str> = l.split(',').map(str::trim).collect();
    if f.len() != 8
        || f[0].parse::<u64>().is_err()
        || f[0].starts_with('+')
        || unix_time(f[3]).is_none()
    {
        return None;
    }
    Some((f[0].to_owned(), f[4].to_owned(), fixed(f[5], 2)?, fixed(f[6], 2)?, fixed(f[7], 2)?))
}

fn taxi_w2(rides: &[String], fares: &[String], p: &Params<'_>, o: &mut Outcome) {
    let from = p.get("filter_night", "night_start_h", 20.0) as i64;
    let to = p.get("filter_night", "night_end_h", 6.0) as i64;
    let night = |t: i64| {
        let h = t.rem_euclid(86_400) / 3600;
        if from <= to { h >= from && h < to } else { h >= from || h < to }
    };
    let mut kept_rides: BTreeMap<String, String> = BTreeMap::new();
    for l in rides {
        let Some(r) = ride_row(l) else { continue };
        let zero = |i: usize| r.at[i] == 0 && r.at[i + 1] == 0;
        let wellformed = r.start_event && r.passengers > 0 && !zero(0) && !zero(2);
        if wellformed && in_nyc(r.at[0], r.at[1]) && in_nyc(r.at[2], r.at[3]) && night(r.start) {
            kept_rides.insert(r.id, l.clone());
        }
    }
    let mut kept_fares: BTreeMap<String, String> = BTreeMap::new();
    for l in fares {
        let Some((id, pay, tip, tolls, total)) = fare_fields(l) else { continue };
        if total > 0 && tip >= 0 && tolls >= 0 {
            let v = format!("{pay},{},{},{}", show(tip, 2), show(tolls, 2), show(total, 2));
            kept_fares.insert(id, v);
        }
    }
    let ids: BTreeSet<&String> = kept_rides.keys().chain(kept_fares.keys()).collect();
    for id in ids {
        match (kept_rides.get(id), kept_fares.get(id)) {
            (Some(r), Some(f)) => o.sink("kafka", id.clone(), format!("{r},{f}")),
            (r, f) => o.set_state("join", id, json!({"ride": r, "fare": f})),
        }
    }
}

fn taxi_w3(lines: &[String], p: &Params<'_>, o: &mut Outcome) {
    let slide = p.get("window", "slide_min", 5.0) as i64 * 60;
    let panes = p.get("window", "size_min", 15.0) as i64 * 60 / slide;
    let lateness = p.get("window", "lateness_min", slide as f64 / 60.0) as i64 * 60;
    let min = p.get("filter_popular", "min_count", 20.0) as u64;
    struct Cell {
        panes: BTreeMap<i64, (u64, u64)>,
        watermark: i64,
        through: Option<i64>,
        late: u64,
    }
    let mut cells: BTreeMap<i64, Cell> = BTreeMap::new();
    for l in lines {
        let Some(r) = ride_row(l) else { continue };
        if !(in_nyc(r.at[0], r.at[1]) && in_nyc(r.at[2], r.at[3])) {
            continue;
        }
        let (lon, lat, t) =
            if r.start_event { (r.at[0], r.at[1], r.start) } else { (r.at[2], r.at[3], r.end) };
        let id = (lon + 74_050_000) / 1400 + (41_000_000 - lat) / 1250 * 250;
        let c = cells.entry(id).or_insert(Cell {
            panes: BTreeMap::new(),
            watermark: 0,
            through: None,
            late: 0,
        });
        let pane = t.div_euclid(slide);
        if c.through.is_some_and(|e| pane <= e) {
            c.late += 1;
            continue;
        }
        let e = c.panes.entry(pane).or_default();
        if r.start_event {
            e.0 += 1;
        } else {
            e.1 += 1;
        }
        c.watermark = c.watermark.max(t);
        let through = (c.watermark - lateness).div_euclid(slide) - 1;
        if c.through.is_some_and(|e| through <= e) {
            continue;
        }
        // Every window ending after the previous `through` and by the new one, with data.
        let after = c.through.unwrap_or(i64::MIN);
        let lasts: BTreeSet<i64> = c
            .panes
            .keys()
            .flat_map(|p| (0..panes).map(move |d| p + d))
            .filter(|q| *q > after && *q <= through)
            .collect();
        for q in lasts {
            let (dep, arr) =
                c.panes.range(q - panes + 1..=q).fold((0, 0), |a, (_, n)| (a.0 + n.0, a.1 + n.1));
            let (lon_c, lat_c) =
                (-74_050_000 + (id % 250) * 1400 + 700, 41_000_000 - (id / 250) * 1250 - 625);
            for (n, dir) in [(dep, "departing"), (arr, "arriving")] {
                if n >= min && n > 0 {
                    let v = format!(
                        "{},{},{},{dir},{n}",
                        show(lon_c, 6),
                        show(lat_c, 6),
                        (q + 1) * slide
                    );
                    o.sink("popular_areas", id.to_string(), v);
                }
            }
        }
        c.through = Some(through);
        c.panes.retain(|p, _| *p >= through - panes + 2);
    }
    for (id, c) in cells {
        let panes: Vec<Value> = c.panes.iter().map(|(p, n)| json!([p, n.0, n.1])).collect();
        o.set_state(
            "window",
            &id.to_string(),
            json!({"panes": panes, "watermark": c.watermark, "emitted_through": c.through, "late": c.late}),
        );
    }
}

/// Describes the first few differences between two sorted record lists.
fn diff_records(what: &str, e: &[(String, String)], a: &[(String, String)]) -> Option<String> {
    if e == a {
        return None;
    }
    let missing: Vec<_> = multiset_minus(e, a);
    let extra: Vec<_> = multiset_minus(a, e);
    Some(format!(
        "{what}: expected {} records, got {}; missing {:?}; unexpected {:?}",
        e.len(),
        a.len(),
        &missing[..missing.len().min(5)],
        &extra[..extra.len().min(5)]
    ))
}

fn multiset_minus<'a>(
    a: &'a [(String, String)],
    b: &[(String, String)],
) -> Vec<&'a (String, String)> {
    let mut counts: BTreeMap<&(String, String), i64> = BTreeMap::new();
    for r in b {
        *counts.entry(r).or_default() += 1;
    }
    a.iter()
        .filter(|r| {
            let c = counts.entry(r).or_default();
            *c -= 1;
            *c < 0
        })
        .collect()
}

fn diff_state(
    op: &str,
    e: &BTreeMap<String, Value>,
    a: &BTreeMap<String, Value>,
) -> Option<String> {
    if e == a {
        return None;
    }
    let mut lines = vec![format!("state of `{op}`: expected {} keys, got {}", e.len(), a.len())];
    let keys: BTreeSet<&String> = e.keys().chain(a.keys()).collect();
    for k in keys.into_iter().filter(|k| e.get(*k) != a.get(*k)).take(5) {
        lines.push(format!("  key {k:?}: expected {:?}, got {:?}", e.get(k), a.get(k)));
    }
    Some(lines.join("\n"))
}

/// Checks `actual` against `expected`: every sink's records and every stateful operator's
/// state must be equal; for AA and taxi-w3 the window counts are also compared window by
/// window. The error lists the first differences.
pub fn check(app: &str, p: &Pipeline, expected: &Outcome, actual: &Outcome) -> Result<(), String> {
    let mut problems = Vec::new();
    if let Some(e) = windows(app, p, expected) {
        let a = windows(app, p, actual).unwrap_or_default();
        if let Some(d) = diff_windows(&e, &a) {
            problems.push(d);
        }
    }
    let sinks: BTreeSet<&String> = expected.sinks.keys().chain(actual.sinks.keys()).collect();
    for s in sinks {
        let none = Vec::new();
        let (e, a) = (expected.sinks.get(s).unwrap_or(&none), actual.sinks.get(s).unwrap_or(&none));
        problems.extend(diff_records(&format!("sink `{s}`"), e, a));
    }
    let ops: BTreeSet<&String> = expected.state.keys().chain(actual.state.keys()).collect();
    for op in ops {
        let none = BTreeMap::new();
        let (e, a) =
            (expected.state.get(op).unwrap_or(&none), actual.state.get(op).unwrap_or(&none));
        problems.extend(diff_state(op, e, a));
    }
    if problems.is_empty() { Ok(()) } else { Err(problems.join("\n")) }
}

/// A window's identity: `(key, window start or end, direction)` → count.
pub type Windows = BTreeMap<(String, i64, String), u64>;

/// Every window of a windowed app with its count: the windows emitted to the sink together
/// with those still open in the final state. `None` for apps without windows.
///
/// For AA the sink carries every emitted window; for taxi-w3 the sink carries only popular
/// windows, so the per-window view is rebuilt from the counts of emitted popular windows and
/// the open panes, and compared on the windows the filter lets through.
pub fn windows(app: &str, p: &Pipeline, o: &Outcome) -> Option<Windows> {
    let mut w = Windows::new();
    match app {
        "aa" => {
            for (k, v) in o.sinks.get("window_counts").into_iter().flatten() {
                let (start, n) = v.split_once(',')?;
                *w.entry((k.clone(), start.parse().ok()?, String::new())).or_default() +=
                    n.parse::<u64>().ok()?;
            }
            for (k, s) in o.state.get("campaign").into_iter().flatten() {
                for pair in s["windows"].as_array()? {
                    let (start, n) = (pair[0].as_i64()?, pair[1].as_u64()?);
                    *w.entry((k.clone(), start, String::new())).or_default() += n;
                }
            }
        }
        "taxi-w3" => {
            let params = Params(p);
            let slide = params.get("window", "slide_min", 5.0) as i64 * 60;
            let panes = params.get("window", "size_min", 15.0) as i64 * 60 / slide;
            let min = params.get("filter_popular", "min_count", 20.0) as u64;
            for (k, v) in o.sinks.get("popular_areas").into_iter().flatten() {
                let f: Vec<&str> = v.split(',').collect();
                let (end, dir, n) =
                    (f.get(2)?.parse().ok()?, f.get(3)?, f.get(4)?.parse::<u64>().ok()?);
                *w.entry((k.clone(), end, (*dir).to_owned())).or_default() += n;
            }
            for (k, s) in o.state.get("window").into_iter().flatten() {
                let open: Vec<(i64, u64, u64)> = s["panes"]
                    .as_array()?
                    .iter()
                    .filter_map(|x| Some((x[0].as_i64()?, x[1].as_u64()?, x[2].as_u64()?)))
                    .collect();
                let through = s["emitted_through"].as_i64().unwrap_or(i64::MIN);
                let lasts: BTreeSet<i64> = open
                    .iter()
                    .flat_map(|x| (0..panes).map(move |d| x.0 + d))
                    .filter(|q| *q > through)
                    .collect();
                for q in lasts {
                    let (dep, arr) = open
                        .iter()
                        .filter(|x| x.0 > q - panes && x.0 <= q)
                        .fold((0, 0), |a, x| (a.0 + x.1, a.1 + x.2));
                    for (n, dir) in [(dep, "departing"), (arr, "arriving")] {
                        if n >= min && n > 0 {
                            *w.entry((k.clone(), (q + 1) * slide, dir.to_owned())).or_default() +=
                                n;
                        }
                    }
                }
            }
        }
        _ => return None,
    }
    Some(w)
}

fn diff_windows(e: &Windows, a: &Windows) -> Option<String> {
    if e == a {
        return None;
    }
    let keys: BTreeSet<_> = e.keys().chain(a.keys()).collect();
    let bad: Vec<String> = keys
        .into_iter()
        .filter(|k| e.get(*k) != a.get(*k))
        .take(5)
        .map(|k| format!("{k:?}: expected {:?}, got {:?}", e.get(k), a.get(k)))
        .collect();
    Some(format!("windows differ ({} expected, {} got): {}", e.len(), a.len(), bad.join("; ")))
}

/// Checks what no reordering of a key's records can change: WC, NWM, taxi-w1 and taxi-w2
/// exactly; AA and taxi-w3 window by window (and no late events); SD readings per sensor;
/// PL records and blocks per category; ETL the range and Bloom filter counts, completed
/// messages per sink key, and the join's leftovers.
pub fn check_order_insensitive(
    app: &str,
    p: &Pipeline,
    expected: &Outcome,
    actual: &Outcome,
) -> Result<(), String> {
    let state = |o: &Outcome, op: &str| o.state.get(op).cloned().unwrap_or_default();
    let project = |o: &Outcome, op: &str, fields: &[&str]| -> BTreeMap<String, Value> {
        state(o, op)
            .into_iter()
            .map(|(k, v)| (k, Value::Array(fields.iter().map(|f| v[*f].clone()).collect())))
            .collect()
    };
    let same = |what: &str, e: BTreeMap<String, Value>, a: BTreeMap<String, Value>| {
        diff_state(what, &e, &a).map_or(Ok(()), Err)
    };
    match app {
        "wc" | "nwm" | "taxi-w1" | "taxi-w2" | "syn" => check(app, p, expected, actual),
        "aa" | "taxi-w3" => {
            let (e, a) = (windows(app, p, expected), windows(app, p, actual));
            if let Some(d) = diff_windows(&e.unwrap_or_default(), &a.unwrap_or_default()) {
                return Err(d);
            }
            let op = if app == "aa" { "campaign" } else { "window" };
            let late: u64 = state(actual, op).values().filter_map(|v| v["late"].as_u64()).sum();
            if late > 0 {
                return Err(format!("{late} late events: raise the lateness parameter"));
            }
            if app == "aa" {
                same("join", state(expected, "join"), state(actual, "join"))
            } else {
                Ok(())
            }
        }
        "sd" => same(
            "moving_avg",
            project(expected, "moving_avg", &["seen"]),
            project(actual, "moving_avg", &["seen"]),
        ),
        "pl" => {
            let totals = |o: &Outcome| -> BTreeMap<String, Value> {
                state(o, "aggregation")
                    .into_iter()
                    .map(|(k, v)| {
                        let blocks = v["blocks"].as_u64().unwrap_or(0);
                        let emitted = o
                            .sinks
                            .get("category_means")
                            .map_or(0, |s| s.iter().filter(|r| r.0 == k).count() as u64);
                        (k, json!([v["count"], blocks, emitted]))
                    })
                    .collect()
            };
            same("aggregation", totals(expected), totals(actual))
        }
        "etl" => {
            same("filter_range", state(expected, "filter_range"), state(actual, "filter_range"))?;
            same("filter_bloom", state(expected, "filter_bloom"), state(actual, "filter_bloom"))?;
            let per_key = |o: &Outcome, sink: &str| -> BTreeMap<String, Value> {
                let mut m: BTreeMap<String, u64> = BTreeMap::new();
                for (k, _) in o.sinks.get(sink).into_iter().flatten() {
                    *m.entry(k.clone()).or_default() += 1;
                }
                m.into_iter().map(|(k, n)| (k, json!(n))).collect()
            };
            for sink in ["published", "stored"] {
                same(sink, per_key(expected, sink), per_key(actual, sink))?;
            }
            same("join", project(expected, "join", &["count"]), project(actual, "join", &["count"]))
        }
        _ => Err(format!("no reference for `{app}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helpers_match_their_definitions() {
        assert_eq!(fixed("12.3456", 4), Some(123_456));
        assert_eq!(fixed("-1.23455", 4), Some(-12_346));
        assert_eq!(fixed(".5", 1), Some(5));
        assert_eq!(fixed("1e3", 1), None);
        assert_eq!(show(-1_234, 3), "-1.234");
        assert_eq!(show(5, 2), "0.05");
        assert_eq!(round_div(7, 2), 4);
        assert_eq!(round_div(-7, 2), -4);
        assert_eq!(unix_time("2013-01-01 12:00:00"), Some(1_357_041_600));
        assert_eq!(unix_time("2000-03-01 00:00:00"), Some(951_868_800));
    }
}
