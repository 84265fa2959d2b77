//! Where a request goes under one placement and key assignment: the same semantics as the
//! runtime's routing tables. A stateful operator's request goes to the owner of its key group;
//! a stateless operator's request goes to a worker drawn in proportion to the operator's
//! fractions σ_o(w).

use crate::error::SimError;
use clasp_core::placement::{KeyAssignment, Placement, RouteTable};
use clasp_core::rng::SplitMix64;
use clasp_core::{KeyGroup, OperatorId, Pipeline, WorkerId};

/// Routing tables of one placement epoch.
#[derive(Clone, Debug)]
pub struct Routing {
    /// Increases with every placement.
    pub epoch: u32,
    /// The placement.
    pub placement: Placement,
    /// The key assignment.
    pub keys: KeyAssignment,
    table: RouteTable,
}

impl Routing {
    /// Tables for `placement` and `keys` of pipeline `p`; the placement must pass
    /// [`Placement::check`] and use at most `max_workers` workers.
    pub fn new(
        p: &Pipeline,
        placement: Placement,
        keys: KeyAssignment,
        epoch: u32,
        max_workers: u32,
    ) -> Result<Self, SimError> {
        placement.check(p).map_err(SimError::Placement)?;
        if placement.workers > max_workers {
            return Err(SimError::Placement(format!(
                "the placement uses {} workers, the cluster has {max_workers}",
                placement.workers
            )));
        }
        let table = RouteTable::new(p, &placement, &keys);
        Ok(Self { epoch, placement, keys, table })
    }

    /// Workers of the placement.
    pub fn workers(&self) -> u32 {
        self.placement.workers
    }

    /// Whether `op` routes by key group.
    #[inline]
    pub fn keyed(&self, op: usize) -> bool {
        self.table.keyed(OperatorId::from(op))
    }

    /// The worker for a request of `op` with key group `group` (keyed operators), or drawn by
    /// share from `rng` (stateless operators).
    #[inline]
    pub fn destination(&self, op: usize, group: u16, rng: &mut SplitMix64) -> u32 {
        let op = OperatorId::from(op);
        if self.table.keyed(op) {
            self.table.owner(op, KeyGroup(u32::from(group))).0
        } else {
            self.table.draw(op, rng).0
        }
    }

    /// Whether worker `w` may run a request of `op` with key group `group`.
    #[inline]
    pub fn owns(&self, w: u32, op: usize, group: u16) -> bool {
        let id = OperatorId::from(op);
        if self.table.keyed(id) {
            self.table.owner(id, KeyGroup(u32::from(group))).0 == w
        } else {
            self.hosts(op, w)
        }
    }

    /// Whether worker `w` runs `op`.
    #[inline]
    pub fn hosts(&self, op: usize, w: u32) -> bool {
        self.table.hosts(OperatorId::from(op), WorkerId(w))
    }

    /// Executor instances of `op` on `w` (0 when it does not run there).
    pub fn instances(&self, op: usize, w: u32) -> u32 {
        self.table.instances(OperatorId::from(op), WorkerId(w))
    }

    /// Instances of `op` over all workers.
    pub fn total_instances(&self, op: OperatorId) -> u32 {
        self.placement.operators[op.index()].shares.iter().map(|s| s.instances.max(1)).sum()
    }

    /// Key groups of `op` owned by `w`.
    pub fn groups_of(&self, op: usize, w: u32) -> usize {
        self.table.groups_of(OperatorId::from(op), WorkerId(w))
    }

    /// The worker with the largest fraction of `op` (where a migration sends the queued
    /// requests of a stateless operator a worker no longer runs).
    pub fn main_host(&self, op: usize) -> u32 {
        clasp_plan::migration::main_host(&self.placement, OperatorId::from(op))
            .map_or(0, |w: WorkerId| w.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{even_placement, pipeline};
    use clasp_plan::keys::assign_keys;

    #[test]
    fn keyed_and_shared_routes_follow_the_placement() {
        let p = pipeline("wc.toml");
        let placement = even_placement(&p, 4);
        let keys = assign_keys(&p, &placement, 64, None);
        let r = Routing::new(&p, placement, keys.clone(), 0, 10).unwrap();
        assert!(r.keyed(1) && !r.keyed(0));
        let mut rng = SplitMix64::new(3);
        let mut hits = [0u32; 4];
        for _ in 0..40_000 {
            hits[r.destination(0, 0, &mut rng) as usize] += 1;
        }
        assert!(hits.iter().all(|h| (9_000..11_000).contains(h)), "{hits:?}");
        for g in 0..64u16 {
            let w = r.destination(1, g, &mut rng);
            assert_eq!(WorkerId(w), keys.owners[1][usize::from(g)]);
            assert!(r.owns(w, 1, g) && !r.owns((w + 1) % 4, 1, g));
        }
        assert_eq!(r.groups_of(1, 0), 16);
        assert!(r.hosts(0, 3) && !r.hosts(0, 4));
    }

    #[test]
    fn placements_beyond_the_cluster_are_rejected() {
        let p = pipeline("wc.toml");
        let placement = even_placement(&p, 4);
        let keys = assign_keys(&p, &placement, 64, None);
        let e = Routing::new(&p, placement, keys, 0, 3).unwrap_err().to_string();
        assert!(e.contains("4 workers"), "{e}");
    }
}
