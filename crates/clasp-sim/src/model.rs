//! The pipeline as the simulator runs it: per operator a mean execution time and, per output
//! stream, the mean number of chained requests one execution emits; per source the entry
//! operators and its share of the input.
//!
//! The means come from statistics in the `clasp.stats/1` schema: from the spec's hints
//! ([`Model::from_spec`], through [`ObservedStats::from_spec`]) or from a real run
//! ([`Model::from_stats`]), so a simulation can replay what the runtime observed.

use crate::config::SimConfig;
use clasp_core::pipeline::ServiceMode;
use clasp_core::stats::ObservedStats;
use clasp_core::{Endpoint, OperatorId, Pipeline};

/// Chained requests along one stream.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EdgeModel {
    /// The successor operator.
    pub to: u16,
    /// The stream (index into `Pipeline::streams`).
    pub stream: u16,
    /// Mean chained requests per execution: `⌊mean⌋` always, one more with probability
    /// `mean − ⌊mean⌋`.
    pub mean: f64,
}

/// One operator.
#[derive(Clone, Debug, PartialEq)]
pub struct OpModel {
    /// Mean execution time (µs).
    pub exec_us: f64,
    /// Whether the execution holds its slot without using the CPU (`service_mode = "sleep"`).
    pub sleeps: bool,
    /// Requests are routed by key group.
    pub keyed: bool,
    /// At most one execution at a time per worker.
    pub one_at_a_time: bool,
    /// Output streams to operators.
    pub edges: Vec<EdgeModel>,
    /// Keyed operators: the share of the requests each worker received in an observed run
    /// (key skew under that run's key assignment); empty: key groups equally likely.
    pub worker_shares: Vec<f64>,
}

/// One source.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceModel {
    /// Relative share of the input.
    pub weight: f64,
    /// Operators its streams feed (a stream to a sink adds nothing).
    pub entries: Vec<u16>,
}

/// A pipeline compiled for simulation.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// Indexed by operator.
    pub ops: Vec<OpModel>,
    /// Indexed by source.
    pub sources: Vec<SourceModel>,
    /// Streams of the pipeline.
    pub streams: usize,
}

impl Model {
    /// The model of `p` from its spec hints: source rates, selectivities, stream rates and
    /// service times (`cfg.default_exec_us` where none is given).
    pub fn from_spec(p: &Pipeline, cfg: &SimConfig) -> Self {
        let stats = ObservedStats::from_spec(p, 1.0, cfg.default_exec_us);
        Self::from_stats(p, &stats, cfg)
    }

    /// The model of `p` from observed statistics: τ̄_o as the mean execution time, E / N_o as
    /// the mean requests per execution (split evenly over parallel streams between the same
    /// two operators). Operators the statistics do not mention get `cfg.default_exec_us` and
    /// emit nothing.
    pub fn from_stats(p: &Pipeline, stats: &ObservedStats, cfg: &SimConfig) -> Self {
        let ops = p.operators.iter().map(|op| op_model(p, stats, cfg, op.id)).collect();
        Self { ops, sources: sources(p), streams: p.streams.len() }
    }

    /// Draws keyed operators' key groups so that each worker receives the share of their
    /// requests it processed in `stats` — the observed run's key skew. Only meaningful with
    /// the observed run's placement and key assignment.
    pub fn with_worker_shares(mut self, p: &Pipeline, stats: &ObservedStats) -> Self {
        for (o, m) in self.ops.iter_mut().enumerate().filter(|(_, m)| m.keyed) {
            let name = &p.operators[o].name;
            let mut shares = vec![0.0; stats.workers.len()];
            for w in &stats.workers {
                let rate =
                    w.operators.iter().find(|s| &s.name == name).map_or(0.0, |s| s.processed_rate);
                if let Some(cell) = shares.get_mut(w.worker as usize) {
                    *cell = clean(rate);
                }
            }
            if shares.iter().sum::<f64>() > 0.0 {
                m.worker_shares = shares;
            }
        }
        self
    }

    /// Replaces every operator's mean execution time.
    pub fn with_exec_us(mut self, exec_us: f64) -> Self {
        for o in &mut self.ops {
            o.exec_us = exec_us;
        }
        self
    }

    /// Mean execution work one input request causes (µs), by the expected requests per
    /// operator: the demand that bounds a single worker's throughput.
    pub fn work_per_input(&self) -> f64 {
        self.requests_per_input().iter().zip(&self.ops).map(|(n, o)| n * o.exec_us).sum()
    }

