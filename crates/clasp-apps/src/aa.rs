//! Advertisement analytics: the Yahoo streaming benchmark (CLASP Fig. 1, app 3).
//!
//! Input: YSB JSON events `{"user_id", "page_id", "ad_id", "ad_type", "event_type",
//! "event_time", "ip_address"}` with `event_time` in milliseconds (a string, as YSB writes
//! it, or a number).
//!
//! - `aa.deserialize`: JSON → the seven fields, tab-separated, in the order above.
//! - `aa.filter_views`: keeps `event_type == "view"` (one in three events).
//! - `aa.projection`: keeps `ad_id` (the record key) and `event_time` (the value).
//! - `aa.join_campaign` (stateful by ad; params `campaigns`, `ads_per_campaign`): looks the
//!   ad up in the ad → campaign table and keeps the answer in state, as YSB's engines cache
//!   their Redis lookups; emits key `campaign_id`, value `event_time`. Unknown ads are rejected.
//! - `aa.campaign_count` (stateful by campaign; param `window_ms`, default 10 000): counts
//!   events per campaign in tumbling event-time windows. A window `[s, s + window_ms)` is
//!   emitted as `s,count` by an event-time timer once the watermark passes its end (plus the
//!   operator's `allowed_lateness`), and then dropped, whether or not the campaign sees
//!   another event. Events later than that are counted as `late` by the runtime.
//!
//! The source reads each event's `event_time` as its event time (`aa.time`); the maps, the
//! filter and the join pass it on.
//!
//! The default window is YSB's own: the benchmark's `time_divisor` is 10 s, and its latency
//! metric is defined relative to the end of 10 s windows, so results stay comparable to
//! published YSB numbers. One window's lateness tolerates the reordering of a parallel run.

use crate::json::{Member, Object, Scalar, Text, scalar};
use crate::text::{Buf, Params, fields, parse_u64};
use clasp_core::rng::{SeededRng, independent_stream};
use clasp_core::time::{Timer, TimerUse};
use clasp_core::{Batch, Context, Operator, Registry};
use rand::{Rng, RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// Campaigns in YSB.
pub const CAMPAIGNS: usize = 100;
/// Ads per campaign in YSB.
pub const ADS_PER_CAMPAIGN: usize = 10;
/// The YSB event fields, in output order.
pub const FIELDS: [&str; 7] =
    ["user_id", "page_id", "ad_id", "ad_type", "event_type", "event_time", "ip_address"];
/// YSB's ad types.
pub const AD_TYPES: [&str; 5] = ["banner", "modal", "sponsored-search", "mail", "mobile"];
/// YSB's event types.
pub const EVENT_TYPES: [&str; 3] = ["view", "click", "purchase"];

/// The ad → campaign table is fixed (not drawn from the data seed), so that the join and
/// every generated input agree on it, as they share YSB's Redis table.
const CATALOG_SEED: u64 = 0x5953_4243;

/// A UUID-formatted id drawn from `rng`.
pub fn uuid(rng: &mut SeededRng) -> String {
    let (a, b) = (rng.next_u64(), rng.next_u64());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | (b >> 48) & 0x3fff,
        b & 0xffff_ffff_ffff
    )
}

/// The ad → campaign table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Catalog {
    /// Campaign ids.
    pub campaigns: Vec<String>,
    /// Ad ids with the index of their campaign.
    pub ads: Vec<(String, usize)>,
}

/// The table for `campaigns × ads_per_campaign` ads.
pub fn catalog(campaigns: usize, ads_per_campaign: usize) -> Catalog {
    let mut rng = SeededRng::seed_from_u64(CATALOG_SEED);
    let campaigns: Vec<String> = (0..campaigns).map(|_| uuid(&mut rng)).collect();
    let ads = (0..campaigns.len() * ads_per_campaign)
        .map(|i| (uuid(&mut rng), i / ads_per_campaign))
        .collect();
    Catalog { campaigns, ads }
}

/// `aa.deserialize`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Deserialize_;

