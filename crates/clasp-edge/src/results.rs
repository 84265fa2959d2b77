//! A run's results in comparable form, to check a cut run against the same workflow all in the
//! cloud: Theorem 1 of the Planner paper says both give the same results, so the two runs of
//! the real operators are compared with each other, record for record.

use clasp_core::Batch;
use clasp_runtime::planner::SinkOutput;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

/// Records of one sink: each `(key, value)` with the number of times it arrived.
type Records = BTreeMap<(Vec<u8>, Vec<u8>), u64>;

/// What a run produced: the records every sink received and the lines of the final state
/// dump, each as a multiset (the order of arrival is not part of a result).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunResults {
    /// Per sink, its records.
    sinks: BTreeMap<String, Records>,
    /// Each `{"operator":…,"key":…,"value":…}` line of the state dump, with its count.
    state: BTreeMap<String, u64>,
}

impl RunResults {
    /// Records one sink record.
    pub fn add_sink(&mut self, sink: &str, key: &[u8], value: &[u8]) {
        let records = self.sinks.entry(sink.to_owned()).or_default();
        *records.entry((key.to_vec(), value.to_vec())).or_default() += 1;
    }

    /// Records every line of a state dump.
    pub fn add_state_dump(&mut self, dump: &[u8]) {
        for line in String::from_utf8_lossy(dump).lines().filter(|l| !l.is_empty()) {
            *self.state.entry(line.to_owned()).or_default() += 1;
        }
    }

    /// Every sink record as `(sink, key, value, times received)`.
    pub fn sink_records(&self) -> impl Iterator<Item = (&str, &[u8], &[u8], u64)> {
        self.sinks.iter().flat_map(|(sink, records)| {
            records.iter().map(move |((k, v), n)| (sink.as_str(), &k[..], &v[..], *n))
        })
    }

    /// Every state dump line, once per time it was recorded.
    pub fn state_lines(&self) -> impl Iterator<Item = &str> {
        self.state.iter().flat_map(|(line, n)| std::iter::repeat_n(line.as_str(), *n as usize))
    }

    /// How `other` differs from these results (the first few differences), or `None` when the
    /// two are equal.
    pub fn difference(&self, other: &RunResults) -> Option<String> {
        let mut found = Vec::new();
        let none = BTreeMap::new();
        let names: std::collections::BTreeSet<&String> =
            self.sinks.keys().chain(other.sinks.keys()).collect();
        for name in names {
            let (a, b) =
                (self.sinks.get(name).unwrap_or(&none), other.sinks.get(name).unwrap_or(&none));
            for (what, x, y) in [("missing", a, b), ("unexpected", b, a)] {
                for ((k, v), n) in x {
                    let m = y.get(&(k.clone(), v.clone())).copied().unwrap_or(0);
                    if m < *n && found.len() < 5 {
                        found.push(format!(
                            "sink `{name}`: {what} {}× ({:?}, {:?})",
                            n - m,
                            String::from_utf8_lossy(k),
                            String::from_utf8_lossy(v)
                        ));
                    }
                }
            }
        }
        for (what, x, y) in
            [("missing", &self.state, &other.state), ("unexpected", &other.state, &self.state)]
        {
            for (line, n) in x {
                if y.get(line).copied().unwrap_or(0) < *n && found.len() < 10 {
                    found.push(format!("state: {what} {line}"));
                }
            }
        }
        (!found.is_empty()).then(|| found.join("; "))
    }
}

/// A sink output collecting a run's records into shared [`RunResults`].
#[derive(Clone, Debug, Default)]
pub struct CollectSink(pub Arc<Mutex<RunResults>>);

impl CollectSink {
    /// The results collected so far.
    pub fn results(&self) -> RunResults {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl SinkOutput for CollectSink {
    fn write(&mut self, name: &str, batch: &Batch) -> std::io::Result<()> {
        let mut results = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        for r in batch.iter() {
            results.add_sink(name, r.key, r.value);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results(records: &[(&str, &str)], state: &str) -> RunResults {
        let mut r = RunResults::default();
        for (k, v) in records {
            r.add_sink("out", k.as_bytes(), v.as_bytes());
        }
        r.add_state_dump(state.as_bytes());
        r
    }

    #[test]
    fn equal_results_in_any_order_and_every_difference_named() {
        let state = "{\"operator\":\"join\",\"key\":\"1\",\"value\":2}\n";
        let a = results(&[("1", "x"), ("2", "y"), ("1", "x")], state);
        assert_eq!(a.difference(&results(&[("1", "x"), ("1", "x"), ("2", "y")], state)), None);
        let fewer = a.difference(&results(&[("1", "x"), ("2", "y")], state)).unwrap();
        assert!(fewer.contains("missing 1×") && fewer.contains("\"x\""), "{fewer}");
        let other = a.difference(&results(&[("1", "x"), ("1", "x"), ("2", "z")], state)).unwrap();
        assert!(other.contains("missing") && other.contains("unexpected"), "{other}");
        let changed = a.difference(&results(&[("1", "x"), ("2", "y"), ("1", "x")], "")).unwrap();
        assert!(changed.starts_with("state: missing"), "{changed}");
        assert_eq!(a.sink_records().map(|r| r.3).sum::<u64>(), 3);
        assert_eq!(a.state_lines().count(), 1);
    }
}
