//! Checkpoints and recovery as transitions of the scaling state machine.
//!
//! Two more observations go in — a checkpoint committed (or failed), workers lost — and two
//! more steps come out: take checkpoint *n* (when one is due: every so many seconds or input
//! requests, never while a rescale, a recovery or another checkpoint is in flight, and
//! postponed while a backlog would hold its boundary for long — see [`MAX_BOUNDARY_DRAIN_S`]) and
//! [`Recover`] (the placement to restore the last committed checkpoint onto).
//!
//! ```text
//!   Watching ──checkpoint due──▶ Checkpointing ──committed / failed──▶ Watching
//!   any phase ──workers lost──▶ Recovering ──recovered──▶ Watching
//! ```
//!
//! A loss cancels whatever was in flight: a rescale did not happen (the cluster is rolled back
//! to the checkpoint, which holds the placement before it), a checkpoint never commits.
//! Replacement workers take the lost workers' ids, so the recovery plans for as many workers
//! as the cluster ran; the active policy places the pipeline on them for the rate of the
//! decision window (`static` keeps its placement), and the key groups go to their new
//! owners with as few moves as the assignment allows.

use super::{Autoscaler, Mode, Phase};
use crate::Policy;
use crate::error::PlanError;
use crate::keys::{assign_keys, remap_workers};
use clasp_core::placement::{KeyAssignment, Placement};
use clasp_core::{Pipeline, WorkerId};
use serde::{Deserialize, Serialize};

/// A due checkpoint waits while its boundary would wait longer than this (s) for the chains
/// in flight to complete. The boundary holds the control loop until they have, so under a
/// backlog no rescale could happen meanwhile; the backlog grows as long as the cluster is too
/// small, and so does the next boundary's wait. The scaling decision goes first instead
/// (with a policy that rescales and [`Mode::Act`]).
pub const MAX_BOUNDARY_DRAIN_S: f64 = 1.0;

/// A postponed checkpoint is taken however long its boundary waits once this many cadences
/// have passed since the last one (so a cluster that cannot catch up still checkpoints).
pub const MAX_POSTPONED_CADENCES: f64 = 2.0;

/// When checkpoints are due.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointEvery {
    /// Every so many seconds since the last one committed (or the start).
    Seconds(f64),
    /// Every so many input requests since the last one committed (or the start).
    Requests(u64),
}

impl std::str::FromStr for CheckpointEvery {
    type Err = String;

    /// `10s`, `500ms`, `2m` (a duration) or `requests:N`.
    fn from_str(s: &str) -> Result<Self, String> {
        if let Some(n) = s.strip_prefix("requests:") {
            let n: u64 = n
                .trim()
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| format!("`{s}`: `{n}` is not a request count above 0"))?;
            return Ok(Self::Requests(n));
        }
        let d = humantime::parse_duration(s.trim())
            .map_err(|e| format!("`{s}`: expected a duration (10s, 500ms) or requests:N: {e}"))?;
        if d.is_zero() || d.as_secs_f64() > crate::triggers::MAX_DURATION_S {
            return Err(format!("`{s}`: the interval must be above 0 and at most a year"));
        }
        Ok(Self::Seconds(d.as_secs_f64()))
    }
}

/// Restoring the last committed checkpoint onto a placement.
#[derive(Clone, Debug, PartialEq)]
pub struct Recover {
    /// The epoch of the routing after the recovery (above every epoch used before).
    pub epoch: u64,
    /// The workers lost.
    pub lost: Vec<WorkerId>,
    /// The checkpoint to restore (`None`: none committed yet; start over).
    pub checkpoint: Option<u64>,
    /// Workers after the recovery (replacements take the lost ids).
    pub workers: u32,
    /// The placement to restore onto.
    pub placement: Placement,
    /// The owners of every key group after it.
    pub keys: KeyAssignment,
}

/// The checkpointing and recovery part of the state machine.
#[derive(Clone, Debug, Default)]
pub(super) struct FaultState {
    every: Option<CheckpointEvery>,
    next_id: u64,
    in_flight: Option<u64>,
    /// The last committed checkpoint: id, time (s), input requests.
    committed: Option<(u64, f64, u64)>,
    /// Where the cadence counts from: the start, or the last commit or recovery.
    since: (f64, u64),
    recovering: Option<Box<Recover>>,
    recoveries: u32,
}

