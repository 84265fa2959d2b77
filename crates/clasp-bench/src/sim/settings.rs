//! `--set KEY=VALUE` for the simulator's experiments: which keys each experiment takes, what
//! values they accept, and the simulated cluster they describe. Every value is checked before
//! anything runs, with a message naming the key and what it accepts.
//!
//! Keys every simulator experiment takes (except `validate`, which simulates single queues):
//!
//! | key | value | default |
//! |---|---|---|
//! | `apps` | comma-separated applications | the experiment's (see `docs/bench.md`) |
//! | `workers` | workers in the cluster, ≥ 1 | 10 |
//! | `slots` | executor slots per worker, ≥ 1 | 10 |
//! | `exec-us` | mean execution time (µs), > 0 | 400 |
//! | `coefficients` | true `alpha,beta,gamma,W` (µs, µs, µs/s, µs/s) | 38.5,275,51500,850000 |
//! | `service` | `exponential`, `deterministic`, `lognormal[:CV]` | exponential |
//! | `run-s` | measured seconds of a fixed-input run, > 0 | 30 (quick 6) |
//! | `warmup-s` | unmeasured seconds before it, ≥ 0 | 5 (quick 2) |
//! | `remote-delay-us` | network delay between nodes (µs), ≥ 0 | 100 |
//! | `headroom` | fraction of W̄ the policies plan a worker to, in (0, 1] | 0.9 |
//!
//! Experiment keys: `scaling` `load`; `state-locality` `remote-state-us`; `migration` `load`,
//! `rate`, `fill-s`, `gap-s`, `repeats`; `placement`, `worker-count`, `end-to-end`
//! `policies`; `worker-count` `levels`; `end-to-end` `pattern-scale`; `validate`
//! `customers`, `seeds`, `speed-s`.

use crate::{BenchError, Options};
use clasp_core::stats::Coefficients;
use clasp_plan::Policy;
use clasp_sim::ServiceDist;
use clasp_sim::experiments::Setup;
use std::collections::BTreeMap;

/// What a key accepts.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    /// Comma-separated application names.
    Apps,
    /// Comma-separated policy names.
    Policies,
    /// A whole number in `min..=max`.
    Count(u32, u32),
    /// A number > 0.
    Positive,
    /// A number ≥ 0.
    NonNegative,
    /// A number in (0, 1].
    Fraction,
    /// `alpha,beta,gamma,W`.
    Costs,
    /// A service-time distribution.
    Service,
}

/// A checked value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// A number.
    Number(f64),
    /// Names (applications or policies).
    Names(Vec<String>),
    /// Policies.
    Policies(Vec<Policy>),
    /// Costs.
    Costs(Coefficients),
    /// A distribution.
    Service(ServiceDist),
}

const COMMON: [(&str, Kind); 10] = [
    ("apps", Kind::Apps),
    ("workers", Kind::Count(1, 1024)),
    ("slots", Kind::Count(1, 1024)),
    ("exec-us", Kind::Positive),
    ("coefficients", Kind::Costs),
    ("service", Kind::Service),
    ("run-s", Kind::Positive),
    ("warmup-s", Kind::NonNegative),
    ("remote-delay-us", Kind::NonNegative),
    ("headroom", Kind::Fraction),
];

/// The keys `experiment` takes besides the common ones.
fn own_keys(experiment: &str) -> &'static [(&'static str, Kind)] {
    match experiment {
        "scaling" => &[("load", Kind::Fraction)],
        "state-locality" => &[("remote-state-us", Kind::Positive)],
        "migration" => &[
            ("load", Kind::Fraction),
            ("rate", Kind::Positive),
            ("fill-s", Kind::Positive),
            ("gap-s", Kind::Positive),
            ("repeats", Kind::Count(1, 100)),
        ],
        "placement" => &[("policies", Kind::Policies)],
        "worker-count" => &[("policies", Kind::Policies), ("levels", Kind::Count(2, 20))],
        "end-to-end" => &[("policies", Kind::Policies), ("pattern-scale", Kind::Positive)],
        "validate" => &[
            ("customers", Kind::Positive),
            ("seeds", Kind::Count(1, 100)),
            ("speed-s", Kind::Positive),
        ],
        _ => &[],
    }
}

