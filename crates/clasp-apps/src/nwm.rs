//! Network monitor (CLASP Fig. 1, app 5): hosts with a successful login on a day on which
//! they also failed to log in at least `min_failures` times.
//!
//! Input: CSV lines `day,host,user,outcome` with `outcome` `success` or `failure`.
//!
//! - `nwm.parse`: validates; key = host, value = `day,host,user,outcome`.
//! - `nwm.split`: sends every login to both branches.
//! - success branch: `nwm.success_filter` keeps successes, `nwm.success_parse` emits `day,user`.
//! - failure branch: `nwm.fail_filter` keeps failures, `nwm.fail_parse` emits `day`;
//!   `nwm.daily_failures` (stateful by host) counts failures per host and day and emits
//!   `day,count`; `nwm.threshold` (param `min_failures`, default 3) keeps counts at or above
//!   it; `nwm.first_of_day` (stateful by host) lets the first of them per host and day through
//!   as `day`.
//! - `nwm.join` (stateful by host): input port 0 is the success branch, port 1 the failure
//!   branch; emits `day` under the host key ("host locked") once per host and day when both a
//!   success and the failure flag have arrived, in whichever order.
//!
//! The two branches are 2 and 5 operators long, so which of a success and a failure flag
//! reaches the join first is a race in any parallel run, and with many chains in flight the
//! short branch runs days ahead of the long one; pairing them per day (rather than by
//! arrival) makes the result independent of scheduling. The day is the event time (the
//! source reads it with `nwm.day`; the maps and filters pass it on), and the stateful
//! operators close a host's day with an event-time timer: the day's state stays open until
//! the watermark passes it, so every login of the day is counted however far one branch runs
//! ahead, and then only the `days_kept` (default 3) most recent closed days of each host stay
//! in state. Logins later than the source's `out_of_orderness` are counted as `late`.

use crate::text::{Buf, Params, emit_or_reject_with, fields, parse_u64, trim};
use clasp_core::rng::{SeededRng, independent_stream};
use clasp_core::time::{Timer, TimerUse};
use clasp_core::{Batch, Context, Operator, Record, Registry};
use rand::RngExt;
use serde::{Deserialize, Serialize};

/// Hosts in the generated network.
pub const HOSTS: u64 = 1000;
/// Logins per host per day.
pub const LOGINS_PER_HOST_DAY: u64 = 5;
/// Share of failed logins.
pub const FAILURE_RATE: f64 = 0.9;

/// Per-day values of one host: its open days and its most recent closed ones.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DayLog<T> {
    /// `(day, value)`, ascending by day.
    pub days: Vec<(u32, T)>,
}

impl<T: Default> DayLog<T> {
    /// The value of `day`, created when new (then `.1` is true: the day needs its timer).
    pub fn day(&mut self, day: u32) -> (&mut T, bool) {
        match self.days.binary_search_by_key(&day, |d| d.0) {
            Ok(i) => (&mut self.days[i].1, false),
            Err(i) => {
                self.days.insert(i, (day, T::default()));
                (&mut self.days[i].1, true)
            }
        }
    }

    /// Day `day` closed (the watermark passed it): forgets the oldest days while more than
    /// `keep` are kept and the oldest is closed.
    pub fn close(&mut self, day: u32, keep: usize) {
        let closed = self.days.iter().take_while(|d| d.0 <= day).count();
        let drop = closed.min(self.days.len().saturating_sub(keep));
        self.days.drain(..drop);
    }
}

/// The day of `r` as a new entry of a day log: sets the timer that closes it.
fn open_day<S: clasp_core::state::StateValue>(ctx: &mut Context<'_, S>, r: Record<'_>, day: u32) {
    ctx.set_event_timer(r, u64::from(day));
}

/// Closes the day of `timer` in the log of its host.
fn close_day<T: Default + clasp_core::state::StateValue>(
    timer: Timer<'_>,
    ctx: &mut Context<'_, DayLog<T>>,
    keep: usize,
) where
    DayLog<T>: clasp_core::state::StateValue,
{
    let day = u32::try_from(timer.time).unwrap_or(u32::MAX);
    if let Some(log) = ctx.existing_state(timer.record()) {
        log.close(day, keep);
    }
}

