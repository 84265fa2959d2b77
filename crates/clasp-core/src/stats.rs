//! Observed statistics: the CLASP paper's Table 2 metrics, aggregated over a window.
//!
//! The runtime writes this schema (`clasp run --stats FILE`), `clasp plan --stats FILE` reads
//! it, and every policy decides from it. Without observations, [`ObservedStats::from_spec`]
//! derives the same structure from a spec's rate, selectivity and service-time hints.
//! The schema is documented in `docs/stats-schema.md`; readers ignore fields they do not know.

use crate::ids::OperatorId;
use crate::pipeline::{Endpoint, Pipeline};
use serde::{Deserialize, Serialize};

/// Schema identifier written in every statistics file.
pub const STATS_SCHEMA: &str = "clasp.stats/1";

/// The capacity model's coefficients (Eq. 1) and the smoothed worker capacity W̄ (Eq. 4).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Coefficients {
    /// α: worker capacity per local chained request (µs).
    pub alpha: f64,
    /// β: worker capacity per remote chained request (µs).
    pub beta: f64,
    /// γ: capacity per distinct remote destination worker (µs/s).
    pub gamma: f64,
    /// W̄: smoothed maximum worker capacity (µs/s).
    pub capacity: f64,
}

impl Coefficients {
    /// The values the paper measured on Faasm (§5.3).
    pub const PAPER: Coefficients =
        Coefficients { alpha: 38.5, beta: 275.0, gamma: 51_500.0, capacity: 850_000.0 };

    /// Parses `alpha,beta,gamma,W`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(',').map(str::trim).collect();
        if parts.len() != 4 {
            return Err(format!(
                "expected 4 comma-separated numbers alpha,beta,gamma,W; got `{s}`"
            ));
        }
        let mut v = [0.0; 4];
        for (i, (p, name)) in parts.iter().zip(["alpha", "beta", "gamma", "W"]).enumerate() {
            v[i] = p.parse::<f64>().map_err(|_| format!("{name} = `{p}` is not a number"))?;
            if !(v[i].is_finite() && v[i] >= 0.0) {
                return Err(format!("{name} = {p} must be a finite number >= 0"));
            }
        }
        if v[3] <= 0.0 {
            return Err("W (worker capacity) must be > 0".into());
        }
        Ok(Self { alpha: v[0], beta: v[1], gamma: v[2], capacity: v[3] })
    }
}

/// Per-operator aggregates over all workers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct OperatorStats {
    /// Operator name.
    pub name: String,
    /// N_o: processed requests per second.
    pub processed_rate: f64,
    /// Records per second in those requests.
    pub records_rate: f64,
    /// τ̄_o: mean execution time per request (µs), processing-rate weighted over workers.
    pub exec_time_us: f64,
    /// Squared coefficient of variation of the execution time (variance / mean²), where
    /// measured: 0 for a constant time, 1 for an exponential one.
    pub exec_time_scv: Option<f64>,
    /// Mean time a request waited in a worker queue before executing (µs); Zhang24's t_s.
    pub queue_wait_us: f64,
    /// Instances currently configured (Σ_w P_{o,w}).
    pub parallelism: u32,
    /// Zhang24's overhead samples `[p, r]`, r = t_s/(t_s+t_e) observed at parallelism p.
    pub overhead_samples: Vec<[f64; 2]>,
    /// Fraction of executions that read or wrote keyed state.
    pub state_touch_fraction: f64,
    /// Keys held in state at the end of the window.
    pub state_keys: u64,
    /// Output records per input record observed.
    pub selectivity: f64,
}

/// E_{o→o_s}: chained requests per second along one stream.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EdgeStats {
    /// Producer operator name.
    pub from: String,
    /// Consumer operator name.
    pub to: String,
    /// Chained requests per second.
    pub rate: f64,
    /// Records per second those requests carried (0 where not measured).
    pub records_rate: f64,
}

/// One operator on one worker.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkerOperatorStats {
    /// Operator name.
    pub name: String,
    /// N_{w,o}.
    pub processed_rate: f64,
    /// τ̄_{w,o} (µs).
    pub exec_time_us: f64,
}

/// One worker's Table 2 metrics.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorkerStats {
    /// Worker index.
    pub worker: u32,
    /// Executor slots.
    pub slots: u32,
    /// Q_w: mean incoming queue size.
    pub queue: f64,
    /// Mean wait of a request in the queue (ms).
    pub queue_wait_ms: f64,
    /// R^l_w: local chained requests per second.
    pub local_rate: f64,
    /// R^r_w: remote chained requests per second.
    pub remote_rate: f64,
    /// δ_w: distinct remote workers reached.
    pub remote_destinations: f64,
    /// Σ_o N_{w,o} τ̄_{w,o} (µs/s).
    pub exec_load: f64,
    /// Whether the worker was saturated (queue and wait over their thresholds).
    pub saturated: bool,
    /// Per-operator rates on this worker.
    pub operators: Vec<WorkerOperatorStats>,
}

