//! A job's hooks into the planner's run: the scaling loop every interval, checkpoints when the
//! state machine says one is due (committed once every worker wrote its groups), recovery
//! when a worker is lost, and the last checkpoint once the input is done.

use super::catalog;
use super::inject::KillSwitch;
use super::manifest::{Manifest, OutputCommit, SourceMark, blob_name, manifest_name};
use super::store::CheckpointStore;
use super::{CheckpointRecord, FaultNote, FaultTolerance, RecoveryRecord};
use crate::cluster::WorkerPool;
use crate::job::RescaleAt;
use crate::observe::Observatory;
use crate::planner::{CheckpointBoundary, Planner, PlannerError, Progress, ReplayPoint, RunHooks};
use crate::routing::RoutingPlan;
use crate::scaling::{ScalingError, ScalingEvent, ScalingLoop};
use crate::wire::{CheckpointWritten, GroupIndex, RestoreGroup, RestoreOrder};
use clasp_core::sync::lock;
use clasp_core::{KeyGroup, OperatorId, WorkerId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Checkpointing and recovery state of a run.
pub(crate) struct FaultRun {
    pub(crate) cfg: FaultTolerance,
    pub(crate) store: Arc<dyn CheckpointStore>,
    pending: Option<CheckpointBoundary>,
    written: Vec<CheckpointWritten>,
    generation: u64,
    pub(crate) kills: Arc<Mutex<KillSwitch>>,
    /// What to add to the requests this run dispatched to count those of the input before
    /// (runs resumed from, and requests dispatched again after a recovery).
    requests_offset: i64,
    /// The next checkpoint is the last one (the input is done).
    finishing: bool,
    /// A recovery waiting for its first completed chain: the record, when it resumed, and
    /// the completions by then.
    first_completion: Option<(usize, Instant)>,
    pub(crate) checkpoints: Vec<CheckpointRecord>,
    pub(crate) recoveries: Vec<RecoveryRecord>,
    origin: Instant,
}

impl FaultRun {
    pub(crate) fn new(cfg: FaultTolerance, store: Arc<dyn CheckpointStore>) -> Self {
        let kills = Arc::new(Mutex::new(KillSwitch::new(cfg.kills.clone())));
        let requests_offset = cfg.resume.as_ref().map_or(0, |m| m.requests as i64);
        Self {
            cfg,
            store,
            pending: None,
            written: Vec::new(),
            generation: 0,
            kills,
            requests_offset,
            finishing: false,
            first_completion: None,
            checkpoints: Vec::new(),
            recoveries: Vec::new(),
            origin: Instant::now(),
        }
    }

    /// Fills in the last recovery's time to its first completed chain, once there was one.
    pub(crate) fn note_first_completion(&mut self, planner: &Planner) {
        let Some((i, resumed)) = self.first_completion else { return };
        let Some(ago) = planner.first_completion_ago() else { return };
        let since = |t: Instant| t.elapsed().saturating_sub(ago).as_secs_f64() * 1e3;
        self.recoveries[i].first_completion_ms = Some(since(resumed));
        let last_kill = lock(&self.kills).killed.last().map(|k| k.1);
        self.recoveries[i].kill_to_first_completion_ms = last_kill.map(since);
        self.first_completion = None;
    }
}

/// What a job's run calls back into.
pub(crate) struct JobHooks<'a> {
    pub(crate) scaler: &'a mut ScalingLoop,
    pub(crate) pool: &'a mut WorkerPool,
    pub(crate) rescales: Vec<RescaleAt>,
    pub(crate) on_event: &'a mut dyn FnMut(&ScalingEvent),
    pub(crate) on_note: &'a mut dyn FnMut(&FaultNote),
    pub(crate) fault: Option<FaultRun>,
    /// A failure that is not the planner's (starting workers, planning); the job ends with
    /// it after the run.
    pub(crate) failure: Option<ScalingError>,
    /// Shown the run after every interval.
    pub(crate) observatory: Option<&'a Observatory>,
}

