//! The migration plan between two placements (CLASP §4.4, Fig. 7).
//!
//! The planner diffs the old and new placements and key assignments into, per worker, the
//! peers it sends one message to and the peers it waits for. Workers then migrate among
//! themselves: a worker resumes as soon as every peer the plan names has delivered, with no
//! global barrier, so the plan must name exactly the peers that will send.

use clasp_core::placement::{
    GroupMove, KeyAssignment, MigrationPlan, Placement, Transfer, WorkerMigration,
};
use clasp_core::{KeyGroup, OperatorId, Pipeline, WorkerId};
use std::collections::{BTreeMap, BTreeSet};

/// What one worker sends one peer, accumulated in sorted containers.
#[derive(Default)]
struct Outgoing {
    groups: BTreeMap<OperatorId, Vec<KeyGroup>>,
    operators: BTreeSet<OperatorId>,
}

/// The decentralized migration from (`old`, `old_keys`) to (`new`, `new_keys`).
///
/// - Every key group of a stateful operator whose owner changes moves once, from its old
///   owner to its new owner, together with the requests queued for it.
/// - A worker that ran a stateless operator in `old` but not in `new` hands that operator's
///   queued requests to the operator's new main host: the worker with the largest fraction in
///   `new`, the lowest id among equals.
/// - Each worker sends one [`Transfer`] per peer (ascending), never to itself, and waits for
///   exactly the peers that send to it (`receive_from`, ascending).
///
/// The plan covers workers `0..max(old.workers, new.workers)`. Both placements must be for
/// `p` and pass [`Placement::check`]; both key assignments must come from
/// [`crate::keys::assign_keys`] on them.
///
/// # Panics
/// If the two key assignments have different numbers of key groups: a key's group would then
/// change, which is a different operation (a full re-hash), not a migration.
pub fn plan_migration(
    p: &Pipeline,
    old: &Placement,
    old_keys: &KeyAssignment,
    new: &Placement,
    new_keys: &KeyAssignment,
) -> MigrationPlan {
    assert_eq!(
        old_keys.groups, new_keys.groups,
        "a migration keeps the number of key groups; re-hashing is not a migration"
    );
    let workers = old.workers.max(new.workers) as usize;
    let mut outgoing: Vec<BTreeMap<WorkerId, Outgoing>> =
        (0..workers).map(|_| BTreeMap::new()).collect();
    for op in &p.operators {
        if op.stateful {
            moved_groups(op.id, old_keys, new_keys, &mut outgoing);
        } else {
            abandoned_queues(op.id, old, new, &mut outgoing);
        }
    }
    let mut receive_from: Vec<BTreeSet<WorkerId>> = vec![BTreeSet::new(); workers];
    for (w, peers) in outgoing.iter().enumerate() {
        for peer in peers.keys() {
            receive_from[peer.index()].insert(WorkerId::from(w));
        }
    }
    let workers = outgoing
        .into_iter()
        .zip(receive_from)
        .enumerate()
        .map(|(w, (peers, from))| WorkerMigration {
            worker: WorkerId::from(w),
            send_to: peers.into_iter().map(|(peer, out)| transfer(peer, out)).collect(),
            receive_from: from.into_iter().collect(),
        })
        .collect();
    MigrationPlan { workers }
}

/// Adds every group of `op` whose owner changes to its old owner's message to the new owner.
fn moved_groups(
    op: OperatorId,
    old_keys: &KeyAssignment,
    new_keys: &KeyAssignment,
    outgoing: &mut [BTreeMap<WorkerId, Outgoing>],
) {
    for g in 0..old_keys.groups as usize {
        let group = KeyGroup::from(g);
        let (Some(from), Some(to)) = (old_keys.owner(op, group), new_keys.owner(op, group)) else {
            continue;
        };
        if from != to {
            let out = outgoing[from.index()].entry(to).or_default();
            // Groups are visited in ascending order, so each list stays sorted.
            out.groups.entry(op).or_default().push(group);
        }
    }
}

