//! A measured run watched as an operator would watch it (`--set admin=true`): the job's
//! observatory updated every interval, the admin server up, and `/metrics` and the
//! dashboard's `/api/v1/series` fetched every second from another thread, as Prometheus and an
//! open dashboard would. Comparing a run with and without it measures the overhead.

use crate::BenchError;
use clasp_admin::AdminServer;
use clasp_core::Pipeline;
use clasp_plan::autoscaler::Mode;
use clasp_runtime::observe::Observatory;
use clasp_runtime::planner::{Planner, Progress};
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
    /// Intervals observed.
    pub intervals: u64,
    /// Time in [`Observatory::observe`].
    pub observe: Duration,
    /// Scrapes (one `/metrics` and one `/api/v1/series` each).
    pub scrapes: u64,
    /// Their time, request sent to answer read.
    pub scrape: Duration,
}

impl WatchCost {
    /// Adds another run's cost.
    pub fn add(&mut self, o: &Self) {
        self.intervals += o.intervals;
        self.observe += o.observe;
        self.scrapes += o.scrapes;
        self.scrape += o.scrape;
    }

    /// A report line: the cost over `wall` of runs.
    pub fn line(&self, wall: Duration) -> String {
        let busy = self.observe + self.scrape;
        format!(
            "observing cost {:.2} ms over {} intervals and {:.2} ms over {} scrapes: {:.3} % of the {:.1} s of runs on one core",
            self.observe.as_secs_f64() * 1e3,
            self.intervals,
            self.scrape.as_secs_f64() * 1e3,
            self.scrapes,
            busy.as_secs_f64() / wall.as_secs_f64().max(1e-9) * 1e2,
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
        let server = AdminServer::start("127.0.0.1:0", observatory.clone())?;
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
        self.server.stop()?;
        Ok(WatchCost {
            intervals: self.intervals.load(Ordering::Relaxed),
            observe: Duration::from_nanos(self.observe_ns.load(Ordering::Relaxed)),
            scrapes,
            scrape,
        })
    }
}
