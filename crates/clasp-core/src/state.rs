//! Keyed operator state, partitioned into key groups.
//!
//! Each stateful operator on a worker has one [`KeyedStore`]: a fixed number of key groups, each
//! a hash table behind its own lock. Executors lock one group at a time (and keep the lock while
//! consecutive records fall into the same group); migration exports and imports whole groups,
//! each with its pending timers ([`TimerQueue`]), so timers move with their keys.

use crate::batch::Record;
use crate::hash::key_group;
use crate::ids::KeyGroup;
use crate::snapshot::{EncodedGroup, StoreSnapshot};
use crate::sync::lock;
use crate::time::{TimeDomain, TimerQueue};
use hashbrown::HashTable;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::any::Any;
use std::io::{self, Write};
use std::sync::{Arc, Mutex, MutexGuard};

mod codec;

/// What can go wrong moving state.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The bytes are not a valid encoding of this operator's state.
    #[error("state for key group {group} is not a valid encoding: {source}")]
    Decode {
        /// The group being imported.
        group: KeyGroup,
        /// The decoder's error.
        source: postcard::Error,
    },
    /// A key in the imported bytes belongs to another group.
    #[error("key {key:?} does not belong to key group {group}")]
    WrongGroup {
        /// The group being imported.
        group: KeyGroup,
        /// The offending key, lossily decoded.
        key: String,
    },
    /// The state could not be encoded.
    #[error("state for key group {group} cannot be encoded: {source}")]
    Encode {
        /// The group being exported.
        group: KeyGroup,
        /// The encoder's error.
        source: postcard::Error,
    },
}

struct Entry<S> {
    hash: u64,
    key: KeyBytes,
    value: S,
}

/// A key's bytes, inline up to 16 (most keys): comparing, encoding and freeing an entry
/// then touch no second allocation, which a migration does for every key it moves.
type KeyBytes = smallvec::SmallVec<[u8; 16]>;

type Table<S> = HashTable<Entry<S>>;

/// One key group: its entries, plus entries that arrived in a migration and are decoded on
/// first access (so a worker can resume before it has decoded what it received).
struct Group<S> {
    table: Table<S>,
    timers: TimerQueue,
    /// Shared so that [`StateStore::import_staged`] can decode it without the group's lock.
    staged: Option<(Arc<Vec<u8>>, usize)>,
    failed: Option<StateError>,
    /// A checkpoint's snapshot still waiting for this group's encoding, and the group's slot.
    snapshot: Option<(Arc<StoreSnapshot>, usize)>,
}

impl<S> Default for Group<S> {
    fn default() -> Self {
        Self {
            table: HashTable::new(),
            timers: TimerQueue::default(),
            staged: None,
            failed: None,
            snapshot: None,
        }
    }
}

/// Puts `entry` into `table`, replacing the entry of the same key if there is one.
fn upsert<S>(table: &mut Table<S>, entry: Entry<S>) {
    match table.find_mut(entry.hash, |e| e.key == entry.key) {
        Some(slot) => *slot = entry,
        None => {
            table.insert_unique(entry.hash, entry, |e| e.hash);
        }
    }
}

/// A group's entries and timers decoded from its encoding, not yet in the group.
struct Decoded<S> {
    table: Table<S>,
    timers: TimerQueue,
}

/// Decodes a group's encoding ([`codec`]); every key must belong to group `id`. A key that
/// appears twice keeps its last value.
fn decode_group<S: StateValue>(
    bytes: &[u8],
    id: KeyGroup,
    groups: u32,
) -> Result<Decoded<S>, StateError> {
    let decode = |source| StateError::Decode { group: id, source };
    let wrong = |key: &[u8]| StateError::WrongGroup {
        group: id,
        key: String::from_utf8_lossy(key).into_owned(),
    };
    let mut decoder = codec::Decoder::new(bytes).map_err(decode)?;
    let mut table: Table<S> = HashTable::with_capacity(decoder.size_hint());
    while let Some((key, value)) = decoder.next_entry::<S>().map_err(decode)? {
        let hash = crate::hash::key_hash(key);
        if key_group(hash, groups) != id {
            return Err(wrong(key));
        }
        upsert(&mut table, Entry { hash, key: KeyBytes::from_slice(key), value });
    }
    let timers = decoder.timers().map_err(decode)?;
    if let Some(key) = timers.keys().find(|k| key_group(crate::hash::key_hash(k), groups) != id) {
        return Err(wrong(key));
    }
    Ok(Decoded { table, timers })
}

