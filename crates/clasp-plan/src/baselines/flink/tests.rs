use super::*;
use crate::testing::{pipeline, random_pipeline, random_stats};
use clasp_core::placement::{OperatorPlacement, Share};
use clasp_core::rng::SeededRng;
use clasp_core::stats::{OperatorStats, WorkerOperatorStats, WorkerStats};
use clasp_core::{OperatorId, WorkerId};
use proptest::prelude::*;
use rand::{RngExt, SeedableRng};

/// One operator `a` after the source, keyed or not.
fn single(keyed: bool) -> Pipeline {
    let state = if keyed { "stateful = true\nkey = \"k\"\n" } else { "" };
    pipeline(&format!(
        "[[source]]\nname = \"in\"\nkey_field = 0\n[[operator]]\nname = \"a\"\n{state}\
         [[stream]]\nfrom = \"in\"\nto = \"a\"\n"
    ))
}

/// `a` observed at 100 requests/s of 2,000 µs each (busy 0.2 s/s in all) on `parallelism`
/// subtasks, with `planner_queue` inputs waiting.
fn observed(parallelism: u32, planner_queue: f64) -> ObservedStats {
    ObservedStats {
        throughput: 100.0,
        input_rate: 100.0,
        planner_queue,
        operators: vec![OperatorStats {
            name: "a".into(),
            processed_rate: 100.0,
            exec_time_us: 2000.0,
            parallelism,
            ..OperatorStats::default()
        }],
        ..ObservedStats::default()
    }
}

/// Target capacity without backlog: round(λ·restart/catch-up + λ/0.7), from the defaults.
fn capacity(rate: f64) -> f64 {
    (rate * 300.0 / 1800.0 + rate / 0.7).round()
}

#[test]
fn a_busy_vertex_gets_its_target_capacity_over_the_true_rate() {
    let p = single(false);
    let cfg = Config::default();
    let e = evaluate(&p, &observed(1, 0.0), 1000.0, None, &cfg);
    let v = &e.vertices[0];
    // One subtask busy 0.2 of the time processes 100/s: TPR = 500/s.
    assert_eq!((v.current, v.true_rate, v.target_rate), (1, 500.0, 1000.0));
    assert_eq!(v.target_capacity, capacity(1000.0));
    assert_eq!(v.target_capacity, 1595.0);
    // ⌈1595 / 500 · 1⌉ = ⌈3.19⌉.
    assert_eq!(v.computed, (capacity(1000.0) / 500.0).ceil() as u32);
    assert_eq!(e.parallelism, [4]);
    assert!(e.scales && v.outside_bounds() && !e.processing_backlog);
    // Scale-up threshold: λ at utilization 1, no restart term.
    assert_eq!(v.scale_up_threshold, 1000.0);
    assert_eq!(worker_count(&p, &observed(1, 0.0), 1000.0, None, &cfg), 1);
}

#[test]
fn within_the_utilization_bounds_nothing_changes() {
    let p = single(false);
    let cfg = Config::default();
    // Four subtasks: TPR = 100 / (0.2 / 4) = 2,000/s. At λ = 1,500 the computed parallelism
    // is ⌈2393 / 2000 · 4⌉ = 5, but 1,500 ≤ 2,000 ≤ round(1500/6 + 1500/0.4) = 4,000.
    let e = evaluate(&p, &observed(4, 0.0), 1500.0, None, &cfg);
    let v = &e.vertices[0];
    assert_eq!(v.true_rate, 2000.0);
    assert_eq!(v.computed, (capacity(1500.0) / 2000.0 * 4.0).ceil() as u32);
    assert_eq!(v.computed, 5);
    assert_eq!((v.scale_up_threshold, v.scale_down_threshold), (1500.0, 4000.0));
    assert!(!v.outside_bounds() && !e.scales);
    assert_eq!(e.parallelism, [4]);
    // Just past the scale-up threshold it scales: ⌈round(2100 · 1.5952) / 2000 · 4⌉ = 7.
    let e = evaluate(&p, &observed(4, 0.0), 2100.0, None, &cfg);
    assert!(e.scales);
    assert_eq!(e.parallelism, [(capacity(2100.0) / 2000.0 * 4.0).ceil() as u32]);
    assert_eq!(e.parallelism, [7]);
    // And past the scale-down threshold: TPR 2,000 > round(700/6 + 700/0.4) = 1,867.
    let e = evaluate(&p, &observed(4, 0.0), 700.0, None, &cfg);
    assert!(e.scales);
    assert_eq!(e.parallelism, [(capacity(700.0) / 2000.0 * 4.0).ceil() as u32]);
}

