use super::*;
use crate::report::PlanReport;
use clasp_core::spec::load;
use std::path::PathBuf;

fn spec(name: &str) -> Pipeline {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../pipelines").join(name);
    load(&path).unwrap()
}

fn input<'a>(
    p: &'a Pipeline,
    stats: &'a ObservedStats,
    rate: f64,
    config: &'a PlanConfig,
) -> PlanInput<'a> {
    PlanInput {
        pipeline: p,
        stats,
        target_rate: rate,
        coefficients: Coefficients::PAPER,
        config,
        current: None,
    }
}

/// WC per input line: split 400 µs, 10 words × count 400 µs, 10 local calls × α.
const WC_COST: f64 = 400.0 + 10.0 * 400.0 + 10.0 * 38.5;
const BUDGET: f64 = 0.9 * 850_000.0;

#[test]
fn names_parse_with_a_clear_error() {
    assert_eq!("clasp".parse::<Policy>(), Ok(Policy::Clasp));
    assert_eq!(" Static ".parse::<Policy>(), Ok(Policy::Static));
    let e = "fifo".parse::<Policy>().unwrap_err().to_string();
    assert_eq!(
        e,
        "unknown policy `fifo`; valid policies: clasp, faasflow, zhang24, ds2, flink, \
         faasflow-sp, zhang24-sp, static"
    );
    for p in Policy::ALL {
        assert_eq!(p.to_string().parse::<Policy>(), Ok(*p));
    }
}

#[test]
fn static_on_one_worker_sustains_budget_over_cost() {
    let p = spec("wc.toml");
    let stats = ObservedStats::from_spec(&p, 1000.0, 400.0);
    let cfg = PlanConfig::default();
    let d = Policy::Static.decide(&input(&p, &stats, 1000.0, &cfg)).unwrap();
    let exact = BUDGET / WC_COST;
    assert!((d.target_rate - exact).abs() < 1e-9 * exact, "{} vs {exact}", d.target_rate);
    assert!(d.limited);
    assert_eq!((d.workers, d.requested_rate), (1, 1000.0));
    assert!((d.loads[0].load - BUDGET).abs() < 1e-6);
    // Eq. 12: 10 slots split 400 : 4,000 → 1 : 9.
    let inst: Vec<u32> = d.placement.operators.iter().map(|o| o.shares[0].instances).collect();
    assert_eq!(inst, [1, 9]);
}

#[test]
fn clasp_fits_within_budget_and_static_keeps_it() {
    let p = spec("wc.toml");
    let stats = ObservedStats::from_spec(&p, 500.0, 400.0);
    let cfg = PlanConfig::default();
    let d = Policy::Clasp.decide(&input(&p, &stats, 500.0, &cfg)).unwrap();
    assert!(!d.limited);
    assert_eq!(d.target_rate, 500.0);
    // Lower bound: the execution demand alone, 500 · 4,400 µs, over the budget.
    assert!(d.workers >= (500.0 * 4_400.0 / BUDGET).ceil() as u32);
    assert!(d.loads.iter().all(|l| l.load <= BUDGET * (1.0 + 1e-9)));
    let mut keep = input(&p, &stats, 500.0, &cfg);
    keep.current = Some(&d.placement);
    let s = Policy::Static.decide(&keep).unwrap();
    assert_eq!((s.workers, s.target_rate, s.limited), (d.workers, 500.0, false));
    assert_eq!(s.placement, d.placement);
}

#[test]
fn clasp_spreads_the_load_over_the_workers_the_packing_needs() {
    let p = spec("wc.toml");
    let stats = ObservedStats::from_spec(&p, 500.0, 400.0);
    let cfg = PlanConfig::default();
    let inp = input(&p, &stats, 500.0, &cfg);
    let d = Policy::Clasp.decide(&inp).unwrap();
    // The worker count is Eq. 8's packing at the full budget, which leaves its slack on the
    // last worker; the decision spreads it.
    let proj = inp.projection().unwrap();
    let packed = inp.packer(&proj, &d.order).pack(cfg.max_workers).unwrap();
    assert_eq!(d.workers, packed.workers);
    let packed_loads = placement_loads(&proj, &packed, &inp.coefficients, BUDGET);
    let least = |l: &[WorkerLoad]| l.iter().map(|l| l.load).fold(f64::INFINITY, f64::min);
    assert!(least(&packed_loads) < 0.5 * BUDGET, "{packed_loads:?}");
    let mean = d.loads.iter().map(|l| l.load).sum::<f64>() / f64::from(d.workers);
    assert!(d.max_load() <= BUDGET * (1.0 + 1e-9));
    assert!(d.max_load() - least(&d.loads) < 0.1 * mean, "{:?}", d.loads);
}

#[test]
fn clasp_at_the_worker_limit_finds_the_highest_rate() {
    let p = spec("wc.toml");
    let stats = ObservedStats::from_spec(&p, 1e6, 400.0);
    let cfg = PlanConfig { max_workers: 4, ..PlanConfig::default() };
    let mut cache = LimitCache::default();
    let inp = input(&p, &stats, 1e6, &cfg);
    let d = Policy::Clasp.decide_cached(&inp, &mut cache).unwrap();
    assert!(d.limited && d.workers <= 4 && d.target_rate < 1e6);
    // 1 % more does not fit (the search's tolerance).
    let proj = inp.projection().unwrap().at_rate(d.target_rate / (1.0 - cfg.rate_tolerance));
    assert!(inp.packer(&proj, &d.order).pack(4).is_err());
    assert_eq!(Policy::Clasp.decide_cached(&inp, &mut cache).unwrap(), d);
    assert_eq!(cache.hits(), 1);
}