/// One YSB event as read from its JSON text, strings borrowed from it. Every field but
/// `event_time` must be a string; other members are ignored.
#[derive(Debug, Deserialize)]
struct Event<'a> {
    #[serde(borrow, default)]
    user_id: Member<Text<'a>>,
    #[serde(borrow, default)]
    page_id: Member<Text<'a>>,
    #[serde(borrow, default)]
    ad_id: Member<Text<'a>>,
    #[serde(borrow, default)]
    ad_type: Member<Text<'a>>,
    #[serde(borrow, default)]
    event_type: Member<Text<'a>>,
    /// A string, as YSB writes it, or a number.
    #[serde(borrow, default)]
    event_time: Member<&'a RawValue>,
    #[serde(borrow, default)]
    ip_address: Member<Text<'a>>,
}

/// The seven fields of one event in [`FIELDS`] order, `None` where missing. A numeric
/// `event_time` is carried as written, as if it had been a string.
fn event_fields(line: &[u8]) -> Result<[Option<Cow<'_, str>>; 7], &'static str> {
    fn text(m: Member<Text<'_>>) -> Option<Cow<'_, str>> {
        m.present().map(|t| t.0)
    }
    // One UTF-8 check of the whole line, so that strings are not checked one by one.
    let line = std::str::from_utf8(line).map_err(|_| "bad JSON")?;
    let Object(e) = serde_json::from_str::<Object<Event<'_>>>(line).map_err(|_| "bad JSON")?;
    let time = match e.event_time.present().map(scalar) {
        None => None,
        Some(Scalar::Number(n)) => Some(Cow::Borrowed(n)),
        Some(Scalar::Text(t)) => Some(t),
        Some(Scalar::Other) => return Err("bad JSON"),
    };
    Ok([
        text(e.user_id),
        text(e.page_id),
        text(e.ad_id),
        text(e.ad_type),
        text(e.event_type),
        time,
        text(e.ip_address),
    ])
}

impl Operator for Deserialize_ {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        let mut out = Buf::new();
        for (r, time) in input.iter_timed() {
            match deserialize(r.value, &mut out) {
                Ok(()) => ctx.emit_with(time, r.key, out.get().unwrap_or_default()),
                Err(reason) => ctx.reject(reason),
            }
        }
    }
}

fn deserialize(line: &[u8], out: &mut Buf) -> Result<(), &'static str> {
    let found = event_fields(line)?;
    out.clear();
    for (i, f) in found.iter().enumerate() {
        let field = f.as_ref().ok_or("missing field")?;
        // JSON strings hold no raw control characters: a tab can only come from an escape.
        if matches!(field, Cow::Owned(s) if s.contains('\t')) {
            return Err("tab in field");
        }
        let value = field.as_bytes();
        if i == 5 && parse_u64(value).is_none() {
            return Err("non-numeric event_time");
        }
        if i > 0 {
            out.byte(b'\t');
        }
        out.put(value);
    }
    if out.get().is_none() {
        return Err("event too long");
    }
    Ok(())
}

/// `aa.filter_views`.
#[derive(Clone, Copy, Debug, Default)]
pub struct FilterViews;

impl Operator for FilterViews {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        for (r, time) in input.iter_timed() {
            match fields::<7>(r.value, b'\t') {
                Some(f) if f[4] == b"view" => ctx.emit_with(time, r.key, r.value),
                Some(_) => {}
                None => ctx.reject("wrong field count"),
            }
        }
    }
}

/// `aa.projection`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Projection;

impl Operator for Projection {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        for (r, time) in input.iter_timed() {
            match fields::<7>(r.value, b'\t') {
                Some(f) => ctx.emit_with(time, f[2], f[5]),
                None => ctx.reject("wrong field count"),
            }
        }
    }
}

/// `aa.join_campaign`.
#[derive(Clone, Debug)]
pub struct JoinCampaign {
    table: Arc<HashMap<Box<[u8]>, Box<str>>>,
}

impl JoinCampaign {
    /// A join over `catalog`.
    pub fn new(catalog: &Catalog) -> Self {
        let table = catalog
            .ads
            .iter()
            .map(|(ad, c)| (ad.as_bytes().into(), catalog.campaigns[*c].as_str().into()))
            .collect();
        Self { table: Arc::new(table) }
    }