#[test]
fn scale_down_is_limited_by_the_max_factor() {
    let p = single(false);
    let cfg = Config::default();
    // Ten subtasks, TPR 5,000/s, λ = 10: factor 16 / 5000 is raised to 1 − 0.6.
    let e = evaluate(&p, &observed(10, 0.0), 10.0, None, &cfg);
    assert!(e.scales);
    assert_eq!(e.parallelism, [4]);
    // Without the limit the same input needs one subtask.
    let free = Config { max_scale_down_factor: 1.0, ..Config::default() };
    assert_eq!(evaluate(&p, &observed(10, 0.0), 10.0, None, &free).parallelism, [1]);
    // A scale-up factor limit of 1 (at most double) caps ⌈3.19⌉ at 2.
    let capped = Config { max_scale_up_factor: 1.0, ..Config::default() };
    assert_eq!(evaluate(&p, &observed(1, 0.0), 1000.0, None, &capped).parallelism, [2]);
}

#[test]
fn keyed_vertices_align_to_their_key_groups() {
    let p = single(true);
    let at = |rate: f64, current: u32, alignment: Alignment| {
        let cfg = Config { alignment, ..Config::default() };
        evaluate(&p, &observed(current, 0.0), rate, None, &cfg).parallelism[0]
    };
    // 1,567 requests/s: capacity round(1567/6 + 1567/0.7) = 2,500, ⌈2500 / 500⌉ = 5 subtasks
    // from one, of 128 key groups.
    assert_eq!(capacity(1567.0), 2500.0);
    assert_eq!(at(1567.0, 1, Alignment::Off), 5);
    // Balanced: 5 subtasks hold up to ⌈128/5⌉ = 26 groups (128 / 5 = 25); 6 hold at most 22
    // (128 / 6 = 21 < 25).
    assert_eq!(at(1567.0, 1, Alignment::Balanced), 6);
    // Evenly spread: the next divisor of 128.
    assert_eq!(at(1567.0, 1, Alignment::EvenlySpread), 8);
    // Down from 10 subtasks (TPR 5,000 > round(1567/6 + 1567/0.4) = 4,179): ⌈2500/5000 · 10⌉ =
    // 5, aligned within [5, 10] alike.
    assert_eq!(at(1567.0, 10, Alignment::Off), 5);
    assert_eq!(at(1567.0, 10, Alignment::Balanced), 6);
    assert_eq!(at(1567.0, 10, Alignment::EvenlySpread), 8);
    // Stateless operators are not aligned.
    let cfg = Config::default();
    assert_eq!(evaluate(&single(false), &observed(1, 0.0), 1567.0, None, &cfg).parallelism, [5]);
}

#[test]
fn a_backlog_adds_its_catch_up_rate_and_widens_the_bounds() {
    let p = single(false);
    let cfg = Config::default();
    // 180,000 inputs waiting: catch-up 180,000 / 1,800 s = 100/s; 1,800 s of input > 300 s.
    let e = evaluate(&p, &observed(4, 180_000.0), 1500.0, None, &cfg);
    let v = &e.vertices[0];
    assert!(e.processing_backlog);
    assert_eq!((e.backlog, v.catch_up_rate), (180_000.0, 100.0));
    assert_eq!(v.target_capacity, (100.0 + 1500.0 / 6.0 + 1500.0 / 0.7_f64).round());
    assert_eq!(v.computed, (v.target_capacity / 2000.0 * 4.0).ceil() as u32);
    // Bounds at utilization 1 and 0: a TPR of 2,000 is within [100 + 1500, ∞).
    assert_eq!(v.scale_up_threshold, 1600.0);
    assert_eq!(v.scale_down_threshold, f64::INFINITY);
    assert!(!e.scales && v.computed == 5);
    assert_eq!(e.parallelism, [4]);
    // At 2,000/s the threshold 2,100 is above the TPR: ⌈round(100 + 2000/6 + 2000/0.7) / 500⌉.
    let e = evaluate(&p, &observed(4, 180_000.0), 2000.0, None, &cfg);
    assert!(e.scales);
    assert_eq!(
        e.parallelism,
        [((100.0 + 2000.0 / 6.0 + 2000.0 / 0.7_f64).round() / 500.0).ceil() as u32]
    );
    // Without a backlog the same 1,500/s is within the usual bounds [1500, 4000] too, but
    // 2,000/s is not outside them either: the backlog is what makes it scale.
    assert!(!evaluate(&p, &observed(4, 0.0), 2000.0, None, &cfg).scales);
}

