//! The connector protocol between an edge device and the cloud's edge ingress.
//!
//! One TCP connection per device carries every cut stream leaving it (each a numbered
//! connector). The device opens it with [`PROTOCOL`]'s preamble and both sides prove the
//! cluster secret ([`crate::auth`]: the device `device:ID`, the cloud `cloud`); then both
//! exchange frames of the shared framing ([`crate::frame`]). The `Hello` must name the device
//! the connection proved to be.
//!
//! ```text
//! device                                   cloud
//!   magic, version, Hello{device, part} ->
//!                                        <- Welcome{held}      (or Reject{reason}, then close)
//!                                        <- Start              (once every device has joined)
//!   Data{connector, item}               ->   (any number, in order per connector)
//!                                        <- Ack{connector, held}   (cumulative)
//!   End{sent per connector}             ->
//!                                        <- Done{received per connector}
//!   Bye                                 ->
//! ```
//!
//! `Hello` states the device's part of the cut (its operators and connectors, by name) so that
//! a device and a cloud started with different pipelines or devices files refuse each other
//! instead of mixing streams. Each `Data` frame carries one [`Item`] of its connector's cut
//! stream ([`item`]): a number, records with their event times, the device's watermark after
//! them, and `origin_ns`, when the device read the oldest raw record behind them (ns since the
//! Unix epoch; end-to-end latency counts from it).
//!
//! A device keeps every item until the cloud acknowledges it (`Ack` says how many items of the
//! connector the cloud holds). When the connection breaks, the device connects again with the
//! same `Hello`; the cloud's `Welcome` then says how many items of each connector it holds, the
//! device resends the rest, and the cloud discards any it already has. `End` carries the
//! records sent per connector; the cloud checks them against what it took, so nothing is lost
//! silently, and answers `Done`; the device's `Bye` says it got it. Connector numbers and
//! per-connector lists are checked at decode against the connectors the receiver knows
//! ([`Limits`]), item numbers against the items held ([`Received`]).

pub mod item;

pub use item::{Fresh, Item, Received, SequenceError};

use crate::bounds::{BoundsError, Validate, check_id, check_len};
use crate::frame::Protocol;
use clasp_core::Batch;
use serde::{Deserialize, Serialize};

/// The connector protocol: its version is bumped on every incompatible change of the messages.
pub const PROTOCOL: Protocol = Protocol {
    name: "clasp edge",
    magic: *b"CLASPEDG",
    version: 3,
    on_mismatch: "run the same clasp on devices and cloud",
};

/// Largest frame accepted (bytes).
pub const MAX_FRAME: u32 = crate::frame::DEFAULT_MAX_FRAME;

/// The identity the cloud's edge ingress proves.
pub const CLOUD_IDENTITY: &str = "cloud";

/// The identity device `id` proves.
pub fn device_identity(id: &str) -> String {
    format!("device:{id}")
}

/// The device's part of the cut, as the cloud must agree on it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The device id.
    pub device: String,
    /// The pipeline's name.
    pub pipeline: String,
    /// `cut` or `all-cloud`.
    pub mode: String,
    /// Operators the device runs, in topological order.
    pub operators: Vec<String>,
    /// Its connectors, in order: the numbers `Data` frames use.
    pub connectors: Vec<String>,
}

/// Device → cloud.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ToCloud {
    /// First message.
    Hello(Hello),
    /// One item of a connector's cut stream.
    Data {
        /// Index into `Hello::connectors`.
        connector: u16,
        /// The item.
        item: Item,
    },
    /// The device's data is complete.
    End {
        /// Records sent per connector.
        sent: Vec<u64>,
    },
    /// The device got `Done` and closes the connection.
    Bye,
}

/// [`ToCloud`] by reference, for sending without copying: the same encoding, variant for
/// variant.
#[derive(Clone, Copy, Debug, Serialize)]
pub enum Outgoing<'a> {
    /// See [`ToCloud::Hello`].
    Hello(&'a Hello),
    /// See [`ToCloud::Data`].
    Data {
        /// Index into `Hello::connectors`.
        connector: u16,
        /// The item.
        item: Item<&'a Batch>,
    },
    /// See [`ToCloud::End`].
    End {
        /// Records sent per connector.
        sent: &'a [u64],
    },
    /// See [`ToCloud::Bye`].
    Bye,
}

/// Cloud → device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToDevice {
    /// The device is admitted; `Start` follows when every device has joined (at once when it
    /// connects again).
    Welcome {
        /// Items the cloud holds per connector (0 on the first connection): the device sends
        /// each connector's items from there.
        held: Vec<u64>,
    },
    /// The device is refused.
    Reject(String),
    /// Begin sending.
    Start,
    /// The cloud holds the first `held` items of `connector`: the device may forget them.
    Ack {
        /// Index into `Hello::connectors`.
        connector: u16,
        /// Items held.
        held: u64,
    },
    /// Everything arrived: records received per connector.
    Done {
        /// Records received per connector.
        received: Vec<u64>,
    },
}

/// The connectors of the link, as the receiver knows them (none before the `Hello`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Connectors of the device's part.
    pub connectors: usize,
}

impl Validate<Limits> for ToCloud {
    fn validate(&self, l: &Limits) -> Result<(), BoundsError> {
        match self {
            Self::Hello(_) => Ok(()),
            Self::Data { connector, .. } => {
                check_id("Data.connector", u64::from(*connector), l.connectors as u64)
            }
            Self::End { sent } => check_len("End.sent", sent.len(), l.connectors),
            Self::Bye => Ok(()),
        }
    }
}

