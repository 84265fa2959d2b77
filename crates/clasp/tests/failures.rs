//! Bad peers and lost workers: garbage, a wrong protocol version or an oversized frame on a
//! worker's or the planner's port is refused and the cluster keeps running; a worker killed
//! during a migration makes the planner abort that step with a clear error.

use clasp_core::rng::SeededRng;
use clasp_core::{SourceId, WorkerId};
use clasp_plan::keys::assign_keys;
use clasp_plan::migration::plan_migration;
use clasp_runtime::cluster::{Cluster, Launch, spread};
use clasp_runtime::planner::{DiscardSink, Input, PlannerConfig, PlannerError};
use clasp_runtime::routing::RoutingPlan;
use clasp_runtime::wire::{self, Hello, Message, Role};
use rand::{RngExt, SeedableRng};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

fn pipeline() -> clasp_core::Pipeline {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../pipelines/wc.toml");
    clasp_core::spec::load(&path).unwrap()
}

fn lines(n: usize, seed: u64) -> Arc<Vec<Vec<u8>>> {
    let mut rng = SeededRng::seed_from_u64(seed);
    Arc::new(
        (0..n)
            .map(|_| {
                format!("a{} b{} c", rng.random_range(0..50), rng.random_range(0..50)).into_bytes()
            })
            .collect(),
    )
}

fn input(text: &Arc<Vec<Vec<u8>>>) -> Input {
    Input {
        source: SourceId(0),
        reader: clasp_core::source::from_lines(
            Box::new(clasp_core::input::MemoryLines::new(text.clone(), 0, 1)),
            None,
        ),
        rate: Box::new(|_| None),
    }
}

fn processes() -> Launch {
    Launch::Processes {
        exe: PathBuf::from(env!("CARGO_BIN_EXE_clasp")),
        args: vec!["worker".into()],
    }
}

fn start(workers: u32, launch: Launch) -> Cluster {
    let p = pipeline();
    let mut cfg = PlannerConfig::default();
    cfg.settings.interval_ms = 200;
    let c =
        Cluster::start(p.clone(), cfg, Box::new(DiscardSink), launch, workers as usize, 2).unwrap();
    let placement = spread(&p, workers, 2);
    let keys = assign_keys(&p, &placement, 1024, None);
    c.planner.install(RoutingPlan { epoch: 1, placement, keys }).unwrap();
    c
}

/// Sends `bytes` to `addr` and reads until the peer closes (it must close).
fn poke(addr: &str, bytes: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let _ = s.write_all(bytes);
    let mut back = Vec::new();
    let _ = s.read_to_end(&mut back);
    back
}

fn hello_then(frame_len: u32) -> Vec<u8> {
    let mut b = wire::PROTOCOL.preamble().to_vec();
    let hello = Hello {
        role: Role::Worker,
        worker: Some(WorkerId(7)),
        slots: 1,
        listen: String::new(),
        pid: 0,
    };
    wire::encode(&Message::Hello(hello), &mut b);
    b.extend_from_slice(&frame_len.to_le_bytes());
    b
}

#[test]
fn bad_peers_are_refused_and_the_cluster_keeps_running() {
    let mut c = start(2, processes());
    let worker = c.planner.worker_addr(WorkerId(1)).unwrap();
    let planner = c.planner.addr().to_string();
    for addr in [&worker, &planner] {
        // Not the clasp protocol at all.
        poke(addr, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        // The right magic with another protocol version: refused with a reason.
        let mut v2 = wire::PROTOCOL.preamble().to_vec();
        v2[8..12].copy_from_slice(&99u32.to_le_bytes());
        let back = poke(addr, &v2);
        let refusal = format!("protocol v99, this node v{}", wire::PROTOCOL.version);
        assert!(String::from_utf8_lossy(&back).contains(&refusal), "{addr}");
    }
    // A frame announcing 4 GiB where the proof of the secret belongs: closed without reading
    // (or allocating) it.
    poke(&worker, &hello_then(u32::MAX));
    let text = lines(5_000, 1);
    let summary = c.planner.run(vec![input(&text)], None, |_| {}, |_, _| Ok(())).unwrap();
    assert_eq!(summary.completed, summary.input_requests);
    assert_eq!(summary.operators[0].records, 5_000);
    c.shutdown().unwrap();
}

#[allow(unsafe_code)]
fn kill(pid: u32, signal: i32) {
    // SAFETY: plain kill(2) on a child process this test started.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

#[test]
fn a_worker_killed_during_a_migration_aborts_it_with_a_clear_error() {
    let p = pipeline();
    let mut c = start(3, processes());
    let text = lines(20_000, 2);
    c.planner.run(vec![input(&text)], None, |_| {}, |_, _| Ok(())).unwrap();
    let victim = c.planner.worker_pid(WorkerId(2)).unwrap();
    // Frozen, it neither sends its migration data nor closes its connections...
    kill(victim, libc::SIGSTOP);
    let old = spread(&p, 3, 2);
    let old_keys = assign_keys(&p, &old, 1024, None);
    let new = spread(&p, 2, 2);
    let new_keys = assign_keys(&p, &new, 1024, Some(&old_keys));
    let plan = plan_migration(&p, &old, &old_keys, &new, &new_keys);
    // ...until it is killed while the others wait for it.
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        kill(victim, libc::SIGKILL);
    });
    let err = c
        .planner
        .migrate(RoutingPlan { epoch: 2, placement: new, keys: new_keys }, &plan)
        .unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(
            err,
            PlannerError::WorkerLost { worker: WorkerId(2), .. } | PlannerError::Migration { .. }
        ),
        "{text}"
    );
    assert!(text.contains("w2") || text.contains("worker 2"), "{text}");
    eprintln!("reported: {text}");
    c.pool.kill_all();
}
