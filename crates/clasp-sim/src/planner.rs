//! The planner's input side: the queue sources fill, and the counters of what was offered.
//! Dispatching (routing each input to a worker) is done by the engine, which owns the routing.

use crate::events::Nanos;
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
    /// Index of the next paced arrival.
    pub next_paced: u64,
    queue_area: f64,
    last: Nanos,
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
            next_paced: 0,
            queue_area: 0.0,
            last: 0,
        }
    }

    fn touch(&mut self, now: Nanos) {
        self.queue_area += self.len() as f64 * (now - self.last) as f64 * 1e-9;
        self.last = now;
    }

    /// An input offered at `now`: queued, or its source blocks when the queue is full.
    pub fn offer(&mut self, now: Nanos) {
        self.touch(now);
        self.interval_inputs += 1;
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
            self.interval_inputs += 1;
            self.dispatched += 1;
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
        self.dispatched += 1;
        true
    }

    /// Inputs waiting, blocked ones included.
    pub fn len(&self) -> u64 {
        self.queue.len() as u64 + self.blocked
    }

    /// Whether no input waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ends an interval at `now`: the mean queue over it (of length `secs`) and the inputs
    /// offered in it.
    pub fn take_interval(&mut self, now: Nanos, secs: f64) -> (f64, u64) {
        self.touch(now);
        let mean = self.queue_area / secs.max(1e-12);
        self.queue_area = 0.0;
        (mean, std::mem::take(&mut self.interval_inputs))
    }
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
        let (_, offered) = p.take_interval(20, 1.0);
        assert_eq!(offered, 3);
        let mut u = Planner::new(1, 10, true);
        assert!(u.take(0) && u.take(0));
        assert_eq!(u.take_interval(1, 1.0).1, 2);
    }
}
