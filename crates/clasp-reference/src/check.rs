//! Comparing a run's outcome with the expected one: exactly, window by window, or only in
//! what no reordering of a key's records can change.

use crate::{Outcome, Params};
use clasp_core::Pipeline;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

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

/// Checks what no reordering of a key's records can change: WC, NWM, SD, ETL and the taxi
/// workflows exactly (SD's and ETL's per-key windows and taxi-w3's sliding windows follow
/// event time, not arrival); AA window by window and its join; PL records and blocks per
/// category.
pub fn check_order_insensitive(
    app: &str,
    p: &Pipeline,
    expected: &Outcome,
    actual: &Outcome,
) -> Result<(), String> {
    let state = |o: &Outcome, op: &str| o.state.get(op).cloned().unwrap_or_default();
    let same = |what: &str, e: BTreeMap<String, Value>, a: BTreeMap<String, Value>| {
        diff_state(what, &e, &a).map_or(Ok(()), Err)
    };
    match app {
        "wc" | "nwm" | "sd" | "etl" | "taxi-w1" | "taxi-w2" | "taxi-w3" | "syn" => {
            check(app, p, expected, actual)
        }
        "aa" => {
            let (e, a) = (windows(app, p, expected), windows(app, p, actual));
            if let Some(d) = diff_windows(&e.unwrap_or_default(), &a.unwrap_or_default()) {
                return Err(d);
            }
            same("join", state(expected, "join"), state(actual, "join"))
        }
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
        _ => Err(format!("no reference for `{app}`")),
    }
}
