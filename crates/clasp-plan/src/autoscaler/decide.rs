//! What the autoscaler does after a trigger: the policy's decision, relabelled to move as
//! little as possible, then the checks that keep it from flapping — a scale-in must free enough
//! capacity (a utilization band below the budget, a minimum gain) and is carried out only after
//! it was still wanted `scale_in_delay_s` later (lazy, as the Flink autoscaler's
//! `scale-down.interval`); a change back within the cooldown is held back — and finally the
//! step: unchanged, install, rescale or recommendation.

use super::{Autoscaler, Mode, Phase, Recommendation, Rescale, Step, UNTHROTTLED_RATE, Unchanged};
use crate::error::PlanError;
use crate::keys::remap_workers;
use crate::migration::plan_migration;
use crate::triggers::{Reason, Trigger};
use crate::weighted_keys::{assign_keys_weighted, imbalance};
use crate::{Decision, PlanInput};
use clasp_core::Pipeline;
use clasp_core::placement::{KeyAssignment, MigrationPlan, Placement};
use clasp_core::stats::ObservedStats;

/// A scale-in decided and waiting for its delay to pass.
#[derive(Clone, Copy, Debug)]
pub(super) struct PendingScaleIn {
    /// When it was first decided (s).
    pub since: f64,
    /// The trigger it came from.
    pub trigger: Trigger,
}

/// A placement on the same workers is rescaled to only when some operator's fraction on some
/// worker moves by more than this.
pub const MIN_MOVE: f64 = 0.1;

/// Key groups are rebalanced on the same workers when some worker's share of a keyed
/// operator's observed load strays more than this from its fraction.
pub const REBALANCE: f64 = 0.1;

impl Autoscaler {
    /// The step after `trigger`.
    pub(super) fn decide(&mut self, p: &Pipeline, trigger: Trigger) -> Step {
        let now = self.now;
        let (target, planned) = if self.cfg.unthrottled {
            (UNTHROTTLED_RATE, UNTHROTTLED_RATE)
        } else {
            (trigger.target_rate, self.planned_rate(&trigger))
        };
        let from = self.placement.workers;
        let stats = self.window_stats(p);
        let decision = match self.policy_decision(p, &stats, planned) {
            Ok(d) => {
                let d = self.meet_slo(p, &stats, d, &trigger);
                self.meet_measured_capacity(p, &stats, &trigger, d)
            }
            Err(e) => {
                self.triggers.planned(now, &trigger, from, from);
                return Step::Unchanged { trigger, why: Unchanged::NoDecision(e) };
            }
        };
        let to = decision.workers;
        if trigger.reason == Reason::Saturated && to < from {
            // Not counted as planned: the rate the configuration was sized for stays, and a
            // fall from it fires its own trigger.
            return Step::Unchanged { trigger, why: Unchanged::SaturatedScaleIn };
        }
        if to >= from {
            self.pending_scale_in = None;
        } else if let Some(why) = self.holds_scale_in(&decision, from, trigger) {
            self.triggers.planned(now, &trigger, from, from);
            return Step::Unchanged { trigger, why };
        }
        let placement = remap_workers(&self.placement, decision.placement);
        let migrate = from != to
            || moved_enough(&self.placement, &placement)
            || self.rebalances(p, &placement);
        if !migrate && !instances_changed(&self.placement, &placement) {
            self.triggers.planned(now, &trigger, from, to);
            return Step::Unchanged { trigger, why: Unchanged::Same };
        }
        if migrate && !self.triggers.admits(now, from, to, trigger.target_rate) {
            self.held_back += 1;
            return Step::HeldBack { trigger, from, to };
        }
        self.triggers.planned(now, &trigger, from, to);
        self.pending_scale_in = None;
        if self.cfg.mode == Mode::Recommend {
            let reason = trigger.reason;
            return Step::Recommend(Box::new(Recommendation {
                reason,
                target_rate: target,
                from,
                to,
                migrate,
                placement,
            }));
        }
        if !migrate {
            self.epoch += 1;
            self.placement = placement.clone();
            return Step::Install { trigger, epoch: self.epoch, placement };
        }
        let rescale = self.plan(p, placement, trigger.reason, target);
        self.phase = Phase::Rescaling(Box::new(rescale.clone()));
        Step::Rescale(Box::new(rescale))
    }

