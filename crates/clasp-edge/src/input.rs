//! Raw data: `--input SOURCE=SPEC` arguments and the replay of a source's records on the side
//! that holds them.
//!
//! `SPEC` is a file of lines, or `gen:COUNT[:SEED]` for the seeded trace of `COUNT` records the
//! application's generator makes (`clasp gen`). A file is the device's own raw data. A
//! generated trace is the whole source, and a device keeps its share: the records whose key
//! hashes to its place among the devices holding the source (so one ride's events and its
//! fare stay on one device).
//!
//! Replay follows the cost model's source rates scaled by `speed`: a source of rate `r` held by
//! `k` devices delivers `r · speed / k` records per second on each. A generated trace keeps its
//! global timing — record `j` is due at `j / (r · speed)` — so the devices stay in step in event
//! time. `speed = 0` replays as fast as possible.

use crate::error::EdgeError;
use clasp_core::hash::key_hash;
use clasp_core::input::LineSource;
use clasp_core::pipeline::Source;
use clasp_core::{Pipeline, SourceId};
use std::io::{self, BufRead, BufReader};
use std::path::PathBuf;

/// Where a source's raw data comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputSpec {
    /// A file of lines.
    File(PathBuf),
    /// The application's seeded generator.
    Generated {
        /// Records of the whole trace.
        count: u64,
        /// Seed.
        seed: u64,
    },
}

impl std::fmt::Display for InputSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(p) => write!(f, "{}", p.display()),
            Self::Generated { count, seed } => write!(f, "gen:{count}:{seed}"),
        }
    }
}

/// Parses `SOURCE=FILE` or `SOURCE=gen:COUNT[:SEED]`.
pub fn parse_input(arg: &str) -> Result<(String, InputSpec), EdgeError> {
    let bad = |problem: &str| EdgeError::Input {
        given: arg.to_owned(),
        problem: problem.to_owned(),
        help: "write SOURCE=FILE or SOURCE=gen:COUNT[:SEED], e.g. rides=gen:20000:7".into(),
    };
    let (source, spec) = arg.split_once('=').ok_or_else(|| bad("no `=`"))?;
    if source.is_empty() || spec.is_empty() {
        return Err(bad("empty source or input"));
    }
    let Some(g) = spec.strip_prefix("gen:") else {
        return Ok((source.to_owned(), InputSpec::File(PathBuf::from(spec))));
    };
    let mut parts = g.split(':');
    let count =
        parts.next().and_then(|c| c.parse().ok()).ok_or_else(|| bad("COUNT is not a number"))?;
    let seed = match parts.next() {
        Some(s) => s.parse().map_err(|_| bad("SEED is not a number"))?,
        None => 1,
    };
    if parts.next().is_some() {
        return Err(bad("too many `:` fields"));
    }
    Ok((source.to_owned(), InputSpec::Generated { count, seed }))
}

/// Matches `--input` arguments to the sources `held` (ids of `p`); every held source needs one
/// and no other source may have one. `side` names the holder in errors.
pub fn assign(
    p: &Pipeline,
    held: &[SourceId],
    inputs: &[(String, InputSpec)],
    side: &str,
) -> Result<Vec<(SourceId, InputSpec)>, EdgeError> {
    for (name, spec) in inputs {
        let known = p.source_id(name).is_some_and(|s| held.contains(&s));
        if !known {
            let names: Vec<&str> =
                held.iter().map(|s| p.sources[s.index()].name.as_str()).collect();
            return Err(EdgeError::Input {
                given: format!("{name}={spec}"),
                problem: format!("{side} holds no source `{name}`"),
                help: format!(
                    "{side} holds: {}",
                    if names.is_empty() { "nothing".into() } else { names.join(", ") }
                ),
            });
        }
    }
    held.iter()
        .map(|&s| {
            let name = &p.sources[s.index()].name;
            inputs.iter().find(|(n, _)| n == name).map(|(_, spec)| (s, spec.clone())).ok_or_else(
                || EdgeError::MissingInput { side: side.to_owned(), source_name: name.clone() },
            )
        })
        .collect()
}

/// Which records of a generated trace a holder keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    /// This holder's place among the source's holders.
    pub index: usize,
    /// How many hold it.
    pub of: usize,
}

impl Share {
    /// Everything.
    pub const ALL: Share = Share { index: 0, of: 1 };

    /// Whether the record keyed `key` is this holder's.
    pub fn keeps(&self, key: &[u8]) -> bool {
        self.of <= 1 || (key_hash(key) % self.of as u64) as usize == self.index
    }
}

/// A source's records as its holder replays them, each with the time it is due.
pub struct Replay {
    /// The source (id in the original pipeline).
    pub source: SourceId,
    decl: Source,
    lines: Lines,
    share: Share,
    /// Seconds between consecutive records of the whole trace (generated) or of this holder's
    /// file; 0 for as fast as possible.
    interval: f64,
    position: u64,
}

impl std::fmt::Debug for Replay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replay").field("source", &self.source).field("share", &self.share).finish()
    }
}

enum Lines {
    Generated(Box<dyn LineSource>),
    File { reader: Box<dyn BufRead + Send>, path: String },
}

