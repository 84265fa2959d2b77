//! End-to-end tracking of input chains by returned credit. Chains of fired timers are tracked
//! for completion only: they are no input's latency.

use crate::request::FULL_CREDIT;
use crate::wire::CreditReturn;
use clasp_core::report::Gaps;
use hdrhistogram::Histogram;
use std::collections::BTreeMap;

#[derive(Debug)]
struct Open {
    start_ns: u64,
    missing: u64,
    latest_ns: u64,
    /// Whether its completion counts in the latency and throughput statistics.
    counted: bool,
    bytes: u64,
}

/// Open chains, completions and latency histograms.
#[derive(Debug)]
pub struct Chains {
    next: u64,
    open: BTreeMap<u64, Open>,
    origin_ns: u64,
    /// Latency of every completed chain (µs).
    pub total: Histogram<u64>,
    /// Latency of chains completed since the last [`Chains::take_interval`] (µs).
    pub interval: Histogram<u64>,
    /// Chains completed, per second since `origin_ns` (by completion time).
    pub per_second: Vec<u64>,
    /// Chains completed.
    pub completed: u64,
    /// Credit returns for chains no longer open (a bug if ever non-zero).
    pub stray: u64,
    /// Bytes of input records of the open chains.
    bytes: u64,
    /// Watching for a first completion, and its time once it came.
    first_watch: Option<Option<u64>>,
    /// Checkpoint boundaries so far: the cut of the chains opened now.
    cut: u64,
    /// The first chain of the current cut.
    cut_from: u64,
    /// When the last input request was dispatched, and the gaps between dispatches since the
    /// last [`Chains::take_gaps`].
    last_dispatch_ns: Option<u64>,
    gaps: Gaps,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

impl Chains {
    /// Tracking that counts seconds from `origin_ns`.
    pub fn new(origin_ns: u64) -> Self {
        Self {
            next: 0,
            open: BTreeMap::new(),
            origin_ns,
            total: histogram(),
            interval: histogram(),
            per_second: Vec::new(),
            completed: 0,
            stray: 0,
            bytes: 0,
            first_watch: None,
            cut: 0,
            cut_from: 0,
            last_dispatch_ns: None,
            gaps: Gaps::default(),
        }
    }

    /// An input request was dispatched to the workers at `now_ns`.
    pub fn dispatched_at(&mut self, now_ns: u64) {
        if let Some(last) = self.last_dispatch_ns.replace(now_ns) {
            self.gaps.push(now_ns.saturating_sub(last) as f64 / 1e3);
        }
    }

    /// The gaps between dispatches since the last call.
    pub fn take_gaps(&mut self) -> Gaps {
        std::mem::take(&mut self.gaps)
    }

    /// The cut of the chains opened now (checkpoint boundaries so far).
    pub fn cut(&self) -> u64 {
        self.cut
    }

    /// Starts the next cut at the next chain to open; returns it.
    pub fn begin_cut(&mut self) -> u64 {
        self.cut += 1;
        self.cut_from = self.next;
        self.cut
    }

    /// Whether a chain opened before the current cut is still open.
    pub fn earlier_cut_open(&self) -> bool {
        self.oldest_open().is_some_and(|id| id < self.cut_from)
    }

    /// Opens a chain of `bytes` bytes of input records that left the planner queue at
    /// `start_ns`; returns its id.
    pub fn open(&mut self, start_ns: u64, bytes: u64) -> u64 {
        let id = self.next;
        self.next += 1;
        self.open.insert(
            id,
            Open { start_ns, missing: FULL_CREDIT, latest_ns: start_ns, counted: true, bytes },
        );
        self.bytes += bytes;
        id
    }

    /// Forgets every open chain (a recovery replays their inputs); their ids are never given
    /// again, so credit still arriving for them counts as stray. Returns how many there were.
    pub fn abandon_all(&mut self) -> usize {
        let n = self.open.len();
        self.open.clear();
        self.bytes = 0;
        n
    }

    /// Opens a chain of fired timers: tracked until complete, counted in no statistics.
    pub fn open_uncounted(&mut self, start_ns: u64) -> u64 {
        let id = self.open(start_ns, 0);
        if let Some(c) = self.open.get_mut(&id) {
            c.counted = false;
        }
        id
    }

    /// The oldest chain not complete yet.
    pub fn oldest_open(&self) -> Option<u64> {
        self.open.keys().next().copied()
    }

    /// Whether chain `id` is still open.
    pub fn is_open(&self, id: u64) -> bool {
        self.open.contains_key(&id)
    }

    /// The id the next chain will get.
    pub fn next_id(&self) -> u64 {
        self.next
    }

    /// Bytes of input records in chains not complete yet.
    pub fn bytes_in_flight(&self) -> u64 {
        self.bytes
    }

    /// Chains not complete yet.
    pub fn in_flight(&self) -> usize {
        self.open.len()
    }

