//! Extraction, transform and load (CLASP Fig. 1, app 6; RIoTBench's ETL dataflow).
//!
//! Input: SenML JSON lines `{"bn": sensor, "bt": time, "e": [{"n": field, "v": value}, …]}`,
//! optionally preceded by `timestamp,` as in RIoTBench's sample files; a value may be a number
//! or a numeric string; entries without `v` (string measurements) are skipped. A message is
//! identified by `sensor@time`.
//!
//! - `etl.senml_parse`: one record per numeric entry, key `sensor/field`, value
//!   `msg,fields,field,value` (`fields` = numeric entries in the message; values fixed-point
//!   with 3 decimals). A non-numeric value is rejected (counted) and passed on empty, to be
//!   interpolated, so its message still completes.
//! - `etl.range_filter` (stateful by sensor/field): a value outside its field's valid range
//!   ([`range`]) is replaced by an empty value (RIoTBench marks it missing, interpolation
//!   repairs it); the state counts readings and out-of-range readings.
//! - `etl.bloom_filter` (stateful by sensor/field; param `sensors`, default 100): drops
//!   readings of sensors not in a Bloom filter of the deployment's sensors (`sensor-000`…);
//!   the state counts passed and dropped readings.
//! - `etl.interpolate` (stateful by sensor/field; param `window`, default 5): an empty value
//!   becomes the mean of the field's last `window` valid values; key becomes the message id.
//! - `etl.join` (stateful by message; param `fields`, default 3): collects a message's fields
//!   and emits `sensor,time,f1=v1;f2=v2;…` (fields sorted by name) when all have arrived.
//! - `etl.annotate`: appends the sensor's location; goes to both outputs.
//! - `etl.csv_to_senml` → `etl.publish`: the row as SenML, published under topic
//!   `etl/<sensor>` (the record key).
//! - `etl.table_insert` → `etl.sink`: the row as a table entity keyed by sensor.

use crate::json::{MaybeText, Text, numeric_text, skip_members};
use crate::text::{Buf, Params, div_round, emit_or_reject, fields, parse_fixed, parse_u64};
use clasp_core::hash::{fmix64, key_hash};
use clasp_core::rng::SplitMix64;
use clasp_core::{Batch, Context, Operator, Registry};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

/// Decimals kept of a value.
pub const DECIMALS: u32 = 3;

/// The valid range of a field (fixed-point, inclusive), if it has one.
pub fn range(field: &[u8]) -> Option<(i64, i64)> {
    let s = 10i64.pow(DECIMALS);
    match field {
        b"temperature" => Some((-40 * s, 60 * s)),
        b"humidity" => Some((0, 100 * s)),
        b"light" => Some((0, 10_000 * s)),
        _ => None,
    }
}

/// The id of the `i`-th sensor of the deployment.
pub fn sensor_name(i: u64) -> String {
    format!("sensor-{i:03}")
}

/// Appends where a sensor is installed (what `etl.annotate` appends) to `out`.
pub fn put_location(sensor: &[u8], out: &mut Buf) {
    match sensor.strip_prefix(b"sensor-").and_then(parse_u64) {
        Some(i) => {
            out.put(b"building-").u64(i % 3 + 1).put(b"/floor-").u64(i / 3 % 5 + 1);
            out.put(b"/room-").u64(i % 20 + 1);
        }
        None => {
            out.put(b"unknown");
        }
    }
}

/// Where a sensor is installed, as text.
pub fn location(sensor: &[u8]) -> String {
    let mut b = Buf::new();
    put_location(sensor, &mut b);
    String::from_utf8_lossy(b.get().unwrap_or_default()).into_owned()
}

/// One measurement of a message (an entry with a `v`): its name and value (`None` when not
/// numeric).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Measurement<'a> {
    name: Cow<'a, str>,
    value: Option<i64>,
}

