//! Inputs of every application: for each pipeline source, how a line becomes a record (its
//! key), a seeded generator, and a loader for files in the public format.
//!
//! A source's records are `(key, line)`, the key being the field the spec's `key_field` names
//! (SD's mote id, the taxi sources' ride id) and empty otherwise. Generated files are in the same
//! public formats as the real data sets, so one loader reads both.

use crate::error::AppError;
use clasp_core::input::LineSource;
use std::io::{self, BufRead, Write};

/// The lines generated or loaded for one source: `(source name, lines)`.
pub type SourceLines = (String, Vec<Vec<u8>>);

/// One input of one application.
#[derive(Clone, Copy)]
pub struct SourceDef {
    /// Application (pipeline) name.
    pub app: &'static str,
    /// Source name in the pipeline spec.
    pub source: &'static str,
    /// The public format.
    pub format: &'static str,
    make: fn(u64, u64) -> Box<dyn LineSource>,
}

impl std::fmt::Debug for SourceDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SourceDef")
            .field("app", &self.app)
            .field("source", &self.source)
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

impl SourceDef {
    /// A generator of `count` lines for `seed`.
    pub fn generator(&self, count: u64, seed: u64) -> Box<dyn LineSource> {
        (self.make)(count, seed)
    }

    /// Writes `count` generated lines for `seed`, one per line, to `out`.
    pub fn write_generated(&self, count: u64, seed: u64, out: &mut dyn Write) -> io::Result<u64> {
        let mut g = self.generator(count, seed);
        let mut line = Vec::new();
        let mut n = 0;
        while g.next_line(&mut line)? {
            line.push(b'\n');
            out.write_all(&line)?;
            n += 1;
        }
        Ok(n)
    }

    /// Reads a file in the source's format, calling `f(key, line)` for every line (line
    /// terminators removed; a `\r` before `\n` too), the key as the pipeline's `source` declares
    /// it. Returns the number of lines.
    pub fn load(
        &self,
        source: &clasp_core::pipeline::Source,
        reader: impl BufRead,
        mut f: impl FnMut(&[u8], &[u8]),
    ) -> io::Result<u64> {
        for_each_line(reader, |line| f(source.key_of(line), line))
    }
}

/// Calls `f` for every line of `reader`, without its terminator.
pub fn for_each_line(mut reader: impl BufRead, mut f: impl FnMut(&[u8])) -> io::Result<u64> {
    let mut line = Vec::new();
    let mut n = 0;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            return Ok(n);
        }
        if line.last() == Some(&b'\n') {
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
        }
        f(&line);
        n += 1;
    }
}

/// An infinite generator cut at `count` lines.
struct Counted<G> {
    left: u64,
    generator: G,
    next: fn(&mut G, &mut Vec<u8>),
}

impl<G: Send> LineSource for Counted<G> {
    fn next_line(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        if self.left == 0 {
            return Ok(false);
        }
        self.left -= 1;
        (self.next)(&mut self.generator, out);
        Ok(true)
    }
}

fn counted<G: Send + 'static>(
    count: u64,
    generator: G,
    next: fn(&mut G, &mut Vec<u8>),
) -> Box<dyn LineSource> {
    Box::new(Counted { left: count, generator, next })
}

impl LineSource for crate::taxi::FareGenerator {
    fn next_line(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        Ok(crate::taxi::FareGenerator::next_line(self, out))
    }
}

/// SYN records: `record-<n>`.
#[derive(Debug)]
struct SynGenerator(u64);

fn syn_line(g: &mut SynGenerator, out: &mut Vec<u8>) {
    g.0 += 1;
    out.clear();
    out.extend_from_slice(b"record-");
    out.extend_from_slice(g.0.to_string().as_bytes());
}

fn rides(app: &'static str) -> SourceDef {
    SourceDef {
        app,
        source: "rides",
        format: "Flink-training TaxiRide CSV",
        make: |n, s| {
            counted(n, crate::taxi::RideGenerator::new(s), crate::taxi::RideGenerator::next_line)
        },
    }
}

