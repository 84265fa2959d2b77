//! Event time and processing time: watermarks generated at sources, and the timers operators
//! set per key.
//!
//! A record may carry an event time, a `u64` in whatever unit its application uses
//! (milliseconds, days, …). A source whose records have times generates a watermark with
//! [`BoundedOutOfOrderness`]: after the largest time `m` seen so far the watermark is
//! `m − bound − 1`, the promise that no further record has a time at or below it. An operator's
//! watermark is the minimum over the sources upstream of it, so a multi-input operator follows
//! its slowest input.
//!
//! An event-time timer set for time `t` fires once the operator's watermark reaches
//! `t + allowed_lateness` (the operator's `allowed_lateness` in its spec), and a record whose
//! time `t` has `t + allowed_lateness ≤` the watermark under which its chain entered is late:
//! counted (reason `late`), never passed to the operator. So every record an operator is given
//! comes before the timers it could affect, whatever the arrival order and the worker count.
//! Processing-time timers fire once the clock (ns since the Unix epoch) passes their time.
//! When the input ends every pending timer fires.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// The processing-time clock: ns since the Unix epoch, which every process on a host shares.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Which clock a timer follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum TimeDomain {
    /// The records' event time, advanced by watermarks.
    Event,
    /// The wall clock: ns since the Unix epoch.
    Processing,
}

/// The timers an operator uses; the runtime fires (and checks lateness) only for operators
/// that use them, so an operator without timers pays nothing for them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimerUse {
    /// Event-time timers (and the late-record check against the watermark).
    pub event: bool,
    /// Processing-time timers.
    pub processing: bool,
}

impl TimerUse {
    /// No timers.
    pub const NONE: Self = Self { event: false, processing: false };
    /// Event-time timers only.
    pub const EVENT: Self = Self { event: true, processing: false };
    /// Processing-time timers only.
    pub const PROCESSING: Self = Self { event: false, processing: true };
    /// Both kinds.
    pub const BOTH: Self = Self { event: true, processing: true };

    /// Whether the operator uses timers of `domain`.
    pub fn uses(self, domain: TimeDomain) -> bool {
        match domain {
            TimeDomain::Event => self.event,
            TimeDomain::Processing => self.processing,
        }
    }
}

/// The watermark of a source whose records are at most `bound` out of order: after the largest
/// time `m` seen, `m − bound − 1` (none before the first timed record).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BoundedOutOfOrderness {
    bound: u64,
    max_seen: Option<u64>,
}

impl BoundedOutOfOrderness {
    /// A generator for records at most `bound` time units out of order.
    pub fn new(bound: u64) -> Self {
        Self { bound, max_seen: None }
    }

    /// Takes a record's time into account.
    #[inline]
    pub fn observe(&mut self, time: u64) {
        if self.max_seen.is_none_or(|m| time > m) {
            self.max_seen = Some(time);
        }
    }

    /// The current watermark: no further in-bound record has a time at or below it.
    pub fn watermark(&self) -> Option<u64> {
        self.max_seen.and_then(|m| m.checked_sub(self.bound + 1))
    }
}

/// Whether a record of time `time` is late for an operator with `allowed_lateness`, under the
/// watermark `watermark` its chain entered with.
#[inline]
pub fn is_late(time: u64, allowed_lateness: u64, watermark: u64) -> bool {
    time.saturating_add(allowed_lateness) <= watermark
}

/// The latest timer time due once an operator with `allowed_lateness` has `watermark`.
pub fn due_until(watermark: u64, allowed_lateness: u64) -> Option<u64> {
    if watermark == u64::MAX { Some(u64::MAX) } else { watermark.checked_sub(allowed_lateness) }
}

/// One timer that fired, as the operator's `on_timer` sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timer<'a> {
    /// The key the timer was set for.
    pub key: &'a [u8],
    /// The time it was set for.
    pub time: u64,
    /// Its clock.
    pub domain: TimeDomain,
}

