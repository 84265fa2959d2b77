//! Operator kinds: the Planner paper's Table I, plus opaque user functions.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What an operator does to its input streams, as far as planning needs to know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OperatorKind {
    /// One item in, one item out.
    Map,
    /// One item in, zero or more out.
    FlatMap,
    /// One item in, zero or one out.
    Filter,
    /// Splits a stream into two or more streams.
    Split,
    /// Selects one or more streams of a split stream.
    Select,
    /// Combines the current item with the last folded value.
    Fold,
    /// Combines the current item with the last reduced value (with an initial value).
    Reduce,
    /// Union of two or more streams.
    Union,
    /// Connects two streams, keeping their types.
    Connect,
    /// Groups items by some characteristic (time, count).
    Window,
    /// An opaque user function: nothing is assumed about it.
    User,
}

/// How an operator combines the weights of its input streams (Planner Table I, column a_τ).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregation {
    /// The (single) input weight; with several inputs, their sum.
    Identity,
    /// The sum of the input weights.
    Sum,
    /// The smallest input weight.
    Min,
}

impl Aggregation {
    /// Applies the aggregation to the weights of the input streams.
    pub fn apply(self, inputs: impl IntoIterator<Item = f64>) -> f64 {
        match self {
            Self::Identity | Self::Sum => inputs.into_iter().sum(),
            Self::Min => inputs.into_iter().fold(f64::INFINITY, f64::min),
        }
    }
}

impl OperatorKind {
    /// Every kind, in the order of Table I (user functions last).
    pub const ALL: [OperatorKind; 11] = [
        Self::Map,
        Self::FlatMap,
        Self::Filter,
        Self::Split,
        Self::Select,
        Self::Fold,
        Self::Reduce,
        Self::Union,
        Self::Connect,
        Self::Window,
        Self::User,
    ];

    /// The spelling used in spec files.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Map => "map",
            Self::FlatMap => "flatmap",
            Self::Filter => "filter",
            Self::Split => "split",
            Self::Select => "select",
            Self::Fold => "fold",
            Self::Reduce => "reduce",
            Self::Union => "union",
            Self::Connect => "connect",
            Self::Window => "window",
            Self::User => "user",
        }
    }

    /// Parses the spec spelling (case-insensitive, `flat_map` accepted).
    pub fn parse(s: &str) -> Option<Self> {
        let lower = s.to_ascii_lowercase().replace(['_', '-'], "");
        Self::ALL.into_iter().find(|k| k.as_str() == lower)
    }

    /// Default selectivity when a spec gives none (Table I; `≤ 1` and `≥ 0` taken as 1,
    /// a window's parametric selectivity too).
    pub fn default_selectivity(self) -> f64 {
        1.0
    }

    /// Whether one copy per edge device preserves the computation (Table I column R, Theorem 1).
    /// A user function is replicable only when it is declared stateless.
    pub fn locally_replicable(self, stateful: bool) -> bool {
        match self {
            Self::Map | Self::FlatMap | Self::Filter | Self::Split | Self::Select | Self::Union => {
                true
            }
            Self::Fold | Self::Reduce | Self::Connect | Self::Window => false,
            Self::User => !stateful,
        }
    }

    /// How input stream weights combine (Table I column a_τ).
    pub fn aggregation(self) -> Aggregation {
        match self {
            Self::Union => Aggregation::Sum,
            Self::Connect => Aggregation::Min,
            _ => Aggregation::Identity,
        }
    }
}

impl fmt::Display for OperatorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_round_trips_through_its_spelling() {
        for k in OperatorKind::ALL {
            assert_eq!(OperatorKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(OperatorKind::parse("Flat_Map"), Some(OperatorKind::FlatMap));
        assert_eq!(OperatorKind::parse("joinn"), None);
    }

    #[test]
    fn table_one_replicability_and_aggregation() {
        let replicable: Vec<_> =
            OperatorKind::ALL.into_iter().filter(|k| k.locally_replicable(false)).collect();
        use OperatorKind::*;
        assert_eq!(replicable, vec![Map, FlatMap, Filter, Split, Select, Union, User]);
        assert!(!User.locally_replicable(true));
        assert_eq!(Connect.aggregation().apply([3.0, 5.0]), 3.0);
        assert_eq!(Union.aggregation().apply([3.0, 5.0]), 8.0);
    }
}
