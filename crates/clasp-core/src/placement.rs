//! What a scaling decision produces and the runtime enacts: a placement of every operator's
//! demand over workers, the owner of every key group, and the migration plan between two of them.

use crate::ids::{KeyGroup, OperatorId, WorkerId};
use crate::pipeline::Pipeline;
use rand::RngExt;
use serde::{Deserialize, Serialize};

/// One worker's part of an operator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Share {
    /// The worker.
    pub worker: WorkerId,
    /// φ_{o,w}: projected demand placed here (µs of execution per second).
    pub share: f64,
    /// σ_o(w) = φ_{o,w} / D̃_o: fraction of the operator's requests this worker takes.
    pub fraction: f64,
    /// P_{o,w}: executor instances of the operator on this worker (Eq. 10–12).
    pub instances: u32,
}

/// Where one operator runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OperatorPlacement {
    /// The operator.
    pub operator: OperatorId,
    /// D̃_o: projected demand (µs/s, Eq. 7).
    pub demand: f64,
    /// Non-empty; fractions sum to 1.
    pub shares: Vec<Share>,
}

/// Φ: the split of every operator over workers `0..workers`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// Number of workers used.
    pub workers: u32,
    /// Indexed by `OperatorId`.
    pub operators: Vec<OperatorPlacement>,
}

impl Placement {
    /// Everything on worker 0, with the given instances per operator.
    pub fn single_worker(p: &Pipeline, instances: &[u32]) -> Self {
        Self {
            workers: 1,
            operators: p
                .operators
                .iter()
                .map(|o| OperatorPlacement {
                    operator: o.id,
                    demand: 0.0,
                    shares: vec![Share {
                        worker: WorkerId(0),
                        share: 0.0,
                        fraction: 1.0,
                        instances: instances.get(o.id.index()).copied().unwrap_or(1).max(1),
                    }],
                })
                .collect(),
        }
    }

    /// Every operator split evenly over `workers` workers, `instances` instances on each.
    pub fn even(p: &Pipeline, workers: u32, instances: u32) -> Self {
        let workers = workers.max(1);
        Self {
            workers,
            operators: p
                .operators
                .iter()
                .map(|o| OperatorPlacement {
                    operator: o.id,
                    demand: 0.0,
                    shares: (0..workers)
                        .map(|w| Share {
                            worker: WorkerId(w),
                            share: 0.0,
                            fraction: 1.0 / f64::from(workers),
                            instances: instances.max(1),
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    /// Operator `i` of `p` wholly on worker `i % workers`, one instance each: every chained
    /// request between neighbours is remote when `workers` > 1, local when it is 1.
    pub fn alternating(p: &Pipeline, workers: u32) -> Self {
        let workers = workers.max(1);
        Self {
            workers,
            operators: p
                .operators
                .iter()
                .map(|o| OperatorPlacement {
                    operator: o.id,
                    demand: 0.0,
                    shares: vec![Share {
                        worker: WorkerId(o.id.0 % workers),
                        share: 0.0,
                        fraction: 1.0,
                        instances: 1,
                    }],
                })
                .collect(),
        }
    }

    /// σ_o(w).
    pub fn fraction(&self, op: OperatorId, worker: WorkerId) -> f64 {
        self.operators[op.index()]
            .shares
            .iter()
            .find(|s| s.worker == worker)
            .map_or(0.0, |s| s.fraction)
    }

    /// Instances of `op` on `worker`.
    pub fn instances(&self, op: OperatorId, worker: WorkerId) -> u32 {
        self.operators[op.index()]
            .shares
            .iter()
            .find(|s| s.worker == worker)
            .map_or(0, |s| s.instances)
    }

    /// Workers that run `op`.
    pub fn workers_of(&self, op: OperatorId) -> impl Iterator<Item = WorkerId> + '_ {
        self.operators[op.index()].shares.iter().map(|s| s.worker)
    }

    /// Checks the structural invariants: one entry per operator, every share on a worker below
    /// `workers`, no worker twice, fractions non-negative and summing to 1.
    pub fn check(&self, p: &Pipeline) -> Result<(), String> {
        if self.operators.len() != p.operators.len() {
            return Err(format!(
                "placement has {} operators, the pipeline {}",
                self.operators.len(),
                p.operators.len()
            ));
        }
        for (i, op) in self.operators.iter().enumerate() {
            let name = &p.operators[i].name;
            if op.operator.index() != i {
                return Err(format!("placement entry {i} is for operator {}", op.operator));
            }
            if op.shares.is_empty() {
                return Err(format!("operator `{name}` is placed on no worker"));
            }
            let mut seen = std::collections::HashSet::new();
            for s in &op.shares {
                if s.worker.0 >= self.workers || !seen.insert(s.worker) {
                    return Err(format!(
                        "operator `{name}` has a bad or repeated worker {}",
                        s.worker
                    ));
                }
                if !(s.fraction >= 0.0 && s.share >= 0.0) {
                    return Err(format!("operator `{name}` has a negative share on {}", s.worker));
                }
            }
            let total: f64 = op.shares.iter().map(|s| s.fraction).sum();
            if (total - 1.0).abs() > 1e-6 {
                return Err(format!("operator `{name}`'s fractions sum to {total}, not 1"));
            }
        }
        Ok(())
    }
}

/// The owner of every key group of every keyed operator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyAssignment {
    /// Key groups per keyed operator.
    pub groups: u32,
    /// Indexed by `OperatorId`: the owner of each group, or empty for stateless operators.
    pub owners: Vec<Vec<WorkerId>>,
}

impl KeyAssignment {
    /// The worker that owns `group` of `op`.
    pub fn owner(&self, op: OperatorId, group: KeyGroup) -> Option<WorkerId> {
        self.owners.get(op.index())?.get(group.index()).copied()
    }

    /// Groups of `op` owned by `worker`.
    pub fn groups_of(
        &self,
        op: OperatorId,
        worker: WorkerId,
    ) -> impl Iterator<Item = KeyGroup> + '_ {
        self.owners[op.index()]
            .iter()
            .enumerate()
            .filter(move |(_, w)| **w == worker)
            .map(|(g, _)| KeyGroup::from(g))
    }
}

/// Key groups of one operator that move to one peer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupMove {
    /// The keyed operator.
    pub operator: OperatorId,
    /// The groups, ascending.
    pub groups: Vec<KeyGroup>,
}

/// Everything one worker sends one peer in a migration: a single message, possibly empty.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    /// The receiving worker.
    pub peer: WorkerId,
    /// Key groups (state plus queued requests for them) handed to the peer.
    pub groups: Vec<GroupMove>,
    /// Stateless operators this worker no longer runs whose queued requests go to the peer.
    pub operators: Vec<OperatorId>,
}

/// One worker's part of a migration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerMigration {
    /// The worker.
    pub worker: WorkerId,
    /// One message to each of these peers, in ascending peer order.
    pub send_to: Vec<Transfer>,
    /// The peers it waits for before resuming, ascending.
    pub receive_from: Vec<WorkerId>,
}

