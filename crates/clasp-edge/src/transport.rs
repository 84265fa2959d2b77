//! How a cut stream travels from the devices to the cloud: the connector protocol over one TCP
//! connection per device (the default), or a Kafka topic that devices produce to and the
//! cloud consumes (`--uplink kafka:BROKERS/TOPIC[?OPTIONS]`, spelled as `--input kafka:…` and
//! `--output kafka:…` are; see [`crate::kafka_stream`] for the records).

use crate::error::EdgeError;

/// The prefix of a Kafka uplink.
pub const KAFKA_PREFIX: &str = "kafka:";

/// The edge→cloud transport.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    /// The connector protocol over TCP ([`crate::protocol`]).
    #[default]
    Connector,
    /// A Kafka topic: the spec after `kafka:`, `BROKERS/TOPIC[?OPTIONS]`. Devices take the
    /// sink's options (`timeout_ms`), the cloud the source's (`start`, `partitions`,
    /// `timeout_ms`).
    Kafka(String),
}

impl Transport {
    /// Parses `--uplink`: `tcp`, or `kafka:BROKERS/TOPIC[?OPTIONS]` (with the cargo feature
    /// `kafka`).
    pub fn parse(arg: &str) -> Result<Self, EdgeError> {
        let bad = |problem: String| EdgeError::Transport { given: arg.to_owned(), problem };
        if arg == "tcp" {
            return Ok(Self::Connector);
        }
        let Some(spec) = arg.strip_prefix(KAFKA_PREFIX) else {
            return Err(bad("expected `tcp` or `kafka:BROKERS/TOPIC[?OPTIONS]`".into()));
        };
        if !cfg!(feature = "kafka") {
            return Err(bad(
                "this clasp is built without Kafka support: build it with `--features clasp/kafka`"
                    .into(),
            ));
        }
        #[cfg(feature = "kafka")]
        clasp_kafka::KafkaAddress::parse(spec, false).map_err(|e| bad(e.to_string()))?;
        Ok(Self::Kafka(spec.to_owned()))
    }

    /// `tcp` or `kafka`, for reports and tables.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Connector => "tcp",
            Self::Kafka(_) => "kafka",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uplinks_parse_or_say_what_is_wrong() {
        assert_eq!(Transport::parse("tcp").unwrap(), Transport::Connector);
        let e = Transport::parse("amqp://x").unwrap_err().to_string();
        assert!(e.contains("expected `tcp` or `kafka:"), "{e}");
        let kafka = Transport::parse("kafka:127.0.0.1:9092/cut");
        if cfg!(feature = "kafka") {
            assert_eq!(kafka.unwrap(), Transport::Kafka("127.0.0.1:9092/cut".into()));
            let e = Transport::parse("kafka:nohost/cut").unwrap_err().to_string();
            assert!(e.contains("broker `nohost` is not HOST:PORT"), "{e}");
        } else {
            assert!(kafka.unwrap_err().to_string().contains("built without Kafka"));
        }
    }
}