impl<S: StateValue> Group<S> {
    /// Adds decoded entries (replacing those of the same key) and timers; returns how many
    /// entries were decoded. O(1) when the group held nothing, as a group taken over does.
    fn install(&mut self, decoded: Decoded<S>) -> usize {
        let Decoded { table, timers } = decoded;
        let n = table.len();
        self.timers.absorb(timers);
        if self.table.is_empty() {
            self.table = table;
            return n;
        }
        for entry in table {
            upsert(&mut self.table, entry);
        }
        n
    }

    /// Decodes staged entries into the table; nothing is installed from invalid bytes.
    fn unstage(&mut self, id: KeyGroup, groups: u32) -> Result<usize, StateError> {
        let Some((bytes, _)) = self.staged.take() else { return Ok(0) };
        Ok(self.install(decode_group(&bytes, id, groups)?))
    }

    /// Decodes staged entries, keeping a failure for [`StateStore::import_staged`] to report.
    fn settle(&mut self, id: KeyGroup, groups: u32) {
        if self.staged.is_some()
            && let Err(e) = self.unstage(id, groups)
        {
            self.failed.get_or_insert(e);
        }
    }

    fn len(&self) -> usize {
        self.table.len() + self.staged.as_ref().map_or(0, |(_, n)| *n)
    }

    /// Encodes the group into the snapshot waiting for it, if any (before it changes).
    /// Inline: it runs whenever an execution moves to another group, nearly once per record.
    #[inline]
    fn snapshot_now(&mut self, id: KeyGroup, groups: u32) {
        if self.snapshot.is_some() {
            self.snapshot_waiting(id, groups);
        }
    }

    #[cold]
    fn snapshot_waiting(&mut self, id: KeyGroup, groups: u32) {
        let Some((snapshot, slot)) = self.snapshot.take() else { return };
        self.settle(id, groups);
        let mut bytes = Vec::new();
        let encoded = encode_group(&self.table, &self.timers, id, &mut bytes)
            .map(|keys| EncodedGroup { bytes, keys });
        snapshot.fill(slot, encoded);
    }
}

/// Appends a group's encoding (its entries, then its pending timers; [`codec`]) to `out`.
fn encode_group<S: StateValue>(
    table: &Table<S>,
    timers: &TimerQueue,
    group: KeyGroup,
    out: &mut Vec<u8>,
) -> Result<usize, StateError> {
    let entries = table.iter().map(|e| (&e.key[..], &e.value));
    *out = codec::encode(entries, timers, std::mem::take(out))
        .map_err(|source| StateError::Encode { group, source })?;
    Ok(table.len())
}

/// The keyed state of one operator on one worker.
pub struct KeyedStore<S> {
    groups: Box<[Mutex<Group<S>>]>,
}

impl<S> std::fmt::Debug for KeyedStore<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedStore").field("groups", &self.groups.len()).finish_non_exhaustive()
    }
}

impl<S> KeyedStore<S> {
    /// An empty store with `groups` key groups.
    pub fn new(groups: u32) -> Self {
        Self { groups: (0..groups.max(1)).map(|_| Mutex::new(Group::default())).collect() }
    }

    /// Number of key groups.
    pub fn group_count(&self) -> u32 {
        self.groups.len() as u32
    }
}

impl<S: StateValue> KeyedStore<S> {
    /// Moves the timers of `domain` due by `until` out of group `group` into `out`, in firing
    /// order (the group's lock is not held afterwards, so the operator can run them).
    pub fn take_due_timers(
        &self,
        group: KeyGroup,
        domain: TimeDomain,
        until: u64,
        out: &mut Vec<(u64, Box<[u8]>)>,
    ) {
        let Some(g) = self.groups.get(group.index()) else { return };
        let mut g = lock(g);
        g.settle(group, self.group_count());
        if g.timers.next(domain).is_some_and(|t| t <= until) {
            g.timers.take_due(domain, until, out);
        }
    }
}

