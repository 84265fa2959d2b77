//! Requests: a batch of records invoking one operator, tagged with the chain it belongs to.
//!
//! End-to-end completion is tracked without a central table per request: every input request
//! starts with [`FULL_CREDIT`], a request splits its credit among the requests it causes, and a
//! request that causes none returns its credit to the planner (weight-throwing termination
//! detection). A chain is complete when all of its credit is back.

pub use clasp_wire::runtime::Request;

/// The credit of a whole chain.
pub const FULL_CREDIT: u64 = 1 << 63;

/// Splits `credit` into `parts` shares that sum to it exactly. When `credit < parts` (a chain
/// fanned out by more than 2^63 overall, which no pipeline here approaches), the last shares are
/// zero: the chain's latency may then be measured early, but no record is affected.
pub fn split_credit(credit: u64, parts: usize) -> impl Iterator<Item = u64> {
    let parts = parts.max(1) as u64;
    let (each, rest) = (credit / parts, credit % parts);
    (0..parts).map(move |i| if i == 0 { each + rest } else { each })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credit_splits_exactly() {
        for parts in [1usize, 2, 3, 7, 1000] {
            let shares: Vec<u64> = split_credit(FULL_CREDIT, parts).collect();
            assert_eq!(shares.len(), parts);
            assert_eq!(shares.iter().sum::<u64>(), FULL_CREDIT);
        }
        assert_eq!(split_credit(2, 3).collect::<Vec<_>>(), [2, 0, 0]);
    }
}
