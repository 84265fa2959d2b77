//! The migration protocol (CLASP §4.4, Fig. 7).
//!
//! The planner diffs the old and new placements into a [`clasp_core::placement::MigrationPlan`]
//! and sends each worker its part with the new routing. Each worker then, on its own:
//! 1. stops starting requests and lets running executions finish;
//! 2. gates the key groups it takes over: their records wait aside until their state arrives;
//! 3. installs the new routing, takes its queue out and detaches the key groups it gives up
//!    (O(1) each), and resumes — the pause ends here, whatever the state size or the backlog;
//! 4. re-routes the queue it took out (its keyed operators' new records wait meanwhile, so none
//!    overtakes an older one of its key; a stateless operator's backlog spreads by share), and
//!    sends every peer the plan names one message (empty ones too — it doubles as "done") with
//!    the key groups it no longer owns and the queued requests that now belong there;
//! 5. as each expected message arrives, stages its state, queues its requests ahead of the
//!    records that waited for its groups, and opens the groups;
//! 6. reports to the planner once every expected message arrived.
//!
//! There is no global barrier and the planner carries no state. A request routed under an older
//! epoch that reaches a worker no longer owning its key is forwarded, never dropped or run twice;
//! one routed under a newer epoch than the worker knows is held until the worker catches up.

pub use clasp_wire::runtime::{MigrationData, MigrationDone, MigrationOrder, StateGroup};

use crate::request::{Request, split_credit};
use crate::routing::Routing;
use clasp_core::rng::SeededRng;
use clasp_core::{Batch, WorkerId};

/// Where a migrating worker's queued request goes under `routing`: as [`reroute`], except that
/// a stateless operator's request is drawn by share like a new arrival even where `me` still
/// runs the operator. Kept whole, a backlog queued on one worker before a scale-out would
/// drain at that one worker's speed while the workers added idle.
pub fn reroute_queued(
    req: Request,
    routing: &Routing,
    me: WorkerId,
    rng: &mut SeededRng,
) -> Vec<(WorkerId, Request)> {
    if req.time.fire().is_none() && !routing.is_keyed(req.op) {
        let to = routing.draw(req.op, rng);
        return vec![(to, Request { epoch: routing.epoch, ..req })];
    }
    reroute(req, routing, me, rng)
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
    if req.time.fire().is_some() {
        // A timer firing is for the worker it was sent to: it fires the groups held there.
        return vec![(me, Request { epoch: routing.epoch, ..req })];
    }
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
    for (i, r) in req.batch.iter().enumerate() {
        let w = routing.owner(req.op, r.hash);
        match parts.iter_mut().find(|(pw, _)| *pw == w) {
            Some((_, b)) => b.push_from(&req.batch, i),
            None => {
                let mut b = Batch::new();
                b.push_from(&req.batch, i);
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
                cut: req.cut,
                credit,
                epoch: routing.epoch,
                batch,
                time: req.time,
                enqueued: None,
            };
            (w, part)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::RoutingPlan;
    use clasp_core::OperatorId;
    use clasp_core::placement::Placement;
    use clasp_plan::keys::assign_keys;
    use rand::SeedableRng;
    use std::path::Path;

    /// Word count's routing with every operator even over `workers` workers.
    fn word_count_on(workers: u32) -> Routing {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines/wc.toml");
        let p = clasp_core::spec::load(&path).unwrap();
        let placement = Placement::even(&p, workers, 10);
        let keys = assign_keys(&p, &placement, 64, None);
        Routing::new(&p, RoutingPlan { epoch: 2, placement, keys })
    }

    #[test]
    fn a_stateless_backlog_spreads_by_share_where_an_arrival_stays() {
        let routing = word_count_on(4);
        let split = OperatorId::from(0usize);
        assert!(!routing.is_keyed(split));
        let me = WorkerId(0);
        let mut rng = SeededRng::seed_from_u64(7);
        let queued = || Request::new(split, 0, 1, 1, Batch::new());
        let mut spread = [0u32; 4];
        for _ in 0..4_000 {
            let routed = reroute_queued(queued(), &routing, me, &mut rng);
            assert_eq!(routed.len(), 1);
            assert_eq!(routed[0].1.epoch, 2);
            spread[routed[0].0.index()] += 1;
            // A late arrival of the same operator stays where it landed.
            assert_eq!(reroute(queued(), &routing, me, &mut rng)[0].0, me);
        }
        // Each worker runs a quarter of the split: 1,000 of 4,000 by share (σ = 27).
        assert!(spread.iter().all(|&n| n.abs_diff(1_000) < 150), "{spread:?}");
    }
}
