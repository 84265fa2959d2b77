//! What a run produced, in comparable form: the records every sink received (as a multiset)
//! and the final keyed state of every stateful operator, in the JSON that state dumps use.

use clasp_core::local::LocalDriver;
use serde_json::Value;
use std::collections::BTreeMap;

/// What a run produced, in comparable form.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// Per sink, the `(key, value)` records received, sorted.
    pub sinks: BTreeMap<String, Vec<(String, String)>>,
    /// Per stateful operator, key → state value.
    pub state: BTreeMap<String, BTreeMap<String, Value>>,
}

pub(crate) fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl Outcome {
    /// Records one sink record.
    pub fn add_sink(&mut self, sink: &str, key: &[u8], value: &[u8]) {
        let v = self.sinks.entry(sink.to_owned()).or_default();
        let rec = (text(key), text(value));
        let at = v.partition_point(|r| *r <= rec);
        v.insert(at, rec);
    }

    /// Records one line of a state dump (`{"operator":…,"key":…,"value":…}`).
    pub fn add_state_line(&mut self, line: &str) -> Result<(), String> {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("bad state line: {e}"))?;
        let op = v["operator"].as_str().ok_or("state line without operator")?;
        let key = v["key"].as_str().ok_or("state line without key")?;
        self.set_state(op, key, v["value"].clone());
        Ok(())
    }

    pub(crate) fn set_state(&mut self, op: &str, key: &str, value: Value) {
        self.state.entry(op.to_owned()).or_default().insert(key.to_owned(), value);
    }

    /// The sinks and final state of a local run.
    pub fn from_driver(d: &LocalDriver) -> Result<Outcome, String> {
        let mut o = Outcome::default();
        let p = d.pipeline();
        for s in &p.sinks {
            o.sinks.entry(s.name.clone()).or_default();
            for r in d.sink_records(s.id) {
                o.add_sink(&s.name, r.key, r.value);
            }
        }
        for op in &p.operators {
            if d.keeps_state(op.id) {
                o.state.entry(op.name.clone()).or_default();
            }
        }
        let mut dump = Vec::new();
        d.dump_state(&mut dump).map_err(|e| e.to_string())?;
        for line in String::from_utf8_lossy(&dump).lines() {
            o.add_state_line(line)?;
        }
        Ok(o)
    }

    pub(crate) fn sink(&mut self, sink: &str, key: impl Into<String>, value: impl Into<String>) {
        self.add_sink(sink, key.into().as_bytes(), value.into().as_bytes());
    }
}
