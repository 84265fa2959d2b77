//! One checkpoint's records for the exactly-once Kafka sink, as the checkpoint store keeps
//! them between the checkpoint's boundary and the end of their produce.
//!
//! Encoding (little-endian): magic `CKSG`, format `u32`, checkpoint `u64`; the topic's end
//! offsets at the boundary (`u32` count, then partition `i32` and offset `i64` each); the sink
//! names (`u32` count, then `u32` length and bytes each); the records (`u64` count, then each:
//! partition index `u32`, sink index `u32`, timestamp `i64`, key (`u32` length, `u32::MAX` for
//! none, and bytes), value (`u32` length and bytes)); last a CRC-32 of everything before it.

use std::collections::BTreeMap;

/// What begins an encoded segment.
const MAGIC: &[u8; 4] = b"CKSG";

/// The encoding's version.
const FORMAT: u32 = 1;

/// The key length that stands for a record without a key.
const NO_KEY: u32 = u32::MAX;

/// The store name of checkpoint `id`'s segment (its id first, so checkpoint pruning applies).
pub fn name(id: u64) -> String {
    format!("ckpt-{id:08}.kafka-output")
}

/// One record staged for the topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StagedRecord {
    /// The index of its partition in [`Segment::ends`].
    pub partition: u32,
    /// The index of its sink's name in [`Segment::sinks`].
    pub sink: u32,
    /// The record timestamp, ms since the Unix epoch.
    pub timestamp_ms: i64,
    /// The key, if any.
    pub key: Option<Vec<u8>>,
    /// The value.
    pub value: Vec<u8>,
}

/// The records of one checkpoint's epoch, in the order they reached the sink (a record's index
/// is its sequence number in the topic's `clasp-seq` header).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    /// The checkpoint.
    pub checkpoint: u64,
    /// Each partition's end offset when the epoch was sealed: its records come after these.
    pub ends: Vec<(i32, i64)>,
    /// The pipeline sinks' names the records refer to.
    pub sinks: Vec<String>,
    /// The records.
    pub records: Vec<StagedRecord>,
}

/// Why bytes are not a segment.
#[derive(Debug, thiserror::Error)]
pub enum SegmentError {
    /// Cut short, or a length runs past the end.
    #[error("the segment is cut short at byte {at}")]
    Truncated {
        /// Where the bytes ran out.
        at: usize,
    },
    /// Not a segment of this format.
    #[error("not a Kafka output segment of format {FORMAT}")]
    Header,
    /// The checksum does not match.
    #[error("checksum mismatch: stored {stored:08x}, computed {computed:08x}")]
    Checksum {
        /// In the segment.
        stored: u32,
        /// Over its bytes.
        computed: u32,
    },
    /// An index or name that does not fit the rest.
    #[error("the segment is inconsistent: {why}")]
    Inconsistent {
        /// What does not fit.
        why: &'static str,
    },
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    // Record keys and values fit one Kafka frame, far below 4 GiB.
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

impl Segment {
    /// The encoded segment.
    pub fn encode(&self) -> Vec<u8> {
        let payload: usize = self.records.iter().map(|r| 28 + r.value.len()).sum();
        let mut out = Vec::with_capacity(64 + payload);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT.to_le_bytes());
        out.extend_from_slice(&self.checkpoint.to_le_bytes());
        out.extend_from_slice(&(self.ends.len() as u32).to_le_bytes());
        for (p, o) in &self.ends {
            out.extend_from_slice(&p.to_le_bytes());
            out.extend_from_slice(&o.to_le_bytes());
        }
        out.extend_from_slice(&(self.sinks.len() as u32).to_le_bytes());
        for s in &self.sinks {
            put_bytes(&mut out, s.as_bytes());
        }
        out.extend_from_slice(&(self.records.len() as u64).to_le_bytes());
        for r in &self.records {
            out.extend_from_slice(&r.partition.to_le_bytes());
            out.extend_from_slice(&r.sink.to_le_bytes());
            out.extend_from_slice(&r.timestamp_ms.to_le_bytes());
            match &r.key {
                Some(k) => put_bytes(&mut out, k),
                None => out.extend_from_slice(&NO_KEY.to_le_bytes()),
            }
            put_bytes(&mut out, &r.value);
        }
        let crc = crc32fast::hash(&out);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes what [`Segment::encode`] made, checking every length against the bytes there are.
    pub fn decode(bytes: &[u8]) -> Result<Self, SegmentError> {
        let body_len =
            bytes.len().checked_sub(4).ok_or(SegmentError::Truncated { at: bytes.len() })?;
        let (body, crc) = bytes.split_at(body_len);
        let stored = u32::from_le_bytes(crc.try_into().unwrap_or_default());
        let computed = crc32fast::hash(body);
        if stored != computed {
            return Err(SegmentError::Checksum { stored, computed });
        }
        let mut r = Reader { bytes: body, at: 0 };
        if r.take(4)? != MAGIC || r.u32()? != FORMAT {
            return Err(SegmentError::Header);
        }
        let checkpoint = r.u64()?;
        let partitions = r.count(12)?;
        let mut ends = Vec::with_capacity(partitions);
        for _ in 0..partitions {
            ends.push((r.u32()? as i32, r.u64()? as i64));
        }
        let names = r.count(4)?;
        let mut sinks = Vec::with_capacity(names);
        for _ in 0..names {
            let n = r.u32()? as usize;
            let name = std::str::from_utf8(r.take(n)?)
                .map_err(|_| SegmentError::Inconsistent { why: "a sink name is not UTF-8" })?;
            sinks.push(name.to_owned());
        }
        let n = r.u64()?;
        // Each record takes at least 24 bytes: a count beyond that is not believed.
        if n > (r.rest() / 24) as u64 {
            return Err(SegmentError::Truncated { at: body.len() });
        }
        let mut records = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let partition = r.u32()?;
            let sink = r.u32()?;
            if partition as usize >= ends.len() || sink as usize >= sinks.len() {
                return Err(SegmentError::Inconsistent {
                    why: "a record's partition or sink is not in the segment's lists",
                });
            }
            let timestamp_ms = r.u64()? as i64;
            let key = match r.u32()? {
                NO_KEY => None,
                len => Some(r.take(len as usize)?.to_vec()),
            };
            let len = r.u32()? as usize;
            let value = r.take(len)?.to_vec();
            records.push(StagedRecord { partition, sink, timestamp_ms, key, value });
        }
        if r.rest() != 0 {
            return Err(SegmentError::Inconsistent { why: "bytes after the last record" });
        }
        Ok(Self { checkpoint, ends, sinks, records })
    }