/// A login line's day, as its event time.
pub fn login_day(line: &[u8]) -> Option<u64> {
    let day = line.split(|c| *c == b',').next()?;
    parse_day(trim(day)).map(u64::from)
}

fn parse_day(b: &[u8]) -> Option<u32> {
    parse_u64(b).and_then(|d| u32::try_from(d).ok())
}

/// `nwm.parse`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Parse;

impl Operator for Parse {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        let mut out = Buf::new();
        for (r, time) in input.iter_timed() {
            let Some([day, host, user, outcome]) = fields::<4>(r.value, b',') else {
                ctx.reject("wrong field count");
                continue;
            };
            let (day, host, user, outcome) = (trim(day), trim(host), trim(user), trim(outcome));
            if parse_day(day).is_none() {
                ctx.reject("non-numeric day");
                continue;
            }
            if host.is_empty() {
                ctx.reject("empty host");
                continue;
            }
            if outcome != b"success" && outcome != b"failure" {
                ctx.reject("unknown outcome");
                continue;
            }
            out.clear();
            out.put(day).byte(b',').put(host).byte(b',').put(user).byte(b',').put(outcome);
            emit_or_reject_with(ctx, time, host, out.get());
        }
    }
}

/// `nwm.split`: every login to every branch.
#[derive(Clone, Copy, Debug, Default)]
pub struct Split;

impl Operator for Split {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        for (r, time) in input.iter_timed() {
            ctx.emit_with(time, r.key, r.value);
        }
    }
}

/// `nwm.success_filter` (`outcome = b"success"`) and `nwm.fail_filter` (`b"failure"`).
#[derive(Clone, Copy, Debug)]
pub struct OutcomeFilter {
    outcome: &'static [u8],
}

impl Operator for OutcomeFilter {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        for (r, time) in input.iter_timed() {
            match fields::<4>(r.value, b',') {
                Some(f) if f[3] == self.outcome => ctx.emit_with(time, r.key, r.value),
                Some(_) => {}
                None => ctx.reject("wrong field count"),
            }
        }
    }
}

/// `nwm.success_parse` (`day,user`) and `nwm.fail_parse` (`day`).
#[derive(Clone, Copy, Debug)]
pub struct BranchParse {
    with_user: bool,
}

impl Operator for BranchParse {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        let mut out = Buf::new();
        for (r, time) in input.iter_timed() {
            let Some([day, _, user, _]) = fields::<4>(r.value, b',') else {
                ctx.reject("wrong field count");
                continue;
            };
            out.clear();
            out.put(day);
            if self.with_user {
                out.byte(b',').put(user);
            }
            ctx.emit_with(time, r.key, out.get().unwrap_or_default());
        }
    }
}

/// The leading `day` of a branch record.
fn record_day(value: &[u8]) -> Option<u32> {
    parse_day(value.split(|c| *c == b',').next().unwrap_or_default())
}

/// `nwm.daily_failures`.
#[derive(Clone, Copy, Debug)]
pub struct DailyFailures {
    keep: usize,
}

impl Operator for DailyFailures {
    /// Failures per day.
    type State = DayLog<u32>;
    fn timers(&self) -> TimerUse {
        TimerUse::EVENT
    }
    fn process(&self, input: &Batch, ctx: &mut Context<'_, DayLog<u32>>) {
        let mut out = Buf::new();
        for (r, time) in input.iter_timed() {
            let Some(day) = record_day(r.value) else {
                ctx.reject("non-numeric day");
                continue;
            };
            let (count, new) = ctx.state(r).day(day);
            *count += 1;
            let count = *count;
            if new {
                open_day(ctx, r, day);
            }
            out.clear();
            out.u64(day.into()).byte(b',').u64(count.into());
            ctx.emit_with(time, r.key, out.get().unwrap_or_default());
        }
    }
    fn on_timer(&self, timer: Timer<'_>, ctx: &mut Context<'_, DayLog<u32>>) {
        close_day(timer, ctx, self.keep);
    }
}