/// What a SenML line holds besides its readings.
#[derive(Debug)]
struct Message<'a> {
    sensor: Cow<'a, str>,
    time: u64,
}

/// Reads a SenML line in one pass; its readings go into `readings` (cleared first), a buffer
/// the caller reuses from line to line. Checks, in this order: the JSON, `bn`, `bt`, `e`, then
/// the entries.
fn message<'a>(
    line: &'a [u8],
    readings: &mut Vec<Measurement<'a>>,
) -> Result<Message<'a>, &'static str> {
    readings.clear();
    let body = match line.iter().position(|c| *c == b'{') {
        Some(0) => line,
        Some(i) if line[i - 1] == b',' && parse_u64(&line[..i - 1]).is_some() => &line[i..],
        _ => return Err("bad JSON"),
    };
    let body = std::str::from_utf8(body).map_err(|_| "bad JSON")?;
    let mut de = serde_json::Deserializer::from_str(body);
    let m = Deserializer::deserialize_map(&mut de, MessageVisitor { readings })
        .and_then(|m| de.end().map(|()| m))
        .map_err(|_| "bad JSON")?;
    let sensor = m.bn.filter(|s| !s.is_empty()).ok_or("missing or bad bn")?;
    if sensor.contains([',', '@', ';', '=']) {
        return Err("unsupported character in bn");
    }
    let time = m.bt.and_then(numeric_text).and_then(|t| parse_u64(t.as_bytes()));
    let time = time.ok_or("missing or bad bt")?;
    match m.entries {
        EntriesRead::NotAnArray => Err("missing e"),
        EntriesRead::Refused(reason) => Err(reason),
        EntriesRead::Read => Ok(Message { sensor, time }),
    }
}

/// The members of a message that matter. Of a repeated member the last counts.
struct MessageMembers<'a> {
    bn: Option<Cow<'a, str>>,
    bt: Option<&'a RawValue>,
    entries: EntriesRead,
}

/// How reading the `e` member went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EntriesRead {
    /// Missing, or not an array.
    NotAnArray,
    /// An entry was refused, for this reason (later entries were validated, not read).
    Refused(&'static str),
    /// Every entry was read.
    Read,
}

struct MessageVisitor<'r, 'a> {
    readings: &'r mut Vec<Measurement<'a>>,
}

impl<'de> Visitor<'de> for MessageVisitor<'_, 'de> {
    type Value = MessageMembers<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a SenML message object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut m = MessageMembers { bn: None, bt: None, entries: EntriesRead::NotAnArray };
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            match key.as_ref() {
                "bn" => m.bn = map.next_value::<MaybeText<'de>>()?.0,
                "bt" => m.bt = Some(map.next_value()?),
                "e" => {
                    self.readings.clear();
                    m.entries = map.next_value_seed(Entries { readings: &mut *self.readings })?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(m)
    }
}

/// Reads the `e` member: an array of entry objects, each kept in `readings` when it has a
/// `v`.
struct Entries<'r, 'a> {
    readings: &'r mut Vec<Measurement<'a>>,
}

impl<'de> DeserializeSeed<'de> for Entries<'_, 'de> {
    type Value = EntriesRead;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<EntriesRead, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Entries<'_, 'de> {
    type Value = EntriesRead;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of SenML entries")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<EntriesRead, A::Error> {
        let mut read = EntriesRead::Read;
        while let Some(entry) = seq.next_element::<Entry<'de>>()? {
            if read != EntriesRead::Read {
                continue;
            }
            match entry.reading() {
                Ok(Some(r)) => self.readings.push(r),
                Ok(None) => {}
                Err(reason) => read = EntriesRead::Refused(reason),
            }
        }
        Ok(read)
    }

