//! Measured behaviour of an application on generated input: selectivity of every operator,
//! the share of executions that touch state, and the state each stateful operator holds.
//!
//! The app runs on the single-threaded [`LocalDriver`] with one record per request, as the
//! CLASP paper's per-tuple invocations, so "executions" are the paper's requests.
//! `clasp gen <app> --profile --count 100000` prints the table of `docs/apps.md`.

use crate::error::AppError;
use crate::inputs::{self, SourceLines};
use clasp_core::input::LineSource;
use clasp_core::local::{LocalDriver, LocalOptions, OperatorStats};
use clasp_core::{Pipeline, SourceId};
use std::fmt::Write as _;

/// What one operator did.
#[derive(Clone, Debug)]
pub struct OperatorProfile {
    /// Operator name.
    pub name: String,
    /// Its function.
    pub function: String,
    /// The spec's selectivity hint, if any.
    pub hint: Option<f64>,
    /// Counts.
    pub stats: OperatorStats,
    /// Keys in its state (0 for stateless operators).
    pub keys: usize,
    /// Bytes of its state as a migration ships it.
    pub state_bytes: usize,
    /// Whether it keeps state.
    pub stateful: bool,
}

/// The profile of one application run.
#[derive(Clone, Debug)]
pub struct Profile {
    /// Application.
    pub app: String,
    /// Input records fed, over all sources.
    pub inputs: u64,
    /// Per operator, in spec order.
    pub operators: Vec<OperatorProfile>,
}

impl Profile {
    /// Share of all executions that read or wrote keyed state.
    pub fn state_touch_share(&self) -> f64 {
        let total: u64 = self.operators.iter().map(|o| o.stats.executions).sum();
        let touched: u64 = self.operators.iter().map(|o| o.stats.touched_state).sum();
        if total == 0 { 0.0 } else { touched as f64 / total as f64 }
    }

    /// A markdown table: one row per operator.
    pub fn to_markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{}: {} inputs; {:.1} % of executions touch state\n",
            self.app,
            self.inputs,
            100.0 * self.state_touch_share()
        );
        let _ = writeln!(
            s,
            "| operator | function | records in | records out | selectivity | spec hint | state keys | state bytes | rejected |"
        );
        let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---|");
        for o in &self.operators {
            let hint = o.hint.map_or("–".to_owned(), |h| format!("{h}"));
            let (keys, bytes) = if o.stateful {
                (o.keys.to_string(), o.state_bytes.to_string())
            } else {
                ("–".to_owned(), "–".to_owned())
            };
            let rejected: Vec<String> =
                o.stats.rejections.iter().map(|(r, n)| format!("{n} {r}")).collect();
            let _ = writeln!(
                s,
                "| {} | `{}` | {} | {} | {:.4} | {hint} | {keys} | {bytes} | {} |",
                o.name,
                o.function,
                o.stats.records_in,
                o.stats.records_out,
                o.stats.selectivity(),
                if rejected.is_empty() { "–".to_owned() } else { rejected.join(", ") }
            );
        }
        s
    }
}

/// Feeds `count` generated records of every source of `app` into `driver`, interleaving
/// sources in proportion to their lengths, and flushes. Returns the records fed.
pub fn feed(driver: &mut LocalDriver, app: &str, count: u64, seed: u64) -> Result<u64, AppError> {
    let lines = generate(app, count, seed)?;
    let total = feed_lines(driver, &lines)?;
    Ok(total)
}

/// The generated lines of every source of `app`: `(source name, lines)`.
pub fn generate(app: &str, count: u64, seed: u64) -> Result<Vec<SourceLines>, AppError> {
    let defs = inputs::sources_of(app);
    if defs.is_empty() {
        return Err(crate::unknown_app(app));
    }
    Ok(defs.iter().map(|d| (d.source.to_owned(), collect(d.generator(count, seed)))).collect())
}

fn collect(mut g: Box<dyn LineSource>) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    let mut line = Vec::new();
    // Generators never fail.
    while g.next_line(&mut line).unwrap_or(false) {
        v.push(line.clone());
    }
    v
}

/// Feeds per-source lines into `driver` (keys from each source's format), interleaved in
/// proportion to the sources' lengths, then ends the input ([`LocalDriver::finish`]: every
/// pending timer fires, as at the end of a run).
pub fn feed_lines(driver: &mut LocalDriver, lines: &[SourceLines]) -> Result<u64, AppError> {
    let app = driver.pipeline().name.clone();
    let mut plan = Vec::new();
    for (source, ls) in lines {
        inputs::source(&app, Some(source))?;
        let id = source_id(driver.pipeline(), source)?;
        let decl = driver.pipeline().sources[id.index()].clone();
        plan.push((id, decl, ls, 0usize));
    }
    let mut fed = 0;
    loop {
        // The source furthest behind in its own length goes next.
        let next = plan
            .iter()
            .enumerate()
            .filter(|(_, p)| p.3 < p.2.len())
            .min_by(|a, b| {
                let fa = a.1.3 as f64 / a.1.2.len() as f64;
                let fb = b.1.3 as f64 / b.1.2.len() as f64;
                fa.total_cmp(&fb)
            })
            .map(|(i, _)| i);
        let Some(i) = next else { break };
        let (id, decl, ls, pos) = &mut plan[i];
        let line = &ls[*pos];
        driver.push(*id, decl.key_of(line), line);
        *pos += 1;
        fed += 1;
    }
    driver.finish();
    Ok(fed)
}

fn source_id(p: &Pipeline, name: &str) -> Result<SourceId, AppError> {
    p.source_id(name)
        .ok_or_else(|| AppError::NotInPipeline { pipeline: p.name.clone(), name: name.to_owned() })
}

/// Runs `app` on `count` generated records per source for `seed` and profiles it.
pub fn run(app: &str, count: u64, seed: u64) -> Result<Profile, AppError> {
    let p = crate::pipeline(app)?;
    let options = LocalOptions { batch_size: 1, ..LocalOptions::default() };
    let mut d = LocalDriver::new(&p, &crate::registry(), options)?;
    let inputs = feed(&mut d, app, count, seed)?;
    profile(&d, inputs)
}

/// The profile of a finished run.
pub fn profile(d: &LocalDriver, inputs: u64) -> Result<Profile, AppError> {
    let p = d.pipeline();
    let mut operators = Vec::new();
    for o in &p.operators {
        let stateful = d.keeps_state(o.id);
        let state_bytes = if stateful {
            d.state_bytes(o.id)
                .map_err(|source| AppError::State { operator: o.name.clone(), source })?
        } else {
            0
        };
        operators.push(OperatorProfile {
            name: o.name.clone(),
            function: o.function.clone(),
            hint: o.selectivity,
            stats: d.stats(o.id).clone(),
            keys: if stateful { d.store(o.id).key_count() } else { 0 },
            state_bytes,
            stateful,
        });
    }
    Ok(Profile { app: p.name.clone(), inputs, operators })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_count_profile_matches_the_paper_shape() {
        let prof = run("wc", 2000, 1).unwrap();
        let split = &prof.operators[0];
        assert!((9.0..11.0).contains(&split.stats.selectivity()), "{}", split.stats.selectivity());
        let share = prof.state_touch_share();
        assert!((0.88..0.93).contains(&share), "{share}");
        assert!(prof.operators[1].keys > 1000 && prof.operators[1].state_bytes > 0);
        let table = prof.to_markdown();
        assert!(table.contains("| split | `wc.split` | 2000 |"), "{table}");
    }
}
