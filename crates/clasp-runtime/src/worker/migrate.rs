//! This worker's side of a migration (see [`crate::migration`]).

use super::WorkerShared;
use super::background::run_in_background;
use super::control::{Control, Inbox};
use crate::migration::{self, MigrationData, MigrationDone, MigrationOrder, StateGroup};
use crate::request::Request;
use crate::routing::Routing;
use crate::wire::Message;
use clasp_core::rng::SeededRng;
use clasp_core::state::DetachedGroup;
use clasp_core::{KeyGroup, OperatorId, WorkerId};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// This worker's side of a migration (see [`crate::migration`]).
///
/// The pause is short and does not grow with what moves or what is queued: running executions
/// finish, the key groups this worker takes over are gated, the new routing is installed, the
/// queue is taken out and outgoing groups are detached in O(1) each — then the worker resumes.
/// Re-routing the queue (keyed operators' new records wait meanwhile), encoding and sending
/// what each peer is owed come after; so does waiting for what peers send: each sender's
/// message opens its groups, and only their records waited. Incoming groups are
/// staged as they arrive and decoded on first access or, right after, by a background thread
/// (with the entries given up freed there too). The completion goes to
/// the planner once every expected message arrived. Returns the control events that came
/// meanwhile and are not the migration's, in order, for the control loop.
pub(super) fn migrate(
    shared: &Arc<WorkerShared>,
    order: MigrationOrder,
    inbox: &mut Inbox<'_>,
    early: &mut Vec<MigrationData>,
    rng: &mut SeededRng,
) -> Vec<Control> {
    let started = Instant::now();
    let me = shared.me;
    let expected = order.part.receive_from.clone();
    shared.sched.pause_for_migration();
    let incoming = incoming_groups(&shared.routing(), &order, me, &expected);
    let gated: Vec<(OperatorId, KeyGroup)> = incoming.iter().map(|&(op, g, _)| (op, g)).collect();
    shared.sched.close_gate(shared.pipeline.operators.len(), order.routing.keys.groups, &gated);
    let (routing, held) = shared.install(order.routing);
    let mut queued = shared.sched.take_all();
    let mut done = MigrationDone { epoch: order.epoch, worker: me, ..MigrationDone::default() };
    let detached: Vec<_> = order
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
            (t.peer, groups)
        })
        .collect();
    // The queued requests of keyed operators are re-routed after resuming; until then their
    // operators' new records wait, so none overtakes an older one of its key.
    let stale: Vec<OperatorId> = (0..queued.len())
        .map(OperatorId::from)
        .filter(|&op| routing.is_keyed(op) && !queued[op.index()].is_empty())
        .chain(held.iter().map(|r| r.op).filter(|&op| routing.is_keyed(op)))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if let Some(q) = queued.first_mut() {
        // Held requests are newer than anything queued: they go last, whichever queue.
        q.extend(held);
    }
    shared.sched.close_operators(&stale);
    shared.sched.resume(shared.limits(&routing));
    done.pause_us = started.elapsed().as_micros() as u64;
    let (keep, mut to_peer) = route_queued(queued, &routing, me, rng);
    shared.sched.open_operators(&stale, keep);
    let outgoing: Vec<Owed> = detached
        .into_iter()
        .map(|(peer, groups)| (peer, groups, to_peer.remove(&peer).unwrap_or_default()))
        .collect();
    let emptied = ship(shared, order.epoch, outgoing, &mut done);
    // Requests for peers the plan does not name (a stateless operator's, spread by share) are
    // forwarded.
    for (w, reqs) in to_peer {
        shared.send_to_peer(w, Message::Requests(reqs));
    }
    let wait_started = Instant::now();
    let mut staged = Vec::new();
    let mut open = |d: MigrationData| {
        let MigrationData { from, groups, requests, .. } = d;
        for g in groups {
            shared.stores[g.op.index()].stage_group(g.group, g.bytes, g.keys as usize);
            staged.push((g.op, g.group, from));
        }
        let from_sender: Vec<(OperatorId, KeyGroup)> =
            incoming.iter().filter(|x| x.2 == from).map(|&(op, g, _)| (op, g)).collect();
        shared.sched.open_gate(&from_sender, requests);
    };
    let mut set_aside = Vec::new();
    let mut waited = Waited { done: &mut done, set_aside: &mut set_aside };
    await_peers(order.epoch, &expected, inbox, early, &mut waited, &mut open);
    // A sender that never delivered leaves the migration failed; its groups open so nothing
    // waits for them forever.
    shared.sched.open_gate(&gated, Vec::new());
    done.wait_us = wait_started.elapsed().as_micros() as u64;
    done.waited_for = expected;
    shared.planner.send(Message::MigrationDone(done));
    let tidy = shared.clone();
    run_in_background(format!("w{me}-after-migration"), move || {
        drop(emptied);
        for (op, g, from) in staged {
            if let Err(e) = tidy.stores[op.index()].import_staged(g) {
                tracing::error!(
                    "worker {me}: state of {g} of {op} from {from} is invalid and was dropped: {e}"
                );
            }
        }
    });
    set_aside
}

