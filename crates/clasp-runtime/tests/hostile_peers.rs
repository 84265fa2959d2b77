//! Hostile peers against a live cluster's planner and worker: strangers, peers without or with
//! a wrong secret, replayed handshakes, peers that prove the secret and then send ids, epochs
//! and lengths no live peer would, or speak for another worker, and slow senders. Each is
//! refused and logged (a log line names its address), no node panics or grows by more than a
//! few MB, and a real run on the same cluster afterwards is exact.

mod common;

use clasp_core::report::WorkerReport;
use clasp_core::{Batch, OperatorId, SinkId, SourceId, WorkerId};
use clasp_runtime::planner::{DiscardSink, Planner, PlannerConfig, PlannerError};
use clasp_runtime::request::Request;
use clasp_runtime::wire::{
    self, Cut, FrameReader, Hello, Limits, MAX_WORKERS, Message, MigrationData, MigrationDone,
    PROTOCOL, Role, StateGroup,
};
use clasp_wire::testing::hostile::{self, Case, Step, frame};
use clasp_wire::{Secret, Security};
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// Everything the nodes of this test binary log.
fn log() -> &'static Mutex<Vec<u8>> {
    static LOG: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let make = || Capture;
        tracing_subscriber::fmt().with_writer(make).with_ansi(false).init();
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

fn logged_about(addr: &str) -> bool {
    let text = clasp_core::sync::lock(log());
    String::from_utf8_lossy(&text).lines().any(|l| l.contains(addr))
}

/// Resident memory of this process (kB).
fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn hello(worker: Option<WorkerId>) -> Message {
    Message::Hello(Hello {
        role: Role::Worker,
        worker,
        slots: 1,
        listen: "127.0.0.1:9".into(),
        pid: 0,
    })
}

/// Proves `worker:N` with `secret`, introduces itself as `claims`, then sends `frames`.
fn joined(secret: &Secret, proves: u32, claims: Option<u32>, frames: Vec<Vec<u8>>) -> Vec<Step> {
    let mut steps = vec![
        Step::Handshake { identity: format!("worker:{proves}"), secret: Some(secret.clone()) },
        Step::Send(frame(&hello(claims.map(WorkerId)))),
    ];
    steps.extend(frames.into_iter().map(Step::Send));
    steps
}

fn report(worker: u32, epoch: u64, ops: usize, edges: usize) -> Vec<u8> {
    frame(&Message::Report(Box::new(WorkerReport {
        worker: WorkerId(worker),
        epoch,
        ops: vec![Default::default(); ops],
        edges: vec![0; edges],
        ..WorkerReport::default()
    })))
}

fn done(worker: u32) -> Vec<u8> {
    frame(&Message::MigrationDone(MigrationDone { worker: WorkerId(worker), ..Default::default() }))
}

fn request(op: u32, port: u16, epoch: u64) -> Vec<u8> {
    frame(&Message::Request(Request::new(OperatorId(op), port, 0, epoch, Batch::new())))
}

fn data(from: u32, op: u32, group: u32) -> Vec<u8> {
    let group = StateGroup {
        op: OperatorId(op),
        group: clasp_core::KeyGroup(group),
        keys: 0,
        bytes: vec![],
    };
    frame(&Message::MigrationData(Box::new(MigrationData {
        epoch: 0,
        from: WorkerId(from),
        groups: vec![group],
        requests: vec![],
    })))
}

