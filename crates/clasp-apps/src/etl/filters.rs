//! The stateful stages between parsing and joining: `etl.range_filter`, `etl.bloom_filter`,
//! `etl.interpolate`.

use super::{put_reading, range, reading};
use crate::text::{Buf, div_round};
use clasp_core::hash::{fmix64, key_hash};
use clasp_core::time::{Timer, TimerUse};
use clasp_core::{Batch, Context, Operator, Record};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::Arc;

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
        for (r, time) in input.iter_timed() {
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
            ctx.emit_with(time, r.key, out.get().unwrap_or_default());
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
    pub(super) known: Bloom,
}

/// The sensor part of a `sensor/field` key.
fn sensor_of(key: &[u8]) -> &[u8] {
    key.iter().rposition(|c| *c == b'/').map_or(key, |i| &key[..i])
}

impl Operator for BloomFilter {
    type State = BloomStats;
    fn process(&self, input: &Batch, ctx: &mut Context<'_, BloomStats>) {
        for (r, time) in input.iter_timed() {
            let known = self.known.may_contain(sensor_of(r.key));
            let s = ctx.state(r);
            if known {
                s.passed += 1;
                ctx.emit_with(time, r.key, r.value);
            } else {
                s.dropped += 1;
            }
        }
    }
}

/// The recent valid values of one sensor field, and the readings waiting for the watermark.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recent {
    /// Last valid values, oldest first.
    pub values: VecDeque<i64>,
    /// Missing values filled in.
    pub interpolated: u64,
    /// `(time, reading record)` of readings not yet interpolated, ascending.
    pub pending: Vec<(u64, String)>,
}

/// `etl.interpolate`: a field's readings are taken in event-time order (equal times by their
/// record), each once the watermark passes it, so the values a missing one is filled from are
/// the same whatever the arrival order.
#[derive(Clone, Copy, Debug)]
pub struct Interpolate {
    pub(super) window: usize,
}

impl Interpolate {
    /// Takes one due reading into the field's window and emits it, filled in if missing.
    fn take(&self, ctx: &mut Context<'_, Recent>, key: Record<'_>, time: u64, record: &str) {
        let Ok(rd) = reading(record.as_bytes()) else { return };
        let s = ctx.state(key);
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
        let mut out = Buf::new();
        put_reading(&mut out, &rd, value);
        ctx.emit_at(time, rd.msg, out.get().unwrap_or_default());
    }
}

impl Operator for Interpolate {
    type State = Recent;
    fn timers(&self) -> TimerUse {
        TimerUse::EVENT
    }
    fn process(&self, input: &Batch, ctx: &mut Context<'_, Recent>) {
        for (r, time) in input.iter_timed() {
            if let Err(reason) = reading(r.value) {
                ctx.reject(reason);
                continue;
            }
            let Some(time) = time else {
                ctx.reject("missing time");
                continue;
            };
            // Checked upstream: readings are ASCII.
            let record = String::from_utf8_lossy(r.value);
            let s = ctx.state(r);
            let at = s.pending.partition_point(|(t, v)| (*t, v.as_str()) <= (time, &*record));
            s.pending.insert(at, (time, record.into_owned()));
            ctx.set_event_timer(r, time);
        }
    }
    fn on_timer(&self, timer: Timer<'_>, ctx: &mut Context<'_, Recent>) {
        let r = timer.record();
        let Some(s) = ctx.existing_state(r) else { return };
        let due = s.pending.partition_point(|p| p.0 <= timer.time);
        let readings: Vec<(u64, String)> = s.pending.drain(..due).collect();
        for (time, record) in &readings {
            self.take(ctx, r, *time, record);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etl::{ROGUE_SENSORS, SENSORS, sensor_name};

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
}
