//! The event queues. Time is an integer number of nanoseconds, so ordering is exact.
//!
//! Most events are request deliveries, and every delivery of one kind has the same delay; a
//! [`DelayLine`] is therefore a FIFO whose entries are already in time order (O(1) per event,
//! no heap). Executions finishing are kept per worker (see `worker`). Everything else — input
//! arrivals, statistics ticks, migration steps — is rare and goes through [`Timers`], a binary
//! heap ordered by (time, insertion number), which makes equal-time events deterministic.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Simulated time in nanoseconds.
pub type Nanos = u64;

/// Nanoseconds in one microsecond.
pub const NS_PER_US: f64 = 1_000.0;

/// Microseconds (≥ 0) as nanoseconds, rounded to the nearest.
#[inline]
pub fn us_to_ns(us: f64) -> Nanos {
    (us * NS_PER_US).round().max(0.0) as Nanos
}

/// Seconds (≥ 0) as nanoseconds.
#[inline]
pub fn s_to_ns(s: f64) -> Nanos {
    (s * 1e9).round().max(0.0) as Nanos
}

/// Nanoseconds as seconds.
#[inline]
pub fn ns_to_s(ns: Nanos) -> f64 {
    ns as f64 / 1e9
}

/// One request on its way to a worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Req {
    /// The input chain it belongs to (index into the chain table).
    pub chain: u32,
    /// The operator it invokes.
    pub op: u16,
    /// Its key group (meaningful for keyed operators).
    pub group: u16,
    /// When it entered the current worker's queue.
    pub enqueued: Nanos,
}

/// A request due at a worker.
#[derive(Clone, Copy, Debug)]
pub struct Delivery {
    /// When it arrives.
    pub due: Nanos,
    /// The receiving worker.
    pub to: u32,
    /// The request.
    pub req: Req,
}

/// A FIFO of deliveries that all take the same delay, hence leave in the order they entered.
#[derive(Debug)]
pub struct DelayLine {
    delay: Nanos,
    queue: VecDeque<Delivery>,
}

impl DelayLine {
    /// A line with a fixed delay.
    pub fn new(delay: Nanos) -> Self {
        Self { delay, queue: VecDeque::with_capacity(1024) }
    }

    /// Sends `req` to worker `to` at `now`.
    #[inline]
    pub fn send(&mut self, now: Nanos, to: u32, req: Req) {
        self.queue.push_back(Delivery { due: now + self.delay, to, req });
    }

    /// When the next delivery is due.
    #[inline]
    pub fn next_due(&self) -> Option<Nanos> {
        self.queue.front().map(|d| d.due)
    }

    /// Takes the next delivery.
    #[inline]
    pub fn pop(&mut self) -> Option<Delivery> {
        self.queue.pop_front()
    }

    /// Deliveries in transit.
    pub fn len(&self) -> usize {
        self.queue.len()
    }

    /// Whether nothing is in transit.
    pub fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }
}

/// Rare events, in (time, insertion) order.
#[derive(Debug)]
pub struct Timers<T> {
    heap: BinaryHeap<Reverse<(Nanos, u64, Slot<T>)>>,
    next: u64,
}

/// Wraps a payload so the heap orders by time and insertion number only.
#[derive(Debug)]
struct Slot<T>(T);

impl<T> PartialEq for Slot<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl<T> Eq for Slot<T> {}
impl<T> PartialOrd for Slot<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Slot<T> {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl<T> Default for Timers<T> {
    fn default() -> Self {
        Self { heap: BinaryHeap::new(), next: 0 }
    }
}

impl<T> Timers<T> {
    /// Schedules `event` at `at`.
    pub fn at(&mut self, at: Nanos, event: T) {
        self.heap.push(Reverse((at, self.next, Slot(event))));
        self.next += 1;
    }

    /// When the next timer fires.
    #[inline]
    pub fn next_due(&self) -> Option<Nanos> {
        self.heap.peek().map(|Reverse((t, _, _))| *t)
    }

    /// Takes the next timer.
    pub fn pop(&mut self) -> Option<(Nanos, T)> {
        self.heap.pop().map(|Reverse((t, _, Slot(e)))| (t, e))
    }

    /// Timers pending.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether no timer is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_fire_in_time_then_insertion_order() {
        let mut t = Timers::default();
        t.at(5, 'a');
        t.at(3, 'b');
        t.at(5, 'c');
        t.at(3, 'd');
        let order: Vec<char> = std::iter::from_fn(|| t.pop().map(|(_, e)| e)).collect();
        assert_eq!(order, ['b', 'd', 'a', 'c']);
    }

    #[test]
    fn delay_lines_keep_time_order() {
        let mut l = DelayLine::new(100);
        let r = Req { chain: 0, op: 0, group: 0, enqueued: 0 };
        l.send(5, 1, r);
        l.send(7, 2, r);
        assert_eq!(l.next_due(), Some(105));
        assert_eq!(l.pop().unwrap().to, 1);
        assert_eq!(l.pop().unwrap().due, 107);
        assert!(l.is_empty());
        assert_eq!(
            (us_to_ns(1.5), s_to_ns(2.0), ns_to_s(500_000_000)),
            (1_500, 2_000_000_000, 0.5)
        );
    }
}
