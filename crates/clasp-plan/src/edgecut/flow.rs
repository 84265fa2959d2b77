//! Maximum flow by Dinic's algorithm, and the minimum s–t cut it certifies.
//!
//! Capacities are non-negative `f64`s. Residual capacities are stored directly, so the
//! bottleneck edge of an augmenting path becomes exactly 0; a residual at or below `eps` (a
//! relative tolerance of the largest capacity) counts as saturated.

use std::collections::VecDeque;

/// A directed flow network on nodes `0..n`.
#[derive(Clone, Debug)]
pub(crate) struct FlowNetwork {
    adj: Vec<Vec<usize>>,
    to: Vec<usize>,
    residual: Vec<f64>,
    max_capacity: f64,
}

impl FlowNetwork {
    /// An empty network on `n` nodes.
    pub(crate) fn new(n: usize) -> Self {
        Self { adj: vec![Vec::new(); n], to: Vec::new(), residual: Vec::new(), max_capacity: 0.0 }
    }

    /// Adds the edge `u → v` with capacity `cap` (and its reverse residual edge).
    pub(crate) fn add_edge(&mut self, u: usize, v: usize, cap: f64) {
        debug_assert!(cap >= 0.0 && cap.is_finite());
        self.max_capacity = self.max_capacity.max(cap);
        for (from, to, c) in [(u, v, cap), (v, u, 0.0)] {
            self.adj[from].push(self.to.len());
            self.to.push(to);
            self.residual.push(c);
        }
    }

    fn eps(&self) -> f64 {
        1e-12 * self.max_capacity.max(1.0)
    }

    /// Pushes a maximum flow from `s` to `t` and returns its value.
    pub(crate) fn max_flow(&mut self, s: usize, t: usize) -> f64 {
        let mut total = 0.0;
        while let Some(level) = self.levels(s, t) {
            let mut next = vec![0; self.adj.len()];
            loop {
                let pushed = self.augment(s, t, f64::INFINITY, &level, &mut next);
                if pushed <= 0.0 {
                    break;
                }
                total += pushed;
            }
        }
        total
    }

    /// BFS levels from `s` over unsaturated edges, or `None` when `t` is unreachable.
    fn levels(&self, s: usize, t: usize) -> Option<Vec<usize>> {
        let eps = self.eps();
        let mut level = vec![usize::MAX; self.adj.len()];
        level[s] = 0;
        let mut queue = VecDeque::from([s]);
        while let Some(u) = queue.pop_front() {
            for &e in &self.adj[u] {
                let v = self.to[e];
                if self.residual[e] > eps && level[v] == usize::MAX {
                    level[v] = level[u] + 1;
                    queue.push_back(v);
                }
            }
        }
        (level[t] != usize::MAX).then_some(level)
    }

    /// One blocking-flow augmentation along the level graph (DFS with edge pointers).
    fn augment(
        &mut self,
        u: usize,
        t: usize,
        limit: f64,
        level: &[usize],
        next: &mut [usize],
    ) -> f64 {
        if u == t {
            return limit;
        }
        let eps = self.eps();
        while next[u] < self.adj[u].len() {
            let e = self.adj[u][next[u]];
            let v = self.to[e];
            if self.residual[e] > eps && level[v] == level[u] + 1 {
                let pushed = self.augment(v, t, limit.min(self.residual[e]), level, next);
                if pushed > 0.0 {
                    self.residual[e] -= pushed;
                    self.residual[e ^ 1] += pushed;
                    return pushed;
                }
            }
            next[u] += 1;
        }
        0.0
    }

    /// After [`max_flow`](Self::max_flow): the nodes on the source side of the minimum cut
    /// whose source side is largest — every node that cannot reach `t` in the residual graph.
    /// Minimum cuts are closed under union, so this one contains every other one's source side.
    pub(crate) fn maximal_source_side(&self, t: usize) -> Vec<bool> {
        let eps = self.eps();
        let mut into: Vec<Vec<usize>> = vec![Vec::new(); self.adj.len()];
        for (u, edges) in self.adj.iter().enumerate() {
            for &e in edges {
                if self.residual[e] > eps {
                    into[self.to[e]].push(u);
                }
            }
        }
        let mut reaches_t = vec![false; self.adj.len()];
        reaches_t[t] = true;
        let mut stack = vec![t];
        while let Some(v) = stack.pop() {
            for &u in &into[v] {
                if !reaches_t[u] {
                    reaches_t[u] = true;
                    stack.push(u);
                }
            }
        }
        reaches_t.into_iter().map(|r| !r).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clasp_core::rng::independent_stream;
    use rand::RngExt;

    /// Brute force: the cheapest cut over every node set containing `s` and not `t`, and the
    /// union of all cheapest source sides.
    fn brute(n: usize, edges: &[(usize, usize, f64)], s: usize, t: usize) -> (f64, Vec<bool>) {
        let mut best = f64::INFINITY;
        let mut union = vec![false; n];
        for mask in 0u32..(1 << n) {
            let side = |x: usize| mask & (1 << x) != 0;
            if !side(s) || side(t) {
                continue;
            }
            let cost: f64 =
                edges.iter().filter(|(u, v, _)| side(*u) && !side(*v)).map(|e| e.2).sum();
            if cost < best - 1e-9 {
                best = cost;
                union = vec![false; n];
            }
            if (cost - best).abs() <= 1e-9 {
                (0..n).filter(|&x| side(x)).for_each(|x| union[x] = true);
            }
        }
        (best, union)
    }

    #[test]
    fn min_cut_value_and_maximal_side_match_brute_force() {
        for seed in 0..300 {
            let mut rng = independent_stream(7, seed);
            let n = 2 + rng.random_range(0..7) as usize;
            let mut edges = Vec::new();
            for u in 0..n {
                for v in 0..n {
                    if u != v && rng.random_bool(0.35) {
                        // Small integers make ties frequent and sums exact.
                        edges.push((u, v, rng.random_range(0..4) as f64));
                    }
                }
            }
            let mut net = FlowNetwork::new(n);
            edges.iter().for_each(|&(u, v, c)| net.add_edge(u, v, c));
            let flow = net.max_flow(0, n - 1);
            let (best, union) = brute(n, &edges, 0, n - 1);
            assert_eq!(flow, best, "seed {seed}");
            assert_eq!(net.maximal_source_side(n - 1), union, "seed {seed}");
        }
    }
}
