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
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// The watchers of one run.
#[derive(Debug)]
pub struct Watch {
    observatory: Arc<Observatory>,
    server: AdminServer,
    stop: Arc<AtomicBool>,
    scraper: JoinHandle<Result<u64, std::io::Error>>,
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
        let server = AdminServer::start("127.0.0.1:0", observatory.clone())
            .map_err(|e| BenchError::Run(format!("{e}")))?;
        let addr = server.addr();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let scraper = std::thread::spawn(move || {
            let mut scrapes = 0;
            while !stopping.load(Ordering::Acquire) {
                fetch(addr, "/metrics")?;
                fetch(addr, "/api/v1/series")?;
                scrapes += 1;
                std::thread::sleep(Duration::from_secs(1));
            }
            Ok(scrapes)
        });
        Ok(Self { observatory, server, stop, scraper })
    }

    /// After an interval: the planner shown to the observatory.
    pub fn observe(&self, planner: &Planner, progress: &Progress) {
        self.observatory.observe(planner, Some(progress), None);
    }

    /// Stops the scraper and the server; returns how many scrapes were made.
    pub fn finish(self) -> Result<u64, BenchError> {
        self.stop.store(true, Ordering::Release);
        let scrapes = self
            .scraper
            .join()
            .map_err(|_| BenchError::Run("the scraper panicked".into()))?
            .map_err(|e| BenchError::Run(format!("scraping the admin server: {e}")))?;
        self.server.stop().map_err(|e| BenchError::Run(format!("{e}")))?;
        Ok(scrapes)
    }
}