impl Autoscaler {
    /// Takes a checkpoint as `every` says (`None`: never), numbering them from `first_id`;
    /// `last` is a checkpoint already committed (a resumed job's).
    pub fn set_checkpoints(
        &mut self,
        every: Option<CheckpointEvery>,
        first_id: u64,
        last: Option<u64>,
    ) {
        self.fault.every = every;
        self.fault.next_id = first_id;
        self.fault.committed = last.map(|id| (id, self.now, 0));
    }

    /// Whether a recovery is in flight.
    pub fn recovering(&self) -> bool {
        self.fault.recovering.is_some()
    }

    /// Recoveries so far.
    pub fn recoveries(&self) -> u32 {
        self.fault.recoveries
    }

    /// The last committed checkpoint.
    pub fn committed_checkpoint(&self) -> Option<u64> {
        self.fault.committed.map(|(id, ..)| id)
    }

    /// The checkpoint to take now, at `t` (s) after `requests` input requests, if one is due;
    /// report its outcome with [`Autoscaler::checkpoint_committed`] or
    /// [`Autoscaler::checkpoint_failed`]. `drain_s` is how long its boundary would wait for
    /// the chains in flight (in flight / throughput): above [`MAX_BOUNDARY_DRAIN_S`] a due
    /// checkpoint is postponed, for at most [`MAX_POSTPONED_CADENCES`] cadences.
    pub fn checkpoint_due(&mut self, t: f64, requests: u64, drain_s: f64) -> Option<u64> {
        let every = self.fault.every?;
        if self.fault.in_flight.is_some() || self.recovering() || self.rescaling() {
            return None;
        }
        let (t0, r0) = self.fault.since;
        let cadences = match every {
            CheckpointEvery::Seconds(s) => (t - t0 + 1e-9) / s,
            CheckpointEvery::Requests(n) => requests.saturating_sub(r0) as f64 / n as f64,
        };
        // Only a rescale is worth waiting for; a NaN drain (nothing measured yet) does not
        // postpone.
        let may_rescale = self.cfg.policy != Policy::Static && self.cfg.mode == Mode::Act;
        let long_drain = may_rescale && drain_s > MAX_BOUNDARY_DRAIN_S;
        let due = cadences >= 1.0 && (!long_drain || cadences >= MAX_POSTPONED_CADENCES);
        due.then(|| self.next_checkpoint())
    }

    /// A checkpoint asked for from outside (the last one of a finished input); `None` while
    /// another, a rescale or a recovery is in flight.
    pub fn checkpoint_now(&mut self) -> Option<u64> {
        if self.fault.in_flight.is_some() || self.recovering() || self.rescaling() {
            return None;
        }
        Some(self.next_checkpoint())
    }

    fn next_checkpoint(&mut self) -> u64 {
        let id = self.fault.next_id;
        self.fault.next_id += 1;
        self.fault.in_flight = Some(id);
        id
    }

    /// Checkpoint `id` committed; its boundary was at `t` (s) after `requests` requests.
    pub fn checkpoint_committed(&mut self, id: u64, t: f64, requests: u64) {
        if self.fault.in_flight == Some(id) {
            self.fault.in_flight = None;
            self.fault.committed = Some((id, t, requests));
            self.fault.since = (t, requests);
        }
    }

    /// Checkpoint `id` will not commit; the next one is due at once.
    pub fn checkpoint_failed(&mut self, id: u64) {
        if self.fault.in_flight == Some(id) {
            self.fault.in_flight = None;
        }
    }

