//! The control loop: what the planner tells a worker (routings, migrations, peers joining and
//! leaving, state dumps, reports, shutdown) and what its peer links report.

use super::WorkerShared;
use super::bootstrap::WorkerError;
use super::checkpoint;
use super::mesh::{connect_peer, connected_peers};
use super::migrate::migrate;
use crate::migration::MigrationData;
use crate::wire::Message;
use clasp_core::WorkerId;
use clasp_core::rng::independent_stream;
use crossbeam_channel::{Receiver, Sender};
use std::sync::Arc;
use std::sync::atomic::Ordering;

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
    /// The link to the planner closed, and why.
    PlannerDown(String),
}

/// Handles control events until the planner says stop; losing the planner is an error.
pub(super) fn control_loop(
    shared: &Arc<WorkerShared>,
    rx: &Receiver<Control>,
    tx: &Sender<Control>,
) -> Result<(), WorkerError> {
    let mut early: Vec<MigrationData> = Vec::new();
    let mut rng = independent_stream(shared.settings.seed, u64::from(shared.me.0) << 16 | 0xc0de);
    while let Ok(event) = rx.recv() {
        match event {
            Control::Planner(Message::Shutdown) => return Ok(()),
            Control::Planner(Message::Install(plan)) => {
                let (routing, held) = shared.install(*plan);
                shared.sched.resume(shared.limits(&routing));
                shared.admit(held, &mut rng);
            }
            Control::Planner(Message::Migrate(order)) => {
                migrate(shared, *order, rx, tx, &mut early, &mut rng)
            }
            Control::Planner(Message::Checkpoint(order)) => checkpoint::checkpoint(shared, order),
            Control::Planner(Message::Rollback(generation)) => {
                early.clear();
                checkpoint::roll_back(shared, generation)
            }
            Control::Planner(Message::Restore(order)) => checkpoint::restore(shared, *order),
            Control::Planner(Message::PeerJoined { worker, addr }) => {
                shared.ensure_link(worker);
                if worker < shared.me {
                    connect_peer(shared.clone(), worker, addr, tx.clone());
                }
            }
            Control::Planner(Message::PeerLeft(w)) => shared.drop_link(w),
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
                tracing::debug!("worker {}: connected to worker {w}", shared.me);
                shared.planner.send(Message::MeshReady(connected_peers(shared)));
            }
            Control::PeerDown(w, why) => {
                tracing::warn!("worker {}: connection to worker {w} lost: {why}", shared.me);
            }
            Control::PlannerDown(why) => return Err(WorkerError::PlannerLost(why)),
        }
    }
    Ok(())
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
