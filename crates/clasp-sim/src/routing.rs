//! Where a request goes under one placement and key assignment: the same semantics as the
//! runtime's routing tables. A stateful operator's request goes to the owner of its key group;
//! a stateless operator's request goes to a worker drawn in proportion to the operator's
//! fractions σ_o(w).

use crate::error::SimError;
use clasp_core::placement::{KeyAssignment, Placement};
use clasp_core::rng::SplitMix64;
use clasp_core::{OperatorId, Pipeline, WorkerId};

#[derive(Clone, Debug)]
enum Route {
    /// The owner of each key group.
    Keyed(Vec<u32>),
    /// Workers and their cumulative fractions.
    Shares { workers: Vec<u32>, cumulative: Vec<f64> },
}

/// Routing tables of one placement epoch.
#[derive(Clone, Debug)]
pub struct Routing {
    /// Increases with every placement.
    pub epoch: u32,
    /// The placement.
    pub placement: Placement,
    /// The key assignment.
    pub keys: KeyAssignment,
    routes: Vec<Route>,
    /// `hosts[op * workers + w]`: whether worker `w` runs `op`.
    hosts: Vec<bool>,
    /// `instances[op * workers + w]`: executor instances of `op` on `w`.
    instances: Vec<u32>,
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
        let n = placement.workers as usize;
        let mut hosts = vec![false; p.operators.len() * n];
        let mut instances = vec![0; p.operators.len() * n];
        let routes = p
            .operators
            .iter()
            .map(|op| {
                let shares = &placement.operators[op.id.index()].shares;
                for s in shares {
                    hosts[op.id.index() * n + s.worker.index()] = true;
                    instances[op.id.index() * n + s.worker.index()] = s.instances.max(1);
                }
                let owners = keys.owners.get(op.id.index()).filter(|o| !o.is_empty());
                match owners {
                    Some(owners) if op.stateful => {
                        Route::Keyed(owners.iter().map(|w| w.0).collect())
                    }
                    _ => {
                        let mut acc = 0.0;
                        let cumulative = shares
                            .iter()
                            .map(|s| {
                                acc += s.fraction;
                                acc
                            })
                            .collect();
                        Route::Shares {
                            workers: shares.iter().map(|s| s.worker.0).collect(),
                            cumulative,
                        }
                    }
                }
            })
            .collect();
        Ok(Self { epoch, placement, keys, routes, hosts, instances })
    }

    /// Workers of the placement.
    pub fn workers(&self) -> u32 {
        self.placement.workers
    }

    /// Whether `op` routes by key group.
    #[inline]
    pub fn keyed(&self, op: usize) -> bool {
        matches!(self.routes[op], Route::Keyed(_))
    }

    /// The worker for a request of `op` with key group `group` (keyed operators), or drawn by
    /// share from `rng` (stateless operators).
    #[inline]
    pub fn destination(&self, op: usize, group: u16, rng: &mut SplitMix64) -> u32 {
        match &self.routes[op] {
            Route::Keyed(owners) => owners[usize::from(group) % owners.len()],
            Route::Shares { workers, cumulative } => {
                if workers.len() == 1 {
                    return workers[0];
                }
                let x = rng.next_f64() * cumulative.last().copied().unwrap_or(1.0);
                let i = cumulative.partition_point(|c| *c <= x).min(workers.len() - 1);
                workers[i]
            }
        }
    }

    /// Whether worker `w` may run a request of `op` with key group `group`.
    #[inline]
    pub fn owns(&self, w: u32, op: usize, group: u16) -> bool {
        match &self.routes[op] {
            Route::Keyed(owners) => owners[usize::from(group) % owners.len()] == w,
            Route::Shares { .. } => self.hosts(op, w),
        }
    }

    /// Whether worker `w` runs `op`.
    #[inline]
    pub fn hosts(&self, op: usize, w: u32) -> bool {
        let n = self.placement.workers;
        w < n && self.hosts[op * n as usize + w as usize]
    }

    /// Executor instances of `op` on `w` (0 when it does not run there).
    pub fn instances(&self, op: usize, w: u32) -> u32 {
        let n = self.placement.workers;
        if w < n { self.instances[op * n as usize + w as usize] } else { 0 }
    }

    /// Instances of `op` over all workers.
    pub fn total_instances(&self, op: OperatorId) -> u32 {
        self.placement.operators[op.index()].shares.iter().map(|s| s.instances.max(1)).sum()
    }

    /// Key groups of `op` owned by `w`.
    pub fn groups_of(&self, op: usize, w: u32) -> usize {
        match &self.routes[op] {
            Route::Keyed(owners) => owners.iter().filter(|&&o| o == w).count(),
            Route::Shares { .. } => 0,
        }
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
