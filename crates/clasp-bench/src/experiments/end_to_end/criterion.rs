//! The comparison's criterion, checked on every run: the reference policy's (CLASP's) p95
//! latency is the lowest or within [`P95_SLACK`] of the lowest, and its mean worker count is
//! the lowest. To read a miss, each cell also names the policy with the fewest workers among
//! those whose p95 is within the slack: a policy with fewer workers outside it bought them
//! with latency.

use crate::plot::{Chart, Series};
use crate::report::{Table, num};

/// How far above the lowest p95 a p95 still counts as matching it.
pub const P95_SLACK: f64 = 0.10;

/// Mean worker counts this close count as a tie: half the tables' precision (0.01). Two
/// policies that make the same decisions differ by the milliseconds their rescales took
/// (0.05 s in a 137 s run is 0.0004 workers), not by a worker-second.
pub const WORKERS_TIE: f64 = 0.005;

/// One policy's outcome on the criterion's two axes.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// Policy name.
    pub policy: String,
    /// 95th-percentile latency (ms).
    pub p95_ms: f64,
    /// Time-weighted mean of workers in use.
    pub mean_workers: f64,
}

/// Where the reference policy stands among the points of one cell.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Verdict<'a> {
    /// The reference policy's point.
    pub reference: &'a Point,
    /// The point with the lowest p95.
    pub lowest_p95: &'a Point,
    /// The point with the fewest workers.
    pub fewest: &'a Point,
    /// The point with the fewest workers among those whose p95 matches the lowest.
    pub fewest_matching: &'a Point,
}

impl Verdict<'_> {
    /// Whether the reference's p95 is the lowest or within the slack of it.
    pub fn p95_matches(&self) -> bool {
        matches_lowest(self.reference, self.lowest_p95)
    }

    /// Whether no policy has fewer workers than the reference (a tie, within [`WORKERS_TIE`],
    /// counts as the fewest).
    pub fn fewest_workers(&self) -> bool {
        self.reference.mean_workers <= self.fewest.mean_workers + WORKERS_TIE
    }

    /// Both.
    pub fn met(&self) -> bool {
        self.p95_matches() && self.fewest_workers()
    }
}

fn matches_lowest(p: &Point, lowest: &Point) -> bool {
    p.p95_ms <= lowest.p95_ms * (1.0 + P95_SLACK)
}

/// The verdict on `points` for the policy named `reference`; `None` when it is not among them.
pub fn verdict<'a>(points: &'a [Point], reference: &str) -> Option<Verdict<'a>> {
    let reference = points.iter().find(|p| p.policy == reference)?;
    let least = |f: fn(&Point) -> f64, among: &mut dyn Iterator<Item = &'a Point>| {
        among.min_by(|a, b| f(a).total_cmp(&f(b)))
    };
    let lowest_p95 = least(|p| p.p95_ms, &mut points.iter())?;
    let fewest = least(|p| p.mean_workers, &mut points.iter())?;
    let mut matching = points.iter().filter(|p| matches_lowest(p, lowest_p95));
    let fewest_matching = least(|p| p.mean_workers, &mut matching)?;
    Some(Verdict { reference, lowest_p95, fewest, fewest_matching })
}

/// One row per cell (`cells`: its name and points) of the verdict for `reference`.
pub fn table(name: &str, cell: &str, reference: &str, cells: &[(String, Vec<Point>)]) -> Table {
    let within = format!("fewest workers within {:.0} % of the lowest p95, by", 100.0 * P95_SLACK);
    let mut t = Table::new(
        name,
        &[
            cell,
            &format!("{reference} p95 (ms)"),
            "lowest p95 (ms)",
            "lowest p95 by",
            &format!("{reference} mean workers"),
            "fewest workers",
            "fewest workers by",
            &within,
            "criterion met",
        ],
    );
    for (label, points) in cells {
        let Some(v) = verdict(points, reference) else { continue };
        let met = match (v.p95_matches(), v.fewest_workers()) {
            (true, true) => "yes",
            (true, false) => "no: workers",
            (false, true) => "no: p95",
            (false, false) => "no: both",
        };
        t.row(vec![
            label.clone(),
            num(v.reference.p95_ms, 2),
            num(v.lowest_p95.p95_ms, 2),
            v.lowest_p95.policy.clone(),
            num(v.reference.mean_workers, 2),
            num(v.fewest.mean_workers, 2),
            v.fewest.policy.clone(),
            v.fewest_matching.policy.clone(),
            met.into(),
        ]);
    }
    t
}