/// Type-erased view of a [`KeyedStore`], used by migration, dumps and metrics.
pub trait StateStore: Send + Sync {
    /// For the typed operator to recover its store.
    fn as_any(&self) -> &dyn Any;
    /// Number of key groups.
    fn group_count(&self) -> u32;
    /// Keys held, over all groups.
    fn key_count(&self) -> usize;
    /// Keys held in one group.
    fn group_key_count(&self, group: KeyGroup) -> usize;
    /// Removes a group's entries and appends their encoding to `out`; returns the key count.
    fn export_group(&self, group: KeyGroup, out: &mut Vec<u8>) -> Result<usize, StateError> {
        self.detach_group(group).encode(group, out)
    }
    /// Installs entries exported by [`StateStore::export_group`]; returns the key count.
    fn import_group(&self, group: KeyGroup, bytes: &[u8]) -> Result<usize, StateError> {
        self.stage_group(group, bytes.to_vec(), 0);
        self.import_staged(group)
    }
    /// Takes a group's entries out of the store in O(1), to be encoded later (after the
    /// worker resumed).
    fn detach_group(&self, group: KeyGroup) -> Box<dyn DetachedGroup>;
    /// Holds `bytes` (from [`DetachedGroup::encode`], `keys` keys) for a group: decoded when
    /// the group is first accessed, or by [`StateStore::import_staged`].
    fn stage_group(&self, group: KeyGroup, bytes: Vec<u8>, keys: usize);
    /// Decodes a group's staged entries now (the group's lock is held only to install them);
    /// returns the key count, or why they are invalid.
    fn import_staged(&self, group: KeyGroup) -> Result<usize, StateError>;
    /// Writes one JSON line `{"operator":…,"key":…,"value":…}` per key, sorted by key.
    fn dump_json(&self, operator: &str, out: &mut dyn Write) -> io::Result<usize>;
    /// Pending timers, over all groups.
    fn timer_count(&self) -> usize;
    /// Marks `groups` for a checkpoint in O(groups): each is encoded, as it is now, before its
    /// next change or by [`StateStore::snapshot_group`], whichever comes first.
    fn mark_snapshot(&self, groups: Vec<KeyGroup>) -> Arc<StoreSnapshot>;
    /// Encodes `group` into the snapshot marked for it now, if it has not been yet.
    fn snapshot_group(&self, group: KeyGroup);
    /// Drops every entry, timer, staged encoding and snapshot mark (a rollback to a checkpoint).
    fn clear(&self);
}

/// Entries taken out of a store, not yet encoded.
pub trait DetachedGroup: Send {
    /// Keys held.
    fn keys(&self) -> usize;
    /// Appends the encoding of the entries to `out`; returns the key count. Takes `&self` so
    /// that freeing the entries can wait until the worker has resumed.
    fn encode(&self, group: KeyGroup, out: &mut Vec<u8>) -> Result<usize, StateError>;
}

struct Detached<S>(Table<S>, TimerQueue);

impl<S: StateValue> DetachedGroup for Detached<S> {
    fn keys(&self) -> usize {
        self.0.len()
    }

    fn encode(&self, group: KeyGroup, out: &mut Vec<u8>) -> Result<usize, StateError> {
        encode_group(&self.0, &self.1, group, out)
    }
}

/// Bounds every state value satisfies: a default for new keys, serializable for migration.
pub trait StateValue: Default + Serialize + DeserializeOwned + Send + 'static {}
impl<T: Default + Serialize + DeserializeOwned + Send + 'static> StateValue for T {}

impl<S: StateValue> StateStore for KeyedStore<S> {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn group_count(&self) -> u32 {
        self.groups.len() as u32
    }

    fn key_count(&self) -> usize {
        self.groups.iter().map(|g| lock(g).len()).sum()
    }

