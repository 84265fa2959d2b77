//! The network cost model of the Planner paper (§III-B).
//!
//! Every operator gets a selectivity `s_o`, a local-replicability flag `R(o)` and an input
//! aggregation `a_τ` (Table I). Stream weights `W_st` — average items per second — then follow
//! Eq. 2 in topological order from the sources, where the weight of a source is its rate.
//! The cost of a stream `ξ` over the link `l` of a device is `C^l_ξ = W_res(l) · W_st(ξ)`.

use clasp_core::kind::Aggregation;
use clasp_core::stats::ObservedStats;
use clasp_core::{Endpoint, OperatorId, Pipeline, SourceId};
use serde::Serialize;

/// Where an operator's selectivity came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SelectivityOrigin {
    /// Measured by the runtime (`OperatorStats::selectivity` of a statistics file).
    Observed,
    /// The spec's `selectivity` hint.
    Hint,
    /// The default of the operator's kind (Table I).
    Default,
}

/// What the cost model knows about one operator.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OperatorModel {
    /// `s_o`: output items per input item.
    pub selectivity: f64,
    /// Where `selectivity` came from.
    pub origin: SelectivityOrigin,
    /// `R(o)`: whether one instance per edge device computes the same result (Theorem 1).
    pub replicable: bool,
    /// `a_τ`: how the weights of the input streams combine.
    pub aggregation: Aggregation,
}

/// An observed selectivity that cannot be used.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error(
    "operator `{operator}`: observed selectivity {value} is not a finite number >= 0\n  \
     help: regenerate the statistics with `clasp run <pipeline> --stats FILE`, or omit --stats"
)]
pub struct ModelError {
    /// The operator concerned.
    pub operator: String,
    /// The value read.
    pub value: f64,
}

/// Table I per operator plus source rates: everything Eq. 2 needs.
#[derive(Clone, Debug, PartialEq)]
pub struct CostModel {
    /// Per operator, indexed by [`OperatorId`].
    pub operators: Vec<OperatorModel>,
    /// `W_st(s)`: items per second each source produces in total, indexed by [`SourceId`].
    pub source_rates: Vec<f64>,
}

impl CostModel {
    /// The model from the spec alone: selectivity hints or Table I defaults, and source rates.
    ///
    /// A source without a `rate` gets the mean of the rates given, or 1 item/s when no source
    /// has one (costs are then relative).
    pub fn from_spec(p: &Pipeline) -> Self {
        let operators = p
            .operators
            .iter()
            .map(|op| OperatorModel {
                selectivity: op.selectivity_or_default(),
                origin: if op.selectivity.is_some() {
                    SelectivityOrigin::Hint
                } else {
                    SelectivityOrigin::Default
                },
                replicable: op.locally_replicable(),
                aggregation: op.kind.aggregation(),
            })
            .collect();
        Self { operators, source_rates: source_rates(p) }
    }

    /// The model refined by observations: an operator's observed selectivity replaces the spec's
    /// when the statistics saw it process input (`processed_rate` or `records_rate` above 0).
    pub fn with_observed(p: &Pipeline, stats: &ObservedStats) -> Result<Self, ModelError> {
        let mut model = Self::from_spec(p);
        for op in &p.operators {
            let Some(seen) = stats.operator(p, op.id) else { continue };
            if seen.processed_rate <= 0.0 && seen.records_rate <= 0.0 {
                continue;
            }
            if !(seen.selectivity.is_finite() && seen.selectivity >= 0.0) {
                return Err(ModelError { operator: op.name.clone(), value: seen.selectivity });
            }
            let m = &mut model.operators[op.id.index()];
            m.selectivity = seen.selectivity;
            m.origin = SelectivityOrigin::Observed;
        }
        Ok(model)
    }

    /// The model of operator `o`.
    pub fn operator(&self, o: OperatorId) -> &OperatorModel {
        &self.operators[o.index()]
    }

    /// Eq. 2 with the sources' full rates: the weight of every stream, indexed by `StreamId`.
    pub fn stream_weights(&self, p: &Pipeline) -> Vec<f64> {
        self.weights_from(p, |s| self.source_rates[s.index()])
    }

