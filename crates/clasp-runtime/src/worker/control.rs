//! The control loop: what the planner tells a worker (routings, migrations, peers joining and
//! leaving, state dumps, reports, shutdown) and what its peer links report.

use super::WorkerShared;
use super::bootstrap::WorkerError;
use super::checkpoint;
use super::mesh::connect_peer;
use super::migrate::migrate;
use crate::migration::MigrationData;
use crate::wire::Message;
use clasp_core::WorkerId;
use clasp_core::rng::independent_stream;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What the control loop reacts to.
#[derive(Debug)]
pub(super) enum Control {
    /// A message from the planner.
    Planner(Message),
    /// A peer's migration data.
    Data(Box<MigrationData>),
    /// The link to a peer is up.
    PeerUp(WorkerId),
    /// The link to a peer failed, and why.
    PeerDown(WorkerId, String),
    /// A peer sent its last message on its link.
    PeerDone(WorkerId),
    /// The link to the planner closed, and why.
    PlannerDown(String),
}

/// The control loop's events in the order they came: those a step waiting for something
/// else (a migration) set aside first, then the channel's.
pub(super) struct Inbox<'a> {
    set_aside: VecDeque<Control>,
    rx: &'a Receiver<Control>,
}

impl<'a> Inbox<'a> {
    fn new(rx: &'a Receiver<Control>) -> Self {
        Self { set_aside: VecDeque::new(), rx }
    }

    /// The next event; `None` once every sender is gone.
    fn recv(&mut self) -> Option<Control> {
        self.set_aside.pop_front().or_else(|| self.rx.recv().ok())
    }

    /// The next event within `timeout`.
    pub(super) fn recv_timeout(&mut self, timeout: Duration) -> Result<Control, RecvTimeoutError> {
        match self.set_aside.pop_front() {
            Some(c) => Ok(c),
            None => self.rx.recv_timeout(timeout),
        }
    }

    /// Puts `events`, taken from here in this order, back ahead of everything else.
    fn put_back(&mut self, events: Vec<Control>) {
        for c in events.into_iter().rev() {
            self.set_aside.push_front(c);
        }
    }
}

/// Handles control events until the planner says stop; losing the planner is an error.
pub(super) fn control_loop(
    shared: &Arc<WorkerShared>,
    rx: &Receiver<Control>,
    tx: &Sender<Control>,
) -> Result<(), WorkerError> {
    let mut inbox = Inbox::new(rx);
    let mut early: Vec<MigrationData> = Vec::new();
    let mut rng = independent_stream(shared.settings.seed, u64::from(shared.me.0) << 16 | 0xc0de);
    let mut left: Vec<WorkerId> = Vec::new();
    // Peers that sent their last message or whose link went down: a retiring worker waits
    // for the rest (their last message may arrive before it learns that it retires).
    let mut ended: Vec<WorkerId> = Vec::new();
    while let Some(event) = inbox.recv() {
        match event {
            Control::Planner(Message::Shutdown) => return Ok(()),
            Control::Planner(Message::PeerLeft(w)) if w == shared.me => {
                if retire(shared, &mut inbox, &mut early, &ended) {
                    return Ok(());
                }
            }
            Control::Planner(Message::Install(plan)) => {
                let (routing, held) = shared.install(*plan);
                shared.sched.resume(shared.limits(&routing));
                shared.admit(held, &mut rng);
            }
            Control::Planner(Message::Migrate(order)) => {
                let set_aside = migrate(shared, *order, &mut inbox, &mut early, &mut rng);
                inbox.put_back(set_aside);
            }
            Control::Planner(Message::Checkpoint(order)) => checkpoint::checkpoint(shared, order),
            Control::Planner(Message::Rollback(generation)) => {
                early.clear();
                checkpoint::roll_back(shared, generation)
            }
            Control::Planner(Message::Restore(order)) => checkpoint::restore(shared, *order),
            Control::Planner(Message::PeerJoined { worker, addr }) => {
                shared.peers.ensure(worker);
                if worker < shared.me {
                    connect_peer(shared.clone(), worker, addr, tx.clone());
                }
            }
            Control::Planner(Message::PeerLeft(w)) => {
                // The routing no longer names `w`: this is the last message it gets from here.
                shared.send_to_peer(w, Message::Shutdown);
                shared.peers.remove(w);
                left.push(w);
            }
            Control::Planner(Message::DumpState) => dump_state(shared),
            Control::Planner(Message::ReportNow(n)) => {
                shared.report_now.store(n, Ordering::Release)
            }
            Control::Planner(other) => {
                tracing::warn!(
                    "worker {}: unexpected {} from the planner",
                    shared.me,
                    other.name()
                );
            }
            Control::Data(d) => early.push(*d),
            Control::PeerUp(w) => {
                // A new worker may reuse the id of one that left.
                ended.retain(|&p| p != w);
                left.retain(|&p| p != w);
                tracing::debug!("worker {}: connected to worker {w}", shared.me);
                shared.planner.send(Message::MeshReady(shared.peers.connected()));
            }
            Control::PeerDown(w, why) => {
                if left.contains(&w) {
                    tracing::debug!(
                        "worker {}: retired worker {w} closed its link: {why}",
                        shared.me
                    );
                } else {
                    tracing::warn!("worker {}: connection to worker {w} lost: {why}", shared.me);
                }
                ended.push(w);
            }
            Control::PeerDone(w) => {
                tracing::debug!("worker {}: worker {w} sent its last message", shared.me);
                ended.push(w);
            }
            Control::PlannerDown(why) => return Err(WorkerError::PlannerLost(why)),
        }
    }
    Ok(())
}

