//! Input-rate patterns: how fast a source offers records over time.
//!
//! A [`RatePattern`] is a pure, seeded description — a list of constant-rate [`Stage`]s, or
//! an open-ended constant or unthrottled rate — shared by the runtime (which paces sources with
//! it) and the simulator (which draws arrivals from it), so both see the same input.
//!
//! - `constant`: one rate for as long as the input lasts.
//! - `unthrottled`: as fast as the system accepts (rate `+inf`).
//! - `gradual` (CLASP §5.6): 10 % → 100 % → 10 % of the maximum rate in 10 % steps, 19
//!   stages, each lasting a whole number of seconds drawn from 5–10; `gradual:S` makes every
//!   stage last `S` whole seconds (the same steps in a shorter run).
//! - `burst` (CLASP §5.6): stages alternate between a low range (10–30 % of the maximum) and a
//!   high range (70–100 %), the rate drawn uniformly within the range and each stage lasting
//!   5–10 s. The paper requires the same total volume as `gradual`; here burst stages are drawn
//!   until their volume reaches the volume of the gradual pattern built from the same maximum
//!   rate and seed, and the last stage is shortened so the totals are equal exactly. Rates keep
//!   their ranges; only the burst duration adapts.
//! - `trace`: a file of stages, one `DURATION_S RATE` pair per line (whitespace or a comma
//!   between them; blank lines and `#` comments ignored); rates are records per second, `0`
//!   allowed (a pause), durations must be positive.

use crate::rng::{SeededRng, independent_stream};
use rand::RngExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// A stretch of time with a constant offered rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Stage {
    /// Seconds from the start of the pattern.
    pub start_s: f64,
    /// Length in seconds (`> 0`).
    pub duration_s: f64,
    /// Records per second (`>= 0`).
    pub rate: f64,
}

impl Stage {
    /// When the stage ends.
    pub fn end_s(&self) -> f64 {
        self.start_s + self.duration_s
    }

    /// Records offered during the whole stage.
    pub fn volume(&self) -> f64 {
        self.rate * self.duration_s
    }
}

/// Which pattern a [`RatePattern`] is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PatternSpec {
    /// A constant rate, open-ended.
    Constant,
    /// No pacing at all.
    Unthrottled,
    /// Random jumps between low and high ranges.
    Burst,
    /// Up and down in 10 % steps; every stage this many seconds long, if given.
    Gradual(Option<u32>),
    /// Stages read from a file.
    Trace(PathBuf),
}

