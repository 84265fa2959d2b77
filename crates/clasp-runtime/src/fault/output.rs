//! The transactional `--output`: records of an epoch become visible only when its checkpoint
//! commits, so after any failure and recovery the file holds every result exactly once.
//!
//! Records go to `OUT.pending`. A checkpoint's boundary renames it to `OUT.ckpt-ID` (sealed);
//! once the checkpoint's manifest is written, the sealed segment is appended to `OUT`, synced,
//! and removed. The manifest records `OUT`'s length before and after the append, so a restart
//! after any crash truncates `OUT` to the committed length (and re-appends the committed
//! segment if the crash came between the manifest and the append). Records reach `OUT` one
//! checkpoint interval (plus the checkpoint's write) after they were produced.

use super::manifest::OutputCommit;
use crate::planner::SinkOutput;
use clasp_core::Batch;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Seek, Write};
use std::path::{Path, PathBuf};

/// What a checkpoint's boundary sealed of the output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputMark {
    /// The output file.
    pub path: PathBuf,
    /// The sealed segment's file.
    pub segment: PathBuf,
    /// Its length.
    pub bytes: u64,
}

/// The output file, written by checkpoint.
#[derive(Debug)]
pub struct TransactionalOutput {
    path: PathBuf,
    pending: BufWriter<File>,
    /// Length of the output file: everything published.
    published: u64,
    /// Sealed segments not yet published, oldest first.
    sealed: Vec<(u64, OutputMark)>,
}

fn with_suffix(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

fn context(path: &Path, what: &str, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{what} {}: {e}", path.display()))
}

/// The segment file of checkpoint `id`.
pub fn segment_path(output: &Path, id: u64) -> PathBuf {
    with_suffix(output, &format!(".ckpt-{id:08}"))
}

impl TransactionalOutput {
    /// Starts `path` afresh (empty), or, with `resume`, at the length a committed checkpoint
    /// recorded (see the module docs).
    pub fn open(path: &Path, resume: Option<&OutputCommit>) -> io::Result<Self> {
        let mut out = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| context(path, "opening", e))?;
        let published = match resume {
            None => {
                out.set_len(0).map_err(|e| context(path, "truncating", e))?;
                0
            }
            Some(c) => restore_length(path, &mut out, c)?,
        };
        out.sync_all().map_err(|e| context(path, "syncing", e))?;
        remove_stale_segments(path)?;
        let pending_path = with_suffix(path, ".pending");
        let pending =
            File::create(&pending_path).map_err(|e| context(&pending_path, "creating", e))?;
        Ok(Self {
            path: path.to_path_buf(),
            pending: BufWriter::new(pending),
            published,
            sealed: Vec::new(),
        })
    }

    /// Bytes of the output file (published records).
    pub fn published(&self) -> u64 {
        self.published
    }

    fn pending_path(&self) -> PathBuf {
        with_suffix(&self.path, ".pending")
    }

    /// Starts an empty pending file. What the old writer still buffers is dropped, not
    /// written: flushed on drop, it would land in the new file (same path) at its old offset.
    fn reopen_pending(&mut self) -> io::Result<()> {
        let p = self.pending_path();
        let fresh = BufWriter::new(File::create(&p).map_err(|e| context(&p, "creating", e))?);
        let (_file, _unwritten) = std::mem::replace(&mut self.pending, fresh).into_parts();
        Ok(())
    }
}

/// Brings the output file to the length checkpoint `c` committed.
fn restore_length(path: &Path, out: &mut File, c: &OutputCommit) -> io::Result<u64> {
    let len = out.metadata()?.len();
    if len >= c.bytes_after {
        out.set_len(c.bytes_after).map_err(|e| context(path, "truncating", e))?;
        return Ok(c.bytes_after);
    }
    // The crash came between the manifest and the append: append the committed segment.
    let segment = &c.segment;
    let bytes =
        fs::read(segment).map_err(|e| context(segment, "reading the committed segment", e))?;
    if bytes.len() as u64 != c.bytes_after - c.bytes_before || len < c.bytes_before {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: {len} bytes, and the committed segment {} has {} bytes: they do not make the {} bytes the checkpoint committed",
                path.display(),
                segment.display(),
                bytes.len(),
                c.bytes_after
            ),
        ));
    }
    out.set_len(c.bytes_before)?;
    out.seek(io::SeekFrom::End(0))?;
    out.write_all(&bytes)?;
    Ok(c.bytes_after)
}

/// Removes segments of checkpoints that never committed, and the pending records.
fn remove_stale_segments(path: &Path) -> io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else { return Ok(()) };
    let segment = format!("{name}.ckpt-");
    for e in fs::read_dir(dir).map_err(|e| context(dir, "listing", e))? {
        let e = e?;
        if e.file_name().to_str().is_some_and(|n| n.starts_with(&segment)) {
            fs::remove_file(e.path())?;
        }
    }
    Ok(())
}

