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

/// One invocation of an operator.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    /// The operator to run.
    pub op: OperatorId,
    /// Which of the operator's input streams the records arrived on.
    pub port: u16,
    /// The input chain this request belongs to.
    pub chain: u64,
    /// Its share of the chain's credit.
    pub credit: u64,
    /// Placement epoch of the node that routed it.
    pub epoch: u64,
    /// The records.
    pub batch: Batch,
    /// The watermark of the chain's source when the chain entered (its records' lateness is
    /// judged against it); `None` before the source had one, and for chains of fired timers.
    pub watermark: Option<u64>,
    /// Timers to fire (then `batch` is empty).
    pub fire: Option<Fire>,
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
            credit: 0,
            epoch,
            batch,
            watermark: None,
            fire: None,
            enqueued: None,
        }
    }
}
