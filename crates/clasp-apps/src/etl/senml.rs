//! Reading SenML lines (`etl.senml_parse`): one pass of `serde_json` over each message, names
//! borrowed from the line, values as written, the readings into a buffer reused from line to
//! line.

use super::DECIMALS;
use crate::json::{MaybeText, Text, numeric_text, skip_members};
use crate::text::{Buf, parse_fixed, parse_u64};
use clasp_core::{Batch, Context, Operator};
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

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
                    (Some(k), Some(v)) => ctx.emit_at(m.time, k, v),
                    _ => ctx.reject("record too long"),
                }
            }
        }
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
}