/// Why a pattern cannot be built.
#[derive(Debug, thiserror::Error)]
pub enum PatternError {
    /// An unknown pattern name.
    #[error(
        "unknown input pattern `{0}`\n  help: use one of: constant, unthrottled, burst, gradual, gradual:STAGE_S, trace:FILE"
    )]
    UnknownPattern(String),
    /// `gradual:S` with a stage length that is not a positive number of seconds.
    #[error(
        "pattern `gradual:{0}`: the stage length must be whole seconds in 1..=3600\n  help: e.g. gradual:3"
    )]
    BadStageLength(String),
    /// The pattern needs a maximum rate and none (or a bad one) was given.
    #[error(
        "pattern `{pattern}` needs a rate > 0 (got {rate:?})\n  help: pass --rate RECORDS_PER_S"
    )]
    BadRate {
        /// The pattern's name.
        pattern: &'static str,
        /// What was given.
        rate: Option<f64>,
    },
    /// The trace file cannot be read.
    #[error("cannot read rate trace {path}: {source}")]
    TraceIo {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line of the trace is malformed.
    #[error("{path}:{line}: {message}\n  help: each line is `DURATION_S RATE`, e.g. `10 5000`")]
    TraceLine {
        /// The file.
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The trace has no stage.
    #[error("{0}: the rate trace has no stage\n  help: add lines `DURATION_S RATE`")]
    EmptyTrace(String),
}

impl FromStr for PatternSpec {
    type Err = PatternError;

    fn from_str(s: &str) -> Result<Self, PatternError> {
        match s {
            "constant" => Ok(Self::Constant),
            "unthrottled" => Ok(Self::Unthrottled),
            "burst" => Ok(Self::Burst),
            "gradual" => Ok(Self::Gradual(None)),
            _ => {
                if let Some(stage) = s.strip_prefix("gradual:") {
                    return match stage.parse::<u32>() {
                        Ok(v) if (1..=3600).contains(&v) => Ok(Self::Gradual(Some(v))),
                        _ => Err(PatternError::BadStageLength(stage.to_owned())),
                    };
                }
                match s.strip_prefix("trace:") {
                    Some(path) if !path.is_empty() => Ok(Self::Trace(PathBuf::from(path))),
                    _ => Err(PatternError::UnknownPattern(s.to_owned())),
                }
            }
        }
    }
}

impl PatternSpec {
    /// Builds the pattern. `rate` is the constant rate, or the maximum rate of burst and
    /// gradual; a trace and an unthrottled pattern ignore it.
    pub fn build(&self, rate: Option<f64>, seed: u64) -> Result<RatePattern, PatternError> {
        let need = |pattern: &'static str| match rate {
            Some(r) if r.is_finite() && r > 0.0 => Ok(r),
            _ => Err(PatternError::BadRate { pattern, rate }),
        };
        Ok(match self {
            Self::Constant => RatePattern::constant(need("constant")?),
            Self::Unthrottled => RatePattern::unthrottled(),
            Self::Burst => RatePattern::burst(need("burst")?, seed),
            Self::Gradual(None) => RatePattern::gradual(need("gradual")?, seed),
            Self::Gradual(Some(stage_s)) => {
                RatePattern::gradual_every(need("gradual")?, f64::from(*stage_s))
            }
            Self::Trace(path) => RatePattern::trace_file(path)?,
        })
    }
}

/// What happens after the last stage.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Tail {
    /// The pattern is over: rate 0.
    End,
    /// This rate goes on for ever.
    Forever(f64),
}

/// A seeded input-rate pattern. See the [module documentation](self).
#[derive(Clone, Debug, PartialEq)]
pub struct RatePattern {
    name: &'static str,
    stages: Vec<Stage>,
    tail: Tail,
}

/// Whole seconds in 5..=10, as the paper's stage lengths.
fn stage_length(rng: &mut SeededRng) -> f64 {
    (5 + rng.random_range(0..6)) as f64
}

impl RatePattern {
    /// `rate` records per second for as long as the input lasts.
    pub fn constant(rate: f64) -> Self {
        Self { name: "constant", stages: Vec::new(), tail: Tail::Forever(rate.max(0.0)) }
    }

    /// No pacing: the source offers records as fast as they are accepted.
    pub fn unthrottled() -> Self {
        Self { name: "unthrottled", stages: Vec::new(), tail: Tail::Forever(f64::INFINITY) }
    }

    /// 10 % → 100 % → 10 % of `max_rate` in 10 % steps, stage lengths drawn from `seed`.
    pub fn gradual(max_rate: f64, seed: u64) -> Self {
        let mut rng = independent_stream(seed, 0x6772_6164);
        Self::gradual_with(max_rate, || stage_length(&mut rng))
    }

    /// [`RatePattern::gradual`] with every stage `stage_s` seconds long.
    pub fn gradual_every(max_rate: f64, stage_s: f64) -> Self {
        Self::gradual_with(max_rate, || stage_s)
    }

    /// The gradual steps, each stage as long as `length` says.
    fn gradual_with(max_rate: f64, mut length: impl FnMut() -> f64) -> Self {
        let levels = (1..=10).chain((1..=9).rev());
        let stages = Self::sequence(levels.map(|l| (max_rate * l as f64 / 10.0, length())));
        Self { name: "gradual", stages, tail: Tail::End }
    }

