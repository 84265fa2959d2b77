//! The two outputs of a joined row: annotated with the sensor's location, then published as
//! SenML (`etl.csv_to_senml`, `etl.publish`) and stored as a table entity (`etl.table_insert`,
//! `etl.sink`).

use super::put_location;
use crate::text::{Buf, emit_or_reject, fields};
use clasp_core::{Batch, Context, Operator};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_quoted_and_escaped_as_json() {
        let mut quoted = Buf::new();
        put_json_string(b"a\"b\\c\n", &mut quoted);
        assert_eq!(quoted.get(), Some(&br#""a\"b\\c\n""#[..]));
    }
}
