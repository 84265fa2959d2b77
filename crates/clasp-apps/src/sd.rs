//! Spike detection (CLASP Fig. 1, app 2; DSPBench): a moving average of the last `window`
//! temperature readings per sensor, and a spike when a reading is more than `threshold` away
//! from that average, relative to it.
//!
//! Input: Intel Berkeley lab sensor lines, `date time epoch moteid temperature humidity light
//! voltage`, whitespace-separated; the record key is the mote id (see [`key`]).
//!
//! - `sd.moving_avg` (stateful by sensor, param `window`, default 100): keeps the last
//!   `window` temperatures and their sum, and emits `sensor,value,average` with the average
//!   over the window including the new reading.
//! - `sd.spike_detect` (param `threshold`, default 0.03): emits the record when
//!   `|value − average| > threshold · average`.
//!
//! A reading's event time is its `date time` in µs since the Unix epoch (`sd.time`; only
//! well-formed lines get one, so a malformed line never advances the watermark). The window
//! follows event time, not arrival: `moving_avg` holds each reading until the watermark
//! passes it (an event-time timer at the reading's time), then averages the sensor's due
//! readings in time order (equal times by value), so which readings share a window, and every
//! average, are the same whatever the arrival order within the source's `out_of_orderness`
//! and the worker count. Readings later than that are counted as `late`.
//!
//! Temperatures are fixed-point with [`DECIMALS`] decimals, so the sum is exact and the spike
//! test `|n·v − sum| · 10⁶ > threshold_ppm · sum` is computed exactly in integers.

use crate::date::{format_utc, parse_utc};
use crate::text::{Buf, Params, div_round, fields, parse_fixed};
use clasp_core::rng::{SeededRng, independent_stream};
use clasp_core::time::{Timer, TimerUse};
use clasp_core::{Batch, Context, Operator, Record, Registry};
use rand::RngExt;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Decimals kept of a temperature.
pub const DECIMALS: u32 = 4;

/// The temperature of an Intel-lab line: the 5th of exactly 8 fields.
fn temperature(line: &[u8]) -> Result<i64, &'static str> {
    let mut f = line.split(u8::is_ascii_whitespace).filter(|f| !f.is_empty());
    let t = f.nth(4).ok_or("wrong field count")?;
    if f.count() != 3 {
        return Err("wrong field count");
    }
    parse_fixed(t, DECIMALS).ok_or("non-numeric temperature")
}

/// The event time of an Intel-lab line: its `date time` (`YYYY-MM-DD HH:MM:SS[.ffffff]`,
/// UTC) in µs since the Unix epoch; `None` unless the whole line is a well-formed reading.
pub fn reading_time(line: &[u8]) -> Option<u64> {
    temperature(line).ok()?;
    let mut f = line.split(u8::is_ascii_whitespace).filter(|f| !f.is_empty());
    let (date, time) = (f.next()?, f.next()?);
    let (hms, fraction) = match time.iter().position(|c| *c == b'.') {
        Some(i) => (&time[..i], &time[i + 1..]),
        None => (time, &b""[..]),
    };
    if fraction.len() > 6 || !fraction.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut stamp = [0u8; 19];
    if date.len() != 10 || hms.len() != 8 {
        return None;
    }
    stamp[..10].copy_from_slice(date);
    stamp[10] = b' ';
    stamp[11..].copy_from_slice(hms);
    let secs = u64::try_from(parse_utc(&stamp)?).ok()?;
    // The fraction's digits, padded to µs.
    let micros = (0..6).fold(0, |m, i| m * 10 + fraction.get(i).map_or(0, |d| u64::from(d - b'0')));
    secs.checked_mul(1_000_000)?.checked_add(micros)
}

/// The readings of one sensor inside the window, and those waiting for the watermark.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// The last readings, oldest first (fixed-point).
    pub values: VecDeque<i64>,
    /// Their sum.
    pub sum: i64,
    /// Readings seen in all.
    pub seen: u64,
    /// `(time, value)` of readings not yet averaged, ascending.
    pub pending: Vec<(u64, i64)>,
}

/// `sd.moving_avg`.
#[derive(Clone, Copy, Debug)]
pub struct MovingAverage {
    window: usize,
}

impl MovingAverage {
    /// Adds `v` to the window of `r`'s sensor and emits it with the new average.
    fn average(&self, ctx: &mut Context<'_, Window>, r: Record<'_>, time: u64, v: i64) {
        let w = ctx.state(r);
        if w.values.len() == self.window {
            w.sum -= w.values.pop_front().unwrap_or(0);
        }
        w.values.push_back(v);
        w.sum += v;
        w.seen += 1;
        let avg = div_round(w.sum, w.values.len() as i64);
        let mut out = Buf::new();
        out.put(r.key).byte(b',').fixed(v, DECIMALS).byte(b',').fixed(avg, DECIMALS);
        match out.get() {
            Some(line) => ctx.emit_at(time, r.key, line),
            None => ctx.reject("sensor id too long"),
        }
    }
}