/// Aggregated observations of a running pipeline (or spec-derived estimates).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ObservedStats {
    /// Always [`STATS_SCHEMA`].
    pub schema: String,
    /// Pipeline name.
    pub pipeline: String,
    /// Length of the averaging window (s).
    pub window_s: f64,
    /// λ_p: input requests per second entering the planner.
    pub input_rate: f64,
    /// Λ: completed chains per second.
    pub throughput: f64,
    /// Q_p: mean planner queue size.
    pub planner_queue: f64,
    /// Records per input request.
    pub batch_size: u32,
    /// Workers in use while observed.
    pub workers_used: u32,
    /// Per operator, in pipeline order.
    pub operators: Vec<OperatorStats>,
    /// Per operator-to-operator stream.
    pub edges: Vec<EdgeStats>,
    /// Per worker.
    pub workers: Vec<WorkerStats>,
    /// Estimated coefficients at the end of the window, if any.
    pub coefficients: Option<Coefficients>,
    /// FaaSFlow's per-worker count: mean per-worker throughput over the last saturated
    /// observations (requests/s), if any were saturated.
    pub saturated_per_worker_rate: Option<f64>,
    /// Variance / mean² of the times between input requests dispatched to the workers, where
    /// measured: 0 for a paced input, 1 for a Poisson one.
    pub arrival_scv: Option<f64>,
}

/// Errors reading a statistics file against a pipeline.
#[derive(Debug, thiserror::Error)]
pub enum StatsError {
    /// Not JSON of this schema.
    #[error("{file}: not a clasp statistics file: {message}")]
    Parse {
        /// The file.
        file: String,
        /// The decoder's message.
        message: String,
    },
    /// Written for another pipeline or another schema.
    #[error("{file}: {message}\n  help: produce it with `clasp run <this pipeline> --stats FILE`")]
    Mismatch {
        /// The file.
        file: String,
        /// What differs.
        message: String,
    },
}

impl ObservedStats {
    /// Reads statistics written by `clasp run --stats`, checking they describe `p`.
    pub fn from_json(text: &str, file: &str, p: &Pipeline) -> Result<Self, StatsError> {
        let stats: ObservedStats = serde_json::from_str(text)
            .map_err(|e| StatsError::Parse { file: file.into(), message: e.to_string() })?;
        let mismatch = |message: String| StatsError::Mismatch { file: file.into(), message };
        if stats.schema != STATS_SCHEMA {
            return Err(mismatch(format!("schema `{}`, expected `{STATS_SCHEMA}`", stats.schema)));
        }
        for o in &stats.operators {
            if p.operator_id(&o.name).is_none() {
                return Err(mismatch(format!(
                    "operator `{}` is not in pipeline `{}`",
                    o.name, p.name
                )));
            }
        }
        for e in &stats.edges {
            if p.operator_id(&e.from).is_none() || p.operator_id(&e.to).is_none() {
                return Err(mismatch(format!(
                    "edge `{}` -> `{}` is not in the pipeline",
                    e.from, e.to
                )));
            }
        }
        if stats.throughput <= 0.0 {
            return Err(mismatch("throughput is 0: the run observed no completed input".into()));
        }
        Ok(stats)
    }

    /// The stats of operator `op` (by name), if observed.
    pub fn operator(&self, p: &Pipeline, op: OperatorId) -> Option<&OperatorStats> {
        let name = &p.operator(op).name;
        self.operators.iter().find(|o| &o.name == name)
    }

    /// E_{from→to}, 0 if not observed.
    pub fn edge_rate(&self, p: &Pipeline, from: OperatorId, to: OperatorId) -> f64 {
        let (f, t) = (&p.operator(from).name, &p.operator(to).name);
        self.edges.iter().filter(|e| &e.from == f && &e.to == t).map(|e| e.rate).sum()
    }

