//! The planner's side of checkpoints and recoveries (see [`crate::fault`]): the boundary of a
//! checkpoint (a new cut started while dispatch goes on, the chains of the earlier cuts
//! drained while the new cut's run up to keyed state, the output sealed, every
//! worker's groups marked) and the steps of a recovery (everything in flight dropped,
//! workers rolled back, state restored, sources rewound).

use super::clock::Clock;
use super::ingress::ReplayPoint;
use super::membership::{Event, FaultEvent};
use super::stall::StallWatch;
use super::{Planner, PlannerError};
use crate::fault::output::OutputMark;
use crate::routing::{Routing, RoutingPlan};
use crate::wire::{CheckpointOrder, CheckpointWritten, Message, RestoreOrder, Restored};
use clasp_core::WorkerId;
use clasp_core::sync::{lock, write};
use crossbeam_channel::RecvTimeoutError;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// A checkpoint's boundary, as the planner took it.
#[derive(Clone, Debug)]
pub struct CheckpointBoundary {
    /// The checkpoint.
    pub id: u64,
    /// The routing epoch at the boundary.
    pub epoch: u64,
    /// The routing at the boundary.
    pub routing: RoutingPlan,
    /// Each source's replay point after the last request before the boundary.
    pub positions: Vec<Option<ReplayPoint>>,
    /// Input requests dispatched before the boundary.
    pub requests: u64,
    /// The workers that mark and write.
    pub workers: Vec<WorkerId>,
    /// The output sealed at the boundary.
    pub output: Option<OutputMark>,
    /// How long the chains were locked to start the new cut (dispatch waits that long).
    pub pause: Duration,
    /// How long the chains of the earlier cuts took to complete.
    pub drain: Duration,
    /// The longest a request of the new cut waited at keyed state for its worker's mark.
    pub held: Duration,
    /// When the boundary was taken.
    pub at: Instant,
}

/// A wait of a checkpoint or recovery step that did not end well.
#[derive(Debug, thiserror::Error)]
pub enum RecoveryWaitError {
    /// A worker did not answer in time.
    #[error("no {what} from worker(s) {missing:?} within {secs} s")]
    Timeout {
        /// What was awaited.
        what: &'static str,
        /// Who did not answer.
        missing: Vec<WorkerId>,
        /// The wait.
        secs: u64,
    },
}

impl Planner {
    /// Takes a checkpoint's boundary: starts a new cut (dispatch goes on: the sources'
    /// positions are those after the last chain before it), waits until every chain
    /// of the earlier cuts completed while those of the new cut run up to keyed state and
    /// wait there, seals the output, and has every worker mark its key groups (so every
    /// worker's state holds exactly the inputs dispatched before) and let the waiting
    /// requests run. The workers then write their groups; their answers come as
    /// [`Planner::take_written`].
    pub fn checkpoint_boundary(
        &mut self,
        id: u64,
        store: &str,
        blob: impl Fn(WorkerId) -> String,
    ) -> Result<CheckpointBoundary, PlannerError> {
        let at = Instant::now();
        let (cut, positions, requests) = {
            // Under the chains' lock: a chain opened from here on (an input or a firing) is of
            // the new cut, and its sink records wait for the seal; the sources' positions and
            // the requests dispatched are those of the chains before (recorded as each opens).
            let mut chains = lock(&self.shared.chains);
            let cut = chains.begin_cut();
            lock(&self.shared.sink).begin_cut(cut);
            let dispatch = &self.shared.dispatch;
            (cut, dispatch.positions(), dispatch.dispatched.load(Ordering::Acquire))
        };
        let pause = at.elapsed();
        let result = self.await_earlier_cuts();
        let drain = at.elapsed();
        // On an error the records that waited stay out of every epoch: a recovery drops
        // them with the rest.
        result?;
        let output = lock(&self.shared.sink)
            .seal_cut(id)
            .map_err(|error| PlannerError::Output { what: "the output's epoch".into(), error })?;
        let routing = self.shared.routing().plan().clone();
        let workers = self.workers();
        for &w in &workers {
            let order = CheckpointOrder {
                id,
                cut,
                epoch: routing.epoch,
                store: store.to_owned(),
                blob: blob(w),
            };
            self.shared.send(w, Message::Checkpoint(order));
        }
        let mut held = Duration::ZERO;
        self.await_fault(&workers, "checkpoint marks", Duration::from_secs(30), |e| match e {
            FaultEvent::Marked(w, m) if m.id == id => {
                held = held.max(Duration::from_micros(m.held_us));
                Some(*w)
            }
            _ => None,
        })?;
        Ok(CheckpointBoundary {
            id,
            epoch: routing.epoch,
            routing,
            positions,
            requests,
            workers,
            output,
            pause,
            drain,
            held,
            at,
        })
    }

