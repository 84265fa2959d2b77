//! The value types of settings: each reads what `--set` gives (a JSON number, a word, a
//! comma-separated list), checks it, and says what it accepts when it is wrong.

use clasp_core::stats::Coefficients;
use clasp_plan::Policy;
use clasp_runtime::wire::DispatchCost;
use clasp_sim::ServiceDist;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// What a value was given as.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum Given {
    /// A number.
    Number(f64),
    /// `true` or `false`.
    Bool(bool),
    /// A word or text (also a comma-separated list).
    Text(String),
    /// A JSON list.
    List(Vec<Given>),
}

impl fmt::Display for Given {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(x) => write!(f, "{x}"),
            Self::Bool(b) => write!(f, "{b}"),
            Self::Text(s) => f.write_str(s),
            Self::List(v) => {
                let items: Vec<String> = v.iter().map(ToString::to_string).collect();
                f.write_str(&items.join(","))
            }
        }
    }
}

impl Given {
    /// The items of a list, or of comma-separated text (empty items dropped).
    fn items(&self) -> Vec<Given> {
        match self {
            Self::List(v) => v.clone(),
            Self::Text(s) => s
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| s.parse::<f64>().map_or_else(|_| Self::Text(s.to_owned()), Self::Number))
                .collect(),
            other => vec![other.clone()],
        }
    }

    /// A number, also from text.
    fn number(&self) -> Result<f64, String> {
        match self {
            Self::Number(x) => Ok(*x),
            Self::Text(s) => s.trim().parse().map_err(|_| format!("`{s}` is not a number")),
            other => Err(format!("`{other}` is not a number")),
        }
    }
}

/// A whole number in `MIN..=MAX`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "Given", into = "u64")]
pub struct Count<const MIN: u64, const MAX: u64>(pub u64);

impl<const MIN: u64, const MAX: u64> Count<MIN, MAX> {
    /// The number.
    pub fn get(self) -> u64 {
        self.0
    }

    /// The number as a `u32` (every range here fits).
    pub fn u32(self) -> u32 {
        u32::try_from(self.0).unwrap_or(u32::MAX)
    }