    /// The join over `catalog(campaigns, ads_per_campaign)`. Every slot of every worker
    /// instantiates the operator, so the default catalog's table is built once per process
    /// and shared.
    pub fn of_catalog(campaigns: usize, ads_per_campaign: usize) -> Self {
        static DEFAULT: OnceLock<JoinCampaign> = OnceLock::new();
        if (campaigns, ads_per_campaign) != (CAMPAIGNS, ADS_PER_CAMPAIGN) {
            return Self::new(&catalog(campaigns, ads_per_campaign));
        }
        DEFAULT.get_or_init(|| Self::new(&catalog(CAMPAIGNS, ADS_PER_CAMPAIGN))).clone()
    }
}

impl Operator for JoinCampaign {
    /// The campaign of the ad, once looked up.
    type State = String;
    fn process(&self, input: &Batch, ctx: &mut Context<'_, String>) {
        let mut campaign_id = Buf::new();
        for (r, time) in input.iter_timed() {
            if let Some(campaign) = ctx.existing_state(r) {
                // Copied out: the state borrow must end before emitting.
                campaign_id.clear();
                campaign_id.put(campaign.as_bytes());
                ctx.emit_with(time, campaign_id.get().unwrap_or_default(), r.value);
                continue;
            }
            match self.table.get(r.key) {
                Some(campaign) => {
                    ctx.emit_with(time, campaign.as_bytes(), r.value);
                    *ctx.state(r) = campaign.to_string();
                }
                None => ctx.reject("unknown ad"),
            }
        }
    }
}

/// Event counts of one campaign's open windows.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CampaignWindows {
    /// `(window start ms, events)`, ascending by start.
    pub windows: Vec<(u64, u64)>,
}

/// `aa.campaign_count`.
#[derive(Clone, Copy, Debug)]
pub struct CampaignCount {
    window_ms: u64,
}

impl Operator for CampaignCount {
    type State = CampaignWindows;
    fn timers(&self) -> TimerUse {
        TimerUse::EVENT
    }
    fn process(&self, input: &Batch, ctx: &mut Context<'_, CampaignWindows>) {
        for r in input.iter() {
            let Some(t) = parse_u64(r.value) else {
                ctx.reject("non-numeric event_time");
                continue;
            };
            let start = t - t % self.window_ms;
            let s = ctx.state(r);
            match s.windows.binary_search_by_key(&start, |w| w.0) {
                Ok(i) => s.windows[i].1 += 1,
                Err(i) => {
                    s.windows.insert(i, (start, 1));
                    ctx.set_event_timer(r, start + self.window_ms - 1);
                }
            }
        }
    }
    fn on_timer(&self, timer: Timer<'_>, ctx: &mut Context<'_, CampaignWindows>) {
        let r = timer.record();
        let start = timer.time + 1 - self.window_ms;
        let Some(s) = ctx.existing_state(r) else { return };
        let Ok(i) = s.windows.binary_search_by_key(&start, |w| w.0) else { return };
        let (_, count) = s.windows.remove(i);
        let empty = s.windows.is_empty();
        let mut out = Buf::new();
        out.u64(start).byte(b',').u64(count);
        ctx.emit_at(timer.time, r.key, out.get().unwrap_or_default());
        if empty {
            ctx.remove_state(r);
        }
    }
}

/// An event's `event_time` (a number or a string of digits), read from its JSON line without
/// parsing the rest; `None` when absent or not a number (the deserializer then rejects it).
pub fn event_time(line: &[u8]) -> Option<u64> {
    crate::json::member_u64(line, b"\"event_time\"")
}

