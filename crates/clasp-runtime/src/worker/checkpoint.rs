//! This worker's side of checkpoints and recoveries (see [`crate::fault`]).
//!
//! - a checkpoint: once the planner started a new cut, requests of that cut wait here before
//!   they touch keyed state; when every chain of the earlier cuts completed, the planner's
//!   order comes, and the worker marks the key groups it owns (copy on write, O(groups)), lets
//!   the waiting requests run, answers at once, and then encodes and writes the groups as one
//!   blob on a thread of its own;
//! - a rollback: everything queued, gated or held is dropped, running executions finish and
//!   their outputs are discarded, and the state is cleared; requests of older epochs that
//!   still arrive are dropped;
//! - a restore: the groups this worker owns under the new routing are read from the store,
//!   checked against their checksums and staged (decoded on first access), as a migration
//!   stages what it receives.

use super::WorkerShared;
use crate::fault::store::{self, CheckpointStore};
use crate::request::Request;
use crate::wire::{
    BlobIndex, CheckpointMarked, CheckpointOrder, CheckpointWritten, GroupIndex, Message,
    RestoreOrder, Restored,
};
use clasp_core::snapshot::StoreSnapshot;
use clasp_core::sync::{lock, write};
use clasp_core::{KeyGroup, OperatorId};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Requests of a checkpoint boundary's new cut that reached keyed state before this worker
/// marked the boundary's snapshot.
#[derive(Debug, Default)]
pub(super) struct CutHold {
    requests: Vec<Request>,
    /// When the first of them arrived.
    since: Option<Instant>,
}

impl WorkerShared {
    /// Holds `req` (of a cut after the last mark, for keyed state) until the next mark; gives
    /// it back if that mark came meanwhile.
    pub(super) fn hold_for_mark(&self, req: Request) -> Option<Request> {
        let mut held = lock(&self.cut_held);
        if !req.cut.is_after(self.marked_cut.load(Ordering::Acquire)) {
            return Some(req);
        }
        held.since.get_or_insert_with(Instant::now);
        held.requests.push(req);
        None
    }

    /// Boundary `cut` is marked: its requests run from now on. Returns those that waited
    /// (in arrival order) and how long the first waited.
    fn marked(&self, cut: u64) -> (Vec<Request>, Duration) {
        let mut held = lock(&self.cut_held);
        self.marked_cut.store(cut, Ordering::Release);
        let waited = held.since.take().map_or(Duration::ZERO, |t| t.elapsed());
        (std::mem::take(&mut held.requests), waited)
    }

    /// A rollback: what waited is dropped like the rest of the queue.
    fn drop_held(&self) {
        *lock(&self.cut_held) = CutHold::default();
    }
}

/// The store at `location`, opened once per worker.
fn open_store(
    shared: &WorkerShared,
    location: &str,
) -> Result<Arc<dyn CheckpointStore>, store::StoreError> {
    let mut cached = lock(&shared.store);
    if let Some((at, s)) = cached.as_ref()
        && at == location
    {
        return Ok(s.clone());
    }
    let s = store::open(location)?;
    *cached = Some((location.to_owned(), s.clone()));
    Ok(s)
}

/// Marks this worker's key groups for checkpoint `order.id`, answers, and writes them in the
/// background.
pub(super) fn checkpoint(shared: &Arc<WorkerShared>, order: CheckpointOrder) {
    let routing = shared.routing();
    let keys = &routing.plan().keys;
    let marked: Vec<(OperatorId, Arc<StoreSnapshot>)> = shared
        .pipeline
        .operators
        .iter()
        .filter(|o| o.stateful)
        .map(|o| {
            let owned: Vec<KeyGroup> = keys
                .owners
                .get(o.id.index())
                .map(|owners| {
                    owners
                        .iter()
                        .enumerate()
                        .filter(|(_, w)| **w == shared.me)
                        .map(|(g, _)| KeyGroup(g as u32))
                        .collect()
                })
                .unwrap_or_default();
            (o.id, shared.stores[o.id.index()].mark_snapshot(owned))
        })
        .collect();
    let (released, waited) = shared.marked(order.cut);
    if !released.is_empty() {
        shared.sched.push_many(released);
    }
    let held_us = waited.as_micros() as u64;
    shared.planner.send(Message::CheckpointMarked(CheckpointMarked { id: order.id, held_us }));
    let shared = shared.clone();
    std::thread::Builder::new()
        .name(format!("w{}-checkpoint", shared.me))
        .spawn(move || {
            let started = Instant::now();
            let result = write_blob(&shared, &order, &marked);
            let (blob, error) = match result {
                Ok(b) => (Some(b), None),
                Err(e) => (None, Some(e)),
            };
            let done = CheckpointWritten {
                id: order.id,
                worker: shared.me,
                blob,
                write_us: started.elapsed().as_micros() as u64,
                error,
            };
            shared.planner.send(Message::CheckpointWritten(Box::new(done)));
        })
        .expect("spawn checkpoint writer");
}

