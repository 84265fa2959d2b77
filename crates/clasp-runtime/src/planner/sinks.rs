//! Where the records reaching the pipeline's sinks go.

use crate::fault::output::OutputMark;
use clasp_core::Batch;
use std::io::Write;

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
