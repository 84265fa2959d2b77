//! Independent single-threaded implementations of every application, for checking a run.
//! Tests and bench checks use this crate as a dev-dependency only: it is never part of the
//! `clasp` binary.
//!
//! Each function here recomputes an app from its input lines with plain, obviously correct
//! code — `String`s, `serde_json`, ordered maps — sharing nothing with the operators but the
//! apps' fixed data tables (the YSB ad table, the page catalog, the sensor list) and the
//! documented output formats; no operator code is called. One module per application. The result is an [`Outcome`]: the records every sink received
//! (as a multiset) and the final keyed state of every stateful operator, in the JSON that
//! state dumps use (`{"operator":…,"key":…,"value":…}` lines).
//!
//! A run of any engine — the local driver, or the distributed runtime on any number of
//! workers — is turned into an [`Outcome`] too ([`Outcome::add_sink`],
//! [`Outcome::add_state_line`], [`Outcome::from_driver`]) and checked with [`check`]:
//! sinks and state must be equal, and for windowed apps (AA, taxi-w3) the counts are also
//! compared window by window (emitted windows together with those still open in the state).
//!
//! The windowed applications follow event time: SD's moving average, ETL's interpolation and
//! taxi-w3's sliding windows take each key's records in order of their time, and AA's and
//! taxi-w3's windows close by the watermark, so the references take records in time order and
//! their results hold for any arrival order within the sources' bounds. PL's blocks of 1,000
//! records follow arrival: exact when every key's records arrive in input order, as in the
//! local driver. [`check_order_insensitive`] compares only what no reordering can change —
//! use it for parallel runs that do not keep per-key order.

mod aa;
mod check;
mod etl;
mod numbers;
mod nwm;
mod outcome;
mod pl;
mod sd;
mod taxi;
mod wc;

pub use check::{Windows, check, check_order_insensitive, windows};
pub use outcome::Outcome;

use clasp_core::Pipeline;
use outcome::text;
use serde_json::Value;

/// Per-source input lines: `(source name, lines)`.
pub type Inputs = [(String, Vec<Vec<u8>>)];

/// The expected outcome of `app` (whose spec is `p`, for its parameters) on `inputs`.
pub fn expected(app: &str, p: &Pipeline, inputs: &Inputs) -> Result<Outcome, String> {
    let lines = |source: &str| -> Result<Vec<String>, String> {
        inputs
            .iter()
            .find(|(s, _)| s == source)
            .map(|(_, ls)| ls.iter().map(|l| text(l)).collect())
            .ok_or_else(|| format!("no input for source `{source}`"))
    };
    let params = Params(p);
    let mut o = Outcome::default();
    for s in &p.sinks {
        o.sinks.entry(s.name.clone()).or_default();
    }
    for op in p.operators.iter().filter(|op| op.stateful) {
        o.state.entry(op.name.clone()).or_default();
    }
    match app {
        "wc" => wc::expected(&lines("lines")?, &mut o),
        // SYN forwards records to no sink and keeps no state: nothing to expect.
        "syn" => {}
        "sd" => sd::expected(&lines("readings")?, &params, &mut o),
        "aa" => aa::expected(&lines("events")?, &params, &mut o),
        "pl" => pl::expected(&lines("page_loads")?, &params, &mut o),
        "nwm" => nwm::expected(&lines("logins")?, &params, &mut o),
        "etl" => etl::expected(&lines("senml")?, &params, &mut o),
        "taxi-w1" => taxi::w1(&lines("rides")?, &params, &mut o),
        "taxi-w2" => taxi::w2(&lines("rides")?, &lines("fares")?, &params, &mut o),
        "taxi-w3" => taxi::w3(&lines("rides")?, &params, &mut o),
        _ => return Err(format!("no reference for `{app}`")),
    }
    Ok(o)
}

/// Reads `[operator.params]` of the spec by operator name.
pub(crate) struct Params<'a>(&'a Pipeline);

impl Params<'_> {
    pub(crate) fn get(&self, op: &str, name: &str, default: f64) -> f64 {
        self.0
            .operators
            .iter()
            .find(|o| o.name == op)
            .and_then(|o| o.params.get(name))
            .and_then(Value::as_f64)
            .unwrap_or(default)
    }
}
