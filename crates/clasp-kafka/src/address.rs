//! The connector spec `BROKERS/TOPIC[?OPTION=VALUE&…]` after `kafka:` in `--input` and
//! `--output`: bootstrap brokers `host:port[,host:port…]`, one topic, and options.
//!
//! Source options: `start=earliest|latest|P:O[,P:O…]` (where to begin: a partition's first or
//! next-produced record, or explicit next offsets per partition; partitions not listed begin at
//! their earliest), `stop=latest|never` (a bounded read ending at the offsets that were the
//! latest when the run started, or an unbounded one), `partitions=P[,P…]` (default all) and
//! `timeout_ms=N` (how long connecting and each request may retry, default 10000). The sink
//! takes `timeout_ms` only.

use crate::error::KafkaError;
use std::collections::BTreeMap;
use std::time::Duration;

/// The longest retry deadline a spec may ask for (one hour).
const MAX_TIMEOUT_MS: u64 = 3_600_000;

/// Where a source begins reading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// Each partition's earliest retained record.
    Earliest,
    /// The next record produced to each partition after the run starts.
    Latest,
    /// The next offset of each listed partition; the others begin at their earliest.
    Offsets(BTreeMap<i32, i64>),
}

/// Where a source stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Never: the source waits for new records until the run ends.
    Never,
    /// At the offsets that were each partition's latest when the source opened.
    Latest,
}

/// A parsed connector spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KafkaAddress {
    /// Bootstrap brokers, `host:port` each.
    pub brokers: Vec<String>,
    /// The topic.
    pub topic: String,
    /// Where a source begins.
    pub start: Start,
    /// Where a source stops.
    pub stop: Stop,
    /// The partitions a source reads (`None`: all of the topic's).
    pub partitions: Option<Vec<i32>>,
    /// How long connecting and each request may retry before the error is reported.
    pub timeout: Duration,
}

impl KafkaAddress {
    /// The error of a request about `partition` that got no answer within the timeout.
    pub(crate) fn timed_out(&self, operation: &'static str, partition: i32) -> KafkaError {
        KafkaError::TimedOut {
            operation,
            topic: self.topic.clone(),
            partition,
            brokers: self.brokers_text(),
            after: self.timeout,
        }
    }

    /// The bootstrap brokers as written, comma-separated (for messages).
    pub fn brokers_text(&self) -> String {
        self.brokers.join(",")
    }

    /// Parses `BROKERS/TOPIC[?OPTIONS]`; `sink` rejects the options only a source takes.
    pub fn parse(spec: &str, sink: bool) -> Result<Self, KafkaError> {
        let bad = |why: String| KafkaError::Spec { spec: spec.to_owned(), why };
        let (location, options) = spec.split_once('?').unwrap_or((spec, ""));
        let (brokers, topic) = location
            .split_once('/')
            .ok_or_else(|| bad("expected BROKERS/TOPIC, e.g. 127.0.0.1:9092/lines".to_owned()))?;
        let brokers: Vec<String> = brokers.split(',').map(str::to_owned).collect();
        for b in &brokers {
            let port = b.rsplit_once(':').map(|(host, port)| (host, port.parse::<u16>()));
            if !matches!(port, Some((host, Ok(p))) if !host.is_empty() && p > 0) {
                return Err(bad(format!("broker `{b}` is not HOST:PORT")));
            }
        }
        check_topic(topic).map_err(|why| bad(why.to_owned()))?;
        let mut address = Self {
            brokers,
            topic: topic.to_owned(),
            start: Start::Earliest,
            stop: Stop::Never,
            partitions: None,
            timeout: Duration::from_secs(10),
        };
        for option in options.split('&').filter(|o| !o.is_empty()) {
            let (name, value) = option
                .split_once('=')
                .ok_or_else(|| bad(format!("option `{option}` is not NAME=VALUE")))?;
            match (name, sink) {
                ("start", false) => address.start = parse_start(value).map_err(bad)?,
                ("stop", false) => {
                    address.stop = match value {
                        "latest" => Stop::Latest,
                        "never" => Stop::Never,
                        _ => return Err(bad(format!("stop `{value}` is not latest or never"))),
                    }
                }
                ("partitions", false) => {
                    let list = value
                        .split(',')
                        .map(|p| parse_partition(p).map_err(&bad))
                        .collect::<Result<Vec<_>, _>>()?;
                    address.partitions = Some(list);
                }
                ("timeout_ms", _) => {
                    let ms = value
                        .parse::<u64>()
                        .ok()
                        .filter(|ms| (1..=MAX_TIMEOUT_MS).contains(ms))
                        .ok_or_else(|| {
                            bad(format!(
                                "timeout_ms `{value}` is not a number of milliseconds from 1 to {MAX_TIMEOUT_MS}"
                            ))
                        })?;
                    address.timeout = Duration::from_millis(ms);
                }
                _ => {
                    let known =
                        if sink { "timeout_ms" } else { "start, stop, partitions, timeout_ms" };
                    return Err(bad(format!("unknown option `{name}` (options: {known})")));
                }
            }
        }
        Ok(address)
    }
}

