//! Timers through the local driver: a window of a key that receives no further records closes
//! when the watermark passes it, lateness is counted, and processing-time timers fire.

use clasp_core::local::{LocalDriver, LocalOptions};
use clasp_core::operator::{Context, LATE, Operator, Registry};
use clasp_core::time::{Timer, TimerUse};
use clasp_core::{Batch, SinkId, SourceId};
use std::collections::BTreeMap;

const WIDTH: u64 = 10;

/// Counts records per key in tumbling windows of `WIDTH`, emitting `key → start,count` when
/// the watermark passes a window's end.
#[derive(Clone)]
struct Tumbling;

impl Operator for Tumbling {
    type State = BTreeMap<u64, u64>;
    fn timers(&self) -> TimerUse {
        TimerUse::EVENT
    }
    fn process(&self, input: &Batch, ctx: &mut Context<'_, BTreeMap<u64, u64>>) {
        for (r, t) in input.iter_timed() {
            let start = t.unwrap() / WIDTH * WIDTH;
            *ctx.state(r).entry(start).or_default() += 1;
            ctx.set_event_timer(r, start + WIDTH - 1);
        }
    }
    fn on_timer(&self, timer: Timer<'_>, ctx: &mut Context<'_, BTreeMap<u64, u64>>) {
        let r = timer.record();
        let start = timer.time + 1 - WIDTH;
        let count = ctx.state(r).remove(&start).unwrap();
        ctx.emit_at(timer.time, r.key, format!("{start},{count}").as_bytes());
    }
}

/// Emits its key once a processing-time timer set on the first record fires.
#[derive(Clone)]
struct Alarm;

impl Operator for Alarm {
    type State = bool;
    fn timers(&self) -> TimerUse {
        TimerUse::PROCESSING
    }
    fn process(&self, input: &Batch, ctx: &mut Context<'_, bool>) {
        for r in input.iter() {
            if !std::mem::replace(ctx.state(r), true) {
                let now = ctx.processing_time();
                ctx.set_processing_timer(r, now);
            }
        }
    }
    fn on_timer(&self, timer: Timer<'_>, ctx: &mut Context<'_, bool>) {
        ctx.emit(timer.key, b"alarm");
    }
}

const SPEC: &str = r#"
[[source]]
name = "in"
key_field = 0
event_time = "second"
out_of_orderness = 2
[[operator]]
name = "window"
function = "tumbling"
stateful = true
key = "k"
[[operator]]
name = "alarm"
function = "alarm"
stateful = true
key = "k"
[[sink]]
name = "windows"
[[sink]]
name = "alarms"
[[stream]]
from = "in"
to = "window"
[[stream]]
from = "in"
to = "alarm"
[[stream]]
from = "window"
to = "windows"
[[stream]]
from = "alarm"
to = "alarms"
"#;

fn driver() -> LocalDriver {
    let p = clasp_core::spec::parse(SPEC, "t.toml").unwrap();
    let mut reg = Registry::new();
    reg.register_operator("tumbling", Tumbling);
    reg.register_operator("alarm", Alarm);
    reg.register_event_time("second", |l| {
        std::str::from_utf8(l).ok()?.split(',').nth(1)?.parse().ok()
    });
    LocalDriver::new(&p, &reg, LocalOptions { batch_size: 4, key_groups: 8 }).unwrap()
}

fn sink(d: &LocalDriver, s: u32) -> Vec<(String, String)> {
    d.sink_records(SinkId(s))
        .map(|r| (String::from_utf8_lossy(r.key).into(), String::from_utf8_lossy(r.value).into()))
        .collect()
}

/// Windows from scratch: `key → start → count`.
fn reference(lines: &[String]) -> BTreeMap<(String, u64), u64> {
    let mut w = BTreeMap::new();
    for l in lines {
        let (k, t) = l.split_once(',').unwrap();
        *w.entry((k.to_string(), t.parse::<u64>().unwrap() / WIDTH * WIDTH)).or_default() += 1;
    }
    w
}

#[test]
fn a_quiet_keys_window_closes_when_the_watermark_passes_it() {
    let mut d = driver();
    // `quiet` has one record at 3, then only `busy` records, slightly out of order.
    let mut lines = vec!["quiet,3".to_string()];
    lines.extend((4..40u64).map(|t| format!("busy,{}", if t % 3 == 0 { t - 2 } else { t })));
    for l in &lines {
        d.push(SourceId(0), l.split(',').next().unwrap().as_bytes(), l.as_bytes());
    }
    d.flush();
    let before_end = sink(&d, 0);
    assert!(
        before_end.contains(&("quiet".into(), "0,1".into())),
        "the quiet key's window closed before the input ended: {before_end:?}"
    );
    // Every window whose end the watermark (39 − 2 − 1) passed is out, no other.
    let closed: Vec<&(String, String)> = before_end.iter().collect();
    let expected = reference(&lines);
    let due = expected.keys().filter(|(_, start)| start + WIDTH - 1 <= 36).count();
    assert_eq!(closed.len(), due);
    d.finish();
    let all: BTreeMap<(String, u64), u64> = sink(&d, 0)
        .into_iter()
        .map(|(k, v)| {
            let (s, c) = v.split_once(',').unwrap();
            ((k, s.parse().unwrap()), c.parse().unwrap())
        })
        .collect();
    assert_eq!(all, expected);
    assert_eq!(d.stats(clasp_core::OperatorId(0)).rejections.count(LATE), 0);
    assert_eq!(d.store(clasp_core::OperatorId(0)).timer_count(), 0);
    // The alarm set at the first record's processing time fired for each key.
    let mut alarms: Vec<String> = sink(&d, 1).into_iter().map(|(k, _)| k).collect();
    alarms.sort();
    assert_eq!(alarms, ["busy", "quiet"]);
}

#[test]
fn records_behind_the_watermark_are_counted_late_not_processed() {
    let mut d = driver();
    let lines = ["a,1", "a,2", "a,30", "a,31", "a,5", "a,32", "a,6", "a,33"];
    // Batches of 4: the second batch enters under watermark 31 − 3 = 28, so 5 and 6 are late.
    for l in lines {
        d.push(SourceId(0), b"a", l.as_bytes());
    }
    d.finish();
    assert_eq!(d.stats(clasp_core::OperatorId(0)).rejections.count(LATE), 2);
    let on_time: Vec<String> =
        lines.iter().filter(|l| !["a,5", "a,6"].contains(l)).map(|l| l.to_string()).collect();
    let got: BTreeMap<(String, u64), u64> = sink(&d, 0)
        .into_iter()
        .map(|(k, v)| {
            let (s, c) = v.split_once(',').unwrap();
            ((k, s.parse().unwrap()), c.parse().unwrap())
        })
        .collect();
    assert_eq!(got, reference(&on_time));
}
