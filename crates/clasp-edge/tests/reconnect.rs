//! Devices whose links break mid-stream connect again and resume their cut streams without
//! losing or duplicating an item. A user-space proxy between the five devices and the cloud
//! (real TCP both sides) cuts each of the first connections after a seeded number of bytes,
//! mid-frame; the cut w3 run through it must equal the same workflow all in the cloud without
//! the proxy, and the reference, exactly — with the cluster secret, and under TLS, proven
//! again on every connection. And a device that resends items the cloud already
//! holds has them discarded.

mod common;

use clasp_core::hash::fmix64;
use clasp_edge::Mode;
use clasp_edge::cloud::{Cloud, CloudOptions};
use clasp_edge::device::{self, DeviceOptions};
use clasp_edge::protocol::ToDevice;
use clasp_edge::results::CollectSink;
use clasp_plan::edgecut::CostModel;
use clasp_reference as reference;
use clasp_wire::testing::TestCa;
use clasp_wire::{Secret, Security, Tls};
use common::*;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Connections the proxy cuts, in the order it accepts them.
const CUT_CONNECTIONS: u64 = 12;

/// Bytes from the device after which the proxy cuts connection `n` (none past the first
/// [`CUT_CONNECTIONS`]): more than a handshake (TLS with certificates included) and a hello,
/// at most a few items.
fn threshold(n: u64) -> Option<u64> {
    (n < CUT_CONNECTIONS).then(|| 6_000 + fmix64(SEED * 1_000 + n) % 20_000)
}

/// Forwards connections to `upstream`, cutting both directions of connection `n` once
/// [`threshold`]`(n)` bytes came from the device; returns its address and the cuts made.
fn proxy(upstream: String) -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let cuts = Arc::new(AtomicU64::new(0));
    let made = cuts.clone();
    std::thread::spawn(move || {
        for (n, device) in (0u64..).zip(listener.incoming()) {
            let Ok(device) = device else { continue };
            let cloud = TcpStream::connect(&upstream).unwrap();
            let (d2, c2) = (device.try_clone().unwrap(), cloud.try_clone().unwrap());
            let made = made.clone();
            std::thread::spawn(move || {
                pipe(&device, &cloud, threshold(n));
                if threshold(n).is_some() {
                    made.fetch_add(1, Ordering::Relaxed);
                }
            });
            std::thread::spawn(move || pipe(&c2, &d2, None));
        }
    });
    (addr, cuts)
}

