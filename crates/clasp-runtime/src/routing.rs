//! Where a record goes: the placement and key assignment of one epoch, flattened into tables
//! that the scheduling engines of the planner and of every worker consult per record.

pub use clasp_wire::runtime::RoutingPlan;

use clasp_core::hash::key_group;
use clasp_core::placement::RouteTable;
use clasp_core::rng::SeededRng;
use clasp_core::{OperatorId, Pipeline, WorkerId};

/// Routing tables of one epoch.
#[derive(Clone, Debug)]
pub struct Routing {
    /// The epoch.
    pub epoch: u64,
    /// Key groups per keyed operator.
    pub groups: u32,
    table: RouteTable,
    plan: RoutingPlan,
}

impl Routing {
    /// Builds the tables of `plan` for pipeline `p`.
    pub fn new(p: &Pipeline, plan: RoutingPlan) -> Self {
        let table = RouteTable::new(p, &plan.placement, &plan.keys);
        Self { epoch: plan.epoch, groups: plan.keys.groups.max(1), table, plan }
    }

    /// The plan these tables were built from.
    pub fn plan(&self) -> &RoutingPlan {
        &self.plan
    }

    /// Whether `op` routes by key.
    #[inline]
    pub fn is_keyed(&self, op: OperatorId) -> bool {
        self.table.keyed(op)
    }

    /// The worker owning the key with hash `hash` of keyed operator `op`.
    #[inline]
    pub fn owner(&self, op: OperatorId, hash: u64) -> WorkerId {
        self.table.owner(op, key_group(hash, self.groups))
    }

    /// A worker for one request of stateless operator `op`, drawn by share; a keyed operator's
    /// requests are routed by [`Routing::owner`] instead.
    #[inline]
    pub fn draw(&self, op: OperatorId, rng: &mut SeededRng) -> WorkerId {
        self.table.draw(op, rng)
    }

    /// Whether `worker` runs `op` in this epoch.
    pub fn hosts(&self, op: OperatorId, worker: WorkerId) -> bool {
        self.table.hosts(op, worker)
    }

    /// Executor instances of `op` on `worker`.
    pub fn instances(&self, op: OperatorId, worker: WorkerId) -> u32 {
        self.table.instances(op, worker)
    }

    /// Workers used by the placement.
    pub fn workers(&self) -> u32 {
        self.table.workers()
    }
}