impl SinkOutput for TransactionalOutput {
    fn write(&mut self, name: &str, batch: &Batch) -> io::Result<()> {
        crate::planner::JsonLinesSink(&mut self.pending).write(name, batch)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.pending.flush()
    }

    fn seal(&mut self, checkpoint: u64) -> io::Result<Option<OutputMark>> {
        self.pending.flush()?;
        let bytes = self.pending.get_ref().metadata()?.len();
        let segment = segment_path(&self.path, checkpoint);
        fs::rename(self.pending_path(), &segment).map_err(|e| context(&segment, "sealing", e))?;
        self.reopen_pending()?;
        let mark = OutputMark { path: self.path.clone(), segment, bytes };
        self.sealed.push((checkpoint, mark.clone()));
        Ok(Some(mark))
    }

    fn publish(&mut self, checkpoint: u64) -> io::Result<()> {
        while let Some(pos) = self.sealed.iter().position(|(id, _)| *id <= checkpoint) {
            let (_, mark) = self.sealed.remove(pos);
            let bytes =
                fs::read(&mark.segment).map_err(|e| context(&mark.segment, "reading", e))?;
            let mut out = OpenOptions::new()
                .append(true)
                .open(&self.path)
                .map_err(|e| context(&self.path, "opening", e))?;
            out.write_all(&bytes)?;
            out.sync_all()?;
            self.published += bytes.len() as u64;
            fs::remove_file(&mark.segment)?;
        }
        Ok(())
    }

    fn discard(&mut self) -> io::Result<()> {
        for (_, mark) in self.sealed.drain(..) {
            let _ = fs::remove_file(&mark.segment);
        }
        self.reopen_pending()
    }
}

impl Drop for TransactionalOutput {
    fn drop(&mut self) {
        // Pending records of an unfinished epoch are never visible.
        let _ = fs::remove_file(self.pending_path());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::JsonLinesSink;

    fn batch(from: u32, n: u32) -> Batch {
        let mut b = Batch::default();
        for i in from..from + n {
            b.push(format!("k{i}").as_bytes(), format!("{i}").as_bytes());
        }
        b
    }

    /// What a plain JSON-lines sink writes for `batches`.
    fn plain(batches: &[Batch]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut sink = JsonLinesSink(&mut out);
        for b in batches {
            sink.write("s", b).unwrap();
        }
        out
    }

    #[test]
    fn records_become_visible_when_their_checkpoint_commits_and_a_recovery_drops_the_rest() {
        let dir = std::env::temp_dir().join(format!("clasp-txout-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.jsonl");
        let (a, b, c) = (batch(0, 5), batch(5, 3), batch(8, 4));
        let mut out = TransactionalOutput::open(&path, None).unwrap();
        out.write("s", &a).unwrap();
        let mark = out.seal(1).unwrap().unwrap();
        assert_eq!(mark.bytes, plain(std::slice::from_ref(&a)).len() as u64);
        assert!(fs::read(&path).unwrap().is_empty(), "visible before its commit");
        out.write("s", &b).unwrap();
        out.publish(1).unwrap();
        assert_eq!(fs::read(&path).unwrap(), plain(std::slice::from_ref(&a)));
        // Checkpoint 2 seals b but a failure comes before it commits.
        out.seal(2).unwrap();
        out.write("s", &c).unwrap();
        out.discard().unwrap();
        assert_eq!(fs::read(&path).unwrap(), plain(std::slice::from_ref(&a)));
        // What was still buffered of the dropped epoch reaches no later one.
        out.flush().unwrap();
        assert_eq!(
            fs::metadata(out.pending_path()).unwrap().len(),
            0,
            "the dropped epoch's records"
        );
        // Replayed after the recovery, b and c commit with checkpoint 3.
        out.write("s", &b).unwrap();
        out.write("s", &c).unwrap();
        let before = out.published();
        let sealed = out.seal(3).unwrap().unwrap();
        out.publish(3).unwrap();
        let all = plain(&[a.clone(), b.clone(), c.clone()]);
        assert_eq!(fs::read(&path).unwrap(), all);
        drop(out);

        // A restart truncates what a later, uncommitted append left...
        let commit = OutputCommit {
            path: path.clone(),
            segment: sealed.segment.clone(),
            bytes_before: before,
            bytes_after: before + sealed.bytes,
        };
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"{\"uncommitted\":1}\n").unwrap();
        drop(f);
        let out = TransactionalOutput::open(&path, Some(&commit)).unwrap();
        assert_eq!(out.published(), all.len() as u64);
        assert_eq!(fs::read(&path).unwrap(), all);
        drop(out);
        // ...and re-appends a committed segment a crash kept from reaching the file.
        fs::write(&commit.segment, &all[before as usize..]).unwrap();
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(before).unwrap();
        drop(f);
        TransactionalOutput::open(&path, Some(&commit)).unwrap();
        assert_eq!(fs::read(&path).unwrap(), all);
        fs::remove_dir_all(&dir).unwrap();
    }
}