/// Encodes every marked group (those not encoded yet by an executor's first change) into one
/// blob and writes it.
fn write_blob(
    shared: &WorkerShared,
    order: &CheckpointOrder,
    marked: &[(OperatorId, Arc<StoreSnapshot>)],
) -> Result<BlobIndex, String> {
    let mut blob = Vec::new();
    let mut groups = Vec::new();
    for (op, snapshot) in marked {
        let store = &shared.stores[op.index()];
        for (slot, &g) in snapshot.groups().iter().enumerate() {
            store.snapshot_group(g);
            let encoded = snapshot
                .take(slot)
                .ok_or_else(|| format!("{g} of {op} was cleared before it was written"))?
                .map_err(|e| format!("encoding {g} of {op}: {e}"))?;
            let offset = blob.len() as u64;
            blob.extend_from_slice(&encoded.bytes);
            groups.push(GroupIndex {
                op: *op,
                group: g,
                offset,
                len: encoded.bytes.len() as u64,
                keys: encoded.keys as u64,
                crc32: crc32fast::hash(&encoded.bytes),
            });
        }
    }
    let store = open_store(shared, &order.store).map_err(|e| e.to_string())?;
    store.put(&order.blob, &blob).map_err(|e| e.to_string())?;
    Ok(BlobIndex {
        name: order.blob.clone(),
        worker: shared.me,
        bytes: blob.len() as u64,
        crc32: crc32fast::hash(&blob),
        groups,
    })
}

/// Drops everything this worker holds and answers the planner.
pub(super) fn roll_back(shared: &WorkerShared, generation: u64) {
    // Outputs buffered by executions running now are discarded from here on.
    {
        let _gate = write(&shared.send_gate);
        shared.generation.store(generation, Ordering::Release);
    }
    shared.floor.store(u64::MAX, Ordering::Release);
    shared.sched.pause_and_drain();
    drop(shared.sched.take_all());
    shared.sched.reset_gate();
    lock(&shared.held).clear();
    shared.drop_held();
    for s in &shared.stores {
        s.clear();
    }
    shared.planner.send(Message::RolledBack(generation));
}

/// Installs the recovery's routing, restores this worker's groups and resumes.
pub(super) fn restore(shared: &WorkerShared, order: RestoreOrder) {
    let mut done =
        Restored { generation: order.generation, worker: shared.me, ..Restored::default() };
    if let Err(e) = stage_groups(shared, &order, &mut done) {
        done.error = Some(e);
    }
    let (routing, held) = shared.install(order.routing);
    drop(held);
    // Every worker restarts at the planner's cut: the chains replayed and those after them.
    shared.marked(order.cut);
    shared.floor.store(routing.epoch, Ordering::Release);
    shared.sched.resume(shared.limits(&routing));
    shared.planner.send(Message::Restored(done));
}

fn stage_groups(
    shared: &WorkerShared,
    order: &RestoreOrder,
    done: &mut Restored,
) -> Result<(), String> {
    if order.groups.is_empty() {
        return Ok(());
    }
    let store = open_store(shared, &order.store).map_err(|e| e.to_string())?;
    let mut blobs: HashMap<&str, Vec<u8>> = HashMap::new();
    for g in &order.groups {
        if !blobs.contains_key(g.blob.as_str()) {
            let bytes = store
                .get(&g.blob)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("{} is missing from {}", g.blob, store.location()))?;
            done.bytes += bytes.len() as u64;
            blobs.insert(&g.blob, bytes);
        }
        let blob = &blobs[g.blob.as_str()];
        let range = usize::try_from(g.offset)
            .ok()
            .zip(usize::try_from(g.len).ok())
            .and_then(|(o, n)| Some(o..o.checked_add(n)?))
            .filter(|r| r.end <= blob.len())
            .ok_or_else(|| {
                format!("{} of {} is outside {} ({} bytes)", g.group, g.op, g.blob, blob.len())
            })?;
        let bytes = &blob[range];
        if crc32fast::hash(bytes) != g.crc32 {
            return Err(format!("{} of {} in {}: checksum mismatch", g.group, g.op, g.blob));
        }
        let Some(store) = shared.stores.get(g.op.index()) else {
            return Err(format!("{} is not an operator of this pipeline", g.op));
        };
        store.stage_group(g.group, bytes.to_vec(), g.keys as usize);
        done.keys += g.keys;
    }
    Ok(())
}
