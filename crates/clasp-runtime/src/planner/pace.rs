//! When the planner's intervals end. An interval ends on its period, or early when the input
//! rate rose and completions fall behind it: a jump is then looked at as soon as the last
//! quarter interval shows it (an eighth of an interval of counts at least), not whenever the
//! period happens to end. The workers' reports are requested just before each end, so every
//! interval sees their state at its end rather than up to one period old. Nothing is decided
//! here: an interval that ends early is one more sample for the autoscaler's triggers.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// An early end needs the input rate over the last quarter interval this many times the last
/// interval's (the triggers' 10 % rate change)...
const ROSE: f64 = 1.10;
/// ...while completions keep up with less than this share of it (the triggers' 5 % lag).
const KEEPING_UP: f64 = 0.95;
/// Fewer input requests than this in the quarter tell no rate.
const FEWEST_REQUESTS: u64 = 16;

/// The planner's counters at one instant.
#[derive(Clone, Copy, Debug)]
struct Count {
    at: Instant,
    requests: u64,
    completed: u64,
}

/// The schedule of a run's intervals.
#[derive(Debug)]
pub(super) struct Pace {
    interval: Duration,
    /// Reports are requested this long before an interval ends: twice the workers' sampling
    /// period, within which they answer.
    lead: Duration,
    last_tick: Instant,
    next_tick: Instant,
    /// Whether the reports for `next_tick` were requested.
    asked: bool,
    /// The counters when `next_tick` was brought forward, if it was.
    early: Option<Count>,
    /// The input rate of the last interval.
    last_rate: f64,
    /// Counters over about the last interval, oldest first.
    counts: VecDeque<Count>,
}

impl Pace {
    /// Intervals of `interval` from `started`.
    pub(super) fn new(started: Instant, interval: Duration) -> Self {
        Self {
            interval,
            lead: interval / 10,
            last_tick: started,
            next_tick: started + interval,
            asked: false,
            early: None,
            last_rate: 0.0,
            counts: VecDeque::new(),
        }
    }

    /// Records the input requests and completed chains `counters` reads at `now` (at most every
    /// fortieth of an interval: reading them takes a lock); brings the interval's end forward if
    /// the input rose and completions fall behind it.
    pub(super) fn observe(&mut self, now: Instant, counters: impl FnOnce() -> (u64, u64)) {
        let spacing = self.interval / 40;
        if self.counts.back().is_some_and(|c| now.duration_since(c.at) < spacing) {
            return;
        }
        let (requests, completed) = counters();
        self.counts.push_back(Count { at: now, requests, completed });
        while self.counts.front().is_some_and(|c| now.duration_since(c.at) > self.interval) {
            self.counts.pop_front();
        }
        // Looked at from the interval's start, too: a jump just after a tick would otherwise
        // wait a quarter interval before it is seen, and its backlog grows in the meantime.
        if self.early.is_some() {
            return;
        }
        let Some((secs, inputs, done)) = self.quarter(now, requests, completed) else { return };
        if inputs >= FEWEST_REQUESTS
            && inputs as f64 / secs > ROSE * self.last_rate
            && (done as f64) < KEEPING_UP * inputs as f64
        {
            self.early = Some(Count { at: now, requests, completed });
            self.asked = false;
            self.next_tick = self.next_tick.min(now + self.lead);
        }
    }

    /// The span, input requests and completions of the last quarter interval up to `now`, if
    /// at least an eighth of an interval was counted.
    fn quarter(&self, now: Instant, requests: u64, completed: u64) -> Option<(f64, u64, u64)> {
        let from = self.counts.iter().find(|c| now.duration_since(c.at) <= self.interval / 4)?;
        let span = now.duration_since(from.at);
        (span >= self.interval / 8).then(|| {
            (
                span.as_secs_f64(),
                requests.saturating_sub(from.requests),
                completed.saturating_sub(from.completed),
            )
        })
    }

    /// Whether the reports for the coming end are to be requested now (once per interval).
    pub(super) fn ask_reports(&mut self, now: Instant) -> bool {
        let ask = !self.asked && now + self.lead >= self.next_tick;
        self.asked |= ask;
        ask
    }

    /// Whether the interval ends at `now`.
    pub(super) fn due(&self, now: Instant) -> bool {
        now >= self.next_tick
    }

    /// How long to wait at most before looking again.
    pub(super) fn wait(&self, now: Instant) -> Duration {
        let next = if self.asked { self.next_tick } else { self.next_tick - self.lead };
        next.saturating_duration_since(now)
    }

    /// Ends the interval at `now`: its length and its recent input rate (0 when not
    /// measured): over its last quarter, or, when it ends early, the higher of that and the
    /// rate since the rise was seen (the quarter may straddle the jump; what followed it is
    /// the new rate). The next interval is scheduled by [`Pace::restart`].
    pub(super) fn end(&mut self, now: Instant, requests: u64, completed: u64) -> (Duration, f64) {
        let elapsed = now.duration_since(self.last_tick);
        self.last_tick = now;
        let quarter = self
            .quarter(now, requests, completed)
            .map_or(0.0, |(secs, inputs, _)| inputs as f64 / secs);
        let since_rise =
            self.early.filter(|e| now.duration_since(e.at) >= self.lead / 2).map_or(0.0, |e| {
                requests.saturating_sub(e.requests) as f64 / now.duration_since(e.at).as_secs_f64()
            });
        (elapsed, quarter.max(since_rise))
    }