/// Adds stateless `op` to the message of every worker that stops running it, addressed to
/// the operator's new main host.
fn abandoned_queues(
    op: OperatorId,
    old: &Placement,
    new: &Placement,
    outgoing: &mut [BTreeMap<WorkerId, Outgoing>],
) {
    let Some(host) = main_host(new, op) else { return };
    for w in old.workers_of(op) {
        if !new.workers_of(op).any(|x| x == w) {
            outgoing[w.index()].entry(host).or_default().operators.insert(op);
        }
    }
}

/// The worker with the largest fraction of `op` in `placement`, the lowest id among equals.
pub fn main_host(placement: &Placement, op: OperatorId) -> Option<WorkerId> {
    placement.operators[op.index()]
        .shares
        .iter()
        .max_by(|a, b| a.fraction.total_cmp(&b.fraction).then(b.worker.cmp(&a.worker)))
        .map(|s| s.worker)
}

fn transfer(peer: WorkerId, out: Outgoing) -> Transfer {
    Transfer {
        peer,
        groups: out
            .groups
            .into_iter()
            .map(|(operator, groups)| GroupMove { operator, groups })
            .collect(),
        operators: out.operators.into_iter().collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::{assign_keys, remap_workers};
    use crate::testing::{pipeline, random_pipeline, random_placement};
    use clasp_core::placement::{OperatorPlacement, Share};
    use clasp_core::rng::SeededRng;
    use proptest::prelude::*;
    use rand::{RngExt, SeedableRng};

    fn on(op: usize, workers: &[(u32, f64)]) -> OperatorPlacement {
        OperatorPlacement {
            operator: OperatorId::from(op),
            demand: 1.0,
            shares: workers
                .iter()
                .map(|&(w, f)| Share { worker: WorkerId(w), share: f, fraction: f, instances: 1 })
                .collect(),
        }
    }

    const TWO_KEYED: &str = r#"
[[source]]
name = "in"
key_field = 0
[[operator]]
name = "x"
kind = "reduce"
stateful = true
key = "k"
[[operator]]
name = "y"
kind = "reduce"
stateful = true
key = "k"
[[operator]]
name = "z"
kind = "map"
[[stream]]
from = "in"
to = "x"
[[stream]]
from = "x"
to = "y"
[[stream]]
from = "y"
to = "z"
"#;

    /// CLASP Fig. 7: A sends to B and C, B sends to C, C only receives.
    #[test]
    fn fig7_three_worker_plan() {
        let p = pipeline(TWO_KEYED);
        let (a, b, c) = (WorkerId(0), WorkerId(1), WorkerId(2));
        // x moves from A to B and C; y from B to C; z (stateless) from A to C.
        let old = Placement {
            workers: 3,
            operators: vec![on(0, &[(0, 1.0)]), on(1, &[(1, 1.0)]), on(2, &[(0, 1.0)])],
        };
        let new = Placement {
            workers: 3,
            operators: vec![on(0, &[(1, 0.5), (2, 0.5)]), on(1, &[(2, 1.0)]), on(2, &[(2, 1.0)])],
        };
        assert!(old.check(&p).is_ok() && new.check(&p).is_ok());
        let old_keys = assign_keys(&p, &old, 8, None);
        let new_keys = assign_keys(&p, &new, 8, Some(&old_keys));
        let plan = plan_migration(&p, &old, &old_keys, &new, &new_keys);

        let peers = |w: WorkerId| -> Vec<WorkerId> {
            plan.workers[w.index()].send_to.iter().map(|t| t.peer).collect()
        };
        assert_eq!(peers(a), [b, c]);
        assert_eq!(peers(b), [c]);
        assert!(peers(c).is_empty());
        assert!(plan.workers[a.index()].receive_from.is_empty(), "A resumes without waiting");
        assert_eq!(plan.workers[b.index()].receive_from, [a]);
        assert_eq!(plan.workers[c.index()].receive_from, [a, b]);

        let kg = |v: std::ops::Range<usize>| v.map(KeyGroup::from).collect::<Vec<_>>();
        let a_to_b = &plan.workers[0].send_to[0];
        assert_eq!(a_to_b.groups, [GroupMove { operator: OperatorId(0), groups: kg(0..4) }]);
        assert!(a_to_b.operators.is_empty());
        let a_to_c = &plan.workers[0].send_to[1];
        assert_eq!(a_to_c.groups, [GroupMove { operator: OperatorId(0), groups: kg(4..8) }]);
        assert_eq!(a_to_c.operators, [OperatorId(2)]);
        let b_to_c = &plan.workers[1].send_to[0];
        assert_eq!(b_to_c.groups, [GroupMove { operator: OperatorId(1), groups: kg(0..8) }]);
        assert_eq!(plan.moved_groups(), 16);
    }

    #[test]
    fn unchanged_placement_moves_nothing() {
        let p = random_pipeline(&mut SeededRng::seed_from_u64(5), 7, 0.5);
        let placement = random_placement(&mut SeededRng::seed_from_u64(6), &p, 4);
        let keys = assign_keys(&p, &placement, 64, None);
        let again = assign_keys(&p, &placement, 64, Some(&keys));
        assert_eq!(again, keys);
        let plan = plan_migration(&p, &placement, &keys, &placement, &again);
        assert!(plan.is_empty());
        assert_eq!(plan.workers.len(), 4);
    }

    #[test]
    fn scaling_in_empties_removed_workers() {
        let p = pipeline(TWO_KEYED);
        let old = Placement {
            workers: 3,
            operators: vec![
                on(0, &[(0, 0.4), (1, 0.3), (2, 0.3)]),
                on(1, &[(2, 1.0)]),
                on(2, &[(1, 0.5), (2, 0.5)]),
            ],
        };
        let new = Placement {
            workers: 1,
            operators: vec![on(0, &[(0, 1.0)]), on(1, &[(0, 1.0)]), on(2, &[(0, 1.0)])],
        };
        let old_keys = assign_keys(&p, &old, 10, None);
        let new_keys = assign_keys(&p, &new, 10, Some(&old_keys));
        let plan = plan_migration(&p, &old, &old_keys, &new, &new_keys);
        assert_eq!(plan.workers.len(), 3);
        assert!(plan.workers[0].send_to.is_empty());
        assert_eq!(plan.workers[0].receive_from, [WorkerId(1), WorkerId(2)]);
        for w in 1..3 {
            assert_eq!(plan.workers[w].send_to.len(), 1);
            assert_eq!(plan.workers[w].send_to[0].operators, [OperatorId(2)]);
        }
        // x: 3 + 3 groups leave workers 1 and 2; y: all 10 leave worker 2.
        assert_eq!(plan.moved_groups(), 16);
    }

    /// Every (operator, group, from, to) the plan carries, in plan order.
    fn carried(plan: &MigrationPlan) -> Vec<(OperatorId, KeyGroup, WorkerId, WorkerId)> {
        let mut v = Vec::new();
        for w in &plan.workers {
            for t in &w.send_to {
                for m in &t.groups {
                    v.extend(m.groups.iter().map(|g| (m.operator, *g, w.worker, t.peer)));
                }
            }
        }
        v
    }

    fn check_plan(
        p: &Pipeline,
        old: &Placement,
        old_keys: &KeyAssignment,
        new: &Placement,
        new_keys: &KeyAssignment,
    ) -> Result<(), TestCaseError> {
        let plan = plan_migration(p, old, old_keys, new, new_keys);
        prop_assert_eq!(&plan, &plan_migration(p, old, old_keys, new, new_keys));
        prop_assert_eq!(plan.workers.len(), old.workers.max(new.workers) as usize);

        // Exactly the groups whose owner changed, each once, old owner → new owner.
        let mut expected = Vec::new();
        for op in p.operators.iter().filter(|o| o.stateful) {
            for g in 0..old_keys.groups as usize {
                let g = KeyGroup::from(g);
                let (from, to) =
                    (old_keys.owner(op.id, g).unwrap(), new_keys.owner(op.id, g).unwrap());
                if from != to {
                    expected.push((op.id, g, from, to));
                }
            }
        }
        let mut got = carried(&plan);
        let before = got.len();
        got.sort();
        got.dedup();
        prop_assert_eq!(got.len(), before, "a group moves twice");
        expected.sort();
        prop_assert_eq!(got, expected);

        for (i, w) in plan.workers.iter().enumerate() {
            prop_assert_eq!(w.worker.index(), i);
            let peers: Vec<WorkerId> = w.send_to.iter().map(|t| t.peer).collect();
            prop_assert!(peers.windows(2).all(|x| x[0] < x[1]), "send_to not ascending");
            prop_assert!(w.receive_from.windows(2).all(|x| x[0] < x[1]));
            prop_assert!(!peers.contains(&w.worker), "sends to itself");
            for t in &w.send_to {
                prop_assert!(!t.groups.is_empty() || !t.operators.is_empty(), "empty transfer");
                prop_assert!(t.groups.windows(2).all(|x| x[0].operator < x[1].operator));
                prop_assert!(t.groups.iter().all(|m| m.groups.windows(2).all(|x| x[0] < x[1])));
                prop_assert!(t.operators.windows(2).all(|x| x[0] < x[1]));
                // Symmetry: w sends to v ⇔ v waits for w.
                prop_assert!(plan.workers[t.peer.index()].receive_from.contains(&w.worker));
                for op in &t.operators {
                    prop_assert!(!p.operator(*op).stateful);
                    prop_assert!(old.workers_of(*op).any(|x| x == w.worker));
                    prop_assert!(!new.workers_of(*op).any(|x| x == w.worker));
                    prop_assert!(new.workers_of(*op).any(|x| x == t.peer));
                }
            }
            for v in &w.receive_from {
                prop_assert!(plan.workers[v.index()].send_to.iter().any(|t| t.peer == w.worker));
            }
        }
        // Every abandoned stateless operator's queue goes somewhere.
        for op in p.operators.iter().filter(|o| !o.stateful) {
            for w in old.workers_of(op.id).filter(|w| !new.workers_of(op.id).any(|x| x == *w)) {
                let sent = plan.workers[w.index()]
                    .send_to
                    .iter()
                    .filter(|t| t.operators.contains(&op.id))
                    .count();
                prop_assert_eq!(sent, 1);
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 300, rng_seed: proptest::test_runner::RngSeed::Fixed(7), ..ProptestConfig::default() })]

        #[test]
        fn plans_move_exactly_the_changed_groups(
            seed in any::<u64>(), ops in 1usize..9, before in 1u32..8, after in 1u32..8,
            groups in 0u32..100, remap in any::<bool>(), keep in any::<bool>(),
        ) {
            let mut rng = SeededRng::seed_from_u64(seed);
            let p = random_pipeline(&mut rng, ops, 0.5);
            let old = random_placement(&mut rng, &p, before);
            let mut new = random_placement(&mut rng, &p, after);
            if remap {
                new = remap_workers(&old, new);
            }
            let old_keys = assign_keys(&p, &old, groups, None);
            // Without the previous assignment the owners change arbitrarily: the plan must
            // still carry exactly the difference.
            let new_keys = assign_keys(&p, &new, groups, keep.then_some(&old_keys));
            check_plan(&p, &old, &old_keys, &new, &new_keys)?;
        }

        #[test]
        fn chains_of_migrations_stay_consistent(seed in any::<u64>()) {
            let mut rng = SeededRng::seed_from_u64(seed);
            let p = random_pipeline(&mut rng, 6, 0.7);
            let mut placement = random_placement(&mut rng, &p, 1);
            let mut keys = assign_keys(&p, &placement, 64, None);
            for _ in 0..20 {
                let workers = 1 + rng.random_range(0..6) as u32;
                let next = remap_workers(&placement, random_placement(&mut rng, &p, workers));
                let next_keys = assign_keys(&p, &next, 64, Some(&keys));
                check_plan(&p, &placement, &keys, &next, &next_keys)?;
                placement = next;
                keys = next_keys;
            }
        }
    }
}