    /// Applies credit returned by `now_ns`; returns how many chains completed. A completion
    /// time after `now_ns` (another host's clock, or a bad peer) counts as `now_ns`: it also
    /// picks the per-second slot, which must not run ahead of the run.
    pub fn settle(&mut self, returns: &[CreditReturn], now_ns: u64) -> usize {
        let mut completed = 0;
        for r in returns {
            let Some(c) = self.open.get_mut(&r.chain) else {
                self.stray += 1;
                continue;
            };
            c.missing = c.missing.saturating_sub(r.credit);
            c.latest_ns = c.latest_ns.max(r.done_ns.min(now_ns));
            if c.missing == 0 {
                let c = self.open.remove(&r.chain).expect("present");
                self.bytes -= c.bytes;
                if c.counted {
                    self.complete(c.start_ns, c.latest_ns);
                }
                completed += 1;
            }
        }
        completed
    }

    fn complete(&mut self, start_ns: u64, done_ns: u64) {
        let micros = (done_ns.saturating_sub(start_ns) / 1000).max(1);
        let _ = self.total.record(micros);
        let _ = self.interval.record(micros);
        let second = (done_ns.saturating_sub(self.origin_ns) / 1_000_000_000) as usize;
        if self.per_second.len() <= second {
            self.per_second.resize(second + 1, 0);
        }
        self.per_second[second] += 1;
        self.completed += 1;
        if let Some(first @ None) = &mut self.first_watch {
            *first = Some(done_ns);
        }
    }

    /// The interval histogram, replaced by an empty one.
    pub fn take_interval(&mut self) -> Histogram<u64> {
        std::mem::replace(&mut self.interval, histogram())
    }

    /// Watches for the next chain to complete (a recovery resumed): see
    /// [`Chains::first_completion_ns`].
    pub fn watch_first_completion(&mut self) {
        self.first_watch = Some(None);
    }

    /// When the first chain completed since [`Chains::watch_first_completion`], if one did.
    pub fn first_completion_ns(&self) -> Option<u64> {
        self.first_watch.flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::split_credit;

    #[test]
    fn a_chain_completes_when_all_its_credit_is_back() {
        let mut c = Chains::new(0);
        let id = c.open(1_000, 300);
        let other = c.open(1_000, 50);
        assert_eq!(c.bytes_in_flight(), 350);
        let shares: Vec<u64> = split_credit(FULL_CREDIT, 3).collect();
        let ret = |credit, done_ns| CreditReturn { chain: id, credit, done_ns };
        assert_eq!(c.settle(&[ret(shares[0], 5_000), ret(shares[1], 9_000)], 10_000), 0);
        assert_eq!((c.in_flight(), c.bytes_in_flight()), (2, 350));
        assert_eq!(c.settle(&[ret(shares[2], 3_000)], 10_000), 1);
        assert_eq!((c.in_flight(), c.completed, c.bytes_in_flight()), (1, 1, 50));
        let done = CreditReturn { chain: other, credit: FULL_CREDIT, done_ns: 2_000 };
        assert_eq!(c.settle(&[done], 10_000), 1);
        assert_eq!(c.bytes_in_flight(), 0);
        // Latency is the latest completion minus the start: 8 µs for the first chain, 1 µs
        // for the other.
        assert_eq!((c.total.min(), c.total.max(), c.total.len()), (1, 8, 2));
        assert_eq!(c.settle(&[ret(1, 1)], 10_000), 0);
        assert_eq!(c.stray, 1);
    }

    #[test]
    fn abandoned_chains_never_complete_and_their_ids_are_not_reused() {
        let mut c = Chains::new(0);
        let old = c.open(0, 100);
        assert_eq!(c.abandon_all(), 1);
        assert_eq!(c.bytes_in_flight(), 0, "abandoned chains hold no bytes");
        let new = c.open(0, 40);
        assert_ne!(old, new);
        let full = |chain| CreditReturn { chain, credit: FULL_CREDIT, done_ns: 1 };
        assert_eq!(c.settle(&[full(old)], 10), 0, "late credit of an abandoned chain");
        assert_eq!((c.stray, c.in_flight()), (1, 1));
        assert_eq!(c.bytes_in_flight(), 40);
        assert_eq!(c.settle(&[full(new)], 10), 1);
        assert_eq!(c.bytes_in_flight(), 0);
    }

    #[test]
    fn a_cut_waits_only_for_the_chains_opened_before_it() {
        let mut c = Chains::new(0);
        let before = c.open(0, 0);
        assert_eq!(c.begin_cut(), 1);
        let after = c.open(0, 0);
        assert!(c.earlier_cut_open());
        let full = |chain| CreditReturn { chain, credit: FULL_CREDIT, done_ns: 1 };
        assert_eq!(c.settle(&[full(before)], 10), 1);
        assert!(!c.earlier_cut_open(), "the chain of the new cut does not count");
        assert!(c.is_open(after));
        assert_eq!(c.cut(), 1);
    }

    #[test]
    fn a_completion_time_from_the_future_counts_as_now() {
        let mut c = Chains::new(0);
        let id = c.open(1_000_000_000, 0);
        let now = 5_500_000_000;
        let far = CreditReturn { chain: id, credit: FULL_CREDIT, done_ns: u64::MAX };
        assert_eq!(c.settle(&[far], now), 1);
        // Completed in second 5 of the run, 4.5 s after it started.
        assert_eq!(c.per_second, [0, 0, 0, 0, 0, 1]);
        assert!(c.total.equivalent(c.total.max(), 4_500_000));
    }
}