impl Validate<Limits> for ToDevice {
    fn validate(&self, l: &Limits) -> Result<(), BoundsError> {
        match self {
            Self::Welcome { held } => check_len("Welcome.held", held.len(), l.connectors),
            Self::Ack { connector, .. } => {
                check_id("Ack.connector", u64::from(*connector), l.connectors as u64)
            }
            Self::Done { received } => check_len("Done.received", received.len(), l.connectors),
            Self::Reject(_) | Self::Start => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::WireError;
    use crate::frame::{FrameReader, PREAMBLE_LEN, encode, write_frame};

    fn hello() -> Hello {
        Hello {
            device: "edge-1".into(),
            pipeline: "taxi-w1".into(),
            mode: "cut".into(),
            operators: vec!["f".into()],
            connectors: vec!["f.kafka".into(), "f.db".into()],
        }
    }

    #[test]
    fn frames_round_trip_and_count_their_bytes() {
        let mut records = Batch::new();
        records.push_timed(b"17", b"17,END,...", Some(1_357_000_060));
        let item = Item { seq: 0, origin_ns: 5, watermark: Some(1_357_000_000), records };
        let msgs = [
            ToCloud::Hello(hello()),
            ToCloud::Data { connector: 1, item },
            ToCloud::End { sent: vec![0, 1] },
            ToCloud::Bye,
        ];
        let mut wire = Vec::new();
        PROTOCOL.write_preamble(&mut wire).unwrap();
        let mut buf = Vec::new();
        let mut written = 0;
        for m in &msgs {
            written += write_frame(&mut wire, m, &mut buf).unwrap();
        }
        assert_eq!(wire.len(), PREAMBLE_LEN + written);
        let mut r = &wire[..];
        PROTOCOL.read_preamble(&mut r, "device").unwrap();
        let mut reader = FrameReader::new("device", MAX_FRAME);
        let limits = Limits { connectors: 2 };
        for m in &msgs {
            let got: ToCloud = reader.read_message(&mut r, &limits).unwrap().unwrap();
            assert_eq!(&got, m);
        }
        assert_eq!(reader.consumed(), written as u64);
        assert!(reader.read_message::<ToCloud, _>(&mut r, &limits).unwrap().is_none());
        let mut by_ref = Vec::new();
        let ToCloud::Data { item, .. } = &msgs[1] else { unreachable!() };
        encode(&Outgoing::Data { connector: 1, item: item.by_ref() }, &mut by_ref);
        buf.clear();
        encode(&msgs[1], &mut buf);
        assert_eq!(by_ref, buf);
        by_ref.clear();
        buf.clear();
        encode(&Outgoing::End { sent: &[0, 1] }, &mut by_ref);
        encode(&msgs[2], &mut buf);
        assert_eq!(by_ref, buf);
    }

    #[test]
    fn unknown_connectors_and_miscounted_ends_are_refused() {
        let refusal = |m: &ToCloud, connectors| {
            let mut buf = Vec::new();
            encode(m, &mut buf);
            let limits = Limits { connectors };
            match FrameReader::new("d", MAX_FRAME)
                .read_message::<ToCloud, _>(&mut &buf[..], &limits)
            {
                Err(WireError::Invalid { source, .. }) => source,
                other => panic!("{other:?}"),
            }
        };
        let item = |seq| Item { seq, origin_ns: 0, watermark: None, records: Batch::new() };
        let data = ToCloud::Data { connector: 2, item: item(0) };
        assert_eq!(
            refusal(&data, 2),
            BoundsError::Id { field: "Data.connector", value: 2, count: 2 }
        );
        // Before the hello no connector exists.
        let data = ToCloud::Data { connector: 0, item: item(7) };
        assert_eq!(
            refusal(&data, 0),
            BoundsError::Id { field: "Data.connector", value: 0, count: 0 }
        );
        assert_eq!(
            refusal(&ToCloud::End { sent: vec![1, 2, 3] }, 2),
            BoundsError::Length { field: "End.sent", len: 3, expected: 2 }
        );
        let mut buf = Vec::new();
        encode(&ToDevice::Done { received: vec![1] }, &mut buf);
        let err = FrameReader::new("cloud", MAX_FRAME)
            .read_message::<ToDevice, _>(&mut &buf[..], &Limits { connectors: 2 })
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "cloud: Done.received has 1 entries, the receiver expects 2; message dropped"
        );
        let to_device = |m: &ToDevice| {
            let mut buf = Vec::new();
            encode(m, &mut buf);
            FrameReader::new("cloud", MAX_FRAME)
                .read_message::<ToDevice, _>(&mut &buf[..], &Limits { connectors: 2 })
                .unwrap_err()
                .to_string()
        };
        assert!(to_device(&ToDevice::Ack { connector: 2, held: 1 }).contains("Ack.connector is 2"));
        assert!(
            to_device(&ToDevice::Welcome { held: vec![0, 0, 0] })
                .contains("Welcome.held has 3 entries")
        );
    }

    #[test]
    fn strangers_other_versions_and_oversized_frames_are_refused() {
        let err = PROTOCOL.read_preamble(&mut &b"GET / HTTP/1.1\r\n"[..], "p").unwrap_err();
        assert!(err.to_string().contains("not a clasp edge peer"), "{err}");
        let mut v1 = PROTOCOL.magic.to_vec();
        v1.extend_from_slice(&1u32.to_le_bytes());
        let err = PROTOCOL.read_preamble(&mut &v1[..], "p").unwrap_err();
        assert!(err.to_string().contains("protocol v1, this node v3; run the same clasp"), "{err}");
        let huge = (MAX_FRAME + 1).to_le_bytes();
        let err = FrameReader::new("p", MAX_FRAME)
            .read_message::<ToDevice, _>(&mut &huge[..], &Limits::default())
            .unwrap_err();
        assert!(matches!(err, WireError::FrameTooLarge { .. }), "{err}");
    }
}
