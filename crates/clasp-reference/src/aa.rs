//! Advertisement analytics (YSB): events parsed with `serde_json`, tumbling windows per
//! campaign in ordered maps. Events come in time order, so none is late and every window is
//! emitted by the end of the input: in order of window, then campaign, as the watermark closes
//! them.

use crate::{Outcome, Params};
use clasp_apps::aa;
use serde_json::{Value, json};
use std::collections::BTreeMap;

pub(crate) fn expected(lines: &[String], p: &Params<'_>, o: &mut Outcome) {
    let campaigns = p.get("join", "campaigns", aa::CAMPAIGNS as f64) as usize;
    let per = p.get("join", "ads_per_campaign", aa::ADS_PER_CAMPAIGN as f64) as usize;
    let window = p.get("campaign", "window_ms", 10_000.0) as u64;
    let cat = aa::catalog(campaigns, per);
    let table: BTreeMap<&str, &str> =
        cat.ads.iter().map(|(ad, c)| (ad.as_str(), cat.campaigns[*c].as_str())).collect();
    // (window start, campaign) → events.
    let mut windows: BTreeMap<(u64, String), u64> = BTreeMap::new();
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
        *windows.entry((time / window * window, campaign.to_owned())).or_default() += 1;
    }
    for ((start, campaign), n) in windows {
        o.sink("window_counts", &campaign, format!("{start},{n}"));
    }
}