    // Any other value: not an array.
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<EntriesRead, A::Error> {
        skip_members(map)?;
        Ok(EntriesRead::NotAnArray)
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<EntriesRead, E> {
        Ok(EntriesRead::NotAnArray)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<EntriesRead, E> {
        Ok(EntriesRead::NotAnArray)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<EntriesRead, E> {
        Ok(EntriesRead::NotAnArray)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<EntriesRead, E> {
        Ok(EntriesRead::NotAnArray)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<EntriesRead, E> {
        Ok(EntriesRead::NotAnArray)
    }
    fn visit_unit<E: de::Error>(self) -> Result<EntriesRead, E> {
        Ok(EntriesRead::NotAnArray)
    }
}

/// One item of the `e` array: `None` when it is not an object.
struct Entry<'a>(Option<EntryMembers<'a>>);

/// The members of an entry that matter. Of a repeated member the last counts.
struct EntryMembers<'a> {
    n: Option<Cow<'a, str>>,
    /// Present when the entry is a numeric measurement; `null` is present but not numeric.
    v: Option<&'a RawValue>,
}

impl<'a> Entry<'a> {
    /// The entry's reading; `None` for an entry without `v` (a string measurement).
    fn reading(self) -> Result<Option<Measurement<'a>>, &'static str> {
        let Some(e) = self.0 else { return Err("bad JSON") };
        let Some(v) = e.v else { return Ok(None) };
        let value = numeric_text(v).and_then(|t| parse_fixed(t.as_bytes(), DECIMALS));
        let name = e.n.filter(|n| !n.is_empty()).ok_or("entry without name")?;
        if name.contains([',', '/', ';', '=']) {
            return Err("unsupported character in name");
        }
        Ok(Some(Measurement { name, value }))
    }
}

impl<'de> Deserialize<'de> for Entry<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(EntryVisitor)
    }
}

struct EntryVisitor;

impl<'de> Visitor<'de> for EntryVisitor {
    type Value = Entry<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a SenML entry")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entry<'de>, A::Error> {
        let mut e = EntryMembers { n: None, v: None };
        while let Some(Text(key)) = map.next_key::<Text<'de>>()? {
            match key.as_ref() {
                "n" => e.n = map.next_value::<MaybeText<'de>>()?.0,
                "v" => e.v = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Entry(Some(e)))
    }

    // Any other value: not an entry object.
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Entry<'de>, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Entry(None))
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<Entry<'de>, E> {
        Ok(Entry(None))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Entry<'de>, E> {
        Ok(Entry(None))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<Entry<'de>, E> {
        Ok(Entry(None))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<Entry<'de>, E> {
        Ok(Entry(None))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Entry<'de>, E> {
        Ok(Entry(None))
    }
    fn visit_unit<E: de::Error>(self) -> Result<Entry<'de>, E> {
        Ok(Entry(None))
    }
}

/// `etl.senml_parse`.
#[derive(Clone, Copy, Debug, Default)]
pub struct SenmlParse;

impl Operator for SenmlParse {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        let (mut key, mut value) = (Buf::new(), Buf::new());
        let mut readings = Vec::new();
        for r in input.iter() {
            let m = match message(r.value, &mut readings) {
                Ok(m) => m,
                Err(reason) => {
                    ctx.reject(reason);
                    continue;
                }
            };
            let (sensor, n) = (m.sensor.as_bytes(), readings.len() as u64);
            for reading in &readings {
                let name = reading.name.as_bytes();
                key.clear();
                key.put(sensor).byte(b'/').put(name);
                value.clear();
                value.put(sensor).byte(b'@').u64(m.time).byte(b',').u64(n).byte(b',').put(name);
                value.byte(b',');
                match reading.value {
                    Some(v) => {
                        value.fixed(v, DECIMALS);
                    }
                    None => ctx.reject("non-numeric value"),
                }
                match (key.get(), value.get()) {
                    (Some(k), Some(v)) => ctx.emit(k, v),
                    _ => ctx.reject("record too long"),
                }
            }
        }
    }
}