    /// Statistics derived from a spec: source `rate` hints (or `reference_rate` split evenly
    /// over sources without one), selectivities, stream `rate` hints and service times
    /// (`default_exec_us` where none is given), observed at the sources' total rate Λ and
    /// with input rate λ_p = `target_rate`.
    pub fn from_spec(p: &Pipeline, target_rate: f64, default_exec_us: f64) -> Self {
        let given: Vec<f64> = p.sources.iter().filter_map(|s| s.rate).collect();
        let fill = if given.is_empty() {
            target_rate / p.sources.len() as f64
        } else {
            given.iter().sum::<f64>() / given.len() as f64
        };
        let source_rate: Vec<f64> = p.sources.iter().map(|s| s.rate.unwrap_or(fill)).collect();
        let reference: f64 = source_rate.iter().sum();

        let mut processed = vec![0.0; p.operators.len()];
        let mut stream_rate = vec![0.0; p.streams.len()];
        for s in &p.streams {
            if let Endpoint::Source(src) = s.from {
                stream_rate[s.id.index()] = s.rate.unwrap_or(source_rate[src.index()]);
            }
        }
        for &o in p.topological_order() {
            let op = p.operator(o);
            let inputs: Vec<f64> = p.inputs(o).iter().map(|s| stream_rate[s.index()]).collect();
            processed[o.index()] = inputs.iter().sum();
            let out = op.selectivity_or_default() * op.kind.aggregation().apply(inputs);
            for s in p.outputs(o) {
                stream_rate[s.index()] = p.stream(*s).rate.unwrap_or(out);
            }
        }
        let operators = p
            .operators
            .iter()
            .map(|op| OperatorStats {
                name: op.name.clone(),
                processed_rate: processed[op.id.index()],
                records_rate: processed[op.id.index()],
                exec_time_us: op.service.map_or(default_exec_us, |s| s.micros_for(1)),
                parallelism: 1,
                selectivity: op.selectivity_or_default(),
                ..OperatorStats::default()
            })
            .collect();
        let edges = p
            .streams
            .iter()
            .filter_map(|s| {
                Some(EdgeStats {
                    from: p.operator(s.from.operator()?).name.clone(),
                    to: p.operator(s.to.operator()?).name.clone(),
                    rate: stream_rate[s.id.index()],
                    records_rate: stream_rate[s.id.index()],
                })
            })
            .collect();
        Self {
            schema: STATS_SCHEMA.into(),
            pipeline: p.name.clone(),
            window_s: 0.0,
            input_rate: target_rate,
            throughput: reference,
            batch_size: 1,
            workers_used: 1,
            operators,
            edges,
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse;

    const DIAMOND: &str = r#"
[[source]]
name = "in"
rate = 100
[[operator]]
name = "a"
kind = "flatmap"
selectivity = 3
service_time_us = 10
[[operator]]
name = "b"
kind = "filter"
selectivity = 0.5
[[operator]]
name = "c"
kind = "connect"
[[stream]]
from = "in"
to = "a"
[[stream]]
from = "a"
to = "b"
[[stream]]
from = "a"
to = "c"
rate = 50
[[stream]]
from = "b"
to = "c"
"#;

    #[test]
    fn spec_rates_follow_selectivities_and_hints() {
        let p = parse(DIAMOND, "d.toml").unwrap();
        let s = ObservedStats::from_spec(&p, 400.0, 400.0);
        let rate = |n: &str| s.operators.iter().find(|o| o.name == n).unwrap().processed_rate;
        // a: 100; b: 3*100 = 300; c: hint 50 + b's 0.5*300 = 150 → 200.
        assert_eq!((rate("a"), rate("b"), rate("c")), (100.0, 300.0, 200.0));
        assert_eq!(s.operators[0].exec_time_us, 10.0);
        assert_eq!(s.operators[1].exec_time_us, 400.0);
        assert_eq!((s.throughput, s.input_rate), (100.0, 400.0));
        let a = p.operator_id("a").unwrap();
        let c = p.operator_id("c").unwrap();
        assert_eq!(s.edge_rate(&p, a, c), 50.0);
    }

    #[test]
    fn stats_files_are_checked_against_the_pipeline() {
        let p = parse(DIAMOND, "d.toml").unwrap();
        let s = ObservedStats::from_spec(&p, 100.0, 1.0);
        let text = serde_json::to_string(&s).unwrap();
        assert_eq!(ObservedStats::from_json(&text, "s.json", &p).unwrap(), s);
        let wrong = text.replace("\"name\":\"b\"", "\"name\":\"zz\"");
        let err = ObservedStats::from_json(&wrong, "s.json", &p).unwrap_err().to_string();
        assert!(err.contains("`zz` is not in pipeline"), "{err}");
        assert!(ObservedStats::from_json("{", "s.json", &p).is_err());
    }

    #[test]
    fn coefficients_parse_with_clear_errors() {
        assert_eq!(Coefficients::parse("38.5,275,51500,850000").unwrap(), Coefficients::PAPER);
        assert!(Coefficients::parse("1,2,3").unwrap_err().contains("4 comma-separated"));
        assert!(Coefficients::parse("1,x,3,4").unwrap_err().contains("beta"));
        assert!(Coefficients::parse("1,2,3,0").unwrap_err().contains("> 0"));
    }
}

/// One rescaling, as the runtime and the simulator report it (`"scaling_events"`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ScalingEvent {
    /// When the planner issued the plan (simulator) or the migration finished (runtime), in s.
    pub time_s: f64,
    /// Workers before.
    pub from_workers: u32,
    /// Workers after.
    pub to_workers: u32,
    /// What fired the decision.
    pub reason: String,
    /// The input rate decided for (requests/s).
    pub target_rate: f64,
    /// Plan issued → last worker's completion received (ms).
    pub planner_ms: f64,
    /// Longest worker pause: plan received → resumed (ms).
    pub max_worker_pause_ms: f64,
    /// Key groups moved.
    pub groups_moved: u64,
    /// Keys moved.
    pub keys_moved: u64,
    /// State bytes moved.
    pub bytes_moved: u64,
    /// Queued requests handed over.
    pub requests_moved: u64,
}
