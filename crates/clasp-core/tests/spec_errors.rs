//! Every kind of malformed spec gets its own clear error: file, line, field, problem and help.

use clasp_core::rng::SeededRng;
use clasp_core::spec::{Problem, parse};
use rand::{RngExt, SeedableRng};

const VALID: &str = r#"[pipeline]
name = "wc"

[[source]]
name = "lines"

[[operator]]
name = "split"
kind = "flatmap"

[[operator]]
name = "count"
kind = "reduce"
stateful = true
key = "word"

[[sink]]
name = "out"

[[stream]]
from = "lines"
to = "split"

[[stream]]
from = "split"
to = "count"

[[stream]]
from = "count"
to = "out"
"#;

struct Case {
    name: &'static str,
    spec: String,
    line: usize,
    field: &'static str,
    message: &'static str,
    help: &'static str,
}

fn edit(from: &str, to: &str) -> String {
    assert!(VALID.contains(from), "fixture lacks {from:?}");
    VALID.replacen(from, to, 1)
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "cycle",
            spec: format!("{VALID}\n[[stream]]\nfrom = \"count\"\nto = \"split\"\n"),
            line: 32,
            field: "stream[3]",
            message: "the streams form a cycle: count -> split -> count",
            help: "remove one stream of the cycle",
        },
        Case {
            name: "unknown operator in a stream",
            spec: edit("to = \"count\"", "to = \"cuont\""),
            line: 26,
            field: "stream[1].to",
            message: "no source, operator or sink is named `cuont`",
            help: "did you mean `count`?",
        },
        Case {
            name: "duplicate name",
            spec: edit("name = \"count\"", "name = \"split\""),
            line: 12,
            field: "operator[1].name",
            message: "the name `split` is already used on line 8",
            help: "distinct name",
        },
        Case {
            name: "stateful operator without a key",
            spec: edit("key = \"word\"\n", ""),
            line: 12,
            field: "operator[1].key",
            message: "operator `count` is stateful but has no `key`",
            help: "add `key = \"...\"`",
        },
        Case {
            name: "key on a stateless operator",
            spec: edit("stateful = true\n", ""),
            line: 14,
            field: "operator[1].key",
            message: "operator `count` has a `key` but is not stateful",
            help: "set `stateful = true`",
        },
        Case {
            name: "source with inputs",
            spec: format!("{VALID}\n[[stream]]\nfrom = \"split\"\nto = \"lines\"\n"),
            line: 34,
            field: "stream[3].to",
            message: "source `lines` cannot have inputs",
            help: "sources only produce records",
        },
        Case {
            name: "sink with outputs",
            spec: format!("{VALID}\n[[stream]]\nfrom = \"out\"\nto = \"count\"\n"),
            line: 33,
            field: "stream[3].from",
            message: "sink `out` cannot have outputs",
            help: "sinks only consume records",
        },
        Case {
            name: "operator unreachable from any source",
            spec: format!("{VALID}\n[[operator]]\nname = \"orphan\"\n"),
            line: 33,
            field: "operator[2]",
            message: "operator `orphan` is not reachable from any source",
            help: "add a [[stream]]",
        },
        Case {
            name: "ordered on a stateless operator",
            spec: edit("kind = \"flatmap\"", "kind = \"flatmap\"\nordered = false"),
            line: 10,
            field: "operator[0].ordered",
            message: "operator `split` sets `ordered` but is not stateful",
            help: "only applies to stateful operators",
        },
        Case {
            name: "unknown kind",
            spec: edit("kind = \"flatmap\"", "kind = \"flatmapp\""),
            line: 9,
            field: "operator[0].kind",
            message: "unknown operator kind `flatmapp`",
            help: "use one of: map, flatmap, filter",
        },
        Case {
            name: "negative selectivity",
            spec: edit("kind = \"flatmap\"", "kind = \"flatmap\"\nselectivity = -2.5"),
            line: 10,
            field: "operator[0].selectivity",
            message: "the value -2.5 must be a finite number >= 0",
            help: "zero or positive",
        },
        Case {
            name: "a selectivity beyond the maximum",
            spec: edit("kind = \"flatmap\"", "kind = \"flatmap\"\nselectivity = 1e308"),
            line: 10,
            field: "operator[0].selectivity",
            message: "the value 1e308 is larger than the largest allowed, 1000000",
            help: "between 0 and 1000000",
        },
        Case {
            name: "a service time beyond a minute",
            spec: edit("kind = \"flatmap\"", "kind = \"flatmap\"\nservice_time_us = 1e24"),
            line: 10,
            field: "operator[0].service_time_us",
            message: "the value 1e24 is larger than the largest allowed, 60000000",
            help: "between 0 and 60000000",
        },
        Case {
            name: "a source rate beyond the maximum",
            spec: edit("name = \"lines\"", "name = \"lines\"\nrate = 1e300"),
            line: 6,
            field: "source[0].rate",
            message: "the value 1e300 is larger than the largest allowed, 1000000000",
            help: "between 0 and 1000000000",
        },
        Case {
            name: "a rate that is not a number",
            spec: edit("name = \"lines\"", "name = \"lines\"\nrate = nan"),
            line: 6,
            field: "source[0].rate",
            message: "the value NaN must be a finite number >= 0",
            help: "zero or positive",
        },
        Case {
            name: "an infinite rate",
            spec: edit("name = \"lines\"", "name = \"lines\"\nrate = inf"),
            line: 6,
            field: "source[0].rate",
            message: "the value inf must be a finite number >= 0",
            help: "zero or positive",
        },
        Case {
            name: "negative service time",
            spec: edit("kind = \"flatmap\"", "kind = \"flatmap\"\nservice_time_us = -400"),
            line: 10,
            field: "operator[0].service_time_us",
            message: "the value -400 must be a finite number >= 0",
            help: "zero or positive",
        },
        Case {
            name: "unknown field",
            spec: edit("kind = \"flatmap\"", "kind = \"flatmap\"\nselectivty = 2"),
            line: 10,
            field: "operator[0].selectivty",
            message: "unknown field: unknown field `selectivty`",
            help: "remove the field or correct its spelling",
        },
        Case {
            name: "unknown top-level table",
            spec: format!("{VALID}\n[[operators]]\nname = \"x\"\n"),
            line: 32,
            field: "operators[0]",
            message: "unknown field `operators`",
            help: "remove the field",
        },
        Case {
            name: "wrong value type",
            spec: edit("stateful = true", "stateful = \"yes\""),
            line: 14,
            field: "operator[1].stateful",
            message: "invalid TOML",
            help: "value's type",
        },
        Case {
            name: "invalid TOML syntax",
            spec: edit("name = \"out\"", "name = \"out"),
            line: 18,
            field: "sink[0].name",
            message: "invalid TOML",
            help: "fix the TOML syntax",
        },
        Case {
            name: "bad service mode",
            spec: edit(
                "kind = \"flatmap\"",
                "kind = \"flatmap\"\nservice_time_us = 4\nservice_mode = \"nap\"",
            ),
            line: 11,
            field: "operator[0].service_mode",
            message: "`nap` is not one of: spin, sleep",
            help: "use one of: spin, sleep",
        },
        Case {
            name: "operator without a name",
            spec: edit("name = \"split\"\n", ""),
            line: 7,
            field: "operator[0].name",
            message: "missing required field `name`",
            help: "add `name = ...`",
        },
        Case {
            name: "name with spaces",
            spec: edit("name = \"split\"", "name = \"sp lit\""),
            line: 8,
            field: "operator[0].name",
            message: "invalid name `sp lit`",
            help: "letters, digits",
        },
        Case {
            name: "stream missing its target",
            spec: edit("to = \"out\"\n", ""),
            line: 28,
            field: "stream[2].to",
            message: "missing required field `to`",
            help: "add `to = ...`",
        },
        Case {
            name: "duplicate stream",
            spec: format!("{VALID}\n[[stream]]\nfrom = \"split\"\nto = \"count\"\n"),
            line: 32,
            field: "stream[3]",
            message: "the stream `split` -> `count` is declared twice",
            help: "delete one",
        },
        Case {
            name: "sink that receives nothing",
            spec: format!("{VALID}\n[[sink]]\nname = \"unused\"\n"),
            line: 32,
            field: "sink[1]",
            message: "sink `unused` receives no stream",
            help: "connect it",
        },
        Case {
            name: "no sources",
            spec: VALID
                .replace("[[source]]\nname = \"lines\"\n", "")
                .replace("[[stream]]\nfrom = \"lines\"\nto = \"split\"\n", ""),
            line: 1,
            field: "source",
            message: "the spec declares no [[source]]",
            help: "declare at least one",
        },
    ]
}

