//! Requests: a batch of records invoking one operator, tagged with the chain it belongs to.

use clasp_core::{Batch, OperatorId};
use serde::{Deserialize, Serialize};
use std::time::Instant;

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
    /// When it entered this worker's queue (not sent on the wire).
    #[serde(skip)]
    pub enqueued: Option<Instant>,
}

impl Request {
    /// A request with no credit yet (assigned when its parent finishes).
    pub fn new(op: OperatorId, port: u16, chain: u64, epoch: u64, batch: Batch) -> Self {
        Self { op, port, chain, credit: 0, epoch, batch, enqueued: None }
    }
}
