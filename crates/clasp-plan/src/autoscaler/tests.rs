//! Every path of the state machine, driven by synthetic intervals of a two-operator chain
//! whose load per request is known: `a` then a stateful `b`, 400 µs per execution each.

use super::*;
use crate::keys::assign_keys;
use crate::testing::pipeline;
use clasp_core::WorkerId;
use clasp_core::report::{OpReport, WorkerReport};

const SPEC: &str = "[[source]]\nname = \"in\"\n\
    [[operator]]\nname = \"a\"\nkind = \"map\"\n\
    [[operator]]\nname = \"b\"\nkind = \"reduce\"\nstateful = true\nkey = \"k\"\n\
    [[stream]]\nfrom = \"in\"\nto = \"a\"\n[[stream]]\nfrom = \"a\"\nto = \"b\"\n";

/// Execution time of each operator per request (µs).
const EXEC_US: f64 = 400.0;

fn chain() -> Pipeline {
    pipeline(SPEC)
}

/// Feeds intervals of one second and records the steps.
struct Driver {
    scaler: Autoscaler,
    p: Pipeline,
    t: f64,
    requests: u64,
    /// Input requests waiting at the end of each interval.
    backlog: f64,
}

impl Driver {
    fn new(cfg: AutoscalerConfig) -> Self {
        let p = chain();
        let placement = Placement::single_worker(&p, &[4, 4]);
        let keys = assign_keys(&p, &placement, 64, None);
        let scaler = Autoscaler::new(cfg, &p, placement, keys, 1).unwrap();
        Self { scaler, p, t: 0.0, requests: 0, backlog: 0.0 }
    }

    /// One second with `input` requests/s arriving and `done` completing, spread evenly over
    /// the running workers; saturated when `done < input`.
    fn second(&mut self, input: f64, done: f64) -> Step {
        self.second_saturated(input, done, done < input)
    }

    /// One second as [`Self::second`], the workers saturated or not as told.
    fn second_saturated(&mut self, input: f64, done: f64, saturated: bool) -> Step {
        self.t += 1.0;
        self.requests += input as u64;
        let workers = self.scaler.placement().workers;
        let per_worker = (done / f64::from(workers)).round() as u64;
        let reports = (0..workers)
            .map(|w| {
                let op = OpReport {
                    processed: per_worker,
                    records: per_worker,
                    emitted: per_worker,
                    exec_us: per_worker as f64 * EXEC_US,
                    wait_us: per_worker as f64 * 50.0,
                    ..OpReport::default()
                };
                WorkerReport {
                    worker: WorkerId(w),
                    interval_s: 1.0,
                    slots: 10,
                    queue: if saturated { 1000.0 } else { 1.0 },
                    local: per_worker,
                    ops: vec![op.clone(), op],
                    edges: vec![per_worker, per_worker],
                    saturated,
                    ..WorkerReport::default()
                }
            })
            .collect();
        let interval = Interval {
            t: self.t,
            interval_s: 1.0,
            input_rate: input,
            recent_input_rate: input,
            throughput: done,
            requests: self.requests,
            planner_queue: 0.0,
            backlog: self.backlog,
            workers,
            reports,
            ..Interval::default()
        };
        self.scaler.step(&self.p, interval)
    }

    /// Seconds until a step other than `Idle`, at most `limit`.
    fn until_step(&mut self, input: f64, done: f64, limit: usize) -> Option<(f64, Step)> {
        (0..limit).find_map(|_| match self.second(input, done) {
            Step::Idle => None,
            s => Some((self.t, s)),
        })
    }
}

fn config(warmup: u64) -> AutoscalerConfig {
    AutoscalerConfig { window_s: 3.0, ..AutoscalerConfig::default().with_warmup(warmup) }
}

/// Workers the chain needs for `rate` requests/s by Eq. 1 with only execution load (all
/// chained requests local): ⌈rate · 2 · τ / (W̄ · headroom)⌉, W̄ the estimator's start.
fn workers_for(rate: f64, cfg: &AutoscalerConfig) -> u32 {
    let capacity = cfg.plan.estimator.initial_capacity * cfg.plan.headroom;
    (rate * 2.0 * EXEC_US / capacity).ceil() as u32
}

