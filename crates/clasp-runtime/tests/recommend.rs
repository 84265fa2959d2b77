//! `--scaling recommend` on a live cluster (the README's main job, shortened: word count with
//! 50 µs of sleep per word on 3-slot workers, the rate stepping up): every interval goes to the
//! recommending scaling loop and, the same interval, to an acting autoscaler twin. Each time the
//! twin decides a rescale, the loop records the same decision at that interval; nothing moves.
//! Once the twin installed new instance limits (which recommending does not), their
//! placements differ in instances, so from then on only worker-count decisions must agree.

mod common;

use clasp_core::SourceId;
use clasp_core::input::MemoryLines;
use clasp_core::pipeline::{ServiceMode, ServicePer, ServiceTime};
use clasp_core::report::WorkerReport;
use clasp_plan::autoscaler::{Autoscaler, AutoscalerConfig, Mode, Step};
use clasp_plan::estimator::EstimatorConfig;
use clasp_plan::keys::assign_keys;
use clasp_plan::triggers::TriggerConfig;
use clasp_plan::{PlanConfig, Policy};
use clasp_runtime::cluster::Cluster;
use clasp_runtime::planner::{DiscardSink, Input};
use clasp_runtime::routing::RoutingPlan;
use clasp_runtime::scaling::{ScalingLoop, interval};
use std::sync::Arc;

const SLOTS: u32 = 3;
const BATCH: u32 = 16;

fn config(mode: Mode) -> AutoscalerConfig {
    AutoscalerConfig {
        policy: Policy::Clasp,
        plan: PlanConfig {
            slots_per_worker: SLOTS,
            max_workers: 6,
            estimator: EstimatorConfig {
                local_scale: 0.2,
                remote_scale: 1.0,
                destinations_scale: 100.0,
                load_scale: f64::from(SLOTS) * 1e6,
                initial_capacity: f64::from(SLOTS) * 1e6,
                min_remote_rate: 0.0,
                ..EstimatorConfig::default()
            },
            ..PlanConfig::default()
        },
        triggers: TriggerConfig { warmup_s: 1.0, ..TriggerConfig::default() },
        window_s: 2.0,
        batch_size: BATCH,
        mode,
        ..AutoscalerConfig::default()
    }
}

#[test]
fn recommend_records_what_acting_would_decide_at_the_same_interval_and_moves_nothing() {
    let mut p = common::pipeline("wc.toml");
    let count = p.operator_id("count").unwrap();
    p.operators[count.index()].service =
        Some(ServiceTime { micros: 50.0, mode: ServiceMode::Sleep, per: ServicePer::Record });
    let lines = Arc::new(common::corpus(3, 1_600 * BATCH as usize));
    let mut cfg = common::config(BATCH);
    cfg.settings.interval_ms = 250;
    let mut cluster =
        Cluster::start(p.clone(), cfg, Box::new(DiscardSink), common::threads(), 1, SLOTS).unwrap();
    // The placement `clasp run` starts from: the spec's rates planned on one worker.
    let job = clasp_runtime::job::Job {
        pipeline: p.clone(),
        workers: 1,
        slots: SLOTS,
        planner: common::config(BATCH),
        launch: common::threads(),
        placement: None,
        scaling: config(Mode::Act),
        duration: None,
        initial_rate: 150.0,
        rescales: Vec::new(),
        fault: Default::default(),
    };
    let placement = clasp_runtime::job::initial_placement(&job).unwrap();
    let keys = assign_keys(&p, &placement, 64, None);
    let plan = RoutingPlan { epoch: 1, placement: placement.clone(), keys: keys.clone() };
    cluster.planner.install(plan).unwrap();
    let mut recommend =
        ScalingLoop::new(config(Mode::Recommend), &p, placement.clone(), keys.clone(), 1).unwrap();
    let mut twin = Autoscaler::new(config(Mode::Act), &p, placement, keys, 1).unwrap();
    // 150 requests/s for 2 s, then 700/s: more than one worker sustains.
    let input = Input {
        source: SourceId(0),
        reader: clasp_core::source::from_lines(Box::new(MemoryLines::new(lines, 0, 1)), None),
        rate: Box::new(|t| Some(if t < 2.0 { 150.0 } else { 700.0 })),
    };
    let mut seen = 0;
    let (mut decided, mut parted, mut rescales) = (0, false, 0);
    let Cluster { planner, pool } = &mut cluster;
    planner
        .run(
            vec![input],
            None,
            |_| {},
            |planner, progress| {
                let new: Vec<WorkerReport> =
                    planner.reports.since(seen).iter().map(|(_, r)| r.clone()).collect();
                seen += new.len();
                let before = recommend.recommendations.len();
                let event = recommend.step(planner, pool, progress).unwrap();
                assert!(event.is_none(), "recommend mode rescaled: {event:?}");
                let got = &recommend.recommendations[before..];
                let step = twin.step(planner.pipeline(), interval(progress, &new));
                match step {
                    Step::Rescale(r) => {
                        decided += 1;
                        rescales += 1;
                        let [(t, m)] = got else {
                            panic!("acting rescales at {}, recommend recorded {got:?}", progress.t)
                        };
                        assert_eq!(*t, progress.t);
                        assert_eq!(
                            (m.reason, m.target_rate, m.from, m.to, m.migrate),
                            (r.reason, r.target_rate, r.from, r.to, true)
                        );
                        if !parted {
                            assert_eq!(m.placement, r.placement);
                        }
                        // The cluster did not move: the twin stays on the running placement.
                        twin.rescale_failed();
                    }
                    Step::Install { placement, .. } => {
                        match got {
                            [(_, m)] => {
                                decided += 1;
                                assert!(!m.migrate);
                                if !parted {
                                    assert_eq!(m.placement, placement);
                                }
                            }
                            // Once parted, acting may install limits recommending already runs
                            // (back to them, say): recommending then finds nothing to change. The
                            // worker count is the same either way.
                            [] => assert!(
                                parted
                                    && placement.workers
                                        == recommend.autoscaler().placement().workers,
                                "acting installs at {} on {} workers, recommend recorded nothing (parted: {parted})",
                                progress.t,
                                placement.workers
                            ),
                            _ => panic!("acting installs at {}, recommend recorded {got:?}", progress.t),
                        }
                        // Acting now runs new instance limits and recommending does not: from here
                        // on their placements differ in instances (not in workers), and recommend
                        // may repeat the limits acting already has.
                        parted = true;
                    }
                    other => {
                        let repeats = |m: &clasp_plan::autoscaler::Recommendation| {
                            parted && !m.migrate && m.from == m.to
                        };
                        assert!(
                            got.iter().all(|(_, m)| repeats(m)),
                            "recommend recorded {got:?}; acting: {other:?}"
                        );
                    }
                }
                Ok(())
            },
        )
        .unwrap();
    eprintln!("{decided} decisions compared, rescales among them: {rescales}");
    assert!(decided >= 1, "the rate step led to no decision");
    assert!(planner.migrations.is_empty(), "recommend mode migrated");
    assert_eq!(planner.routing().epoch, 1);
    assert_eq!(recommend.autoscaler().placement().workers, 1);
    assert!(recommend.recommendations.len() >= decided, "every decision recorded");
    cluster.shutdown().unwrap();
}
