//! The stable JSON form of a decision (`clasp plan --json`), documented in
//! `docs/plan-json.md`. Field order is fixed by the structs, lists are ordered by operator id
//! and worker, and floats print in shortest round-trip form, so equal decisions give
//! byte-identical JSON.

use crate::config::PlanConfig;
use crate::policy::Decision;
use clasp_core::placement::{OperatorPlacement, Placement, Share};
use clasp_core::stats::Coefficients;
use clasp_core::{Pipeline, WorkerId};
use serde::{Deserialize, Serialize};

/// Schema identifier of [`PlanReport`].
pub const PLAN_SCHEMA: &str = "clasp.plan/1";

/// A decision, by operator name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanReport {
    /// Always [`PLAN_SCHEMA`].
    pub schema: String,
    /// Pipeline name.
    pub pipeline: String,
    /// Policy name.
    pub policy: String,
    /// Rate asked for (requests/s).
    pub requested_rate: f64,
    /// Rate the plan sustains (requests/s).
    pub target_rate: f64,
    /// Whether the requested rate does not fit in `max_workers`.
    pub limited: bool,
    /// s = target_rate / observed throughput (Eq. 5).
    pub scale: f64,
    /// Workers used.
    pub workers: u32,
    /// Worker limit.
    pub max_workers: u32,
    /// α, β, γ, W̄ used.
    pub coefficients: Coefficients,
    /// Fraction of W̄ a worker may be loaded to.
    pub headroom: f64,
    /// Operator names in placement order.
    pub order: Vec<String>,
    /// One entry per operator and worker it runs on.
    pub placement: Vec<PlacementEntry>,
    /// One entry per operator.
    pub operators: Vec<OperatorEntry>,
    /// One entry per worker.
    pub load: Vec<LoadEntry>,
}

/// φ_{o,w}, σ_o(w) and P_{o,w}.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlacementEntry {
    /// Operator name.
    pub operator: String,
    /// Worker index.
    pub worker: u32,
    /// φ_{o,w}: demand placed (µs/s).
    pub share: f64,
    /// σ_o(w): fraction of the operator's requests.
    pub fraction: f64,
    /// Instances of the operator on the worker.
    pub parallelism: u32,
}

/// One operator's totals.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OperatorEntry {
    /// Operator name.
    pub name: String,
    /// D̃_o (µs/s, Eq. 7).
    pub demand: f64,
    /// P_o: instances over all workers.
    pub parallelism: u32,
    /// Workers it runs on.
    pub workers: Vec<u32>,
}

/// One worker's Eq. 8 load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LoadEntry {
    /// Worker index.
    pub worker: u32,
    /// L_w(Φ) (µs/s).
    pub load: f64,
    /// The per-worker budget packed against: W̄ · headroom (µs/s).
    pub capacity: f64,
    /// Σ_o φ_{o,w} (µs/s).
    pub exec: f64,
    /// Local chained requests per second.
    pub local_rate: f64,
    /// Remote chained requests per second.
    pub remote_rate: f64,
    /// Distinct other workers reached.
    pub remote_destinations: u32,
}

impl PlanReport {
    /// The placement this report describes, for pipeline `p` (so a plan can be run with
    /// `clasp run --placement`).
    pub fn to_placement(&self, p: &Pipeline) -> Result<Placement, String> {
        if self.schema != PLAN_SCHEMA {
            return Err(format!("schema `{}`, expected `{PLAN_SCHEMA}`", self.schema));
        }
        if self.pipeline != p.name {
            return Err(format!("a plan for pipeline `{}`, not `{}`", self.pipeline, p.name));
        }
        let mut operators: Vec<OperatorPlacement> = p
            .operators
            .iter()
            .map(|o| OperatorPlacement { operator: o.id, demand: 0.0, shares: Vec::new() })
            .collect();
        for e in &self.placement {
            let op = p
                .operator_id(&e.operator)
                .ok_or_else(|| format!("unknown operator `{}`", e.operator))?;
            let entry = &mut operators[op.index()];
            entry.demand += e.share;
            entry.shares.push(Share {
                worker: WorkerId(e.worker),
                share: e.share,
                fraction: e.fraction,
                instances: e.parallelism.max(1),
            });
        }
        let placement = Placement { workers: self.workers, operators };
        placement.check(p)?;
        Ok(placement)
    }

    /// The report of `d`, made for `p` with `coefficients` and `config`.
    pub fn new(
        d: &Decision,
        p: &Pipeline,
        coefficients: &Coefficients,
        config: &PlanConfig,
    ) -> Self {
        let name = |o: clasp_core::OperatorId| p.operator(o).name.clone();
        let mut placement = Vec::new();
        let mut operators = Vec::new();
        for op in &d.placement.operators {
            let mut shares: Vec<_> = op.shares.iter().collect();
            shares.sort_by_key(|s| s.worker);
            placement.extend(shares.iter().map(|s| PlacementEntry {
                operator: name(op.operator),
                worker: s.worker.0,
                share: s.share,
                fraction: s.fraction,
                parallelism: s.instances,
            }));
            operators.push(OperatorEntry {
                name: name(op.operator),
                demand: op.demand,
                parallelism: shares.iter().map(|s| s.instances).sum(),
                workers: shares.iter().map(|s| s.worker.0).collect(),
            });
        }
        let load = d
            .loads
            .iter()
            .map(|l| LoadEntry {
                worker: l.worker.0,
                load: l.load,
                capacity: l.budget,
                exec: l.exec,
                local_rate: l.local_rate,
                remote_rate: l.remote_rate,
                remote_destinations: l.remote_destinations,
            })
            .collect();
        Self {
            schema: PLAN_SCHEMA.into(),
            pipeline: p.name.clone(),
            policy: d.policy.name().into(),
            requested_rate: d.requested_rate,
            target_rate: d.target_rate,
            limited: d.limited,
            scale: d.scale,
            workers: d.workers,
            max_workers: config.max_workers,
            coefficients: *coefficients,
            headroom: config.headroom,
            order: d.order.iter().map(|&o| name(o)).collect(),
            placement,
            operators,
            load,
        }
    }

    /// Pretty-printed JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).expect("a report holds only finite numbers");
        s.push('\n');
        s
    }
}