    /// Each partition's end offset at the boundary, by partition id.
    pub fn ends_by_partition(&self) -> BTreeMap<i32, i64> {
        self.ends.iter().copied().collect()
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn rest(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], SegmentError> {
        if n > self.rest() {
            return Err(SegmentError::Truncated { at: self.bytes.len() });
        }
        let s = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn u32(&mut self) -> Result<u32, SegmentError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap_or_default()))
    }

    fn u64(&mut self) -> Result<u64, SegmentError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap_or_default()))
    }

    /// A `u32` count of entries of at least `size` bytes each, checked against the rest.
    fn count(&mut self, size: usize) -> Result<usize, SegmentError> {
        let n = self.u32()? as usize;
        if n > self.rest() / size {
            return Err(SegmentError::Truncated { at: self.bytes.len() });
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment() -> Segment {
        Segment {
            checkpoint: 7,
            ends: vec![(0, 12), (1, 0), (2, 40)],
            sinks: vec!["counts".into(), "other".into()],
            records: (0..50)
                .map(|i| StagedRecord {
                    partition: i % 3,
                    sink: i % 2,
                    timestamp_ms: 1_700_000_000_000 + i64::from(i),
                    key: (i % 5 != 0).then(|| format!("k{i}").into_bytes()),
                    value: format!("{i}").into_bytes(),
                })
                .collect(),
        }
    }

    #[test]
    fn segments_round_trip_and_damage_is_refused() {
        let s = segment();
        let bytes = s.encode();
        assert_eq!(Segment::decode(&bytes).unwrap(), s);
        assert_eq!(Segment::decode(&Segment::default().encode()).unwrap(), Segment::default());
        for cut in [0, 3, 4, 20, bytes.len() - 1] {
            assert!(Segment::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        flipped[30] ^= 1;
        assert!(matches!(Segment::decode(&flipped), Err(SegmentError::Checksum { .. })));
        // A record naming a partition the segment does not list, with a valid checksum.
        let mut bad = s.clone();
        bad.records[3].partition = 3;
        assert!(matches!(Segment::decode(&bad.encode()), Err(SegmentError::Inconsistent { .. })));
    }
}