/// Every key `experiment` takes on the simulator.
pub fn keys(experiment: &str) -> Vec<&'static str> {
    let common: &[(&str, Kind)] = if experiment == "validate" { &[] } else { &COMMON };
    common.iter().chain(own_keys(experiment)).map(|(k, _)| *k).collect()
}

/// The checked settings of one experiment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settings {
    values: BTreeMap<String, Value>,
}

impl Settings {
    /// Checks every `--set` of `opts` for `experiment`.
    pub fn parse(experiment: &str, opts: &Options) -> Result<Self, BenchError> {
        let common: &[(&str, Kind)] = if experiment == "validate" { &[] } else { &COMMON };
        let all: Vec<(&str, Kind)> = common.iter().chain(own_keys(experiment)).copied().collect();
        let mut values = BTreeMap::new();
        for (key, raw) in &opts.settings {
            let Some((_, kind)) = all.iter().find(|(k, _)| k == key) else {
                return Err(BenchError::Config(format!(
                    "unknown setting `{key}` for `{experiment}`; it takes: {}",
                    keys(experiment).join(", ")
                )));
            };
            let value = parse(*kind, raw)
                .map_err(|why| BenchError::Config(format!("--set {key}={raw}: {why}")))?;
            values.insert(key.clone(), value);
        }
        Ok(Self { values })
    }

    /// A number setting.
    pub fn number(&self, key: &str) -> Option<f64> {
        match self.values.get(key) {
            Some(Value::Number(x)) => Some(*x),
            _ => None,
        }
    }

    /// The `apps` setting.
    pub fn apps(&self) -> Option<Vec<String>> {
        match self.values.get("apps") {
            Some(Value::Names(v)) => Some(v.clone()),
            _ => None,
        }
    }

    /// The `policies` setting, or `default`.
    pub fn policies(&self, default: &[Policy]) -> Vec<Policy> {
        match self.values.get("policies") {
            Some(Value::Policies(v)) => v.clone(),
            _ => default.to_vec(),
        }
    }

    /// The simulated cluster: the paper's or the quick setup, with the common settings.
    pub fn setup(&self, opts: &Options) -> Setup {
        let mut s = if opts.quick { Setup::quick(opts.seed) } else { Setup::paper(opts.seed) };
        if let Some(n) = self.number("workers") {
            s.sim.max_workers = n as u32;
        }
        if let Some(n) = self.number("slots") {
            s.sim.slots = n as u32;
        }
        if let Some(x) = self.number("exec-us") {
            s.sim.default_exec_us = x;
        }
        if let Some(Value::Costs(c)) = self.values.get("coefficients") {
            s.sim.costs = *c;
        }
        if let Some(Value::Service(d)) = self.values.get("service") {
            s.sim.service = *d;
        }
        if let Some(x) = self.number("run-s") {
            s.run_s = x;
        }
        if let Some(x) = self.number("warmup-s") {
            s.warmup_s = x;
        }
        if let Some(x) = self.number("remote-delay-us") {
            s.sim.remote_delay_us = x;
        }
        if let Some(x) = self.number("headroom") {
            s.sim.plan_headroom = x;
        }
        s
    }

    /// Checks what only the whole configuration can tell: the cluster must be simulable, and
    /// the migration experiment visits ten workers.
    pub fn check_cluster(&self, experiment: &str, setup: &Setup) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::Config(m));
        if let Err(e) = setup.config().validate() {
            return bad(format!("impossible cluster: {e}"));
        }
        if experiment == "migration" && setup.sim.max_workers < 10 {
            return bad(format!(
                "migration visits 1, 5 and 10 workers; --set workers={} is too few",
                setup.sim.max_workers
            ));
        }
        Ok(())
    }
}