/// Longest a retiring worker waits for its peers' last messages, then for its queue to empty.
const RETIRE_WAIT: Duration = Duration::from_secs(30);

/// This worker is retired (a migration took its key groups and placement away). Requests
/// routed to it under an older routing may still be on their way: each peer, told that this
/// worker leaves, sends a last message behind them. Once every peer's has arrived, or its link
/// went down, the queue is run empty (what arrives late is forwarded to its new owner) and
/// the worker may stop. Returns whether the planner already said stop meanwhile.
fn retire(
    shared: &Arc<WorkerShared>,
    inbox: &mut Inbox<'_>,
    early: &mut Vec<MigrationData>,
    ended: &[WorkerId],
) -> bool {
    let mut waiting = shared.peers.connected();
    waiting.retain(|w| !ended.contains(w));
    let mut stop = false;
    let deadline = Instant::now() + RETIRE_WAIT;
    while !waiting.is_empty() {
        let left = deadline.saturating_duration_since(Instant::now());
        match inbox.recv_timeout(left) {
            Ok(Control::PeerDone(w) | Control::PeerDown(w, _)) => waiting.retain(|&p| p != w),
            Ok(Control::Planner(Message::Shutdown)) => stop = true,
            Ok(Control::Data(d)) => early.push(*d),
            Ok(Control::PlannerDown(why)) => {
                tracing::warn!("worker {}: planner lost while retiring: {why}", shared.me);
                return true;
            }
            Ok(other) => tracing::debug!("worker {}: while retiring: {other:?}", shared.me),
            Err(_) => {
                tracing::warn!(
                    "worker {}: retiring without the last message of {waiting:?} after {} s",
                    shared.me,
                    RETIRE_WAIT.as_secs()
                );
                break;
            }
        }
    }
    if !shared.sched.wait_idle(RETIRE_WAIT) {
        tracing::warn!("worker {}: retiring with requests still queued", shared.me);
    }
    stop
}

/// Sends the keyed state of every stateful operator to the planner as JSON lines.
fn dump_state(shared: &WorkerShared) {
    for o in shared.pipeline.operators.iter().filter(|o| o.stateful) {
        let mut lines = Vec::new();
        if let Err(e) = shared.stores[o.id.index()].dump_json(&o.name, &mut lines) {
            tracing::error!("worker {}: dumping state of `{}`: {e}", shared.me, o.name);
        }
        // Chunks stay well under the frame limit.
        let mut start = 0;
        while start < lines.len() {
            let mut end = (start + (8 << 20)).min(lines.len());
            while end < lines.len() && lines[end - 1] != b'\n' {
                end += 1;
            }
            shared
                .planner
                .send(Message::StateLines { operator: o.id, lines: lines[start..end].to_vec() });
            start = end;
        }
    }
    shared.planner.send(Message::StateDone);
}
