//! A measured run watched as an operator would watch it (`--set admin=true`): the job's
//! observatory updated every interval, the admin server up, and `/metrics` and the
//! dashboard's `/api/v1/series` fetched every second from another thread, as Prometheus and an
//! open dashboard would. Comparing a run with and without it measures the overhead.

use crate::BenchError;
use clasp_admin::{Access, AdminServer};
use clasp_core::Pipeline;
use clasp_plan::autoscaler::Mode;
use clasp_runtime::observe::Observatory;
use clasp_runtime::planner::stats::RunSummary;
use clasp_runtime::planner::{Input, Planner, Progress};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What observing a run cost: the time the job's control thread spent updating the
/// observatory, and the time the scrapes took end to end (the server's work included).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WatchCost {
    /// Runs watched.
    pub runs: u64,
    /// Intervals observed.
    pub intervals: u64,
    /// Time in [`Observatory::observe`].
    pub observe: Duration,
    /// Scrapes (one `/metrics` and one `/api/v1/series` each).
    pub scrapes: u64,
    /// Their time, request sent to answer read.
    pub scrape: Duration,
    /// CPU time of the admin server's thread, where the system tells it (Linux).
    pub server_cpu: Option<Duration>,
}

impl WatchCost {
    /// Adds another run's cost.
    pub fn add(&mut self, o: &Self) {
        self.intervals += o.intervals;
        self.observe += o.observe;
        self.scrapes += o.scrapes;
        self.scrape += o.scrape;
        // Known only if known for every run.
        self.server_cpu = match (self.runs, self.server_cpu, o.server_cpu) {
            (0, _, b) => b,
            (_, Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
        self.runs += o.runs;
    }

    /// A report line: the cost over `wall` of runs.
    pub fn line(&self, wall: Duration) -> String {
        let share = |d: Duration| d.as_secs_f64() / wall.as_secs_f64().max(1e-9) * 1e2;
        let busy = self.observe + self.scrape;
        let server = self.server_cpu.map_or_else(
            || "; the server thread's CPU time is not available here".to_owned(),
            |cpu| {
                format!(
                    "; CPU of the observatory updates and the server's thread {:.2} ms: {:.3} %",
                    (self.observe + cpu).as_secs_f64() * 1e3,
                    share(self.observe + cpu)
                )
            },
        );
        format!(
            "observing cost {:.2} ms over {} intervals and {:.2} ms over {} scrapes (wall, request to last byte): {:.3} % of the {:.1} s of runs on one core{server}",
            self.observe.as_secs_f64() * 1e3,
            self.intervals,
            self.scrape.as_secs_f64() * 1e3,
            self.scrapes,
            share(busy),
            wall.as_secs_f64()
        )
    }
}

/// The watchers of one run.
#[derive(Debug)]
pub struct Watch {
    observatory: Arc<Observatory>,
    server: AdminServer,
    stop: Arc<AtomicBool>,
    scraper: JoinHandle<Result<(u64, Duration), std::io::Error>>,
    intervals: AtomicU64,
    observe_ns: AtomicU64,
}

fn fetch(addr: SocketAddr, path: &str) -> Result<usize, std::io::Error> {
    let mut s = TcpStream::connect(addr)?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n")?;
    let mut body = Vec::new();
    s.read_to_end(&mut body)?;
    Ok(body.len())
}

impl Watch {
    /// Starts the admin server for a run of `p` and the thread that scrapes it.
    pub fn start(p: &Pipeline) -> Result<Self, BenchError> {
        let observatory = Arc::new(Observatory::new(p, "static", Mode::Act));
        let server = AdminServer::start("127.0.0.1:0", observatory.clone(), Access::Loopback)?;
        let addr = server.addr();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let scraper = std::thread::spawn(move || {
            let (mut scrapes, mut spent) = (0, Duration::ZERO);
            while !stopping.load(Ordering::Acquire) {
                let started = Instant::now();
                fetch(addr, "/metrics")?;
                fetch(addr, "/api/v1/series")?;
                spent += started.elapsed();
                scrapes += 1;
                std::thread::sleep(Duration::from_secs(1));
            }
            Ok((scrapes, spent))
        });
        Ok(Self {
            observatory,
            server,
            stop,
            scraper,
            intervals: AtomicU64::new(0),
            observe_ns: AtomicU64::new(0),
        })
    }

    /// After an interval: the planner shown to the observatory.
    pub fn observe(&self, planner: &Planner, progress: &Progress) {
        let started = Instant::now();
        self.observatory.observe(planner, Some(progress), None);
        let ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.observe_ns.fetch_add(ns, Ordering::Relaxed);
        self.intervals.fetch_add(1, Ordering::Relaxed);
    }

    /// Stops the scraper and the server; returns what observing cost.
    pub fn finish(self) -> Result<WatchCost, BenchError> {
        self.stop.store(true, Ordering::Release);
        let (scrapes, scrape) = self
            .scraper
            .join()
            .map_err(|_| BenchError::Run("the scraper panicked".into()))?
            .map_err(BenchError::Scrape)?;
        // Read while the server's thread is alive: one thread of that name at a time.
        let server_cpu = thread_cpu(clasp_admin::THREAD_NAME);
        self.server.stop()?;
        Ok(WatchCost {
            runs: 1,
            intervals: self.intervals.load(Ordering::Relaxed),
            observe: Duration::from_nanos(self.observe_ns.load(Ordering::Relaxed)),
            scrapes,
            scrape,
            server_cpu,
        })
    }
}

/// CPU time of this process's thread named `name`, from the scheduler's statistics
/// (`/proc/self/task/TID/schedstat`: nanoseconds on a CPU first); `None` where there are none
/// or no such thread runs.
fn thread_cpu(name: &str) -> Option<Duration> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    tasks.filter_map(Result::ok).find_map(|task| {
        let comm = std::fs::read_to_string(task.path().join("comm")).ok()?;
        if comm.trim_end() != name {
            return None;
        }
        let stat = std::fs::read_to_string(task.path().join("schedstat")).ok()?;
        let ns: u64 = stat.split_whitespace().next()?.parse().ok()?;
        Some(Duration::from_nanos(ns))
    })
}

/// Runs `input` on `planner` to its end; with `admin`, watched as above and its cost added to
/// `cost`.
pub fn run_watched(
    planner: &mut Planner,
    p: &Pipeline,
    input: Input,
    admin: bool,
    cost: &mut WatchCost,
) -> Result<RunSummary, BenchError> {
    let watch = admin.then(|| Watch::start(p)).transpose()?;
    let summary = planner
        .run(
            vec![input],
            None,
            |_| {},
            |planner, progress| {
                if let Some(w) = &watch {
                    w.observe(planner, progress);
                }
                Ok(())
            },
        )
        .map_err(|e| BenchError::Run(e.to_string()))?;
    if let Some(w) = watch {
        cost.add(&w.finish()?);
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::resource::{UsageWho, getrusage};
    use std::sync::mpsc;

    /// The calling thread's CPU time as getrusage gives it.
    fn own_cpu() -> Duration {
        let u = getrusage(UsageWho::RUSAGE_THREAD).unwrap();
        let us = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 * 1e6 + t.tv_usec() as f64;
        Duration::from_secs_f64((us(u.user_time()) + us(u.system_time())) / 1e6)
    }

    #[test]
    fn a_threads_cpu_time_agrees_with_getrusage() {
        if std::fs::read_dir("/proc/self/task").is_err() {
            return;
        }
        let (spun_tx, spun) = mpsc::channel();
        let (resume, resumed) = mpsc::channel::<()>();
        let probe = std::thread::Builder::new()
            .name("cpu-probe".into())
            .spawn(move || {
                // Spin until the thread has used 50 ms of CPU, by its own account.
                let mut x = 1u64;
                while own_cpu() < Duration::from_millis(50) {
                    for i in 0..10_000u64 {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(i),
                        );
                    }
                }
                let before = own_cpu();
                spun_tx.send(before).unwrap();
                resumed.recv().unwrap();
                (before, own_cpu())
            })
            .unwrap();
        let before_read = spun.recv().unwrap();
        let read = thread_cpu("cpu-probe").expect("the probe thread is found");
        resume.send(()).unwrap();
        let (before, after) = probe.join().unwrap();
        assert_eq!(before, before_read);
        // getrusage counts in microseconds and the scheduler in nanoseconds; the thread waits
        // between the two readings, so they differ by little more than the rounding.
        let slack = Duration::from_millis(2);
        assert!(
            read + slack >= before && read <= after + slack,
            "{before:?} <= {read:?} <= {after:?}"
        );
        assert_eq!(thread_cpu("no-such-thread"), None);
    }
}
