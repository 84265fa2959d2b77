//! Migration under load: state and queued requests move with their key groups, nothing is
//! lost or counted twice, every key lives only on its group's owner, and workers wait only for
//! the peers the plan names (CLASP §4.4, Fig. 7).

mod common;

use clasp_core::hash::{key_group, key_hash};
use clasp_core::input::LineSource;
use clasp_core::placement::{KeyAssignment, Placement};
use clasp_core::rng::SeededRng;
use clasp_core::{SourceId, WorkerId};
use clasp_plan::migration::plan_migration;
use clasp_runtime::cluster::{Cluster, contiguous_keys};
use clasp_runtime::planner::{DiscardSink, Input};
use clasp_runtime::routing::RoutingPlan;
use clasp_runtime::scaling::ScalingLoop;
use common::*;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// A random placement of WC on 1..=3 workers with random fractions and instances.
fn random_placement(p: &clasp_core::Pipeline, rng: &mut SeededRng) -> Placement {
    let workers = 1 + rng.random_range(0..3) as u32;
    let mut entries: Vec<(String, Vec<Slot>)> = Vec::new();
    for op in ["split", "count"] {
        let on: Vec<u32> = (0..workers).filter(|_| rng.random_bool(0.7)).collect();
        let on =
            if on.is_empty() { vec![rng.random_range(0..u64::from(workers)) as u32] } else { on };
        let weights: Vec<f64> = on.iter().map(|_| 0.2 + rng.random::<f64>()).collect();
        let total: f64 = weights.iter().sum();
        let shares = on
            .iter()
            .zip(&weights)
            .map(|(w, x)| (*w, x / total, 1 + rng.random_range(0..3) as u32))
            .collect();
        entries.push((op.into(), shares));
    }
    // Every worker of the placement must run something.
    for w in 0..workers {
        if !entries.iter().any(|(_, s)| s.iter().any(|x| x.0 == w)) {
            let split = &mut entries[0].1;
            let f = 1.0 / (split.len() + 1) as f64;
            split.iter_mut().for_each(|x| x.1 *= 1.0 - f);
            split.push((w, f, 1));
        }
    }
    let borrowed: Vec<(&str, &[Slot])> =
        entries.iter().map(|(n, s)| (n.as_str(), s.as_slice())).collect();
    placement_of(p, workers, &borrowed)
}

/// Every key of `count` is held once, by the owner of its key group.
fn check_owners(
    state: &[(WorkerId, clasp_core::OperatorId, Vec<u8>)],
    keys: &KeyAssignment,
    count: clasp_core::OperatorId,
) {
    let mut seen = BTreeMap::new();
    for (w, op, line) in state {
        assert_eq!(*op, count);
        let v: serde_json::Value = serde_json::from_slice(line).unwrap();
        let key = v["key"].as_str().unwrap().to_owned();
        let group = key_group(key_hash(key.as_bytes()), keys.groups);
        assert_eq!(Some(*w), keys.owner(count, group), "key {key} on {w}, group {group}");
        assert!(seen.insert(key, *w).is_none(), "a key on two workers");
    }
}

