//! Inputs as sequences of lines: files, in-memory corpora, and the applications' generators
//! all implement [`LineSource`], which the runtime's ingress, the local driver and the
//! simulator read from. The runtime reads its inputs through the source API
//! ([`crate::source::Source`]), which line sources join through [`crate::source::Lines`].

use std::io::{self, BufRead, BufReader, Read};

/// A sequence of input lines (one record each).
pub trait LineSource: Send {
    /// Replaces `line` with the next line (without its newline); `false` at the end.
    fn next_line(&mut self, line: &mut Vec<u8>) -> io::Result<bool>;

    /// Reads the next record into `rec`. Line inputs keep this default: a line, keyed by the
    /// source's `key_field`, entering the pipeline when it is read. Inputs whose records were
    /// produced elsewhere (an edge device's cut streams) set `rec.key`, and `rec.origin_ns`
    /// when the record's chain started before it reached this input; they may also answer
    /// [`Next::Idle`] when nothing arrived for a while, so the records read so far go out
    /// without waiting for a full request.
    fn next_record(&mut self, rec: &mut InputRecord) -> io::Result<Next> {
        rec.keyed = false;
        rec.origin_ns = None;
        rec.time = None;
        Ok(if self.next_line(&mut rec.value)? { Next::Record } else { Next::End })
    }
}

/// What [`LineSource::next_record`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// A record.
    Record,
    /// Nothing for now: send what was read so far, then ask again.
    Idle,
    /// The input is exhausted.
    End,
}

/// One record read by [`LineSource::next_record`].
#[derive(Clone, Debug, Default)]
pub struct InputRecord {
    /// The key, when `keyed`.
    pub key: Vec<u8>,
    /// The record (a line for line inputs).
    pub value: Vec<u8>,
    /// Whether `key` holds the key; otherwise the source's `key_field` keys the value.
    pub keyed: bool,
    /// When the record's chain started (ns since the Unix epoch, the runtime's clock), if
    /// earlier than its arrival here: end-to-end latency then counts from it.
    pub origin_ns: Option<u64>,
    /// The record's event time, if its source knows it (see [`crate::time`]).
    pub time: Option<u64>,
}

/// Lines of a file or any reader.
pub struct LineReader<R> {
    reader: BufReader<R>,
}

impl<R> std::fmt::Debug for LineReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LineReader")
    }
}

impl<R: Read> LineReader<R> {
    /// Reads lines from `r`.
    pub fn new(r: R) -> Self {
        Self { reader: BufReader::with_capacity(1 << 20, r) }
    }
}

impl<R: Read + Send> LineSource for LineReader<R> {
    fn next_line(&mut self, line: &mut Vec<u8>) -> io::Result<bool> {
        line.clear();
        if self.reader.read_until(b'\n', line)? == 0 {
            return Ok(false);
        }
        while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            line.pop();
        }
        Ok(true)
    }
}

/// Lines held in memory (a corpus loaded before a measurement starts).
#[derive(Debug)]
pub struct MemoryLines {
    lines: std::sync::Arc<Vec<Vec<u8>>>,
    next: usize,
    step: usize,
}

impl MemoryLines {
    /// Every `step`-th line starting at `first`.
    pub fn new(lines: std::sync::Arc<Vec<Vec<u8>>>, first: usize, step: usize) -> Self {
        Self { lines, next: first, step: step.max(1) }
    }
}

impl LineSource for MemoryLines {
    fn next_line(&mut self, line: &mut Vec<u8>) -> io::Result<bool> {
        let Some(l) = self.lines.get(self.next) else { return Ok(false) };
        line.clear();
        line.extend_from_slice(l);
        self.next += self.step;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_without_newlines() {
        let mut r = LineReader::new(&b"a b\r\nc\n\nlast"[..]);
        let mut v = Vec::new();
        let mut lines = Vec::new();
        while r.next_line(&mut v).unwrap() {
            lines.push(String::from_utf8(v.clone()).unwrap());
        }
        assert_eq!(lines, ["a b", "c", "", "last"]);
    }
}
