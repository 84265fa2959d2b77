//! The migration protocol (CLASP §4.4, Fig. 7).
//!
//! The planner diffs the old and new placements into a [`clasp_core::placement::MigrationPlan`]
//! and sends each worker its part with the new routing. Each worker then, on its own:
//! 1. stops starting requests and lets running executions finish;
//! 2. installs the new routing;
//! 3. sends every peer the plan names one message (empty ones too — it doubles as "done")
//!    with the key groups it no longer owns and the queued requests that now belong there;
//! 4. waits only for the peers the plan says will send to it;
//! 5. installs what arrived, resumes, and reports to the planner.
//!
//! There is no global barrier and the planner carries no state. A request routed under an older
//! epoch that reaches a worker no longer owning its key is forwarded, never dropped or run twice;
//! one routed under a newer epoch than the worker knows is held until the worker catches up.

use crate::request::{Request, split_credit};
use crate::routing::{Routing, RoutingPlan};
use clasp_core::placement::WorkerMigration;
use clasp_core::rng::SeededRng;
use clasp_core::{Batch, KeyGroup, OperatorId, WorkerId};
use serde::{Deserialize, Serialize};

/// Planner → worker: your part of a migration.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MigrationOrder {
    /// The new epoch.
    pub epoch: u64,
    /// The new routing.
    pub routing: RoutingPlan,
    /// Whom to send to and wait for.
    pub part: WorkerMigration,
}

/// One key group's state.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StateGroup {
    /// The keyed operator.
    pub op: OperatorId,
    /// The group.
    pub group: KeyGroup,
    /// Keys in it.
    pub keys: u32,
    /// The store's encoding.
    #[serde(with = "clasp_core::batch::byte_vec")]
    pub bytes: Vec<u8>,
}

/// Worker → worker: everything one worker hands one peer in a migration.
#[derive(Debug, Serialize, Deserialize)]
pub struct MigrationData {
    /// The epoch migrated to.
    pub epoch: u64,
    /// The sender.
    pub from: WorkerId,
    /// State of the groups handed over.
    pub groups: Vec<StateGroup>,
    /// Queued requests that now belong to the receiver.
    pub requests: Vec<Request>,
}

/// Worker → planner: the migration finished here.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MigrationDone {
    /// The epoch migrated to.
    pub epoch: u64,
    /// The worker.
    pub worker: WorkerId,
    /// Plan received → resumed (µs).
    pub pause_us: u64,
    /// Time spent waiting for peers' data (µs).
    pub wait_us: u64,
    /// Peers this worker waited for.
    pub waited_for: Vec<WorkerId>,
    /// State bytes sent.
    pub bytes_sent: u64,
    /// Keys sent.
    pub keys_sent: u64,
    /// Queued requests handed over.
    pub requests_sent: u64,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// Splits `req` by the worker each of its records belongs to under `routing`: the records of a
/// keyed operator go to their key's owner, a stateless operator's request stays with `me` if
/// `me` hosts it and otherwise goes to one drawn host. Credit is split exactly.
pub fn reroute(
    req: Request,
    routing: &Routing,
    me: WorkerId,
    rng: &mut SeededRng,
) -> Vec<(WorkerId, Request)> {
    if !routing.is_keyed(req.op) {
        let to = if routing.hosts(req.op, me) { me } else { routing.draw(req.op, rng) };
        let mut req = req;
        req.epoch = routing.epoch;
        return vec![(to, req)];
    }
    let single_owner = {
        let mut owners = req.batch.iter().map(|r| routing.owner(req.op, r.hash));
        let first = owners.next().unwrap_or(me);
        owners.all(|w| w == first).then_some(first)
    };
    if let Some(first) = single_owner {
        return vec![(first, Request { epoch: routing.epoch, ..req })];
    }
    let mut parts: Vec<(WorkerId, Batch)> = Vec::new();
    for r in req.batch.iter() {
        let w = routing.owner(req.op, r.hash);
        match parts.iter_mut().find(|(pw, _)| *pw == w) {
            Some((_, b)) => b.push_record(r),
            None => {
                let mut b = Batch::new();
                b.push_record(r);
                parts.push((w, b));
            }
        }
    }
    let shares: Vec<u64> = split_credit(req.credit, parts.len()).collect();
    parts
        .into_iter()
        .zip(shares)
        .map(|((w, batch), credit)| {
            let part = Request {
                op: req.op,
                port: req.port,
                chain: req.chain,
                credit,
                epoch: routing.epoch,
                batch,
                enqueued: None,
            };
            (w, part)
        })
        .collect()
}
