//! Bad config files and the messages they get; layering order; origins.

use super::file::ConfigFile;
use super::*;
use clap::{CommandFactory, Parser};
use std::path::Path;

fn root() -> Command {
    let mut root = crate::Cli::command();
    root.build();
    root
}

/// Layers `file_text` and `env` under `args` of `clasp run` and returns the final arguments.
fn layered(
    file_text: Option<&str>,
    env: &[(&str, &str)],
    args: &[&str],
) -> Result<(crate::cmd::run::Args, Vec<(Setting, Origin)>), String> {
    let root = root();
    let mut argv: Vec<OsString> = vec!["clasp".into(), "run".into(), "pipelines/wc.toml".into()];
    argv.extend(args.iter().map(OsString::from));
    let file = match file_text {
        Some(t) => Some(ConfigFile::parse(Path::new("clasp.toml"), t).map_err(|e| chain(&e))?),
        None => None,
    };
    let m = root.clone().try_get_matches_from(&argv).map_err(|e| e.to_string())?;
    let lookup = |k: &str| env.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string());
    let l = layer(&root, "run", argv, m.subcommand_matches("run").unwrap(), file.as_ref(), &lookup)
        .map_err(|e| chain(&e))?;
    let cli = crate::Cli::try_parse_from(&l.argv).map_err(|e| e.to_string())?;
    match cli.command {
        crate::Command::Run(a) => Ok((a, l.origins)),
        other => panic!("parsed as {other:?}"),
    }
}

fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text += &format!(": {c}");
        cause = c.source();
    }
    text
}

#[test]
fn bad_files_are_refused_with_where_and_why() {
    let cases: [(&str, &str, &[&str]); 12] = [
        (
            "[cluster]\nworkers = 2\nwokers = 3\n",
            "unknown key",
            &[
                "clasp.toml:3:1",
                "unknown setting `cluster.wokers`",
                "did you mean `cluster.workers`?",
            ],
        ),
        (
            "[policy]\nmax_workers = 4\n",
            "right key, wrong section",
            &["clasp.toml:2:1", "`policy.max_workers`", "did you mean `cluster.max_workers`?"],
        ),
        (
            "[clustre]\nworkers = 2\n",
            "unknown section",
            &["clasp.toml:2:1", "did you mean `cluster.workers`?"],
        ),
        (
            "[cluster]\nzzz = 1\n",
            "nothing close",
            &["clasp.toml:2:1", "unknown setting `cluster.zzz`"],
        ),
        (
            "[cluster]\nslots = \"ten\"\n",
            "wrong type",
            &["clasp.toml:2:1", "`cluster.slots`", "invalid value 'ten'", "invalid digit"],
        ),
        (
            "[cluster]\nprocesses = \"yes\"\n",
            "a switch given a string",
            &["clasp.toml:2:1", "`cluster.processes` must be a boolean, not a string or number"],
        ),
        (
            "[cluster]\nworkers = [1, 2]\n",
            "an array for one value",
            &["clasp.toml:2:1", "must be a single value, not an array"],
        ),
        (
            "[cluster]\nslots = 0\n",
            "out of range",
            &["clasp.toml:2:1", "invalid value '0'", "0 is not in 1.."],
        ),
        (
            "[cluster]\ninterval_ms = 5\n",
            "out of range",
            &["clasp.toml:2:1", "5 is not in 10..=60000"],
        ),
        (
            "[triggers]\nwarmup_time = \"soon\"\n",
            "a duration that is none",
            &["clasp.toml:2:1", "`triggers.warmup_time`", "`soon` is not a duration"],
        ),
        (
            "[input]\nduration = -3\n",
            "a negative duration",
            &["clasp.toml:2:1", "`input.duration`", "`-3` must be a positive duration"],
        ),
        (
            "workers = 3\n",
            "outside a section",
            &["clasp.toml:1:1", "`workers` is not in a section"],
        ),
    ];
    for (text, what, expected) in cases {
        let err = layered(Some(text), &[], &[]).expect_err(what);
        for e in expected {
            assert!(err.contains(e), "{what}: `{err}` lacks `{e}`");
        }
    }
    let err = layered(Some("[cluster\nworkers = 3\n"), &[], &[]).expect_err("syntax");
    assert!(err.starts_with("clasp.toml:1:"), "{err}");
}

#[test]
fn a_bad_environment_value_names_the_variable() {
    let err = layered(None, &[("CLASP_SLOTS", "many")], &[]).expect_err("bad env");
    assert!(err.contains("env CLASP_SLOTS") && err.contains("invalid value 'many'"), "{err}");
    let err = layered(None, &[("CLASP_PROCESSES", "perhaps")], &[]).expect_err("bad switch");
    assert!(err.contains("CLASP_PROCESSES") && err.contains("true or false"), "{err}");
}

#[test]
fn flags_beat_the_environment_which_beats_the_file_which_beats_defaults() {
    let file = "[cluster]\nworkers = 2\nslots = 4\nmax_workers = 7\nprocesses = true\n\n[input]\ninput = [\"gen:10\"]\n\n[log]\nformat = \"json\"\n";
    let env = [("CLASP_SLOTS", "5"), ("CLASP_MAX_WORKERS", "8")];
    let (a, origins) = layered(Some(file), &env, &["--max-workers", "9"]).unwrap();
    assert_eq!((a.workers, a.slots, a.max_workers, a.processes), (2, 5, 9, true));
    assert_eq!(a.input, vec!["gen:10".to_string()]);
    assert_eq!(a.batch, 256, "a default stays");
    let origin = |key: &str| origins.iter().find(|(s, _)| s.key == key).unwrap().1.clone();
    let at = |line| Origin::File { path: "clasp.toml".into(), line };
    assert_eq!(origin("cluster.workers"), at(2));
    assert_eq!(origin("cluster.slots"), Origin::Env("CLASP_SLOTS".into()));
    assert_eq!(origin("cluster.max_workers"), Origin::Flag);
    assert_eq!(origin("cluster.batch"), Origin::Default);
    assert_eq!(origin("log.format"), at(11));
}

#[test]
fn every_flag_of_the_configured_commands_has_a_unique_key_and_variable() {
    let root = root();
    for sub in CONFIGURED {
        let s = settings(&root, sub);
        let cmd = root.find_subcommand(sub).unwrap();
        let flags = cmd
            .get_arguments()
            .filter(|a| a.get_long().is_some_and(|l| !["help", "version", "config"].contains(&l)))
            .count();
        assert_eq!(s.len(), flags, "{sub}: a flag without a help heading is not a setting");
        let mut keys: Vec<&str> = s.iter().map(|s| s.key.as_str()).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), s.len(), "{sub}: two flags share a key");
    }
    let keys = known_keys(&root);
    for k in ["cluster.workers", "admin.address", "admin.no_admin", "log.format", "worker.join"] {
        assert!(keys.iter().any(|x| x == k), "{k} missing from {keys:?}");
    }
}