/// Registers the AA functions.
pub fn register(r: &mut Registry) {
    use clasp_core::operator::erase;
    r.register_event_time("aa.time", event_time);
    r.register_operator("aa.deserialize", Deserialize_);
    r.register_operator("aa.filter_views", FilterViews);
    r.register_operator("aa.projection", Projection);
    r.register("aa.join_campaign", |spec| {
        let p = Params::new(spec, &["campaigns", "ads_per_campaign"])?;
        let c = p.positive("campaigns", CAMPAIGNS as u64)? as usize;
        let a = p.positive("ads_per_campaign", ADS_PER_CAMPAIGN as u64)? as usize;
        Ok(erase(JoinCampaign::of_catalog(c, a)))
    });
    r.register("aa.campaign_count", |spec| {
        let p = Params::new(spec, &["window_ms"])?;
        let window_ms = p.positive("window_ms", 10_000)?;
        Ok(erase(CampaignCount { window_ms }))
    });
}

/// First event time of generated streams (ms since the Unix epoch).
pub const START_MS: u64 = 1_500_000_000_000;

/// Generates YSB events as the benchmark's generator writes them: 100 users and 100 pages,
/// ads drawn uniformly from the 1,000 ads of the table, ad and event types uniform, IP
/// `1.2.3.4`. Event times start at [`START_MS`] and advance 0–2 ms per event (1,000 events
/// per second of event time), so 100,000 events span ten 10 s windows.
#[derive(Debug)]
pub struct Generator {
    rng: SeededRng,
    users: Vec<String>,
    pages: Vec<String>,
    ads: Vec<String>,
    time: u64,
}