/// `nwm.threshold`.
#[derive(Clone, Copy, Debug)]
pub struct Threshold {
    min: u64,
}

impl Operator for Threshold {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        for (r, time) in input.iter_timed() {
            match fields::<2>(r.value, b',').and_then(|[_, c]| parse_u64(c)) {
                Some(c) if c >= self.min => ctx.emit_with(time, r.key, r.value),
                Some(_) => {}
                None => ctx.reject("bad failure count"),
            }
        }
    }
}

/// `nwm.first_of_day`.
#[derive(Clone, Copy, Debug)]
pub struct FirstOfDay {
    keep: usize,
}

impl Operator for FirstOfDay {
    /// Whether the day was already flagged.
    type State = DayLog<bool>;
    fn timers(&self) -> TimerUse {
        TimerUse::EVENT
    }
    fn process(&self, input: &Batch, ctx: &mut Context<'_, DayLog<bool>>) {
        let mut out = Buf::new();
        for (r, time) in input.iter_timed() {
            let Some(day) = record_day(r.value) else {
                ctx.reject("non-numeric day");
                continue;
            };
            let (flagged, new) = ctx.state(r).day(day);
            let first = !std::mem::replace(flagged, true);
            if new {
                open_day(ctx, r, day);
            }
            if first {
                out.clear();
                out.u64(day.into());
                ctx.emit_with(time, r.key, out.get().unwrap_or_default());
            }
        }
    }
    fn on_timer(&self, timer: Timer<'_>, ctx: &mut Context<'_, DayLog<bool>>) {
        close_day(timer, ctx, self.keep);
    }
}

/// What the join knows of one host and day.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pairing {
    /// A successful login arrived.
    pub success: bool,
    /// The failure threshold was reached.
    pub flagged: bool,
    /// "Host locked" was emitted.
    pub locked: bool,
}

/// `nwm.join`.
#[derive(Clone, Copy, Debug)]
pub struct Join {
    keep: usize,
}

impl Operator for Join {
    type State = DayLog<Pairing>;
    fn timers(&self) -> TimerUse {
        TimerUse::EVENT
    }
    fn process(&self, input: &Batch, ctx: &mut Context<'_, DayLog<Pairing>>) {
        let mut out = Buf::new();
        let from_success = ctx.input_port() == 0;
        for (r, time) in input.iter_timed() {
            let Some(day) = record_day(r.value) else {
                ctx.reject("non-numeric day");
                continue;
            };
            let (p, new) = ctx.state(r).day(day);
            if from_success {
                p.success = true;
            } else {
                p.flagged = true;
            }
            let lock = p.success && p.flagged && !p.locked;
            p.locked |= lock;
            if new {
                open_day(ctx, r, day);
            }
            if lock {
                out.clear();
                out.u64(day.into());
                ctx.emit_with(time, r.key, out.get().unwrap_or_default());
            }
        }
    }
    fn on_timer(&self, timer: Timer<'_>, ctx: &mut Context<'_, DayLog<Pairing>>) {
        close_day(timer, ctx, self.keep);
    }
}

fn days_kept(p: &Params<'_>) -> Result<usize, String> {
    Ok(p.positive("days_kept", 3)? as usize)
}

