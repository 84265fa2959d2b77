//! Advertisement analytics (YSB): events parsed with `serde_json`, tumbling windows per
//! campaign in ordered maps.

use crate::{Outcome, Params};
use clasp_apps::aa;
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub(crate) fn expected(lines: &[String], p: &Params<'_>, o: &mut Outcome) {
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