#[test]
fn warm_up_holds_the_first_decision_then_a_rescale_comes_out() {
    let mut d = Driver::new(config(5_000));
    let (t, step) = d.until_step(1_500.0, 1_000.0, 20).expect("a step after warm-up");
    assert_eq!(t, 4.0, "the interval in which 5,000 requests were reached");
    let Step::Rescale(r) = step else { panic!("expected a rescale, got {step:?}") };
    assert_eq!(r.reason, Reason::WarmedUp);
    assert_eq!((r.from, r.epoch, r.target_rate), (1, 2, 1_500.0));
    assert!(r.to >= workers_for(1_500.0, &d.scaler.cfg), "{} workers", r.to);
    assert!(d.scaler.rescaling());
    assert_eq!(d.scaler.placement().workers, 1, "nothing adopted before it finished");
    // Every key group of `b` is owned by a worker hosting `b`, and the plan moves exactly the
    // groups whose owner changed.
    let b = clasp_core::OperatorId(1);
    let hosts: Vec<WorkerId> = r.placement.workers_of(b).collect();
    assert!(r.keys.owners[1].iter().all(|w| hosts.contains(w)), "{hosts:?}");
    let changed = d.scaler.keys().owners[1].iter().zip(&r.keys.owners[1]).filter(|(x, y)| x != y);
    assert_eq!(r.migration.moved_groups(), changed.count());
}

#[test]
fn a_rescale_in_flight_keeps_intervals_from_the_triggers_until_it_finishes() {
    let mut d = Driver::new(config(0));
    let Some((_, Step::Rescale(r))) = d.until_step(1_500.0, 1_000.0, 5) else { panic!() };
    for _ in 0..10 {
        assert!(matches!(d.second(1_500.0, 1_000.0), Step::Idle), "lagging while rescaling");
    }
    d.scaler.rescaled(d.t);
    assert_eq!(d.scaler.placement(), &r.placement);
    assert_eq!((d.scaler.epoch(), d.scaler.keys()), (r.epoch, &r.keys));
    // The new configuration keeps falling behind with saturated workers: the saturation
    // trigger fires again once 2 s of intervals after the rescale show it, none of those seen
    // while it ran.
    let end = d.t;
    let (t, step) = d.until_step(1_500.0, 1_000.0, 10).expect("saturated again");
    assert_eq!(t, end + 2.0, "{step:?}");
}

#[test]
fn a_failed_rescale_leaves_the_running_configuration() {
    let mut d = Driver::new(config(0));
    let before = d.scaler.placement().clone();
    let Some((_, Step::Rescale(r))) = d.until_step(1_500.0, 1_000.0, 5) else { panic!() };
    d.scaler.rescale_failed();
    assert!(!d.scaler.rescaling());
    // The placement is the one before; the failed rescale's epoch stays used (workers may
    // have installed it), so the next routing is newer.
    assert_eq!(d.scaler.placement(), &before);
    assert_eq!(d.scaler.epoch(), r.epoch);
    assert!(r.epoch > 1);
}

#[test]
fn the_cooldown_holds_back_a_return_to_the_previous_count() {
    let cfg = AutoscalerConfig {
        triggers: TriggerConfig { cooldown_s: 20.0, ..TriggerConfig::default() },
        scale_in_delay_s: 0.0,
        ..config(0)
    };
    let mut d = Driver::new(cfg);
    let Some((_, Step::Rescale(up))) = d.until_step(2_000.0, 1_000.0, 5) else { panic!() };
    d.scaler.rescaled(d.t);
    let at = d.t;
    // The rate falls back to what one worker sustains: the decision would undo the rescale.
    let (t, step) = d.until_step(300.0, 300.0, 10).expect("a rate change");
    let Step::HeldBack { from, to, .. } = step else { panic!("expected held back: {step:?}") };
    assert_eq!((from, to), (up.to, 1));
    assert!(t - at < 20.0);
    assert_eq!(d.scaler.held_back(), 1);
    // After the cooldown the same decision goes ahead.
    let down = (0..30).find_map(|_| match d.second(300.0, 300.0) {
        Step::Rescale(r) => Some((d.t, r)),
        _ => None,
    });
    let (t, down) = down.expect("scale-in after the cooldown");
    assert!(t - at >= 20.0, "at {t}");
    assert_eq!((down.from, down.to), (up.to, 1));
}