/// The criterion's two axes as a chart: one marker per policy at its mean workers and its p95
/// (a logarithmic axis: the policies' p95 lie decades apart). The criterion is met when the
/// reference's marker is leftmost and no marker lies more than the slack below it.
pub fn chart(title: &str, name: &str, points: &[Point]) -> Chart {
    points.iter().fold(
        Chart::scatter(title, "mean workers", "p95 latency (ms)").log_y().named(name),
        |c, p| c.series(Series::points(&p.policy, &[(p.mean_workers, p.p95_ms)])),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(policy: &str, p95_ms: f64, mean_workers: f64) -> Point {
        Point { policy: policy.into(), p95_ms, mean_workers }
    }

    #[test]
    fn met_when_within_the_slack_and_fewest() {
        // 10.9 ms is within 10 % of 10 ms; 2.0 workers is the fewest.
        let points = [point("clasp", 10.9, 2.0), point("a", 10.0, 2.5), point("b", 50.0, 2.0)];
        let v = verdict(&points, "clasp").expect("clasp is there");
        assert!(v.p95_matches() && v.fewest_workers() && v.met());
        assert_eq!(v.lowest_p95.policy, "a");
    }

    #[test]
    fn fewer_workers_bought_with_latency_is_named_apart() {
        let points = [point("clasp", 10.0, 2.2), point("a", 10.5, 2.4), point("b", 40.0, 1.9)];
        let v = verdict(&points, "clasp").expect("clasp is there");
        assert!(v.p95_matches() && !v.fewest_workers() && !v.met());
        assert_eq!((v.fewest.policy.as_str(), v.fewest_matching.policy.as_str()), ("b", "clasp"));
    }

    #[test]
    fn workers_equal_at_the_reported_precision_tie() {
        // The same decisions a few milliseconds apart: 2.7512 against 2.7478 is a tie, 2.76
        // against 2.75 is not.
        let tie = [point("clasp", 5.9, 2.7512), point("a", 5.6, 2.7478)];
        assert!(verdict(&tie, "clasp").is_some_and(|v| v.met()));
        let more = [point("clasp", 5.9, 2.76), point("a", 5.6, 2.75)];
        assert!(verdict(&more, "clasp").is_some_and(|v| !v.fewest_workers()));
    }

    #[test]
    fn a_p95_past_the_slack_misses() {
        let points = [point("clasp", 11.1, 1.0), point("a", 10.0, 3.0)];
        let v = verdict(&points, "clasp").expect("clasp is there");
        assert!(!v.p95_matches() && v.fewest_workers());
        assert_eq!(v.fewest_matching.policy, "a");
    }

    #[test]
    fn the_chart_has_a_marker_per_policy_at_its_workers_and_p95() {
        let points = [point("clasp", 5.0, 2.0), point("a", 60.0, 1.9)];
        let c = chart("trade-off", "end-to-end-tradeoff-burst", &points);
        assert_eq!(c.name, "end-to-end-tradeoff-burst");
        assert!(c.log_y);
        let markers: Vec<_> =
            c.series.iter().map(|s| (s.name.as_str(), s.xs[0], s.values[0])).collect();
        assert_eq!(markers, [("clasp", 2.0, 5.0), ("a", 1.9, 60.0)]);
    }

    #[test]
    fn the_table_has_a_row_per_cell_with_the_reference() {
        let cells = vec![
            ("burst".to_string(), vec![point("clasp", 5.0, 2.0), point("a", 6.0, 3.0)]),
            ("gradual".to_string(), vec![point("a", 6.0, 3.0)]),
        ];
        let t = table("criterion", "pattern", "clasp", &cells);
        let csv = t.csv();
        assert_eq!(csv.lines().count(), 2, "{csv}");
        assert!(csv.lines().nth(1).is_some_and(|l| l.starts_with("burst,") && l.ends_with(",yes")));
    }
}
