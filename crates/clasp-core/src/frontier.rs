//! Which event-time timers are due: the watermark of every operator with event-time timers,
//! from the sources' watermarks and what the operators upstream of it have fired.
//!
//! An operator's watermark is the minimum over its inputs, where an input is a source (reached
//! through operators without event-time timers, which pass times on) or the nearest upstream
//! operator with timers, whose output watermark is the time up to which it has fired: after
//! firing its timers up to `u` it emits nothing at or before `u`. Firing goes one operator at
//! a time in topological order, so what one operator emits when its timers fire reaches its
//! successors before their own timers for that time fire. The local driver and the runtime's
//! planner both drive firing with [`Frontiers`].

use crate::ids::{OperatorId, SinkId, SourceId, StreamId};
use crate::pipeline::{Endpoint, Pipeline};
use crate::time::due_until;

/// What an operator's watermark is the minimum of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Upstream {
    Source(SourceId),
    Timed(usize),
}

#[derive(Clone, Debug)]
struct TimedOperator {
    op: OperatorId,
    allowed_lateness: u64,
    inputs: Vec<Upstream>,
    /// Timers fired up to here (inclusive).
    fired: Option<u64>,
}

/// The watermarks of a pipeline's sources and the firing progress of its timed operators.
#[derive(Clone, Debug)]
pub struct Frontiers {
    sources: Vec<Option<u64>>,
    timed: Vec<TimedOperator>,
}

impl Frontiers {
    /// Tracking for `p`, whose operators with event-time timers are those `timed` says.
    pub fn new(p: &Pipeline, timed: impl Fn(OperatorId) -> bool) -> Self {
        let order = p.topological_order();
        let timed_ops: Vec<OperatorId> = order.iter().copied().filter(|o| timed(*o)).collect();
        let list = timed_ops
            .iter()
            .map(|&op| TimedOperator {
                op,
                allowed_lateness: p.operator(op).allowed_lateness,
                inputs: upstream(p, p.inputs(op), &timed_ops),
                fired: None,
            })
            .collect();
        Self { sources: vec![None; p.sources.len()], timed: list }
    }

    /// The watermark of what reaches `sink`: the minimum over the sources and nearest timed
    /// operators upstream of it, as for an operator's input (an edge device's cut stream).
    pub fn sink_watermark(&self, p: &Pipeline, sink: SinkId) -> Option<u64> {
        let timed_ops: Vec<OperatorId> = self.timed.iter().map(|t| t.op).collect();
        let into: Vec<StreamId> =
            p.streams.iter().filter(|s| s.to == Endpoint::Sink(sink)).map(|s| s.id).collect();
        self.minimum(&upstream(p, &into, &timed_ops))
    }

    /// Whether any operator has event-time timers.
    pub fn any(&self) -> bool {
        !self.timed.is_empty()
    }

    /// The watermark of `source`, if it has one yet.
    pub fn source(&self, source: SourceId) -> Option<u64> {
        self.sources.get(source.index()).copied().flatten()
    }

    /// Raises the watermark of `source` to `watermark` (never lowers it).
    pub fn advance_source(&mut self, source: SourceId, watermark: u64) {
        if let Some(w) = self.sources.get_mut(source.index()) {
            *w = Some(w.map_or(watermark, |old| old.max(watermark)));
        }
    }

    /// Every source ended: every timer becomes due.
    pub fn end_all(&mut self) {
        for w in &mut self.sources {
            *w = Some(u64::MAX);
        }
    }

    fn watermark(&self, t: &TimedOperator) -> Option<u64> {
        self.minimum(&t.inputs)
    }

    fn minimum(&self, inputs: &[Upstream]) -> Option<u64> {
        inputs
            .iter()
            .map(|up| match *up {
                Upstream::Source(s) => self.sources[s.index()],
                Upstream::Timed(i) => self.timed[i].fired,
            })
            .try_fold(u64::MAX, |m, w| w.map(|w| m.min(w)))
    }

    /// The first operator (in topological order) with timers newly due, and up to when.
    pub fn next_due(&self) -> Option<(OperatorId, u64)> {
        self.timed.iter().find_map(|t| {
            let until = due_until(self.watermark(t)?, t.allowed_lateness)?;
            (t.fired.is_none_or(|f| until > f)).then_some((t.op, until))
        })
    }

