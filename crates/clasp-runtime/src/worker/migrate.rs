//! This worker's side of a migration (see [`crate::migration`]).

use super::WorkerShared;
use super::control::Control;
use super::mesh::connected_peers;
use crate::migration::{self, MigrationData, MigrationDone, MigrationOrder, StateGroup};
use crate::request::Request;
use crate::routing::Routing;
use crate::wire::Message;
use clasp_core::rng::SplitMix64;
use clasp_core::state::DetachedGroup;
use clasp_core::{KeyGroup, OperatorId, WorkerId};
use crossbeam_channel::Receiver;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// This worker's side of a migration (see [`crate::migration`]).
///
/// Outgoing key groups are detached in O(1) per group while paused and encoded afterwards; a
/// worker that expects nothing resumes before encoding. Incoming groups are staged as they
/// arrive and decoded on first access or right after resuming, so a receiver's pause is the
/// wait for its senders' messages. The completion goes to the planner once the worker has
/// resumed and sent what it owes; decoding staged groups goes on after it.
pub(super) fn migrate(
    shared: &Arc<WorkerShared>,
    order: MigrationOrder,
    rx: &Receiver<Control>,
    early: &mut Vec<MigrationData>,
    rng: &mut SplitMix64,
) {
    let started = Instant::now();
    let me = shared.me;
    shared.sched.pause_and_drain();
    let (routing, held) = shared.install(order.routing);
    let mut queued = shared.sched.take_all();
    queued.extend(held);
    let (mut keep, mut to_peer) = route_queued(queued, &routing, me, rng);
    let mut done = MigrationDone { epoch: order.epoch, worker: me, ..MigrationDone::default() };
    let outgoing: Vec<_> = order
        .part
        .send_to
        .iter()
        .map(|t| {
            let groups: Vec<_> = t
                .groups
                .iter()
                .flat_map(|gm| gm.groups.iter().map(move |&g| (gm.operator, g)))
                .map(|(op, g)| (op, g, shared.stores[op.index()].detach_group(g)))
                .collect();
            (t.peer, groups, to_peer.remove(&t.peer).unwrap_or_default())
        })
        .collect();
    let expected = order.part.receive_from.clone();
    let mut resumed = false;
    if expected.is_empty() {
        shared.sched.push_many(std::mem::take(&mut keep));
        shared.sched.resume(shared.limits(&routing));
        done.pause_us = started.elapsed().as_micros() as u64;
        resumed = true;
    }
    let emptied = ship(shared, order.epoch, outgoing, &mut done);
    // Requests for peers the plan does not name (routed under an older epoch) are forwarded.
    for (w, reqs) in to_peer {
        shared.send_to_peer(w, Message::Requests(reqs));
    }
    let wait_started = Instant::now();
    let arrived = await_peers(shared, order.epoch, &expected, rx, early, &mut done);
    done.wait_us = wait_started.elapsed().as_micros() as u64;
    done.waited_for = expected;
    let mut staged = Vec::new();
    let mut migrated = Vec::new();
    for d in arrived {
        for g in d.groups {
            shared.stores[g.op.index()].stage_group(g.group, g.bytes, g.keys as usize);
            staged.push((g.op, g.group, d.from));
        }
        migrated.extend(d.requests);
    }
    if !resumed {
        // Requests handed over were queued before anything that reached this worker directly
        // under the new epoch: they go first, so each key keeps its order.
        shared.sched.push_front_many(migrated);
        shared.sched.push_many(keep);
        shared.sched.resume(shared.limits(&routing));
        done.pause_us = started.elapsed().as_micros() as u64;
    } else {
        shared.sched.push_front_many(migrated);
    }
    shared.planner.send(Message::MigrationDone(done));
    drop(emptied);
    for (op, g, from) in staged {
        if let Err(e) = shared.stores[op.index()].import_staged(g) {
            tracing::error!(
                "worker {me}: state of {g} of {op} from {from} is invalid and was dropped: {e}"
            );
        }
    }
}

/// What one peer is owed: its key groups, detached from this worker's stores, and the queued
/// requests that now belong to it.
type Owed = (WorkerId, Vec<(OperatorId, KeyGroup, Box<dyn DetachedGroup>)>, Vec<Request>);

