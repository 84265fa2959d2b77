//! Requests: a batch of records invoking one operator, tagged with the chain it belongs to.

use clasp_core::time::TimeDomain;
use clasp_core::{Batch, OperatorId};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// A request that fires an operator's timers instead of carrying records: every worker hosting
/// the operator fires those due by `until` in the key groups it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fire {
    /// Which timers.
    pub domain: TimeDomain,
    /// Timers at or before this time are due.
    pub until: u64,
}

/// What a request carries of time: the watermark its chain entered under, or the timers it
/// fires (a chain of fired timers entered under none). One field of 16 bytes, so that a
/// request stays small enough to move without a call to `memcpy`; on the wire it is the pair
/// `(watermark, fire)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ChainTime {
    /// Neither: the chain's source had no watermark yet.
    #[default]
    Untimed,
    /// The watermark of the chain's source when the chain entered (its records' lateness is
    /// judged against it).
    Entered(u64),
    /// Timers to fire (then the batch is empty).
    Fire(Fire),
}

impl ChainTime {
    /// The entry watermark, if any.
    pub fn watermark(self) -> Option<u64> {
        match self {
            Self::Entered(w) => Some(w),
            _ => None,
        }
    }

    /// The timers to fire, if any.
    pub fn fire(self) -> Option<Fire> {
        match self {
            Self::Fire(f) => Some(f),
            _ => None,
        }
    }

    /// A chain entered under `watermark`.
    pub fn entered(watermark: Option<u64>) -> Self {
        watermark.map_or(Self::Untimed, Self::Entered)
    }
}

impl Serialize for ChainTime {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        (self.watermark(), self.fire()).serialize(s)
    }
}

impl<'de> Deserialize<'de> for ChainTime {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (watermark, fire) = <(Option<u64>, Option<Fire>)>::deserialize(d)?;
        Ok(match fire {
            Some(f) => Self::Fire(f),
            None => Self::entered(watermark),
        })
    }
}

/// The checkpoint boundary a request's chain was dispatched after: the low 16 bits of the
/// planner's count of boundaries. A chain dispatched after a boundary must not touch keyed
/// state before its worker has marked that boundary's snapshot. At most one boundary is ever
/// pending, so a worker compares a cut with the boundaries it marked by wrapping difference,
/// exactly; 16 bits keep a request small enough to move inline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cut(pub u16);

impl Cut {
    /// The cut after `boundaries` boundaries.
    pub fn of(boundaries: u64) -> Self {
        Self(boundaries as u16)
    }

    /// Whether this cut lies after the `marked`-th boundary (the request must wait for its
    /// mark before it touches state).
    pub fn is_after(self, marked: u64) -> bool {
        (self.0.wrapping_sub(marked as u16) as i16) > 0
    }
}

/// One invocation of an operator.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    /// The operator to run.
    pub op: OperatorId,
    /// Which of the operator's input streams the records arrived on.
    pub port: u16,
    /// The input chain this request belongs to.
    pub chain: u64,
    /// The checkpoint boundary its chain was dispatched after.
    pub cut: Cut,
    /// Its share of the chain's credit.
    pub credit: u64,
    /// Placement epoch of the node that routed it.
    pub epoch: u64,
    /// The records.
    pub batch: Batch,
    /// The chain's entry watermark, or the timers this request fires.
    pub time: ChainTime,
    /// When it entered this worker's queue (not sent on the wire).
    #[serde(skip)]
    pub enqueued: Option<Instant>,
}

impl Request {
    /// A request with no credit yet (assigned when its parent finishes).
    pub fn new(op: OperatorId, port: u16, chain: u64, epoch: u64, batch: Batch) -> Self {
        Self {
            op,
            port,
            chain,
            cut: Cut::default(),
            credit: 0,
            epoch,
            batch,
            time: ChainTime::Untimed,
            enqueued: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request is moved several times per execution (queued, taken, sealed with its
    /// destination): above 128 bytes with its destination, each move is a call to `memcpy`,
    /// which made up most of the dispatch cost the time-aware API once added.
    #[test]
    fn a_request_with_its_destination_moves_inline() {
        assert_eq!(size_of::<ChainTime>(), 16);
        let routed = size_of::<(u32, u32, Request)>();
        assert!(routed <= 128, "a routed request takes {routed} bytes");
    }

    #[test]
    fn a_cut_compares_across_the_wrap() {
        assert!(!Cut::of(5).is_after(5));
        assert!(Cut::of(6).is_after(5));
        assert!(!Cut::of(4).is_after(5));
        assert!(Cut::of(0x1_0000).is_after(0xffff), "the count wrapped past 16 bits");
        assert!(!Cut::of(0xffff).is_after(0x1_0000));
    }
}