/// The pending timers of one key group: ordered by time, then key, so they fire in a fixed
/// order whatever order they were set in. Setting a timer twice keeps one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerQueue {
    event: BTreeSet<(u64, Box<[u8]>)>,
    processing: BTreeSet<(u64, Box<[u8]>)>,
}

impl TimerQueue {
    fn set_of(&mut self, domain: TimeDomain) -> &mut BTreeSet<(u64, Box<[u8]>)> {
        match domain {
            TimeDomain::Event => &mut self.event,
            TimeDomain::Processing => &mut self.processing,
        }
    }

    /// Sets a timer (no effect if the same one is pending).
    pub fn set(&mut self, domain: TimeDomain, time: u64, key: &[u8]) {
        let set = self.set_of(domain);
        let probe = (time, Box::<[u8]>::from(key));
        if !set.contains(&probe) {
            set.insert(probe);
        }
    }

    /// Removes a pending timer; returns whether it was there.
    pub fn delete(&mut self, domain: TimeDomain, time: u64, key: &[u8]) -> bool {
        self.set_of(domain).remove(&(time, Box::<[u8]>::from(key)))
    }

    /// Moves the timers of `domain` due by `until` (time ≤ `until`) into `out`, in firing order.
    pub fn take_due(&mut self, domain: TimeDomain, until: u64, out: &mut Vec<(u64, Box<[u8]>)>) {
        let set = self.set_of(domain);
        while let Some(first) = set.first() {
            if first.0 > until {
                break;
            }
            out.extend(set.pop_first());
        }
    }

    /// Pending timers of both domains.
    pub fn len(&self) -> usize {
        self.event.len() + self.processing.len()
    }

    /// Whether no timer is pending.
    pub fn is_empty(&self) -> bool {
        self.event.is_empty() && self.processing.is_empty()
    }

    /// Every pending timer's key, for checks on import.
    pub fn keys(&self) -> impl Iterator<Item = &[u8]> {
        self.event.iter().chain(&self.processing).map(|(_, k)| &k[..])
    }

    /// The earliest pending timer of `domain`.
    pub fn next(&self, domain: TimeDomain) -> Option<u64> {
        match domain {
            TimeDomain::Event => self.event.first().map(|t| t.0),
            TimeDomain::Processing => self.processing.first().map(|t| t.0),
        }
    }

    /// Adds every timer of `other`.
    pub fn absorb(&mut self, other: TimerQueue) {
        self.event.extend(other.event);
        self.processing.extend(other.processing);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watermark_trails_the_largest_time_by_the_bound() {
        let mut w = BoundedOutOfOrderness::new(5);
        assert_eq!(w.watermark(), None);
        w.observe(3);
        assert_eq!(w.watermark(), None, "3 - 5 - 1 is below zero");
        w.observe(20);
        w.observe(12);
        assert_eq!(w.watermark(), Some(14));
        assert!(is_late(14, 0, 14) && !is_late(15, 0, 14) && !is_late(12, 3, 14));
        assert_eq!(due_until(14, 4), Some(10));
        assert_eq!(due_until(3, 4), None);
        assert_eq!(due_until(u64::MAX, 4), Some(u64::MAX));
    }

    #[test]
    fn timers_fire_in_time_then_key_order_once_each() {
        let mut q = TimerQueue::default();
        for (t, k) in [(9, &b"b"[..]), (3, b"z"), (9, b"a"), (3, b"z"), (12, b"c")] {
            q.set(TimeDomain::Event, t, k);
        }
        q.set(TimeDomain::Processing, 1, b"p");
        assert_eq!(q.len(), 5);
        assert!(q.delete(TimeDomain::Event, 12, b"c"));
        assert!(!q.delete(TimeDomain::Event, 12, b"c"));
        let mut due = Vec::new();
        q.take_due(TimeDomain::Event, 9, &mut due);
        let due: Vec<(u64, &[u8])> = due.iter().map(|(t, k)| (*t, &k[..])).collect();
        assert_eq!(due, [(3, &b"z"[..]), (9, b"a"), (9, b"b")]);
        assert_eq!(q.next(TimeDomain::Processing), Some(1));
        assert_eq!(q.next(TimeDomain::Event), None);
    }
}