/// Encodes and sends what each peer is owed, one message per peer. The receivers wait for
/// exactly this, so the peers are shared out over as many threads as the machine has cores.
/// Returns the emptied groups' entries, to be freed once this worker no longer holds anyone up.
fn ship(
    shared: &WorkerShared,
    epoch: u64,
    outgoing: Vec<Owed>,
    done: &mut MigrationDone,
) -> Vec<Box<dyn DetachedGroup>> {
    let threads = std::thread::available_parallelism().map_or(1, usize::from).min(outgoing.len());
    if threads <= 1 {
        return outgoing.into_iter().flat_map(|o| ship_to_peer(shared, epoch, o, done)).collect();
    }
    let mut shares: Vec<Vec<Owed>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, o) in outgoing.into_iter().enumerate() {
        shares[i % threads].push(o);
    }
    type Shipped = (Vec<Box<dyn DetachedGroup>>, MigrationDone);
    let results: Vec<Shipped> = std::thread::scope(|scope| {
        let handles: Vec<_> = shares
            .into_iter()
            .map(|share| {
                scope.spawn(move || {
                    let mut part = MigrationDone::default();
                    let emptied =
                        share.into_iter().flat_map(|o| ship_to_peer(shared, epoch, o, &mut part));
                    (emptied.collect(), part)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("a migration sender panicked")).collect()
    });
    let mut emptied = Vec::new();
    for (groups, part) in results {
        emptied.extend(groups);
        done.keys_sent += part.keys_sent;
        done.bytes_sent += part.bytes_sent;
        done.requests_sent += part.requests_sent;
        done.error = done.error.take().or(part.error);
    }
    emptied
}

/// Encodes and sends one peer's message; returns its emptied groups.
fn ship_to_peer(
    shared: &WorkerShared,
    epoch: u64,
    owed: Owed,
    done: &mut MigrationDone,
) -> Vec<Box<dyn DetachedGroup>> {
    let (peer, groups, requests) = owed;
    let mut state = Vec::with_capacity(groups.len());
    for (op, g, detached) in &groups {
        let mut bytes = Vec::new();
        match detached.encode(*g, &mut bytes) {
            Ok(keys) => {
                done.keys_sent += keys as u64;
                done.bytes_sent += bytes.len() as u64;
                state.push(StateGroup { op: *op, group: *g, keys: keys as u32, bytes });
            }
            Err(e) => done.error = Some(format!("encoding {g} of {op}: {e}")),
        }
    }
    done.requests_sent += requests.len() as u64;
    let data = MigrationData { epoch, from: shared.me, groups: state, requests };
    shared.send_to_peer(peer, Message::MigrationData(Box::new(data)));
    groups.into_iter().map(|(_, _, detached)| detached).collect()
}

/// Queued requests under the new routing: those this worker keeps, and those for each peer.
fn route_queued(
    queued: Vec<Request>,
    routing: &Routing,
    me: WorkerId,
    rng: &mut SplitMix64,
) -> (Vec<Request>, HashMap<WorkerId, Vec<Request>>) {
    let mut keep = Vec::new();
    let mut to_peer: HashMap<WorkerId, Vec<Request>> = HashMap::new();
    for r in queued {
        for (w, part) in migration::reroute(r, routing, me, rng) {
            if w == me {
                keep.push(part);
            } else {
                to_peer.entry(w).or_default().push(part);
            }
        }
    }
    (keep, to_peer)
}

/// Waits for the migration messages of every peer in `expected` (some may have arrived
/// early); a lost peer or a timeout is recorded in `done`.
fn await_peers(
    shared: &Arc<WorkerShared>,
    epoch: u64,
    expected: &[WorkerId],
    rx: &Receiver<Control>,
    early: &mut Vec<MigrationData>,
    done: &mut MigrationDone,
) -> Vec<MigrationData> {
    let (mut arrived, rest): (Vec<_>, Vec<_>) = early.drain(..).partition(|d| d.epoch == epoch);
    *early = rest;
    let deadline = Instant::now() + Duration::from_secs(60);
    while !expected.iter().all(|w| arrived.iter().any(|d| d.from == *w)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Control::Data(d)) if d.epoch == epoch => arrived.push(*d),
            Ok(Control::Data(d)) => early.push(*d),
            Ok(Control::PeerUp(_)) => {
                shared.planner.send(Message::MeshReady(connected_peers(shared)));
            }
            Ok(Control::PeerDown(w, why)) if expected.contains(&w) => {
                done.error = Some(format!("worker {w} was lost during the migration: {why}"));
                break;
            }
            Ok(other) => tracing::debug!("worker {}: during migration: {other:?}", shared.me),
            Err(_) => {
                let missing: Vec<String> = expected
                    .iter()
                    .filter(|w| !arrived.iter().any(|d| d.from == **w))
                    .map(ToString::to_string)
                    .collect();
                done.error =
                    Some(format!("no migration data from {} after 60 s", missing.join(", ")));
                break;
            }
        }
    }
    arrived
}
