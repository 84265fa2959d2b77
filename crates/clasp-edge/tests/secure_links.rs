//! The link between edge devices and the cloud under the cluster secret, with and without TLS:
//! a device without the secret, with a wrong one, replaying a captured handshake, or proving
//! one device and introducing itself as another is refused; the real devices then run and the
//! cloud's results equal the reference.

mod common;

use clasp_edge::cloud::{Cloud, CloudOptions};
use clasp_edge::device::{self, DeviceOptions};
use clasp_edge::protocol::{self, Outgoing, ToDevice};
use clasp_edge::results::CollectSink;
use clasp_edge::{EdgeError, Mode};
use clasp_plan::edgecut::CostModel;
use clasp_reference as reference;
use clasp_wire::testing::TestCa;
use clasp_wire::testing::hostile::{self, Case, Step};
use clasp_wire::{Deadline, HANDSHAKE_DEADLINE, Opening, Secret, Security, Tls, WireError};
use common::*;
use std::io::Write;
use std::time::Duration;

const COUNT: u64 = 3_000;

fn dial(
    identity: &str,
    addr: &str,
    security: &Security,
) -> Result<clasp_wire::Established, WireError> {
    let opening = Opening {
        security,
        protocol: &protocol::PROTOCOL,
        identity,
        max_frame: protocol::MAX_FRAME,
        deadline: Deadline::after(HANDSHAKE_DEADLINE),
    };
    clasp_wire::link::dial(std::net::TcpStream::connect(addr).unwrap(), addr, &opening, |_| Ok(()))
}

/// Attacks the cloud at `addr`, which holds `secret`; `tls` makes each attacker's TLS (an
/// attacker of the cluster's own CA, so that only the secret stops it).
fn attack(addr: &str, secret: &Secret, tls: Option<Tls>) {
    let with = |secret: Option<Secret>| Security { secret, tls: tls.clone() };
    let refused = |r: Result<clasp_wire::Established, WireError>| match r {
        Err(e) => e.to_string(),
        Ok(_) => panic!("admitted"),
    };
    let no_secret = refused(dial("device:edge-1", addr, &with(None)));
    assert!(no_secret.contains("requires the cluster secret"), "{no_secret}");
    let wrong = refused(dial("device:edge-1", addr, &with(Some(Secret::generate().unwrap()))));
    assert!(wrong.contains("could not prove itself"), "{wrong}");
    // Proves edge-2, then says it is edge-1: refused before anything else is read.
    let ok = dial("device:edge-2", addr, &with(Some(secret.clone()))).unwrap();
    let p = clasp_apps::pipeline("taxi-w1").unwrap();
    let d = devices(&p, "taxi-w1");
    let hello = device::plan(&p, &d, &CostModel::from_spec(&p), Mode::Cut, "edge-1").unwrap().hello;
    (&ok.conn).write_all(&hostile::frame(&Outgoing::Hello(&hello))).unwrap();
    let mut reader = ok.reader;
    let answer = reader.read_message::<ToDevice, _>(&mut &ok.conn, &protocol::Limits::default());
    match answer {
        Ok(Some(ToDevice::Reject(reason))) => {
            assert!(
                reason.contains("names device `edge-1`, the connection proved `device:edge-2`"),
                "{reason}"
            )
        }
        other => panic!("{other:?}"),
    }
    if tls.is_none() {
        // A captured handshake, replayed.
        let captured = hostile::capture(addr, &protocol::PROTOCOL, "device:edge-3", secret);
        let replay = Case::new("replay", vec![Step::Send(captured)]);
        let out =
            hostile::run(addr, &protocol::PROTOCOL, &replay, Duration::from_secs(60)).unwrap();
        assert!(out.closed);
    }
}

fn secured_run(security: Security, tls_of: impl Fn(&str) -> Option<Tls>) {
    logs();
    let p = clasp_apps::pipeline("taxi-w1").unwrap();
    let d = devices(&p, "taxi-w1");
    let model = CostModel::from_spec(&p);
    let secret = security.secret.clone().unwrap();
    let opts = CloudOptions { security, dump_state: true, ..CloudOptions::default() };
    let cloud = Cloud::bind(&p, &d, &model, opts).unwrap();
    let addr = cloud.addr().to_string();
    let sink = CollectSink::default();
    let collected = sink.clone();
    let running = std::thread::spawn(move || cloud.run(&clasp_apps::registry(), Box::new(sink)));
    attack(&addr, &secret, tls_of("attacker"));
    let devices: Vec<_> = d
        .devices
        .iter()
        .map(|dev| {
            let mut o = DeviceOptions::new(&dev.id, &addr, inputs(&p, COUNT));
            o.split_files = true;
            o.security = Security { secret: Some(secret.clone()), tls: tls_of(&dev.id) };
            let (p, d, model) = (p.clone(), d.clone(), model.clone());
            std::thread::spawn(move || device::run(&p, &d, &model, &clasp_apps::registry(), &o))
        })
        .collect();
    for t in devices {
        t.join().unwrap().unwrap_or_else(|e: EdgeError| panic!("{e}"));
    }
    let report = running.join().unwrap().unwrap();
    assert_eq!(report.links.len(), 5);
    let lines = clasp_apps::profile::generate("taxi-w1", COUNT, SEED).unwrap();
    let expected = reference::expected("taxi-w1", &p, &lines).unwrap();
    let mut results = collected.results();
    results.add_state_dump(report.state.as_deref().unwrap_or_default());
    let got = outcome_of(&p, &results);
    reference::check_order_insensitive("taxi-w1", &p, &expected, &got).unwrap();
}

#[test]
fn devices_without_the_secret_or_speaking_for_another_are_refused_and_the_run_is_exact() {
    secured_run(Security::with_secret(Secret::generate().unwrap()), |_| None);
}

#[test]
fn the_same_under_tls() {
    let dir = std::env::temp_dir().join(format!("clasp-edge-tls-{}", std::process::id()));
    let ca = TestCa::new(&dir);
    let cloud_tls = Tls::load(&ca.node("cloud")).unwrap();
    let security = Security { secret: Some(Secret::generate().unwrap()), tls: Some(cloud_tls) };
    secured_run(security, |name| Some(Tls::load(&ca.node(name)).unwrap()));
    std::fs::remove_dir_all(dir).unwrap();
}