#[test]
fn recommend_mode_decides_as_acting_would_and_moves_nothing() {
    let mut act = Driver::new(config(2_000));
    let mut recommend = Driver::new(AutoscalerConfig { mode: Mode::Recommend, ..config(2_000) });
    let before = recommend.scaler.placement().clone();
    let Some((ta, Step::Rescale(r))) = act.until_step(1_500.0, 1_000.0, 10) else { panic!() };
    let Some((tr, Step::Recommend(m))) = recommend.until_step(1_500.0, 1_000.0, 10) else {
        panic!()
    };
    assert_eq!(ta, tr);
    assert_eq!(
        (m.reason, m.target_rate, m.from, m.to, m.migrate, &m.placement),
        (r.reason, r.target_rate, r.from, r.to, true, &r.placement)
    );
    assert!(!recommend.scaler.rescaling());
    assert_eq!(recommend.scaler.placement(), &before);
}

#[test]
fn the_static_policy_never_steps() {
    let mut d = Driver::new(AutoscalerConfig { policy: Policy::Static, ..config(0) });
    assert!(d.until_step(3_000.0, 1_000.0, 20).is_none());
    assert_eq!(d.scaler.coefficient_history().len(), 20, "it still estimates");
}

#[test]
fn without_throughput_no_decision_is_made_and_the_rate_counts_as_planned() {
    let mut d = Driver::new(config(0));
    let (_, step) = d.until_step(1_000.0, 0.0, 5).expect("a trigger");
    let Step::Unchanged { trigger, why: Unchanged::NoDecision(PlanError::NoThroughput(_)) } = step
    else {
        panic!("{step:?}")
    };
    assert_eq!(trigger.reason, Reason::WarmedUp);
    assert_eq!(d.scaler.placement().workers, 1);
}

#[test]
fn a_sustained_rate_on_the_right_size_changes_nothing() {
    let mut d = Driver::new(config(0));
    let (_, step) = d.until_step(500.0, 500.0, 5).expect("warmed up");
    assert!(matches!(step, Step::Unchanged { why: Unchanged::Same, .. }), "{step:?}");
    assert!(d.until_step(500.0, 500.0, 20).is_none(), "no trigger while the rate holds");
}

#[test]
fn settling_keeps_intervals_from_the_triggers_after_a_rescale() {
    let mut d = Driver::new(AutoscalerConfig { settle_s: 5.0, ..config(0) });
    let Some((_, Step::Rescale(_))) = d.until_step(2_000.0, 1_000.0, 5) else { panic!() };
    d.scaler.rescaled(d.t);
    let end = d.t;
    // Saturation needs 2 s of intervals; only intervals starting at or after end + 5 count.
    let (t, _) = d.until_step(2_000.0, 1_000.0, 20).expect("saturated after settling");
    assert_eq!(t, end + 5.0 + 2.0);
}

#[test]
fn the_window_never_reaches_back_past_the_last_rescale() {
    let mut d = Driver::new(config(0));
    let Some((_, Step::Rescale(_))) = d.until_step(2_000.0, 1_000.0, 5) else { panic!() };
    d.scaler.rescaled(d.t);
    d.second(2_000.0, 1_900.0);
    d.second(2_000.0, 2_100.0);
    let stats = d.scaler.window_stats(&d.p);
    assert!((stats.throughput - 2_000.0).abs() < 1e-9, "{}", stats.throughput);
}