impl Replay {
    /// Opens the replay of `source` of `p` from `spec`, keeping `share` of its records, for a
    /// source of `rate · speed` records/s held by `holders` holders: a share of the whole trace
    /// keeps the trace's timing, a holder's own data runs at its part of the rate.
    pub fn open(
        p: &Pipeline,
        source: SourceId,
        spec: &InputSpec,
        share: Share,
        holders: usize,
        rate: f64,
        speed: f64,
    ) -> Result<Self, EdgeError> {
        let decl = p.sources[source.index()].clone();
        let global = rate * speed;
        let lines = match spec {
            InputSpec::Generated { count, seed } => {
                let def = clasp_apps::inputs::source(&p.name, Some(&decl.name)).map_err(|e| {
                    EdgeError::Input {
                        given: format!("{}={spec}", decl.name),
                        problem: format!("no generator: {e}"),
                        help: "gen: works for the shipped applications; give a file instead".into(),
                    }
                })?;
                Lines::Generated(def.generator(*count, *seed))
            }
            InputSpec::File(path) => {
                let file = std::fs::File::open(path).map_err(|error| EdgeError::Read {
                    source_name: decl.name.clone(),
                    path: path.display().to_string(),
                    error,
                })?;
                let reader: Box<dyn BufRead + Send> =
                    Box::new(BufReader::with_capacity(1 << 20, file));
                Lines::File { reader, path: path.display().to_string() }
            }
        };
        let own = if share.of > 1 { 1.0 } else { holders.max(1) as f64 };
        let interval = per(global / own);
        Ok(Self { source, decl, lines, share, interval, position: 0 })
    }

    /// Reads this holder's next record into `line`; returns the second (from the start) it is
    /// due, or `None` at the end.
    pub fn next(&mut self, line: &mut Vec<u8>) -> Result<Option<f64>, EdgeError> {
        loop {
            let at = self.position as f64 * self.interval;
            if !self.read_line(line)? {
                return Ok(None);
            }
            self.position += 1;
            if self.share.keeps(self.decl.key_of(line)) {
                return Ok(Some(at));
            }
        }
    }

    /// The key of a line of this source.
    pub fn key_of<'a>(&self, line: &'a [u8]) -> &'a [u8] {
        self.decl.key_of(line)
    }

    fn read_line(&mut self, line: &mut Vec<u8>) -> Result<bool, EdgeError> {
        match &mut self.lines {
            Lines::Generated(g) => g.next_line(line).map_err(|error| EdgeError::Read {
                source_name: self.decl.name.clone(),
                path: "generator".into(),
                error,
            }),
            Lines::File { reader, path } => {
                line.clear();
                let n = reader.read_until(b'\n', line).map_err(|error| EdgeError::Read {
                    source_name: self.decl.name.clone(),
                    path: path.clone(),
                    error,
                })?;
                while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                    line.pop();
                }
                Ok(n > 0)
            }
        }
    }
}

fn per(rate: f64) -> f64 {
    if rate > 0.0 && rate.is_finite() { 1.0 / rate } else { 0.0 }
}

/// A replay read by the cloud runtime's ingress (raw data held in the cloud), unpaced: the
/// runtime paces it.
pub struct ReplayInput(pub Replay);

impl std::fmt::Debug for ReplayInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl LineSource for ReplayInput {
    fn next_line(&mut self, line: &mut Vec<u8>) -> io::Result<bool> {
        self.0.next(line).map(|r| r.is_some()).map_err(|e| io::Error::other(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_arguments_parse_or_say_how() {
        assert_eq!(
            parse_input("rides=gen:500:7").unwrap(),
            ("rides".into(), InputSpec::Generated { count: 500, seed: 7 })
        );
        assert_eq!(
            parse_input("rides=gen:5").unwrap().1,
            InputSpec::Generated { count: 5, seed: 1 }
        );
        assert_eq!(parse_input("f=a/b.csv").unwrap().1, InputSpec::File("a/b.csv".into()));
        for bad in ["rides", "=x", "rides=gen:x", "rides=gen:1:2:3"] {
            let e = parse_input(bad).unwrap_err().to_string();
            assert!(e.contains("SOURCE=FILE"), "{e}");
        }
    }

    #[test]
    fn shares_of_a_generated_trace_partition_it_and_keep_global_timing() {
        let p = clasp_apps::pipeline("taxi-w1").unwrap();
        let spec = InputSpec::Generated { count: 600, seed: 3 };
        let mut seen = 0;
        let mut last_due = Vec::new();
        for index in 0..3 {
            let share = Share { index, of: 3 };
            let mut r = Replay::open(&p, SourceId(0), &spec, share, 3, 1000.0, 1.0).unwrap();
            let mut line = Vec::new();
            let mut due = 0.0;
            while let Some(at) = r.next(&mut line).unwrap() {
                assert!(at >= due);
                due = at;
                seen += 1;
            }
            last_due.push(due);
        }
        assert_eq!(seen, 600);
        assert!(last_due.iter().all(|d| *d > 0.5 && *d < 0.6), "{last_due:?}");
    }

    #[test]
    fn inputs_must_match_the_sources_held() {
        let p = clasp_apps::pipeline("taxi-w2").unwrap();
        let rides = (String::from("rides"), InputSpec::Generated { count: 1, seed: 1 });
        let e = assign(&p, &[SourceId(0), SourceId(1)], std::slice::from_ref(&rides), "device `a`")
            .unwrap_err();
        assert!(e.to_string().contains("--input fares="), "{e}");
        let e = assign(&p, &[SourceId(1)], &[rides], "device `a`").unwrap_err();
        assert!(e.to_string().contains("holds no source `rides`"), "{e}");
    }
}
