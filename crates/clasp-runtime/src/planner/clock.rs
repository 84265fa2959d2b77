//! Watermarks and timer firing, driven by the planner.
//!
//! A source's watermark (computed by its ingress thread as it reads) holds for the pipeline
//! once every chain that entered before it has completed: no record at or before it is still
//! on its way. The clock then fires event-time timers one operator at a time, in topological
//! order ([`Frontiers`]): a firing is a chain like any other, sent to every worker hosting the
//! operator, which fires the timers due in the key groups it holds; the next firing starts
//! when its chain completed, so what fired timers emit has reached the successors before
//! their timers fire. Workers keep no watermark: the firing names the time, and timers live
//! in their key groups, so rescaling and migration move them with the state (no firing runs
//! while a migration does). Processing-time timers fire every [`PROCESSING_TICK`] for the
//! operators that use them, and every pending timer fires when the input ends.

use super::chains::Chains;
use crate::wire::{Cut, Fire};
use clasp_core::frontier::Frontiers;
use clasp_core::time::{TimeDomain, TimerUse};
use clasp_core::{OperatorId, Pipeline, SourceId};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How often processing-time timers are fired.
pub const PROCESSING_TICK: Duration = Duration::from_millis(50);

#[derive(Clone, Copy, Debug)]
enum Advance {
    Source(SourceId, u64),
    End,
}

/// A firing to start: which operator's timers, and the chain it opened.
#[derive(Clone, Copy, Debug)]
pub(super) struct Firing {
    pub(super) op: OperatorId,
    pub(super) fire: Fire,
    pub(super) chain: u64,
    /// Its chain's cut.
    pub(super) cut: Cut,
}

/// See the [module documentation](self).
#[derive(Debug)]
pub(super) struct Clock {
    frontiers: Frontiers,
    /// Operators with processing-time timers.
    processing: Vec<OperatorId>,
    /// Operators whose pending processing-time timers fire at the end.
    at_end: Vec<OperatorId>,
    /// Advances that hold once every chain up to the id completed, in chain order.
    pending: VecDeque<(Option<u64>, Advance)>,
    /// The last watermark registered per source (to register advances only).
    registered: Vec<Option<u64>>,
    ready: VecDeque<(OperatorId, Fire)>,
    firing: Option<Firing>,
    ended: bool,
    /// Whether the end of the input was registered (it may hold later than registered).
    end_registered: bool,
    end_fired: bool,
    paused: bool,
    /// The last poll found nothing due, and nothing changed since (see [`Clock::quiet`]).
    nothing_due: bool,
    last_tick: Instant,
}

impl Clock {
    /// The clock of `p`, whose operators use `timers` (by operator id; an empty list means
    /// unknown: every operator is treated as using event-time timers, and each one's pending
    /// processing-time timers fire at the end).
    pub(super) fn new(p: &Pipeline, timers: &[TimerUse]) -> Self {
        let uses = |o: OperatorId| timers.get(o.index()).copied();
        let frontiers = Frontiers::new(p, |o| uses(o).is_none_or(|t| t.event));
        let processing: Vec<OperatorId> = p
            .topological_order()
            .iter()
            .copied()
            .filter(|o| uses(*o).is_some_and(|t| t.processing))
            .collect();
        let at_end =
            if timers.is_empty() { p.topological_order().to_vec() } else { processing.clone() };
        Self {
            frontiers,
            processing,
            at_end,
            pending: VecDeque::new(),
            registered: vec![None; p.sources.len()],
            ready: VecDeque::new(),
            firing: None,
            ended: false,
            end_registered: false,
            end_fired: false,
            paused: false,
            nothing_due: false,
            last_tick: Instant::now(),
        }
    }

    /// Chain `chain` of `source` was dispatched; once it and every earlier chain completed,
    /// the source's watermark is `watermark`.
    pub(super) fn dispatched(&mut self, chain: u64, source: SourceId, watermark: Option<u64>) {
        let Some(w) = watermark else { return };
        let Some(last) = self.registered.get_mut(source.index()) else { return };
        if last.is_none_or(|l| w > l) {
            *last = Some(w);
            self.pending.push_back((Some(chain), Advance::Source(source, w)));
        }
    }

    /// Every input ended; `last` is the last chain dispatched (none if there was none). Only
    /// the first call counts.
    pub(super) fn inputs_ended(&mut self, last: Option<u64>) {
        if !std::mem::replace(&mut self.end_registered, true) {
            self.pending.push_back((last, Advance::End));
        }
    }

    /// The clock of `p` after a recovery to a checkpoint where the sources had `watermarks`
    /// (by source): they hold at once, as no chain was in flight at a checkpoint. Timers that
    /// fired before the checkpoint are gone from its state, so firing again up to the same
    /// watermarks fires only what was still due then.
    pub(super) fn restarted(p: &Pipeline, timers: &[TimerUse], watermarks: &[Option<u64>]) -> Self {
        let mut clock = Self::new(p, timers);
        for (i, w) in watermarks.iter().enumerate() {
            if let (Some(w), Some(last)) = (*w, clock.registered.get_mut(i)) {
                *last = Some(w);
                clock.pending.push_back((None, Advance::Source(SourceId::from(i), w)));
            }
        }
        clock
    }

    /// Holds firings back (for a migration) until [`Clock::resume`].
    pub(super) fn pause(&mut self) {
        self.paused = true;
    }

    /// Lets firings start again.
    pub(super) fn resume(&mut self) {
        self.paused = false;
    }