impl RunHooks for JobHooks<'_> {
    fn interval(&mut self, planner: &mut Planner, p: &Progress) -> Result<(), PlannerError> {
        self.scale(planner, p)?;
        if let Some(o) = self.observatory {
            o.observe(planner, Some(p), Some(self.scaler));
        }
        let Some(f) = self.fault.as_mut() else { return Ok(()) };
        f.note_first_completion(planner);
        lock(&f.kills).at_requests(p.requests, &planner.worker_pids());
        self.poll_checkpoint(planner)?;
        self.show_fault();
        if planner.output_publishing() {
            // The last checkpoint's records are still going out: the next one waits for them.
            return Ok(());
        }
        let requests = self.total_dispatched(planner);
        // The boundary waits for every chain in flight: at the rate they complete, this long.
        let drain_s = p.in_flight as f64 / p.throughput;
        let due = self.scaler.autoscaler_mut().checkpoint_due(p.t, requests, drain_s);
        if let Some(id) = due {
            self.begin_checkpoint(planner, id)?;
        }
        Ok(())
    }

    fn failed(&mut self, planner: &mut Planner, error: PlannerError) -> Result<(), PlannerError> {
        if self.fault.is_none() {
            return Err(error);
        }
        let mut lost = planner.lost_workers();
        if lost.is_empty() && matches!(error, PlannerError::Migration { .. }) {
            // A migration failed because a peer was lost: its loss is being reported.
            let deadline = Instant::now() + self.heartbeat_timeout() + Duration::from_millis(500);
            while lost.is_empty() && Instant::now() < deadline {
                if let Err(PlannerError::WorkerLost { worker, .. }) = planner.poll_events() {
                    lost.push(worker);
                }
                for w in planner.lost_workers() {
                    if !lost.contains(&w) {
                        lost.push(w);
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        match &error {
            PlannerError::WorkerLost { worker, .. } if !lost.contains(worker) => lost.push(*worker),
            PlannerError::WorkerLost { .. } | PlannerError::Migration { .. } => {}
            _ => return Err(error),
        }
        if lost.is_empty() {
            return Err(error);
        }
        let recovered = self.recover(planner, lost, error.to_string());
        self.show_fault();
        recovered
    }

    fn drained(&mut self, planner: &mut Planner) -> Result<bool, PlannerError> {
        if self.fault.is_none() {
            return Ok(true);
        }
        // The checkpoint in flight, then a last one: every result becomes visible.
        self.finish_pending(planner)?;
        if planner.output_publishing() {
            // The last one starts once the records of the one before are out.
            planner.poll_events()?;
            std::thread::sleep(Duration::from_millis(1));
            return Ok(false);
        }
        let Some(id) = self.scaler.autoscaler_mut().checkpoint_now() else { return Ok(false) };
        if let Some(f) = self.fault.as_mut() {
            f.finishing = true;
        }
        let result = self.begin_checkpoint(planner, id).and_then(|()| self.finish_pending(planner));
        let f = self.fault.as_mut().expect("checked above");
        f.finishing = false;
        result?;
        let committed = f.checkpoints.last().is_some_and(|c| c.id == id && c.committed);
        self.show_fault();
        Ok(committed)
    }
}

impl JobHooks<'_> {
    /// Shows the checkpoints and recoveries so far to the observatory.
    fn show_fault(&self) {
        if let (Some(o), Some(f)) = (self.observatory, self.fault.as_ref()) {
            o.observe_fault(&f.checkpoints, &f.recoveries);
        }
    }

    /// The scheduled rescales and the autoscaler's step, as without fault tolerance.
    fn scale(&mut self, planner: &mut Planner, p: &Progress) -> Result<(), PlannerError> {
        if self.failure.is_some() {
            return Ok(());
        }
        let pool = &mut *self.pool;
        let mut scheduled = None;
        let result = if self.rescales.last().is_some_and(|r| p.requests >= r.after_requests) {
            let at = self.rescales.pop().expect("a rescale is due");
            scheduled = Some(at);
            self.scaler.rescale_to_workers(planner, pool, at.workers).map(Some)
        } else {
            self.scaler.step(planner, pool, p)
        };
        match result.map_err(ScalingError::into_planner) {
            Ok(Some(event)) => (self.on_event)(&event),
            Ok(None) => {}
            // A worker lost while the cluster rescaled: the run recovers from it like from
            // any other loss, and the rescale asked for is tried again after the recovery.
            Err(Ok(e)) => {
                if let Some(at) = scheduled {
                    self.rescales.push(at);
                }
                return Err(e);
            }
            Err(Err(e)) => self.failure = Some(e),
        }
        Ok(())
    }

    fn heartbeat_timeout(&self) -> Duration {
        self.fault.as_ref().map_or(super::DEFAULT_HEARTBEAT_TIMEOUT, |f| f.cfg.heartbeat_timeout)
    }

    fn total_dispatched(&self, planner: &Planner) -> u64 {
        let offset = self.fault.as_ref().map_or(0, |f| f.requests_offset);
        (planner.dispatched() as i64 + offset).max(0) as u64
    }

    fn begin_checkpoint(&mut self, planner: &mut Planner, id: u64) -> Result<(), PlannerError> {
        let f = self.fault.as_mut().expect("checkpoints need fault tolerance");
        let location = f.store.location();
        let boundary = planner.checkpoint_boundary(id, &location, |w| blob_name(id, w))?;
        f.written.clear();
        f.pending = Some(boundary);
        lock(&f.kills).at_checkpoint(&planner.worker_pids());
        Ok(())
    }

    /// Takes the workers' answers; commits once every worker wrote.
    fn poll_checkpoint(&mut self, planner: &mut Planner) -> Result<bool, PlannerError> {
        planner.poll_events()?;
        let f = self.fault.as_mut().expect("checkpoints need fault tolerance");
        let Some(b) = &f.pending else { return Ok(true) };
        f.written.extend(planner.take_written(b.id));
        if !b.workers.iter().all(|w| f.written.iter().any(|x| x.worker == *w)) {
            return Ok(false);
        }
        let b = f.pending.take().expect("a pending checkpoint");
        let mut record = CheckpointRecord {
            id: b.id,
            time_s: b.at.duration_since(f.origin).as_secs_f64(),
            pause_ms: b.pause.as_secs_f64() * 1e3,
            drain_ms: b.drain.as_secs_f64() * 1e3,
            held_ms: b.held.as_secs_f64() * 1e3,
            write_ms: f.written.iter().map(|w| w.write_us).max().unwrap_or(0) as f64 / 1e3,
            ..CheckpointRecord::default()
        };
        if let Some(w) = f.written.iter().find(|w| w.error.is_some()) {
            let why = format!(
                "checkpoint {} failed: worker {}: {}",
                b.id,
                w.worker,
                w.error.as_deref().unwrap_or_default()
            );
            (self.on_note)(&FaultNote::Warning(why));
            self.scaler.autoscaler_mut().checkpoint_failed(b.id);
            f.checkpoints.push(record.clone());
            (self.on_note)(&FaultNote::Checkpoint(record));
            return Ok(true);
        }
        let manifest = manifest_of(planner, f, &b, self.scaler.autoscaler().epoch());
        record.bytes = manifest.blobs.iter().map(|x| x.bytes).sum();
        record.keys = manifest.blobs.iter().flat_map(|x| &x.groups).map(|g| g.keys).sum();
        f.store
            .put(&manifest_name(b.id), &manifest.encode())
            .map_err(|e| fault_error("committing the manifest", e))?;
        planner.publish_output(b.id)?;
        if let Err(e) = catalog::prune(&*f.store, f.cfg.retain) {
            (self.on_note)(&FaultNote::Warning(format!("deleting old checkpoints: {e}")));
        }
        record.duration_ms = b.at.elapsed().as_secs_f64() * 1e3;
        record.committed = true;
        let requests = manifest.requests;
        self.scaler.autoscaler_mut().checkpoint_committed(b.id, record.time_s, requests);
        f.checkpoints.push(record.clone());
        (self.on_note)(&FaultNote::Checkpoint(record));
        Ok(true)
    }

    /// Waits for the checkpoint in flight to commit or fail.
    fn finish_pending(&mut self, planner: &mut Planner) -> Result<(), PlannerError> {
        let deadline = Instant::now() + Duration::from_secs(120);
        while !self.poll_checkpoint(planner)? {
            if Instant::now() > deadline {
                return Err(PlannerError::Timeout {
                    what: "the workers' checkpoint writes".into(),
                });
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        Ok(())
    }

    /// Recovers from the loss of `lost`: rolls back, replaces, restores, replays; a worker
    /// lost meanwhile starts it over with it included.
    fn recover(
        &mut self,
        planner: &mut Planner,
        mut lost: Vec<WorkerId>,
        reason: String,
    ) -> Result<(), PlannerError> {
        let noticed = Instant::now();
        loop {
            match self.try_recover(planner, &lost, &reason, noticed) {
                Ok(()) => return Ok(()),
                Err(PlannerError::WorkerLost { worker, .. }) => {
                    if !lost.contains(&worker) {
                        lost.push(worker);
                    }
                }
                Err(e) => return Err(e),
            }
            if lost.len() > 64 {
                return Err(PlannerError::Timeout {
                    what: "a recovery that keeps losing workers".into(),
                });
            }
        }
    }

    fn try_recover(
        &mut self,
        planner: &mut Planner,
        lost: &[WorkerId],
        reason: &str,
        noticed: Instant,
    ) -> Result<(), PlannerError> {
        let f = self.fault.as_mut().expect("recovery needs fault tolerance");
        f.generation += 1;
        let generation = f.generation;
        f.pending = None;
        f.written.clear();
        tracing::warn!("recovering from the loss of {lost:?}: {reason}");
        for &w in lost {
            planner.forget(w);
            self.pool.kill(w);
        }
        planner.roll_back(generation)?;
        let pipeline = planner.pipeline().clone();
        let plan = self
            .scaler
            .autoscaler_mut()
            .workers_lost(&pipeline, lost)
            .map_err(|e| PlannerError::Migration { epoch: 0, reason: e.to_string() })?;
        // Workers beyond the recovery's placement (started by a rescale that did not finish).
        for w in planner.workers() {
            if w.0 >= plan.workers {
                planner.retire(w);
                let _ = self.pool.stop(w);
            }
        }
        for &w in lost.iter().filter(|w| w.0 < plan.workers) {
            self.pool.replace(w).map_err(|e| PlannerError::Migration {
                epoch: plan.epoch,
                reason: format!("starting a replacement for worker {w}: {e}"),
            })?;
        }
        planner.wait_for_workers(plan.workers as usize, Duration::from_secs(60))?;
        let f = self.fault.as_mut().expect("recovery needs fault tolerance");
        let key_groups = plan.keys.groups;
        let found = catalog::latest(&*f.store, &pipeline, key_groups)
            .map_err(|e| fault_error("finding the checkpoint to restore", e))?;
        for w in &found.warnings {
            (self.on_note)(&FaultNote::Warning(w.clone()));
        }
        let warnings = found.warnings;
        let manifest = found.manifest;
        if let Err(e) = catalog::prune(&*f.store, f.cfg.retain) {
            (self.on_note)(&FaultNote::Warning(format!("deleting unfinished checkpoints: {e}")));
        }
        let routing = RoutingPlan {
            epoch: plan.epoch,
            placement: plan.placement.clone(),
            keys: plan.keys.clone(),
        };
        let orders =
            restore_orders(&pipeline, &routing, manifest.as_ref(), generation, &f.store.location());
        lock(&f.kills).at_restore(&planner.worker_pids());
        let restored = planner.restore(orders)?;
        let positions = positions_of(&pipeline, manifest.as_ref(), f.cfg.resume.as_ref());
        planner.resume_from(routing, &positions);
        let requests = manifest.as_ref().map_or(0, |m| m.requests);
        self.scaler
            .autoscaler_mut()
            .recovered(noticed.duration_since(f.origin).as_secs_f64(), requests);
        f.requests_offset = requests as i64 - planner.dispatched() as i64;
        let record = RecoveryRecord {
            time_s: noticed.duration_since(f.origin).as_secs_f64(),
            lost: lost.iter().map(|w| w.0).collect(),
            reason: reason.to_owned(),
            checkpoint: manifest.as_ref().map(|m| m.id),
            workers: plan.workers,
            duration_ms: noticed.elapsed().as_secs_f64() * 1e3,
            first_completion_ms: None,
            kill_to_first_completion_ms: None,
            keys: restored.iter().map(|r| r.keys).sum(),
            bytes: restored.iter().map(|r| r.bytes).sum(),
            warnings,
        };
        planner.watch_first_completion();
        f.first_completion = Some((f.recoveries.len(), Instant::now()));
        f.recoveries.push(record.clone());
        (self.on_note)(&FaultNote::Recovered(record));
        Ok(())
    }
}

fn fault_error(what: &str, e: impl std::fmt::Display) -> PlannerError {
    PlannerError::Output { what: what.into(), error: std::io::Error::other(e.to_string()) }
}

/// The manifest of a checkpoint whose workers all wrote.
fn manifest_of(planner: &Planner, f: &FaultRun, b: &CheckpointBoundary, _epoch: u64) -> Manifest {
    let replay = |s: clasp_core::SourceId| b.positions.get(s.index()).cloned().flatten();
    let p = planner.pipeline();
    let output = b.output.as_ref().map(|mark| {
        let before = std::fs::metadata(&mark.path).map_or(0, |m| m.len());
        OutputCommit {
            path: mark.path.clone(),
            segment: mark.segment.clone(),
            bytes_before: before,
            bytes_after: before + mark.bytes,
        }
    });
    let mut blobs: Vec<_> = f.written.iter().filter_map(|w| w.blob.clone()).collect();
    blobs.sort_by_key(|x| x.worker);
    Manifest {
        format: super::manifest::FORMAT,
        id: b.id,
        pipeline: p.name.clone(),
        fingerprint: super::manifest::fingerprint(p),
        key_groups: b.routing.keys.groups,
        epoch: b.epoch,
        requests: (b.requests as i64 + f.requests_offset).max(0) as u64,
        sources: p
            .sources
            .iter()
            .map(|s| SourceMark {
                source: s.name.clone(),
                position: replay(s.id).map(|r| r.position.clone()),
                watermark: replay(s.id).and_then(|r| r.watermark),
            })
            .collect(),
        placement: b.routing.placement.clone(),
        keys: b.routing.keys.clone(),
        blobs,
        output,
        finished: f.finishing,
    }
}

/// Each worker's restore order: the groups it owns under `routing`, from `manifest`'s blobs.
pub(crate) fn restore_orders(
    p: &clasp_core::Pipeline,
    routing: &RoutingPlan,
    manifest: Option<&Manifest>,
    generation: u64,
    location: &str,
) -> Vec<(WorkerId, RestoreOrder)> {
    let mut at: HashMap<(OperatorId, KeyGroup), (&str, &GroupIndex)> = HashMap::new();
    for b in manifest.iter().flat_map(|m| &m.blobs) {
        for g in &b.groups {
            at.insert((g.op, g.group), (&b.name, g));
        }
    }
    (0..routing.placement.workers)
        .map(WorkerId)
        .map(|w| {
            let mut groups = Vec::new();
            for o in p.operators.iter().filter(|o| o.stateful) {
                let owners = routing.keys.owners.get(o.id.index()).map_or(&[][..], Vec::as_slice);
                for (g, owner) in owners.iter().enumerate() {
                    let group = KeyGroup(g as u32);
                    if *owner != w {
                        continue;
                    }
                    if let Some((blob, gi)) = at.get(&(o.id, group)) {
                        groups.push(RestoreGroup {
                            op: o.id,
                            group,
                            blob: (*blob).to_owned(),
                            offset: gi.offset,
                            len: gi.len,
                            keys: gi.keys,
                            crc32: gi.crc32,
                        });
                    }
                }
            }
            let order = RestoreOrder {
                generation,
                routing: routing.clone(),
                store: location.to_owned(),
                groups,
                // The planner's cut, set as it sends the order.
                cut: 0,
            };
            (w, order)
        })
        .collect()
}

/// Each source's replay point by source id: the checkpoint's, else the resumed one's, else
/// none (from the run's start).
pub(crate) fn positions_of(
    p: &clasp_core::Pipeline,
    manifest: Option<&Manifest>,
    resumed: Option<&Manifest>,
) -> Vec<Option<ReplayPoint>> {
    let of = |m: Option<&Manifest>, name: &str| {
        let mark = m.and_then(|m| m.sources.iter().find(|s| s.source == name))?;
        Some(ReplayPoint { position: mark.position.clone()?, watermark: mark.watermark })
    };
    p.sources.iter().map(|s| of(manifest, &s.name).or_else(|| of(resumed, &s.name))).collect()
}
