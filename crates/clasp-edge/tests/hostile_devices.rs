//! Hostile peers against the cloud's edge ingress: every case before the secret is proven,
//! and devices that prove it and then misbehave. Each is refused with a log line naming its
//! address, the cloud grows by no more than a few MB, and the real devices' run that follows
//! equals the reference.

mod common;

use clasp_core::Batch;
use clasp_edge::Mode;
use clasp_edge::cloud::{Cloud, CloudOptions};
use clasp_edge::device::{self, DeviceOptions};
use clasp_edge::protocol::{Hello, Item, Outgoing, PROTOCOL};
use clasp_edge::results::CollectSink;
use clasp_plan::edgecut::CostModel;
use clasp_reference as reference;
use clasp_wire::testing::hostile::{self, Case, Step, frame};
use clasp_wire::{Secret, Security};
use common::*;
use std::io::Write;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

fn log() -> &'static Mutex<Vec<u8>> {
    static LOG: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();
    LOG.get_or_init(|| {
        tracing_subscriber::fmt().with_writer(|| Capture).with_ansi(false).init();
        Mutex::new(Vec::new())
    })
}

struct Capture;

impl Write for Capture {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        clasp_core::sync::lock(log()).extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn check(addr: &str, case: &Case) {
    let out = hostile::run(addr, &PROTOCOL, case, Duration::from_secs(60)).unwrap();
    assert!(out.closed, "{}: the cloud kept the connection open", case.name);
    let me = out.local.to_string();
    for _ in 0..200 {
        if String::from_utf8_lossy(&clasp_core::sync::lock(log())).contains(&me) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{}: no log line names {me}", case.name);
}

#[test]
fn hostile_peers_are_refused_and_logged_and_the_devices_run_exactly() {
    log();
    let p = clasp_apps::pipeline("taxi-w1").unwrap();
    let d = devices(&p, "taxi-w1");
    let model = CostModel::from_spec(&p);
    let secret = Secret::generate().unwrap();
    let opts = CloudOptions {
        security: Security::with_secret(secret.clone()),
        dump_state: true,
        ..CloudOptions::default()
    };
    let cloud = Cloud::bind(&p, &d, &model, opts).unwrap();
    let addr = cloud.addr().to_string();
    let sink = CollectSink::default();
    let collected = sink.clone();
    let running = std::thread::spawn(move || cloud.run(&clasp_apps::registry(), Box::new(sink)));
    let before = rss_kb();

    let hello = |id: &str| device::plan(&p, &d, &model, Mode::Cut, id).unwrap().hello;
    let joined = |proves: &str, h: &Hello, then: Vec<Vec<u8>>| {
        let mut steps = vec![
            Step::Handshake { identity: format!("device:{proves}"), secret: Some(secret.clone()) },
            Step::Send(frame(&Outgoing::Hello(h))),
        ];
        steps.extend(then.into_iter().map(Step::Send));
        steps
    };
    let captured = hostile::capture(&addr, &PROTOCOL, "device:edge-4", &secret);
    let mut cases =
        hostile::unauthenticated(&PROTOCOL, "device:edge-1", "worker:1", &secret, &captured);
    let mut other_part = hello("edge-2");
    other_part.connectors.push("extra".into());
    let empty = Batch::new();
    let item = |seq| Item { seq, origin_ns: 0, watermark: Some(1), records: &empty };
    let data = frame(&Outgoing::Data { connector: 0, item: item(0) });
    // An item announcing 2^40 records: [len u32][Data][connector][seq][origin][None][count]…
    let mut one = Batch::new();
    one.push(b"1", b"1,START");
    let item = Item { seq: 0, origin_ns: 0, watermark: None, records: &one };
    let mut huge = frame(&Outgoing::Data { connector: 0, item });
    assert_eq!(huge[4..10], [1, 0, 0, 0, 0, 1], "the layout this case forges");
    huge.splice(9..10, [0x80, 0x80, 0x80, 0x80, 0x80, 0x20]);
    let len = u32::try_from(huge.len() - 4).unwrap();
    huge[..4].copy_from_slice(&len.to_le_bytes());
    cases.extend([
        Case::new(
            "a device proving edge-2 that says it is edge-1",
            joined("edge-2", &hello("edge-1"), vec![]),
        ),
        Case::new(
            "a device the cloud does not know",
            joined("edge-9", &Hello { device: "edge-9".into(), ..hello("edge-1") }, vec![]),
        ),
        Case::new("a device with another part", joined("edge-2", &other_part, vec![])),
        Case::new(
            "data before the hello",
            vec![
                Step::Handshake { identity: "device:edge-3".into(), secret: Some(secret.clone()) },
                Step::Send(data),
            ],
        ),
        Case::new(
            "an item announcing 2^40 records",
            vec![
                Step::Handshake { identity: "device:edge-3".into(), secret: Some(secret.clone()) },
                Step::Send(huge),
            ],
        ),
        Case::new(
            "64 MiB announced instead of a hello",
            vec![
                Step::Handshake { identity: "device:edge-3".into(), secret: Some(secret.clone()) },
                Step::Send((65u32 << 20).to_le_bytes().to_vec()),
            ],
        ),
    ]);
    let (slow, fast): (Vec<Case>, Vec<Case>) = cases.into_iter().partition(|c| {
        c.steps.iter().any(|s| matches!(s, Step::Trickle { .. }))
            || matches!(&c.steps[..], [Step::Send(b)] if *b == PROTOCOL.preamble())
    });
    for c in &fast {
        check(&addr, c);
    }
    std::thread::scope(|s| {
        for c in &slow {
            let addr = &addr;
            s.spawn(move || check(addr, c));
        }
    });
    let grown = rss_kb().saturating_sub(before);
    assert!(grown < 16 << 10, "the cloud grew by {grown} kB under hostile peers");

    let runs: Vec<_> = d
        .devices
        .iter()
        .map(|dev| {
            let mut o = DeviceOptions::new(&dev.id, &addr, inputs(&p, 3_000));
            o.split_files = true;
            o.security = Security::with_secret(secret.clone());
            let (p, d, model) = (p.clone(), d.clone(), model.clone());
            std::thread::spawn(move || device::run(&p, &d, &model, &clasp_apps::registry(), &o))
        })
        .collect();
    for t in runs {
        t.join().unwrap().unwrap();
    }
    let report = running.join().unwrap().unwrap();
    let lines = clasp_apps::profile::generate("taxi-w1", 3_000, SEED).unwrap();
    let expected = reference::expected("taxi-w1", &p, &lines).unwrap();
    let mut results = collected.results();
    results.add_state_dump(report.state.as_deref().unwrap_or_default());
    let got = outcome_of(&p, &results);
    reference::check_order_insensitive("taxi-w1", &p, &expected, &got).unwrap();
}
