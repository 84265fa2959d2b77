//! End-to-end chains: an input request and every chained request it causes. A chain is done
//! when its last request finishes; its latency runs from when it left the planner's queue to
//! that moment (the runtime's definition). Latencies go into HDR histograms (µs, 3 significant
//! digits).

use crate::events::Nanos;
use hdrhistogram::Histogram;

/// Open chains and the latency of finished ones.
#[derive(Debug)]
pub struct Chains {
    start: Vec<Nanos>,
    pending: Vec<u32>,
    free: Vec<u32>,
    open: u32,
    /// Latency (µs) of chains finished in the measured period.
    pub total: Histogram<u64>,
    /// Latency (µs) of chains finished in the current statistics interval.
    pub interval: Histogram<u64>,
    /// Chains finished in the measured period.
    pub measured: u64,
    /// Chains finished in the current statistics interval.
    pub interval_done: u64,
    /// Whether finished chains are measured yet (the warm-up is over).
    pub measuring: bool,
    /// ∫ chains in flight dt since the last [`Chains::restart_area`] (chain·s).
    area: f64,
    last: Nanos,
}

/// A latency histogram from 1 µs to one hour.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

impl Default for Chains {
    fn default() -> Self {
        Self {
            start: Vec::new(),
            pending: Vec::new(),
            free: Vec::new(),
            open: 0,
            total: histogram(),
            interval: histogram(),
            measured: 0,
            interval_done: 0,
            measuring: false,
            area: 0.0,
            last: 0,
        }
    }
}

impl Chains {
    /// Opens a chain that left the planner at `now` with `requests` requests; returns its id.
    #[inline]
    pub fn open(&mut self, now: Nanos, requests: u32) -> u32 {
        self.touch(now);
        self.open += 1;
        match self.free.pop() {
            Some(id) => {
                self.start[id as usize] = now;
                self.pending[id as usize] = requests;
                id
            }
            None => {
                self.start.push(now);
                self.pending.push(requests);
                (self.start.len() - 1) as u32
            }
        }
    }

    /// A request of `chain` finished at `now` having sent `children` chained requests; returns
    /// whether that finished the chain.
    #[inline]
    pub fn finish_request(&mut self, chain: u32, children: u32, now: Nanos) -> bool {
        let p = &mut self.pending[chain as usize];
        *p = *p + children - 1;
        if *p > 0 {
            return false;
        }
        self.close(chain, now);
        true
    }

    /// Closes `chain` at `now` and records its latency.
    pub fn close(&mut self, chain: u32, now: Nanos) {
        self.touch(now);
        let micros = (now.saturating_sub(self.start[chain as usize]) / 1_000).max(1);
        self.free.push(chain);
        self.open -= 1;
        let _ = self.interval.record(micros);
        self.interval_done += 1;
        if self.measuring {
            let _ = self.total.record(micros);
            self.measured += 1;
        }
    }

    #[inline]
    fn touch(&mut self, now: Nanos) {
        self.area += f64::from(self.open) * (now - self.last) as f64 * 1e-9;
        self.last = now;
    }

    /// Starts integrating the chains in flight afresh at `now`.
    pub fn restart_area(&mut self, now: Nanos) {
        self.touch(now);
        self.area = 0.0;
    }

    /// ∫ chains in flight dt from the last restart to `now` (chain·s).
    pub fn area(&mut self, now: Nanos) -> f64 {
        self.touch(now);
        self.area
    }

    /// Chains not finished.
    pub fn in_flight(&self) -> u32 {
        self.open
    }

    /// Ends the statistics interval: returns the chains finished in it and their histogram.
    pub fn take_interval(&mut self) -> (u64, Histogram<u64>) {
        let h = std::mem::replace(&mut self.interval, histogram());
        (std::mem::take(&mut self.interval_done), h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chain_finishes_with_its_last_request() {
        let mut c = Chains { measuring: true, ..Chains::default() };
        let a = c.open(1_000, 1);
        // The first request sends three; two of them finish without children.
        assert!(!c.finish_request(a, 3, 5_000));
        assert!(!c.finish_request(a, 0, 6_000));
        assert!(!c.finish_request(a, 0, 7_000));
        assert_eq!(c.in_flight(), 1);
        assert!(c.finish_request(a, 0, 9_000));
        assert_eq!((c.in_flight(), c.measured), (0, 1));
        assert_eq!(c.total.max(), 8);
        // One chain open for 8 µs.
        assert!((c.area(20_000) - 8e-6).abs() < 1e-15);
        // Its slot is reused.
        assert_eq!(c.open(30_000, 2), a);
        let (n, h) = c.take_interval();
        assert_eq!((n, h.len(), c.interval_done), (1, 1, 0));
    }
}