/// Every source of every application, in [`crate::APPS`] order.
pub fn sources() -> Vec<SourceDef> {
    use crate::{aa, etl, nwm, pl, sd, wc};
    vec![
        SourceDef {
            app: "wc",
            source: "lines",
            format: "text lines",
            make: |n, s| counted(n, wc::Generator::new(s), wc::Generator::next_line),
        },
        SourceDef {
            app: "sd",
            source: "readings",
            format: "Intel Berkeley lab sensor lines",
            make: |n, s| counted(n, sd::Generator::new(s), sd::Generator::next_line),
        },
        SourceDef {
            app: "aa",
            source: "events",
            format: "YSB JSON lines",
            make: |n, s| counted(n, aa::Generator::new(s), aa::Generator::next_line),
        },
        SourceDef {
            app: "pl",
            source: "page_loads",
            format: "CSV url,user,load_time",
            make: |n, s| counted(n, pl::Generator::new(s), pl::Generator::next_line),
        },
        SourceDef {
            app: "nwm",
            source: "logins",
            format: "CSV day,host,user,outcome",
            make: |n, s| counted(n, nwm::Generator::new(s), nwm::Generator::next_line),
        },
        SourceDef {
            app: "etl",
            source: "senml",
            format: "SenML JSON lines",
            make: |n, s| counted(n, etl::Generator::new(s), etl::Generator::next_line),
        },
        SourceDef {
            app: "syn",
            source: "input",
            format: "opaque lines",
            make: |n, _| counted(n, SynGenerator(0), syn_line),
        },
        rides("taxi-w1"),
        rides("taxi-w2"),
        SourceDef {
            app: "taxi-w2",
            source: "fares",
            format: "Flink-training TaxiFare CSV (the fares of the rides started among COUNT ride events)",
            make: |n, s| Box::new(crate::taxi::FareGenerator::new(s, n)),
        },
        rides("taxi-w3"),
    ]
}

/// The sources of `app`.
pub fn sources_of(app: &str) -> Vec<SourceDef> {
    sources().into_iter().filter(|s| s.app == app).collect()
}

/// The source `source` of `app` (or its only source when `None`), with an error that lists
/// the choices.
pub fn source(app: &str, source: Option<&str>) -> Result<SourceDef, AppError> {
    let all = sources_of(app);
    if all.is_empty() {
        return Err(crate::unknown_app(app));
    }
    let names = || all.iter().map(|s| s.source).collect::<Vec<_>>().join(", ");
    match source {
        Some(name) => all.iter().find(|s| s.source == name).copied().ok_or_else(|| {
            AppError::NoSuchSource { app: app.to_owned(), name: name.to_owned(), sources: names() }
        }),
        None if all.len() == 1 => Ok(all[0]),
        None => Err(AppError::SeveralSources { app: app.to_owned(), sources: names() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_is_in_a_spec_and_generates_deterministically() {
        for def in sources() {
            let p = crate::pipeline(def.app).unwrap();
            assert!(p.source_id(def.source).is_some(), "{} has no source {}", def.app, def.source);
            let mut a = Vec::new();
            let n = def.write_generated(300, 11, &mut a).unwrap();
            assert!(n > 0 && (def.source == "fares" || n == 300), "{} {n}", def.app);
            let mut b = Vec::new();
            def.write_generated(300, 11, &mut b).unwrap();
            assert_eq!(a, b, "{}", def.app);
            let mut c = Vec::new();
            def.write_generated(300, 12, &mut c).unwrap();
            assert!(def.app == "syn" || a != c, "{}: the seed matters", def.app);
            let src = &p.sources[p.source_id(def.source).unwrap().index()];
            let loaded = def.load(src, &a[..], |_, _| {}).unwrap();
            assert_eq!(loaded, n);
        }
        for app in crate::APPS {
            assert!(!sources_of(app).is_empty(), "{app}");
        }
    }

    #[test]
    fn source_choice_errors_name_the_options() {
        assert!(source("taxi-w2", None).unwrap_err().to_string().contains("rides, fares"));
        assert!(source("taxi-w2", Some("x")).unwrap_err().to_string().contains("rides, fares"));
        assert!(source("nope", None).unwrap_err().to_string().contains("wc, sd"));
        assert_eq!(source("sd", None).unwrap().source, "readings");
    }

    #[test]
    fn loader_strips_line_ends() {
        let mut got = Vec::new();
        let def = source("sd", None).unwrap();
        let p = crate::pipeline("sd").unwrap();
        def.load(&p.sources[0], &b"a b c 7 20 1 1 1\r\nx\n\nlast"[..], |k, l| {
            got.push((k.to_vec(), l.to_vec()));
        })
        .unwrap();
        assert_eq!(got[0], (b"7".to_vec(), b"a b c 7 20 1 1 1".to_vec()));
        assert_eq!(got.len(), 4);
        assert_eq!(got[3].1, b"last");
    }
}
