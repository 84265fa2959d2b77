//! The first phase of Algorithm 1 (lines 1–16): grow, from a device's sources, the largest set
//! of operators the device may run, and find its border.

use clasp_core::{Endpoint, OperatorId, Pipeline, SourceId};
use std::collections::BTreeSet;

/// The grown subgraph `F` of Algorithm 1: `Current` and `Border = N(Current) \ Current`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Grown {
    /// `S = g⁻¹(d)`, sorted.
    pub sources: Vec<SourceId>,
    /// The operators of `Current`, indexed by [`OperatorId`].
    pub current: Vec<bool>,
    /// Successors of `S ∪ Current` outside `Current`: operators and sinks.
    pub border: Vec<Endpoint>,
}

impl Grown {
    /// Whether endpoint `e` is in `S ∪ Current`.
    pub fn holds(&self, e: Endpoint) -> bool {
        match e {
            Endpoint::Source(s) => self.sources.binary_search(&s).is_ok(),
            Endpoint::Operator(o) => self.current[o.index()],
            Endpoint::Sink(_) => false,
        }
    }

    /// The operators of `Current`, in id order.
    pub fn operators(&self) -> impl Iterator<Item = OperatorId> + '_ {
        self.current.iter().enumerate().filter(|(_, c)| **c).map(|(i, _)| OperatorId::from(i))
    }
}

/// Algorithm 1, lines 1–16, for a device with sources `sources` whose constraint admits the
/// operators for which `admits` holds.
///
/// `Opened` holds the operators all of whose predecessors are in `Current`; the one picked
/// next is the earliest in topological order. Sinks are never opened. Because `admits` judges
/// operators one at a time, the result does not depend on the order of picks: it is the
/// largest set closed under predecessors, fed only by `sources`, of admitted operators (Eq. 7).
pub(crate) fn grow(
    p: &Pipeline,
    sources: &[SourceId],
    admits: impl Fn(OperatorId) -> bool,
) -> Grown {
    let mut position = vec![0; p.operators.len()];
    for (i, &o) in p.topological_order().iter().enumerate() {
        position[o.index()] = i;
    }
    let mut grown = Grown {
        sources: sources.to_vec(),
        current: vec![false; p.operators.len()],
        border: Vec::new(),
    };
    let mut closed = vec![false; p.operators.len()];
    let mut opened: BTreeSet<(usize, OperatorId)> = BTreeSet::new();
    let from_sources = sources.iter().flat_map(|&s| p.source_outputs(s));
    open_ready(p, &grown, from_sources, &closed, &position, &mut opened);
    while let Some((_, u)) = opened.pop_first() {
        closed[u.index()] = true;
        if admits(u) {
            grown.current[u.index()] = true;
            open_ready(p, &grown, p.outputs(u).iter(), &closed, &position, &mut opened);
        }
    }
    grown.border = border(p, &grown);
    grown
}

/// Adds to `opened` the operators at the end of `streams` whose predecessors are all in
/// `S ∪ Current` (Algorithm 1, lines 2 and 9–10).
fn open_ready<'a>(
    p: &Pipeline,
    grown: &Grown,
    streams: impl Iterator<Item = &'a clasp_core::StreamId>,
    closed: &[bool],
    position: &[usize],
    opened: &mut BTreeSet<(usize, OperatorId)>,
) {
    for s in streams {
        let Endpoint::Operator(x) = p.stream(*s).to else { continue };
        let ready = p.inputs(x).iter().all(|i| grown.holds(p.stream(*i).from));
        if ready && !closed[x.index()] {
            opened.insert((position[x.index()], x));
        }
    }
}

/// `N(Current) \ Current` (line 15), the sources counted in `Current`; sorted, distinct.
fn border(p: &Pipeline, grown: &Grown) -> Vec<Endpoint> {
    let mut border: Vec<Endpoint> = p
        .streams
        .iter()
        .filter(|s| grown.holds(s.from) && !grown.holds(s.to))
        .map(|s| s.to)
        .collect();
    border.sort_by_key(|&e| endpoint_key(e));
    border.dedup();
    border
}

/// A total order on endpoints: sources, then operators, then sinks, each by id.
pub(crate) fn endpoint_key(e: Endpoint) -> (u8, usize) {
    match e {
        Endpoint::Source(s) => (0, s.index()),
        Endpoint::Operator(o) => (1, o.index()),
        Endpoint::Sink(s) => (2, s.index()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clasp_core::SinkId;
    use clasp_core::spec::parse;

    const SPEC: &str = r#"
[[source]]
name = "a"
[[source]]
name = "b"
[[operator]]
name = "m"
kind = "map"
[[operator]]
name = "f"
kind = "filter"
[[operator]]
name = "u"
kind = "union"
[[operator]]
name = "w"
kind = "window"
[[sink]]
name = "out"
[[stream]]
from = "a"
to = "m"
[[stream]]
from = "m"
to = "f"
[[stream]]
from = "b"
to = "u"
[[stream]]
from = "f"
to = "u"
[[stream]]
from = "f"
to = "w"
[[stream]]
from = "u"
to = "out"
[[stream]]
from = "w"
to = "out"
"#;

    #[test]
    fn grows_what_the_sources_feed_and_the_constraint_admits() {
        let p = parse(SPEC, "g.toml").unwrap();
        let replicable = |o: OperatorId| p.operator(o).locally_replicable();
        let a = p.source_id("a").unwrap();
        let op = |n: &str| p.operator_id(n).unwrap();
        // Only `a`: the union also needs `b`, the window is not replicable.
        let g = grow(&p, &[a], replicable);
        assert_eq!(g.operators().collect::<Vec<_>>(), vec![op("m"), op("f")]);
        assert_eq!(g.border, vec![Endpoint::Operator(op("u")), Endpoint::Operator(op("w"))]);
        // Both sources: the union joins, the sink borders it.
        let g = grow(&p, &[a, p.source_id("b").unwrap()], replicable);
        assert_eq!(g.operators().collect::<Vec<_>>(), vec![op("m"), op("f"), op("u")]);
        assert_eq!(g.border, vec![Endpoint::Operator(op("w")), Endpoint::Sink(SinkId(0))]);
        // A device without maps grows nothing past its sources.
        let g = grow(&p, &[a], |o| replicable(o) && p.operator(o).kind.as_str() != "map");
        assert_eq!(g.operators().count(), 0);
        assert_eq!(g.border, vec![Endpoint::Operator(op("m"))]);
    }
}