    fn group_key_count(&self, group: KeyGroup) -> usize {
        self.groups.get(group.index()).map_or(0, |g| lock(g).len())
    }

    fn detach_group(&self, group: KeyGroup) -> Box<dyn DetachedGroup> {
        let Some(g) = self.groups.get(group.index()) else {
            return Box::new(Detached::<S>(HashTable::new(), TimerQueue::default()));
        };
        let mut g = lock(g);
        g.snapshot_now(group, self.group_count());
        g.settle(group, self.group_count());
        Box::new(Detached(std::mem::take(&mut g.table), std::mem::take(&mut g.timers)))
    }

    fn stage_group(&self, group: KeyGroup, bytes: Vec<u8>, keys: usize) {
        if let Some(g) = self.groups.get(group.index()) {
            let mut g = lock(g);
            g.snapshot_now(group, self.group_count());
            g.settle(group, self.group_count());
            g.staged = Some((Arc::new(bytes), keys));
        }
    }

    fn import_staged(&self, group: KeyGroup) -> Result<usize, StateError> {
        let Some(g) = self.groups.get(group.index()) else { return Ok(0) };
        let bytes = {
            let mut g = lock(g);
            if let Some(e) = g.failed.take() {
                return Err(e);
            }
            match &g.staged {
                Some((bytes, _)) => bytes.clone(),
                None => return Ok(0),
            }
        };
        // Decoded without the lock: an execution reaching the group meanwhile waits at most
        // for the install, or decodes the group itself, and then this decoding is dropped.
        let decoded = decode_group::<S>(&bytes, group, self.group_count());
        let mut g = lock(g);
        if !g.staged.as_ref().is_some_and(|(staged, _)| Arc::ptr_eq(staged, &bytes)) {
            return g.failed.take().map_or(Ok(0), Err);
        }
        g.staged = None;
        decoded.map(|d| g.install(d))
    }

    fn timer_count(&self) -> usize {
        let groups = self.group_count();
        (0..groups as usize)
            .map(|i| {
                let mut g = lock(&self.groups[i]);
                g.settle(KeyGroup::from(i), groups);
                g.timers.len()
            })
            .sum()
    }

    fn dump_json(&self, operator: &str, out: &mut dyn Write) -> io::Result<usize> {
        let mut lines: Vec<(Vec<u8>, String)> = Vec::new();
        let groups = self.group_count();
        for (i, g) in self.groups.iter().enumerate() {
            let mut g = lock(g);
            g.settle(KeyGroup::from(i), groups);
            for e in g.table.iter() {
                let value = serde_json::to_string(&e.value).map_err(io::Error::other)?;
                lines.push((e.key.to_vec(), value));
            }
        }
        lines.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let op = serde_json::to_string(operator).map_err(io::Error::other)?;
        for (key, value) in &lines {
            let key = serde_json::to_string(&key_to_text(key)).map_err(io::Error::other)?;
            writeln!(out, "{{\"operator\":{op},\"key\":{key},\"value\":{value}}}")?;
        }
        Ok(lines.len())
    }

    fn mark_snapshot(&self, groups: Vec<KeyGroup>) -> Arc<StoreSnapshot> {
        let snapshot = Arc::new(StoreSnapshot::new(groups));
        let count = self.group_count();
        for (slot, &id) in snapshot.groups().iter().enumerate() {
            let Some(g) = self.groups.get(id.index()) else {
                snapshot.fill(slot, Ok(EncodedGroup { bytes: vec![0], keys: 0 }));
                continue;
            };
            let mut g = lock(g);
            // An older snapshot still waiting for this group gets it first.
            g.snapshot_now(id, count);
            g.snapshot = Some((snapshot.clone(), slot));
        }
        snapshot
    }

    fn snapshot_group(&self, group: KeyGroup) {
        if let Some(g) = self.groups.get(group.index()) {
            lock(g).snapshot_now(group, self.group_count());
        }
    }

    fn clear(&self) {
        for g in &self.groups {
            *lock(g) = Group::default();
        }
    }
}