impl Generator {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        let mut rng = independent_stream(seed, 0x4141);
        let users = (0..100).map(|_| uuid(&mut rng)).collect();
        let pages = (0..100).map(|_| uuid(&mut rng)).collect();
        let ads = catalog(CAMPAIGNS, ADS_PER_CAMPAIGN).ads.into_iter().map(|a| a.0).collect();
        Self { rng, users, pages, ads, time: START_MS }
    }

    /// Writes the next event into `out` (cleared first).
    pub fn next_line(&mut self, out: &mut Vec<u8>) {
        let pick = |rng: &mut SeededRng, n: usize| rng.random_range(0..n as u64) as usize;
        let user = &self.users[pick(&mut self.rng, self.users.len())];
        let page = &self.pages[pick(&mut self.rng, self.pages.len())];
        let ad = &self.ads[pick(&mut self.rng, self.ads.len())];
        let ad_type = AD_TYPES[pick(&mut self.rng, AD_TYPES.len())];
        let event_type = EVENT_TYPES[pick(&mut self.rng, EVENT_TYPES.len())];
        self.time += self.rng.random_range(0..3);
        out.clear();
        use std::io::Write;
        let _ = write!(
            out,
            "{{\"user_id\": \"{user}\", \"page_id\": \"{page}\", \"ad_id\": \"{ad}\", \
             \"ad_type\": \"{ad_type}\", \"event_type\": \"{event_type}\", \
             \"event_time\": \"{}\", \"ip_address\": \"1.2.3.4\"}}",
            self.time
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deserialize_accepts_ysb_and_rejects_bad_events() {
        let mut g = Generator::new(3);
        let mut line = Vec::new();
        g.next_line(&mut line);
        let mut out = Buf::new();
        deserialize(&line, &mut out).unwrap();
        let text = String::from_utf8(out.get().unwrap().to_vec()).unwrap();
        let f: Vec<&str> = text.split('\t').collect();
        assert_eq!(f.len(), 7);
        assert_eq!(f[6], "1.2.3.4");
        let numeric = br#"{"user_id":"u","page_id":"p","ad_id":"a\u0041","ad_type":"t","event_type":"view","event_time":12,"ip_address":"i","extra":[1]}"#;
        deserialize(numeric, &mut out).unwrap();
        assert_eq!(out.get().unwrap(), b"u\tp\taA\tt\tview\t12\ti");
        for (bad, why) in [
            (&b"{"[..], "bad JSON"),
            (br#"{"user_id":"u"}"#, "missing field"),
            (br#"{"user_id":"u","page_id":"p","ad_id":"a","ad_type":"t","event_type":"view","event_time":"x","ip_address":"i"}"#, "non-numeric event_time"),
            (br#"{"user_id":"u\t","page_id":"p","ad_id":"a","ad_type":"t","event_type":"view","event_time":"1","ip_address":"i"}"#, "tab in field"),
            (br#"{"user_id":1,"page_id":"p","ad_id":"a","ad_type":"t","event_type":"view","event_time":"1","ip_address":"i"}"#, "bad JSON"),
            (br#"{"user_id":null,"page_id":"p","ad_id":"a","ad_type":"t","event_type":"view","event_time":"1","ip_address":"i"}"#, "bad JSON"),
            (br#"{"user_id":"u","page_id":"p","ad_id":"a","ad_type":"t","event_type":"view","event_time":true,"ip_address":"i"}"#, "bad JSON"),
            (br#"{"user_id":"u","page_id":"p","ad_id":"a","ad_type":"t","event_type":"view","event_time":1.5,"ip_address":"i"}"#, "non-numeric event_time"),
            (br#"{"user_id":"u","page_id":"p","ad_id":"a","ad_type":"t","event_type":"view","event_time":-0,"ip_address":"i"}"#, "non-numeric event_time"),
            (br#"["u","p","a","t","view","1","i"]"#, "bad JSON"),
        ] {
            assert_eq!(deserialize(bad, &mut out), Err(why));
        }
    }

    #[test]
    fn windows_close_by_the_watermark_and_late_events_are_counted() {
        use clasp_core::local::{LocalDriver, LocalOptions};
        let spec = r#"
[[source]]
name = "times"
key_field = 0
event_time = "t"
out_of_orderness = 4
[[operator]]
name = "campaign"
function = "count"
stateful = true
key = "campaign"
[[sink]]
name = "out"
[[stream]]
from = "times"
to = "campaign"
[[stream]]
from = "campaign"
to = "out"
"#;
        let p = clasp_core::spec::parse(spec, "t.toml").unwrap();
        let mut reg = Registry::new();
        reg.register_operator("count", CampaignCount { window_ms: 10 });
        reg.register_event_time("t", parse_u64);
        let opts = LocalOptions { batch_size: 2, key_groups: 2 };
        let mut d = LocalDriver::new(&p, &reg, opts).unwrap();
        // Batches of 2, each entering under the watermark (largest time − 4 − 1) left by the
        // ones before: after [12, 15] it is 10, which closes [0,10); "3" then enters under it
        // and is late; after [31, 30] it is 26, which closes [10,20); "12" is then late;
        // [30,40) closes at the end of the input.
        for t in ["1", "9", "12", "15", "3", "14", "31", "30", "12", "32"] {
            d.push(clasp_core::SourceId(0), b"c", t.as_bytes());
        }
        d.flush();
        let emitted = |d: &LocalDriver| -> Vec<String> {
            d.sink_records_named("out")
                .iter()
                .map(|r| String::from_utf8_lossy(r.value).into())
                .collect()
        };
        assert_eq!(emitted(&d), ["0,2", "10,3"], "closed by the watermark alone");
        d.finish();
        assert_eq!(emitted(&d), ["0,2", "10,3", "30,3"]);
        assert_eq!(
            d.stats(clasp_core::OperatorId(0)).rejections.count(clasp_core::operator::LATE),
            2
        );
        assert_eq!(d.store(clasp_core::OperatorId(0)).key_count(), 0, "no window left open");
        assert_eq!(
            event_time(br#"{"a":"x","event_time": "1500000000123","b":1}"#),
            Some(1_500_000_000_123)
        );
        assert_eq!(event_time(br#"{"event_time":42}"#), Some(42));
        assert_eq!(event_time(br#"{"event_time":"x"}"#), None);
    }

    #[test]
    fn catalog_is_fixed_and_ids_are_uuids() {
        let c = catalog(CAMPAIGNS, ADS_PER_CAMPAIGN);
        assert_eq!((c.campaigns.len(), c.ads.len()), (100, 1000));
        assert_eq!(c, catalog(100, 10));
        assert_eq!(c.ads[25].1, 2);
        let id = &c.ads[0].0;
        assert_eq!(id.len(), 36);
        assert_eq!(id.as_bytes()[14], b'4');
    }
}