    /// The rate the policy plans for after `trigger`: its target, except that CLASP plans the
    /// catch-up in it (the backlog drained within the catch-up time) at full capacity. The
    /// headroom is a margin for a sustained rate's noise; a drain lasts until the caught-up step
    /// back, and planning input + h·catch-up at headroom h asks for input/h + catch-up of
    /// capacity, so the margin itself still drains faster.
    pub(super) fn planned_rate(&self, trigger: &Trigger) -> f64 {
        let catch_up = (trigger.target_rate - trigger.input_rate).max(0.0);
        if self.cfg.policy != crate::Policy::Clasp || catch_up == 0.0 {
            return trigger.target_rate;
        }
        trigger.input_rate + self.cfg.plan.headroom.clamp(0.0, 1.0) * catch_up
    }

    /// Why a scale-in from `from` to `decision.workers` does not go ahead now, if it does not:
    /// it frees too little, or it waits for its delay (the first time it is decided, or until
    /// the delay since then has passed).
    fn holds_scale_in(
        &mut self,
        decision: &Decision,
        from: u32,
        trigger: Trigger,
    ) -> Option<Unchanged> {
        let budget = self.coefficients().capacity * self.cfg.plan.headroom;
        let total: f64 = decision.loads.iter().map(|l| l.load).sum();
        let utilization = total / (f64::from(from) * budget.max(1e-9));
        let gain = f64::from(from - decision.workers) / f64::from(from);
        if utilization >= self.cfg.scale_in_below || gain < self.cfg.min_scale_in_gain {
            self.pending_scale_in = None;
            return Some(Unchanged::Hysteresis { utilization, gain });
        }
        // The step back from a configuration sized for a backlog is planned: it was decided
        // when the backlog was, and waiting only keeps the extra workers.
        if self.cfg.scale_in_delay_s <= 0.0 || trigger.reason == Reason::CaughtUp {
            return None;
        }
        match self.pending_scale_in {
            Some(pending) if self.now - pending.since >= self.cfg.scale_in_delay_s - 1e-9 => None,
            Some(_) => Some(Unchanged::Delayed),
            None => {
                self.pending_scale_in = Some(PendingScaleIn { since: self.now, trigger });
                Some(Unchanged::Delayed)
            }
        }
    }

    /// A pending scale-in whose delay has passed is decided again on the current window: it
    /// goes ahead if it is still wanted.
    pub(super) fn pending_due(&mut self) -> Option<Trigger> {
        let pending = self.pending_scale_in?;
        (self.now - pending.since >= self.cfg.scale_in_delay_s - 1e-9).then(|| {
            let input = self.history.mean_input_rate(self.cfg.triggers.change_for_s);
            Trigger { input_rate: input, target_rate: input, ..pending.trigger }
        })
    }

    /// On a saturated trigger with the CLASP policy: at least the workers the throughput the
    /// saturated cluster completed says the target needs, ⌈from · target / throughput⌉ (up to
    /// the worker limit). The capacity model sized the saturated configuration and is what
    /// fell short; a second plan from it tends to fall short by as much again, so a rise would
    /// be met one saturated step at a time.
    fn meet_measured_capacity(
        &mut self,
        p: &Pipeline,
        stats: &ObservedStats,
        trigger: &Trigger,
        decision: Decision,
    ) -> Decision {
        if trigger.reason != Reason::Saturated || self.cfg.policy != crate::Policy::Clasp {
            return decision;
        }
        let from = self.placement.workers;
        let Some(needed) = measured_workers(from, trigger.target_rate, stats.throughput) else {
            return decision;
        };
        let needed = needed.min(self.cfg.plan.max_workers);
        if needed <= decision.workers {
            return decision;
        }
        let input = self.plan_input(p, stats, decision.requested_rate);
        crate::policy::clasp_on_workers(crate::Policy::Clasp, &input, needed).unwrap_or(decision)
    }

    /// With a latency SLO and the CLASP policy: CLASP's placement on the fewest workers that
    /// hold the trigger's target at full capacity and whose predicted p95 at its `input_rate`
    /// (its backlog's catch-up aside) meets the SLO — the objective in place of the headroom's
    /// margin, so fewer workers than the budget's count when their queues keep it (the fewest
    /// that help when none does). A saturated trigger's measured capacity is met after it.
    fn meet_slo(
        &mut self,
        p: &Pipeline,
        stats: &ObservedStats,
        d: Decision,
        t: &Trigger,
    ) -> Decision {
        let Some(slo_ms) = self.cfg.latency_slo_ms else { return d };
        if self.cfg.policy != crate::Policy::Clasp || self.cfg.unthrottled {
            return d;
        }
        let input = self.plan_input(p, stats, t.target_rate);
        crate::slo::fewest_workers_within(&input, slo_ms, t.input_rate).unwrap_or(d)
    }

