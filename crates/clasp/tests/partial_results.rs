//! Partial results: a run stopped by SIGTERM writes its sink records, its keyed state and its
//! statistics, says they are partial and exits non-zero; what it wrote is the reference's
//! result over the records it got through. A run that fails because a worker is lost writes
//! the state of the workers still alive.

mod common;

use clasp_apps::inputs::{self, SourceLines};
use clasp_reference::{self as reference, Outcome};
use common::{Scratch, root};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

#[allow(unsafe_code)]
fn signal(pid: u32, signal: i32) {
    // SAFETY: plain kill(2) on a process this test started.
    unsafe {
        libc::kill(pid as libc::pid_t, signal);
    }
}

/// `count` generated WC lines, and a file of them in `dir`.
fn wc_input(dir: &Scratch, count: u64) -> (Vec<Vec<u8>>, PathBuf) {
    let mut text = Vec::new();
    inputs::sources_of("wc")[0].write_generated(count, 1, &mut text).unwrap();
    let path = dir.file("input.txt");
    std::fs::write(&path, &text).unwrap();
    let mut lines: Vec<Vec<u8>> = text.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
    lines.pop(); // after the last newline
    (lines, path)
}

/// Starts `clasp run` on WC over `input`, slowly (so it is still running when signalled),
/// writing its outputs into `dir`.
fn start(dir: &Scratch, input: &Path, extra: &[&str]) -> Child {
    let arg = |p: &str| dir.file(p).display().to_string();
    Command::new(env!("CARGO_BIN_EXE_clasp"))
        .arg("run")
        .arg(root().join("pipelines/wc.toml"))
        .args(["--input", &format!("file:{}", input.display())])
        .args(["--rate", "200", "--batch", "8", "--interval-ms", "100"])
        .args(["--output", &arg("output.jsonl"), "--state-dump", &arg("state.jsonl")])
        .args(["--stats", &arg("stats.json")])
        // What a run without fault tolerance keeps (with checkpoints, a lost worker is
        // recovered from instead: tests/recovery.rs).
        .args(["--checkpoint", "none"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Reads standard error until `progress_lines` live progress lines went by, then calls `act`;
/// returns all of standard error once the process closed it.
fn after_progress(child: &mut Child, progress_lines: usize, act: impl FnOnce()) -> String {
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let (mut text, mut seen, mut act) = (String::new(), 0, Some(act));
    let mut line = String::new();
    while err.read_line(&mut line).unwrap() > 0 {
        if line.starts_with('[') && line.contains("req/s") {
            seen += 1;
        }
        text += &line;
        line.clear();
        if seen >= progress_lines
            && let Some(f) = act.take()
        {
            f();
        }
    }
    text
}

fn outcome(dir: &Scratch) -> Outcome {
    let p = clasp_apps::pipeline("wc").unwrap();
    let mut o = Outcome::default();
    for s in &p.sinks {
        o.sinks.entry(s.name.clone()).or_default();
    }
    for line in std::fs::read_to_string(dir.file("output.jsonl")).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let field = |f: &str| v[f].as_str().unwrap().to_owned();
        o.add_sink(&field("sink"), field("key").as_bytes(), field("value").as_bytes());
    }
    for line in std::fs::read_to_string(dir.file("state.jsonl")).unwrap().lines() {
        o.add_state_line(line).unwrap();
    }
    o
}

#[test]
fn a_run_stopped_by_sigterm_writes_its_partial_results() {
    let dir = Scratch::new("partial", "sigterm");
    let (lines, input) = wc_input(&dir, 200_000);
    let mut child = start(&dir, &input, &["--workers", "2"]);
    let pid = child.id();
    let stderr = after_progress(&mut child, 5, || signal(pid, libc::SIGTERM));
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "an interrupted run exits 0:\n{stderr}");
    assert!(stderr.contains("interrupted by a signal"), "{stderr}");
    assert!(stdout.contains("stopped    by a signal (results partial)"), "{stdout}");
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.file("stats.json")).unwrap()).unwrap();
    let s = &stats["summary"];
    assert_eq!(s["interrupted"], true, "{s}");
    assert_eq!(s["abandoned_chains"], 0, "the chains in flight did not finish: {s}");
    // The dispatched requests are a prefix of the input (the queue is first in, first out
    // and the rest of it was dropped), so the records split read are its first lines.
    let processed = s["operators"][0]["records"].as_u64().unwrap() as usize;
    assert!(processed > 0 && processed < lines.len(), "{processed} of {} lines", lines.len());
    let actual = outcome(&dir);
    let written: usize = actual.sinks.values().map(Vec::len).sum();
    assert_eq!(written as u64, s["sink_records"].as_u64().unwrap(), "sink records written");
    let p = clasp_apps::pipeline("wc").unwrap();
    let inputs: Vec<SourceLines> = vec![("lines".to_owned(), lines[..processed].to_vec())];
    let expected = reference::expected("wc", &p, &inputs).unwrap();
    assert!(!expected.state.values().all(|m| m.is_empty()), "the reference counted nothing");
    reference::check_order_insensitive("wc", &p, &expected, &actual).unwrap();
}

