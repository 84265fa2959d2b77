//! Key assignment: which worker owns each key group of each stateful operator, and the worker
//! relabelling that keeps as much of a placement where it was.
//!
//! A stateful operator's key space is cut into a fixed number of key groups
//! ([`clasp_core::hash::key_group`]); the groups are shared among the workers the operator runs
//! on in proportion to its fractions σ_o(w). When shares change, every group stays with its
//! owner up to the owner's new quota and only the surplus moves, so a scaling step moves the
//! fewest groups any assignment with those quotas can.

use clasp_core::placement::{KeyAssignment, Placement, Share};
use clasp_core::{Pipeline, WorkerId};
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// Splits `total` indivisible units in proportion to `weights` by the largest-remainder
/// (Hamilton) method: everyone gets the floor of their exact quota, and the units left over go
/// to the largest fractional parts, ties to the lower index.
///
/// Negative or non-finite weights count as 0; if no weight is positive the units are split
/// evenly. The result always sums to `total` (empty `weights` give an empty result).
pub fn largest_remainder(weights: &[f64], total: u32) -> Vec<u32> {
    if weights.is_empty() {
        return Vec::new();
    }
    let clean: Vec<f64> =
        weights.iter().map(|w| if w.is_finite() && *w > 0.0 { *w } else { 0.0 }).collect();
    let sum: f64 = clean.iter().sum();
    let exact: Vec<f64> = if sum > 0.0 {
        clean.iter().map(|w| f64::from(total) * w / sum).collect()
    } else {
        vec![f64::from(total) / clean.len() as f64; clean.len()]
    };
    let mut units: Vec<u32> = exact.iter().map(|x| (x.floor() as u32).min(total)).collect();
    let given: u64 = units.iter().map(|u| u64::from(*u)).sum();
    // Exact quotas sum to `total`, so the floors fall short by fewer than `len` units; the
    // float sum may be off by an ulp either way, which the two loops below absorb.
    let mut order: Vec<usize> = (0..units.len()).collect();
    let remainder = |i: usize| exact[i] - exact[i].floor();
    order.sort_by(|&a, &b| remainder(b).total_cmp(&remainder(a)).then(a.cmp(&b)));
    if given < u64::from(total) {
        let missing = (u64::from(total) - given) as usize;
        for k in 0..missing {
            units[order[k % order.len()]] += 1;
        }
    } else {
        let mut excess = given - u64::from(total);
        for &i in order.iter().rev() {
            if excess == 0 {
                break;
            }
            if units[i] > 0 {
                units[i] -= 1;
                excess -= 1;
            }
        }
    }
    units
}

/// Key groups each worker of `shares` should own: largest-remainder quotas of `groups` in
/// proportion to the fractions, keyed by worker.
pub fn quotas(shares: &[Share], groups: u32) -> BTreeMap<WorkerId, u32> {
    let fractions: Vec<f64> = shares.iter().map(|s| s.fraction).collect();
    shares.iter().map(|s| s.worker).zip(largest_remainder(&fractions, groups)).collect()
}

/// Assigns every key group of every stateful operator to a worker that runs it, in
/// proportion to the operator's fractions σ_o(w) in `placement` (largest-remainder quotas).
///
/// With a `previous` assignment of the same number of groups, each group stays with its
/// previous owner while that owner's new quota lasts (lowest groups first); the rest are handed
/// out in ascending group order to the workers with quota left, in ascending worker order. The
/// number of groups that change owner is therefore Σ_w max(0, previous_w − quota_w), the least
/// any assignment meeting the quotas can achieve. Without a previous assignment each worker
/// gets one contiguous range of groups. Stateless operators get an empty owner list.
///
/// `placement` must pass [`Placement::check`]; the result depends on nothing else, so the
/// same inputs always give the same assignment.
pub fn assign_keys(
    p: &Pipeline,
    placement: &Placement,
    groups: u32,
    previous: Option<&KeyAssignment>,
) -> KeyAssignment {
    let previous = previous.filter(|k| k.groups == groups);
    let owners = p
        .operators
        .iter()
        .map(|op| {
            if !op.stateful {
                return Vec::new();
            }
            let i = op.id.index();
            let before = previous
                .and_then(|k| k.owners.get(i))
                .filter(|o| o.len() == groups as usize)
                .map(Vec::as_slice);
            assign_operator(&placement.operators[i].shares, groups, before)
        })
        .collect();
    KeyAssignment { groups, owners }
}

