//! Malformed input lines are rejected, counted per operator and reason, and never stop a
//! pipeline: the good lines around them give exactly the reference result.

use clasp_apps::{pipeline, profile, registry};
use clasp_core::local::{LocalDriver, LocalOptions};
use clasp_reference::{self as reference, Outcome};
use std::collections::BTreeMap;

/// Runs `app` on generated lines with `bad` lines (per source) spread among them; returns
/// the rejections as `operator/reason → count`. In a bad line, `NOW` stands for the event time
/// of the good line before it, so that it comes on time.
fn run_with_bad(app: &str, count: u64, bad: &[(&str, &[&str])]) -> BTreeMap<String, u64> {
    let p = pipeline(app).unwrap();
    let mut inputs = profile::generate(app, count, 5).unwrap();
    for (source, lines) in bad {
        let (_, good) = inputs.iter_mut().find(|(s, _)| s == source).unwrap();
        let times = registry().event_times(&p).unwrap();
        let time = &times[p.source_id(source).unwrap().index()];
        for (i, l) in lines.iter().enumerate() {
            let at = (i + 1) * good.len() / (lines.len() + 1);
            let now = time.as_ref().and_then(|t| t(&good[at - 1])).unwrap_or_default();
            good.insert(at, l.replace("NOW", &now.to_string()).into_bytes());
        }
    }
    for batch in [1, 16] {
        let options = LocalOptions { batch_size: batch, key_groups: 8 };
        let mut d = LocalDriver::new(&p, &registry(), options).unwrap();
        profile::feed_lines(&mut d, &inputs).unwrap();
        let expected = reference::expected(app, &p, &inputs).unwrap();
        let actual = Outcome::from_driver(&d).unwrap();
        reference::check(app, &p, &expected, &actual)
            .unwrap_or_else(|e| panic!("{app}, batch {batch}: {e}"));
        if batch == 16 {
            return d.rejections().into_iter().map(|(op, r, n)| (format!("{op}/{r}"), n)).collect();
        }
    }
    unreachable!()
}

fn tally(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
    pairs.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect()
}

#[test]
fn word_count_takes_any_bytes() {
    let got =
        run_with_bad("wc", 200, &[("lines", &["", "\u{fffd}\u{1}bin\u{0}ary", "ÄÖÜ straße"])]);
    assert!(got.is_empty(), "{got:?}");
}

#[test]
fn spike_detection_rejects_bad_sensor_lines() {
    let got = run_with_bad(
        "sd",
        500,
        &[(
            "readings",
            &[
                "garbage",
                "2004-03-31 03:38:15.7 2 1 abc 1.0 1.0 1.0",
                "2004-03-31 03:38:15.7 2 1 19.5 1.0 1.0",
                "2004-03-31 03:38:15.7 2 1 1e3 1.0 1.0 1.0",
            ],
        )],
    );
    let want =
        tally(&[("moving_avg/wrong field count", 2), ("moving_avg/non-numeric temperature", 2)]);
    assert_eq!(got, want);
}

