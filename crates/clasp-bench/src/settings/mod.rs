//! `--set KEY=VALUE` into typed settings.
//!
//! An experiment's settings on an engine are one or two serde structs (`groups`), each with
//! `#[serde(deny_unknown_fields)]`: the keys every experiment of the engine takes (the
//! simulated cluster, the runtime's testbed) and the experiment's own. The experiment's
//! preset (full, or `--quick`) is serialized to a JSON object per group; every `--set` pair
//! replaces one key of one group, its value read as JSON (`3`, `0.5`, `true`, `[1, 2]`) or,
//! when it is not JSON, as text (`wc,sd`, `2s`, `paper`); then each group is deserialized
//! back. Every key is spelled once, in snake_case. An unknown key is refused with the closest
//! valid key (`did you mean`) and the list of valid keys; a bad value names the key and what
//! it accepts. Value types with their checks are in [`values`].

pub mod values;

use crate::{BenchError, Options};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// A valid key this close to an unknown one (Jaro–Winkler similarity) is suggested.
const SUGGESTION_SIMILARITY: f64 = 0.8;

/// Where settings are read: for error messages.
#[derive(Clone, Copy, Debug)]
pub struct Scope<'a> {
    /// The experiment's name.
    pub experiment: &'a str,
    /// The options whose `--set` pairs are read.
    pub opts: &'a Options,
}

impl<'a> Scope<'a> {
    /// The settings of `experiment` in `opts`.
    pub fn new(experiment: &'a str, opts: &'a Options) -> Self {
        Self { experiment, opts }
    }

    /// One group of settings: `preset` with every `--set` pair applied.
    pub fn one<A>(&self, preset: &A) -> Result<A, BenchError>
    where
        A: Serialize + DeserializeOwned,
    {
        let mut maps = [object(preset)?];
        self.apply(&mut maps, &[&check_as::<A>])?;
        let [a] = maps;
        decode(a)
    }

    /// Two groups of settings (their keys distinct): the presets with every `--set` pair
    /// applied to the group that has its key.
    pub fn two<A, B>(&self, a: &A, b: &B) -> Result<(A, B), BenchError>
    where
        A: Serialize + DeserializeOwned,
        B: Serialize + DeserializeOwned,
    {
        let mut maps = [object(a)?, object(b)?];
        self.apply(&mut maps, &[&check_as::<A>, &check_as::<B>])?;
        let [a, b] = maps;
        Ok((decode(a)?, decode(b)?))
    }

    /// Applies every `--set` pair to the group that has its key, checking each group as it
    /// changes so that an error names the pair that caused it.
    fn apply(
        &self,
        maps: &mut [Map<String, Value>],
        checks: &[&Check<'_>],
    ) -> Result<(), BenchError> {
        for (key, raw) in &self.opts.settings {
            let Some(group) = maps.iter().position(|m| m.contains_key(key)) else {
                return Err(self.unknown(key, maps));
            };
            maps[group].insert(key.clone(), value(raw));
            checks[group](&maps[group]).map_err(|source| BenchError::Setting {
                key: key.clone(),
                value: raw.clone(),
                source,
            })?;
        }
        Ok(())
    }

    fn unknown(&self, key: &str, maps: &[Map<String, Value>]) -> BenchError {
        let mut valid: Vec<&str> = maps.iter().flat_map(|m| m.keys().map(String::as_str)).collect();
        valid.sort_unstable();
        BenchError::UnknownSetting {
            key: key.to_owned(),
            experiment: self.experiment.to_owned(),
            engine: self.opts.engine,
            suggestion: suggest(key, &valid).map(str::to_owned),
            valid: valid.join(", "),
        }
    }
}

/// Checks that a group's object deserializes.
type Check<'a> = dyn Fn(&Map<String, Value>) -> Result<(), serde_json::Error> + 'a;

fn check_as<A: DeserializeOwned>(map: &Map<String, Value>) -> Result<(), serde_json::Error> {
    serde_json::from_value::<A>(Value::Object(map.clone())).map(|_| ())
}

/// A preset as a JSON object (its keys are the group's keys).
fn object<A: Serialize>(preset: &A) -> Result<Map<String, Value>, BenchError> {
    match serde_json::to_value(preset).map_err(BenchError::Preset)? {
        Value::Object(map) => Ok(map),
        other => Err(BenchError::Preset(serde::ser::Error::custom(format!(
            "a settings group is not a struct: {other}"
        )))),
    }
}

fn decode<A: DeserializeOwned>(map: Map<String, Value>) -> Result<A, BenchError> {
    serde_json::from_value(Value::Object(map)).map_err(BenchError::Preset)
}

/// A `--set` value: JSON when it is JSON, otherwise its text.
fn value(raw: &str) -> Value {
    let raw = raw.trim();
    serde_json::from_str::<Value>(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

/// The valid key most like `key` (`-` read as `_`), if any is close enough.
pub fn suggest<'a>(key: &str, valid: &[&'a str]) -> Option<&'a str> {
    let key = key.replace('-', "_");
    valid
        .iter()
        .map(|v| (strsim::jaro_winkler(&key, v), *v))
        .filter(|(score, _)| *score >= SUGGESTION_SIMILARITY)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, v)| v)
}

