//! Failures caused on purpose, for tests and measurements: `kill -9` of a worker (seeded
//! choice among the running ones) or of the planner itself, at points counted in events —
//! input requests, checkpoint boundaries, migrations, recoveries' restores — never in time.

use clasp_core::WorkerId;
use clasp_core::rng::SeededRng;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rand::{RngExt, SeedableRng};

/// When to kill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KillPoint {
    /// Once this many input requests entered the planner.
    Requests(u64),
    /// During the n-th checkpoint of the run (1-based): after its boundary, while the
    /// workers write.
    Checkpoint(u64),
    /// During the n-th migration of the run (1-based): after its orders went out.
    Migration(u64),
    /// During the n-th restore of a recovery (1-based; a recovery restarted by a loss
    /// restores again): once the workers rolled back and joined, as the orders go out.
    Restore(u64),
}

impl std::str::FromStr for KillPoint {
    type Err = String;

    /// `requests:N`, `checkpoint:N`, `migration:N` or `restore:N`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, n) = s
            .split_once(':')
            .ok_or_else(|| format!("`{s}`: expected KIND:N, e.g. checkpoint:2"))?;
        let n: u64 = n.trim().parse().map_err(|_| format!("`{s}`: `{n}` is not a count"))?;
        match kind.trim() {
            "requests" => Ok(Self::Requests(n)),
            "checkpoint" if n > 0 => Ok(Self::Checkpoint(n)),
            "migration" if n > 0 => Ok(Self::Migration(n)),
            "restore" if n > 0 => Ok(Self::Restore(n)),
            "checkpoint" | "migration" | "restore" => Err(format!("`{s}`: counts start at 1")),
            other => {
                Err(format!("`{s}`: `{other}` is not requests, checkpoint, migration or restore"))
            }
        }
    }
}

/// The failures of a run.
#[derive(Clone, Debug, Default)]
pub struct KillPlan {
    /// When to kill a worker (drawn by `seed` among the running ones).
    pub workers: Vec<KillPoint>,
    /// When to kill the planner (this process).
    pub planner: Option<KillPoint>,
    /// Seed of the choice of worker.
    pub seed: u64,
}

impl KillPlan {
    /// Whether anything is to be killed.
    pub fn is_empty(&self) -> bool {
        self.workers.is_empty() && self.planner.is_none()
    }
}

/// The plan as it is carried out.
#[derive(Debug)]
pub(crate) struct KillSwitch {
    plan: KillPlan,
    rng: SeededRng,
    checkpoints: u64,
    migrations: u64,
    restores: u64,
    /// Workers killed so far, and when.
    pub(crate) killed: Vec<(WorkerId, std::time::Instant)>,
}

impl KillSwitch {
    pub(crate) fn new(plan: KillPlan) -> Self {
        let rng = SeededRng::seed_from_u64(plan.seed ^ 0x6b11);
        Self { plan, rng, checkpoints: 0, migrations: 0, restores: 0, killed: Vec::new() }
    }

    /// Kills what is due once `requests` input requests entered.
    pub(crate) fn at_requests(&mut self, requests: u64, workers: &[(WorkerId, u32)]) {
        self.fire(|p| matches!(p, KillPoint::Requests(n) if requests >= n), workers);
    }

    /// A checkpoint's boundary was just taken.
    pub(crate) fn at_checkpoint(&mut self, workers: &[(WorkerId, u32)]) {
        self.checkpoints += 1;
        let n = self.checkpoints;
        self.fire(|p| p == KillPoint::Checkpoint(n), workers);
    }

    /// A migration's orders just went out.
    pub(crate) fn at_migration(&mut self, workers: &[(WorkerId, u32)]) {
        self.migrations += 1;
        let n = self.migrations;
        self.fire(|p| p == KillPoint::Migration(n), workers);
    }

    /// A recovery's restore orders are about to go out.
    pub(crate) fn at_restore(&mut self, workers: &[(WorkerId, u32)]) {
        self.restores += 1;
        let n = self.restores;
        self.fire(|p| p == KillPoint::Restore(n), workers);
    }

    fn fire(&mut self, due: impl Fn(KillPoint) -> bool, workers: &[(WorkerId, u32)]) {
        if self.plan.planner.is_some_and(&due) {
            tracing::warn!("fault injection: killing the planner (pid {})", std::process::id());
            let _ = kill(Pid::this(), Signal::SIGKILL);
        }
        let before = self.plan.workers.len();
        self.plan.workers.retain(|p| !due(*p));
        for _ in self.plan.workers.len()..before {
            if workers.is_empty() {
                return;
            }
            let (w, pid) = workers[self.rng.random_range(0..workers.len())];
            tracing::warn!("fault injection: kill -9 worker {w} (pid {pid})");
            if let Err(e) = kill(Pid::from_raw(pid as i32), Signal::SIGKILL) {
                tracing::error!("fault injection: killing pid {pid}: {e}");
            }
            self.killed.push((w, std::time::Instant::now()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_points_parse_with_clear_errors() {
        assert_eq!("requests:500".parse(), Ok(KillPoint::Requests(500)));
        assert_eq!("checkpoint:2".parse(), Ok(KillPoint::Checkpoint(2)));
        assert_eq!("migration:1".parse(), Ok(KillPoint::Migration(1)));
        assert_eq!("restore:2".parse(), Ok(KillPoint::Restore(2)));
        assert!("restore:0".parse::<KillPoint>().unwrap_err().contains("start at 1"));
        assert!("checkpoint:0".parse::<KillPoint>().unwrap_err().contains("start at 1"));
        assert!(
            "lunch:1"
                .parse::<KillPoint>()
                .unwrap_err()
                .contains("requests, checkpoint, migration or restore")
        );
        assert!("5".parse::<KillPoint>().unwrap_err().contains("KIND:N"));
    }
}