/// The owners of one operator's groups: keep what fits the quotas, hand out the rest.
fn assign_operator(shares: &[Share], groups: u32, before: Option<&[WorkerId]>) -> Vec<WorkerId> {
    let mut left = quotas(shares, groups);
    let mut owners: Vec<Option<WorkerId>> = vec![None; groups as usize];
    if let Some(before) = before {
        for (slot, w) in owners.iter_mut().zip(before) {
            if let Some(q) = left.get_mut(w).filter(|q| **q > 0) {
                *q -= 1;
                *slot = Some(*w);
            }
        }
    }
    let mut open = left.iter_mut().filter(|(_, q)| **q > 0);
    let mut current = open.next();
    for slot in owners.iter_mut().filter(|o| o.is_none()) {
        // Quotas sum to `groups`, so a worker with quota left exists for every unowned group.
        let Some((w, q)) = current.as_mut() else { break };
        *slot = Some(**w);
        **q -= 1;
        if **q == 0 {
            current = open.next();
        }
    }
    owners.into_iter().map(|o| o.unwrap_or(WorkerId(0))).collect()
}

/// Relabels the workers of `new` (a permutation of `0..new.workers`) so that as much of every
/// operator as possible stays on the worker it was on in `previous`, which minimizes the key
/// groups and queued requests a migration moves.
///
/// The overlap of a new worker `w` with an old worker `v` is Σ_o min(σ_o^new(w), σ_o^old(v))
/// over all operators: for a stateful operator, 1 − Σ_v min(σ^new, σ^old) is the fraction of
/// its key groups that must move. The permutation maximizing the total overlap is found
/// exactly by the Hungarian algorithm (O(n³) in the new worker count). Among equally good
/// permutations the one closest to the identity is taken (an ε bonus per fixed label), so an
/// unchanged placement keeps its labels. Old workers numbered `new.workers` or more are being
/// removed and can only lose their share.
pub fn remap_workers(previous: &Placement, new: Placement) -> Placement {
    let n = new.workers as usize;
    if n <= 1 {
        return new;
    }
    let overlap = overlap_matrix(previous, &new);
    let label = max_weight_permutation(&overlap);
    let mut new = new;
    for op in &mut new.operators {
        for s in &mut op.shares {
            // A worker beyond `new.workers` fails `Placement::check`; it keeps its label.
            s.worker =
                WorkerId::from(label.get(s.worker.index()).copied().unwrap_or(s.worker.index()));
        }
    }
    new
}

/// Bonus for keeping a worker's label, far below any meaningful overlap difference.
const KEEP_LABEL_BONUS: f64 = 1e-9;

/// `m[w][v]`: overlap of new worker `w` with old worker `v < new.workers`.
pub fn overlap_matrix(previous: &Placement, new: &Placement) -> Vec<Vec<f64>> {
    let n = new.workers as usize;
    let mut m = vec![vec![0.0; n]; n];
    for (w, row) in m.iter_mut().enumerate() {
        row[w] += KEEP_LABEL_BONUS;
    }
    for (old_op, new_op) in previous.operators.iter().zip(&new.operators) {
        for s in &new_op.shares {
            for o in old_op.shares.iter().filter(|o| o.worker.index() < n) {
                if s.worker.index() < n {
                    m[s.worker.index()][o.worker.index()] += s.fraction.min(o.fraction);
                }
            }
        }
    }
    m
}