#[test]
fn an_unthrottled_input_is_planned_for_the_most_any_cluster_sustains() {
    let cfg = AutoscalerConfig { unthrottled: true, ..config(0) };
    let mut d = Driver::new(cfg);
    let Some((_, Step::Rescale(r))) = d.until_step(1_000.0, 1_000.0, 5) else { panic!() };
    assert_eq!(r.target_rate, UNTHROTTLED_RATE);
    assert_eq!(r.to, d.scaler.config().plan.max_workers);
    d.scaler.rescaled(d.t);
    // The triggers compare with the measured rate, which has not changed.
    assert!(d.until_step(1_000.0, 1_000.0, 20).is_none());
}

#[test]
fn rescale_to_plans_like_the_autoscaler_and_refuses_a_second_one() {
    let mut d = Driver::new(config(0));
    let target = Placement::even(&d.p, 3, 2);
    let r = d.scaler.rescale_to(&d.p, target.clone()).unwrap();
    let (keys, migration) = plan_rescale(&d.p, d.scaler.placement(), d.scaler.keys(), &target, &[]);
    assert_eq!((r.keys, r.migration, r.from, r.to), (keys, migration, 1, 3));
    assert!(d.scaler.rescale_to(&d.p, target).is_err());
}

#[test]
fn a_requested_worker_count_gets_clasps_placement_on_exactly_that_many() {
    let mut d = Driver::new(config(1_000_000));
    for _ in 0..5 {
        assert!(matches!(d.second(800.0, 800.0), Step::Idle));
    }
    let r = d.scaler.rescale_to_workers(&d.p, 3).unwrap();
    assert_eq!((r.reason, r.from, r.to, r.placement.workers), (Reason::Requested, 1, 3, 3));
    assert!(r.target_rate >= 800.0, "planned for the measured rate: {}", r.target_rate);
    d.scaler.rescaled(d.t);
    assert_eq!(d.scaler.placement().workers, 3);
    assert!(d.scaler.rescale_to_workers(&d.p, 0).is_err());
    assert!(d.scaler.rescale_to_workers(&d.p, 11).is_err(), "over the worker limit");
}

#[test]
fn bad_settings_are_rejected() {
    let p = chain();
    let placement = Placement::single_worker(&p, &[1, 1]);
    let keys = assign_keys(&p, &placement, 8, None);
    for bad in [
        AutoscalerConfig { settle_s: -1.0, ..AutoscalerConfig::default() },
        AutoscalerConfig { window_s: 0.0, ..AutoscalerConfig::default() },
        AutoscalerConfig {
            triggers: TriggerConfig { change: 0.0, ..TriggerConfig::default() },
            ..AutoscalerConfig::default()
        },
    ] {
        assert!(Autoscaler::new(bad, &p, placement.clone(), keys.clone(), 1).is_err());
    }
}

#[test]
fn small_moves_and_instance_changes_are_told_apart() {
    let p = chain();
    let a = Placement::even(&p, 2, 10);
    let mut b = a.clone();
    b.operators[0].shares[0].fraction += 0.05;
    b.operators[0].shares[1].fraction -= 0.05;
    assert!(!moved_enough(&a, &b) && !instances_changed(&a, &b));
    b.operators[1].shares[0].instances = 3;
    assert!(instances_changed(&a, &b));
    b.operators[0].shares[0].fraction += 0.1;
    assert!(moved_enough(&a, &b));
    assert!(moved_enough(&a, &Placement::even(&p, 3, 10)));
}

/// Scales out to 3 workers for 2,000 requests/s, lagging at 1,000.
fn on_three(cfg: AutoscalerConfig) -> Driver {
    let mut d = Driver::new(cfg);
    let Some((_, Step::Rescale(r))) = d.until_step(2_000.0, 1_000.0, 5) else { panic!() };
    assert_eq!(r.to, 3, "{} workers", r.to);
    d.scaler.rescaled(d.t);
    d
}

