//! Where the records reaching the pipeline's sinks go.

use crate::fault::output::OutputMark;
use crate::wire::Cut;
use clasp_core::Batch;
use std::io::Write;
use std::ops::{Deref, DerefMut};

/// Where sink records go.
pub trait SinkOutput: Send {
    /// Records `batch` reaching sink `sink` (named `name`).
    fn write(&mut self, name: &str, batch: &Batch) -> std::io::Result<()>;

    /// Writes out anything buffered; called when a run ends.
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }

    /// Closes the records written since the last checkpoint as those of checkpoint
    /// `checkpoint` (its boundary): a transactional sink keeps them invisible until
    /// [`SinkOutput::publish`]. Returns what the checkpoint's manifest records of it.
    fn seal(&mut self, _checkpoint: u64) -> std::io::Result<Option<OutputMark>> {
        Ok(None)
    }

    /// Checkpoint `checkpoint` committed: its records become visible.
    fn publish(&mut self, _checkpoint: u64) -> std::io::Result<()> {
        Ok(())
    }

    /// Whether committed records are still on their way out (a sink that publishes in the
    /// background): the next checkpoint starts only when they are out, so at most one
    /// committed checkpoint's records are ever outstanding.
    fn publishing(&self) -> bool {
        false
    }

    /// A recovery: drops every record not published (they will be produced again).
    fn discard(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The sink, and the records that arrived during a checkpoint's boundary from chains of its
/// new cut: they belong to the epoch after the one the boundary seals, so they wait until
/// it is sealed.
pub(super) struct CutOutput {
    out: Box<dyn SinkOutput>,
    /// The cut being drained, and the records of it (or later) that arrived meanwhile.
    ahead: Option<(u64, Vec<(String, Batch)>)>,
}

impl CutOutput {
    pub(super) fn new(out: Box<dyn SinkOutput>) -> Self {
        Self { out, ahead: None }
    }

    /// Records `batch` of chains of `cut` reaching sink `name`.
    pub(super) fn write_cut(&mut self, name: &str, batch: Batch, cut: Cut) -> std::io::Result<()> {
        match &mut self.ahead {
            Some((draining, records)) if cut.is_after(*draining - 1) => {
                records.push((name.to_owned(), batch));
                Ok(())
            }
            _ => self.out.write(name, &batch),
        }
    }

    /// Records of chains of `cut` (and later) wait from now on until [`CutOutput::seal_cut`].
    pub(super) fn begin_cut(&mut self, cut: u64) {
        self.ahead = Some((cut, Vec::new()));
    }

    /// Every chain before the cut completed: seals their records as checkpoint
    /// `checkpoint`'s, then writes those that waited (into the next epoch).
    pub(super) fn seal_cut(&mut self, checkpoint: u64) -> std::io::Result<Option<OutputMark>> {
        let mark = self.out.seal(checkpoint)?;
        for (name, batch) in self.ahead.take().map(|(_, r)| r).unwrap_or_default() {
            self.out.write(&name, &batch)?;
        }
        Ok(mark)
    }

    /// A recovery: drops every record not published, those waiting included.
    pub(super) fn discard_all(&mut self) -> std::io::Result<()> {
        self.ahead = None;
        self.out.discard()
    }
}

impl Deref for CutOutput {
    type Target = dyn SinkOutput;

    fn deref(&self) -> &Self::Target {
        &*self.out
    }
}

impl DerefMut for CutOutput {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut *self.out
    }
}

/// Writes sink records as JSON lines `{"sink":…,"key":…,"value":…}`.
#[derive(Debug)]
pub struct JsonLinesSink<W: Write + Send>(pub W);

impl<W: Write + Send> SinkOutput for JsonLinesSink<W> {
    fn write(&mut self, name: &str, batch: &Batch) -> std::io::Result<()> {
        let sink = serde_json::to_string(name).map_err(std::io::Error::other)?;
        for r in batch.iter() {
            let key = serde_json::to_string(&clasp_core::state::key_to_text(r.key))
                .map_err(std::io::Error::other)?;
            let value = serde_json::to_string(&clasp_core::state::key_to_text(r.value))
                .map_err(std::io::Error::other)?;
            writeln!(self.0, "{{\"sink\":{sink},\"key\":{key},\"value\":{value}}}")?;
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Counts sink records and discards them.
#[derive(Debug, Default)]
pub struct DiscardSink;

impl SinkOutput for DiscardSink {
    fn write(&mut self, _: &str, _: &Batch) -> std::io::Result<()> {
        Ok(())
    }
}