/// The permutation `label` (row → column) of a square matrix maximizing Σ_r m[r][label[r]]:
/// the Hungarian algorithm with potentials on the negated weights (shortest augmenting paths,
/// O(n³)).
pub fn max_weight_permutation(m: &[Vec<f64>]) -> Vec<usize> {
    let n = m.len();
    let cost = |r: usize, c: usize| -m[r][c];
    // 1-based arrays as in the textbook formulation; index 0 is the virtual start column.
    let mut u = vec![0.0; n + 1];
    let mut v = vec![0.0; n + 1];
    let mut row_of = vec![0usize; n + 1];
    let mut way = vec![0usize; n + 1];
    for r in 1..=n {
        row_of[0] = r;
        let mut col = 0;
        let mut min_to = vec![f64::INFINITY; n + 1];
        let mut used = vec![false; n + 1];
        loop {
            used[col] = true;
            let row = row_of[col];
            let (mut delta, mut next) = (f64::INFINITY, 0);
            for c in 1..=n {
                if used[c] {
                    continue;
                }
                let reduced = cost(row - 1, c - 1) - u[row] - v[c];
                if reduced < min_to[c] {
                    min_to[c] = reduced;
                    way[c] = col;
                }
                if min_to[c].total_cmp(&delta) == Ordering::Less {
                    delta = min_to[c];
                    next = c;
                }
            }
            for c in 0..=n {
                if used[c] {
                    u[row_of[c]] += delta;
                    v[c] -= delta;
                } else {
                    min_to[c] -= delta;
                }
            }
            col = next;
            if row_of[col] == 0 {
                break;
            }
        }
        while col != 0 {
            let prev = way[col];
            row_of[col] = row_of[prev];
            col = prev;
        }
    }
    let mut label = vec![0; n];
    for c in 1..=n {
        label[row_of[c] - 1] = c - 1;
    }
    label
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{random_pipeline, random_placement};
    use clasp_core::rng::SeededRng;
    use proptest::prelude::*;
    use rand::{RngExt, SeedableRng};

    fn share(worker: u32, fraction: f64) -> Share {
        Share { worker: WorkerId(worker), share: fraction, fraction, instances: 1 }
    }

    #[test]
    fn largest_remainder_matches_hand_computed_quotas() {
        // 10 · (0.45, 0.35, 0.2) = 4.5, 3.5, 2 → floors 4, 3, 2; one left, tie → lower index.
        assert_eq!(largest_remainder(&[0.45, 0.35, 0.2], 10), [5, 3, 2]);
        // 7 · (1/3 each) = 2.33 → 2, 2, 2 and one to index 0.
        assert_eq!(largest_remainder(&[1.0, 1.0, 1.0], 7), [3, 2, 2]);
        assert_eq!(largest_remainder(&[0.0, 0.0], 3), [2, 1]);
        assert_eq!(largest_remainder(&[f64::NAN, -1.0, 2.0], 4), [0, 0, 4]);
        assert!(largest_remainder(&[], 5).is_empty());
    }

    #[test]
    fn groups_follow_fractions_in_contiguous_ranges() {
        let shares = [share(2, 0.5), share(0, 0.25), share(1, 0.25)];
        let owners = assign_operator(&shares, 8, None);
        let w = |i| WorkerId(i);
        assert_eq!(owners, [w(0), w(0), w(1), w(1), w(2), w(2), w(2), w(2)]);
    }

    #[test]
    fn a_new_worker_takes_only_the_surplus() {
        let before = assign_operator(&[share(0, 0.5), share(1, 0.5)], 8, None);
        let after =
            assign_operator(&[share(0, 0.25), share(1, 0.25), share(2, 0.5)], 8, Some(&before));
        let moved: Vec<usize> = (0..8).filter(|&g| before[g] != after[g]).collect();
        // Each old worker keeps its two lowest groups; the other four go to worker 2.
        assert_eq!(moved, [2, 3, 6, 7]);
        assert!(moved.iter().all(|&g| after[g] == WorkerId(2)));
    }

    #[test]
    fn remap_undoes_a_relabelling() {
        let p = random_pipeline(&mut SeededRng::seed_from_u64(3), 6, 0.5);
        let old = random_placement(&mut SeededRng::seed_from_u64(4), &p, 5);
        let perm = [3u32, 0, 4, 1, 2];
        let mut shuffled = old.clone();
        for op in &mut shuffled.operators {
            for s in &mut op.shares {
                s.worker = WorkerId(perm[s.worker.index()]);
            }
        }
        assert_eq!(remap_workers(&old, shuffled), old);
        assert_eq!(remap_workers(&old, old.clone()), old);
    }

    /// Every permutation of `0..n`.
    fn permutations(n: usize) -> Vec<Vec<usize>> {
        if n == 0 {
            return vec![Vec::new()];
        }
        let mut out = Vec::new();
        for rest in permutations(n - 1) {
            for at in 0..n {
                let mut p = rest.clone();
                p.insert(at, n - 1);
                out.push(p);
            }
        }
        out
    }

    /// The best total overlap over all permutations, by enumeration.
    fn brute_force_best(m: &[Vec<f64>]) -> f64 {
        fn go(m: &[Vec<f64>], row: usize, used: &mut Vec<bool>) -> f64 {
            if row == m.len() {
                return 0.0;
            }
            let mut best = f64::NEG_INFINITY;
            for c in 0..m.len() {
                if !used[c] {
                    used[c] = true;
                    best = best.max(m[row][c] + go(m, row + 1, used));
                    used[c] = false;
                }
            }
            best
        }
        go(m, 0, &mut vec![false; m.len()])
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, rng_seed: proptest::test_runner::RngSeed::Fixed(11), ..ProptestConfig::default() })]

        #[test]
        fn hungarian_matches_brute_force(seed in any::<u64>(), n in 1usize..7) {
            let mut rng = SeededRng::seed_from_u64(seed);
            let m: Vec<Vec<f64>> = (0..n)
                .map(|_| (0..n).map(|_| if rng.random_bool(0.3) { 0.0 } else { rng.random::<f64>() }).collect())
                .collect();
            let label = max_weight_permutation(&m);
            let mut seen = label.clone();
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..n).collect::<Vec<_>>());
            let total: f64 = label.iter().enumerate().map(|(r, c)| m[r][*c]).sum();
            prop_assert!((total - brute_force_best(&m)).abs() < 1e-9);
        }

        #[test]
        fn assignment_meets_quotas_with_least_movement(
            seed in any::<u64>(), ops in 1usize..7, before in 1u32..7, after in 1u32..7,
            groups in 0u32..200,
        ) {
            let mut rng = SeededRng::seed_from_u64(seed);
            let p = random_pipeline(&mut rng, ops, 0.6);
            let old = random_placement(&mut rng, &p, before);
            let new = remap_workers(&old, random_placement(&mut rng, &p, after));
            let first = assign_keys(&p, &old, groups, None);
            let second = assign_keys(&p, &new, groups, Some(&first));
            prop_assert_eq!(&second, &assign_keys(&p, &new, groups, Some(&first)));
            for op in &p.operators {
                let i = op.id.index();
                if !op.stateful {
                    prop_assert!(second.owners[i].is_empty());
                    continue;
                }
                prop_assert_eq!(second.owners[i].len(), groups as usize);
                let mut count: BTreeMap<WorkerId, u32> = BTreeMap::new();
                for w in &second.owners[i] {
                    *count.entry(*w).or_default() += 1;
                }
                let mut before_count: BTreeMap<WorkerId, u32> = BTreeMap::new();
                for w in &first.owners[i] {
                    *before_count.entry(*w).or_default() += 1;
                }
                for s in &new.operators[i].shares {
                    // Largest remainder: within one group of the exact quota.
                    let got = f64::from(count.remove(&s.worker).unwrap_or(0));
                    prop_assert!((got - f64::from(groups) * s.fraction).abs() < 1.0 + 1e-9);
                }
                prop_assert!(count.is_empty(), "groups owned by a worker not running the operator");
                let q = quotas(&new.operators[i].shares, groups);
                let bound: u32 = before_count
                    .iter()
                    .map(|(w, c)| c.saturating_sub(q.get(w).copied().unwrap_or(0)))
                    .sum();
                let moved = (0..groups as usize)
                    .filter(|&g| first.owners[i][g] != second.owners[i][g])
                    .count();
                prop_assert_eq!(moved, bound as usize);
            }
        }

        #[test]
        fn remap_is_the_best_relabelling(
            seed in any::<u64>(), before in 1u32..6, after in 1u32..6,
        ) {
            let mut rng = SeededRng::seed_from_u64(seed);
            let p = random_pipeline(&mut rng, 5, 1.0);
            let old = random_placement(&mut rng, &p, before);
            let raw = random_placement(&mut rng, &p, after);
            let mapped = remap_workers(&old, raw.clone());
            prop_assert!(mapped.check(&p).is_ok());
            let keys = assign_keys(&p, &old, 120, None);
            let moved = |new: &Placement| {
                let k = assign_keys(&p, new, 120, Some(&keys));
                (0..p.operators.len())
                    .map(|o| (0..120).filter(|&g| k.owners[o][g] != keys.owners[o][g]).count())
                    .sum::<usize>()
            };
            // Σ_o Σ_w min(σ_new(w), σ_old(w)): the share that stays where it was.
            let kept = |new: &Placement| -> f64 {
                new.operators
                    .iter()
                    .zip(&old.operators)
                    .flat_map(|(n, o)| n.shares.iter().map(move |s| s.fraction.min(
                        o.shares.iter().find(|x| x.worker == s.worker).map_or(0.0, |x| x.fraction))))
                    .sum()
            };
            let all: Vec<Placement> = permutations(after as usize)
                .into_iter()
                .map(|perm| {
                    let mut q = raw.clone();
                    for op in &mut q.operators {
                        for s in &mut op.shares {
                            s.worker = WorkerId::from(perm[s.worker.index()]);
                        }
                    }
                    q
                })
                .collect();
            let best_kept = all.iter().map(kept).fold(f64::NEG_INFINITY, f64::max);
            prop_assert!(kept(&mapped) >= best_kept - 1e-6);
            // Quota rounding can cost at most one group per worker and operator.
            let fewest = all.iter().map(moved).min().unwrap();
            prop_assert!(moved(&mapped) <= fewest + p.operators.len() * after as usize);
        }
    }
}
