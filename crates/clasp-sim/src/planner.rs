//! The planner's input side: the queue sources fill, and the counters of what was offered.
//! Dispatching (routing each input to a worker) is done by the engine, which owns the routing.

use crate::events::Nanos;
use clasp_core::report::Gaps;
use std::collections::VecDeque;

/// The planner's input queue.
#[derive(Debug)]
pub struct Planner {
    /// Arrival times of queued inputs.
    queue: VecDeque<Nanos>,
    /// Queue capacity.
    capacity: usize,
    /// Inputs waiting for room in the queue (their source is blocked).
    blocked: u64,
    /// The source offers inputs as fast as they are taken.
    pub unthrottled: bool,
    /// Most chains in flight.
    pub max_in_flight: u32,
    /// Inputs dispatched so far.
    pub dispatched: u64,
    /// Inputs offered in the current interval.
    pub interval_inputs: u64,
    /// Start of the current interval's last quarter, and the inputs offered since.
    recent_from: Nanos,
    recent_inputs: u64,
    /// Index of the next paced arrival.
    pub next_paced: u64,
    queue_area: f64,
    last: Nanos,
    /// When the last input was dispatched, and the gaps between dispatches this interval.
    last_dispatch: Option<Nanos>,
    gaps: Gaps,
}

impl Planner {
    /// A planner queue of `capacity` inputs dispatching at most `max_in_flight` chains.
    pub fn new(capacity: u32, max_in_flight: u32, unthrottled: bool) -> Self {
        Self {
            queue: VecDeque::new(),
            capacity: capacity as usize,
            blocked: 0,
            unthrottled,
            max_in_flight,
            dispatched: 0,
            interval_inputs: 0,
            recent_from: 0,
            recent_inputs: 0,
            next_paced: 0,
            queue_area: 0.0,
            last: 0,
            last_dispatch: None,
            gaps: Gaps::default(),
        }
    }

    fn count_input(&mut self, now: Nanos) {
        self.interval_inputs += 1;
        if now >= self.recent_from {
            self.recent_inputs += 1;
        }
    }

    fn touch(&mut self, now: Nanos) {
        self.queue_area += self.len() as f64 * (now - self.last) as f64 * 1e-9;
        self.last = now;
    }

    /// An input offered at `now`: queued, or its source blocks when the queue is full.
    pub fn offer(&mut self, now: Nanos) {
        self.touch(now);
        self.count_input(now);
        if self.queue.len() < self.capacity {
            self.queue.push_back(now);
        } else {
            self.blocked += 1;
        }
    }

    /// Takes the next input to dispatch (for an unthrottled source there always is one);
    /// a blocked source gets its input into the freed place.
    pub fn take(&mut self, now: Nanos) -> bool {
        if self.unthrottled {
            self.count_input(now);
            self.count_dispatch(now);
            return true;
        }
        self.touch(now);
        if self.queue.pop_front().is_none() {
            return false;
        }
        if self.blocked > 0 {
            self.blocked -= 1;
            self.queue.push_back(now);
        }
        self.count_dispatch(now);
        true
    }

    fn count_dispatch(&mut self, now: Nanos) {
        self.dispatched += 1;
        if let Some(last) = self.last_dispatch.replace(now) {
            self.gaps.push(now.saturating_sub(last) as f64 / 1e3);
        }
    }

    /// Inputs waiting, blocked ones included.
    pub fn len(&self) -> u64 {
        self.queue.len() as u64 + self.blocked
    }

    /// Whether no input waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ends an interval at `now`: the mean queue over it (of length `secs`), the inputs
    /// offered in it, and those offered in its last quarter with that quarter's length (s).
    /// The next interval ends at `next`.
    pub fn take_interval(&mut self, now: Nanos, secs: f64, next: Nanos) -> IntervalInputs {
        self.touch(now);
        let mean_queue = self.queue_area / secs.max(1e-12);
        self.queue_area = 0.0;
        let recent_s = crate::events::ns_to_s(now.saturating_sub(self.recent_from));
        self.recent_from = now + next.saturating_sub(now) * 3 / 4;
        IntervalInputs {
            mean_queue,
            inputs: std::mem::take(&mut self.interval_inputs),
            recent_inputs: std::mem::take(&mut self.recent_inputs),
            recent_s,
            gaps: std::mem::take(&mut self.gaps),
        }
    }
}

/// What entered the planner in one interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IntervalInputs {
    /// Mean queue over the interval.
    pub mean_queue: f64,
    /// Inputs offered.
    pub inputs: u64,
    /// Inputs offered in the interval's last quarter.
    pub recent_inputs: u64,
    /// Length of that quarter (s).
    pub recent_s: f64,
    /// The gaps between the inputs dispatched in it.
    pub gaps: Gaps,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_queue_blocks_the_source() {
        let mut p = Planner::new(2, 10, false);
        for t in 0..3 {
            p.offer(t);
        }
        assert_eq!(p.len(), 3);
        assert!(p.take(10) && p.take(10) && p.take(10));
        assert!(!p.take(10));
        assert_eq!(p.dispatched, 3);
        let taken = p.take_interval(20, 1.0, 60);
        assert_eq!((taken.inputs, taken.recent_inputs), (3, 3));
        // The next interval's last quarter begins at 50.
        for t in [30, 49, 50, 55] {
            p.offer(t);
        }
        let taken = p.take_interval(60, 1.0, 100);
        assert_eq!((taken.inputs, taken.recent_inputs), (4, 2));
        assert!((taken.recent_s - 10e-9).abs() < 1e-15);
        let mut u = Planner::new(1, 10, true);
        assert!(u.take(0) && u.take(0));
        assert_eq!(u.take_interval(1, 1.0, 2).inputs, 2);
    }
}
