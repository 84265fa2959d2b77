//! Dense integer identifiers. Every id indexes a `Vec` in the structure that issued it.

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! dense_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            /// The id as a `Vec` index.
            #[inline]
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl From<usize> for $name {
            #[inline]
            fn from(i: usize) -> Self {
                Self(u32::try_from(i).expect("id fits in u32"))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

dense_id!(
    /// An operator of a pipeline (index into `Pipeline::operators`).
    OperatorId,
    "op"
);
dense_id!(
    /// A source of a pipeline (index into `Pipeline::sources`).
    SourceId,
    "src"
);
dense_id!(
    /// A sink of a pipeline (index into `Pipeline::sinks`).
    SinkId,
    "sink"
);
dense_id!(
    /// A stream of a pipeline (index into `Pipeline::streams`).
    StreamId,
    "stream"
);
dense_id!(
    /// A worker of the cluster. Plans number workers `0..n`; the runtime maps them to nodes.
    WorkerId,
    "w"
);
dense_id!(
    /// A key group: the unit of keyed state that moves in a migration.
    KeyGroup,
    "kg"
);
