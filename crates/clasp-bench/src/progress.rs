//! Progress of long experiments on stderr: one line per step with the elapsed time, so that a
//! run of several minutes shows where it is (and stdout stays the markdown report).

use std::time::Instant;

/// Counts steps of an experiment and reports each on stderr.
#[derive(Debug)]
pub struct Progress {
    name: String,
    total: usize,
    done: usize,
    started: Instant,
    quiet: bool,
}

impl Progress {
    /// `total` steps of experiment `name`.
    pub fn new(name: &str, total: usize) -> Self {
        Self { name: name.to_owned(), total, done: 0, started: Instant::now(), quiet: false }
    }

    /// A progress that prints nothing (for tests and library callers).
    pub fn quiet(mut self) -> Self {
        self.quiet = true;
        self
    }

    /// Starts the next step, described by `what`.
    pub fn step(&mut self, what: &str) {
        self.done += 1;
        if self.quiet {
            return;
        }
        let width = 20;
        let filled = (self.done * width).checked_div(self.total).unwrap_or(width).min(width);
        eprintln!(
            "[{}{}] {}/{} {}: {what} ({:.1} s)",
            "#".repeat(filled),
            ".".repeat(width - filled),
            self.done,
            self.total,
            self.name,
            self.started.elapsed().as_secs_f64()
        );
    }

    /// Steps started so far.
    pub fn done(&self) -> usize {
        self.done
    }
}
