//! The wire protocol between clasp nodes.
//!
//! A connection starts with an 8-byte magic and the protocol version (so that anything that is
//! not a clasp peer, or a peer of another version, is refused before a byte is interpreted),
//! then carries frames: a little-endian `u32` length and a postcard-encoded [`Message`]. Frames
//! longer than the configured limit are refused before anything is allocated for them.

use crate::metrics::WorkerReport;
use crate::migration::{MigrationData, MigrationDone, MigrationOrder};
use crate::request::Request;
use crate::routing::RoutingPlan;
use clasp_core::{Batch, OperatorId, Pipeline, SinkId, WorkerId};
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};

/// First bytes of every connection.
pub const MAGIC: [u8; 8] = *b"CLASP\x00\r\n";
/// Bumped on every incompatible change of [`Message`].
pub const PROTOCOL_VERSION: u32 = 2;
/// Default largest frame accepted (bytes).
pub const DEFAULT_MAX_FRAME: u32 = 64 << 20;

/// What a node is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// The central node.
    Planner,
    /// A worker node.
    Worker,
}

/// Sent first on every connection, after the magic.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Sender's role.
    pub role: Role,
    /// Sender's worker id (a joining worker may ask for one; the planner assigns it).
    pub worker: Option<WorkerId>,
    /// Executor slots the sender offers.
    pub slots: u32,
    /// Address the sender accepts peer connections on.
    pub listen: String,
    /// Operating-system process id, for logs.
    pub pid: u32,
}

/// Settings a worker receives when it joins.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerSettings {
    /// Records per chained request.
    pub batch_size: u32,
    /// Key groups of every keyed operator (fixed for the cluster's lifetime).
    pub key_groups: u32,
    /// Metrics interval (ms).
    pub interval_ms: u64,
    /// How long an executor may hold chained requests for another worker to batch them per
    /// destination (µs); 0 sends each one at once.
    pub flush_deadline_us: u64,
    /// Largest frame accepted.
    pub max_frame: u32,
    /// Seed for routing draws.
    pub seed: u64,
    /// Emulated dispatch costs, spent by the sending executor on top of the real cost.
    pub dispatch_cost: Option<DispatchCost>,
    /// Saturation thresholds: mean queue size and mean queue wait (ms).
    pub saturation_queue: f64,
    /// See `saturation_queue`.
    pub saturation_wait_ms: f64,
}

/// Emulated chained-request costs (to run the paper's cost regime on this runtime): µs per
/// local and per remote chained request, and µs per distinct remote destination per second.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct DispatchCost {
    /// α: per local chained request (µs).
    pub local_us: f64,
    /// β: per remote chained request (µs).
    pub remote_us: f64,
    /// γ: per distinct remote worker reached, once per second (µs).
    pub fanout_us: f64,
    /// Spin (uses a core) or sleep (holds the executor only).
    pub mode: clasp_core::pipeline::ServiceMode,
}

impl DispatchCost {
    /// Parses `local=US,remote=US,fanout=US[:spin|:sleep]` (missing terms are 0).
    pub fn parse(s: &str) -> Result<Self, String> {
        let (terms, mode) = match s.rsplit_once(':') {
            Some((t, "spin")) => (t, clasp_core::pipeline::ServiceMode::Spin),
            Some((t, "sleep")) => (t, clasp_core::pipeline::ServiceMode::Sleep),
            Some((_, m)) => return Err(format!("`{m}` is not spin or sleep")),
            None => (s, clasp_core::pipeline::ServiceMode::Sleep),
        };
        let mut c = Self { local_us: 0.0, remote_us: 0.0, fanout_us: 0.0, mode };
        for term in terms.split(',').filter(|t| !t.trim().is_empty()) {
            let (k, v) = term
                .split_once('=')
                .ok_or_else(|| format!("`{term}`: expected NAME=MICROSECONDS"))?;
            let v: f64 =
                v.trim().parse().ok().filter(|v: &f64| v.is_finite() && *v >= 0.0).ok_or_else(
                    || format!("`{term}`: `{v}` is not a number of microseconds >= 0"),
                )?;
            match k.trim() {
                "local" => c.local_us = v,
                "remote" => c.remote_us = v,
                "fanout" => c.fanout_us = v,
                other => return Err(format!("`{other}` is not local, remote or fanout")),
            }
        }
        Ok(c)
    }
}