    /// Alternating low (10–30 %) and high (70–100 %) stages of `max_rate`, with the total
    /// volume of [`RatePattern::gradual`] for the same arguments.
    pub fn burst(max_rate: f64, seed: u64) -> Self {
        let target = Self::gradual(max_rate, seed).total_volume().unwrap_or(0.0);
        let mut rng = independent_stream(seed, 0x6275_7273);
        let mut high = rng.random_bool(0.5);
        let mut plan = Vec::new();
        let mut volume = 0.0;
        while volume < target {
            let (lo, hi) = if high { (0.7, 1.0) } else { (0.1, 0.3) };
            let rate = max_rate * rng.random_range(lo..hi);
            let mut length = stage_length(&mut rng);
            if volume + rate * length >= target {
                length = (target - volume) / rate;
            }
            volume += rate * length;
            plan.push((rate, length));
            high = !high;
        }
        Self { name: "burst", stages: Self::sequence(plan.into_iter()), tail: Tail::End }
    }

    /// Stages from `(rate, duration)` pairs laid end to end.
    fn sequence(parts: impl Iterator<Item = (f64, f64)>) -> Vec<Stage> {
        let mut start = 0.0;
        parts
            .map(|(rate, duration_s)| {
                let s = Stage { start_s: start, duration_s, rate };
                start += duration_s;
                s
            })
            .collect()
    }

