//! Event time across the cut: the cloud's windows close as the devices' watermarks pass them,
//! while the devices still stream — not only when the input ends — and a stream's watermark
//! is the minimum of its devices'.
//!
//! Two devices holding taxi rides, driven by hand over real TCP, send w3's raw events all in
//! the cloud with their watermarks; device b lags behind device a. The first results must be
//! exactly the windows both watermarks passed (the reference's windows ending there), arriving
//! before either device sends its end; after the rest of the input every window equals the
//! reference.

mod common;

use clasp_core::Batch;
use clasp_edge::Mode;
use clasp_edge::cloud::{Cloud, CloudOptions};
use clasp_plan::edgecut::{self, CostModel};
use clasp_reference as reference;
use clasp_runtime::planner::SinkOutput;
use common::*;
use crossbeam_channel::{Receiver, Sender};
use std::time::Duration;

/// Sink records as they are written, in order.
struct Forward(Sender<(String, String)>);

impl SinkOutput for Forward {
    fn write(&mut self, _name: &str, batch: &Batch) -> std::io::Result<()> {
        for r in batch.iter() {
            let kv = (text(r.key), text(r.value));
            let _ = self.0.send(kv);
        }
        Ok(())
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A window's end (seconds): the third field of w3's output.
fn window_end(value: &str) -> u64 {
    value.split(',').nth(2).and_then(|f| f.parse().ok()).unwrap_or_else(|| panic!("{value}"))
}

/// The next sink record; a generous bound only keeps a broken build from hanging the suite.
fn next_result(rx: &Receiver<(String, String)>, waiting_for: &str) -> (String, String) {
    rx.recv_timeout(Duration::from_secs(120))
        .unwrap_or_else(|_| panic!("no result arrived while waiting for {waiting_for}"))
}

#[test]
fn cloud_windows_close_as_the_slowest_devices_watermark_passes_them_while_devices_stream() {
    logs();
    let p = clasp_apps::pipeline("taxi-w3").unwrap();
    let devices = "pipeline = \"taxi-w3\"\n[[device]]\nid = \"a\"\nsources = [\"rides\"]\n\
                   [[device]]\nid = \"b\"\nsources = [\"rides\"]\n";
    let d = edgecut::devices::parse(devices, "devices.toml", &p).unwrap();
    let lines = clasp_apps::profile::generate("taxi-w3", 12_000, SEED).unwrap();
    let expected = reference::expected("taxi-w3", &p, &lines).unwrap();
    let all: Vec<&(String, String)> = expected.sinks.values().flatten().collect();
    let rides = &lines[0].1;
    // Device a holds the even events, b the odd ones.
    let share =
        |first: usize| -> Vec<Vec<u8>> { rides.iter().skip(first).step_by(2).cloned().collect() };
    let (a_lines, b_lines) = (share(0), share(1));
    let event_time = clasp_apps::registry().event_times(&p).unwrap()[0].clone().unwrap();
    let time = move |l: &[u8]| event_time(l).expect("every ride has a time");

    let opts = CloudOptions { mode: Mode::AllCloud, ..CloudOptions::default() };
    let cloud = Cloud::bind(&p, &d, &CostModel::from_spec(&p), opts).unwrap();
    let addr = cloud.addr().to_string();
    let (tx, rx) = crossbeam_channel::unbounded();
    let running =
        std::thread::spawn(move || cloud.run(&clasp_apps::registry(), Box::new(Forward(tx))));
    let mut a = HandDevice::join("a", &addr, &p, &d);
    let mut b = HandDevice::join("b", &addr, &p, &d);
    a.await_start(0);
    b.await_start(0);

    // a runs ahead (60% of its events), b behind (30%). The cloud takes an item's watermark
    // with the records after it (the runtime advances a source's watermark with a request),
    // so b sends one more event, in an item that holds its watermark where it was.
    let (a_cut, b_cut) = (a_lines.len() * 6 / 10, b_lines.len() * 3 / 10);
    let wa = a.send(&p, &a_lines[..a_cut], &time).unwrap();
    let wb = b.send(&p, &b_lines[..b_cut], &time).unwrap();
    b.item(&p, &b_lines[b_cut..=b_cut], Some(wb), &time);
    assert!(wb < wa);
    // The windows both watermarks passed (timer at end - 1 <= watermark) hold every event
    // they will ever hold: those are the reference's.
    let closed: Vec<&(String, String)> =
        all.iter().copied().filter(|(_, v)| window_end(v) <= wb + 1).collect();
    assert!(!closed.is_empty(), "the first part closes no window; send more");
    let mut early = Vec::new();
    for _ in 0..closed.len() {
        let (k, v) = next_result(&rx, "the windows both devices' watermarks passed");
        assert!(
            window_end(&v) <= wb + 1,
            "window ending {} closed under device b's watermark {wb} (device a's is {wa})",
            window_end(&v)
        );
        early.push((k, v));
    }
    let mut sorted_closed: Vec<(String, String)> = closed.into_iter().cloned().collect();
    sorted_closed.sort();
    early.sort();
    assert_eq!(early, sorted_closed, "the windows closed early are the reference's");

    // The rest, then the end: every window equals the reference.
    a.send(&p, &a_lines[a_cut..], &time);
    b.send(&p, &b_lines[b_cut + 1..], &time);
    let (a_sent, b_sent) = (a.sent, b.sent);
    a.end(a_sent);
    b.end(b_sent);
    let report = running.join().unwrap().unwrap();
    let mut got: Vec<(String, String)> = early;
    got.extend(rx.try_iter());
    got.sort();
    let mut want: Vec<(String, String)> = all.into_iter().cloned().collect();
    want.sort();
    assert_eq!(got, want);
    assert_eq!(report.items(), rides.len() as u64);
}