/// Kafka's rule for topic names: 1 to 249 of `[A-Za-z0-9._-]`.
fn check_topic(topic: &str) -> Result<(), &'static str> {
    if topic.is_empty() {
        return Err("the topic name is empty");
    }
    if topic.len() > 249 {
        return Err("a topic name has at most 249 characters");
    }
    if !topic.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)) {
        return Err("a topic name has only letters, digits, `.`, `_` and `-`");
    }
    Ok(())
}

fn parse_partition(p: &str) -> Result<i32, String> {
    p.parse::<i32>()
        .ok()
        .filter(|p| *p >= 0)
        .ok_or_else(|| format!("partition `{p}` is not a number >= 0"))
}

fn parse_start(value: &str) -> Result<Start, String> {
    match value {
        "earliest" => return Ok(Start::Earliest),
        "latest" => return Ok(Start::Latest),
        _ => {}
    }
    let mut offsets = BTreeMap::new();
    for pair in value.split(',') {
        let (p, o) = pair.split_once(':').ok_or_else(|| {
            format!("start `{value}` is not earliest, latest or PARTITION:OFFSET[,…]")
        })?;
        let o = o
            .parse::<i64>()
            .ok()
            .filter(|o| *o >= 0)
            .ok_or_else(|| format!("start offset `{o}` is not a number >= 0"))?;
        if offsets.insert(parse_partition(p)?, o).is_some() {
            return Err(format!("start names partition {p} twice"));
        }
    }
    Ok(Start::Offsets(offsets))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(spec: &str, sink: bool) -> String {
        KafkaAddress::parse(spec, sink).unwrap_err().to_string()
    }

    #[test]
    fn specs_parse_into_their_parts() {
        let a = KafkaAddress::parse("h1:9092,127.0.0.1:19092/lines", false).unwrap();
        assert_eq!(a.brokers, ["h1:9092", "127.0.0.1:19092"]);
        assert_eq!((a.topic.as_str(), &a.start, a.stop), ("lines", &Start::Earliest, Stop::Never));
        let a = KafkaAddress::parse(
            "h:1/t.x-1?start=2:15,0:3&stop=latest&partitions=0,2&timeout_ms=500",
            false,
        )
        .unwrap();
        assert_eq!(a.start, Start::Offsets([(0, 3), (2, 15)].into()));
        assert_eq!(
            (a.stop, a.partitions, a.timeout),
            (Stop::Latest, Some(vec![0, 2]), Duration::from_millis(500))
        );
        assert_eq!(KafkaAddress::parse("h:1/t?start=latest", false).unwrap().start, Start::Latest);
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        assert!(error("h:1", false).contains("expected BROKERS/TOPIC"));
        assert!(error("h/t", false).contains("broker `h` is not HOST:PORT"));
        assert!(error("h:0/t", false).contains("not HOST:PORT"));
        assert!(error(":9/t", false).contains("not HOST:PORT"));
        assert!(error("h:1/", false).contains("empty"));
        assert!(error("h:1/a b", false).contains("only letters"));
        assert!(error(&format!("h:1/{}", "t".repeat(250)), false).contains("249"));
        assert!(error("h:1/t?start=soon", false).contains("not earliest, latest"));
        assert!(error("h:1/t?start=0:-1", false).contains("offset `-1`"));
        assert!(error("h:1/t?start=0:1,0:2", false).contains("twice"));
        assert!(error("h:1/t?stop=x", false).contains("stop `x`"));
        assert!(error("h:1/t?partitions=a", false).contains("partition `a`"));
        assert!(error("h:1/t?timeout_ms=0", false).contains("timeout_ms `0`"));
        assert!(error("h:1/t?group=g", false).contains("unknown option `group`"));
        assert!(error("h:1/t?start=earliest", true).contains("options: timeout_ms"));
        assert!(error("h:1/t?start", false).contains("not NAME=VALUE"));
    }
}