    /// Workers `lost` are gone: what to restore onto. Whatever was in flight is cancelled.
    pub fn workers_lost(&mut self, p: &Pipeline, lost: &[WorkerId]) -> Result<Recover, PlanError> {
        let mut epoch = self.epoch;
        if let Phase::Rescaling(r) = std::mem::replace(&mut self.phase, Phase::Watching) {
            epoch = epoch.max(r.epoch);
        }
        if let Some(r) = &self.fault.recovering {
            epoch = epoch.max(r.epoch);
        }
        self.fault.in_flight = None;
        let workers = self.placement.workers.max(1);
        let placement = self.recovery_placement(p, workers);
        let keys = assign_keys(p, &placement, self.keys.groups, Some(&self.keys));
        let mut all_lost: Vec<WorkerId> =
            self.fault.recovering.take().map(|r| r.lost).unwrap_or_default();
        for &w in lost {
            if !all_lost.contains(&w) {
                all_lost.push(w);
            }
        }
        let recover = Recover {
            epoch: epoch + 1,
            lost: all_lost,
            checkpoint: self.committed_checkpoint(),
            workers,
            placement,
            keys,
        };
        self.fault.recovering = Some(Box::new(recover.clone()));
        Ok(recover)
    }

    /// The active policy's placement over `workers` workers for the window's rate, relabelled
    /// to move as little as possible; the current placement if it cannot decide.
    fn recovery_placement(&self, p: &Pipeline, workers: u32) -> Placement {
        if self.cfg.policy == Policy::Static {
            return self.placement.clone();
        }
        let stats = self.window_stats(p);
        if stats.throughput <= 0.0 {
            return self.placement.clone();
        }
        let input = self.plan_input(p, &stats, stats.input_rate.max(stats.throughput));
        match crate::policy::clasp_on_workers(self.cfg.policy, &input, workers) {
            Ok(d) if d.placement.workers == workers => remap_workers(&self.placement, d.placement),
            _ => self.placement.clone(),
        }
    }

