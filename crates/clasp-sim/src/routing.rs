//! Where a request goes under one placement and key assignment: the same semantics as the
//! runtime's routing tables. A stateful operator's request goes to the owner of its key group;
//! a stateless operator's request goes to a worker drawn in proportion to the operator's
//! fractions σ_o(w).

use crate::error::SimError;
use clasp_core::placement::{KeyAssignment, Placement, RouteTable};
use clasp_core::rng::SeededRng;
use clasp_core::{KeyGroup, OperatorId, Pipeline, WorkerId};
use rand::RngExt;
use rand_distr::weighted::WeightedIndex;

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
    /// Per keyed operator, per worker, the key groups it owns.
    owned: Vec<Vec<Vec<u16>>>,
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
        let owned = owned_groups(p, &table, &keys, placement.workers);
        Ok(Self { epoch, placement, keys, table, owned })
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
    pub fn destination(&self, op: usize, group: u16, rng: &mut SeededRng) -> u32 {
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

    /// A key group of keyed `op`: one of those owned by a worker drawn by `shares` (an
    /// observed run's skew), or any group equally likely when `shares` is empty.
    #[inline]
    pub fn draw_group(&self, op: usize, shares: &[f64], groups: u32, rng: &mut SeededRng) -> u16 {
        if !shares.is_empty()
            && let Ok(by_share) = WeightedIndex::new(shares)
            && let Some(owned) = self.owned.get(op).and_then(|o| o.get(rng.sample(&by_share)))
            && !owned.is_empty()
        {
            return owned[rng.random_range(0..owned.len() as u64) as usize];
        }
        rng.random_range(0..u64::from(groups)) as u16
    }
}

/// Per operator (empty unless keyed), per worker, the key groups the worker owns.
fn owned_groups(
    p: &Pipeline,
    table: &RouteTable,
    keys: &KeyAssignment,
    workers: u32,
) -> Vec<Vec<Vec<u16>>> {
    p.operators
        .iter()
        .map(|op| {
            if !table.keyed(op.id) {
                return Vec::new();
            }
            let mut owned = vec![Vec::new(); workers as usize];
            for g in 0..keys.groups {
                let w = table.owner(op.id, KeyGroup(g)).index();
                if let Some(list) = owned.get_mut(w) {
                    list.push(g as u16);
                }
            }
            owned
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{even_placement, pipeline};
    use clasp_plan::keys::assign_keys;
    use rand::SeedableRng;

    #[test]
    fn keyed_and_shared_routes_follow_the_placement() {
        let p = pipeline("wc.toml");
        let placement = even_placement(&p, 4);
        let keys = assign_keys(&p, &placement, 64, None);
        let r = Routing::new(&p, placement, keys.clone(), 0, 10).unwrap();
        assert!(r.keyed(1) && !r.keyed(0));
        let mut rng = SeededRng::seed_from_u64(3);
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
    fn observed_worker_shares_skew_the_key_groups_drawn() {
        let p = pipeline("wc.toml");
        let keys = assign_keys(&p, &even_placement(&p, 4), 64, None);
        let r = Routing::new(&p, even_placement(&p, 4), keys, 0, 10).unwrap();
        let mut rng = SeededRng::seed_from_u64(5);
        let draw = |shares: &[f64], rng: &mut SeededRng| {
            let mut hits = [0u32; 4];
            for _ in 0..40_000 {
                hits[r.destination(1, r.draw_group(1, shares, 64, rng), rng) as usize] += 1;
            }
            hits
        };
        // Shares 4 : 2 : 1 : 1 of 40,000 draws: 20,000, 10,000, 5,000, 5,000.
        let hits = draw(&[4.0, 2.0, 1.0, 1.0], &mut rng);
        for (h, want) in hits.iter().zip([20_000, 10_000, 5_000, 5_000]) {
            assert!(h.abs_diff(want) < want / 20, "{hits:?}");
        }
        // Without shares every group is equally likely, so every owner of 16 gets a quarter.
        let hits = draw(&[], &mut rng);
        assert!(hits.iter().all(|h| (9_000..11_000).contains(h)), "{hits:?}");
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