    /// Stages from a trace file (format in the [module documentation](self)).
    pub fn trace_file(path: &Path) -> Result<Self, PatternError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| PatternError::TraceIo { path: path.display().to_string(), source })?;
        Self::trace(&text, &path.display().to_string())
    }

    /// Stages from trace text; `origin` names it in errors.
    pub fn trace(text: &str, origin: &str) -> Result<Self, PatternError> {
        let mut parts = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let err = |message: String| PatternError::TraceLine {
                path: origin.to_owned(),
                line: i + 1,
                message,
            };
            let fields: Vec<&str> = line
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|f| !f.is_empty())
                .collect();
            let [duration, rate] = fields[..] else {
                return Err(err(format!(
                    "expected 2 fields (duration, rate), found {}",
                    fields.len()
                )));
            };
            let number = |what: &str, v: &str| {
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| err(format!("{what} `{v}` is not a number")))
            };
            let (duration, rate) = (number("duration", duration)?, number("rate", rate)?);
            if duration <= 0.0 {
                return Err(err(format!("duration {duration} must be > 0")));
            }
            if rate < 0.0 {
                return Err(err(format!("rate {rate} must be >= 0")));
            }
            parts.push((rate, duration));
        }
        if parts.is_empty() {
            return Err(PatternError::EmptyTrace(origin.to_owned()));
        }
        Ok(Self { name: "trace", stages: Self::sequence(parts.into_iter()), tail: Tail::End })
    }

    /// The pattern's name (`constant`, `burst`, ...).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The stages (empty for constant and unthrottled patterns).
    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// Times at which the rate changes: each stage's start, then the end of the last one.
    pub fn boundaries(&self) -> Vec<f64> {
        let mut v: Vec<f64> = self.stages.iter().map(|s| s.start_s).collect();
        v.extend(self.stages.last().map(Stage::end_s));
        v
    }

    /// How long the pattern lasts; `None` when it goes on until the input ends.
    pub fn duration(&self) -> Option<f64> {
        match self.tail {
            Tail::End => Some(self.stages.last().map_or(0.0, Stage::end_s)),
            Tail::Forever(_) => None,
        }
    }

    /// Records offered over the whole pattern; `None` when it is open-ended.
    pub fn total_volume(&self) -> Option<f64> {
        match self.tail {
            Tail::End => Some(self.stages.iter().map(Stage::volume).sum()),
            Tail::Forever(_) => None,
        }
    }

    /// The stage in force at `t` seconds (`None` before 0, after the end, or for open-ended
    /// patterns).
    pub fn stage_at(&self, t: f64) -> Option<&Stage> {
        if t < 0.0 {
            return None;
        }
        let i = self.stages.partition_point(|s| s.end_s() <= t);
        self.stages.get(i)
    }

    /// The offered rate at `t` seconds (records/s).
    pub fn rate_at(&self, t: f64) -> f64 {
        if t < 0.0 {
            return 0.0;
        }
        match (self.stage_at(t), self.tail) {
            (Some(s), _) => s.rate,
            (None, Tail::Forever(r)) => r,
            (None, Tail::End) => 0.0,
        }
    }

    /// The maximum rate the pattern reaches.
    pub fn peak_rate(&self) -> f64 {
        let tail = match self.tail {
            Tail::Forever(r) => r,
            Tail::End => 0.0,
        };
        self.stages.iter().map(|s| s.rate).fold(tail, f64::max)
    }

    /// Records offered in `[0, t]`: a source paced by this pattern has sent
    /// `floor(volume_until(t))` records by time `t`.
    pub fn volume_until(&self, t: f64) -> f64 {
        if t <= 0.0 {
            return 0.0;
        }
        let mut v = 0.0;
        for s in &self.stages {
            if t <= s.start_s {
                return v;
            }
            v += s.rate * (t.min(s.end_s()) - s.start_s);
        }
        match self.tail {
            Tail::Forever(r) if r.is_infinite() => f64::INFINITY,
            Tail::Forever(r) => v + r * (t - self.stages.last().map_or(0.0, Stage::end_s)),
            Tail::End => v,
        }
    }

    /// When the `n`-th record (counting from 0) is due: the first time at which
    /// `volume_until` exceeds `n`. `Some(0.0)` for every record of an unthrottled pattern;
    /// `None` when the pattern ends before offering that many.
    pub fn due_time(&self, n: u64) -> Option<f64> {
        let n = n as f64;
        let mut v = 0.0;
        for s in &self.stages {
            if s.rate > 0.0 && v + s.volume() > n {
                return Some(s.start_s + (n - v) / s.rate);
            }
            v += s.volume();
        }
        let end = self.stages.last().map_or(0.0, Stage::end_s);
        match self.tail {
            Tail::Forever(r) if r.is_infinite() => Some(end),
            Tail::Forever(r) if r > 0.0 => Some(end + (n - v) / r),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
    }

    #[test]
    fn gradual_steps_up_and_down_in_tenths() {
        let g = RatePattern::gradual(1000.0, 7);
        let rates: Vec<f64> = g.stages().iter().map(|s| s.rate).collect();
        let expect: Vec<f64> = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1]
            .iter()
            .map(|l| *l as f64 * 100.0)
            .collect();
        assert_eq!(rates, expect);
        for s in g.stages() {
            assert!((5.0..=10.0).contains(&s.duration_s) && s.duration_s.fract() == 0.0);
        }
        assert_eq!(g.rate_at(g.stages()[3].start_s + 0.5), 400.0);
        assert_eq!(g.rate_at(g.duration().unwrap() + 1.0), 0.0);
        assert_eq!(g.boundaries().len(), 20);
        let short = RatePattern::gradual_every(1000.0, 3.0);
        assert_eq!(short.stages().iter().map(|s| s.rate).collect::<Vec<_>>(), expect);
        assert!(short.stages().iter().all(|s| s.duration_s == 3.0));
        assert_eq!(short.duration(), Some(57.0));
    }

    #[test]
    fn burst_alternates_ranges_and_matches_gradual_volume() {
        for seed in 0..50 {
            let g = RatePattern::gradual(2000.0, seed);
            let b = RatePattern::burst(2000.0, seed);
            assert!(close(g.total_volume().unwrap(), b.total_volume().unwrap()), "seed {seed}");
            let stages = b.stages();
            for (i, s) in stages.iter().enumerate() {
                let frac = s.rate / 2000.0;
                let low = (0.1..0.3).contains(&frac);
                assert!(low || (0.7..1.0).contains(&frac), "seed {seed} stage {i}: {frac}");
                if i + 1 < stages.len() {
                    assert!((5.0..=10.0).contains(&s.duration_s));
                    let next_low = stages[i + 1].rate / 2000.0 < 0.5;
                    assert_ne!(low, next_low, "stages alternate");
                } else {
                    assert!(s.duration_s > 0.0 && s.duration_s <= 10.0);
                }
            }
        }
    }

    #[test]
    fn same_seed_same_pattern() {
        assert_eq!(RatePattern::burst(500.0, 3), RatePattern::burst(500.0, 3));
        assert_ne!(RatePattern::burst(500.0, 3), RatePattern::burst(500.0, 4));
        assert_eq!(RatePattern::gradual(500.0, 3), RatePattern::gradual(500.0, 3));
    }

    #[test]
    fn volume_and_due_time_are_inverse() {
        let p = RatePattern::trace("2 10\n# pause\n1 0\n3, 5.5\n", "t").unwrap();
        assert_eq!(p.total_volume(), Some(36.5));
        assert_eq!(p.duration(), Some(6.0));
        assert!(close(p.volume_until(2.5), 20.0));
        assert!(close(p.volume_until(4.0), 25.5));
        for n in 0..36 {
            let t = p.due_time(n).unwrap();
            assert!(p.volume_until(t) <= n as f64 + 1e-9 && p.volume_until(t + 1e-6) > n as f64);
        }
        assert_eq!(p.due_time(37), None);
        let c = RatePattern::constant(100.0);
        assert_eq!((c.duration(), c.total_volume()), (None, None));
        assert!(close(c.due_time(250).unwrap(), 2.5));
        assert_eq!(c.rate_at(1e6), 100.0);
        let u = RatePattern::unthrottled();
        assert_eq!((u.due_time(1_000_000), u.rate_at(3.0)), (Some(0.0), f64::INFINITY));
    }

    #[test]
    fn names_parse_and_bad_input_is_a_clear_error() {
        assert_eq!("gradual".parse::<PatternSpec>().unwrap(), PatternSpec::Gradual(None));
        assert_eq!("gradual:3".parse::<PatternSpec>().unwrap(), PatternSpec::Gradual(Some(3)));
        for bad in
            ["gradual:0", "gradual:-1", "gradual:x", "gradual:", "gradual:1.5", "gradual:99999"]
        {
            let e = bad.parse::<PatternSpec>().unwrap_err().to_string();
            assert!(e.contains("stage length"), "{bad}: {e}");
        }
        assert_eq!(
            "trace:r.txt".parse::<PatternSpec>().unwrap(),
            PatternSpec::Trace(PathBuf::from("r.txt"))
        );
        let e = "wobble".parse::<PatternSpec>().unwrap_err().to_string();
        assert!(e.contains("wobble") && e.contains("gradual"), "{e}");
        let e = PatternSpec::Burst.build(None, 1).unwrap_err().to_string();
        assert!(e.contains("--rate"), "{e}");
        assert!(PatternSpec::Constant.build(Some(-1.0), 1).is_err());
        assert!(PatternSpec::Unthrottled.build(None, 1).is_ok());
        for (text, needle) in [
            ("5 10\nfive 3\n", "rates.txt:2: duration `five`"),
            ("5\n", "rates.txt:1: expected 2 fields"),
            ("0 10\n", "rates.txt:1: duration 0 must be > 0"),
            ("1 -3\n", "rates.txt:1: rate -3 must be >= 0"),
            ("1 2 3\n", "found 3"),
            ("# nothing\n\n", "no stage"),
        ] {
            let e = RatePattern::trace(text, "rates.txt").unwrap_err().to_string();
            assert!(e.contains(needle), "{e}");
        }
        let e = PatternSpec::Trace("/nonexistent/r.txt".into()).build(None, 0).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/r.txt"));
    }
}
