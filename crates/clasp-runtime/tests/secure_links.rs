//! The planner's and workers' links under the cluster secret, with and without TLS: a client
//! without the secret, with a wrong one, or replaying a captured handshake is refused on the
//! worker→planner and worker↔worker links; a peer that proved one worker id cannot send as
//! another; and the cluster's run is exact afterwards.

mod common;

use clasp_core::report::WorkerReport;
use clasp_core::{SourceId, WorkerId};
use clasp_runtime::cluster::{Cluster, contiguous_keys, spread};
use clasp_runtime::planner::DiscardSink;
use clasp_runtime::routing::RoutingPlan;
use clasp_runtime::wire::{
    self, FrameReader, Hello, Message, MigrationData, PLANNER_IDENTITY, PROTOCOL, Role,
};
use clasp_wire::testing::TestCa;
use clasp_wire::testing::hostile::{self, Case, Step, frame};
use clasp_wire::{Conn, Secret, Security, Tls, WireError};
use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

fn hello(w: u32) -> Hello {
    Hello {
        role: Role::Worker,
        worker: Some(WorkerId(w)),
        slots: 1,
        listen: "127.0.0.1:9".into(),
        pid: 0,
    }
}

fn connect(
    addr: &str,
    w: u32,
    sec: &Security,
    expect: &str,
) -> Result<(Conn, FrameReader), WireError> {
    clasp_runtime::net::connect(addr, &hello(w), sec, expect, 1 << 20)
}

/// Whether the peer closes `conn` (rather than the read giving up after a minute).
fn closed(conn: &Conn) -> bool {
    conn.set_timeouts(Some(Duration::from_secs(60))).unwrap();
    let mut rest = Vec::new();
    let mut r = conn;
    match r.read_to_end(&mut rest) {
        Ok(_) => true,
        Err(e) => {
            !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)
        }
    }
}

fn secured_cluster(security: Security, tls_of: impl Fn(&str) -> Option<Tls>) {
    let p = common::pipeline("wc.toml");
    let config = clasp_runtime::planner::PlannerConfig { security, ..common::config(16) };
    let secret = config.security.secret.clone().unwrap();
    let mut c =
        Cluster::start(p.clone(), config, Box::new(DiscardSink), common::threads(), 2, 4).unwrap();
    let placement = spread(&p, 2, 4);
    let keys = contiguous_keys(&p, &placement, 64);
    c.planner.install(RoutingPlan { epoch: 1, placement, keys }).unwrap();
    let planner = c.planner.addr().to_string();
    let worker = c.planner.worker_addr(WorkerId(1)).unwrap();
    let tls = tls_of("attacker");
    let with = |secret: Option<Secret>| Security { secret, tls: tls.clone() };
    for (addr, expect) in [
        (&planner, PLANNER_IDENTITY.to_owned()),
        (&worker, wire::worker_identity(Some(WorkerId(1)))),
    ] {
        let none = connect(addr, 9, &with(None), &expect).unwrap_err().to_string();
        assert!(none.contains("requires the cluster secret"), "{addr}: {none}");
        let wrong = connect(addr, 9, &with(Some(Secret::generate().unwrap())), &expect);
        assert!(wrong.unwrap_err().to_string().contains("could not prove itself"), "{addr}");
        if tls.is_none() {
            let captured = hostile::capture(addr, &PROTOCOL, "worker:9", &secret);
            let mut replay = captured.clone();
            replay.extend(frame(&Message::Hello(hello(9))));
            let case = Case::new("replay", vec![Step::Send(replay)]);
            let out = hostile::run(addr, &PROTOCOL, &case, Duration::from_secs(60)).unwrap();
            assert!(out.closed, "{addr}: a replayed handshake was kept");
        }
    }
    assert_eq!(c.planner.workers(), [WorkerId(0), WorkerId(1)], "no attacker joined");

    // Proves worker 9 to the planner, then reports as worker 0.
    let (conn, mut r) =
        connect(&planner, 9, &with(Some(secret.clone())), PLANNER_IDENTITY).unwrap();
    let welcome = r.read_message(&mut &conn, &wire::Limits::handshake()).unwrap();
    assert!(matches!(welcome, Some(Message::Welcome(w)) if w.worker == WorkerId(9)));
    let forged = WorkerReport {
        worker: WorkerId(0),
        ops: vec![Default::default(); p.operators.len()],
        edges: vec![0; p.streams.len()],
        ..WorkerReport::default()
    };
    (&conn).write_all(&frame(&Message::Report(Box::new(forged)))).unwrap();
    assert!(closed(&conn));
    // Proves worker 9 to worker 1, then hands over migration data as worker 0.
    let expect = wire::worker_identity(Some(WorkerId(1)));
    let (conn, _) = connect(&worker, 9, &with(Some(secret.clone())), &expect).unwrap();
    let forged = MigrationData { epoch: 1, from: WorkerId(0), groups: vec![], requests: vec![] };
    (&conn).write_all(&frame(&Message::MigrationData(Box::new(forged)))).unwrap();
    assert!(closed(&conn));

    let text = Arc::new(common::corpus(5, 2_000));
    let input = vec![common::unthrottled(&text, SourceId(0))];
    let summary = c.planner.run(input, None, |_| {}, |_, _| Ok(())).unwrap();
    assert_eq!(summary.completed, summary.input_requests);
    let mut dump = Vec::new();
    c.planner.dump_state(&mut dump).unwrap();
    assert_eq!(common::counts(&dump), common::reference_word_count(&text));
    // The impersonator, dropped, is no member any more.
    assert_eq!(c.planner.workers(), [WorkerId(0), WorkerId(1)]);
    c.shutdown().unwrap();
}

#[test]
fn links_refuse_strangers_and_impersonators_and_the_run_is_exact() {
    secured_cluster(Security::with_secret(Secret::generate().unwrap()), |_| None);
}

#[test]
fn the_same_under_tls() {
    let dir = std::env::temp_dir().join(format!("clasp-runtime-tls-{}", std::process::id()));
    let ca = TestCa::new(&dir);
    let node = Tls::load(&ca.node("node")).unwrap();
    let security = Security { secret: Some(Secret::generate().unwrap()), tls: Some(node) };
    secured_cluster(security, |name| Some(Tls::load(&ca.node(name)).unwrap()));
    std::fs::remove_dir_all(dir).unwrap();
}