    /// Records that `op`'s timers fired up to `until`.
    pub fn fired(&mut self, op: OperatorId, until: u64) {
        if let Some(t) = self.timed.iter_mut().find(|t| t.op == op) {
            t.fired = Some(t.fired.map_or(until, |f| f.max(until)));
        }
    }

    /// Whether every timed operator has fired everything (after [`Frontiers::end_all`]).
    pub fn finished(&self) -> bool {
        self.timed.iter().all(|t| t.fired == Some(u64::MAX))
    }

    /// The records of a chain that entered under source watermark `entry` are late at `op`
    /// at or below the returned time.
    pub fn late_until(entry: Option<u64>, allowed_lateness: u64) -> Option<u64> {
        entry.and_then(|w| w.checked_sub(allowed_lateness))
    }
}

/// What the streams `into` carry the watermarks of: the sources upstream of them, reached
/// through operators without timers, and the nearest operators in `timed` (topological order).
fn upstream(p: &Pipeline, into: &[StreamId], timed: &[OperatorId]) -> Vec<Upstream> {
    let mut inputs = Vec::new();
    let mut stack: Vec<Endpoint> = into.iter().map(|s| p.stream(*s).from).collect();
    let mut seen = vec![false; p.operators.len()];
    while let Some(from) = stack.pop() {
        let up = match from {
            Endpoint::Source(s) => Upstream::Source(s),
            Endpoint::Operator(o) => match timed.iter().position(|t| *t == o) {
                Some(i) => Upstream::Timed(i),
                None => {
                    if !std::mem::replace(&mut seen[o.index()], true) {
                        stack.extend(p.inputs(o).iter().map(|s| p.stream(*s).from));
                    }
                    continue;
                }
            },
            Endpoint::Sink(_) => continue,
        };
        if !inputs.contains(&up) {
            inputs.push(up);
        }
    }
    inputs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse;

    const SPEC: &str = r#"
[[source]]
name = "a"
[[source]]
name = "b"
[[operator]]
name = "pass"
[[operator]]
name = "window"
allowed_lateness = 2
[[operator]]
name = "join"
[[sink]]
name = "out"
[[stream]]
from = "a"
to = "pass"
[[stream]]
from = "pass"
to = "window"
[[stream]]
from = "window"
to = "join"
[[stream]]
from = "b"
to = "join"
[[stream]]
from = "join"
to = "out"
"#;

    #[test]
    fn a_watermark_is_the_minimum_of_inputs_and_follows_what_upstream_fired() {
        let p = parse(SPEC, "t.toml").unwrap();
        let (window, join) = (OperatorId(1), OperatorId(2));
        let mut f = Frontiers::new(&p, |o| o == window || o == join);
        assert_eq!(f.next_due(), None, "no watermark yet");
        f.advance_source(SourceId(0), 10);
        assert_eq!(f.next_due(), Some((window, 8)), "10 minus the lateness 2");
        f.fired(window, 8);
        assert_eq!(f.next_due(), None, "join waits for source b");
        f.advance_source(SourceId(1), 20);
        assert_eq!(f.next_due(), Some((join, 8)), "min(what window fired, b)");
        f.fired(join, 8);
        assert_eq!(f.sink_watermark(&p, SinkId(0)), Some(8), "out follows what join fired");
        f.advance_source(SourceId(0), 5);
        assert_eq!(f.source(SourceId(0)), Some(10), "never lowered");
        assert_eq!(f.next_due(), None);
        f.end_all();
        assert_eq!(f.next_due(), Some((window, u64::MAX)));
        f.fired(window, u64::MAX);
        assert_eq!(f.next_due(), Some((join, u64::MAX)));
        f.fired(join, u64::MAX);
        assert!(f.finished());
        assert_eq!(f.sink_watermark(&p, SinkId(0)), Some(u64::MAX), "out follows join");
        assert_eq!(Frontiers::late_until(Some(10), 3), Some(7));
        assert_eq!(Frontiers::late_until(Some(1), 3), None);
    }
}