/// The key groups `me` takes over from the peers in `expected`, with their previous owners:
/// those it owns under the order's routing and did not own under `old`.
fn incoming_groups(
    old: &Routing,
    order: &MigrationOrder,
    me: WorkerId,
    expected: &[WorkerId],
) -> Vec<(OperatorId, KeyGroup, WorkerId)> {
    let old_keys = &old.plan().keys;
    let new_keys = &order.routing.keys;
    let mut groups = Vec::new();
    for (o, owners) in new_keys.owners.iter().enumerate() {
        let op = OperatorId::from(o);
        for (g, &owner) in owners.iter().enumerate() {
            let group = KeyGroup(g as u32);
            let Some(before) = old_keys.owner(op, group) else { continue };
            if owner == me && before != me && expected.contains(&before) {
                groups.push((op, group, before));
            }
        }
    }
    groups
}

/// What one peer is owed: its key groups, detached from this worker's stores, and the queued
/// requests that now belong to it.
type Owed = (WorkerId, Vec<(OperatorId, KeyGroup, Box<dyn DetachedGroup>)>, Vec<Request>);

/// Encodes and sends what each peer is owed, one message per peer. The receivers wait for
/// exactly this, so the peers are shared out over as many threads as the machine has cores,
/// this one included (a thread started for each share would first have to be scheduled).
/// Returns the emptied groups' entries, to be freed once this worker no longer holds anyone up.
fn ship(
    shared: &WorkerShared,
    epoch: u64,
    outgoing: Vec<Owed>,
    done: &mut MigrationDone,
) -> Vec<Box<dyn DetachedGroup>> {
    // Read once: the standard library reads the cgroup's quota files on every call.
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let cores = *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, usize::from));
    let threads = cores.min(outgoing.len());
    if threads <= 1 {
        return ship_share(shared, epoch, outgoing, done);
    }
    let mut shares: Vec<Vec<Owed>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, o) in outgoing.into_iter().enumerate() {
        shares[i % threads].push(o);
    }
    type Shipped = (Vec<Box<dyn DetachedGroup>>, MigrationDone);
    let ship = move |share: Vec<Owed>| -> Shipped {
        let mut part = MigrationDone::default();
        (ship_share(shared, epoch, share, &mut part), part)
    };
    let own = shares.pop().unwrap_or_default();
    let results: Vec<Shipped> = std::thread::scope(|scope| {
        let handles: Vec<_> =
            shares.into_iter().map(|share| scope.spawn(move || ship(share))).collect();
        let mut results = vec![ship(own)];
        results.extend(handles.into_iter().map(|h| h.join().expect("a migration sender panicked")));
        results
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

/// Encodes what each peer of `share` is owed, then sends it; returns the emptied groups. The
/// share is encoded whole before any of it is sent: a receiver decodes what it got right
/// after, and that would slow down the encoding still owed to the others.
fn ship_share(
    shared: &WorkerShared,
    epoch: u64,
    share: Vec<Owed>,
    done: &mut MigrationDone,
) -> Vec<Box<dyn DetachedGroup>> {
    let encoded: Vec<_> =
        share.into_iter().map(|o| encode_for_peer(shared, epoch, o, done)).collect();
    let mut emptied = Vec::new();
    for (peer, data, groups) in encoded {
        shared.send_to_peer(peer, Message::MigrationData(Box::new(data)));
        emptied.extend(groups);
    }
    emptied
}

/// Encodes one peer's message; returns it with the peer and the emptied groups.
fn encode_for_peer(
    shared: &WorkerShared,
    epoch: u64,
    owed: Owed,
    done: &mut MigrationDone,
) -> (WorkerId, MigrationData, Vec<Box<dyn DetachedGroup>>) {
    let (peer, groups, requests) = owed;
    let mut state = Vec::with_capacity(groups.len());
    for (op, g, detached) in &groups {
        // Room for a short key and its count without growing (longer entries grow once or so).
        let mut bytes = Vec::with_capacity(16 * detached.keys() + 8);
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
    (peer, data, groups.into_iter().map(|(_, _, detached)| detached).collect())
}

/// Queued requests under the new routing ([`migration::reroute_queued`]): those this worker
/// keeps, and those for each peer.
fn route_queued(
    queued: Vec<std::collections::VecDeque<Request>>,
    routing: &Routing,
    me: WorkerId,
    rng: &mut SeededRng,
) -> (Vec<Request>, HashMap<WorkerId, Vec<Request>>) {
    let mut keep = Vec::new();
    let mut to_peer: HashMap<WorkerId, Vec<Request>> = HashMap::new();
    for r in queued.into_iter().flatten() {
        for (w, part) in migration::reroute_queued(r, routing, me, rng) {
            if w == me {
                keep.push(part);
            } else {
                to_peer.entry(w).or_default().push(part);
            }
        }
    }
    (keep, to_peer)
}

/// Where [`await_peers`] records what it waited for: the failure in the completion, and the
/// control events that are not the migration's (the control loop handles them after it).
struct Waited<'a> {
    done: &'a mut MigrationDone,
    set_aside: &'a mut Vec<Control>,
}

/// Waits for the migration messages of every peer in `expected` (some may have arrived
/// early), handing each to `arrived` as it comes; a lost peer, a recovery or the end, or a
/// timeout ends the wait with the migration failed. Every other event is set aside in order:
/// a peer leaving or joining meanwhile must still change this worker's links.
fn await_peers(
    epoch: u64,
    expected: &[WorkerId],
    inbox: &mut Inbox<'_>,
    early: &mut Vec<MigrationData>,
    waited: &mut Waited<'_>,
    arrived: &mut impl FnMut(MigrationData),
) {
    let (now, rest): (Vec<_>, Vec<_>) = early.drain(..).partition(|d| d.epoch == epoch);
    *early = rest;
    let mut got: Vec<WorkerId> = Vec::new();
    for d in now {
        got.push(d.from);
        arrived(d);
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while !expected.iter().all(|w| got.contains(w)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match inbox.recv_timeout(left) {
            Ok(Control::Data(d)) if d.epoch == epoch => {
                got.push(d.from);
                arrived(*d);
            }
            Ok(Control::Data(d)) => early.push(*d),
            Ok(Control::PeerDown(w, why)) if expected.contains(&w) => {
                waited.done.error =
                    Some(format!("worker {w} was lost during the migration: {why}"));
                waited.set_aside.push(Control::PeerDown(w, why));
                break;
            }
            // A recovery (or the end) overrides the migration: the control loop handles it next.
            Ok(Control::Planner(m @ (Message::Rollback(_) | Message::Shutdown))) => {
                waited.done.error = Some(format!("interrupted by {}", m.name()));
                waited.set_aside.push(Control::Planner(m));
                break;
            }
            Ok(other) => waited.set_aside.push(other),
            Err(_) => {
                let missing: Vec<String> =
                    expected.iter().filter(|w| !got.contains(w)).map(ToString::to_string).collect();
                waited.done.error =
                    Some(format!("no migration data from {} after 60 s", missing.join(", ")));
                break;
            }
        }
    }
}