/// The planner's answer to a joining worker.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Welcome {
    /// The id assigned.
    pub worker: WorkerId,
    /// The pipeline, with any command-line overrides applied.
    #[serde(with = "pipeline_as_json")]
    pub pipeline: Pipeline,
    /// Settings.
    pub settings: WorkerSettings,
    /// Workers already in the cluster and their addresses.
    pub peers: Vec<(WorkerId, String)>,
    /// The current routing, if the pipeline is already placed.
    pub routing: Option<RoutingPlan>,
}

/// The pipeline travels as JSON text inside the frame: operators' `params` are free-form JSON
/// values, which postcard (not self-describing) can encode but never decode.
mod pipeline_as_json {
    use clasp_core::Pipeline;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(p: &Pipeline, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&serde_json::to_string(p).map_err(serde::ser::Error::custom)?)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Pipeline, D::Error> {
        serde_json::from_str(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// Credit returned by finished leaf requests of one chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreditReturn {
    /// The chain.
    pub chain: u64,
    /// Credit returned.
    pub credit: u64,
    /// Latest completion time among the returning requests (ns since the Unix epoch).
    pub done_ns: u64,
}

/// Everything nodes say to each other.
#[derive(Debug, Serialize, Deserialize)]
pub enum Message {
    /// First frame on every connection.
    Hello(Hello),
    /// The receiver refuses the connection, and why.
    Reject(String),
    /// Planner → joining worker.
    Welcome(Box<Welcome>),
    /// Planner → workers: a worker joined; the one with the higher id connects.
    PeerJoined {
        /// The new worker.
        worker: WorkerId,
        /// Its peer address.
        addr: String,
    },
    /// Planner → workers: a worker left the cluster.
    PeerLeft(WorkerId),
    /// Worker → planner: the peers it is connected to.
    MeshReady(Vec<WorkerId>),
    /// Data: planner → worker (inputs) or worker → worker (chained requests).
    Request(Request),
    /// Data: several requests for one worker, batched by the sending executor.
    Requests(Vec<Request>),
    /// Worker → planner: credit of finished chains.
    Credits(Vec<CreditReturn>),
    /// Worker → planner: records that reached a sink.
    Sink {
        /// The sink.
        sink: SinkId,
        /// The records.
        batch: Batch,
    },
    /// Worker → planner: metrics of the last interval.
    Report(Box<WorkerReport>),
    /// Planner → workers: use this routing (nothing to move).
    Install(Box<RoutingPlan>),
    /// Planner → worker: migrate to a new placement.
    Migrate(Box<MigrationOrder>),
    /// Worker → worker: state and queued requests handed over in a migration.
    MigrationData(Box<MigrationData>),
    /// Worker → planner: migration finished on this worker.
    MigrationDone(MigrationDone),
    /// Planner → worker: report the metrics of the interval so far now, tagged with this number.
    ReportNow(u64),
    /// Planner → worker: send the keyed state as JSON lines.
    DumpState,
    /// Worker → planner: part of a state dump.
    StateLines {
        /// The operator.
        operator: OperatorId,
        /// JSON lines.
        lines: Vec<u8>,
    },
    /// Worker → planner: the state dump is complete.
    StateDone,
    /// Planner → worker: stop.
    Shutdown,
}

/// Why a connection was refused or dropped.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// Socket error.
    #[error("{peer}: {source}")]
    Io {
        /// The peer address.
        peer: String,
        /// The error.
        source: io::Error,
    },
    /// The first bytes are not the clasp magic.
    #[error("{peer}: not a clasp peer (first bytes {got:02x?}); connection refused")]
    NotClasp {
        /// The peer address.
        peer: String,
        /// What it sent.
        got: Vec<u8>,
    },
    /// The peer speaks another protocol version.
    #[error("{peer}: speaks clasp protocol v{theirs}, this node v{ours}; connection refused")]
    Version {
        /// The peer address.
        peer: String,
        /// Its version.
        theirs: u32,
        /// Ours.
        ours: u32,
    },
    /// A frame longer than the limit.
    #[error("{peer}: frame of {len} bytes exceeds the limit of {max}; connection closed")]
    FrameTooLarge {
        /// The peer address.
        peer: String,
        /// Announced length.
        len: u32,
        /// The limit.
        max: u32,
    },
    /// A frame that does not decode.
    #[error("{peer}: undecodable frame: {message}; connection closed")]
    Decode {
        /// The peer address.
        peer: String,
        /// Decoder message.
        message: String,
    },
    /// The peer refused us.
    #[error("{peer}: refused the connection: {reason}")]
    Rejected {
        /// The peer address.
        peer: String,
        /// Its reason.
        reason: String,
    },
    /// A protocol step out of order.
    #[error("{peer}: {message}")]
    Protocol {
        /// The peer address.
        peer: String,
        /// What happened.
        message: String,
    },
}

/// Writes the magic and version.
pub fn write_preamble(w: &mut impl Write) -> io::Result<()> {
    let mut b = [0u8; 12];
    b[..8].copy_from_slice(&MAGIC);
    b[8..].copy_from_slice(&PROTOCOL_VERSION.to_le_bytes());
    w.write_all(&b)
}

/// Reads and checks the magic and version.
pub fn read_preamble(r: &mut impl Read, peer: &str) -> Result<(), WireError> {
    let mut b = [0u8; 12];
    let mut got = 0;
    while got < b.len() {
        match r.read(&mut b[got..]) {
            Ok(0) => {
                return Err(WireError::NotClasp { peer: peer.into(), got: b[..got].to_vec() });
            }
            Ok(n) => {
                got += n;
                if b[..got.min(8)] != MAGIC[..got.min(8)] {
                    return Err(WireError::NotClasp { peer: peer.into(), got: b[..got].to_vec() });
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(source) => return Err(WireError::Io { peer: peer.into(), source }),
        }
    }
    let theirs = u32::from_le_bytes(b[8..].try_into().expect("4 bytes"));
    if theirs != PROTOCOL_VERSION {
        return Err(WireError::Version { peer: peer.into(), theirs, ours: PROTOCOL_VERSION });
    }
    Ok(())
}

/// Appends one frame holding `msg` to `buf`.
pub fn encode(msg: &Message, buf: &mut Vec<u8>) {
    let at = buf.len();
    buf.extend_from_slice(&[0; 4]);
    let mut out =
        postcard::to_extend(msg, std::mem::take(buf)).expect("encoding to a Vec cannot fail");
    let len = (out.len() - at - 4) as u32;
    out[at..at + 4].copy_from_slice(&len.to_le_bytes());
    *buf = out;
}

/// Reads frames from a byte stream into reusable buffer space.
#[derive(Debug)]
pub struct FrameReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    max_frame: u32,
    peer: String,
}

impl FrameReader {
    /// A reader accepting frames up to `max_frame` bytes from `peer`.
    pub fn new(peer: String, max_frame: u32) -> Self {
        Self { buf: vec![0; 256 << 10], start: 0, end: 0, max_frame, peer }
    }

    /// The next complete frame already buffered, if any.
    pub fn next_buffered(&mut self) -> Result<Option<Message>, WireError> {
        let avail = self.end - self.start;
        if avail < 4 {
            return Ok(None);
        }
        let len = u32::from_le_bytes(self.buf[self.start..self.start + 4].try_into().expect("4"));
        if len > self.max_frame {
            return Err(WireError::FrameTooLarge {
                peer: self.peer.clone(),
                len,
                max: self.max_frame,
            });
        }
        let total = 4 + len as usize;
        if avail < total {
            if total > self.buf.len() {
                // Only a frame within the limit grows the buffer.
                self.compact();
                self.buf.resize(total, 0);
            }
            return Ok(None);
        }
        let body = &self.buf[self.start + 4..self.start + total];
        let msg = postcard::from_bytes(body)
            .map_err(|e| WireError::Decode { peer: self.peer.clone(), message: e.to_string() })?;
        self.start += total;
        Ok(Some(msg))
    }

    fn compact(&mut self) {
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
    }

    /// Reads more bytes; `Ok(false)` at end of stream.
    pub fn fill(&mut self, r: &mut impl Read) -> Result<bool, WireError> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            self.compact();
        }
        loop {
            match r.read(&mut self.buf[self.end..]) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.end += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => return Err(WireError::Io { peer: self.peer.clone(), source }),
            }
        }
    }

    /// Blocks until a whole frame is available; `Ok(None)` at a clean end of stream.
    pub fn read_message(&mut self, r: &mut impl Read) -> Result<Option<Message>, WireError> {
        loop {
            if let Some(m) = self.next_buffered()? {
                return Ok(Some(m));
            }
            if !self.fill(r)? {
                return Ok(None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_oversized_ones_are_refused() {
        let mut buf = Vec::new();
        encode(&Message::Reject("no".into()), &mut buf);
        encode(&Message::PeerLeft(WorkerId(3)), &mut buf);
        let mut r = FrameReader::new("t".into(), 1 << 10);
        let mut src = &buf[..];
        assert!(matches!(r.read_message(&mut src).unwrap(), Some(Message::Reject(s)) if s == "no"));
        assert!(matches!(r.read_message(&mut src).unwrap(), Some(Message::PeerLeft(WorkerId(3)))));
        assert!(r.read_message(&mut src).unwrap().is_none());

        let huge = (u32::MAX - 1).to_le_bytes();
        let mut r = FrameReader::new("t".into(), 1 << 10);
        let err = r.read_message(&mut &huge[..]).unwrap_err();
        assert!(matches!(err, WireError::FrameTooLarge { len, .. } if len == u32::MAX - 1));
        assert!(r.buf.len() <= 256 << 10, "refused frame must not allocate");
    }

    #[test]
    fn a_welcome_carries_operator_params() {
        let spec = "[pipeline]\nname = \"p\"\n[[source]]\nname = \"in\"\n\
                    [[operator]]\nname = \"a\"\n[operator.params]\nwindow = 20\nmode = \"x\"\n\
                    [[stream]]\nfrom = \"in\"\nto = \"a\"\n";
        let pipeline = clasp_core::spec::parse(spec, "p.toml").unwrap();
        assert!(!pipeline.operators[0].params.is_empty());
        let welcome = Welcome {
            worker: WorkerId(1),
            pipeline: pipeline.clone(),
            settings: crate::planner::PlannerConfig::default().settings,
            peers: Vec::new(),
            routing: None,
        };
        let mut buf = Vec::new();
        encode(&Message::Welcome(Box::new(welcome)), &mut buf);
        let mut r = FrameReader::new("t".into(), 1 << 20);
        match r.read_message(&mut &buf[..]).unwrap() {
            Some(Message::Welcome(w)) => assert_eq!(w.pipeline, pipeline),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn preamble_checks_magic_and_version() {
        let mut ok = Vec::new();
        write_preamble(&mut ok).unwrap();
        read_preamble(&mut &ok[..], "p").unwrap();
        let err = read_preamble(&mut &b"GET / HTTP/1.1\r\n"[..], "p").unwrap_err();
        assert!(err.to_string().contains("not a clasp peer"), "{err}");
        let mut other = ok.clone();
        other[8] = 9;
        let err = read_preamble(&mut &other[..], "p").unwrap_err();
        assert!(
            err.to_string().contains(&format!("protocol v9, this node v{PROTOCOL_VERSION}")),
            "{err}"
        );
    }
}