/// The pid of worker process `id` of planner `pid` (the child started with `--id <id>`).
fn worker_pid(pid: u32, id: u32) -> u32 {
    let mut children = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap().flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            children.extend(text.split_whitespace().map(|p| p.parse::<u32>().unwrap()));
        }
    }
    let wanted = format!("\0--id\0{id}\0");
    let found: Vec<u32> = children
        .into_iter()
        .filter(|c| {
            std::fs::read(format!("/proc/{c}/cmdline"))
                .is_ok_and(|cmd| String::from_utf8_lossy(&cmd).contains(&wanted))
        })
        .collect();
    assert_eq!(found.len(), 1, "worker {id} of planner {pid}: {found:?}");
    found[0]
}

#[test]
fn a_run_that_loses_a_worker_writes_the_state_of_the_others() {
    let dir = Scratch::new("partial", "lost");
    let (lines, input) = wc_input(&dir, 200_000);
    let mut child = start(&dir, &input, &["--workers", "2", "--processes"]);
    let pid = child.id();
    let stderr = after_progress(&mut child, 5, || signal(worker_pid(pid, 1), libc::SIGKILL));
    let status = child.wait().unwrap();
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains("partial results"), "{stderr}");
    let state = std::fs::read_to_string(dir.file("state.jsonl")).unwrap();
    let kept: Vec<&str> = stderr.lines().filter(|l| l.contains("--state-dump holds")).collect();
    assert_eq!(kept.len(), 1, "{stderr}");
    // One worker of the two survived, and the dump holds its keys only: as many as it says.
    assert!(kept[0].contains("of workers w0 only"), "{}", kept[0]);
    let said: usize = kept[0]
        .split("--state-dump holds ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(state.lines().count(), said, "{stderr}");
    assert!(said > 0, "{stderr}");
    // Each word it counted was counted at most as often as the whole input holds it.
    let p = clasp_apps::pipeline("wc").unwrap();
    let whole = reference::expected("wc", &p, &[("lines".to_owned(), lines)]).unwrap();
    let mut kept = Outcome::default();
    for line in state.lines() {
        kept.add_state_line(line).unwrap();
    }
    for (word, n) in &kept.state["count"] {
        let most = whole.state["count"].get(word).and_then(serde_json::Value::as_u64);
        assert!(
            most.is_some_and(|m| n.as_u64().is_some_and(|n| n >= 1 && n <= m)),
            "{word}: {n} of {most:?}"
        );
    }
    let stats: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.file("stats.json")).unwrap()).unwrap();
    assert!(
        stats["failed"].as_str().is_some_and(|f| f.contains("w1") || f.contains("worker 1")),
        "{}",
        stats["failed"]
    );
}

#[test]
fn a_full_disk_is_reported_when_it_happens() {
    let out = Command::new(env!("CARGO_BIN_EXE_clasp"))
        .arg("run")
        .arg(root().join("pipelines/etl.toml"))
        .args(["--input", "gen:20000", "--quiet", "--output", "/dev/full", "--checkpoint", "none"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    // Logged once, when the first write failed, and named again in the run's error.
    assert_eq!(stderr.matches("writing sink records failed").count(), 1, "{stderr}");
    assert!(stderr.contains("No space left on device"), "{stderr}");
    // With checkpoints, the output must be a file that can hold uncommitted epochs apart.
    let out = Command::new(env!("CARGO_BIN_EXE_clasp"))
        .arg("run")
        .arg(root().join("pipelines/etl.toml"))
        .args(["--input", "gen:200", "--quiet", "--output", "/dev/full"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("/dev/full is not a regular file"), "{stderr}");
}