    /// Starts the next interval at `now` (after the interval's hooks: ticks missed during a
    /// long step, a migration, are skipped, not caught up), after one of `input_rate`.
    pub(super) fn restart(&mut self, now: Instant, input_rate: f64) {
        self.next_tick = now + self.interval;
        self.last_rate = input_rate;
        self.asked = false;
        self.early = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INTERVAL: Duration = Duration::from_millis(500);

    /// Feeds `rate` requests/s of input of which `done` share completes, every 12.5 ms from
    /// `from` for `secs`; returns the instant after the last.
    fn feed(
        pace: &mut Pace,
        counts: &mut (u64, u64),
        from: Instant,
        secs: f64,
        rate: f64,
        done: f64,
    ) -> Instant {
        let step = INTERVAL / 40;
        let mut t = from;
        let (mut inputs, mut completed) = (counts.0 as f64, counts.1 as f64);
        while t < from + Duration::from_secs_f64(secs) {
            t += step;
            inputs += rate * step.as_secs_f64();
            completed += done * rate * step.as_secs_f64();
            pace.observe(t, || (inputs as u64, completed as u64));
        }
        *counts = (inputs as u64, completed as u64);
        t
    }

    /// A pace started now, after an interval of `rate` requests/s, with nothing counted.
    fn started(rate: f64) -> (Instant, Pace, (u64, u64)) {
        let start = Instant::now();
        let mut pace = Pace::new(start, INTERVAL);
        pace.restart(start, rate);
        (start, pace, (0, 0))
    }

    #[test]
    fn a_steady_rate_ends_intervals_on_their_period() {
        let (start, mut pace, mut counts) = started(400.0);
        let t = feed(&mut pace, &mut counts, start, 0.45, 400.0, 1.0);
        assert!(!pace.due(t));
        assert!(pace.ask_reports(t), "reports are asked for a tenth of an interval before");
        assert!(!pace.ask_reports(t), "once");
        let t = feed(&mut pace, &mut counts, t, 0.05, 400.0, 1.0);
        assert!(pace.due(t));
        let (elapsed, recent) = pace.end(t, counts.0, counts.1);
        assert_eq!(elapsed, t - start);
        assert!((recent - 400.0).abs() < 40.0, "the last quarter's rate: {recent}");
    }

    #[test]
    fn a_rise_the_cluster_falls_behind_on_ends_the_interval_early() {
        let (start, mut pace, mut counts) = started(200.0);
        let t = feed(&mut pace, &mut counts, start, 0.1, 200.0, 1.0);
        // The rate triples and only a third of it completes.
        let t = feed(&mut pace, &mut counts, t, 0.15, 600.0, 0.33);
        assert!(pace.ask_reports(t), "the reports are asked for at once");
        let t = feed(&mut pace, &mut counts, t, 0.05, 600.0, 0.33);
        assert!(pace.due(t), "the interval ends a tenth of an interval later");
        let (elapsed, recent) = pace.end(t, counts.0, counts.1);
        assert!(elapsed < INTERVAL * 3 / 4, "{elapsed:?}");
        assert!((recent - 600.0).abs() < 60.0, "the rate since the rise: {recent}");
    }

    #[test]
    fn a_rise_just_after_an_interval_began_ends_it_early_too() {
        let (start, mut pace, mut counts) = started(200.0);
        // The counts of the interval before, so the quarter that straddles the start is known.
        let t = feed(&mut pace, &mut counts, start, 0.5, 200.0, 1.0);
        assert!(pace.due(t));
        pace.end(t, counts.0, counts.1);
        pace.restart(t, 200.0);
        let t = feed(&mut pace, &mut counts, t, 0.05, 600.0, 0.33);
        assert!(pace.ask_reports(t), "seen within the interval's first tenth");
        let t = feed(&mut pace, &mut counts, t, 0.05, 600.0, 0.33);
        assert!(pace.due(t), "{:?} after the interval began", INTERVAL / 5);
    }

    #[test]
    fn a_rise_the_cluster_keeps_up_with_waits_for_the_period() {
        let (start, mut pace, mut counts) = started(200.0);
        let t = feed(&mut pace, &mut counts, start, 0.1, 200.0, 1.0);
        let t = feed(&mut pace, &mut counts, t, 0.3, 600.0, 1.0);
        assert!(!pace.due(t));
    }

    #[test]
    fn a_cluster_falling_behind_at_the_same_rate_waits_for_the_period() {
        let (start, mut pace, mut counts) = started(600.0);
        let t = feed(&mut pace, &mut counts, start, 0.4, 600.0, 0.5);
        assert!(!pace.due(t), "not a rise: the triggers see it on the period");
    }
}
