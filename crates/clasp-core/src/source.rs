//! The source API: what feeds a pipeline's sources, in clasp's own inputs and in user crates.
//!
//! A [`Source`] reads records ([`InputRecord`]: a value, optionally a key, an event time and
//! when its chain started), reports its [`SourcePosition`] so that a run can later replay from
//! there ([`Source::seek`]), and may generate its own watermark. A source that does not leaves
//! watermarks to the runtime: the largest event time read minus the spec's `out_of_orderness`
//! ([`crate::time::BoundedOutOfOrderness`]).
//!
//! Clasp's inputs on it: [`FileSource`] (lines of a file, positions are byte offsets, seekable
//! both ways), [`Replayable`] (a generator re-created from its seed and skipped forward), and
//! [`Lines`], the adapter that puts any [`LineSource`] on this API (positions count records;
//! it seeks forward only). Each can read event times from lines with an
//! [`EventTimeFn`](crate::registry::EventTimeFn).

use crate::input::{InputRecord, LineReader, LineSource, Next};
use crate::registry::EventTimeFn;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{self, BufRead, BufReader, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// Where a source is: opaque to the runtime, meaningful to the source that produced it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SourcePosition(#[serde(with = "crate::batch::byte_vec")] pub Vec<u8>);

impl SourcePosition {
    /// A position that is one number (a record count, a byte offset).
    pub fn at(n: u64) -> Self {
        Self(n.to_le_bytes().to_vec())
    }

    /// Makes this the position [`SourcePosition::at`] `n`, in its own buffer.
    pub fn set_number(&mut self, n: u64) {
        self.0.clear();
        self.0.extend_from_slice(&n.to_le_bytes());
    }

    /// The number of a position made by [`SourcePosition::at`].
    pub fn number(&self) -> Result<u64, SourceError> {
        let bytes: [u8; 8] = self
            .0
            .as_slice()
            .try_into()
            .map_err(|_| SourceError::BadPosition { len: self.0.len() })?;
        Ok(u64::from_le_bytes(bytes))
    }
}

/// Why a source cannot go where it was asked.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// Reading or seeking failed.
    #[error("reading the input: {0}")]
    Io(#[from] io::Error),
    /// The position is not one this kind of source produces.
    #[error("a position of {len} bytes is not one this source produced (8 expected)")]
    BadPosition {
        /// Its length.
        len: usize,
    },
    /// The source only moves forward and is past the position.
    #[error("this source is at record {at} and cannot go back to record {to}")]
    CannotRewind {
        /// Records read so far.
        at: u64,
        /// The record asked for.
        to: u64,
    },
    /// The input ends before the position.
    #[error("the input ends at {end}, before position {to}")]
    PastEnd {
        /// Where the input ended.
        end: u64,
        /// The position asked for.
        to: u64,
    },
}

/// What feeds a pipeline source.
pub trait Source: Send {
    /// Reads the next record into `rec`; the caller resets `rec` first (`time`, `keyed` and
    /// `origin_ns` cleared), so a source sets only what it knows.
    fn next_record(&mut self, rec: &mut InputRecord) -> io::Result<Next>;

    /// Where the source is: after the last record read. Seeking a source over the same input
    /// there continues with the next record.
    fn position(&self) -> SourcePosition;

    /// [`Source::position`] into `out`, reusing its buffer (the ingress asks before every
    /// record, so a source whose position is a number should override it).
    fn position_into(&self, out: &mut SourcePosition) {
        *out = self.position();
    }

    /// Continues after `position`, from an earlier [`Source::position`] over the same input.
    fn seek(&mut self, position: &SourcePosition) -> Result<(), SourceError>;

    /// Whether [`Source::seek`] also goes back to earlier positions (what recovering a running
    /// job needs), not only forward.
    fn rewindable(&self) -> bool {
        false
    }

    /// The source's own watermark, if it generates one; `None` leaves it to the runtime
    /// (bounded out-of-orderness over the event times read).
    fn watermark(&self) -> Option<u64> {
        None
    }
}

/// Seeks a source whose position is a record count forward from `read` records to `to`,
/// reading with `next` (a stream that is not kept cannot go back).
pub fn skip_records(
    read: u64,
    to: u64,
    mut next: impl FnMut(&mut InputRecord) -> io::Result<Next>,
) -> Result<(), SourceError> {
    if to < read {
        return Err(SourceError::CannotRewind { at: read, to });
    }
    let (mut at, mut rec) = (read, InputRecord::default());
    while at < to {
        reset(&mut rec);
        match next(&mut rec)? {
            Next::Record => at += 1,
            Next::Idle => {}
            Next::End => return Err(SourceError::PastEnd { end: at, to }),
        }
    }
    Ok(())
}

/// Clears what a source sets, before asking it for a record.
#[inline]
pub fn reset(rec: &mut InputRecord) {
    rec.keyed = false;
    rec.origin_ns = None;
    rec.time = None;
}

/// Any [`LineSource`] on the source API: positions count records, seeking skips forward.
pub struct Lines<L> {
    inner: L,
    read: u64,
    event_time: Option<EventTimeFn>,
}

impl<L> std::fmt::Debug for Lines<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lines").field("read", &self.read).finish_non_exhaustive()
    }
}

