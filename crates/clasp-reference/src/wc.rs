//! Word count: lower-cased alphanumeric runs, counted in an ordered map.

use crate::Outcome;
use serde_json::json;
use std::collections::BTreeMap;

pub(crate) fn expected(lines: &[String], o: &mut Outcome) {
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