    /// Waits until no chain of an earlier cut is in flight, handling events meanwhile; a wait
    /// in which no chain completes for as long as a drained run may stall ([`StallWatch`])
    /// ends with [`PlannerError::Stalled`] (a lost chain would otherwise hold it forever).
    fn await_earlier_cuts(&mut self) -> Result<(), PlannerError> {
        let mut stall = StallWatch::default();
        loop {
            let (open, completed, in_flight) = {
                let c = lock(&self.shared.chains);
                (c.earlier_cut_open(), c.completed, c.in_flight())
            };
            if !open {
                return Ok(());
            }
            if let Some(secs) = stall.stalled(true, completed) {
                return Err(PlannerError::Stalled { in_flight, secs });
            }
            match self.events.recv_timeout(Duration::from_micros(200)) {
                Ok(e) => self.handle_event(e)?,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => unreachable!("the planner holds a sender"),
            }
        }
    }

    /// Waits for one answer from each of `from` that `pick` accepts (returning who answered),
    /// handling other events; a lost worker ends the wait with its error.
    fn await_fault(
        &mut self,
        from: &[WorkerId],
        what: &'static str,
        timeout: Duration,
        mut pick: impl FnMut(&FaultEvent) -> Option<WorkerId>,
    ) -> Result<(), PlannerError> {
        let deadline = Instant::now() + timeout;
        let mut waiting: Vec<WorkerId> = from.to_vec();
        let mut check_inbox = |inbox: &mut Vec<FaultEvent>, waiting: &mut Vec<WorkerId>| {
            inbox.retain(|e| match pick(e) {
                Some(w) => {
                    waiting.retain(|x| *x != w);
                    false
                }
                None => true,
            });
        };
        check_inbox(&mut self.fault_inbox, &mut waiting);
        while !waiting.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(PlannerError::Timeout {
                    what: RecoveryWaitError::Timeout {
                        what,
                        missing: waiting,
                        secs: timeout.as_secs(),
                    }
                    .to_string(),
                });
            }
            match self.events.recv_timeout(left) {
                Ok(Event::Fault(f)) => {
                    self.fault_inbox.push(f);
                    check_inbox(&mut self.fault_inbox, &mut waiting);
                }
                Ok(e) => self.handle_event(e)?,
                Err(_) => {}
            }
        }
        Ok(())
    }

    /// The workers' answers for checkpoint `id` that arrived so far (taken out).
    pub fn take_written(&mut self, id: u64) -> Vec<CheckpointWritten> {
        let mut written = Vec::new();
        self.fault_inbox.retain(|e| match e {
            FaultEvent::Written(w) if w.id == id => {
                written.push((**w).clone());
                false
            }
            _ => true,
        });
        written
    }

    /// Handles the events that arrived, without waiting (so checkpoint answers reach the
    /// inbox between intervals).
    pub fn poll_events(&mut self) -> Result<(), PlannerError> {
        while let Ok(e) = self.events.try_recv() {
            self.handle_event(e)?;
        }
        Ok(())
    }

    /// Marks worker `w` gone (lost): its id may be taken by a replacement; the others drop
    /// their links to it.
    pub fn forget(&mut self, w: WorkerId) {
        self.leaving.retain(|x| *x != w);
        if let Some(Some(s)) = lock(&self.shared.workers).get_mut(w.index()) {
            s.left = true;
            s.lost = true;
            // What its connection still delivers was sent before the rollback that follows.
            s.muted.store(true, Ordering::Release);
        }
        for other in self.workers() {
            self.shared.send(other, Message::PeerLeft(w));
        }
    }

    /// The first steps of a recovery: stops dispatching and reading the sources, drops the
    /// queued inputs, the chains in flight and the output since the last commit, and rolls
    /// every connected worker back (each drops its queue, in-flight work and state). Nothing a
    /// worker sent before its rollback is used after this returns.
    pub fn roll_back(&mut self, generation: u64) -> Result<Vec<WorkerId>, PlannerError> {
        self.shared.dispatch.pause(|| self.queue.is_none());
        let controls = lock(&self.shared.ingress).clone();
        for (_, c) in &controls {
            c.hold();
        }
        for (_, c) in &controls {
            c.wait_parked();
        }
        if let Some(q) = &self.queue {
            let mut n = 0;
            while let Ok(item) = q.try_recv() {
                n += 1;
                let bytes = item.batch.byte_len() as u64;
                self.shared.queued_bytes.fetch_sub(bytes, Ordering::AcqRel);
            }
            self.shared.dispatch.discarded.fetch_add(n, Ordering::AcqRel);
        }
        lock(&self.shared.chains).abandon_all();
        self.fault_inbox.clear();
        // Muted before the output's epoch is dropped: a sink record is written under the
        // sink's lock after its sender's mute is checked, so none sent before a rollback can
        // land in the epoch after it.
        let live = self.workers();
        for &w in &live {
            if let Some(Some(s)) = lock(&self.shared.workers).get(w.index()) {
                s.muted.store(true, Ordering::Release);
            }
        }
        lock(&self.shared.sink)
            .discard_all()
            .map_err(|error| PlannerError::Output { what: "the output's epoch".into(), error })?;
        for &w in &live {
            self.shared.send(w, Message::Rollback(generation));
        }
        self.await_fault(&live, "rollbacks", Duration::from_secs(10), |e| match e {
            FaultEvent::RolledBack(w, n) if *n == generation => Some(*w),
            _ => None,
        })?;
        Ok(live)
    }

    /// Sends each worker its restore order and waits until all restored; returns their
    /// answers.
    pub fn restore(
        &mut self,
        orders: Vec<(WorkerId, RestoreOrder)>,
    ) -> Result<Vec<Restored>, PlannerError> {
        let generation = orders.first().map_or(0, |(_, o)| o.generation);
        let workers: Vec<WorkerId> = orders.iter().map(|(w, _)| *w).collect();
        let cut = lock(&self.shared.chains).cut();
        for (w, order) in orders {
            self.shared.send(w, Message::Restore(Box::new(RestoreOrder { cut, ..order })));
        }
        let mut done = Vec::new();
        self.await_fault(&workers, "restores", Duration::from_secs(60), |e| match e {
            FaultEvent::Restored(r) if r.generation == generation => {
                done.push(r.clone());
                Some(r.worker)
            }
            _ => None,
        })?;
        if let Some(r) = done.iter().find(|r| r.error.is_some()) {
            return Err(PlannerError::Migration {
                epoch: 0,
                reason: format!(
                    "worker {} could not restore: {}",
                    r.worker,
                    r.error.as_deref().unwrap_or_default()
                ),
            });
        }
        Ok(done)
    }

    /// The last step of a recovery: the planner routes by `plan`, the sources go back to
    /// `positions` (from their start where `None`) with the watermarks they had there, and
    /// dispatch resumes.
    pub fn resume_from(&mut self, plan: RoutingPlan, positions: &[Option<ReplayPoint>]) {
        // Every worker rolled back: none still owes a migration anything.
        self.leaving.clear();
        *write(&self.shared.routing) = Arc::new(Routing::new(&self.shared.pipeline, plan));
        let controls = lock(&self.shared.ingress).clone();
        let mut rewound = self.start_positions.clone();
        for (source, c) in &controls {
            let to = positions.get(*source).cloned().flatten().or_else(|| rewound[*source].clone());
            rewound[*source] = to.clone();
            c.release(to);
        }
        let watermarks: Vec<Option<u64>> =
            rewound.iter().map(|r| r.as_ref().and_then(|r| r.watermark)).collect();
        let p = &self.shared.pipeline;
        *lock(&self.shared.clock) = Clock::restarted(p, &self.shared.config.timers, &watermarks);
        self.shared.dispatch.set_positions(rewound);
        self.shared.dispatch.resume();
    }

    /// Checkpoint `id` committed: its output becomes visible.
    pub fn publish_output(&mut self, id: u64) -> Result<(), PlannerError> {
        lock(&self.shared.sink)
            .publish(id)
            .map_err(|error| PlannerError::Output { what: "the committed output".into(), error })
    }

    /// Whether the sink is still making a committed checkpoint's records visible.
    pub fn output_publishing(&self) -> bool {
        lock(&self.shared.sink).publishing()
    }

    /// Workers reported lost and not yet forgotten.
    pub fn lost_workers(&self) -> Vec<WorkerId> {
        lock(&self.shared.workers)
            .iter()
            .enumerate()
            .filter(|(_, s)| s.as_ref().is_some_and(|s| s.lost && !s.left))
            .map(|(i, _)| WorkerId::from(i))
            .collect()
    }

    /// Input requests dispatched so far.
    pub fn dispatched(&self) -> u64 {
        self.shared.dispatch.dispatched.load(Ordering::Acquire)
    }

    /// Chains completed so far.
    pub fn completed(&self) -> u64 {
        lock(&self.shared.chains).completed
    }

    /// Notes when the next chain completes (after a recovery resumed dispatch).
    pub fn watch_first_completion(&self) {
        lock(&self.shared.chains).watch_first_completion();
    }

    /// How long ago the first chain completed since [`Planner::watch_first_completion`].
    pub fn first_completion_ago(&self) -> Option<Duration> {
        let at = lock(&self.shared.chains).first_completion_ns()?;
        Some(Duration::from_nanos(crate::worker::executor::now_ns().saturating_sub(at)))
    }
}
