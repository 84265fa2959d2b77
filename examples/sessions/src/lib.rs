//! Sessionization on clasp, as a user crate writes it: an operator with keyed state and
//! event-time timers, the function reading a click's event time, and a seeded input, all
//! registered by name for spec files (`sessions.toml`).
//!
//! A click is a line `user,time_ms`. A user's clicks closer than `gap_ms` to each other belong
//! to one session; a session is complete once the watermark passes `last + gap_ms − 1`, when
//! no click that could extend it can still come. Each session is emitted once as
//! `start,last,clicks` keyed by the user.

use clasp::core::input::MemoryLines;
use clasp::core::rng::SeededRng;
use clasp::core::source::from_lines;
use clasp::{Batch, Context, Operator, Registry, TimerUse};
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One open session of a user.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// Time of its first click (ms).
    pub start: u64,
    /// Time of its last click (ms).
    pub last: u64,
    /// Clicks in it.
    pub clicks: u64,
}

/// Groups each user's clicks into sessions separated by at least `gap_ms` of quiet.
#[derive(Clone, Copy, Debug)]
pub struct Sessionize {
    /// The quiet time that ends a session (ms).
    pub gap_ms: u64,
}

impl Sessionize {
    /// When the session ending at `last` is complete.
    fn closes_at(&self, last: u64) -> u64 {
        last + self.gap_ms - 1
    }
}

impl Operator for Sessionize {
    /// The user's open sessions, by start, each at least `gap_ms` from the next.
    type State = Vec<Session>;

    fn timers(&self) -> TimerUse {
        TimerUse::EVENT
    }

    fn process(&self, input: &Batch, ctx: &mut Context<'_, Vec<Session>>) {
        for (r, time) in input.iter_timed() {
            let Some(t) = time else {
                ctx.reject("click without a time");
                continue;
            };
            let gap = self.gap_ms;
            let sessions = ctx.state(r);
            // Every session within the gap of `t` merges with it (out-of-order clicks can
            // join two sessions).
            let near = |s: &Session| t + gap > s.start && t < s.last + gap;
            let mut merged = Session { start: t, last: t, clicks: 1 };
            let mut replaced = Vec::new();
            sessions.retain(|s| {
                if near(s) {
                    merged.start = merged.start.min(s.start);
                    merged.last = merged.last.max(s.last);
                    merged.clicks += s.clicks;
                    replaced.push(s.last);
                }
                !near(s)
            });
            let at = sessions.partition_point(|s| s.start < merged.start);
            sessions.insert(at, merged);
            for last in replaced {
                ctx.delete_event_timer(r, self.closes_at(last));
            }
            ctx.set_event_timer(r, self.closes_at(merged.last));
        }
    }

    fn on_timer(&self, timer: clasp::Timer<'_>, ctx: &mut Context<'_, Vec<Session>>) {
        let r = timer.record();
        let Some(sessions) = ctx.existing_state(r) else { return };
        let (done, open): (Vec<Session>, Vec<Session>) =
            sessions.iter().partition(|s| self.closes_at(s.last) <= timer.time);
        *sessions = open;
        let empty = sessions.is_empty();
        for s in done {
            let value = format!("{},{},{}", s.start, s.last, s.clicks);
            ctx.emit_at(s.last, r.key, value.as_bytes());
        }
        if empty {
            ctx.remove_state(r);
        }
    }
}

/// A click's event time: the second field of `user,time_ms`.
pub fn click_time(line: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(line).ok()?;
    text.split(',').nth(1)?.trim().parse().ok()
}

/// `count` clicks of `users` users from `seed`, in arrival order: click `i` happens at a time
/// growing by 1–20 ms per click, and arrives up to `disorder_ms` out of order (each click is
/// delayed by less than `disorder_ms`, so none arrives after one more than `disorder_ms`
/// newer).
pub fn clicks(count: usize, users: u32, disorder_ms: u64, seed: u64) -> Vec<String> {
    let mut rng = SeededRng::seed_from_u64(seed);
    let mut time = 0u64;
    let mut timed: Vec<(u64, u64, u32)> = (0..count)
        .map(|_| {
            time += rng.random_range(1..=20);
            let delay = if disorder_ms == 0 { 0 } else { rng.random_range(0..disorder_ms) };
            (time + delay, time, rng.random_range(0..users.max(1)))
        })
        .collect();
    timed.sort_unstable();
    timed.into_iter().map(|(_, t, u)| format!("u{u},{t}")).collect()
}

/// Registers `sessions.sessionize` (params: `gap_ms`, default 300), the event-time function
/// `sessions.time`, and the input `--input sessions:COUNT` (40 users, 200 ms out of order).
pub fn register(r: &mut Registry) {
    r.register("sessions.sessionize", |op| {
        let gap_ms = match op.params.get("gap_ms") {
            None => 300,
            Some(v) => v
                .as_u64()
                .filter(|g| *g > 0)
                .ok_or_else(|| format!("gap_ms must be a positive integer, not {v}"))?,
        };
        Ok(clasp::core::operator::erase(Sessionize { gap_ms }))
    });
    r.register_event_time("sessions.time", click_time);
    r.register_source("sessions", |arg, seed| {
        let count: usize = arg.parse().map_err(|_| format!("`{arg}` is not a number of clicks"))?;
        let lines: Vec<Vec<u8>> =
            clicks(count, 40, 200, seed).into_iter().map(String::into_bytes).collect();
        let time: clasp::core::registry::EventTimeFn = Arc::new(click_time);
        Ok(from_lines(Box::new(MemoryLines::new(Arc::new(lines), 0, 1)), Some(time)))
    });
}
