//! Every kind of bad devices file gets its own clear error: file, line, field, problem and help.

use clasp_core::spec;
use clasp_plan::edgecut::devices::{self, Problem};

const PIPELINE: &str = r#"[pipeline]
name = "two"
[[source]]
name = "rides"
rate = 10
[[source]]
name = "fares"
[[operator]]
name = "f"
kind = "filter"
[[operator]]
name = "m"
kind = "map"
[[operator]]
name = "j"
kind = "connect"
stateful = true
key = "id"
[[stream]]
from = "rides"
to = "f"
[[stream]]
from = "f"
to = "j"
[[stream]]
from = "fares"
to = "m"
[[stream]]
from = "m"
to = "j"
"#;

const VALID: &str = r#"pipeline = "two"

[cloud]
sources = ["fares"]

[[device]]
id = "a"
sources = ["rides"]
link_cost = 2

[[device]]
id = "b"
sources = ["rides"]
kinds = ["filter", "map"]
functions = ["taxi.*"]
max_operators = 3
max_load = 100
"#;

struct Case {
    name: &'static str,
    text: String,
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
            name: "unknown source",
            text: edit("sources = [\"rides\"]\nlink_cost", "sources = [\"ride\"]\nlink_cost"),
            line: 8,
            field: "device[0].sources[0]",
            message: "the pipeline has no source `ride`",
            help: "did you mean `rides`?",
        },
        Case {
            name: "negative link cost",
            text: edit("link_cost = 2", "link_cost = -0.5"),
            line: 9,
            field: "device[0].link_cost",
            message: "the value -0.5 must be a finite number >= 0",
            help: "zero or positive",
        },
        Case {
            name: "non-finite link cost",
            text: edit("link_cost = 2", "link_cost = inf"),
            line: 9,
            field: "device[0].link_cost",
            message: "the value inf must be a finite number >= 0",
            help: "zero or positive",
        },
        Case {
            name: "duplicate device id",
            text: edit("id = \"b\"", "id = \"a\""),
            line: 12,
            field: "device[1].id",
            message: "the device id `a` is already used on line 7",
            help: "distinct `id`",
        },
        Case {
            name: "unknown field",
            text: edit("link_cost = 2", "link_cots = 2"),
            line: 9,
            field: "device[0].link_cots",
            message: "unknown field `link_cots`",
            help: "correct its spelling (see docs/devices-format.md)",
        },
        Case {
            name: "source without raw data",
            text: edit("sources = [\"fares\"]", "sources = []"),
            line: 3,
            field: "cloud.sources",
            message: "source `fares` of pipeline `two` has no raw data anywhere",
            help: "add `fares` to the `sources` of the devices holding its data",
        },
        Case {
            name: "source on devices and in the cloud",
            text: edit("sources = [\"fares\"]", "sources = [\"fares\", \"rides\"]"),
            line: 4,
            field: "cloud.sources[1]",
            message: "source `rides` is held by devices and by the cloud",
            help: "remove one of the two",
        },
        Case {
            name: "another pipeline",
            text: edit("pipeline = \"two\"", "pipeline = \"taxi-w1\""),
            line: 1,
            field: "pipeline",
            message: "the devices are for pipeline `taxi-w1`, not `two`",
            help: "pass the devices file written for this pipeline",
        },
        Case {
            name: "no device",
            text: "[cloud]\nsources = [\"rides\", \"fares\"]\n".into(),
            line: 1,
            field: "device",
            message: "the file declares no [[device]]",
            help: "declare at least one [[device]]",
        },
        Case {
            name: "missing id",
            text: edit("id = \"b\"\n", ""),
            line: 11,
            field: "device[1].id",
            message: "missing required field `id`",
            help: "add `id = ...`",
        },
        Case {
            name: "bad id",
            text: edit("id = \"b\"", "id = \"b c\""),
            line: 12,
            field: "device[1].id",
            message: "invalid device id `b c`",
            help: "letters, digits",
        },
        Case {
            name: "missing sources",
            text: edit("sources = [\"rides\"]\nkinds", "kinds"),
            line: 11,
            field: "device[1].sources",
            message: "missing required field `sources`",
            help: "add `sources = ...`",
        },
        Case {
            name: "empty sources",
            text: edit("sources = [\"rides\"]\nkinds", "sources = []\nkinds"),
            line: 13,
            field: "device[1].sources",
            message: "device `b` lists no source",
            help: "list the sources whose raw data the device holds",
        },
        Case {
            name: "source listed twice",
            text: edit(
                "sources = [\"rides\"]\nlink_cost",
                "sources = [\"rides\", \"rides\"]\nlink_cost",
            ),
            line: 8,
            field: "device[0].sources[1]",
            message: "source `rides` is listed twice",
            help: "list every source once",
        },
        Case {
            name: "unknown kind",
            text: edit("\"filter\", \"map\"", "\"filter\", \"mapp\""),
            line: 14,
            field: "device[1].kinds[1]",
            message: "unknown operator kind `mapp`",
            help: "use one of: map, flatmap",
        },
        Case {
            name: "kind no device runs",
            text: edit("\"filter\", \"map\"", "\"filter\", \"window\""),
            line: 14,
            field: "device[1].kinds[1]",
            message: "kind `window` is not locally replicable, so no device runs it",
            help: "devices run only locally replicable kinds (map, flatmap, filter",
        },
        Case {
            name: "empty function pattern",
            text: edit("[\"taxi.*\"]", "[\"\"]"),
            line: 15,
            field: "device[1].functions[0]",
            message: "an empty function pattern",
            help: "`*` alone matches all",
        },
        Case {
            name: "negative budget",
            text: edit("max_operators = 3", "max_operators = -1"),
            line: 16,
            field: "device[1].max_operators",
            message: "the value -1 must be a finite number >= 0",
            help: "zero or positive",
        },
        Case {
            name: "negative load",
            text: edit("max_load = 100", "max_load = -100"),
            line: 17,
            field: "device[1].max_load",
            message: "the value -100 must be a finite number >= 0",
            help: "zero or positive",
        },
        Case {
            name: "wrong type",
            text: edit("link_cost = 2", "link_cost = \"cheap\""),
            line: 9,
            field: "device[0].link_cost",
            message: "invalid TOML",
            help: "value's type",
        },
    ]
}