/// A key as text: itself when it is UTF-8, else `0x` and its hex digits.
pub fn key_to_text(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(s) => s.to_owned(),
        Err(_) => {
            let mut s = String::from("0x");
            for b in key {
                s.push_str(&format!("{b:02x}"));
            }
            s
        }
    }
}

/// Key equality for the state tables: the hashes first (they differ for almost every
/// non-matching candidate), then short keys as two machine words instead of a `memcmp` call.
#[inline]
fn same_key(e_hash: u64, e_key: &[u8], hash: u64, key: &[u8]) -> bool {
    if e_hash != hash || e_key.len() != key.len() {
        return false;
    }
    if key.len() <= 16 {
        let word = |k: &[u8], at: usize| {
            let mut b = [0u8; 8];
            let end = k.len().min(at + 8);
            if end > at {
                b[..end - at].copy_from_slice(&k[at..end]);
            }
            u64::from_le_bytes(b)
        };
        word(e_key, 0) == word(key, 0) && word(e_key, 8) == word(key, 8)
    } else {
        e_key == key
    }
}

/// An operator's access to its keyed state while it processes one request.
///
/// It keeps the lock of the last group it touched, so runs of records in the same group pay
/// for one lock; at most one group is locked at a time, so executors cannot deadlock.
pub struct StateAccess<'a, S> {
    store: &'a KeyedStore<S>,
    current: Option<(u32, MutexGuard<'a, Group<S>>)>,
    touched: bool,
}

impl<S> std::fmt::Debug for StateAccess<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateAccess").field("touched", &self.touched).finish_non_exhaustive()
    }
}

impl<'a, S: StateValue> StateAccess<'a, S> {
    /// Access to `store`.
    pub fn new(store: &'a KeyedStore<S>) -> Self {
        Self { store, current: None, touched: false }
    }

    /// Whether any state was read or written.
    pub fn touched(&self) -> bool {
        self.touched
    }

    fn group(&mut self, hash: u64) -> &mut Table<S> {
        &mut self.locked(hash).table
    }

    /// The group of `hash`, locked.
    fn locked(&mut self, hash: u64) -> &mut Group<S> {
        self.touched = true;
        let groups = self.store.group_count();
        let g = key_group(hash, groups).0;
        if self.current.as_ref().map(|(cg, _)| *cg) != Some(g) {
            self.current = None;
            let mut guard = lock(&self.store.groups[g as usize]);
            guard.settle(KeyGroup(g), groups);
            // Copy on write: a group a checkpoint still waits for is encoded before it changes.
            guard.snapshot_now(KeyGroup(g), groups);
            self.current = Some((g, guard));
        }
        match &mut self.current {
            Some((_, group)) => group,
            None => unreachable!("set just above"),
        }
    }

    /// The pending timers of the key group of `hash`.
    pub fn timers(&mut self, hash: u64) -> &mut TimerQueue {
        &mut self.locked(hash).timers
    }

    /// The state of the record's key, created with `Default` if absent.
    #[inline]
    pub fn get_mut(&mut self, r: Record<'_>) -> &mut S {
        let table = self.group(r.hash);
        let entry = table
            .entry(r.hash, |e| same_key(e.hash, &e.key, r.hash, r.key), |e| e.hash)
            .or_insert_with(|| Entry {
                hash: r.hash,
                key: KeyBytes::from_slice(r.key),
                value: S::default(),
            });
        &mut entry.into_mut().value
    }

    /// The state of the record's key, if present.
    #[inline]
    pub fn get(&mut self, r: Record<'_>) -> Option<&mut S> {
        let table = self.group(r.hash);
        table.find_mut(r.hash, |e| same_key(e.hash, &e.key, r.hash, r.key)).map(|e| &mut e.value)
    }

    /// Removes and returns the state of the record's key.
    pub fn remove(&mut self, r: Record<'_>) -> Option<S> {
        let table = self.group(r.hash);
        match table.find_entry(r.hash, |e| same_key(e.hash, &e.key, r.hash, r.key)) {
            Ok(entry) => Some(entry.remove().0.value),
            Err(_) => None,
        }
    }
}

#[cfg(test)]
mod tests;