    /// Expected requests of each operator per input request.
    pub fn requests_per_input(&self) -> Vec<f64> {
        let mut n = vec![0.0; self.ops.len()];
        let total: f64 = self.sources.iter().map(|s| s.weight).sum::<f64>().max(f64::MIN_POSITIVE);
        for s in &self.sources {
            for &e in &s.entries {
                n[usize::from(e)] += s.weight / total;
            }
        }
        // Operator ids are not topological in general: relax in topological order.
        for &o in &self.topological() {
            let here = n[o];
            for e in &self.ops[o].edges {
                n[usize::from(e.to)] += here * e.mean;
            }
        }
        n
    }

    /// Operators in a topological order of the edges.
    fn topological(&self) -> Vec<usize> {
        let mut indegree = vec![0usize; self.ops.len()];
        for o in &self.ops {
            for e in &o.edges {
                indegree[usize::from(e.to)] += 1;
            }
        }
        let mut ready: Vec<usize> = (0..self.ops.len()).filter(|&o| indegree[o] == 0).collect();
        let mut order = Vec::with_capacity(self.ops.len());
        while let Some(o) = ready.pop() {
            order.push(o);
            for e in &self.ops[o].edges {
                let t = usize::from(e.to);
                indegree[t] -= 1;
                if indegree[t] == 0 {
                    ready.push(t);
                }
            }
        }
        order
    }
}

fn op_model(p: &Pipeline, stats: &ObservedStats, cfg: &SimConfig, o: OperatorId) -> OpModel {
    let op = p.operator(o);
    let observed = stats.operator(p, o);
    let exec_us = observed
        .map(|s| s.exec_time_us)
        .filter(|t| t.is_finite() && *t >= 0.0)
        .unwrap_or(cfg.default_exec_us)
        + if op.stateful { cfg.remote_state_us } else { 0.0 };
    let processed = observed.map_or(0.0, |s| s.processed_rate);
    let edges = p
        .outputs(o)
        .iter()
        .filter_map(|&s| {
            let to = p.stream(s).to.operator()?;
            let parallel = p.outputs(o).iter().filter(|&&x| p.stream(x).to == p.stream(s).to);
            let rate = stats.edge_rate(p, o, to) / parallel.count() as f64;
            let mean = if processed > 0.0 { rate / processed } else { 0.0 };
            Some(EdgeModel { to: to.0 as u16, stream: s.0 as u16, mean: clean(mean) })
        })
        .collect();
    OpModel {
        exec_us,
        sleeps: op.service.is_some_and(|s| s.mode == ServiceMode::Sleep),
        keyed: op.stateful,
        one_at_a_time: op.ordered && cfg.ordered_one_at_a_time,
        edges,
        worker_shares: Vec::new(),
    }
}

fn clean(x: f64) -> f64 {
    if x.is_finite() && x > 0.0 { x } else { 0.0 }
}

/// Sources weighted by their rate hints (missing hints: the mean of the given ones, or 1).
fn sources(p: &Pipeline) -> Vec<SourceModel> {
    let given: Vec<f64> = p.sources.iter().filter_map(|s| s.rate).collect();
    let fill = if given.is_empty() { 1.0 } else { given.iter().sum::<f64>() / given.len() as f64 };
    p.sources
        .iter()
        .map(|s| SourceModel {
            weight: clean(s.rate.unwrap_or(fill)),
            entries: p
                .source_outputs(s.id)
                .iter()
                .filter_map(|&st| match p.stream(st).to {
                    Endpoint::Operator(o) => Some(o.0 as u16),
                    _ => None,
                })
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::pipeline;

    #[test]
    fn word_count_emits_ten_words_per_line() {
        let p = pipeline("wc.toml");
        let m = Model::from_spec(&p, &SimConfig::default());
        assert_eq!(m.ops[0].edges.len(), 1);
        assert!((m.ops[0].edges[0].mean - 10.0).abs() < 1e-12);
        assert!(m.ops[1].edges.is_empty() && m.ops[1].keyed && !m.ops[0].keyed);
        assert_eq!(m.requests_per_input(), vec![1.0, 10.0]);
        assert!((m.work_per_input() - 11.0 * 400.0).abs() < 1e-9);
        let remote = SimConfig { remote_state_us: 1000.0, ..SimConfig::default() };
        let m = Model::from_spec(&p, &remote);
        assert_eq!((m.ops[0].exec_us, m.ops[1].exec_us), (400.0, 1400.0));
    }

    #[test]
    fn branching_pipelines_follow_selectivities() {
        let p = pipeline("nwm.toml");
        let m = Model::from_spec(&p, &SimConfig::default());
        let n = m.requests_per_input();
        let id = |name: &str| p.operator_id(name).unwrap().index();
        // split feeds both filters with every request; 10 % succeed, 90 % fail.
        assert!((n[id("success_filter")] - 1.0).abs() < 1e-9);
        assert!((n[id("success_parse")] - 0.1).abs() < 1e-9);
        assert!((n[id("fail_parse")] - 0.9).abs() < 1e-9);
    }
}