/// Parses one value of `kind`.
fn parse(kind: Kind, raw: &str) -> Result<Value, String> {
    let number = || raw.parse::<f64>().map_err(|_| format!("`{raw}` is not a number"));
    match kind {
        Kind::Apps => names(raw, |a| {
            clasp_apps::spec_text(a).is_some().then_some(()).ok_or_else(|| {
                format!("unknown application `{a}`; known: {}", clasp_apps::APPS.join(", "))
            })
        }),
        Kind::Policies => {
            let list: Result<Vec<Policy>, String> =
                raw.split(',').map(|p| p.parse::<Policy>().map_err(|e| e.to_string())).collect();
            let list = list?;
            if list.is_empty() {
                return Err("give at least one policy".into());
            }
            Ok(Value::Policies(list))
        }
        Kind::Count(min, max) => match raw.parse::<u32>() {
            Ok(n) if (min..=max).contains(&n) => Ok(Value::Number(f64::from(n))),
            Ok(n) => Err(format!("{n} is out of range; give a whole number in {min}..={max}")),
            Err(_) => Err(format!("`{raw}` is not a whole number in {min}..={max}")),
        },
        Kind::Positive => match number()? {
            x if x.is_finite() && x > 0.0 => Ok(Value::Number(x)),
            x => Err(format!("{x} must be > 0")),
        },
        Kind::NonNegative => match number()? {
            x if x.is_finite() && x >= 0.0 => Ok(Value::Number(x)),
            x => Err(format!("{x} must be >= 0")),
        },
        Kind::Fraction => match number()? {
            x if x > 0.0 && x <= 1.0 => Ok(Value::Number(x)),
            x => Err(format!("{x} must be in (0, 1]")),
        },
        Kind::Costs => Coefficients::parse(raw).map(Value::Costs).map_err(|e| e.to_string()),
        Kind::Service => raw.parse::<ServiceDist>().map(Value::Service),
    }
}

/// Comma-separated names, each checked by `ok`.
fn names(raw: &str, ok: impl Fn(&str) -> Result<(), String>) -> Result<Value, String> {
    let list: Vec<String> =
        raw.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect();
    if list.is_empty() {
        return Err("give at least one name".into());
    }
    for n in &list {
        ok(n)?;
    }
    Ok(Value::Names(list))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Engine;

    fn opts(settings: &[(&str, &str)]) -> Options {
        Options {
            engine: Engine::Sim,
            quick: true,
            seed: 1,
            out: "out".into(),
            settings: settings.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect(),
        }
    }

    fn error(experiment: &str, settings: &[(&str, &str)]) -> String {
        Settings::parse(experiment, &opts(settings)).unwrap_err().to_string()
    }

    #[test]
    fn good_settings_shape_the_cluster() {
        let o = opts(&[("workers", "4"), ("exec-us", "200"), ("apps", "wc,sd")]);
        let s = Settings::parse("scaling", &o).unwrap();
        let setup = s.setup(&o);
        assert_eq!((setup.sim.max_workers, setup.sim.default_exec_us), (4, 200.0));
        assert_eq!(s.apps().unwrap(), ["wc", "sd"]);
        let o = opts(&[("policies", "clasp,ds2")]);
        let s = Settings::parse("placement", &o).unwrap();
        assert_eq!(s.policies(&[]), [Policy::Clasp, Policy::Ds2]);
    }

    #[test]
    fn bad_settings_name_the_key_and_what_it_takes() {
        let e = error("scaling", &[("workers", "0")]);
        assert!(e.contains("workers=0") && e.contains("1..=1024"), "{e}");
        let e = error("migration", &[("rate", "0")]);
        assert!(e.contains("rate=0") && e.contains("> 0"), "{e}");
        let e = error("migration", &[("rate", "-5")]);
        assert!(e.contains("> 0"), "{e}");
        let e = error("scaling", &[("policies", "clasp")]);
        assert!(e.contains("unknown setting `policies`") && e.contains("load"), "{e}");
        let e = error("placement", &[("policies", "clasp,bogus")]);
        assert!(e.contains("bogus"), "{e}");
        let e = error("placement", &[("apps", "wc,nope")]);
        assert!(e.contains("unknown application `nope`"), "{e}");
        let e = error("scaling", &[("load", "1.5")]);
        assert!(e.contains("(0, 1]"), "{e}");
    }

    #[test]
    fn migration_needs_ten_workers() {
        let o = opts(&[("workers", "5")]);
        let s = Settings::parse("migration", &o).unwrap();
        let e = s.check_cluster("migration", &s.setup(&o)).unwrap_err().to_string();
        assert!(e.contains("workers=5"), "{e}");
    }
}