    /// Eq. 2 with a weight per source given by `source_weight` (for instance the share of a
    /// source's raw data one device holds): the weight of every stream, indexed by `StreamId`.
    ///
    /// `W_st(i, j) = s_i · a_τi(W_st(ξ_i1), …, W_st(ξ_il))` for an operator `i`, and
    /// `W_st(i)` for a source `i`, computed in topological order.
    pub fn weights_from(&self, p: &Pipeline, source_weight: impl Fn(SourceId) -> f64) -> Vec<f64> {
        let mut w = vec![0.0; p.streams.len()];
        for s in &p.streams {
            if let Endpoint::Source(src) = s.from {
                w[s.id.index()] = source_weight(src);
            }
        }
        for &o in p.topological_order() {
            let m = self.operator(o);
            let out = m.selectivity * m.aggregation.apply(p.inputs(o).iter().map(|s| w[s.index()]));
            for s in p.outputs(o) {
                w[s.index()] = out;
            }
        }
        w
    }
}

/// Source rates from the spec, missing ones filled with the mean of those given (or 1).
fn source_rates(p: &Pipeline) -> Vec<f64> {
    let given: Vec<f64> = p.sources.iter().filter_map(|s| s.rate).collect();
    let fill = if given.is_empty() { 1.0 } else { given.iter().sum::<f64>() / given.len() as f64 };
    p.sources.iter().map(|s| s.rate.unwrap_or(fill)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clasp_core::spec::parse;
    use clasp_core::stats::OperatorStats;

    const SPEC: &str = r#"
[[source]]
name = "a"
rate = 100
[[source]]
name = "b"
[[operator]]
name = "f"
kind = "filter"
selectivity = 0.5
[[operator]]
name = "u"
kind = "union"
[[operator]]
name = "c"
kind = "connect"
stateful = true
key = "k"
selectivity = 2
[[sink]]
name = "out"
[[stream]]
from = "a"
to = "f"
[[stream]]
from = "f"
to = "u"
[[stream]]
from = "b"
to = "u"
[[stream]]
from = "u"
to = "c"
[[stream]]
from = "f"
to = "c"
[[stream]]
from = "c"
to = "out"
"#;

    #[test]
    fn eq2_weights_follow_selectivity_and_aggregation() {
        let p = parse(SPEC, "m.toml").unwrap();
        let m = CostModel::from_spec(&p);
        // b has no rate: it gets the mean of the given rates.
        assert_eq!(m.source_rates, vec![100.0, 100.0]);
        let w = m.stream_weights(&p);
        // a->f 100, f->u 50, b->u 100, u->c 150 (union sums), f->c 50, c->out 2*min(150,50).
        assert_eq!(w, vec![100.0, 50.0, 100.0, 150.0, 50.0, 100.0]);
        assert!(m.operators[0].replicable && m.operators[1].replicable);
        assert!(!m.operators[2].replicable);
        assert_eq!(m.operators[0].origin, SelectivityOrigin::Hint);
        assert_eq!(m.operators[1].origin, SelectivityOrigin::Default);
    }

    #[test]
    fn observed_selectivity_replaces_the_hint_only_when_observed() {
        let p = parse(SPEC, "m.toml").unwrap();
        let seen = |name: &str, rate: f64, sel: f64| OperatorStats {
            name: name.into(),
            processed_rate: rate,
            selectivity: sel,
            ..OperatorStats::default()
        };
        let stats = ObservedStats {
            operators: vec![seen("f", 10.0, 0.25), seen("u", 0.0, 0.0)],
            ..ObservedStats::default()
        };
        let m = CostModel::with_observed(&p, &stats).unwrap();
        assert_eq!(m.operators[0].selectivity, 0.25);
        assert_eq!(m.operators[0].origin, SelectivityOrigin::Observed);
        assert_eq!(m.operators[1].selectivity, 1.0);
        assert_eq!(m.operators[1].origin, SelectivityOrigin::Default);
        let bad = ObservedStats { operators: vec![seen("f", 1.0, -1.0)], ..stats };
        let e = CostModel::with_observed(&p, &bad).unwrap_err();
        assert_eq!(e.operator, "f");
        assert!(e.to_string().contains("help:"));
    }
}
