//! The device's link to the cloud, by the transport chosen ([`crate::Transport`]): the
//! connector protocol over TCP ([`super::uplink`]) or a Kafka topic
//! ([`super::kafka_uplink`], cargo feature `kafka`).

use super::DeviceOptions;
#[cfg(feature = "kafka")]
use super::kafka_uplink::{KafkaLinkOptions, KafkaUplink};
use super::uplink::{LinkCounts, LinkOptions, Uplink};
use crate::error::EdgeError;
use crate::protocol::Hello;
use crate::transport::Transport;
use clasp_core::Batch;

/// A device's link, over either transport.
pub(super) enum Link {
    Connector(Box<Uplink>),
    #[cfg(feature = "kafka")]
    Kafka(Box<KafkaUplink>),
}

impl Link {
    /// Opens the link `opts` chooses: over TCP, connected and started by the cloud; over
    /// Kafka, connected to the topic's cluster.
    pub(super) fn open(opts: &DeviceOptions, hello: &Hello) -> Result<Self, EdgeError> {
        match &opts.uplink {
            Transport::Connector => {
                let link_opts = LinkOptions {
                    join: opts.join.clone(),
                    security: opts.security.clone(),
                    shape: opts.shape,
                    connect_timeout: opts.connect_timeout,
                    reconnect_timeout: opts.reconnect_timeout,
                    resend_buffer: opts.resend_buffer,
                };
                Ok(Self::Connector(Box::new(Uplink::connect(link_opts, hello)?)))
            }
            #[cfg(feature = "kafka")]
            Transport::Kafka(spec) => {
                let kafka_opts = KafkaLinkOptions {
                    spec: spec.clone(),
                    shape: opts.shape,
                    reconnect_timeout: opts.reconnect_timeout,
                    resend_buffer: opts.resend_buffer,
                };
                Ok(Self::Kafka(Box::new(KafkaUplink::open(kafka_opts, hello)?)))
            }
            #[cfg(not(feature = "kafka"))]
            Transport::Kafka(spec) => Err(EdgeError::Transport {
                given: format!("{}{spec}", crate::transport::KAFKA_PREFIX),
                problem: "this clasp is built without Kafka support".into(),
            }),
        }
    }

    /// Sends one item of connector `c`.
    pub(super) fn data(
        &mut self,
        c: usize,
        origin_ns: u64,
        watermark: Option<u64>,
        records: &Batch,
    ) -> Result<(), EdgeError> {
        match self {
            Self::Connector(l) => l.data(c, origin_ns, watermark, records),
            #[cfg(feature = "kafka")]
            Self::Kafka(l) => l.data(c, origin_ns, watermark, records),
        }
    }

    /// Hands what was sent to the transport now.
    pub(super) fn flush(&mut self) -> Result<(), EdgeError> {
        match self {
            Self::Connector(l) => l.flush(),
            #[cfg(feature = "kafka")]
            Self::Kafka(l) => l.flush(),
        }
    }

    /// Ends every stream and waits until the cloud (TCP) or the broker (Kafka) has them all.
    pub(super) fn finish(self) -> Result<LinkCounts, EdgeError> {
        match self {
            Self::Connector(l) => l.finish(),
            #[cfg(feature = "kafka")]
            Self::Kafka(l) => l.finish(),
        }
    }
}