/// The decentralized migration between two placements (CLASP §4.4).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MigrationPlan {
    /// Indexed by worker, covering every worker of the old and new placements.
    pub workers: Vec<WorkerMigration>,
}

impl MigrationPlan {
    /// Whether nothing moves.
    pub fn is_empty(&self) -> bool {
        self.workers.iter().all(|w| w.send_to.is_empty())
    }

    /// Key groups moved in total.
    pub fn moved_groups(&self) -> usize {
        self.workers
            .iter()
            .flat_map(|w| &w.send_to)
            .flat_map(|t| &t.groups)
            .map(|g| g.groups.len())
            .sum()
    }
}

/// How one operator's requests are routed.
#[derive(Clone, Debug, PartialEq)]
enum Route {
    /// Keyed: the owner of each key group.
    Keyed(Vec<WorkerId>),
    /// Stateless: workers and their cumulative fractions, for a weighted draw.
    Shares { workers: Vec<WorkerId>, cumulative: Vec<f64> },
}

/// The routing tables of one placement and key assignment, shared by the runtime's scheduling
/// engines and the simulator: a stateful operator's request goes to the owner of its key
/// group; a stateless operator's to a worker drawn in proportion to its fractions σ_o(w).
#[derive(Clone, Debug, PartialEq)]
pub struct RouteTable {
    routes: Vec<Route>,
    workers: u32,
    /// `instances[op * workers + w]`: executor instances of `op` on `w` (0: not placed there).
    instances: Vec<u32>,
}

impl RouteTable {
    /// Tables for `placement` and `keys` of pipeline `p`.
    pub fn new(p: &Pipeline, placement: &Placement, keys: &KeyAssignment) -> Self {
        let n = placement.workers as usize;
        let mut instances = vec![0; p.operators.len() * n];
        let routes = p
            .operators
            .iter()
            .map(|op| {
                let shares = &placement.operators[op.id.index()].shares;
                for s in shares.iter().filter(|s| s.worker.index() < n) {
                    instances[op.id.index() * n + s.worker.index()] = s.instances.max(1);
                }
                match keys.owners.get(op.id.index()).filter(|o| !o.is_empty()) {
                    Some(owners) if op.stateful => Route::Keyed(owners.clone()),
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
                            workers: shares.iter().map(|s| s.worker).collect(),
                            cumulative,
                        }
                    }
                }
            })
            .collect();
        Self { routes, workers: placement.workers, instances }
    }

    /// Workers of the placement.
    pub fn workers(&self) -> u32 {
        self.workers
    }

    /// Whether `op` routes by key group.
    #[inline]
    pub fn keyed(&self, op: OperatorId) -> bool {
        matches!(self.routes[op.index()], Route::Keyed(_))
    }

    /// The owner of key group `group` of keyed operator `op` (groups wrap around).
    #[inline]
    pub fn owner(&self, op: OperatorId, group: KeyGroup) -> WorkerId {
        match &self.routes[op.index()] {
            Route::Keyed(owners) => owners[group.index() % owners.len()],
            Route::Shares { workers, .. } => workers[0],
        }
    }

    /// A worker for one request of stateless operator `op`, drawn by share.
    #[inline]
    pub fn draw(&self, op: OperatorId, rng: &mut crate::rng::SeededRng) -> WorkerId {
        match &self.routes[op.index()] {
            Route::Shares { workers, cumulative } => {
                if workers.len() == 1 {
                    return workers[0];
                }
                let x = rng.random::<f64>() * cumulative.last().copied().unwrap_or(1.0);
                workers[cumulative.partition_point(|c| *c <= x).min(workers.len() - 1)]
            }
            Route::Keyed(owners) => owners[0],
        }
    }

    /// Executor instances of `op` on `w` (0 when it does not run there).
    #[inline]
    pub fn instances(&self, op: OperatorId, w: WorkerId) -> u32 {
        if w.0 < self.workers {
            self.instances[op.index() * self.workers as usize + w.index()]
        } else {
            0
        }
    }

    /// Whether `w` runs `op`.
    #[inline]
    pub fn hosts(&self, op: OperatorId, w: WorkerId) -> bool {
        self.instances(op, w) > 0
    }

    /// Key groups of `op` owned by `w`.
    pub fn groups_of(&self, op: OperatorId, w: WorkerId) -> usize {
        match &self.routes[op.index()] {
            Route::Keyed(owners) => owners.iter().filter(|&&o| o == w).count(),
            Route::Shares { .. } => 0,
        }
    }
}
