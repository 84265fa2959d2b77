//! Every application, run on seeded generated input through the local driver, against the
//! independent reference implementation: sink records, final keyed state, and windows.

use clasp_apps::{APPS, pipeline, profile, registry};
use clasp_core::local::{LocalDriver, LocalOptions};
use clasp_reference::{self as reference, Outcome};

const SEED: u64 = 20_240_601;

/// Inputs per source: enough for every app to produce results (AA closes 10 s windows after
/// 20 s of event time; generated rides start at noon, one a second, and taxi-w2 keeps night
/// rides only).
fn count(app: &str) -> u64 {
    match app {
        "aa" => 60_000,
        "taxi-w2" => 60_000,
        "taxi-w3" => 40_000,
        _ => 20_000,
    }
}

fn run(app: &str, lines: &reference::Inputs, batch_size: usize) -> (Outcome, LocalDriver) {
    let p = pipeline(app).unwrap();
    let options = LocalOptions { batch_size, key_groups: 16 };
    let mut d = LocalDriver::new(&p, &registry(), options).unwrap();
    profile::feed_lines(&mut d, lines).unwrap();
    (Outcome::from_driver(&d).unwrap(), d)
}

#[test]
fn every_app_matches_its_reference() {
    for app in APPS {
        let p = pipeline(app).unwrap();
        let lines = profile::generate(app, count(app), SEED).unwrap();
        let expected = reference::expected(app, &p, &lines).unwrap();
        if app != "syn" {
            let sink_records: usize = expected.sinks.values().map(Vec::len).sum();
            let keys: usize = expected.state.values().map(|s| s.len()).sum();
            assert!(sink_records + keys > 0, "{app}: the reference produced nothing");
            if app != "wc" {
                assert!(sink_records > 0, "{app}: no sink output to compare");
            }
        }
        for batch in [1, 64] {
            let (actual, d) = run(app, &lines, batch);
            reference::check(app, &p, &expected, &actual)
                .unwrap_or_else(|e| panic!("{app}, batch {batch}:\n{e}"));
            reference::check_order_insensitive(app, &p, &expected, &actual)
                .unwrap_or_else(|e| panic!("{app}, batch {batch} (order-insensitive):\n{e}"));
            assert!(d.rejections().is_empty(), "{app}: {:?}", d.rejections());
        }
    }
}

#[test]
fn windowed_apps_are_compared_per_window() {
    for app in ["aa", "taxi-w3"] {
        let p = pipeline(app).unwrap();
        let lines = profile::generate(app, count(app), SEED).unwrap();
        let expected = reference::expected(app, &p, &lines).unwrap();
        let windows = reference::windows(app, &p, &expected).unwrap();
        assert!(windows.len() > 10, "{app}: only {} windows", windows.len());
        let (actual, _) = run(app, &lines, 32);
        assert_eq!(reference::windows(app, &p, &actual).unwrap(), windows, "{app}");
        // A wrong count in one window is caught even though the records match otherwise.
        let mut broken = actual.clone();
        let (sink, recs) = broken.sinks.iter_mut().find(|(_, r)| !r.is_empty()).unwrap();
        let sink = sink.clone();
        recs.last_mut().unwrap().1.push('0');
        let err = reference::check(app, &p, &expected, &broken).unwrap_err();
        assert!(err.contains("windows differ") && err.contains(sink.as_str()), "{err}");
    }
}

#[test]
fn same_seed_same_output() {
    for app in ["wc", "nwm", "taxi-w2"] {
        let a = profile::generate(app, 3000, 7).unwrap();
        assert_eq!(a, profile::generate(app, 3000, 7).unwrap());
        assert_ne!(a, profile::generate(app, 3000, 8).unwrap());
        let (x, _) = run(app, &a, 16);
        let (y, _) = run(app, &a, 16);
        assert_eq!(x, y, "{app}");
    }
}

#[test]
fn state_dump_lines_round_trip_into_an_outcome() {
    let lines = profile::generate("pl", 5000, 3).unwrap();
    let (from_driver, d) = run("pl", &lines, 8);
    let mut dump = Vec::new();
    d.dump_state(&mut dump).unwrap();
    let mut rebuilt = Outcome::default();
    rebuilt.state.insert("aggregation".into(), Default::default());
    for line in String::from_utf8(dump).unwrap().lines() {
        rebuilt.add_state_line(line).unwrap();
    }
    for r in d.sink_records_named("category_means") {
        rebuilt.add_sink("category_means", r.key, r.value);
    }
    assert_eq!(rebuilt, from_driver);
    assert!(rebuilt.add_state_line("{\"key\":1}").is_err());
}