#[test]
fn a_scale_in_waits_for_its_delay_and_goes_ahead_if_still_wanted() {
    let mut d = on_three(AutoscalerConfig { scale_in_delay_s: 4.0, ..config(0) });
    let (t, step) = d.until_step(1_000.0, 1_000.0, 10).expect("the rate fell");
    assert!(matches!(step, Step::Unchanged { why: Unchanged::Delayed, .. }), "{step:?}");
    // No further trigger at this rate: the pending scale-in is decided again 4 s later.
    let (due, step) = d.until_step(1_000.0, 1_000.0, 10).expect("the delayed scale-in");
    assert_eq!(due, t + 4.0);
    let Step::Rescale(r) = step else { panic!("{step:?}") };
    assert_eq!((r.from, r.to), (3, workers_for(1_000.0, d.scaler.config())));
}

#[test]
fn the_step_back_from_a_drained_backlog_does_not_wait_for_the_scale_in_delay() {
    let mut d = Driver::new(AutoscalerConfig { scale_in_delay_s: 4.0, ..config(0) });
    // 2,000 inputs waiting, drained within the catch-up time of 2 s: 1,000 requests/s more.
    d.backlog = 2_000.0;
    let Some((_, Step::Rescale(up))) = d.until_step(1_500.0, 1_000.0, 5) else { panic!() };
    assert_eq!(up.target_rate, 2_500.0);
    assert!(up.to >= workers_for(2_500.0, d.scaler.config()), "{} workers", up.to);
    d.scaler.rescaled(d.t);
    d.backlog = 0.0;
    let (_, step) = d.until_step(1_500.0, 1_500.0, 5).expect("caught up");
    let Step::Rescale(down) = step else { panic!("{step:?}") };
    assert_eq!(down.reason, Reason::CaughtUp);
    assert_eq!((down.from, down.to), (up.to, workers_for(1_500.0, d.scaler.config())));
}

#[test]
fn clasp_plans_the_catch_up_at_full_capacity_and_other_policies_as_asked() {
    let trigger = |input: f64, target: f64| Trigger {
        reason: Reason::Lagging,
        input_rate: input,
        target_rate: target,
    };
    let mut cfg = config(0);
    cfg.plan.headroom = 0.8;
    let clasp = Driver::new(cfg.clone()).scaler;
    // input/h + catch-up of capacity: 1,500 + 0.8 · 1,000 planned at 0.8 asks for 1,875 + 1,000.
    assert_eq!(clasp.planned_rate(&trigger(1_500.0, 2_500.0)), 2_300.0);
    assert_eq!(clasp.planned_rate(&trigger(1_500.0, 1_500.0)), 1_500.0, "nothing to catch up");
    let faasflow = Driver::new(AutoscalerConfig { policy: Policy::FaasFlowSp, ..cfg }).scaler;
    assert_eq!(faasflow.planned_rate(&trigger(1_500.0, 2_500.0)), 2_500.0);
}

#[test]
fn a_delayed_scale_in_is_dropped_when_the_rate_comes_back() {
    let mut d = on_three(AutoscalerConfig { scale_in_delay_s: 4.0, ..config(0) });
    let (_, step) = d.until_step(1_000.0, 1_000.0, 10).expect("the rate fell");
    assert!(matches!(step, Step::Unchanged { why: Unchanged::Delayed, .. }), "{step:?}");
    let (_, step) = d.until_step(2_000.0, 2_000.0, 10).expect("the rate is back");
    let stays = matches!(step, Step::Unchanged { why: Unchanged::Same, .. } | Step::Install { .. });
    assert!(stays, "{step:?}");
    assert!(d.until_step(2_000.0, 2_000.0, 20).is_none(), "nothing pending any more");
    assert_eq!(d.scaler.placement().workers, 3);
}

