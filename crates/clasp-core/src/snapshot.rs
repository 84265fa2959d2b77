//! Copy-on-write snapshots of keyed state, for consistent checkpoints.
//!
//! At a checkpoint's boundary the worker marks the key groups it owns in O(groups), without
//! copying anything, and resumes. Each marked group is then encoded exactly once, by whichever
//! comes first: the checkpoint's writer walking the groups, or the first executor about to
//! change the group (which encodes it before its change: the copy is the encoding). Either way
//! the encoding holds the group as it was at the boundary.

use crate::ids::KeyGroup;
use crate::state::StateError;
use crate::sync::lock;
use std::sync::Mutex;

/// One group's encoding: its bytes and key count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedGroup {
    /// The store's encoding (as [`crate::state::DetachedGroup::encode`] writes it).
    pub bytes: Vec<u8>,
    /// Keys in it.
    pub keys: usize,
}

/// The snapshot of some key groups of one store, filled in as the groups are encoded.
#[derive(Debug)]
pub struct StoreSnapshot {
    groups: Vec<KeyGroup>,
    slots: Vec<Mutex<Option<Result<EncodedGroup, StateError>>>>,
}

impl StoreSnapshot {
    /// An empty snapshot of `groups`.
    pub fn new(groups: Vec<KeyGroup>) -> Self {
        let slots = groups.iter().map(|_| Mutex::new(None)).collect();
        Self { groups, slots }
    }

    /// The groups it covers, in slot order.
    pub fn groups(&self) -> &[KeyGroup] {
        &self.groups
    }

    /// Stores the encoding of the group in `slot` (the first one wins).
    pub fn fill(&self, slot: usize, encoded: Result<EncodedGroup, StateError>) {
        if let Some(s) = self.slots.get(slot) {
            lock(s).get_or_insert(encoded);
        }
    }

    /// Takes the encoding of the group in `slot`, if it was encoded.
    pub fn take(&self, slot: usize) -> Option<Result<EncodedGroup, StateError>> {
        self.slots.get(slot).and_then(|s| lock(s).take())
    }
}