/// A chain that one worker holds at 765,000 / 29,038.5 ≈ 26 requests/s, and β so large
/// that a split barely pays. The search used to stop at an absolute width of 50
/// requests/s, before any rate that packs, and answered 0.
#[test]
fn the_worker_limit_at_small_rates_is_not_zero() {
    let p = crate::testing::pipeline(
        "[[source]]\nname = \"in\"\n[[operator]]\nname = \"a\"\nservice_time_us = 14500\n\
         [[operator]]\nname = \"b\"\nservice_time_us = 14500\n\
         [[stream]]\nfrom = \"in\"\nto = \"a\"\n[[stream]]\nfrom = \"a\"\nto = \"b\"\n",
    );
    let cfg = PlanConfig { max_workers: 3, ..PlanConfig::default() };
    let c = Coefficients { beta: 1e6, ..Coefficients::PAPER };
    let stats = crate::projection::spec_observation(&p, 1000.0, &cfg, &c);
    let inp = PlanInput { coefficients: c, ..input(&p, &stats, 1000.0, &cfg) };
    let d = Policy::Clasp.decide(&inp).unwrap();
    assert!(d.limited && d.target_rate > 0.0, "{}", d.target_rate);
    // At least what one worker holds with everything local: 29,000 µs + α per request.
    let one_worker = BUDGET / (29_000.0 + c.alpha);
    assert!(d.target_rate >= one_worker * (1.0 - cfg.rate_tolerance), "{}", d.target_rate);
    assert!(d.placement.operators.iter().all(|o| o.demand > 0.0));
    assert!(d.loads.iter().all(|l| l.load <= BUDGET * (1.0 + 1e-9)), "{:?}", d.loads);
    // The cached path gives the same answer.
    let mut cache = LimitCache::default();
    assert_eq!(Policy::Clasp.decide_cached(&inp, &mut cache).unwrap(), d);
    assert_eq!(Policy::Clasp.decide_cached(&inp, &mut cache).unwrap(), d);
    assert_eq!((cache.hits(), cache.rate()), (1, Some(d.target_rate)));
}

#[test]
fn sp_spreads_over_the_given_workers() {
    let p = spec("wc.toml");
    let stats = ObservedStats::from_spec(&p, 500.0, 400.0);
    let cfg = PlanConfig::default();
    let inp = input(&p, &stats, 500.0, &cfg);
    let own = Policy::Clasp.decide(&inp).unwrap().workers;
    for n in own..=cfg.max_workers {
        let d = clasp_on_workers(Policy::Clasp, &inp, n).unwrap();
        assert_eq!(d.workers, n);
        assert!(!d.limited);
        assert!(d.loads.iter().all(|l| l.load <= BUDGET * (1.0 + 1e-9)));
    }
    let one = clasp_on_workers(Policy::Clasp, &inp, 1).unwrap();
    assert!(one.limited && one.workers == 1);
}

#[test]
fn invalid_coefficients_and_config_are_errors() {
    let p = spec("wc.toml");
    let stats = ObservedStats::from_spec(&p, 500.0, 400.0);
    let cfg = PlanConfig::default();
    for c in [
        Coefficients { capacity: 0.0, ..Coefficients::PAPER },
        Coefficients { beta: -1.0, ..Coefficients::PAPER },
        Coefficients { gamma: f64::NAN, ..Coefficients::PAPER },
    ] {
        let inp = PlanInput { coefficients: c, ..input(&p, &stats, 500.0, &cfg) };
        let e = Policy::Clasp.decide(&inp).unwrap_err();
        assert!(matches!(e, PlanError::InvalidCoefficients { .. }), "{e}");
    }
    let bad = PlanConfig { max_workers: 0, ..PlanConfig::default() };
    let e = Policy::Clasp.decide(&input(&p, &stats, 500.0, &bad)).unwrap_err();
    assert!(matches!(e, PlanError::InvalidConfig(_)), "{e}");
    let e = Policy::Static.decide(&input(&p, &stats, -1.0, &cfg)).unwrap_err();
    assert_eq!(e, PlanError::InvalidRate(-1.0));
}

#[test]
fn a_wrong_current_placement_is_rejected() {
    let p = spec("wc.toml");
    let stats = ObservedStats::from_spec(&p, 500.0, 400.0);
    let cfg = PlanConfig::default();
    let wrong = Placement::single_worker(&spec("fig6.toml"), &[]);
    let mut inp = input(&p, &stats, 500.0, &cfg);
    inp.current = Some(&wrong);
    let e = Policy::Static.decide(&inp).unwrap_err();
    assert!(matches!(e, PlanError::PlacementMismatch(_)), "{e}");
}

#[test]
fn same_inputs_give_byte_identical_json() {
    let p = spec("nwm.toml");
    let cfg = PlanConfig::default();
    let json = || {
        let stats = crate::projection::spec_observation(&p, 3000.0, &cfg, &Coefficients::PAPER);
        let d = Policy::Clasp.decide(&input(&p, &stats, 3000.0, &cfg)).unwrap();
        PlanReport::new(&d, &p, &Coefficients::PAPER, &cfg).to_json()
    };
    let a = json();
    assert_eq!(a, json());
    let v: serde_json::Value = serde_json::from_str(&a).unwrap();
    for key in ["workers", "order", "placement", "load", "policy", "coefficients"] {
        assert!(v.get(key).is_some(), "missing {key}");
    }
    assert_eq!(v["order"].as_array().unwrap().len(), p.operators.len());
}