impl<L: LineSource> Lines<L> {
    /// The adapter over `inner`.
    pub fn new(inner: L) -> Self {
        Self { inner, read: 0, event_time: None }
    }

    /// Reads each record's event time from its line with `f` (when the line source sets none).
    pub fn with_event_time(mut self, f: Option<EventTimeFn>) -> Self {
        self.event_time = f;
        self
    }
}

impl<L: LineSource> Source for Lines<L> {
    fn next_record(&mut self, rec: &mut InputRecord) -> io::Result<Next> {
        let next = self.inner.next_record(rec)?;
        if next == Next::Record {
            self.read += 1;
            if rec.time.is_none()
                && let Some(f) = &self.event_time
            {
                rec.time = f(&rec.value);
            }
        }
        Ok(next)
    }

    fn position(&self) -> SourcePosition {
        SourcePosition::at(self.read)
    }

    fn position_into(&self, out: &mut SourcePosition) {
        out.set_number(self.read);
    }

    fn seek(&mut self, position: &SourcePosition) -> Result<(), SourceError> {
        let to = position.number()?;
        skip_records(self.read, to, |rec| self.inner.next_record(rec))?;
        self.read = to;
        Ok(())
    }
}

/// A boxed line source on the source API (the form the runtime's inputs take).
pub fn from_lines(lines: Box<dyn LineSource>, event_time: Option<EventTimeFn>) -> Box<dyn Source> {
    Box::new(Lines::new(lines).with_event_time(event_time))
}

impl LineSource for Box<dyn LineSource> {
    fn next_line(&mut self, line: &mut Vec<u8>) -> io::Result<bool> {
        (**self).next_line(line)
    }
    fn next_record(&mut self, rec: &mut InputRecord) -> io::Result<Next> {
        (**self).next_record(rec)
    }
}

/// Lines of a file; positions are byte offsets, so it replays from any earlier position.
#[derive(Debug)]
pub struct FileSource {
    path: PathBuf,
    reader: BufReader<File>,
    offset: u64,
    event_time: Option<EventTimeFnDebug>,
}

/// An event-time function, shown by name only in `Debug`.
#[derive(Clone)]
struct EventTimeFnDebug(EventTimeFn);

impl std::fmt::Debug for EventTimeFnDebug {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("EventTimeFn")
    }
}

impl FileSource {
    /// Opens `path`.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        Ok(Self {
            path: path.to_owned(),
            reader: BufReader::with_capacity(1 << 20, file),
            offset: 0,
            event_time: None,
        })
    }

    /// Reads each record's event time from its line with `f`.
    pub fn with_event_time(mut self, f: Option<EventTimeFn>) -> Self {
        self.event_time = f.map(EventTimeFnDebug);
        self
    }

    /// The file read.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Source for FileSource {
    fn next_record(&mut self, rec: &mut InputRecord) -> io::Result<Next> {
        rec.value.clear();
        let n = self.reader.read_until(b'\n', &mut rec.value)?;
        if n == 0 {
            return Ok(Next::End);
        }
        self.offset += n as u64;
        while rec.value.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
            rec.value.pop();
        }
        if let Some(f) = &self.event_time {
            rec.time = (f.0)(&rec.value);
        }
        Ok(Next::Record)
    }

    fn position(&self) -> SourcePosition {
        SourcePosition::at(self.offset)
    }

    fn position_into(&self, out: &mut SourcePosition) {
        out.set_number(self.offset);
    }

    fn seek(&mut self, position: &SourcePosition) -> Result<(), SourceError> {
        let to = position.number()?;
        let end = self.reader.get_ref().metadata()?.len();
        if to > end {
            return Err(SourceError::PastEnd { end, to });
        }
        self.reader.seek(SeekFrom::Start(to))?;
        self.offset = to;
        Ok(())
    }

    fn rewindable(&self) -> bool {
        true
    }
}

/// Makes a fresh line source over the same input (a generator from its seed, say).
pub type Reopen = Box<dyn Fn() -> io::Result<Box<dyn LineSource>> + Send>;