/// A parsed reading record `msg,fields,field,value`.
struct Reading<'a> {
    msg: &'a [u8],
    fields: &'a [u8],
    field: &'a [u8],
    /// `None` when missing.
    value: Option<i64>,
}

fn reading(v: &[u8]) -> Result<Reading<'_>, &'static str> {
    let [msg, n, field, value] = fields::<4>(v, b',').ok_or("wrong field count")?;
    let value = match value {
        b"" => None,
        t => Some(parse_fixed(t, DECIMALS).ok_or("non-numeric value")?),
    };
    Ok(Reading { msg, fields: n, field, value })
}

fn put_reading(out: &mut Buf, r: &Reading<'_>, value: Option<i64>) {
    out.clear();
    out.put(r.msg).byte(b',').put(r.fields).byte(b',').put(r.field).byte(b',');
    if let Some(v) = value {
        out.fixed(v, DECIMALS);
    }
}

/// Readings seen by the range filter for one sensor field.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeStats {
    /// Readings seen.
    pub seen: u64,
    /// Readings outside the valid range.
    pub out_of_range: u64,
}

/// `etl.range_filter`.
#[derive(Clone, Copy, Debug, Default)]
pub struct RangeFilter;

impl Operator for RangeFilter {
    type State = RangeStats;
    fn process(&self, input: &Batch, ctx: &mut Context<'_, RangeStats>) {
        let mut out = Buf::new();
        for r in input.iter() {
            let rd = match reading(r.value) {
                Ok(rd) => rd,
                Err(reason) => {
                    ctx.reject(reason);
                    continue;
                }
            };
            let valid = match (rd.value, range(rd.field)) {
                (Some(v), Some((lo, hi))) => (lo..=hi).contains(&v),
                _ => true,
            };
            let s = ctx.state(r);
            s.seen += 1;
            s.out_of_range += u64::from(!valid);
            put_reading(&mut out, &rd, rd.value.filter(|_| valid));
            ctx.emit(r.key, out.get().unwrap_or_default());
        }
    }
}

/// A Bloom filter of sensor ids: `2^16` bits, 4 probes by double hashing.
#[derive(Clone, Debug)]
pub struct Bloom {
    bits: Arc<Vec<u64>>,
}

impl Bloom {
    const BITS: u64 = 1 << 16;
    const PROBES: u64 = 4;

    fn probes(item: &[u8]) -> impl Iterator<Item = u64> {
        let h1 = key_hash(item);
        let h2 = fmix64(h1 ^ 0x426c_6f6f_6d21) | 1;
        (0..Self::PROBES).map(move |i| h1.wrapping_add(i.wrapping_mul(h2)) % Self::BITS)
    }

    /// A filter holding `items`.
    pub fn new<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut bits = vec![0u64; (Self::BITS / 64) as usize];
        for item in items {
            for p in Self::probes(item) {
                bits[(p / 64) as usize] |= 1 << (p % 64);
            }
        }
        Self { bits: Arc::new(bits) }
    }

    /// Whether `item` may be in the set (no false negatives).
    pub fn may_contain(&self, item: &[u8]) -> bool {
        Self::probes(item).all(|p| self.bits[(p / 64) as usize] & (1 << (p % 64)) != 0)
    }
}

/// Readings seen by the Bloom filter for one sensor field.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BloomStats {
    /// Readings of known sensors.
    pub passed: u64,
    /// Readings of unknown sensors.
    pub dropped: u64,
}

/// `etl.bloom_filter`.
#[derive(Clone, Debug)]
pub struct BloomFilter {
    known: Bloom,
}

/// The sensor part of a `sensor/field` key.
fn sensor_of(key: &[u8]) -> &[u8] {
    key.iter().rposition(|c| *c == b'/').map_or(key, |i| &key[..i])
}