impl Operator for MovingAverage {
    type State = Window;
    fn timers(&self) -> TimerUse {
        TimerUse::EVENT
    }
    fn process(&self, input: &Batch, ctx: &mut Context<'_, Window>) {
        for (r, time) in input.iter_timed() {
            let v = match temperature(r.value) {
                Ok(v) if !r.key.is_empty() => v,
                Ok(_) => {
                    ctx.reject("missing sensor id");
                    continue;
                }
                Err(reason) => {
                    ctx.reject(reason);
                    continue;
                }
            };
            let Some(time) = time else {
                ctx.reject("bad time");
                continue;
            };
            let w = ctx.state(r);
            let at = w.pending.partition_point(|p| *p <= (time, v));
            w.pending.insert(at, (time, v));
            ctx.set_event_timer(r, time);
        }
    }
    fn on_timer(&self, timer: Timer<'_>, ctx: &mut Context<'_, Window>) {
        let r = timer.record();
        let Some(w) = ctx.existing_state(r) else { return };
        let due = w.pending.partition_point(|p| p.0 <= timer.time);
        let readings: Vec<(u64, i64)> = w.pending.drain(..due).collect();
        for (time, v) in readings {
            self.average(ctx, r, time, v);
        }
    }
}

/// `sd.spike_detect`.
#[derive(Clone, Copy, Debug)]
pub struct SpikeDetect {
    /// The relative threshold in parts per million.
    threshold_ppm: i64,
}

impl Operator for SpikeDetect {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        for (r, time) in input.iter_timed() {
            let Some([_, v, avg]) = fields::<3>(r.value, b',') else {
                ctx.reject("wrong field count");
                continue;
            };
            let (Some(v), Some(avg)) = (parse_fixed(v, DECIMALS), parse_fixed(avg, DECIMALS))
            else {
                ctx.reject("non-numeric value");
                continue;
            };
            // |v − avg| > t·avg, with t = ppm / 10⁶, in exact integer arithmetic.
            let diff = i128::from(v - avg).abs() * 1_000_000;
            if diff > i128::from(self.threshold_ppm) * i128::from(avg) {
                ctx.emit_with(time, r.key, r.value);
            }
        }
    }
}

/// Registers `sd.time`, `sd.moving_avg` and `sd.spike_detect`.
pub fn register(r: &mut Registry) {
    r.register_event_time("sd.time", reading_time);
    r.register("sd.moving_avg", |spec| {
        let p = Params::new(spec, &["window"])?;
        let window = p.positive("window", 100)? as usize;
        Ok(clasp_core::operator::erase(MovingAverage { window }))
    });
    r.register("sd.spike_detect", |spec| {
        let p = Params::new(spec, &["threshold"])?;
        let t = p.number("threshold", 0.03)?;
        if !(0.0..=1000.0).contains(&t) {
            return Err(format!("parameter `threshold` must be in 0..1000, got {t}"));
        }
        Ok(clasp_core::operator::erase(SpikeDetect { threshold_ppm: (t * 1e6).round() as i64 }))
    });
}

/// Motes in the Intel Berkeley lab deployment.
pub const MOTES: u64 = 54;

/// Seconds between two epochs of the lab's sensors.
const EPOCH_S: u64 = 31;

/// Generates Intel-lab sensor lines: 54 motes report once per 31 s epoch (about 10 % of
/// readings missing, as in the real trace), each around its own base temperature with a slow
/// daily cycle and small noise; about 3 % of readings are spikes of 5–15 %, and 0.02 % are the
/// trace's characteristic faulty readings above 100 °C.
#[derive(Debug)]
pub struct Generator {
    rng: SeededRng,
    base: Vec<f64>,
    epoch: u64,
    pending: Vec<u64>,
}