/// A line source that can be made again from the start: positions count records, and seeking
/// back re-creates it and skips forward, so a seeded generator replays from any position.
pub struct Replayable {
    reopen: Reopen,
    lines: Lines<Box<dyn LineSource>>,
}

impl std::fmt::Debug for Replayable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replayable").field("lines", &self.lines).finish_non_exhaustive()
    }
}

impl Replayable {
    /// The input `reopen` makes, read from its start.
    pub fn new(reopen: Reopen, event_time: Option<EventTimeFn>) -> io::Result<Self> {
        let lines = Lines::new(reopen()?).with_event_time(event_time);
        Ok(Self { reopen, lines })
    }
}

impl Source for Replayable {
    fn next_record(&mut self, rec: &mut InputRecord) -> io::Result<Next> {
        self.lines.next_record(rec)
    }

    fn position(&self) -> SourcePosition {
        self.lines.position()
    }

    fn position_into(&self, out: &mut SourcePosition) {
        self.lines.position_into(out);
    }

    fn seek(&mut self, position: &SourcePosition) -> Result<(), SourceError> {
        if position.number()? < self.lines.read {
            let event_time = self.lines.event_time.clone();
            self.lines = Lines::new((self.reopen)()?).with_event_time(event_time);
        }
        self.lines.seek(position)
    }

    fn rewindable(&self) -> bool {
        true
    }
}

/// Lines of any reader on the source API (positions count records; forward seeks only).
pub fn reader<R: io::Read + Send + 'static>(r: R) -> Box<dyn Source> {
    Box::new(Lines::new(LineReader::new(r)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::MemoryLines;
    use std::sync::Arc;

    fn drain(s: &mut dyn Source) -> Vec<(String, Option<u64>)> {
        let mut rec = InputRecord::default();
        let mut out = Vec::new();
        loop {
            reset(&mut rec);
            match s.next_record(&mut rec).unwrap() {
                Next::Record => {
                    out.push((String::from_utf8(rec.value.clone()).unwrap(), rec.time));
                }
                Next::Idle => {}
                Next::End => return out,
            }
        }
    }

    fn first_field() -> Option<EventTimeFn> {
        Some(Arc::new(|l: &[u8]| std::str::from_utf8(l).ok()?.split(',').next()?.parse().ok()))
    }

    #[test]
    fn a_file_source_replays_from_any_position_with_times() {
        let dir = std::env::temp_dir().join(format!("clasp-source-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("in.csv");
        std::fs::write(&path, "5,a\n3,b\r\nx,c\n9,d").unwrap();
        let mut s = FileSource::open(&path).unwrap().with_event_time(first_field());
        let mut rec = InputRecord::default();
        s.next_record(&mut rec).unwrap();
        let after_first = s.position();
        let rest = drain(&mut s);
        assert_eq!(rest, [("3,b".into(), Some(3)), ("x,c".into(), None), ("9,d".into(), Some(9))]);
        s.seek(&after_first).unwrap();
        assert_eq!(drain(&mut s), rest, "replayed from the position");
        s.seek(&SourcePosition::at(0)).unwrap();
        assert_eq!(drain(&mut s).len(), 4);
        assert!(matches!(s.seek(&SourcePosition::at(999)), Err(SourceError::PastEnd { .. })));
        assert!(matches!(s.seek(&SourcePosition(vec![1])), Err(SourceError::BadPosition { .. })));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn line_sources_seek_forward_and_replayable_ones_back() {
        let lines: Arc<Vec<Vec<u8>>> =
            Arc::new((0..10).map(|i| format!("{i},x").into_bytes()).collect());
        let mut fwd =
            Lines::new(MemoryLines::new(lines.clone(), 0, 1)).with_event_time(first_field());
        fwd.seek(&SourcePosition::at(7)).unwrap();
        assert_eq!(drain(&mut fwd).first(), Some(&("7,x".to_string(), Some(7))));
        assert!(matches!(fwd.seek(&SourcePosition::at(2)), Err(SourceError::CannotRewind { .. })));
        let again = lines.clone();
        let mut replay = Replayable::new(
            Box::new(move || {
                Ok(Box::new(MemoryLines::new(again.clone(), 0, 1)) as Box<dyn LineSource>)
            }),
            None,
        )
        .unwrap();
        let all = drain(&mut replay);
        assert_eq!(replay.position(), SourcePosition::at(10));
        replay.seek(&SourcePosition::at(4)).unwrap();
        assert_eq!(drain(&mut replay), all[4..]);
        assert!(matches!(replay.seek(&SourcePosition::at(11)), Err(SourceError::PastEnd { .. })));
    }
}