#[test]
fn ad_analytics_rejects_bad_events() {
    let view = |ad: &str, time: &str| {
        format!(
            r#"{{"user_id":"u","page_id":"p","ad_id":"{ad}","ad_type":"mail","event_type":"view","event_time":{time},"ip_address":"1.2.3.4"}}"#
        )
    };
    let (unknown_ad, bad_time) = (view("no-such-ad", "\"1500000000001\""), view("x", "\"soon\""));
    let got = run_with_bad(
        "aa",
        3000,
        &[("events", &["{not json", r#"{"user_id":"u"}"#, &unknown_ad, &bad_time, "[]"])],
    );
    let want = tally(&[
        ("deserialize/bad JSON", 2),
        ("deserialize/missing field", 1),
        ("deserialize/non-numeric event_time", 1),
        ("join/unknown ad", 1),
    ]);
    assert_eq!(got, want);
}

#[test]
fn page_load_rejects_bad_records() {
    let got = run_with_bad(
        "pl",
        2000,
        &[(
            "page_loads",
            &[
                "http://www.example.com/news/world,user1",
                "http://www.example.com/news/world,user1,fast",
                ",user1,5",
                "http://www.example.com/not/a/page,user1,5",
                "http://www.example.com/news/world,user1,5,extra",
            ],
        )],
    );
    let want = tally(&[
        ("transition/wrong field count", 2),
        ("transition/non-numeric load_time", 1),
        ("transition/empty field", 1),
        ("join/url not in catalog", 1),
    ]);
    assert_eq!(got, want);
}

#[test]
fn network_monitor_rejects_bad_logins() {
    let got = run_with_bad(
        "nwm",
        6000,
        &[(
            "logins",
            &[
                "1,host0001,user01",
                "x,host0001,user01,failure",
                "1,host0001,u,maybe",
                "1,,u,success",
            ],
        )],
    );
    let want = tally(&[
        ("parse/wrong field count", 1),
        ("parse/non-numeric day", 1),
        ("parse/unknown outcome", 1),
        ("parse/empty host", 1),
    ]);
    assert_eq!(got, want);
}

#[test]
fn etl_rejects_bad_messages_and_repairs_bad_values() {
    let got = run_with_bad(
        "etl",
        2000,
        &[(
            "senml",
            &[
                "{bad",
                r#"{"bn":"sensor-001","bt":5}"#,
                r#"{"bn":"sensor-001","bt":"later","e":[]}"#,
                r#"{"bn":"sensor-002","bt":NOW,"e":[{"n":"temperature","v":"hot"},{"n":"humidity","v":40},{"n":"light","v":2}]}"#,
                r#"{"bn":"sensor-003","bt":NOW,"e":[{"n":"temperature","v":20},{"n":"light","v":2}]}"#,
                r#"{"bn":"sensor-004","bt":8,"e":[7]}"#,
            ],
        )],
    );
    let want = tally(&[
        ("parse/bad JSON", 2),
        ("parse/missing e", 1),
        ("parse/missing or bad bt", 1),
        ("parse/non-numeric value", 1),
        ("join/wrong number of fields in message", 2),
    ]);
    assert_eq!(got, want);
}

#[test]
fn taxi_workflows_reject_bad_rides_and_fares() {
    let bad_rides: &[&str] = &[
        "1,START",
        "2,START,2013-01-01 25:00:00,1970-01-01 00:00:00,-73.9,40.7,-73.9,40.7,1,1,1",
        "3,MIDDLE,2013-01-01 12:00:00,1970-01-01 00:00:00,-73.9,40.7,-73.9,40.7,1,1,1",
        "4,END,2013-01-01 12:00:00,2013-01-01 12:10:00,west,40.7,-73.9,40.7,1,1,1",
        "5,END,2013-02-29 12:00:00,2013-02-29 12:10:00,-73.9,40.7,-73.9,40.7,1,1,1",
    ];
    let got = run_with_bad("taxi-w1", 2000, &[("rides", bad_rides)]);
    let want = tally(&[
        ("filter_start_nyc/wrong field count", 1),
        ("filter_start_nyc/bad time", 2),
        ("filter_start_nyc/event type is not START or END", 1),
        ("filter_start_nyc/non-numeric coordinate", 1),
    ]);
    assert_eq!(got, want);
    let bad_fares: &[&str] =
        &["5,1,1", "x,1,1,2013-01-01 12:00:00,CSH,0,0,5", "6,1,1,2013-01-01 12:00:00,CSH,0,0,lots"];
    let got = run_with_bad("taxi-w2", 2000, &[("rides", &bad_rides[..1]), ("fares", bad_fares)]);
    let want = tally(&[
        ("filter_wellformed/wrong field count", 1),
        ("filter_fare/wrong field count", 1),
        ("filter_fare/non-numeric rideId", 1),
        ("filter_fare/non-numeric amount", 1),
    ]);
    assert_eq!(got, want);
}

/// Generated lines with random bytes overwritten, cut short or duplicated: no operator may
/// panic, whatever it receives.
#[test]
fn corrupted_input_never_panics() {
    use clasp_core::rng::SeededRng;
    use rand::{RngExt, SeedableRng};
    for app in clasp_apps::APPS {
        let p = pipeline(app).unwrap();
        let mut inputs = profile::generate(app, 1500, 2).unwrap();
        let mut rng = SeededRng::seed_from_u64(77);
        for (_, lines) in &mut inputs {
            for line in lines.iter_mut() {
                match rng.random_range(0..4) {
                    0 if !line.is_empty() => {
                        let i = rng.random_range(0..line.len() as u64) as usize;
                        line[i] = rng.random_range(0..256) as u8;
                    }
                    1 => line.truncate(rng.random_range(0..line.len() as u64 + 1) as usize),
                    2 => {
                        let copy = line.clone();
                        line.extend_from_slice(&copy);
                    }
                    _ => {}
                }
            }
        }
        let mut d = LocalDriver::new(&p, &registry(), LocalOptions::default()).unwrap();
        profile::feed_lines(&mut d, &inputs).unwrap();
        if app != "wc" && app != "syn" {
            assert!(!d.rejections().is_empty(), "{app}: corruption went unnoticed");
        }
    }
}