/// Runs `cases` against `addr`, the slow ones all at once; every one must end with the
/// connection closed by the node and a log line naming the case's address.
fn refuse_all(addr: &str, cases: Vec<Case>) {
    let (slow, fast): (Vec<Case>, Vec<Case>) = cases.into_iter().partition(|c| {
        c.steps.iter().any(|s| matches!(s, Step::Trickle { .. }))
            || matches!(&c.steps[..], [Step::Send(b)] if *b == PROTOCOL.preamble())
    });
    let check = |case: &Case| {
        let out = hostile::run(addr, &PROTOCOL, case, Duration::from_secs(60)).unwrap();
        if !out.closed {
            let text = String::from_utf8_lossy(&clasp_core::sync::lock(log())).into_owned();
            let tail: Vec<&str> = text.lines().rev().take(8).collect();
            panic!("{}: the node kept the connection open; last log lines {tail:#?}", case.name);
        }
        let me = out.local.to_string();
        // The log line may follow the close by a moment.
        for _ in 0..200 {
            if logged_about(&me) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("{}: no log line names {me}", case.name);
    };
    for c in &fast {
        check(c);
    }
    std::thread::scope(|s| {
        for c in &slow {
            s.spawn(move || check(c));
        }
    });
}

#[test]
fn hostile_peers_are_refused_and_logged_and_the_cluster_still_runs_exactly() {
    log();
    let p = common::pipeline("wc.toml");
    let mut c = common::start(&p, 2, 16, common::threads());
    let secret = c.planner.security().secret.clone().expect("an embedded cluster makes a secret");
    let planner = c.planner.addr().to_string();
    let worker = c.planner.worker_addr(WorkerId(1)).unwrap();
    let (ops, sinks) = (p.operators.len() as u32, p.sinks.len() as u32);
    let before = rss_kb();

    // The planner: every case before the secret is proven, then joiners that misbehave.
    let captured = hostile::capture(&planner, &PROTOCOL, "worker:300", &secret);
    let mut cases =
        hostile::unauthenticated(&PROTOCOL, "worker", "device:edge-1", &secret, &captured);
    let s = &secret;
    let bad = |n: &str, steps| Case::new(n, steps);
    cases.extend([
        bad(
            "an identity beyond the worker maximum",
            vec![Step::Handshake {
                identity: format!("worker:{}", u32::MAX),
                secret: Some(s.clone()),
            }],
        ),
        bad("a hello asking for worker 4294967295", joined(s, 0, Some(u32::MAX), vec![])),
        bad("a hello naming another worker than proven", joined(s, 101, Some(102), vec![])),
        bad(
            "credits instead of a hello",
            vec![
                Step::Handshake { identity: "worker:103".into(), secret: Some(s.clone()) },
                Step::Send(frame(&Message::Credits(vec![]))),
            ],
        ),
        bad(
            "a sink that does not exist",
            joined(
                s,
                104,
                Some(104),
                vec![frame(&Message::Sink {
                    sink: SinkId(sinks + 7),
                    cut: Cut(0),
                    batch: Batch::new(),
                })],
            ),
        ),
        bad("a report for another worker", joined(s, 105, Some(105), vec![report(1, 0, 2, 2)])),
        bad(
            "a report from epoch 2^60",
            joined(s, 106, Some(106), vec![report(106, 1 << 60, 2, 2)]),
        ),
        bad("a report of 9 operators", joined(s, 107, Some(107), vec![report(107, 0, 9, 2)])),
        bad("a migration done for another worker", joined(s, 108, Some(108), vec![done(0)])),
        bad(
            "a request for an unknown operator",
            joined(s, 109, Some(109), vec![request(ops, 0, 0)]),
        ),
        bad(
            "state lines of an unknown operator",
            joined(
                s,
                110,
                Some(110),
                vec![frame(&Message::StateLines { operator: OperatorId(ops + 1), lines: vec![] })],
            ),
        ),
        bad(
            "a mesh naming worker 10,000,000",
            joined(s, 111, Some(111), vec![frame(&Message::MeshReady(vec![WorkerId(10_000_000)]))]),
        ),
        bad(
            "64 MiB announced after joining",
            joined(s, 112, Some(112), vec![(65u32 << 20).to_le_bytes().to_vec()]),
        ),
        bad("a frame cut short after joining", {
            let mut steps = joined(s, 113, Some(113), vec![report(113, 0, 2, 2)[..9].to_vec()]);
            steps.push(Step::End);
            steps
        }),
    ]);
    assert!(cases.len() >= 30, "{} cases", cases.len());
    refuse_all(&planner, cases);

    // A worker's peer port.
    let captured = hostile::capture(&worker, &PROTOCOL, "worker:301", &secret);
    let mut cases = hostile::unauthenticated(&PROTOCOL, "worker:7", "planner", &secret, &captured);
    cases.extend([
        bad("a peer without a worker id", joined(s, 0, None, vec![])),
        bad("a peer that names another worker than proven", joined(s, 20, Some(21), vec![])),
        bad("a peer claiming the worker's own id", joined(s, 1, Some(1), vec![])),
        bad("a request for an unknown operator", joined(s, 22, Some(22), vec![request(ops, 0, 0)])),
        bad("a request for an unknown port", joined(s, 23, Some(23), vec![request(0, 9, 0)])),
        bad("a request from epoch 2^64-1", joined(s, 24, Some(24), vec![request(0, 0, u64::MAX)])),
        bad("migration data from another worker", joined(s, 25, Some(25), vec![data(0, 1, 0)])),
        bad(
            "migration data for an unknown key group",
            joined(s, 26, Some(26), vec![data(26, 1, u32::MAX)]),
        ),
        bad(
            "an undecodable frame after joining",
            joined(s, 27, Some(27), vec![vec![3, 0, 0, 0, 0xff, 0xff, 0xff]]),
        ),
    ]);
    refuse_all(&worker, cases);

    let grown = rss_kb().saturating_sub(before);
    assert!(grown < 16 << 10, "the nodes grew by {grown} kB under hostile peers");

    // The cluster is whole: a run on it counts every word.
    let text = Arc::new(common::corpus(3, 2_000));
    let input = vec![common::unthrottled(&text, SourceId(0))];
    let summary = c.planner.run(input, None, |_| {}, |_, _| Ok(())).unwrap();
    assert_eq!(summary.completed, summary.input_requests);
    let mut dump = Vec::new();
    c.planner.dump_state(&mut dump).unwrap();
    let want = common::reference_word_count(&text);
    assert_eq!(common::counts(&dump), want);
    c.shutdown().unwrap();
}

/// Joins `planner` as a worker asking for `id`, proving the planner's own secret.
fn join(planner: &Planner, id: Option<WorkerId>) -> (clasp_wire::Conn, Option<Message>) {
    let addr = planner.addr().to_string();
    let h =
        Hello { role: Role::Worker, worker: id, slots: 1, listen: "127.0.0.1:9".into(), pid: 0 };
    let (conn, mut r): (_, FrameReader) =
        clasp_runtime::net::connect(&addr, &h, planner.security(), wire::PLANNER_IDENTITY, 1 << 20)
            .unwrap();
    let first = r.read_message(&mut &conn, &Limits::handshake()).unwrap();
    (conn, first)
}

fn keyed_planner() -> Planner {
    let p = common::pipeline("wc.toml");
    let config = PlannerConfig {
        security: Security::with_secret(Secret::generate().unwrap()),
        ..PlannerConfig::default()
    };
    Planner::start(p, config, Box::new(DiscardSink)).unwrap()
}

#[test]
fn the_largest_worker_id_is_admitted() {
    let planner = keyed_planner();
    let last = WorkerId(MAX_WORKERS - 1);
    let (_s, first) = join(&planner, Some(last));
    assert!(matches!(first, Some(Message::Welcome(w)) if w.worker == last));
    assert_eq!(planner.workers(), [last]);
}

#[test]
fn a_sink_message_naming_an_unknown_sink_from_a_worker_with_work_ends_the_run_naming_it() {
    let mut planner = keyed_planner();
    let (s, first) = join(&planner, None);
    assert!(matches!(first, Some(Message::Welcome(w)) if w.worker == WorkerId(0)));
    planner.wait_for_workers(1, Duration::from_secs(30)).unwrap();
    let sinks = planner.pipeline().sinks.len() as u32;
    let bad = sinks + 98;
    let mut batch = Batch::new();
    batch.push(b"k", b"v");
    (&s).write_all(&frame(&Message::Sink { sink: SinkId(bad), cut: Cut(0), batch })).unwrap();
    let err = planner.run(Vec::new(), None, |_| {}, |_, _| Ok(())).unwrap_err();
    match &err {
        PlannerError::WorkerLost { worker: WorkerId(0), reason, .. } => {
            assert!(reason.contains(&format!("Sink.sink is {bad}, outside 0..{sinks}")), "{err}");
        }
        other => panic!("{other}"),
    }
}
