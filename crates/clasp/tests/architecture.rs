//! The crate graph of docs/architecture.md, checked against the manifests: deciding
//! (`clasp-plan`) stays apart from doing (`clasp-runtime`, `clasp-sim`), and
//! `clasp-reference` is never part of the binary.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

/// Each workspace crate and the clasp crates it may depend on (normal dependencies).
const ALLOWED: &[(&str, &[&str])] = &[
    ("clasp-core", &[]),
    ("clasp-plan", &["clasp-core"]),
    ("clasp-wire", &["clasp-core"]),
    ("clasp-apps", &["clasp-core"]),
    ("clasp-reference", &["clasp-core", "clasp-apps"]),
    ("clasp-runtime", &["clasp-core", "clasp-plan", "clasp-wire"]),
    ("clasp-sim", &["clasp-core", "clasp-plan"]),
    ("clasp-admin", &["clasp-core", "clasp-runtime", "clasp-wire"]),
    ("clasp-kafka", &["clasp-core", "clasp-runtime"]),
    ("clasp-fuzz", &["clasp-core", "clasp-plan", "clasp-wire", "clasp-apps"]),
    (
        "clasp-edge",
        &["clasp-core", "clasp-plan", "clasp-wire", "clasp-runtime", "clasp-apps", "clasp-kafka"],
    ),
    (
        "clasp-bench",
        &[
            "clasp-core",
            "clasp-plan",
            "clasp-wire",
            "clasp-runtime",
            "clasp-sim",
            "clasp-apps",
            "clasp-edge",
            "clasp-admin",
            "clasp-kafka",
        ],
    ),
    (
        "clasp",
        &[
            "clasp-core",
            "clasp-plan",
            "clasp-wire",
            "clasp-runtime",
            "clasp-sim",
            "clasp-apps",
            "clasp-edge",
            "clasp-bench",
            "clasp-admin",
            "clasp-kafka",
        ],
    ),
];

/// The clasp crates each manifest names under `[dependencies]`.
fn dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let crates = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let manifest = entry.unwrap().path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else { continue };
        let doc: toml::Table = text.parse().unwrap_or_else(|e| panic!("{manifest:?}: {e}"));
        let name = doc["package"]["name"].as_str().unwrap().to_owned();
        let deps = doc
            .get("dependencies")
            .and_then(toml::Value::as_table)
            .map(|t| t.keys().filter(|k| k.starts_with("clasp")).cloned().collect())
            .unwrap_or_default();
        graph.insert(name, deps);
    }
    graph
}

#[test]
fn crates_depend_only_on_what_the_architecture_allows() {
    let graph = dependencies();
    let allowed: BTreeMap<&str, BTreeSet<&str>> =
        ALLOWED.iter().map(|(c, d)| (*c, d.iter().copied().collect())).collect();
    assert!(graph.len() >= 10, "found only {graph:?}");
    for (name, deps) in &graph {
        let Some(ok) = allowed.get(name.as_str()) else {
            panic!("crate {name} is not in docs/architecture.md's table (and this test's)");
        };
        for d in deps {
            assert!(
                ok.contains(d.as_str()),
                "{name} depends on {d}, which the architecture forbids"
            );
        }
    }
}

#[test]
fn the_reference_is_never_a_normal_dependency() {
    for (name, deps) in dependencies() {
        if name != "clasp-reference" {
            assert!(!deps.contains("clasp-reference"), "{name} ships clasp-reference");
        }
    }
}