/// Copies `from` to `to` until either ends or `limit` bytes have passed, then closes both.
fn pipe(mut from: &TcpStream, mut to: &TcpStream, limit: Option<u64>) {
    let mut buf = [0u8; 4096];
    let mut passed = 0u64;
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let allowed = limit.map_or(n, |l| n.min((l - passed) as usize));
        if to.write_all(&buf[..allowed]).is_err() {
            break;
        }
        passed += allowed as u64;
        if limit.is_some_and(|l| passed >= l) {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// The cut w3 run with every device's link through the cutting proxy; the cloud holds
/// `security`, device `id` proves `device_security(id)`.
fn cut_off_run(security: Security, device_security: impl Fn(&str) -> Security) {
    logs();
    let app = "taxi-w3";
    let count = 20_000;
    let p = clasp_apps::pipeline(app).unwrap();
    let d = devices(&p, app);
    let model = CostModel::from_spec(&p);
    let opts = CloudOptions { dump_state: true, security, ..CloudOptions::default() };
    let cloud = Cloud::bind(&p, &d, &model, opts).unwrap();
    let (addr, cuts) = proxy(cloud.addr().to_string());
    let sink = CollectSink::default();
    let collected = sink.clone();
    let running = std::thread::spawn(move || cloud.run(&clasp_apps::registry(), Box::new(sink)));
    let runs: Vec<_> = d
        .devices
        .iter()
        .map(|dev| {
            let mut o = DeviceOptions::new(&dev.id, &addr, inputs(&p, count));
            o.split_files = true;
            o.security = device_security(&dev.id);
            // Small enough that devices wait for acknowledgements.
            o.resend_buffer = 16 << 10;
            let (p, d, model) = (p.clone(), d.clone(), model.clone());
            std::thread::spawn(move || device::run(&p, &d, &model, &clasp_apps::registry(), &o))
        })
        .collect();
    let reports: Vec<_> = runs.into_iter().map(|t| t.join().unwrap().unwrap()).collect();
    let report = running.join().unwrap().unwrap();

    let reconnects: u64 = reports.iter().map(|r| r.reconnects).sum();
    let welcomed_back: u64 = report.links.iter().map(|l| l.reconnects).sum();
    assert!(cuts.load(Ordering::Relaxed) >= 3, "the proxy cut too few links");
    assert!(reconnects >= 3 && welcomed_back >= 3, "{reconnects} / {welcomed_back} reconnects");
    // Every record each device sent arrived once.
    for (dev, link) in reports.iter().zip(&report.links) {
        assert_eq!(dev.sent, link.records, "device {}", dev.device);
        assert!(link.duplicates <= dev.resent, "device {}", dev.device);
    }

    let mut got = collected.results();
    got.add_state_dump(report.state.as_deref().unwrap_or_default());
    let (all, all_results, _) = run_embedded(&p, app, Mode::AllCloud, count, 0.0);
    assert_eq!(all_results.difference(&got), None, "cut through the proxy vs all in the cloud");
    let lines = clasp_apps::profile::generate(app, count, SEED).unwrap();
    let expected = reference::expected(app, &p, &lines).unwrap();
    reference::check_order_insensitive(app, &p, &expected, &outcome_of(&p, &got))
        .unwrap_or_else(|e| panic!("through the proxy vs reference: {e}"));
    reference::check_order_insensitive(app, &p, &expected, &all).unwrap();
}

#[test]
fn devices_cut_off_mid_stream_resume_without_losing_or_duplicating_an_item() {
    let secret = Secret::generate().unwrap();
    cut_off_run(Security::with_secret(secret.clone()), |_| Security::with_secret(secret.clone()));
}

#[test]
fn the_same_under_tls() {
    // Every reconnect proves the secret and the identity again, under TLS.
    let dir = std::env::temp_dir().join(format!("clasp-edge-reconnect-tls-{}", std::process::id()));
    let ca = TestCa::new(&dir);
    let secret = Secret::generate().unwrap();
    let tls = |name: &str| Some(Tls::load(&ca.node(name)).unwrap());
    let cloud = Security { secret: Some(secret.clone()), tls: tls("cloud") };
    cut_off_run(cloud, |id| Security { secret: Some(secret.clone()), tls: tls(id) });
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn a_device_connecting_again_learns_what_the_cloud_holds_and_resent_items_are_discarded() {
    logs();
    let p = clasp_apps::pipeline("taxi-w3").unwrap();
    let one = "pipeline = \"taxi-w3\"\n[[device]]\nid = \"a\"\nsources = [\"rides\"]\n";
    let d = clasp_plan::edgecut::devices::parse(one, "devices.toml", &p).unwrap();
    let lines = clasp_apps::profile::generate("taxi-w3", 4_000, SEED).unwrap();
    let rides = &lines[0].1;
    let event_time = clasp_apps::registry().event_times(&p).unwrap()[0].clone().unwrap();
    let time = move |l: &[u8]| event_time(l).expect("every ride has a time");
    let opts = CloudOptions { mode: Mode::AllCloud, dump_state: true, ..CloudOptions::default() };
    let cloud = Cloud::bind(&p, &d, &CostModel::from_spec(&p), opts).unwrap();
    let addr = cloud.addr().to_string();
    let sink = CollectSink::default();
    let collected = sink.clone();
    let running = std::thread::spawn(move || cloud.run(&clasp_apps::registry(), Box::new(sink)));

    let mut first = HandDevice::join("a", &addr, &p, &d);
    first.await_start(0);
    let half = rides.len() / 2;
    first.send(&p, &rides[..half], &time);
    let items = first.seq;
    // Every item is acknowledged, then the link goes.
    let mut held = 0;
    while held < items {
        if let ToDevice::Ack { held: h, .. } = first.next() {
            held = h;
        }
    }
    first.conn.close();
    // Connecting again, the device hears how many items the cloud holds, yet resends from the
    // start, then goes on.
    let mut again = HandDevice::join("a", &addr, &p, &d);
    again.await_start(items);
    again.send(&p, rides, &time);
    let sent_again = again.seq;
    again.end(rides.len() as u64);
    let report = running.join().unwrap().unwrap();
    assert_eq!(report.links[0].reconnects, 1);
    assert_eq!(report.links[0].duplicates, items, "{sent_again} items sent again, {items} held");
    assert_eq!(report.items(), rides.len() as u64, "every record once");

    let mut got = collected.results();
    got.add_state_dump(report.state.as_deref().unwrap_or_default());
    let expected = reference::expected("taxi-w3", &p, &lines).unwrap();
    reference::check_order_insensitive("taxi-w3", &p, &expected, &outcome_of(&p, &got))
        .unwrap_or_else(|e| panic!("resent items vs reference: {e}"));
}
