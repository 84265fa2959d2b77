//! Network monitoring: failures and successes per host and day; once the input ended every
//! day is closed and the last `days_kept` days of each host stay in state.

use crate::{Outcome, Params};
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub(crate) fn expected(lines: &[String], p: &Params<'_>, o: &mut Outcome) {
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
            o.set_state("aggregation", host, json!({"days": failures}));
        }
        let flagged = last(keep("functor"), &|c| (c.0 >= min).then_some(json!(true)));
        if !flagged.is_empty() {
            o.set_state("functor", host, json!({"days": flagged}));
        }
        let pairing = |c: &(u64, u64)| {
            let (s, f) = (c.1 > 0, c.0 >= min);
            (s || f).then(|| json!({"success": s, "flagged": f, "locked": s && f}))
        };
        let joined = last(keep("join"), &pairing);
        if !joined.is_empty() {
            o.set_state("join", host, json!({"days": joined}));
        }
        for (d, c) in per_day {
            if c.1 > 0 && c.0 >= min {
                o.sink("locked_hosts", host.clone(), d.to_string());
            }
        }
    }
}
