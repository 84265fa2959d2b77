//! Noticing a run whose chains stopped completing.

use std::time::{Duration, Instant};

/// How long chains may go without completing once every input was read.
const STALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Notices a run whose inputs are all dispatched but whose chains stopped completing, so that
/// a lost completion ends the run with an error instead of waiting forever.
#[derive(Debug, Default)]
pub(super) struct StallWatch {
    completed: u64,
    since: Option<Instant>,
}

impl StallWatch {
    /// Seconds without a completion since the inputs were drained, once over the timeout.
    pub(super) fn stalled(&mut self, drained: bool, completed: u64) -> Option<u64> {
        if !drained || completed != self.completed {
            self.completed = completed;
            self.since = None;
            return None;
        }
        let since = *self.since.get_or_insert_with(Instant::now);
        (since.elapsed() >= STALL_TIMEOUT).then(|| since.elapsed().as_secs())
    }
}