#[test]
fn a_scale_in_that_frees_too_little_is_not_made() {
    let cfg = AutoscalerConfig { scale_in_below: 0.5, scale_in_delay_s: 0.0, ..config(0) };
    let budget = cfg.plan.estimator.initial_capacity * cfg.plan.headroom;
    let mut d = on_three(cfg);
    // 1,500 requests/s fit on 2 workers, which would leave 3 at a mean of 1,500 · (800 µs of
    // execution + up to β per chained request) / 3 budgets: above 0.5.
    let (_, step) = d.until_step(1_500.0, 1_500.0, 10).expect("the rate fell");
    let Step::Unchanged { why: Unchanged::Hysteresis { utilization, gain }, .. } = step else {
        panic!("{step:?}")
    };
    let (lo, hi) = (1_500.0 * 2.0 * EXEC_US, 1_500.0 * (2.0 * EXEC_US + 275.0));
    assert!(utilization >= lo / (3.0 * budget) && utilization <= hi / (3.0 * budget));
    assert!((gain - 1.0 / 3.0).abs() < 1e-12, "{gain}");
    // Lower still, the scale-in frees enough.
    let (_, step) = d.until_step(1_000.0, 1_000.0, 10).expect("the rate fell further");
    let Step::Rescale(r) = step else { panic!("{step:?}") };
    assert!(r.to < 3);
}

#[test]
fn skewed_key_groups_are_rebalanced_on_the_same_workers() {
    let p = chain();
    let placement = Placement::even(&p, 2, 4);
    let keys = assign_keys(&p, &placement, 64, None);
    let cfg = config(0);
    let mut a = Autoscaler::new(cfg, &p, placement.clone(), keys.clone(), 1).unwrap();
    // Worker 0 owns groups 0..32 and gets 90 % of b's records: it saturates, worker 1 idles.
    // Each record takes 1.5 times the usual execution time: the load needs both workers.
    let exec_us = 1.5 * EXEC_US;
    let loads: Vec<(u32, u64)> =
        (0..64).map(|g| (g, if keys.owners[1][g as usize].0 == 0 { 90 } else { 10 })).collect();
    let mut step = Step::Idle;
    for t in 1..=6u32 {
        let report = |w: u32| WorkerReport {
            worker: WorkerId(w),
            interval_s: 1.0,
            slots: 10,
            queue: if w == 0 { 1_000.0 } else { 1.0 },
            local: 400,
            ops: vec![
                OpReport {
                    processed: 400,
                    records: 400,
                    emitted: 400,
                    exec_us: 400.0 * exec_us,
                    ..OpReport::default()
                },
                OpReport {
                    processed: if w == 0 { 720 } else { 80 },
                    records: if w == 0 { 720 } else { 80 },
                    exec_us: if w == 0 { 720.0 } else { 80.0 } * exec_us,
                    groups: loads
                        .iter()
                        .copied()
                        .filter(|&(g, _)| keys.owners[1][g as usize].0 == w)
                        .collect(),
                    ..OpReport::default()
                },
            ],
            edges: vec![400, 400],
            saturated: w == 0,
            ..WorkerReport::default()
        };
        let interval = Interval {
            t: f64::from(t),
            interval_s: 1.0,
            input_rate: 800.0,
            throughput: 800.0,
            requests: 800 * u64::from(t),
            workers: 2,
            reports: vec![report(0), report(1)],
            ..Interval::default()
        };
        step = a.step(&p, interval);
        if !matches!(step, Step::Idle | Step::Unchanged { .. }) {
            break;
        }
    }
    let Step::Rescale(r) = step else { panic!("expected a rebalance: {step:?}") };
    // The first decision already sees the skew.
    assert_eq!((r.reason, r.from, r.to), (Reason::WarmedUp, 2, 2));
    // Independently: the load per worker under the new owners, from the per-group records.
    let share0: u64 =
        loads.iter().filter(|&&(g, _)| r.keys.owners[1][g as usize].0 == 0).map(|&(_, n)| n).sum();
    let total: u64 = loads.iter().map(|&(_, n)| n).sum();
    let fraction0 = r.placement.fraction(clasp_core::OperatorId(1), WorkerId(0));
    assert!(
        (share0 as f64 / total as f64 - fraction0).abs() < 0.1,
        "{share0}/{total} vs {fraction0}"
    );
    assert!(r.migration.moved_groups() > 0);
}

