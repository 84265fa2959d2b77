//! Helpers of the admin server's tests: a real job on an embedded cluster, HTTP over a plain
//! socket, and the external tools (promtool, chromium) with their skip rules.

#![allow(dead_code)]

use clasp_admin::{Access, AdminServer};
use clasp_core::{Pipeline, SourceId};
use clasp_plan::PlanConfig;
use clasp_plan::Policy;
use clasp_plan::autoscaler::CheckpointEvery;
use clasp_plan::autoscaler::{AutoscalerConfig, Mode};
use clasp_plan::estimator::EstimatorConfig;
use clasp_runtime::cluster::Launch;
use clasp_runtime::fault::FaultTolerance;
use clasp_runtime::job::{self, Job, JobOutput, RescaleAt};
use clasp_runtime::observe::Observatory;
use clasp_runtime::planner::{DiscardSink, Input, PlannerConfig};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The cluster secret of the tests' servers.
pub fn secret() -> &'static clasp_wire::Secret {
    static S: OnceLock<clasp_wire::Secret> = OnceLock::new();
    S.get_or_init(|| clasp_wire::Secret::parse(&"admin-test-secret-".repeat(3), "test").unwrap())
}

/// Its admin token, which every request of [`get`] and [`request`] carries.
pub fn token() -> String {
    clasp_wire::auth::admin_token(secret())
}

/// A pipeline of the repository.
pub fn pipeline(name: &str) -> Pipeline {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../pipelines").join(name);
    clasp_core::spec::load(&path).unwrap()
}

/// A pipeline of `n` no-op operators: a head of two, four branches, a tail of two.
pub fn wide_pipeline(n: usize) -> Pipeline {
    assert!(n >= 8 && (n - 4).is_multiple_of(4), "2 + 4 branches + 2 operators");
    let per_branch = (n - 4) / 4;
    let mut spec = String::from(
        "[pipeline]\nname = \"wide\"\ndescription = \"no-op operators in four branches\"\n\n[[source]]\nname = \"input\"\n\n[[sink]]\nname = \"out\"\n",
    );
    let mut names = vec!["head1".to_string(), "head2".to_string()];
    for b in 1..=4 {
        for i in 1..=per_branch {
            names.push(format!("b{b}s{i}"));
        }
    }
    names.extend(["tail1".to_string(), "tail2".to_string()]);
    for name in &names {
        spec += &format!(
            "\n[[operator]]\nname = \"{name}\"\nkind = \"map\"\nfunction = \"syn.noop\"\n"
        );
    }
    let mut stream =
        |from: &str, to: &str| spec += &format!("\n[[stream]]\nfrom = \"{from}\"\nto = \"{to}\"\n");
    stream("input", "head1");
    stream("head1", "head2");
    for b in 1..=4 {
        stream("head2", &format!("b{b}s1"));
        for i in 1..per_branch {
            stream(&format!("b{b}s{i}"), &format!("b{b}s{}", i + 1));
        }
        stream(&format!("b{b}s{per_branch}"), "tail1");
    }
    stream("tail1", "tail2");
    stream("tail2", "out");
    clasp_core::spec::parse(&spec, "wide.toml").unwrap()
}

/// An elastic job: `workers` at the start, rescaled at the given input counts, `records`
/// generated records in requests of `batch`, paced at `rate` requests/s.
pub struct Run {
    pub pipeline: Pipeline,
    pub workers: u32,
    pub rescales: Vec<RescaleAt>,
    pub records: u64,
    pub batch: u32,
    pub rate: f64,
    pub policy: Policy,
    pub mode: Mode,
    /// Checkpoints every so many input requests into a scratch directory (`None`: none).
    pub checkpoint_every: Option<u64>,
}

impl Run {
    /// The job and its input.
    pub fn job(&self) -> (Job, Vec<Input>) {
        let slots = 2;
        let mut planner = PlannerConfig { batch_size: self.batch, ..PlannerConfig::default() };
        planner.settings.batch_size = self.batch;
        planner.settings.interval_ms = 200;
        let scaling = AutoscalerConfig {
            policy: self.policy,
            triggers: clasp_plan::triggers::TriggerConfig {
                warmup_s: 1.0,
                ..clasp_plan::triggers::TriggerConfig::default()
            },
            plan: PlanConfig {
                slots_per_worker: slots,
                max_workers: 10,
                // As `clasp run` starts it: this runtime's order of magnitude.
                estimator: EstimatorConfig {
                    local_scale: 0.2,
                    remote_scale: 1.0,
                    destinations_scale: 100.0,
                    load_scale: f64::from(slots) * 1e6,
                    initial_capacity: f64::from(slots) * 1e6,
                    min_remote_rate: 0.0,
                    ..EstimatorConfig::default()
                },
                ..PlanConfig::default()
            },
            batch_size: self.batch,
            mode: self.mode,
            ..AutoscalerConfig::default()
        };
        let job = Job {
            pipeline: self.pipeline.clone(),
            workers: self.workers,
            slots,
            planner,
            launch: Launch::Threads(clasp_apps::registry()),
            placement: None,
            scaling,
            duration: None,
            initial_rate: self.rate,
            rescales: self.rescales.clone(),
            fault: self.fault(),
        };
        let def = clasp_apps::inputs::source(&self.pipeline.name, None)
            .or_else(|_| clasp_apps::inputs::source("wc", None))
            .unwrap();
        let rate = self.rate;
        let records = self.records;
        // Seeded, so checkpoints can replay it from any position.
        let reopen = Box::new(move || Ok(def.generator(records, 7)));
        let input = Input {
            source: SourceId(0),
            reader: Box::new(clasp_core::source::Replayable::new(reopen, None).unwrap()),
            rate: Box::new(move |_| Some(rate)),
        };
        (job, vec![input])
    }