#[test]
fn the_busiest_subtask_sets_the_true_rate() {
    let p = single(false);
    // Worker 0: two subtasks share 300/s × 1,000 µs (0.15 each); worker 1: one has 100/s × 1,000.
    let row = |worker, rate: f64| WorkerStats {
        worker,
        slots: 10,
        exec_load: rate * 1000.0,
        operators: vec![WorkerOperatorStats {
            name: "a".into(),
            processed_rate: rate,
            exec_time_us: 1000.0,
        }],
        ..WorkerStats::default()
    };
    let stats = ObservedStats {
        throughput: 400.0,
        workers: vec![row(0, 300.0), row(1, 100.0)],
        ..observed(3, 0.0)
    };
    let share = |w, instances| Share { worker: WorkerId(w), share: 0.0, fraction: 0.5, instances };
    let current = Placement {
        workers: 2,
        operators: vec![OperatorPlacement {
            operator: OperatorId(0),
            demand: 0.0,
            shares: vec![share(0, 2), share(1, 1)],
        }],
    };
    let max = evaluate(&p, &stats, 400.0, Some(&current), &Config::default());
    assert!((max.vertices[0].true_rate - 400.0 / 0.15).abs() < 1e-9);
    let avg = Config { busy_time_aggregator: BusyTimeAggregator::Avg, ..Config::default() };
    let e = evaluate(&p, &stats, 400.0, Some(&current), &avg);
    assert!((e.vertices[0].true_rate - 400.0 / (400_000.0 / 3e6)).abs() < 1e-9);
}

#[test]
fn slot_sharing_spreads_subtasks_round_robin() {
    let p = pipeline(
        "[[source]]\nname = \"in\"\n[[operator]]\nname = \"a\"\n[[operator]]\nname = \"b\"\n\
         stateful = true\nkey = \"k\"\n[[stream]]\nfrom = \"in\"\nto = \"a\"\n\
         [[stream]]\nfrom = \"a\"\nto = \"b\"\n",
    );
    let stats = ObservedStats::from_spec(&p, 100.0, 400.0);
    let cfg = Config { slots: 2, ..Config::default() };
    // ⌈7 / 2⌉ = 4 workers; a's subtasks 0–2 on workers 0–2, b's 0–6 on i mod 4.
    assert_eq!(workers_for(&[3, 7], &cfg), 4);
    let placement = spread(&p, &stats, 100.0, &[3, 7], 4, &cfg);
    placement.check(&p).unwrap();
    let on = |o: usize| -> Vec<(u32, u32)> {
        placement.operators[o].shares.iter().map(|s| (s.worker.0, s.instances)).collect()
    };
    assert_eq!(on(0), [(0, 1), (1, 1), (2, 1)]);
    assert_eq!(on(1), [(0, 2), (1, 2), (2, 2), (3, 1)]);
    // b's 128 key groups over 7 subtasks: 19 18 18 19 18 18 18; worker 0 has subtasks 0 and 4.
    let fractions: Vec<f64> = placement.operators[1].shares.iter().map(|s| s.fraction).collect();
    let want = [37.0, 36.0, 36.0, 19.0].map(|g| g / 128.0);
    for (got, want) in fractions.iter().zip(want) {
        assert!((got - want).abs() < 1e-12, "{fractions:?}");
    }
    assert_eq!(placement.operators[0].shares[0].fraction, 1.0 / 3.0);
}