impl Operator for BloomFilter {
    type State = BloomStats;
    fn process(&self, input: &Batch, ctx: &mut Context<'_, BloomStats>) {
        for r in input.iter() {
            let known = self.known.may_contain(sensor_of(r.key));
            let s = ctx.state(r);
            if known {
                s.passed += 1;
                ctx.emit(r.key, r.value);
            } else {
                s.dropped += 1;
            }
        }
    }
}

/// The recent valid values of one sensor field.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recent {
    /// Last valid values, oldest first.
    pub values: VecDeque<i64>,
    /// Missing values filled in.
    pub interpolated: u64,
}

/// `etl.interpolate`.
#[derive(Clone, Copy, Debug)]
pub struct Interpolate {
    window: usize,
}

impl Operator for Interpolate {
    type State = Recent;
    fn process(&self, input: &Batch, ctx: &mut Context<'_, Recent>) {
        let mut out = Buf::new();
        for r in input.iter() {
            let rd = match reading(r.value) {
                Ok(rd) => rd,
                Err(reason) => {
                    ctx.reject(reason);
                    continue;
                }
            };
            let s = ctx.state(r);
            let value = match rd.value {
                Some(v) => {
                    if s.values.len() == self.window {
                        s.values.pop_front();
                    }
                    s.values.push_back(v);
                    Some(v)
                }
                None if s.values.is_empty() => None,
                None => {
                    s.interpolated += 1;
                    Some(div_round(s.values.iter().sum(), s.values.len() as i64))
                }
            };
            put_reading(&mut out, &rd, value);
            ctx.emit(rd.msg, out.get().unwrap_or_default());
        }
    }
}

/// The fields of one message collected so far.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parts {
    /// `field=value;` for each field that arrived, in arrival order.
    pub fields: String,
    /// How many arrived.
    pub count: u32,
}

/// Most fields a message may have.
const MAX_FIELDS: usize = 32;

/// `etl.join`.
#[derive(Clone, Copy, Debug)]
pub struct Join {
    fields: u64,
}

impl Operator for Join {
    type State = Parts;
    fn process(&self, input: &Batch, ctx: &mut Context<'_, Parts>) {
        let (mut out, mut number) = (Buf::new(), Buf::new());
        for r in input.iter() {
            let rd = match reading(r.value) {
                Ok(rd) => rd,
                Err(reason) => {
                    ctx.reject(reason);
                    continue;
                }
            };
            if parse_u64(rd.fields) != Some(self.fields) {
                ctx.reject("wrong number of fields in message");
                continue;
            }
            let p = ctx.state(r);
            let dup = p.fields.split(';').any(|f| f.split('=').next() == Some(as_str(rd.field)));
            if dup {
                ctx.reject("duplicate field");
                continue;
            }
            p.fields.push_str(as_str(rd.field));
            p.fields.push('=');
            if let Some(v) = rd.value {
                number.clear();
                number.fixed(v, DECIMALS);
                p.fields.push_str(as_str(number.get().unwrap_or_default()));
            }
            p.fields.push(';');
            p.count += 1;
            if u64::from(p.count) < self.fields {
                continue;
            }
            let row = joined_row(rd.msg, &p.fields, &mut out);
            ctx.remove_state(r);
            emit_or_reject(ctx, r.key, row);
        }
    }
}

/// Fields and values are ASCII-checked upstream; anything else is shown lossily.
fn as_str(b: &[u8]) -> &str {
    std::str::from_utf8(b).unwrap_or("?")
}

/// `sensor,time,f1=v1;f2=v2;…` with the fields sorted by name.
fn joined_row<'b>(msg: &[u8], parts: &str, out: &'b mut Buf) -> Option<&'b [u8]> {
    let at = msg.iter().rposition(|c| *c == b'@')?;
    let mut pairs: [&str; MAX_FIELDS] = [""; MAX_FIELDS];
    let mut n = 0;
    for p in parts.split(';').filter(|p| !p.is_empty()) {
        *pairs.get_mut(n)? = p;
        n += 1;
    }
    let pairs = &mut pairs[..n];
    pairs.sort_unstable_by_key(|p| p.split('=').next());
    out.clear();
    out.put(&msg[..at]).byte(b',').put(&msg[at + 1..]).byte(b',');
    for (i, p) in pairs.iter().enumerate() {
        if i > 0 {
            out.byte(b';');
        }
        out.put(p.as_bytes());
    }
    out.get()
}