/// Registers the NWM functions.
pub fn register(r: &mut Registry) {
    use clasp_core::operator::erase;
    r.register_event_time("nwm.day", login_day);
    r.register_operator("nwm.parse", Parse);
    r.register_operator("nwm.split", Split);
    r.register_operator("nwm.success_filter", OutcomeFilter { outcome: b"success" });
    r.register_operator("nwm.fail_filter", OutcomeFilter { outcome: b"failure" });
    r.register_operator("nwm.success_parse", BranchParse { with_user: true });
    r.register_operator("nwm.fail_parse", BranchParse { with_user: false });
    r.register("nwm.daily_failures", |spec| {
        let keep = days_kept(&Params::new(spec, &["days_kept"])?)?;
        Ok(erase(DailyFailures { keep }))
    });
    r.register("nwm.threshold", |spec| {
        let p = Params::new(spec, &["min_failures"])?;
        Ok(erase(Threshold { min: p.positive("min_failures", 3)? }))
    });
    r.register("nwm.first_of_day", |spec| {
        let keep = days_kept(&Params::new(spec, &["days_kept"])?)?;
        Ok(erase(FirstOfDay { keep }))
    });
    r.register("nwm.join", |spec| {
        let keep = days_kept(&Params::new(spec, &["days_kept"])?)?;
        Ok(erase(Join { keep }))
    });
}

/// Generates login lines day by day: each of the 1,000 hosts (`host0001`…) logs in 5 times a
/// day, 90 % of logins fail, users are drawn from 50 accounts; a day's 5,000 logins come in a
/// seeded random order.
#[derive(Debug)]
pub struct Generator {
    rng: SeededRng,
    day: u32,
    today: Vec<u32>,
}

impl Generator {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Self { rng: independent_stream(seed, 0x4e57), day: 0, today: Vec::new() }
    }

    fn next_day(&mut self) {
        self.day += 1;
        self.today = (0..(HOSTS * LOGINS_PER_HOST_DAY) as u32).map(|i| i % HOSTS as u32).collect();
        for i in (1..self.today.len()).rev() {
            let j = self.rng.random_range(0..i as u64 + 1) as usize;
            self.today.swap(i, j);
        }
    }

    /// Writes the next line into `out` (cleared first).
    pub fn next_line(&mut self, out: &mut Vec<u8>) {
        let host = loop {
            match self.today.pop() {
                Some(h) => break h + 1,
                None => self.next_day(),
            }
        };
        let user = self.rng.random_range(0..50);
        let outcome = if self.rng.random_bool(FAILURE_RATE) { "failure" } else { "success" };
        out.clear();
        use std::io::Write;
        let _ = write!(out, "{},host{host:04},user{user:02},{outcome}", self.day);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_log_keeps_open_days_and_the_last_closed_ones() {
        let mut log = DayLog::<u32>::default();
        for (day, new) in [(5, true), (7, true), (5, false), (6, true), (4, true)] {
            let (n, created) = log.day(day);
            *n += 1;
            assert_eq!(created, new, "day {day}");
        }
        assert_eq!(log.days, vec![(4, 1), (5, 2), (6, 1), (7, 1)]);
        log.close(4, 2);
        assert_eq!(log.days, vec![(5, 2), (6, 1), (7, 1)], "day 4 closed and beyond 2");
        log.close(5, 2);
        assert_eq!(log.days, vec![(6, 1), (7, 1)]);
        log.close(9, 2);
        assert_eq!(log.days, vec![(6, 1), (7, 1)], "the last 2 stay");
        assert_eq!(login_day(b" 12,host0001,user03,success"), Some(12));
        assert_eq!(login_day(b"x,host0001"), None);
    }

    #[test]
    fn generator_gives_each_host_five_logins_a_day() {
        let mut g = Generator::new(1);
        let mut line = Vec::new();
        let mut per_host = std::collections::HashMap::new();
        let mut failures = 0;
        for _ in 0..5000 {
            g.next_line(&mut line);
            let text = String::from_utf8(line.clone()).unwrap();
            let f: Vec<&str> = text.split(',').collect();
            assert_eq!(f[0], "1");
            *per_host.entry(f[1].to_string()).or_insert(0) += 1;
            failures += usize::from(f[3] == "failure");
        }
        assert_eq!(per_host.len(), 1000);
        assert!(per_host.values().all(|n| *n == 5));
        assert!((4300..4700).contains(&failures), "{failures}");
        g.next_line(&mut line);
        assert!(line.starts_with(b"2,"));
    }
}
