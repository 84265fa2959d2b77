//! Collecting the workers' keyed state.

use super::membership::Event;
use super::{Planner, PlannerError};
use crate::wire::Message;
use clasp_core::{OperatorId, WorkerId};
use std::io::Write;
use std::time::{Duration, Instant};

impl Planner {
    /// Collects every worker's keyed state: `(worker, operator, JSON line)` per key.
    pub fn collect_state(&mut self) -> Result<Vec<(WorkerId, OperatorId, Vec<u8>)>, PlannerError> {
        let mut waiting = self.workers();
        for &w in &waiting {
            self.shared.send(w, Message::DumpState);
        }
        let mut lines = Vec::new();
        while !waiting.is_empty() {
            match self.events.recv_timeout(Duration::from_secs(60)) {
                Ok(Event::StateLines(w, op, text)) => lines.extend(
                    text.split(|b| *b == b'\n')
                        .filter(|l| !l.is_empty())
                        .map(|l| (w, op, l.to_vec())),
                ),
                Ok(Event::StateDone(w)) => waiting.retain(|x| *x != w),
                Ok(other) => {
                    self.handle_event(other)?;
                    // A worker dropped meanwhile (it held no state) sends no dump.
                    let members = self.workers();
                    waiting.retain(|w| members.contains(w));
                }
                Err(_) => return Err(PlannerError::Timeout { what: "state dumps".into() }),
            }
        }
        Ok(lines)
    }

    /// Writes every worker's keyed state as JSON lines, by operator (pipeline order), each
    /// operator's lines sorted.
    pub fn dump_state(&mut self, out: &mut dyn Write) -> Result<usize, PlannerError> {
        let mut lines = self.collect_state()?;
        lines.sort_unstable_by(|a, b| (a.1, &a.2).cmp(&(b.1, &b.2)));
        for (_, _, l) in &lines {
            out.write_all(l)
                .and_then(|()| out.write_all(b"\n"))
                .map_err(|error| PlannerError::Output { what: "state dump".into(), error })?;
        }
        Ok(lines.len())
    }

    /// After a failure: writes the keyed state of the workers still connected, as
    /// [`Planner::dump_state`] does, waiting at most `timeout` for them. Returns the lines
    /// written and the workers whose state they are (the others' state is lost).
    pub fn dump_surviving_state(
        &mut self,
        out: &mut dyn Write,
        timeout: Duration,
    ) -> Result<(usize, Vec<WorkerId>), PlannerError> {
        let mut waiting = self.workers();
        for &w in &waiting {
            self.shared.send(w, Message::DumpState);
        }
        let deadline = Instant::now() + timeout;
        let (mut lines, mut done) = (Vec::new(), Vec::new());
        while !waiting.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.events.recv_timeout(left) {
                Ok(Event::StateLines(w, op, text)) => lines.extend(
                    text.split(|b| *b == b'\n')
                        .filter(|l| !l.is_empty())
                        .map(|l| (w, op, l.to_vec())),
                ),
                Ok(Event::StateDone(w)) => {
                    waiting.retain(|x| *x != w);
                    done.push(w);
                }
                Ok(Event::Lost(w, _)) => waiting.retain(|x| *x != w),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        lines.retain(|(w, _, _)| done.contains(w));
        lines.sort_unstable_by(|a, b| (a.1, &a.2).cmp(&(b.1, &b.2)));
        for (_, _, l) in &lines {
            out.write_all(l)
                .and_then(|()| out.write_all(b"\n"))
                .map_err(|error| PlannerError::Output { what: "state dump".into(), error })?;
        }
        done.sort_unstable();
        Ok((lines.len(), done))
    }
}
