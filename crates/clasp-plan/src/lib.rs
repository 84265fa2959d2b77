//! clasp-plan: every decision clasp makes, as pure deterministic functions (no threads, no I/O),
//! so that the runtime and the simulator call the very same code.
//!
//! The CLASP planning core, one module per concept of the paper (§4.2–4.3):
//!
//! | module | what | paper |
//! |---|---|---|
//! | [`config`] | planning parameters and their defaults | §5, docs/model-notes.md |
//! | [`capacity`] | worker load from observations; load under a placement | Eq. 1, Eq. 8 |
//! | [`estimator`] | online α, β, γ (RLS) and W̄ (EMA) | Eq. 2–4 |
//! | [`projection`] | observed rates projected to a target rate | Eq. 5–7 |
//! | [`order`] | reverse-topological placement order | §4.3.2, Fig. 6 |
//! | [`packing`] | next-fit packing with the chained-request cost | Eq. 8–9 |
//! | [`limit`] | highest rate that fits the worker limit, cached | §4.3.2 |
//! | [`parallelism`] | instances per operator and worker | Eq. 10–12 |
//! | [`policy`] | the policies behind one interface | §4.3, §5 |
//! | [`triggers`] | when to rescale: triggers, warm-up, cooldown | §5.1.1 |
//! | [`autoscaler`] | the scaling state machine the runtime and the simulator execute | §4.2–4.4 |
//! | [`baselines`] | FaaSFlow, Zhang24, DS2 and Flink-autoscaler worker counts and placements | §5, docs/model-notes.md |
//! | [`keys`] | key groups shared by worker fractions, minimal movement; worker remapping | §4.4 |
//! | [`weighted_keys`] | key groups shared by observed load, for skewed keys | §4.4 |
//! | [`migration`] | the migration plan between two placements | §4.4, Fig. 7 |
//! | [`edgecut`] | the edge/cloud cut of the Planner paper (Algorithm 1, s–t min cut) | Planner §III–V |
//! | [`slo`] | predicted p95 latency of a placement, for a latency objective | future work |
//! | [`queueing`] | Erlang C and Pollaczek–Khinchine closed forms | |
//! | [`report`] | the stable JSON form of a decision | `docs/plan-json.md` |
//! | [`synthetic`] | seeded random pipelines for benchmarks and tests | |

pub mod autoscaler;
pub mod baselines;
pub mod capacity;
pub mod config;
pub mod edgecut;
pub mod error;
pub mod estimator;
pub mod keys;
pub mod limit;
pub mod migration;
pub mod order;
pub mod packing;
pub mod parallelism;
pub mod policy;
pub mod projection;
pub mod queueing;
pub mod report;
pub mod slo;
pub mod synthetic;
#[cfg(test)]
mod testing;
pub mod triggers;
pub mod weighted_keys;

pub use autoscaler::{Autoscaler, AutoscalerConfig, Step};
pub use capacity::{WorkerLoad, placement_loads, worker_load};
pub use config::{PackingVariant, PlanConfig};
pub use error::PlanError;
pub use estimator::{Estimator, EstimatorConfig, Observation, Outcome};
pub use limit::LimitCache;
pub use order::placement_order;
pub use packing::{PackError, Packer};
pub use policy::{Decision, PlanInput, Policy};
pub use projection::Projection;
