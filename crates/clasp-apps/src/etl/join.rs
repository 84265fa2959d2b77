//! `etl.join`: a message's fields collected by message id, emitted sorted by name once all have
//! arrived.

use super::{DECIMALS, reading};
use crate::text::{Buf, emit_or_reject, parse_u64};
use clasp_core::{Batch, Context, Operator};
use serde::{Deserialize, Serialize};

/// The fields of one message collected so far.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Parts {
    /// `field=value;` for each field that arrived, sorted by field name (so that what is
    /// left of an incomplete message does not depend on the arrival order).
    pub fields: String,
    /// How many arrived.
    pub count: u32,
}

/// Most fields a message may have.
pub(super) const MAX_FIELDS: usize = 32;

/// `etl.join`.
#[derive(Clone, Copy, Debug)]
pub struct Join {
    pub(super) fields: u64,
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
            let mut part = String::from(as_str(rd.field));
            part.push('=');
            if let Some(v) = rd.value {
                number.clear();
                number.fixed(v, DECIMALS);
                part.push_str(as_str(number.get().unwrap_or_default()));
            }
            part.push(';');
            let at = p
                .fields
                .split_inclusive(';')
                .take_while(|f| f.split('=').next() < Some(as_str(rd.field)))
                .map(str::len)
                .sum();
            p.fields.insert_str(at, &part);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joined_rows_sort_fields() {
        let mut out = Buf::new();
        let row = joined_row(b"s-1@77", "light=3.000;humidity=;temperature=1.500;", &mut out);
        assert_eq!(row, Some(&b"s-1,77,humidity=;light=3.000;temperature=1.500"[..]));
    }
}
