//! Deployments over one code path: workers as threads of this process (still connected to the
//! planner and to each other by loopback TCP), as OS processes on this machine, or joining from
//! other hosts (`clasp worker --join ADDR`).

use crate::planner::{Planner, PlannerConfig, PlannerError, SinkOutput};
use crate::worker::{self, WorkerError, WorkerOptions};
use clasp_core::placement::{KeyAssignment, Placement};
use clasp_core::{Pipeline, Registry, WorkerId};
use clasp_wire::secret::TOKEN_ENV;
use clasp_wire::{Security, Tls};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

/// How workers are started.
#[derive(Clone, Debug)]
pub enum Launch {
    /// As threads of this process, with these operator implementations.
    Threads(Registry),
    /// As processes running `exe <args> --join ADDR --id N`.
    Processes {
        /// The executable (normally this binary).
        exe: PathBuf,
        /// Arguments before `--join` (e.g. `["worker"]`).
        args: Vec<String>,
    },
    /// Started elsewhere: the cluster waits for them to join.
    External,
}

/// Why a cluster could not start or finished badly.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The planner failed.
    #[error(transparent)]
    Planner(#[from] PlannerError),
    /// A worker failed.
    #[error("worker {worker}: {error}")]
    Worker {
        /// The worker.
        worker: WorkerId,
        /// Its error.
        error: String,
    },
    /// No secret could be made for the cluster.
    #[error(transparent)]
    Secret(#[from] clasp_wire::SecretError),
    /// A worker process could not be started.
    #[error("starting worker process {exe}: {error}")]
    Spawn {
        /// The executable.
        exe: String,
        /// Why.
        error: std::io::Error,
    },
}

enum Handle {
    Thread(JoinHandle<Result<(), WorkerError>>),
    Process(Child),
    External,
}

/// Starts and stops worker nodes.
pub struct WorkerPool {
    join: String,
    launch: Launch,
    slots: u32,
    security: Security,
    handles: Vec<(WorkerId, Handle)>,
}

impl std::fmt::Debug for WorkerPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerPool").field("join", &self.join).finish_non_exhaustive()
    }
}

impl WorkerPool {
    /// A pool whose workers join the planner at `join`, each with `slots` executor slots,
    /// proving the secret of `security` (worker processes receive it in their environment,
    /// never on their command line).
    pub fn new(join: String, launch: Launch, slots: u32, security: Security) -> Self {
        Self { join, launch, slots, security, handles: Vec::new() }
    }

    /// Starts worker `id` (it joins the planner asynchronously).
    pub fn start(&mut self, id: WorkerId) -> Result<(), ClusterError> {
        let join = self.join.clone();
        let handle = match &self.launch {
            Launch::Threads(registry) => {
                let registry = registry.clone();
                let opts = WorkerOptions {
                    slots: self.slots,
                    id: Some(id),
                    security: self.security.clone(),
                    ..WorkerOptions::default()
                };
                Handle::Thread(
                    std::thread::Builder::new()
                        .name(format!("worker-{id}"))
                        .spawn(move || worker::run(&join, &registry, &opts))
                        .expect("spawn worker thread"),
                )
            }
            Launch::Processes { exe, args } => {
                let mut cmd = Command::new(exe);
                cmd.args(args).args([
                    "--join",
                    &join,
                    "--id",
                    &id.0.to_string(),
                    "--slots",
                    &self.slots.to_string(),
                ]);
                // The secret goes in the environment: a command line is visible to every user.
                match &self.security.secret {
                    Some(secret) => cmd.env(TOKEN_ENV, secret.expose()),
                    None => cmd.env_remove(TOKEN_ENV).arg("--insecure"),
                };
                if let Some(files) = self.security.tls.as_ref().and_then(Tls::files) {
                    cmd.arg("--tls-cert").arg(&files.cert);
                    cmd.arg("--tls-key").arg(&files.key);
                    cmd.arg("--tls-ca").arg(&files.ca);
                }
                // In a process group of its own, a terminal's Ctrl-C reaches the planner
                // only, which then stops the run and collects the workers' results.
                std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
                let child = cmd.stdin(Stdio::null()).spawn().map_err(|error| {
                    ClusterError::Spawn { exe: exe.display().to_string(), error }
                })?;
                Handle::Process(child)
            }
            Launch::External => Handle::External,
        };
        self.handles.push((id, handle));
        Ok(())
    }

    /// Waits for worker `id` to exit (after the planner told it to stop).
    pub fn stop(&mut self, id: WorkerId) -> Result<(), ClusterError> {
        match self.handles.iter().position(|(w, _)| *w == id) {
            Some(pos) => {
                let (_, h) = self.handles.remove(pos);
                join(id, h)
            }
            None => Ok(()),
        }
    }

    /// Kills worker `id`'s process if it runs (a lost worker may only be stopped) and reaps
    /// it; a thread or an external worker is left alone.
    pub fn kill(&mut self, id: WorkerId) {
        if let Some(pos) = self.handles.iter().position(|(w, _)| *w == id)
            && let Handle::Process(child) = &mut self.handles[pos].1
        {
            let _ = child.kill();
            let _ = child.wait();
            self.handles.remove(pos);
        }
    }

