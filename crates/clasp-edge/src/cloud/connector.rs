//! The cut streams arriving in the cloud: the receivers ([`super::receiver`]) put each
//! device's items on the queue of their connector, and each connector is one input of the
//! runtime, whose watermark is the minimum of the watermarks of the devices sending it.

use crate::protocol::Item;
use clasp_core::Batch;
use clasp_core::input::{InputRecord, Next};
use clasp_core::registry::EventTimeFn;
use clasp_core::source::{self, Source, SourceError, SourcePosition};
use crossbeam_channel::{Receiver, RecvTimeoutError};
use std::io;
use std::time::Duration;

/// An item waiting for the runtime, with the device it came from.
pub(super) struct Frame {
    /// The device (its index in the devices file).
    pub(super) device: usize,
    /// See [`Item::origin_ns`].
    pub(super) origin_ns: u64,
    /// See [`Item::watermark`].
    pub(super) watermark: Option<u64>,
    /// See [`Item::records`].
    pub(super) records: Batch,
}

impl Frame {
    /// Item `item` of device `device`.
    pub(super) fn of(device: usize, item: Item) -> Self {
        Self { device, origin_ns: item.origin_ns, watermark: item.watermark, records: item.records }
    }
}

/// One connector's records as an input of the runtime: keyed, with their event times (read
/// from the record by the source's function when the device sent none: a raw record), stamped
/// with their origin, and ending when every device sending the connector has ended.
///
/// Its watermark is the minimum over the devices sending the connector of the watermark of
/// each device's last item taken in whole: a device's items arrive in order, and the records
/// of an item are at or above the watermarks of its earlier items, so none of them is late.
/// It has none until every device has sent one.
pub struct ConnectorInput {
    rx: Receiver<Frame>,
    current: Option<Frame>,
    next: usize,
    idle: Duration,
    /// Per device sending the connector: its index and the watermark of its last item taken.
    watermarks: Vec<(usize, Option<u64>)>,
    event_time: Option<EventTimeFn>,
    read: u64,
}

impl std::fmt::Debug for ConnectorInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectorInput").field("queued", &self.rx.len()).finish_non_exhaustive()
    }
}

impl ConnectorInput {
    /// The connector whose items `rx` receives from `devices` (indices in the devices file);
    /// raw records get their times from `event_time`.
    pub(super) fn new(
        rx: Receiver<Frame>,
        idle: Duration,
        devices: &[usize],
        event_time: Option<EventTimeFn>,
    ) -> Self {
        let watermarks = devices.iter().map(|&d| (d, None)).collect();
        Self { rx, current: None, next: 0, idle, watermarks, event_time, read: 0 }
    }

    /// Every record of `f` was taken: its device's watermark rises to the item's.
    fn taken(&mut self, f: &Frame) {
        if let Some((_, w)) = self.watermarks.iter_mut().find(|(d, _)| *d == f.device)
            && f.watermark > *w
        {
            *w = f.watermark;
        }
    }
}

impl Source for ConnectorInput {
    fn next_record(&mut self, rec: &mut InputRecord) -> io::Result<Next> {
        loop {
            if let Some(f) = &self.current {
                if self.next < f.records.len() {
                    let (r, time) = (f.records.get(self.next), f.records.time(self.next));
                    rec.key.clear();
                    rec.key.extend_from_slice(r.key);
                    rec.value.clear();
                    rec.value.extend_from_slice(r.value);
                    rec.keyed = true;
                    rec.origin_ns = Some(f.origin_ns);
                    rec.time = time.or_else(|| self.event_time.as_ref().and_then(|t| t(r.value)));
                    self.next += 1;
                    self.read += 1;
                    return Ok(Next::Record);
                }
                // Asked for a record after the item's last: all of them were taken.
                if let Some(f) = self.current.take() {
                    self.taken(&f);
                }
            }
            match self.rx.recv_timeout(self.idle) {
                Ok(f) => {
                    self.current = Some(f);
                    self.next = 0;
                }
                Err(RecvTimeoutError::Timeout) => return Ok(Next::Idle),
                Err(RecvTimeoutError::Disconnected) => return Ok(Next::End),
            }
        }
    }

    fn position(&self) -> SourcePosition {
        SourcePosition::at(self.read)
    }

    fn position_into(&self, out: &mut SourcePosition) {
        out.set_number(self.read);
    }

    /// Forward only, like any stream that is not kept.
    fn seek(&mut self, position: &SourcePosition) -> Result<(), SourceError> {
        source::skip_records(self.read, position.number()?, |rec| self.next_record(rec))
    }

    fn watermark(&self) -> Option<u64> {
        if self.watermarks.is_empty() {
            return None;
        }
        self.watermarks.iter().try_fold(u64::MAX, |m, (_, w)| w.map(|w| m.min(w)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn frame(device: usize, watermark: Option<u64>, records: &[(&str, Option<u64>)]) -> Frame {
        let mut batch = Batch::new();
        for (value, time) in records {
            batch.push_timed(b"k", value.as_bytes(), *time);
        }
        Frame { device, origin_ns: 1, watermark, records: batch }
    }

    /// Reads one record; returns its value and time.
    fn read(input: &mut ConnectorInput) -> Option<(String, Option<u64>)> {
        let mut rec = InputRecord::default();
        loop {
            source::reset(&mut rec);
            match input.next_record(&mut rec).unwrap() {
                Next::Record => {
                    return Some((String::from_utf8(rec.value.clone()).unwrap(), rec.time));
                }
                Next::Idle => {}
                Next::End => return None,
            }
        }
    }

    #[test]
    fn the_watermark_is_the_devices_minimum_once_their_items_are_taken_in_whole() {
        let (tx, rx) = crossbeam_channel::unbounded();
        // Raw records without a time get theirs from the record.
        let first_number: EventTimeFn =
            Arc::new(|v: &[u8]| std::str::from_utf8(v).ok()?.parse().ok());
        let mut input =
            ConnectorInput::new(rx, Duration::from_millis(1), &[3, 5], Some(first_number));
        tx.send(frame(3, Some(100), &[("150", Some(150)), ("120", None)])).unwrap();
        tx.send(frame(5, Some(40), &[("60", None)])).unwrap();
        tx.send(frame(3, Some(200), &[])).unwrap();
        assert_eq!(read(&mut input), Some(("150".into(), Some(150))));
        assert_eq!(read(&mut input), Some(("120".into(), Some(120))), "read from the record");
        assert_eq!(input.watermark(), None, "the item of device 3 is not taken in whole yet");
        assert_eq!(read(&mut input), Some(("60".into(), Some(60))));
        assert_eq!(input.watermark(), None, "device 5 has none before its item is taken");
        drop(tx);
        assert_eq!(read(&mut input), None);
        assert_eq!(input.watermark(), Some(40), "min(200, 40)");
        assert_eq!(input.position(), SourcePosition::at(3));
        assert!(matches!(
            input.seek(&SourcePosition::at(1)),
            Err(SourceError::CannotRewind { at: 3, to: 1 })
        ));
    }

    #[test]
    fn a_lower_watermark_never_lowers_a_device_and_strangers_are_ignored() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut input = ConnectorInput::new(rx, Duration::from_millis(1), &[0], None);
        for (device, w) in [(0, Some(50)), (0, Some(10)), (7, Some(1)), (0, None)] {
            tx.send(frame(device, w, &[("x", Some(60))])).unwrap();
        }
        drop(tx);
        while read(&mut input).is_some() {}
        assert_eq!(input.watermark(), Some(50));
    }
}