/// `etl.annotate`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Annotate;

impl Operator for Annotate {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        let mut out = Buf::new();
        for r in input.iter() {
            let Some([sensor, _, _]) = fields::<3>(r.value, b',') else {
                ctx.reject("wrong field count");
                continue;
            };
            out.clear();
            out.put(r.value).byte(b',');
            put_location(sensor, &mut out);
            emit_or_reject(ctx, r.key, out.get());
        }
    }
}

/// `etl.csv_to_senml`.
#[derive(Clone, Copy, Debug, Default)]
pub struct CsvToSenml;

impl Operator for CsvToSenml {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        let mut out = Buf::new();
        for r in input.iter() {
            let Some([sensor, time, pairs, note]) = fields::<4>(r.value, b',') else {
                ctx.reject("wrong field count");
                continue;
            };
            out.clear();
            out.put(b"{\"bn\":");
            put_json_string(sensor, &mut out);
            out.put(b",\"bt\":").put(time).put(b",\"e\":[");
            for p in pairs.split(|c| *c == b';') {
                let (name, value) =
                    p.split_at(p.iter().position(|c| *c == b'=').unwrap_or(p.len()));
                out.put(b"{\"n\":");
                put_json_string(name, &mut out);
                if value.len() > 1 {
                    out.put(b",\"v\":").put(&value[1..]);
                }
                out.put(b"},");
            }
            out.put(b"{\"n\":\"location\",\"vs\":");
            put_json_string(note, &mut out);
            out.put(b"}]}");
            emit_or_reject(ctx, r.key, out.get());
        }
    }
}

/// Appends `s` as a JSON string, quoted and escaped (bytes that are not UTF-8 replaced).
fn put_json_string(s: &[u8], out: &mut Buf) {
    // Writing into a `Buf` cannot fail: an overflow is flagged in the buffer itself.
    let _ = serde_json::to_writer(&mut *out, &*String::from_utf8_lossy(s));
}

/// `etl.publish`: the SenML document under topic `etl/<sensor>`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Publish;

impl Operator for Publish {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        let mut topic = Buf::new();
        for r in input.iter() {
            let sensor = r.key.iter().rposition(|c| *c == b'@').map_or(r.key, |i| &r.key[..i]);
            topic.clear();
            topic.put(b"etl/").put(sensor);
            ctx.emit(topic.get().unwrap_or_default(), r.value);
        }
    }
}

/// `etl.table_insert`: `PartitionKey=<sensor>;RowKey=<time>;<fields>;location=<…>`.
#[derive(Clone, Copy, Debug, Default)]
pub struct TableInsert;

impl Operator for TableInsert {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        let mut out = Buf::new();
        for r in input.iter() {
            let Some([sensor, time, pairs, note]) = fields::<4>(r.value, b',') else {
                ctx.reject("wrong field count");
                continue;
            };
            out.clear();
            out.put(b"PartitionKey=").put(sensor).put(b";RowKey=").put(time).byte(b';');
            out.put(pairs).put(b";location=").put(note);
            emit_or_reject(ctx, sensor, out.get());
        }
    }
}

/// `etl.sink`: acknowledges stored rows, passing them on.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sink;

impl Operator for Sink {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        for r in input.iter() {
            ctx.emit(r.key, r.value);
        }
    }
}

