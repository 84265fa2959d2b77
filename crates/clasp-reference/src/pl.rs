//! Page load: per-category sums over blocks of records.

use crate::numbers::{round_div, show};
use crate::{Outcome, Params};
use clasp_apps::pl;
use serde_json::json;
use std::collections::BTreeMap;

pub(crate) fn expected(lines: &[String], p: &Params<'_>, o: &mut Outcome) {
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