/// The keys of a group, sorted (for documentation and tests).
pub fn keys<A: Serialize>(preset: &A) -> Vec<String> {
    object(preset).map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

/// A settings group with no keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoSettings {}

#[cfg(test)]
mod tests {
    use super::values::{Count, Fraction};
    use super::*;
    use crate::Engine;
    use serde::Deserialize;

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Common {
        workers: Count<1, 16>,
        label: String,
    }

    #[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Own {
        load: Fraction,
        rate: Option<f64>,
    }

    fn scope(settings: &[(&str, &str)]) -> Options {
        Options {
            engine: Engine::Sim,
            quick: true,
            seed: 1,
            out: "out".into(),
            settings: settings.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect(),
        }
    }

    fn presets() -> (Common, Own) {
        (Common { workers: Count(4), label: "a".into() }, Own { load: Fraction(0.5), rate: None })
    }

    #[test]
    fn pairs_replace_their_keys_in_their_groups() {
        let o = scope(&[("workers", "8"), ("rate", "120.5"), ("label", "wc,sd")]);
        let (a, b) = presets();
        let (a, b) = Scope::new("demo", &o).two(&a, &b).unwrap();
        assert_eq!(a, Common { workers: Count(8), label: "wc,sd".into() });
        assert_eq!(b, Own { load: Fraction(0.5), rate: Some(120.5) });
        let untouched = Scope::new("demo", &scope(&[])).two(&presets().0, &presets().1).unwrap();
        assert_eq!(untouched, presets(), "no pair: the preset");
    }

    #[test]
    fn an_unknown_key_gets_the_closest_valid_one_and_the_list() {
        let o = scope(&[("wokers", "8")]);
        let (a, b) = presets();
        let e = Scope::new("demo", &o).two(&a, &b).unwrap_err().to_string();
        assert!(e.contains("unknown setting `wokers` for `demo`"), "{e}");
        assert!(e.contains("did you mean `workers`?"), "{e}");
        assert!(e.contains("it takes: label, load, rate, workers"), "{e}");
        let e = Scope::new("demo", &scope(&[("zzz", "1")])).one(&a).unwrap_err().to_string();
        assert!(!e.contains("did you mean"), "nothing close: {e}");
        assert_eq!(suggest("run-s", &["run", "warmup"]), Some("run"));
    }

    #[test]
    fn a_bad_value_names_its_pair_and_what_the_key_takes() {
        let (a, b) = presets();
        let e = Scope::new("demo", &scope(&[("workers", "0")])).two(&a, &b).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("--set workers=0") && text.contains("1..=16"), "{text}");
        assert!(std::error::Error::source(&e).is_some(), "the serde error is kept");
        let e = Scope::new("demo", &scope(&[("load", "2")])).two(&a, &b).unwrap_err();
        assert!(e.to_string().contains("(0, 1]"), "{e}");
    }

    #[test]
    fn the_last_pair_of_a_key_wins() {
        let o = scope(&[("workers", "2"), ("workers", "3")]);
        assert_eq!(Scope::new("demo", &o).one(&presets().0).unwrap().workers, Count(3));
    }
}