impl Generator {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        let mut rng = independent_stream(seed, 0x5344);
        let base = (0..MOTES).map(|_| rng.random_range(17.0..24.0)).collect();
        Self { rng, base, epoch: 0, pending: Vec::new() }
    }

    fn refill(&mut self) {
        self.epoch += 1;
        // Motes in reverse so that popping yields them in id order.
        self.pending = (1..=MOTES).rev().filter(|_| !self.rng.random_bool(0.1)).collect();
    }

    /// Writes the next line into `out` (cleared first).
    pub fn next_line(&mut self, out: &mut Vec<u8>) {
        let mote = loop {
            match self.pending.pop() {
                Some(m) => break m,
                None => self.refill(),
            }
        };
        let secs = self.epoch * EPOCH_S + mote % 30;
        let day_phase = (secs % 86_400) as f64 / 86_400.0 * std::f64::consts::TAU;
        let mut t = self.base[(mote - 1) as usize]
            + 1.5 * day_phase.sin()
            + 0.05 * self.rng.sample::<f64, _>(StandardNormal);
        if self.rng.random_bool(0.000_2) {
            t = self.rng.random_range(100.0..125.0);
        } else if self.rng.random_bool(0.03) {
            let sign = if self.rng.random_bool(0.5) { 1.0 } else { -1.0 };
            t *= 1.0 + sign * self.rng.random_range(0.05..0.15);
        }
        let humidity = 35.0 + 10.0 * self.rng.random::<f64>();
        let light = 40.0 + 500.0 * self.rng.random::<f64>();
        let voltage = 2.3 + 0.4 * self.rng.random::<f64>();
        let date_time = format_utc(1_078_099_200 + secs as i64); // from 2004-03-01 00:00:00 UTC
        let micros = self.rng.random_range(0..1_000_000);
        out.clear();
        use std::io::Write;
        let _ = write!(
            out,
            "{date_time}.{micros:06} {} {mote} {t:.4} {humidity:.4} {light:.2} {voltage:.5}",
            self.epoch
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clasp_core::operator::CollectingEmitter;
    use clasp_core::operator::Rejections;
    use clasp_core::state::KeyedStore;

    fn run<O: Operator>(
        op: &O,
        store: &KeyedStore<O::State>,
        recs: &[(&str, &str)],
    ) -> (Vec<String>, Rejections) {
        let b: Batch = recs.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())).collect();
        let mut out = CollectingEmitter::default();
        let mut rej = Rejections::default();
        op.process(&b, &mut Context::new(store, &mut out, 0, &mut rej));
        (out.records.into_iter().map(|(_, _, v)| String::from_utf8(v).unwrap()).collect(), rej)
    }

    #[test]
    fn intel_lab_lines_are_keyed_by_mote() {
        let line = b"2004-03-31 03:38:15.757551 2 1 122.153 -3.91901 11.04 2.03397";
        let source = &crate::pipeline("sd").unwrap().sources[0];
        assert_eq!(source.key_of(line), b"1");
        assert_eq!(temperature(line), Ok(1_221_530));
        assert_eq!(source.key_of(b"2004-03-31"), b"");
        assert_eq!(temperature(b"a b c 1 x 1 1 1"), Err("non-numeric temperature"));
        assert_eq!(temperature(b"a b c 1 2 1 1"), Err("wrong field count"));
    }

    #[test]
    fn average_over_the_window_in_event_time_order_and_exact_spike_test() {
        let store = KeyedStore::new(4);
        let op = MovingAverage { window: 2 };
        let l = |t: &str| format!("d t 1 7 {t} 1 1 1");
        let (a, b, c) = (l("10"), l("20"), l("40"));
        // Arriving as c, a, b with times 3, 1, 2: averaged in time order once due.
        let readings = [(&c, 3), (&a, 1), (&b, 2)];
        let mut batch = Batch::new();
        for (v, t) in readings {
            batch.push_timed(b"7", v.as_bytes(), Some(t));
        }
        let mut out = CollectingEmitter::default();
        let mut rej = Rejections::default();
        op.process(&batch, &mut Context::new(&store, &mut out, 0, &mut rej));
        assert!(out.records.is_empty(), "nothing is averaged before the watermark");
        for time in [2, 3] {
            let timer = Timer { key: b"7", time, domain: clasp_core::time::TimeDomain::Event };
            op.on_timer(timer, &mut Context::new(&store, &mut out, 0, &mut rej));
        }
        let out: Vec<String> =
            out.records.into_iter().map(|(_, _, v)| String::from_utf8(v).unwrap()).collect();
        assert_eq!(out, ["7,10.0000,10.0000", "7,20.0000,15.0000", "7,40.0000,30.0000"]);
        assert_eq!(
            reading_time(b"2004-03-01 00:00:31.5 1 7 19.5 1 1 1"),
            Some(1_078_099_231_500_000)
        );
        assert_eq!(reading_time(b"2004-03-01 00:00:31.5 1 7 x 1 1 1"), None);
        let spike = SpikeDetect { threshold_ppm: 30_000 };
        let (out, rej) = run(
            &spike,
            &KeyedStore::new(1),
            &[("7", "7,20.6000,20.0000"), ("7", "7,20.6001,20.0000"), ("7", "7,x,1"), ("7", "7,1")],
        );
        assert_eq!(out, ["7,20.6001,20.0000"], "exactly 3 % is not a spike");
        assert_eq!(rej.total(), 2);
    }

    #[test]
    fn generator_is_seeded_and_well_formed() {
        let lines = |seed| {
            let mut g = Generator::new(seed);
            let mut buf = Vec::new();
            (0..500)
                .map(|_| {
                    g.next_line(&mut buf);
                    String::from_utf8(buf.clone()).unwrap()
                })
                .collect::<Vec<_>>()
        };
        let a = lines(1);
        assert_eq!(a, lines(1));
        assert_ne!(a, lines(2));
        for l in &a {
            assert!(temperature(l.as_bytes()).is_ok(), "{l}");
            let key = crate::pipeline("sd").unwrap().sources[0].key_of(l.as_bytes()).to_vec();
            let mote: u64 = String::from_utf8(key).unwrap().parse().unwrap();
            assert!((1..=MOTES).contains(&mote));
        }
        assert!(a[0].starts_with("2004-03-01 00:00:"), "{}", a[0]);
    }
}