/// Registers the ETL functions.
pub fn register(r: &mut Registry) {
    use clasp_core::operator::erase;
    r.register_operator("etl.senml_parse", SenmlParse);
    r.register_operator("etl.range_filter", RangeFilter);
    r.register("etl.bloom_filter", |spec| {
        let p = Params::new(spec, &["sensors"])?;
        let n = p.positive("sensors", SENSORS)?;
        let names: Vec<String> = (0..n).map(sensor_name).collect();
        Ok(erase(BloomFilter { known: Bloom::new(names.iter().map(String::as_bytes)) }))
    });
    r.register("etl.interpolate", |spec| {
        let p = Params::new(spec, &["window"])?;
        Ok(erase(Interpolate { window: p.positive("window", 5)? as usize }))
    });
    r.register("etl.join", |spec| {
        let p = Params::new(spec, &["fields"])?;
        let fields = p.positive("fields", 3)?;
        if fields > MAX_FIELDS as u64 {
            return Err(format!("parameter `fields` must be at most {MAX_FIELDS}"));
        }
        Ok(erase(Join { fields }))
    });
    r.register_operator("etl.annotate", Annotate);
    r.register_operator("etl.csv_to_senml", CsvToSenml);
    r.register_operator("etl.publish", Publish);
    r.register_operator("etl.table_insert", TableInsert);
    r.register_operator("etl.sink", Sink);
}

/// Sensors of the generated deployment.
pub const SENSORS: u64 = 100;
/// Unregistered sensors that also send messages.
pub const ROGUE_SENSORS: u64 = 20;
/// First message time of generated streams (s).
pub const START_S: u64 = 1_422_748_800;

/// Generates SenML lines: each message comes from one of 100 sensors (5 % from 20 unknown
/// `rogue-…` sensors), one second after the previous one, with temperature (about 20 °C),
/// humidity (20–80 %) and light (0–2,000 lx); each value is a sensor error (−999 or 99,999,
/// out of range) with probability 2 %.
#[derive(Debug)]
pub struct Generator {
    rng: SplitMix64,
    n: u64,
}