#[test]
fn the_valid_file_parses() {
    let p = spec::parse(PIPELINE, "two.toml").unwrap();
    let d = devices::parse(VALID, "dev.toml", &p).unwrap();
    assert_eq!(d.devices.len(), 2);
    assert_eq!((d.devices[0].link_cost, d.devices[1].link_cost), (2.0, 1.0));
    assert_eq!(d.devices[1].constraint.max_operators, Some(3));
    assert_eq!(d.cloud_sources, vec![p.source_id("fares").unwrap()]);
    assert_eq!(d.share(p.source_id("rides").unwrap()), 0.5);
    assert_eq!(d.devices[1].line, 12);
}

#[test]
fn every_bad_file_gets_a_located_error_with_help() {
    let p = spec::parse(PIPELINE, "two.toml").unwrap();
    for c in cases() {
        let e = devices::parse(&c.text, "dev.toml", &p)
            .err()
            .unwrap_or_else(|| panic!("{}: accepted:\n{}", c.name, c.text));
        let shown = e.to_string();
        assert_eq!((e.line, e.field.as_str()), (c.line, c.field), "{}: {shown}", c.name);
        assert!(shown.starts_with(&format!("dev.toml:{}:", c.line)), "{}: {shown}", c.name);
        assert!(shown.contains(c.message), "{}: {shown}", c.name);
        assert!(e.help.contains(c.help), "{}: help was {:?}", c.name, e.help);
    }
}

#[test]
fn a_missing_file_is_an_io_error() {
    let p = spec::parse(PIPELINE, "two.toml").unwrap();
    let e = devices::load(std::path::Path::new("/nonexistent/devices.toml"), &p).unwrap_err();
    assert!(matches!(e.problem, Problem::Io(_)));
    assert!(e.to_string().contains("/nonexistent/devices.toml"));
}

#[test]
fn arbitrary_input_never_panics() {
    let p = spec::parse(PIPELINE, "two.toml").unwrap();
    let bytes = VALID.as_bytes();
    for cut in 0..bytes.len() {
        let text = String::from_utf8_lossy(&bytes[..cut]);
        let _ = devices::parse(&text, "fuzz.toml", &p);
    }
}

#[test]
fn parsing_once_for_several_pipelines_gives_each_ones_verdict() {
    let p = spec::parse(PIPELINE, "two.toml").unwrap();
    let other =
        spec::parse(&PIPELINE.replace("name = \"two\"", "name = \"other\""), "o.toml").unwrap();
    let texts: Vec<String> =
        std::iter::once(VALID.to_string()).chain(cases().into_iter().map(|c| c.text)).collect();
    for text in &texts {
        let each = devices::parse_each(text, "dev.toml", &[&p, &other]);
        let alone = [&p, &other].map(|q| devices::parse(text, "dev.toml", q));
        let shown = |r: &Result<devices::Devices, devices::DevicesError>| match r {
            Ok(d) => format!("{d:?}"),
            Err(e) => e.to_string(),
        };
        match each {
            Ok(verdicts) => {
                let got: Vec<String> = verdicts.iter().map(shown).collect();
                let want: Vec<String> = alone.iter().map(shown).collect();
                assert_eq!(got, want, "{text}");
            }
            // A syntax error is both pipelines' error.
            Err(e) => {
                for a in &alone {
                    assert_eq!(a.as_ref().err().map(ToString::to_string), Some(e.to_string()));
                }
            }
        }
    }
    // The other pipeline refuses the file that names `two`.
    let verdicts = devices::parse_each(VALID, "dev.toml", &[&p, &other]).unwrap();
    assert!(verdicts[0].is_ok() && verdicts[1].is_err());
}
