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
//!   A field's readings are taken in event-time order: each waits for the watermark to pass
//!   its message's time (an event-time timer), so the values a missing one is filled from do
//!   not depend on the arrival order within the source's `out_of_orderness` or on the worker
//!   count. Readings later than that are counted as `late`.
//! - `etl.join` (stateful by message; param `fields`, default 3): collects a message's fields
//!   (kept sorted by name) and emits `sensor,time,f1=v1;f2=v2;…` when all have arrived.
//! - `etl.annotate`: appends the sensor's location; goes to both outputs.
//! - `etl.csv_to_senml` → `etl.publish`: the row as SenML, published under topic
//!   `etl/<sensor>` (the record key).
//! - `etl.table_insert` → `etl.sink`: the row as a table entity keyed by sensor.

mod filters;
mod generate;
mod join;
mod output;
mod senml;

pub use filters::{Bloom, BloomFilter, BloomStats, Interpolate, RangeFilter, RangeStats, Recent};
pub use generate::Generator;
use join::MAX_FIELDS;
pub use join::{Join, Parts};
pub use output::{Annotate, CsvToSenml, Publish, Sink, TableInsert};
pub use senml::SenmlParse;

use crate::text::{Buf, Params, fields, parse_fixed, parse_u64};
use clasp_core::Registry;

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

/// A SenML line's `bt` (s), its event time; `None` when it has none (the parser then rejects
/// the line).
pub fn message_time(line: &[u8]) -> Option<u64> {
    crate::json::member_u64(line, b"\"bt\"")
}

/// Registers the ETL functions.
pub fn register(r: &mut Registry) {
    use clasp_core::operator::erase;
    r.register_event_time("etl.time", message_time);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sensors_have_their_place() {
        let location = |sensor: &[u8]| {
            let mut b = Buf::new();
            put_location(sensor, &mut b);
            b.get().map(<[u8]>::to_vec)
        };
        assert_eq!(location(b"sensor-007").as_deref(), Some(&b"building-2/floor-3/room-8"[..]));
        assert_eq!(location(b"rogue-01").as_deref(), Some(&b"unknown"[..]));
    }
}