impl Generator {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Self { rng: SplitMix64::derive(seed, 0x4554), n: 0 }
    }

    fn value(&mut self, normal: f64) -> f64 {
        if self.rng.chance(0.02) {
            if self.rng.chance(0.5) { -999.0 } else { 99_999.0 }
        } else {
            normal
        }
    }

    /// Writes the next line into `out` (cleared first).
    pub fn next_line(&mut self, out: &mut Vec<u8>) {
        let sensor = if self.rng.chance(0.05) {
            format!("rogue-{:02}", self.rng.below(ROGUE_SENSORS))
        } else {
            sensor_name(self.rng.below(SENSORS))
        };
        let t = 20.0 + 5.0 * crate::sd::gaussian(&mut self.rng);
        let t = self.value(t);
        let h = 20.0 + 60.0 * self.rng.next_f64();
        let h = self.value(h);
        let l = 2000.0 * self.rng.next_f64();
        let l = self.value(l);
        let time = START_S + self.n;
        self.n += 1;
        out.clear();
        use std::io::Write;
        let _ = write!(
            out,
            "{{\"bn\":\"{sensor}\",\"bt\":{time},\"e\":[{{\"n\":\"temperature\",\"u\":\"Cel\",\"v\":{t:.2}}},\
             {{\"n\":\"humidity\",\"u\":\"%RH\",\"v\":{h:.2}}},{{\"n\":\"light\",\"u\":\"lx\",\"v\":{l:.2}}}]}}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_parse_with_or_without_prefix() {
        let line = br#"1422748800000,{"e":[{"n":"temperature","v":"21.5"},{"u":"string","n":"source","sv":"x"},{"n":"light","v":3}],"bt":1422748800,"bn":"sensor-001"}"#;
        let mut readings = Vec::new();
        let m = message(line, &mut readings).unwrap();
        assert_eq!((m.sensor.as_ref(), m.time), ("sensor-001", 1_422_748_800));
        assert!(matches!(m.sensor, Cow::Borrowed(_)), "a plain name is not copied");
        let got: Vec<(&str, Option<i64>)> =
            readings.iter().map(|r| (r.name.as_ref(), r.value)).collect();
        assert_eq!(got, [("temperature", Some(21_500)), ("light", Some(3000))]);
        assert!(readings.iter().all(|r| matches!(r.name, Cow::Borrowed(_))));
    }

    #[test]
    fn malformed_messages_are_rejected_with_their_reason() {
        let read = |line: &str| {
            let mut readings = Vec::new();
            message(line.as_bytes(), &mut readings)
                .map(|m| (m.sensor.into_owned(), m.time, readings.len()))
        };
        for (line, why) in [
            ("x{}", "bad JSON"),
            ("{bad", "bad JSON"),
            (r#"["a",1,[]]"#, "bad JSON"),
            (r#"{"bn":"a","bt":1,"e":[]} x"#, "bad JSON"),
            (r#"{"bt":1,"e":[]}"#, "missing or bad bn"),
            (r#"{"bn":7,"bt":1,"e":[7]}"#, "missing or bad bn"),
            (r#"{"bn":"a;b","bt":1,"e":[]}"#, "unsupported character in bn"),
            (r#"{"bn":"a","bt":"x","e":[]}"#, "missing or bad bt"),
            (r#"{"bn":"a","bt":-1,"e":[]}"#, "missing or bad bt"),
            (r#"{"bn":"a","bt":1}"#, "missing e"),
            (r#"{"bn":"a","bt":1,"e":{"n":"x"}}"#, "missing e"),
            (r#"{"bn":"a","bt":1,"e":[{"v":1}]}"#, "entry without name"),
            (r#"{"bn":"a","bt":1,"e":[{"n":"a/b","v":1}]}"#, "unsupported character in name"),
            (r#"{"bn":"a","bt":1,"e":[7]}"#, "bad JSON"),
            (r#"{"bn":"a","bt":1,"e":[["n",1]]}"#, "bad JSON"),
            (r#"{"bn":"a","bt":1,"e":[{"v":1},{"n":"x","v":[1,]}]}"#, "bad JSON"),
        ] {
            assert_eq!(read(line), Err(why), "{line}");
        }
        // The last of a repeated member counts; numbers keep their digits; `null` is a value.
        let line = r#"{"bn":"a","bn":"b","bt":"7","e":[{"n":"a","v":null},{"n":"b"},{"n":"c","v":"1.0005"}]}"#;
        assert_eq!(read(line), Ok(("b".to_owned(), 7, 2)));
        let mut readings = Vec::new();
        message(line.as_bytes(), &mut readings).unwrap();
        assert_eq!(readings[0].value, None);
        assert_eq!(readings[1].value, Some(1001));
    }

    #[test]
    fn bloom_filter_knows_the_deployment_and_no_rogue_sensor() {
        let names: Vec<String> = (0..SENSORS).map(sensor_name).collect();
        let bloom = Bloom::new(names.iter().map(String::as_bytes));
        assert!(names.iter().all(|n| bloom.may_contain(n.as_bytes())));
        for i in 0..ROGUE_SENSORS {
            assert!(!bloom.may_contain(format!("rogue-{i:02}").as_bytes()));
        }
        assert_eq!(sensor_of(b"urn:a/b/temperature"), b"urn:a/b");
    }

    #[test]
    fn joined_rows_sort_fields() {
        let mut out = Buf::new();
        let row = joined_row(b"s-1@77", "light=3.000;humidity=;temperature=1.500;", &mut out);
        assert_eq!(row, Some(&b"s-1,77,humidity=;light=3.000;temperature=1.500"[..]));
        assert_eq!(location(b"sensor-007"), "building-2/floor-3/room-8");
        let mut quoted = Buf::new();
        put_json_string(b"a\"b\\c\n", &mut quoted);
        assert_eq!(quoted.get(), Some(&br#""a\"b\\c\n""#[..]));
    }
}