    /// Whether a poll (or a tick) can start nothing: no processing-time timers, no firing to
    /// follow, no advance to apply, none queued, and nothing was due at the last poll — the
    /// frontiers change only as a poll applies advances and completed firings. Dispatches and
    /// completions check this before reading the clock, so a pipeline without timers pays
    /// for them no more than this test.
    pub(super) fn quiet(&self) -> bool {
        self.nothing_due
            && self.processing.is_empty()
            && self.firing.is_none()
            && self.pending.is_empty()
            && self.ready.is_empty()
    }

    /// Whether a firing is running.
    pub(super) fn is_firing(&self) -> bool {
        self.firing.is_some()
    }

    /// Queues the processing-time firings due at `now`.
    pub(super) fn tick(&mut self, now: Instant, now_ns: u64) {
        if self.processing.is_empty() || self.ended {
            return;
        }
        if now.saturating_duration_since(self.last_tick) < PROCESSING_TICK {
            return;
        }
        self.last_tick = now;
        for &op in &self.processing {
            if !self.ready.iter().any(|(o, _)| *o == op) {
                self.ready.push_back((op, Fire { domain: TimeDomain::Processing, until: now_ns }));
            }
        }
    }

    /// Applies what completed in `chains` and opens the next firing, if one is due.
    pub(super) fn poll(&mut self, chains: &mut Chains, now_ns: u64) -> Option<Firing> {
        if self.quiet() {
            return None;
        }
        self.nothing_due = false;
        if let Some(f) = self.firing {
            if chains.is_open(f.chain) {
                return None;
            }
            self.firing = None;
            if f.fire.domain == TimeDomain::Event {
                self.frontiers.fired(f.op, f.fire.until);
            }
        }
        let oldest = chains.oldest_open();
        while let Some(&(chain, advance)) = self.pending.front() {
            if chain.is_some_and(|c| oldest.is_some_and(|o| o <= c)) {
                break;
            }
            self.pending.pop_front();
            match advance {
                Advance::Source(s, w) => self.frontiers.advance_source(s, w),
                Advance::End => {
                    self.frontiers.end_all();
                    self.ended = true;
                }
            }
        }
        if self.paused {
            return None;
        }
        let (op, fire) = if let Some((op, until)) = self.frontiers.next_due() {
            (op, Fire { domain: TimeDomain::Event, until })
        } else if let Some(next) = self.ready.pop_front() {
            next
        } else if self.ended && !self.end_fired {
            self.end_fired = true;
            let until = u64::MAX;
            self.ready.extend(
                self.at_end.iter().map(|&o| (o, Fire { domain: TimeDomain::Processing, until })),
            );
            self.ready.pop_front()?
        } else {
            self.nothing_due = true;
            return None;
        };
        let chain = chains.open_uncounted(now_ns);
        let firing = Firing { op, fire, chain, cut: Cut::of(chains.cut()) };
        self.firing = Some(firing);
        Some(firing)
    }

    /// Whether every timer has fired after the end of the input.
    pub(super) fn finished(&self) -> bool {
        self.ended
            && self.end_fired
            && self.firing.is_none()
            && self.ready.is_empty()
            && self.frontiers.next_due().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::FULL_CREDIT;
    use crate::wire::CreditReturn;

    const SPEC: &str = r#"
[[source]]
name = "in"
[[operator]]
name = "a"
[[operator]]
name = "b"
[[sink]]
name = "out"
[[stream]]
from = "in"
to = "a"
[[stream]]
from = "a"
to = "b"
[[stream]]
from = "b"
to = "out"
"#;

    fn complete(c: &mut Chains, chain: u64) {
        c.settle(&[CreditReturn { chain, credit: FULL_CREDIT, done_ns: 1 }], 1);
    }

    #[test]
    fn watermarks_hold_once_earlier_chains_completed_and_fire_in_order() {
        let p = clasp_core::spec::parse(SPEC, "t.toml").unwrap();
        let timers = [TimerUse::EVENT, TimerUse::BOTH];
        let mut clock = Clock::new(&p, &timers);
        let mut c = Chains::new(0);
        let (first, second) = (c.open(0, 0), c.open(0, 0));
        clock.dispatched(first, SourceId(0), Some(10));
        clock.dispatched(second, SourceId(0), Some(20));
        complete(&mut c, second);
        assert!(clock.poll(&mut c, 0).is_none(), "the first chain is still out");
        complete(&mut c, first);
        let f = clock.poll(&mut c, 0).unwrap();
        assert_eq!((f.op, f.fire.until), (OperatorId(0), 20));
        assert!(clock.poll(&mut c, 0).is_none(), "one firing at a time");
        complete(&mut c, f.chain);
        let g = clock.poll(&mut c, 0).unwrap();
        assert_eq!((g.op, g.fire.until), (OperatorId(1), 20), "b follows what a fired");
        // A migration holds the next firing back.
        clock.pause();
        complete(&mut c, g.chain);
        clock.inputs_ended(Some(second));
        assert!(clock.poll(&mut c, 0).is_none());
        clock.resume();
        let mut fired = Vec::new();
        while let Some(f) = clock.poll(&mut c, 0) {
            fired.push((f.op, f.fire.domain, f.fire.until));
            complete(&mut c, f.chain);
        }
        assert_eq!(
            fired,
            [
                (OperatorId(0), TimeDomain::Event, u64::MAX),
                (OperatorId(1), TimeDomain::Event, u64::MAX),
                (OperatorId(1), TimeDomain::Processing, u64::MAX),
            ]
        );
        assert!(clock.finished());
        assert_eq!(c.completed, 2, "firings are no input chains");
    }
}