    /// The number as a `usize`.
    pub fn usize(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

impl<const MIN: u64, const MAX: u64> TryFrom<Given> for Count<MIN, MAX> {
    type Error = String;
    fn try_from(g: Given) -> Result<Self, String> {
        let bad = || format!("`{g}` is not a whole number in {MIN}..={MAX}");
        let x = g.number().map_err(|_| bad())?;
        if x.fract() != 0.0 || !x.is_finite() || x < 0.0 {
            return Err(bad());
        }
        let n = x as u64;
        if !(MIN..=MAX).contains(&n) {
            return Err(format!("{n} is out of range; give a whole number in {MIN}..={MAX}"));
        }
        Ok(Self(n))
    }
}

impl<const MIN: u64, const MAX: u64> From<Count<MIN, MAX>> for u64 {
    fn from(c: Count<MIN, MAX>) -> u64 {
        c.0
    }
}

/// Defines a number type checked by `$ok`, described by `$what` in errors.
macro_rules! checked_number {
    ($(#[$doc:meta])* $name:ident, $ok:expr, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, PartialOrd, Serialize, Deserialize)]
        #[serde(try_from = "Given", into = "f64")]
        pub struct $name(pub f64);

        impl TryFrom<Given> for $name {
            type Error = String;
            fn try_from(g: Given) -> Result<Self, String> {
                let x = g.number()?;
                let ok: fn(f64) -> bool = $ok;
                if x.is_finite() && ok(x) { Ok(Self(x)) } else { Err(format!("{x} must be {}", $what)) }
            }
        }

        impl From<$name> for f64 {
            fn from(x: $name) -> f64 {
                x.0
            }
        }
    };
}

checked_number!(
    /// A number > 0.
    Positive,
    |x| x > 0.0,
    "> 0"
);
checked_number!(
    /// A number in (0, 1].
    Fraction,
    |x| x > 0.0 && x <= 1.0,
    "in (0, 1]"
);

/// Defines a duration type (humantime: `2s`, `500ms`, `400us`, `1m 30s`) checked by `$ok`.
macro_rules! checked_time {
    ($(#[$doc:meta])* $name:ident, $ok:expr, $what:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Serialize, Deserialize)]
        #[serde(try_from = "Given", into = "String")]
        pub struct $name(pub Duration);

        impl $name {
            /// Seconds.
            pub fn secs(self) -> f64 {
                self.0.as_secs_f64()
            }

            /// Microseconds.
            pub fn micros(self) -> f64 {
                self.0.as_nanos() as f64 / 1e3
            }

            /// `secs` seconds.
            pub fn from_secs(secs: f64) -> Self {
                Self(Duration::from_secs_f64(secs))
            }

            /// `us` microseconds.
            pub fn from_micros(us: f64) -> Self {
                Self(Duration::from_secs_f64(us / 1e6))
            }
        }

        impl TryFrom<Given> for $name {
            type Error = String;
            fn try_from(g: Given) -> Result<Self, String> {
                let text = g.to_string();
                let d = humantime::parse_duration(&text).map_err(|e| {
                    format!("`{text}` is not a duration ({e}); give e.g. 2s, 500ms or 400us")
                })?;
                let ok: fn(Duration) -> bool = $ok;
                if ok(d) { Ok(Self(d)) } else { Err(format!("{text} must be {}", $what)) }
            }
        }

        impl From<$name> for String {
            fn from(t: $name) -> String {
                humantime::format_duration(t.0).to_string()
            }
        }
    };
}

checked_time!(
    /// A duration > 0.
    Time,
    |d| !d.is_zero(),
    "longer than 0"
);
checked_time!(
    /// A duration ≥ 0.
    TimeOrZero,
    |_| true,
    "a duration"
);

/// Applications of `clasp_apps` (`wc,sd`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Given", into = "Vec<String>")]
pub struct Apps(pub Vec<String>);

impl Apps {
    /// These applications (unchecked: for presets).
    pub fn of(names: &[&str]) -> Self {
        Self(names.iter().map(|s| (*s).to_owned()).collect())
    }
}

impl TryFrom<Given> for Apps {
    type Error = String;
    fn try_from(g: Given) -> Result<Self, String> {
        let names: Vec<String> = g.items().iter().map(ToString::to_string).collect();
        if names.is_empty() {
            return Err("give at least one application".into());
        }
        for a in &names {
            if clasp_apps::spec_text(a).is_none() {
                return Err(format!(
                    "unknown application `{a}`; known: {}",
                    clasp_apps::APPS.join(", ")
                ));
            }
        }
        Ok(Self(names))
    }
}

impl From<Apps> for Vec<String> {
    fn from(a: Apps) -> Self {
        a.0
    }
}

/// Policies (`clasp,ds2`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Given", into = "Vec<String>")]
pub struct Policies(pub Vec<Policy>);

impl TryFrom<Given> for Policies {
    type Error = String;
    fn try_from(g: Given) -> Result<Self, String> {
        let list = g
            .items()
            .iter()
            .map(|p| p.to_string().parse::<Policy>().map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        if list.is_empty() {
            return Err("give at least one policy".into());
        }
        Ok(Self(list))
    }
}

impl From<Policies> for Vec<String> {
    fn from(p: Policies) -> Self {
        p.0.iter().map(|p| p.name().to_owned()).collect()
    }
}

/// True costs `alpha,beta,gamma,W` (µs, µs, µs/s, µs/s).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Given", into = "String")]
pub struct Costs(pub Coefficients);

impl TryFrom<Given> for Costs {
    type Error = String;
    fn try_from(g: Given) -> Result<Self, String> {
        Coefficients::parse(&g.to_string()).map(Self)
    }
}

impl From<Costs> for String {
    fn from(c: Costs) -> String {
        let c = c.0;
        format!("{},{},{},{}", c.alpha, c.beta, c.gamma, c.capacity)
    }
}

/// A service-time distribution (`exponential`, `deterministic`, `lognormal[:CV]`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Given", into = "String")]
pub struct Service(pub ServiceDist);

impl TryFrom<Given> for Service {
    type Error = String;
    fn try_from(g: Given) -> Result<Self, String> {
        g.to_string().parse().map(Self)
    }
}

impl From<Service> for String {
    fn from(s: Service) -> String {
        s.0.to_string()
    }
}

/// Worker counts: `N` for `1..=N`, or a list (`1,5,10`), each in `1..=MAX`; sorted, distinct.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Given", into = "Vec<u32>")]
pub struct WorkerCounts<const MAX: u32>(pub Vec<u32>);

impl<const MAX: u32> TryFrom<Given> for WorkerCounts<MAX> {
    type Error = String;
    fn try_from(g: Given) -> Result<Self, String> {
        let bad = || format!("give N (for 1..=N) or a list such as 1,5,10, each in 1..={MAX}");
        let count = |x: &Given| -> Result<u32, String> {
            let n = x.number().map_err(|_| bad())?;
            if n.fract() != 0.0 || n < 1.0 || n > f64::from(MAX) {
                return Err(bad());
            }
            Ok(n as u32)
        };
        let mut counts = match &g {
            Given::Number(_) => (1..=count(&g)?).collect(),
            other => other.items().iter().map(count).collect::<Result<Vec<u32>, _>>()?,
        };
        if counts.is_empty() {
            return Err(bad());
        }
        counts.sort_unstable();
        counts.dedup();
        Ok(Self(counts))
    }
}

impl<const MAX: u32> From<WorkerCounts<MAX>> for Vec<u32> {
    fn from(w: WorkerCounts<MAX>) -> Self {
        w.0
    }
}

/// Loads: fractions in (0, 1) (`0.3,0.7`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Given", into = "Vec<f64>")]
pub struct Loads(pub Vec<f64>);

impl TryFrom<Given> for Loads {
    type Error = String;
    fn try_from(g: Given) -> Result<Self, String> {
        let bad = || format!("`{g}`: give fractions in (0, 1), e.g. 0.3,0.7");
        let list = g
            .items()
            .iter()
            .map(|x| x.number().ok().filter(|x| *x > 0.0 && *x < 1.0).ok_or_else(bad))
            .collect::<Result<Vec<_>, _>>()?;
        if list.is_empty() {
            return Err(bad());
        }
        Ok(Self(list))
    }
}

impl From<Loads> for Vec<f64> {
    fn from(l: Loads) -> Self {
        l.0
    }
}

/// Which dispatch costs the runtime runs with: `both`, `native`, `paper`, or one emulation
/// `local=US,remote=US,fanout=US[:spin|:sleep]`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "Given", into = "String")]
pub enum DispatchCosts {
    /// Native and the paper's, emulated.
    Both,
    /// This runtime's own costs only.
    Native,
    /// The paper's, emulated, only.
    Paper,
    /// This emulation only.
    Emulated(DispatchCost),
}

impl TryFrom<Given> for DispatchCosts {
    type Error = String;
    fn try_from(g: Given) -> Result<Self, String> {
        match g.to_string().as_str() {
            "both" => Ok(Self::Both),
            "native" => Ok(Self::Native),
            "paper" => Ok(Self::Paper),
            other => DispatchCost::parse(other)
                .map(Self::Emulated)
                .map_err(|e| format!("{e}; or use both, native, paper")),
        }
    }
}

impl From<DispatchCosts> for String {
    fn from(d: DispatchCosts) -> String {
        match d {
            DispatchCosts::Both => "both".into(),
            DispatchCosts::Native => "native".into(),
            DispatchCosts::Paper => "paper".into(),
            DispatchCosts::Emulated(c) => {
                let mode = match c.mode {
                    clasp_core::pipeline::ServiceMode::Spin => "spin",
                    clasp_core::pipeline::ServiceMode::Sleep => "sleep",
                };
                format!("local={},remote={},fanout={}:{mode}", c.local_us, c.remote_us, c.fanout_us)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read<T: serde::de::DeserializeOwned>(json: &str) -> Result<T, String> {
        let v: serde_json::Value =
            serde_json::from_str(json).unwrap_or(serde_json::Value::String(json.to_owned()));
        serde_json::from_value(v).map_err(|e| e.to_string())
    }

    /// A value written back and read again is the same value.
    fn round_trip<T>(x: T)
    where
        T: Serialize + serde::de::DeserializeOwned + PartialEq + fmt::Debug,
    {
        let back: T = serde_json::from_value(serde_json::to_value(&x).unwrap()).unwrap();
        assert_eq!(back, x);
    }

    #[test]
    fn counts_and_numbers_check_their_ranges() {
        assert_eq!(read::<Count<1, 64>>("3"), Ok(Count(3)));
        assert!(read::<Count<1, 64>>("0").unwrap_err().contains("1..=64"));
        assert!(read::<Count<1, 64>>("2.5").unwrap_err().contains("whole number"));
        assert!(read::<Count<1, 64>>("many").is_err());
        assert_eq!(read::<Fraction>("1"), Ok(Fraction(1.0)));
        assert!(read::<Fraction>("1.5").unwrap_err().contains("(0, 1]"));
        assert!(read::<Positive>("-5").unwrap_err().contains("> 0"));
    }

    #[test]
    fn durations_take_units() {
        assert_eq!(read::<Time>("2s").unwrap().secs(), 2.0);
        assert_eq!(read::<Time>("400us").unwrap().micros(), 400.0);
        assert_eq!(read::<Time>("1m 30s").unwrap().secs(), 90.0);
        assert!(read::<Time>("2").unwrap_err().contains("e.g. 2s"));
        assert!(read::<Time>("0s").unwrap_err().contains("longer than 0"));
        assert_eq!(read::<TimeOrZero>("0s").unwrap().secs(), 0.0);
        round_trip(Time::from_secs(0.5));
        round_trip(Time::from_micros(400.0));
    }

    #[test]
    fn lists_read_from_text_or_json() {
        let apps: Apps = read("wc,sd").unwrap();
        assert_eq!(apps, Apps::of(&["wc", "sd"]));
        assert!(read::<Apps>("wc,nope").unwrap_err().contains("unknown application `nope`"));
        let p: Policies = read("clasp,ds2").unwrap();
        assert_eq!(p.0, [Policy::Clasp, Policy::Ds2]);
        assert!(read::<Policies>("clasp,bogus").unwrap_err().contains("bogus"));
        assert_eq!(read::<WorkerCounts<16>>("3"), Ok(WorkerCounts(vec![1, 2, 3])));
        assert_eq!(read::<WorkerCounts<16>>("10,1,5,5"), Ok(WorkerCounts(vec![1, 5, 10])));
        assert_eq!(read::<WorkerCounts<16>>("[2, 4]"), Ok(WorkerCounts(vec![2, 4])));
        assert!(read::<WorkerCounts<16>>("0").is_err() && read::<WorkerCounts<16>>("17").is_err());
        assert!(read::<WorkerCounts<16>>("1,x").is_err());
        assert_eq!(read::<Loads>("0.3,0.7"), Ok(Loads(vec![0.3, 0.7])));
        assert!(read::<Loads>("1.5").unwrap_err().contains("(0, 1)"));
        round_trip(Apps::of(&["wc"]));
        round_trip(WorkerCounts::<16>(vec![1]));
        round_trip(Policies(vec![Policy::FaasFlowSp, Policy::Zhang24]));
    }

    #[test]
    fn costs_services_and_dispatch_costs_round_trip() {
        let c: Costs = read("38.5,275,51500,850000").unwrap();
        assert_eq!(c.0, Coefficients::PAPER);
        round_trip(c);
        assert!(read::<Costs>("1,2").is_err());
        round_trip(Service(ServiceDist::LogNormal { cv: 0.7 }));
        assert_eq!(read::<DispatchCosts>("both"), Ok(DispatchCosts::Both));
        let d: DispatchCosts = read("local=1,remote=2").unwrap();
        let DispatchCosts::Emulated(cost) = d else { panic!("{d:?}") };
        assert_eq!((cost.local_us, cost.remote_us, cost.fanout_us), (1.0, 2.0, 0.0));
        round_trip(d);
        assert!(read::<DispatchCosts>("remote=x").unwrap_err().contains("both, native, paper"));
    }
}
