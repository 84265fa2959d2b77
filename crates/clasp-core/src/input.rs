//! Inputs as sequences of lines: files, in-memory corpora, and the applications' generators
//! all implement [`LineSource`], which the runtime's ingress, the local driver and the
//! simulator read from.
//!
//! A source that can replay says where it is with [`LineSource::position`] and goes back there
//! with [`LineSource::seek`]: files by byte offset, in-memory corpora and generators by record
//! index. Recovery after a failure replays every source from the position its checkpoint holds.

use serde::{Deserialize, Serialize};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};

/// Where a replayable source is in its input: what [`LineSource::seek`] returns to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourcePosition {
    /// Bytes of a file read so far.
    Bytes(u64),
    /// Records read so far (a generator from its seed, a corpus held in memory).
    Records(u64),
}

impl std::fmt::Display for SourcePosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Bytes(n) => write!(f, "byte {n}"),
            Self::Records(n) => write!(f, "record {n}"),
        }
    }
}

/// The error of a source that cannot go to `to`.
pub fn cannot_seek(what: &str, to: SourcePosition) -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, format!("{what} cannot go back to {to}"))
}

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
        Ok(if self.next_line(&mut rec.value)? { Next::Record } else { Next::End })
    }

    /// Where the source is: the position after the last record read, or `None` when it cannot
    /// replay (a socket, a pipe).
    fn position(&self) -> Option<SourcePosition> {
        None
    }

    /// Goes back (or forward) to `to`, a position [`LineSource::position`] gave.
    fn seek(&mut self, to: SourcePosition) -> io::Result<()> {
        Err(cannot_seek("this input", to))
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

/// Lines of a file, replayable by byte offset.
pub struct FileLines {
    reader: BufReader<std::fs::File>,
    offset: u64,
}

impl std::fmt::Debug for FileLines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileLines").field("offset", &self.offset).finish()
    }
}

impl FileLines {
    /// Reads lines of `file` from its start.
    pub fn new(file: std::fs::File) -> Self {
        Self { reader: BufReader::with_capacity(1 << 20, file), offset: 0 }
    }
}

impl LineSource for FileLines {
    fn next_line(&mut self, line: &mut Vec<u8>) -> io::Result<bool> {
        line.clear();
        let n = self.reader.read_until(b'\n', line)?;
        if n == 0 {
            return Ok(false);
        }
        self.offset += n as u64;
        while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            line.pop();
        }
        Ok(true)
    }

    fn position(&self) -> Option<SourcePosition> {
        Some(SourcePosition::Bytes(self.offset))
    }

    fn seek(&mut self, to: SourcePosition) -> io::Result<()> {
        let SourcePosition::Bytes(offset) = to else { return Err(cannot_seek("a file", to)) };
        let len = self.reader.get_ref().metadata()?.len();
        if offset > len {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("byte {offset} is past the end of the file ({len} bytes)"),
            ));
        }
        self.reader.seek(SeekFrom::Start(offset))?;
        self.offset = offset;
        Ok(())
    }
}

/// Lines held in memory (a corpus loaded before a measurement starts).
#[derive(Debug)]
pub struct MemoryLines {
    lines: std::sync::Arc<Vec<Vec<u8>>>,
    first: usize,
    next: usize,
    step: usize,
}

impl MemoryLines {
    /// Every `step`-th line starting at `first`.
    pub fn new(lines: std::sync::Arc<Vec<Vec<u8>>>, first: usize, step: usize) -> Self {
        Self { lines, first, next: first, step: step.max(1) }
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

    fn position(&self) -> Option<SourcePosition> {
        Some(SourcePosition::Records(((self.next - self.first) / self.step) as u64))
    }

    fn seek(&mut self, to: SourcePosition) -> io::Result<()> {
        let SourcePosition::Records(n) = to else { return Err(cannot_seek("a corpus", to)) };
        let next = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_mul(self.step))
            .and_then(|o| o.checked_add(self.first))
            .filter(|_| n <= self.lines.len() as u64)
            .ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidInput, format!("record {n} is past the end"))
            })?;
        self.next = next;
        Ok(())
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

    fn read_rest(s: &mut dyn LineSource) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        let mut out = Vec::new();
        while s.next_line(&mut v).unwrap() {
            out.push(v.clone());
        }
        out
    }

    #[test]
    fn a_file_resumes_from_its_byte_offset() {
        let dir = std::env::temp_dir().join(format!("clasp-filelines-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("in.txt");
        let text: String = (0..100).map(|i| format!("line {i}\r\n")).collect();
        std::fs::write(&path, &text).unwrap();
        let mut a = FileLines::new(std::fs::File::open(&path).unwrap());
        let all = read_rest(&mut a);
        assert_eq!(all.len(), 100);
        let mut b = FileLines::new(std::fs::File::open(&path).unwrap());
        let mut v = Vec::new();
        for _ in 0..37 {
            assert!(b.next_line(&mut v).unwrap());
        }
        let at = b.position().unwrap();
        let expected: usize = (0..37).map(|i| format!("line {i}\r\n").len()).sum();
        assert_eq!(at, SourcePosition::Bytes(expected as u64));
        let _ = read_rest(&mut b);
        b.seek(at).unwrap();
        assert_eq!(read_rest(&mut b), all[37..]);
        assert!(b.seek(SourcePosition::Bytes(text.len() as u64 + 1)).is_err());
        assert!(b.seek(SourcePosition::Records(1)).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn memory_lines_resume_from_their_record_index() {
        let lines: Vec<Vec<u8>> = (0..50).map(|i| format!("{i}").into_bytes()).collect();
        let lines = std::sync::Arc::new(lines);
        let mut m = MemoryLines::new(lines.clone(), 1, 3);
        let all = read_rest(&mut m);
        let expected: Vec<Vec<u8>> = lines.iter().skip(1).step_by(3).cloned().collect();
        assert_eq!(all, expected);
        m.seek(SourcePosition::Records(5)).unwrap();
        assert_eq!(m.position(), Some(SourcePosition::Records(5)));
        assert_eq!(read_rest(&mut m), expected[5..]);
        assert!(LineReader::new(&b"x"[..]).position().is_none(), "a plain reader cannot replay");
    }
}