/// The corpus over and over, until `enough` is set: the run lasts as many migrations as the
/// test asks for, however fast the machine. Every line it gave is kept for the reference.
struct Until {
    lines: Arc<Vec<Vec<u8>>>,
    next: usize,
    enough: Arc<AtomicBool>,
    given: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl LineSource for Until {
    fn next_line(&mut self, line: &mut Vec<u8>) -> std::io::Result<bool> {
        if self.enough.load(Ordering::Acquire) {
            return Ok(false);
        }
        line.clear();
        line.extend_from_slice(&self.lines[self.next % self.lines.len()]);
        self.next += 1;
        self.given.lock().unwrap().push(line.clone());
        Ok(true)
    }
}

#[test]
fn twenty_four_random_migrations_under_load_lose_nothing() {
    const MIGRATIONS: usize = 24;
    let p = pipeline("wc.toml");
    let count = p.operator_id("count").unwrap();
    let enough = Arc::new(AtomicBool::new(false));
    let given = Arc::new(Mutex::new(Vec::new()));
    let reader = Until {
        lines: Arc::new(corpus(11, 5_000)),
        next: 0,
        enough: enough.clone(),
        given: given.clone(),
    };
    let input = Input {
        source: SourceId(0),
        reader: clasp_core::source::from_lines(Box::new(reader), None),
        rate: Box::new(|_| Some(400.0)),
    };
    let mut cfg = config(16);
    cfg.settings.interval_ms = 100;
    let mut c = Cluster::start(p.clone(), cfg, Box::new(DiscardSink), threads(), 1, 4).unwrap();
    let placement = placement_of(&p, 1, &[("split", &[(0, 1.0, 2)]), ("count", &[(0, 1.0, 2)])]);
    let keys = contiguous_keys(&p, &placement, 64);
    c.planner
        .install(RoutingPlan { epoch: 1, placement: placement.clone(), keys: keys.clone() })
        .unwrap();
    let scaling = clasp_plan::AutoscalerConfig::with_policy(clasp_plan::Policy::Static);
    let mut scaler = ScalingLoop::new(scaling, &p, placement, keys, 1).unwrap();
    let mut rng = SeededRng::seed_from_u64(2024);
    let mut migrations = 0;
    let Cluster { planner, pool } = &mut c;
    let summary = planner
        .run(
            vec![input],
            None,
            |_| {},
            |planner, _| {
                if migrations < MIGRATIONS {
                    let next = random_placement(&p, &mut rng);
                    scaler
                        .rescale_to(planner, pool, next)
                        .map_err(|e| panic!("migration {migrations}: {e}"))
                        .ok();
                    migrations += 1;
                    check_owners(&planner.collect_state()?, scaler.autoscaler().keys(), count);
                } else {
                    enough.store(true, Ordering::Release);
                }
                Ok(())
            },
        )
        .unwrap();
    let mut dump = Vec::new();
    c.planner.dump_state(&mut dump).unwrap();
    c.shutdown().unwrap();
    assert_eq!(counts(&dump), reference_word_count(&given.lock().unwrap()));
    assert_eq!(summary.completed, summary.input_requests);
    assert_eq!(summary.migrations.len(), MIGRATIONS);
}

#[test]
fn fig7_workers_wait_only_for_the_peers_that_send_to_them() {
    let p = pipeline("wc.toml");
    let count = p.operator_id("count").unwrap();
    let text = Arc::new(corpus(5, 5_000));
    let mut c =
        Cluster::start(p.clone(), config(64), Box::new(DiscardSink), threads(), 3, 4).unwrap();
    // Old: A (w0) owns groups 0..40 of count, B (w1) 40..64, C (w2) none.
    let old = placement_of(
        &p,
        3,
        &[
            ("split", &[(0, 0.4, 1), (1, 0.3, 1), (2, 0.3, 1)]),
            ("count", &[(0, 40.0 / 64.0, 2), (1, 24.0 / 64.0, 2)]),
        ],
    );
    let groups = 64;
    let owners = |f: &dyn Fn(usize) -> u32| (0..groups).map(|g| WorkerId(f(g))).collect::<Vec<_>>();
    let mut old_keys = KeyAssignment { groups: groups as u32, owners: vec![Vec::new(); 2] };
    old_keys.owners[count.index()] = owners(&|g| if g < 40 { 0 } else { 1 });
    c.planner
        .install(RoutingPlan { epoch: 1, placement: old.clone(), keys: old_keys.clone() })
        .unwrap();
    c.planner.run(vec![unthrottled(&text, SourceId(0))], None, |_| {}, |_, _| Ok(())).unwrap();
    // New: B owns 0..20, C owns 20..64 — A sends to B and C, B sends to C, C only receives.
    let new = placement_of(
        &p,
        3,
        &[
            ("split", &[(0, 0.4, 1), (1, 0.3, 1), (2, 0.3, 1)]),
            ("count", &[(1, 20.0 / 64.0, 2), (2, 44.0 / 64.0, 2)]),
        ],
    );
    let mut new_keys = old_keys.clone();
    new_keys.owners[count.index()] = owners(&|g| if g < 20 { 1 } else { 2 });
    let plan = plan_migration(&p, &old, &old_keys, &new, &new_keys);
    let senders = |w: u32| -> Vec<u32> {
        plan.workers[w as usize].send_to.iter().map(|t| t.peer.0).collect()
    };
    assert_eq!((senders(0), senders(1), senders(2)), (vec![1, 2], vec![2], vec![]));
    let record = c
        .planner
        .migrate(RoutingPlan { epoch: 2, placement: new, keys: new_keys.clone() }, &plan)
        .unwrap();
    let waited = |w: u32| {
        record.workers.iter().find(|d| d.worker == WorkerId(w)).unwrap().waited_for.clone()
    };
    assert_eq!(waited(0), Vec::<WorkerId>::new(), "A waits for no one");
    assert_eq!(waited(1), vec![WorkerId(0)], "B waits for A only, not for C");
    assert_eq!(waited(2), vec![WorkerId(0), WorkerId(1)]);
    check_owners(&c.planner.collect_state().unwrap(), &new_keys, count);
    let mut dump = Vec::new();
    c.planner.dump_state(&mut dump).unwrap();
    c.shutdown().unwrap();
    assert_eq!(counts(&dump), reference_word_count(&text));
}