#[test]
fn a_saturated_cluster_is_sized_by_the_throughput_it_completed() {
    // The model sized 3 workers for 2,000 requests/s; they complete 1,000 and report
    // saturation, so the target needs 3 · 2,000 / 1,000 = 6 of them, whatever the model says.
    let mut d = on_three(config(0));
    let step = match d.until_step(2_000.0, 1_000.0, 20).expect("saturated") {
        (_, Step::Rescale(r)) => r,
        (_, other) => panic!("expected a rescale, got {other:?}"),
    };
    assert_eq!((step.reason, step.from, step.to), (Reason::Saturated, 3, 6));
    assert_eq!(measured_workers(3, 2_000.0, 1_000.0), Some(6));
    assert_eq!(measured_workers(3, 2_000.0, 2_000.0), None, "it keeps up");
    assert_eq!(measured_workers(3, 2_000.0, 0.0), None, "nothing completed");
    assert_eq!(measured_workers(2, 1_001.0, 1_000.0), Some(3), "rounded up");
}

#[test]
fn a_saturated_trigger_never_scales_in() {
    // Three workers drain a backlog (saturated, completing more than arrives) after the rate
    // fell to what one worker holds: the saturated trigger's plan is fewer workers, which is
    // not made; the rate-change trigger that follows scales in.
    let mut cfg = AutoscalerConfig { scale_in_delay_s: 0.0, ..config(0) };
    cfg.triggers.saturated_for_s = 1.0;
    cfg.triggers.cooldown_s = 0.0;
    let mut d = on_three(cfg);
    let mut saturated = None;
    for _ in 0..3 {
        if let Step::Unchanged { trigger, why } = d.second_saturated(300.0, 1_000.0, true) {
            saturated = Some((trigger.reason, why));
            break;
        }
    }
    assert_eq!(saturated, Some((Reason::Saturated, Unchanged::SaturatedScaleIn)));
    assert_eq!(d.scaler.placement().workers, 3);
    let (_, step) = d.until_step(300.0, 300.0, 10).expect("the rate fell");
    let Step::Rescale(r) = step else { panic!("{step:?}") };
    assert_eq!((r.reason, r.from), (Reason::RateChange, 3));
    assert!(r.to < 3, "{} workers", r.to);
}

/// The workers of the first decision from one worker at `rate` (its completions a tenth
/// short), and the driver after it.
fn first_decision(cfg: &AutoscalerConfig, rate: f64) -> (u32, Driver) {
    let mut d = Driver::new(cfg.clone());
    let workers = match d.until_step(rate, rate * 0.9, 5) {
        Some((_, Step::Rescale(r))) => r.to,
        Some((_, Step::Install { placement, .. })) => placement.workers,
        other => panic!("{other:?}"),
    };
    (workers, d)
}

#[test]
fn a_latency_objective_stands_in_for_the_headroom_and_measured_capacity_stays_a_floor() {
    // An objective any unsaturated placement keeps takes the count CLASP plans at full
    // capacity, at a rate where the 0.9 budget's plan needs more.
    let budget = config(0);
    let slo = AutoscalerConfig { latency_slo_ms: Some(1e6), ..budget.clone() };
    let full = AutoscalerConfig {
        plan: PlanConfig { headroom: 1.0, ..budget.plan.clone() },
        ..budget.clone()
    };
    let (rate, fewest) = (1..200)
        .map(|i| 50.0 * f64::from(i))
        .map(|r| (r, first_decision(&full, r).0))
        .find(|&(r, k)| k >= 2 && k < first_decision(&budget, r).0)
        .expect("a rate where the budget costs a worker");
    let (workers, mut d) = first_decision(&slo, rate);
    assert_eq!(workers, fewest, "at {rate}/s");
    // Saturated, completing half the rate: the throughput they completed sizes the cluster,
    // whatever the objective's model says.
    d.scaler.rescaled(d.t);
    let Some((_, Step::Rescale(r))) = d.until_step(rate, rate / 2.0, 20) else { panic!() };
    assert_eq!((r.reason, r.from, r.to), (Reason::Saturated, fewest, 2 * fewest));
}