    /// The policy's decision for `target` from `stats`.
    pub(super) fn policy_decision(
        &mut self,
        p: &Pipeline,
        stats: &ObservedStats,
        target: f64,
    ) -> Result<Decision, PlanError> {
        if stats.throughput.is_nan() || stats.throughput <= 0.0 {
            return Err(PlanError::NoThroughput(stats.throughput));
        }
        let input = PlanInput {
            pipeline: p,
            stats,
            target_rate: target,
            coefficients: self.coefficients(),
            config: &self.cfg.plan,
            current: Some(&self.placement),
        };
        self.cfg.policy.decide_cached(&input, &mut self.cache)
    }

    /// Records per key group over the decision window.
    fn group_loads(&self, p: &Pipeline) -> Vec<Vec<f64>> {
        let from = (self.now - self.cfg.window_s).max(self.window_start);
        self.history.group_loads((from, self.now), p.operators.len(), self.keys.groups)
    }

    /// Whether the running key groups carry load so unevenly that `placement` (on the same
    /// workers) is worth a rescale for its key assignment alone: some worker's share of a keyed
    /// operator's load is more than [`REBALANCE`] away from its fraction and the load-weighted
    /// assignment brings it closer by half.
    fn rebalances(&self, p: &Pipeline, placement: &Placement) -> bool {
        let loads = self.group_loads(p);
        let now = imbalance(&self.placement, &self.keys, &loads);
        if now <= REBALANCE {
            return false;
        }
        let keys = assign_keys_weighted(p, placement, self.keys.groups, Some(&self.keys), &loads);
        imbalance(placement, &keys, &loads) < now / 2.0
    }

    /// The rescale from the running configuration to `placement`.
    pub(super) fn plan(
        &self,
        p: &Pipeline,
        placement: Placement,
        reason: Reason,
        target_rate: f64,
    ) -> Rescale {
        let loads = self.group_loads(p);
        let (keys, migration) = plan_rescale(p, &self.placement, &self.keys, &placement, &loads);
        Rescale {
            epoch: self.epoch + 1,
            reason,
            target_rate,
            from: self.placement.workers,
            to: placement.workers,
            placement,
            keys,
            migration,
        }
    }
}

/// The key assignment of `new` (moving as few key groups as possible from `keys`, each
/// worker's groups carrying its fraction of `loads`, the records per group observed, where
/// any were) and the migration plan from `current` to it: what every rescale executes, whoever
/// decided it.
pub fn plan_rescale(
    p: &Pipeline,
    current: &Placement,
    keys: &KeyAssignment,
    new: &Placement,
    loads: &[Vec<f64>],
) -> (KeyAssignment, MigrationPlan) {
    let next = assign_keys_weighted(p, new, keys.groups, Some(keys), loads);
    let migration = plan_migration(p, current, keys, new, &next);
    (next, migration)
}

/// ⌈from · target / throughput⌉: the workers `target` needs if `from` workers complete
/// `throughput` (none when they keep up or completed nothing).
pub fn measured_workers(from: u32, target: f64, throughput: f64) -> Option<u32> {
    if !(throughput.is_finite() && throughput > 0.0 && target.is_finite()) || throughput >= target {
        return None;
    }
    let needed = (f64::from(from) * target / throughput).ceil();
    Some(needed.min(f64::from(u32::MAX)) as u32)
}

/// Whether some operator's fraction on some worker differs by more than [`MIN_MOVE`].
pub fn moved_enough(old: &Placement, new: &Placement) -> bool {
    let fraction = |ops: &Placement, o: usize, w: u32| {
        ops.operators[o].shares.iter().find(|s| s.worker.0 == w).map_or(0.0, |s| s.fraction)
    };
    (0..old.operators.len()).any(|o| {
        (0..old.workers.max(new.workers))
            .any(|w| (fraction(old, o, w) - fraction(new, o, w)).abs() > MIN_MOVE)
    })
}

/// Whether some operator's instances on some worker differ.
pub fn instances_changed(old: &Placement, new: &Placement) -> bool {
    old.operators.iter().zip(&new.operators).any(|(a, b)| {
        b.shares.iter().any(|s| {
            a.shares.iter().find(|x| x.worker == s.worker).map_or(0, |x| x.instances) != s.instances
        })
    })
}