    /// Starts a replacement for lost worker `id` (killed and reaped first); an external
    /// worker is expected to rejoin by itself.
    pub fn replace(&mut self, id: WorkerId) -> Result<(), ClusterError> {
        self.kill(id);
        if let Some(pos) = self.handles.iter().position(|(w, _)| *w == id) {
            match &self.handles[pos].1 {
                // A thread cannot be killed; it exits when its planner link closes.
                Handle::Thread(t) if t.is_finished() => {
                    self.handles.remove(pos);
                }
                Handle::External => {
                    self.handles.remove(pos);
                }
                _ => return Ok(()),
            }
        }
        self.start(id)
    }

    /// Whether workers are processes this pool can kill.
    pub fn kills_processes(&self) -> bool {
        matches!(self.launch, Launch::Processes { .. })
    }

    /// Waits for every worker to exit; the first error, if any.
    pub fn join_all(&mut self) -> Result<(), ClusterError> {
        let mut first_error = None;
        for (id, h) in self.handles.drain(..) {
            if let Err(e) = join(id, h) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Kills worker processes still running (after a failure).
    pub fn kill_all(&mut self) {
        for (_, h) in &mut self.handles {
            if let Handle::Process(child) = h {
                let _ = child.kill();
            }
        }
    }
}

/// Starts workers `from..to` and waits until all of `0..to` are connected to each other.
pub fn scale_out(
    planner: &mut Planner,
    pool: &mut WorkerPool,
    from: u32,
    to: u32,
) -> Result<(), ClusterError> {
    for w in from..to {
        pool.start(WorkerId(w))?;
    }
    planner.wait_for_workers(to as usize, Duration::from_secs(60))?;
    Ok(())
}

/// Stops workers `to..from` (a migration must have taken everything off them), after their
/// last interval's reports arrived.
pub fn scale_in(
    planner: &mut Planner,
    pool: &mut WorkerPool,
    from: u32,
    to: u32,
) -> Result<(), ClusterError> {
    planner.collect_reports((to..from).map(WorkerId).collect())?;
    for w in to..from {
        planner.retire(WorkerId(w));
        pool.stop(WorkerId(w))?;
    }
    Ok(())
}

/// A planner and the workers it started.
pub struct Cluster {
    /// The planner.
    pub planner: Planner,
    /// Its workers.
    pub pool: WorkerPool,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").field("planner", &self.planner).finish_non_exhaustive()
    }
}

impl Cluster {
    /// Starts a planner and `workers` workers, and waits until they are all connected. A
    /// cluster whose workers it starts itself (threads or processes) and that was given no
    /// secret makes one.
    pub fn start(
        pipeline: Pipeline,
        mut config: PlannerConfig,
        sink: Box<dyn SinkOutput>,
        launch: Launch,
        workers: usize,
        slots: u32,
    ) -> Result<Self, ClusterError> {
        if let (Launch::Threads(registry), true) = (&launch, config.timers.is_empty()) {
            // The operators the threads run are known here: fire only the timers they use.
            if let Ok(timers) = crate::planner::timers_of(&pipeline, registry) {
                config.timers = timers;
            }
        }
        if !matches!(launch, Launch::External) {
            config.security = config.security.or_generated()?;
        }
        let security = config.security.clone();
        let mut planner = Planner::start(pipeline, config, sink)?;
        let mut pool = WorkerPool::new(planner.addr().to_string(), launch, slots, security);
        if let Err(e) = scale_out(&mut planner, &mut pool, 0, workers as u32) {
            pool.kill_all();
            return Err(e);
        }
        Ok(Self { planner, pool })
    }

    /// Stops every worker and waits for them.
    pub fn shutdown(mut self) -> Result<(), ClusterError> {
        self.planner.shutdown();
        self.pool.join_all()
    }
}

fn join(id: WorkerId, h: Handle) -> Result<(), ClusterError> {
    match h {
        Handle::Thread(t) => match t.join() {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(ClusterError::Worker { worker: id, error: e.to_string() }),
            Err(_) => Err(ClusterError::Worker { worker: id, error: "panicked".into() }),
        },
        Handle::Process(mut child) => match child.wait() {
            Ok(s) if s.success() => Ok(()),
            Ok(s) => {
                Err(ClusterError::Worker { worker: id, error: format!("process exited with {s}") })
            }
            Err(e) => Err(ClusterError::Worker { worker: id, error: e.to_string() }),
        },
        Handle::External => Ok(()),
    }
}

/// Every operator on every one of `workers` workers with equal fractions, each worker's
/// `slots` shared equally among the operators (the layout used when no plan is given).
pub fn spread(p: &Pipeline, workers: u32, slots: u32) -> Placement {
    Placement::even(p, workers, slots.div_ceil(p.operators.len().max(1) as u32))
}

/// Key groups of each stateful operator in contiguous ranges proportional to its fractions.
pub fn contiguous_keys(p: &Pipeline, placement: &Placement, groups: u32) -> KeyAssignment {
    let owners = p
        .operators
        .iter()
        .map(|o| {
            if !o.stateful {
                return Vec::new();
            }
            let shares = &placement.operators[o.id.index()].shares;
            let mut owners = Vec::with_capacity(groups as usize);
            let mut acc = 0.0;
            for s in shares {
                acc += s.fraction;
                let upto = ((acc * f64::from(groups)).round() as usize).min(groups as usize);
                while owners.len() < upto {
                    owners.push(s.worker);
                }
            }
            let last = shares.last().map_or(WorkerId(0), |s| s.worker);
            owners.resize(groups as usize, last);
            owners
        })
        .collect();
    KeyAssignment { groups, owners }
}