#[test]
fn the_valid_fixture_is_valid() {
    let p = parse(VALID, "wc.toml").unwrap();
    assert_eq!(p.operators.len(), 2);
}

#[test]
fn each_malformed_spec_gets_its_own_clear_error() {
    let cases = cases();
    assert!(cases.len() >= 15);
    let mut failures = Vec::new();
    for c in &cases {
        match parse(&c.spec, "bad.toml") {
            Ok(_) => failures.push(format!("{}: accepted", c.name)),
            Err(e) => {
                let text = e.to_string();
                let ok = e.file == "bad.toml"
                    && e.line == c.line
                    && e.field == c.field
                    && text.contains(c.message)
                    && e.help.contains(c.help)
                    && text.starts_with(&format!("bad.toml:{}:", c.line));
                if !ok {
                    failures.push(format!(
                        "{}: got line {} field `{}`:\n{text}",
                        c.name, e.line, e.field
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n---\n"));
}

#[test]
fn problems_are_distinct_variants() {
    let kinds: std::collections::HashSet<String> = cases()
        .iter()
        .map(|c| {
            let p = parse(&c.spec, "bad.toml").unwrap_err().problem;
            let name = format!("{p:?}");
            name.split(['(', ' ', '{']).next().unwrap().to_owned()
        })
        .collect();
    assert!(kinds.len() >= 15, "{kinds:?}");
    assert!(kinds.contains("Cycle") && kinds.contains("Unreachable"));
    let _ = Problem::Empty("x");
}

#[test]
fn no_input_panics() {
    // Seeded mutations of the valid spec: truncations, byte flips, insertions.
    let mut rng = SeededRng::seed_from_u64(42);
    let bytes = VALID.as_bytes();
    for _ in 0..3000 {
        let mut b = bytes.to_vec();
        match rng.random_range(0..3) {
            0 => b.truncate(rng.random_range(0..b.len() as u64) as usize),
            1 => {
                let i = rng.random_range(0..b.len() as u64) as usize;
                b[i] = b"[]=\"\n#.-x0 {},"[rng.random_range(0..14) as usize];
            }
            _ => {
                let i = rng.random_range(0..b.len() as u64) as usize;
                b.splice(i..i, b"\n[[stream]]\nfrom=\"count\"\nto=\"lines\"\n".iter().copied());
            }
        }
        let text = String::from_utf8_lossy(&b);
        let _ = parse(&text, "fuzz.toml");
    }
}

#[test]
fn a_source_feeding_a_stateful_operator_needs_a_key_field() {
    let spec = format!("{VALID}\n[[stream]]\nfrom = \"lines\"\nto = \"count\"\n");
    let e = parse(&spec, "bad.toml").unwrap_err();
    assert_eq!((e.line, e.field.as_str()), (4, "source[0].key_field"));
    assert!(e.to_string().contains("feeds stateful operator `count` but declares no `key_field`"));
    let keyed = spec.replace("name = \"lines\"", "name = \"lines\"\nkey_field = 1");
    let p = parse(&keyed, "ok.toml").unwrap();
    assert_eq!(p.sources[0].key_of(b"a,b ,c"), b"b ");
    assert_eq!(p.sources[0].key_of(b"  x  y z"), b"y");
    assert_eq!(p.sources[0].key_of(b"x"), b"");
}