    /// Checkpoints as [`Run::checkpoint_every`] asks, into a directory of its own.
    fn fault(&self) -> FaultTolerance {
        let Some(n) = self.checkpoint_every else { return FaultTolerance::default() };
        let dir = std::env::temp_dir().join(format!(
            "clasp-admin-checkpoints-{}-{}",
            std::process::id(),
            self.records
        ));
        let _ = std::fs::remove_dir_all(&dir);
        FaultTolerance {
            checkpoint: Some(CheckpointEvery::Requests(n)),
            store: dir.display().to_string(),
            ..FaultTolerance::default()
        }
    }

    /// Runs the job with an admin server, calling `during` with the server's address, the
    /// interval's number and the workers in the placement once per interval from the job's own
    /// thread. Returns the output and the server (still serving).
    pub fn run(
        &self,
        mut during: impl FnMut(SocketAddr, u64, u32),
    ) -> (JobOutput, AdminServer, Arc<Observatory>) {
        let (job, inputs) = self.job();
        let obs = Arc::new(Observatory::new(&job.pipeline, self.policy.name(), self.mode));
        let server =
            AdminServer::start("127.0.0.1:0", obs.clone(), Access::Token(secret().clone()))
                .unwrap();
        let addr = server.addr();
        let mut intervals = 0;
        let out = job::run_observed(
            job,
            inputs,
            Box::new(DiscardSink),
            None,
            |p| {
                intervals += 1;
                during(addr, intervals, p.workers);
            },
            |_| {},
            Some(&obs),
        )
        .unwrap();
        (out, server, obs)
    }
}

/// `GET path` over HTTP/1.1 (connection closed after), with the admin token: the status and
/// the body.
pub fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    request(addr, "GET", path)
}

/// One request with the admin token.
pub fn request(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let auth = format!("Bearer {}", token());
    let r = exchange(addr, method, path, &[("Authorization", &auth)]);
    (r.status, r.body)
}

/// An HTTP answer.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    /// The header lines, names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: String,
    /// The client's own address, as the server saw it.
    pub local: SocketAddr,
}

impl Answer {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// One request with the given headers and no others but `Host` and `Connection: close`.
pub fn exchange(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut s = TcpStream::connect(addr).unwrap();
    let local = s.local_addr().unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head += &format!("{name}: {value}\r\n");
    }
    write!(s, "{head}\r\n").unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let chunked = headers.iter().any(|(n, v)| n == "transfer-encoding" && v == "chunked");
    let body = if chunked { dechunk(body) } else { body.to_string() };
    Answer { status, headers, body, local }
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap();
        if n == 0 {
            break;
        }
        out += &rest[..n];
        body = &rest[n + 2..];
    }
    out
}

/// The value of sample `name` (with exactly `labels`, e.g. `{worker="0"}`, or "") in an exposition.
pub fn sample(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(name_and_labels)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Every sample of family `name`, labels included.
pub fn samples<'a>(text: &'a str, name: &'a str) -> impl Iterator<Item = (&'a str, f64)> + 'a {
    text.lines().filter(|l| !l.starts_with('#')).filter_map(move |l| {
        let (series, value) = l.rsplit_once(' ')?;
        let rest = series.strip_prefix(name)?;
        (rest.is_empty() || rest.starts_with('{')).then(|| (series, value.parse().unwrap()))
    })
}

/// An external tool: its path, or `None` when it is absent and `require` is unset (the test
/// then says it skipped). Panics when it is absent and `require` is set.
pub fn tool(candidates: &[&str], require: &str, package: &str) -> Option<PathBuf> {
    let found = candidates.iter().find_map(|c| {
        std::env::var_os("PATH")?
            .to_str()?
            .split(':')
            .map(|d| Path::new(d).join(c))
            .find(|p| p.is_file())
    });
    match (found, std::env::var_os(require).is_some_and(|v| !v.is_empty() && v != "0")) {
        (Some(p), _) => Some(p),
        (None, true) => panic!(
            "{} not found and {require} is set: install Debian's `{package}` (scripts/setup.sh)",
            candidates.join(" or ")
        ),
        (None, false) => {
            eprintln!(
                "SKIPPED: {} not found (install Debian's `{package}`, scripts/setup.sh; set {require}=1 to make this a failure)",
                candidates.join(" or ")
            );
            None
        }
    }
}