#[test]
fn without_a_change_the_running_placement_stays() {
    let p = single(false);
    let stats = observed(4, 0.0);
    let share = |w| Share { worker: WorkerId(w), share: 1.0, fraction: 0.5, instances: 2 };
    let current = Placement {
        workers: 2,
        operators: vec![OperatorPlacement {
            operator: OperatorId(0),
            demand: 2.0,
            shares: vec![share(0), share(1)],
        }],
    };
    let kept = place(&p, &stats, 1500.0, Some(&current), &Config::default());
    assert_eq!(kept.workers, 2);
    // Same fractions and instances, shares of the demand projected to 1,500/s: 1500 · 2000 µs.
    for s in &kept.operators[0].shares {
        assert_eq!((s.fraction, s.instances, s.share), (0.5, 2, 0.5 * 3e6));
    }
    // Where it scales, the running layout does not matter: 7 subtasks on one worker of 10.
    let scaled = place(&p, &stats, 2100.0, Some(&current), &Config::default());
    assert_eq!(scaled.workers, 1);
    assert_eq!(scaled.operators[0].shares[0].instances, 7);
}

#[test]
fn the_cluster_caps_every_parallelism() {
    let p = single(false);
    let cfg = Config { slots: 2, max_workers: 3, ..Config::default() };
    let e = evaluate(&p, &observed(1, 0.0), 1e6, None, &cfg);
    assert_eq!(e.vertices[0].computed, 128);
    assert_eq!(e.parallelism, [6]);
    assert_eq!(workers_for(&e.parallelism, &cfg), 3);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, rng_seed: proptest::test_runner::RngSeed::Fixed(41), ..ProptestConfig::default() })]

    /// On random pipelines and statistics: the placement is valid and slot-shared (every
    /// operator's subtasks spread within one of each other over ⌈max P / slots⌉ workers), and
    /// every operator's capacity, its per-instance true rate 10⁶/τ̄ times its subtasks, covers
    /// its target rate s·N_o at utilization 0.7 when the job scales (at 1 when it does not),
    /// unless the parallelism bound held it.
    #[test]
    fn decisions_are_slot_shared_and_cover_the_target(
        seed in any::<u64>(), ops in 1usize..9, slots in 1u32..12,
    ) {
        let mut rng = SeededRng::seed_from_u64(seed);
        let p = random_pipeline(&mut rng, ops, 0.4);
        let stats = random_stats(&mut rng, &p);
        let rate = rng.random_range(1.0..3000.0);
        let cfg = Config { slots, max_workers: 10_000, ..Config::default() };
        let e = evaluate(&p, &stats, rate, None, &cfg);
        let placement = place(&p, &stats, rate, None, &cfg);
        prop_assert!(placement.check(&p).is_ok(), "{:?}", placement.check(&p));
        let most = e.parallelism.iter().copied().max().unwrap();
        prop_assert_eq!(placement.workers, most.div_ceil(slots));
        let s = rate / stats.throughput;
        for ((op, st), (&par, v)) in
            placement.operators.iter().zip(&stats.operators).zip(e.parallelism.iter().zip(&e.vertices))
        {
            let counts: Vec<u32> = op.shares.iter().map(|x| x.instances).collect();
            prop_assert_eq!(counts.iter().sum::<u32>(), par);
            let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            prop_assert!(hi - lo <= 1 && *hi <= par.div_ceil(placement.workers));
            let bound = cfg.max_parallelism.min(v.current.max(cfg.vertex_max_parallelism));
            if par >= bound {
                continue;
            }
            let capacity = 1e6 / st.exec_time_us * f64::from(par);
            let utilization = if e.scales { 0.7 } else { 1.0 };
            let target = s * st.processed_rate;
            // Flink rounds the capacity it provisions to whole records per second.
            prop_assert!(capacity * utilization >= target - 0.5 * utilization,
                "{} subtasks: {} · {} < {}", par, capacity, utilization, target);
        }
        // Slot sharing: a worker holds one slot per subtask index, at most `slots`.
        for w in 0..placement.workers {
            let used = placement.operators.iter()
                .filter_map(|o| o.shares.iter().find(|x| x.worker.0 == w))
                .map(|x| x.instances).max().unwrap_or(0);
            prop_assert!(used <= slots, "worker {} holds {} slots of {}", w, used, slots);
        }
    }
}