    /// The recovery in flight finished at `t` (s): the cluster runs its placement, and the
    /// restored checkpoint counts as the last one (at `requests` input requests).
    pub fn recovered(&mut self, t: f64, requests: u64) {
        if let Some(r) = self.fault.recovering.take() {
            self.epoch = r.epoch;
            self.placement = r.placement;
            self.keys = r.keys;
            self.window_start = t;
            self.fault.since = (t, requests);
            self.fault.recoveries += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autoscaler::{AutoscalerConfig, Interval};
    use crate::testing::pipeline;

    const SPEC: &str = "[[source]]\nname = \"in\"\n\
        [[operator]]\nname = \"a\"\nkind = \"map\"\n\
        [[operator]]\nname = \"b\"\nkind = \"reduce\"\nstateful = true\nkey = \"k\"\n\
        [[stream]]\nfrom = \"in\"\nto = \"a\"\n[[stream]]\nfrom = \"a\"\nto = \"b\"\n";

    fn scaler(policy: Policy, workers: u32) -> (Autoscaler, Pipeline) {
        let p = pipeline(SPEC);
        let placement = if workers == 1 {
            Placement::single_worker(&p, &[4, 4])
        } else {
            Placement::even(&p, workers, 4)
        };
        let keys = assign_keys(&p, &placement, 64, None);
        let cfg = AutoscalerConfig::with_policy(policy);
        (Autoscaler::new(cfg, &p, placement, keys, 1).unwrap(), p)
    }

    /// An interval with nothing measured, at `t` after `requests` requests.
    fn idle(a: &mut Autoscaler, p: &Pipeline, t: f64, requests: u64) {
        let interval = Interval { t, interval_s: 1.0, requests, workers: 1, ..Interval::default() };
        a.step(p, interval);
    }

    #[test]
    fn checkpoints_are_due_by_time_or_requests_one_at_a_time() {
        let (mut a, p) = scaler(Policy::Static, 1);
        assert_eq!(a.checkpoint_due(100.0, 100, 0.0), None, "off by default");
        a.set_checkpoints(Some(CheckpointEvery::Seconds(2.0)), 1, None);
        idle(&mut a, &p, 1.0, 10);
        assert_eq!(a.checkpoint_due(1.0, 10, 0.0), None);
        assert_eq!(a.checkpoint_due(2.0, 20, 0.0), Some(1));
        assert_eq!(a.checkpoint_due(3.0, 30, 0.0), None, "one in flight at a time");
        a.checkpoint_committed(1, 2.0, 20);
        assert_eq!(a.committed_checkpoint(), Some(1));
        assert_eq!(a.checkpoint_due(3.9, 39, 0.0), None, "2 s after the last commit");
        assert_eq!(a.checkpoint_due(4.0, 40, 0.0), Some(2));
        a.checkpoint_failed(2);
        assert_eq!(a.committed_checkpoint(), Some(1), "a failed checkpoint commits nothing");
        assert_eq!(a.checkpoint_due(4.1, 41, 0.0), Some(3), "due again at once");

        let (mut b, _) = scaler(Policy::Static, 1);
        b.set_checkpoints(Some(CheckpointEvery::Requests(500)), 7, Some(6));
        assert_eq!(b.committed_checkpoint(), Some(6));
        assert_eq!(b.checkpoint_due(50.0, 499, 0.0), None);
        assert_eq!(b.checkpoint_due(50.0, 500, 0.0), Some(7));
        b.checkpoint_committed(7, 50.0, 500);
        assert_eq!(b.checkpoint_due(60.0, 999, 0.0), None);
        assert_eq!(b.checkpoint_due(60.0, 1000, 0.0), Some(8));
    }

    #[test]
    fn a_checkpoint_waits_out_a_long_drain_for_at_most_the_bound() {
        let (mut a, p) = scaler(Policy::Clasp, 1);
        a.set_checkpoints(Some(CheckpointEvery::Seconds(10.0)), 1, None);
        idle(&mut a, &p, 1.0, 10);
        let long = MAX_BOUNDARY_DRAIN_S + 0.5;
        assert_eq!(a.checkpoint_due(10.0, 100, long), None, "postponed");
        assert_eq!(a.checkpoint_due(12.0, 120, long), None, "still postponed");
        assert_eq!(
            a.checkpoint_due(13.0, 130, MAX_BOUNDARY_DRAIN_S),
            Some(1),
            "the backlog drained"
        );
        a.checkpoint_committed(1, 13.0, 130);
        let overdue = 13.0 + 10.0 * MAX_POSTPONED_CADENCES;
        assert_eq!(a.checkpoint_due(overdue - 0.5, 300, long), None);
        assert_eq!(a.checkpoint_due(overdue, 310, long), Some(2), "taken however long it waits");
        a.checkpoint_committed(2, overdue, 310);
        assert_eq!(
            a.checkpoint_due(overdue + 10.0, 400, f64::NAN),
            Some(3),
            "no throughput measured yet"
        );

        let (mut b, _) = scaler(Policy::Clasp, 1);
        b.set_checkpoints(Some(CheckpointEvery::Requests(500)), 1, None);
        assert_eq!(b.checkpoint_due(1.0, 999, long), None);
        assert_eq!(b.checkpoint_due(1.0, 1000, long), Some(1));

        // Nothing would rescale meanwhile: the checkpoint does not wait.
        let (mut fixed, _) = scaler(Policy::Static, 1);
        fixed.set_checkpoints(Some(CheckpointEvery::Seconds(10.0)), 1, None);
        assert_eq!(fixed.checkpoint_due(10.0, 100, long), Some(1));
    }

    #[test]
    fn a_loss_during_a_rescale_cancels_it_and_restores_onto_the_workers_before() {
        let (mut a, p) = scaler(Policy::Clasp, 1);
        a.set_checkpoints(Some(CheckpointEvery::Requests(10)), 1, None);
        let id = a.checkpoint_due(1.0, 10, 0.0).unwrap();
        a.checkpoint_committed(id, 1.0, 10);
        let rescale = a.rescale_to_workers(&p, 3).unwrap();
        assert!(a.rescaling());
        assert_eq!(a.checkpoint_due(5.0, 1000, 0.0), None, "no checkpoint during a rescale");
        let r = a.workers_lost(&p, &[WorkerId(0)]).unwrap();
        assert!(!a.rescaling(), "the rescale is cancelled");
        assert!(a.recovering());
        assert!(r.epoch > rescale.epoch, "{} after {}", r.epoch, rescale.epoch);
        assert_eq!(r.checkpoint, Some(id));
        assert_eq!(r.workers, 1, "the placement before the rescale");
        assert_eq!(r.lost, [WorkerId(0)]);
        assert!(r.placement.check(&p).is_ok());
        // Every key group of the stateful operator has an owner among the workers.
        let owners = &r.keys.owners[1];
        assert_eq!(owners.len(), 64);
        assert!(owners.iter().all(|w| w.0 < r.workers));
        // No decision while recovering.
        assert_eq!(a.checkpoint_due(9.0, 5000, 0.0), None);
        assert!(matches!(
            a.step(&p, Interval { t: 9.0, interval_s: 1.0, ..Interval::default() }),
            super::super::Step::Idle
        ));
        a.recovered(10.0, 10);
        assert!(!a.recovering());
        assert_eq!((a.epoch(), a.recoveries()), (r.epoch, 1));
        assert_eq!(a.placement(), &r.placement);
        assert_eq!(a.checkpoint_due(10.0, 19, 0.0), None, "counted from the restored checkpoint");
        assert!(a.checkpoint_due(10.0, 20, 0.0).is_some());
    }

    #[test]
    fn a_rescale_that_failed_before_the_loss_still_gets_a_newer_epoch() {
        // The runtime reports the failed migration first, then the loss that caused it:
        // workers may already have installed the failed rescale's epoch.
        let (mut a, p) = scaler(Policy::Clasp, 1);
        let rescale = a.rescale_to_workers(&p, 3).unwrap();
        a.rescale_failed();
        assert!(!a.rescaling());
        assert_eq!(a.workers_lost(&p, &[WorkerId(2)]).unwrap().epoch, rescale.epoch + 1);
        a.recovered(1.0, 0);
        let next = a.rescale_to_workers(&p, 2).unwrap();
        assert!(next.epoch > rescale.epoch + 1, "{} after {}", next.epoch, rescale.epoch);
    }

    #[test]
    fn a_loss_during_a_checkpoint_restores_the_one_before_and_losses_accumulate() {
        let (mut a, p) = scaler(Policy::Static, 3);
        a.set_checkpoints(Some(CheckpointEvery::Seconds(1.0)), 1, None);
        assert_eq!(a.workers_lost(&p, &[WorkerId(2)]).unwrap().checkpoint, None, "none yet");
        a.recovered(0.5, 0);
        let first = a.checkpoint_due(2.0, 5, 0.0).unwrap();
        a.checkpoint_committed(first, 2.0, 5);
        let second = a.checkpoint_due(3.0, 9, 0.0).unwrap();
        let r1 = a.workers_lost(&p, &[WorkerId(1)]).unwrap();
        assert_eq!(r1.checkpoint, Some(first));
        a.checkpoint_committed(second, 3.0, 9);
        assert_eq!(a.committed_checkpoint(), Some(first), "the cancelled one never commits");
        // Another worker lost before the recovery finished: one recovery for both.
        let r2 = a.workers_lost(&p, &[WorkerId(0)]).unwrap();
        assert!(r2.epoch > r1.epoch);
        assert_eq!(r2.lost, [WorkerId(1), WorkerId(0)]);
        assert_eq!(r2.workers, 3);
        assert_eq!(r2.placement, *a.placement(), "static keeps its placement");
        a.recovered(4.0, 9);
        assert_eq!(a.recoveries(), 2);
    }

    #[test]
    fn checkpoint_intervals_parse_with_clear_errors() {
        assert_eq!("10s".parse::<CheckpointEvery>(), Ok(CheckpointEvery::Seconds(10.0)));
        assert_eq!("500ms".parse::<CheckpointEvery>(), Ok(CheckpointEvery::Seconds(0.5)));
        assert_eq!("requests:2000".parse::<CheckpointEvery>(), Ok(CheckpointEvery::Requests(2000)));
        assert!("requests:0".parse::<CheckpointEvery>().unwrap_err().contains("above 0"));
        assert!("0s".parse::<CheckpointEvery>().is_err());
        assert!("soon".parse::<CheckpointEvery>().unwrap_err().contains("requests:N"));
    }
}
