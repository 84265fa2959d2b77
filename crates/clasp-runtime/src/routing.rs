//! Where a record goes: the placement and key assignment of one epoch, flattened into tables
//! that the scheduling engines of the planner and of every worker consult per record.

use clasp_core::hash::key_group;
use clasp_core::placement::{KeyAssignment, Placement};
use clasp_core::rng::SplitMix64;
use clasp_core::{OperatorId, Pipeline, WorkerId};
use serde::{Deserialize, Serialize};

/// A placement and key assignment, as broadcast by the planner.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoutingPlan {
    /// Increases with every new placement.
    pub epoch: u64,
    /// Shares and instances per operator.
    pub placement: Placement,
    /// Owners of key groups.
    pub keys: KeyAssignment,
}

#[derive(Clone, Debug)]
enum Route {
    /// Keyed operator: the owner of each key group.
    Keyed(Vec<WorkerId>),
    /// Stateless operator: workers and their cumulative fractions, for a weighted draw.
    Shares { workers: Vec<WorkerId>, cumulative: Vec<f64> },
}

/// Routing tables of one epoch.
#[derive(Clone, Debug)]
pub struct Routing {
    /// The epoch.
    pub epoch: u64,
    /// Key groups per keyed operator.
    pub groups: u32,
    routes: Vec<Route>,
    plan: RoutingPlan,
}

impl Routing {
    /// Builds the tables of `plan` for pipeline `p`.
    pub fn new(p: &Pipeline, plan: RoutingPlan) -> Self {
        let routes = p
            .operators
            .iter()
            .map(|op| {
                let owners = plan.keys.owners.get(op.id.index()).filter(|o| !o.is_empty());
                match owners {
                    Some(owners) if op.stateful => Route::Keyed(owners.clone()),
                    _ => {
                        let shares = &plan.placement.operators[op.id.index()].shares;
                        let mut acc = 0.0;
                        let cumulative = shares
                            .iter()
                            .map(|s| {
                                acc += s.fraction;
                                acc
                            })
                            .collect();
                        Route::Shares {
                            workers: shares.iter().map(|s| s.worker).collect(),
                            cumulative,
                        }
                    }
                }
            })
            .collect();
        Self { epoch: plan.epoch, groups: plan.keys.groups, routes, plan }
    }

    /// The plan these tables were built from.
    pub fn plan(&self) -> &RoutingPlan {
        &self.plan
    }

    /// Whether `op` routes by key.
    #[inline]
    pub fn is_keyed(&self, op: OperatorId) -> bool {
        matches!(self.routes[op.index()], Route::Keyed(_))
    }

    /// The worker owning the key with hash `hash` of keyed operator `op`.
    #[inline]
    pub fn owner(&self, op: OperatorId, hash: u64) -> WorkerId {
        match &self.routes[op.index()] {
            Route::Keyed(owners) => owners[key_group(hash, owners.len() as u32).index()],
            Route::Shares { workers, .. } => workers[0],
        }
    }

    /// A worker for one request of stateless operator `op`, drawn by share; a keyed operator's
    /// requests are routed by [`Routing::owner`] instead.
    #[inline]
    pub fn draw(&self, op: OperatorId, rng: &mut SplitMix64) -> WorkerId {
        match &self.routes[op.index()] {
            Route::Shares { workers, cumulative } => {
                if workers.len() == 1 {
                    return workers[0];
                }
                let x = rng.next_f64() * cumulative.last().copied().unwrap_or(1.0);
                let i = cumulative.partition_point(|c| *c <= x).min(workers.len() - 1);
                workers[i]
            }
            Route::Keyed(owners) => owners[0],
        }
    }

    /// Whether `worker` runs `op` in this epoch.
    pub fn hosts(&self, op: OperatorId, worker: WorkerId) -> bool {
        self.plan.placement.operators[op.index()].shares.iter().any(|s| s.worker == worker)
    }

    /// Executor instances of `op` on `worker`.
    pub fn instances(&self, op: OperatorId, worker: WorkerId) -> u32 {
        self.plan.placement.instances(op, worker)
    }

    /// Workers used by the placement.
    pub fn workers(&self) -> u32 {
        self.plan.placement.workers
    }
}
