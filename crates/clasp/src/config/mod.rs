//! Layered settings: defaults < config file (`--config FILE` or `CLASP_CONFIG`) < `CLASP_*`
//! environment < flags.
//!
//! Every flag of `run`, `planner` and `worker` with a help heading is a setting; nothing else
//! lists them. Its key in the file is `[heading] name`: the heading in lower case and the long
//! flag without a leading `heading-`, dashes as underscores (`--max-workers` under Cluster is
//! `cluster.max_workers`, `--log-format` under Logging is `logging.format`); its environment
//! variable is `CLASP_` and the long flag in upper case (`CLASP_MAX_WORKERS`). Adding a flag with
//! a heading adds the setting.
//!
//! File and environment values are checked by the flag's own parser before use, so a wrong type
//! or an out-of-range value is reported with the file and line (or the variable) it came from.

pub mod file;
pub mod print;

use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches, Command};
use file::{ConfigFile, Entry, FileValue};
use std::ffi::OsString;
use std::path::PathBuf;

/// The subcommands whose flags are settings.
pub const CONFIGURED: [&str; 3] = ["run", "planner", "worker"];

/// Where a setting's value came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// The flag's default (or unset).
    Default,
    /// The config file, at a line.
    File {
        /// The file.
        path: PathBuf,
        /// The line of the key.
        line: usize,
    },
    /// An environment variable.
    Env(String),
    /// The command line.
    Flag,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Default => write!(f, "default"),
            Self::File { path, line } => write!(f, "file {}:{line}", path.display()),
            Self::Env(var) => write!(f, "env {var}"),
            Self::Flag => write!(f, "flag"),
        }
    }
}

/// A flag's complaint about a value, as clap words it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Rejected(String);

impl Rejected {
    fn of(e: &clap::Error) -> Self {
        let text = e.render().to_string();
        let first = text.lines().next().unwrap_or_default();
        Self(first.trim_start_matches("error: ").to_string())
    }
}

/// Why the settings could not be put together.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("config file {}: cannot read it", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("{}:{line}:{col}: {message}", path.display())]
    Syntax {
        /// The file.
        path: PathBuf,
        /// Line.
        line: usize,
        /// Column.
        col: usize,
        /// The parser's message.
        message: String,
    },
    /// A key outside a section.
    #[error("{}:{line}:{col}: `{key}` is not in a section; settings go under [cluster], [policy], ... (see docs/config.md)", path.display())]
    NotInSection {
        /// The file.
        path: PathBuf,
        /// Line.
        line: usize,
        /// Column.
        col: usize,
        /// The key.
        key: String,
    },
    /// A key no command knows.
    #[error("{}:{line}:{col}: unknown setting `{key}`{}", path.display(), suggestion.as_ref().map_or_else(String::new, |s| format!("; did you mean `{s}`?")))]
    UnknownKey {
        /// The file.
        path: PathBuf,
        /// Line.
        line: usize,
        /// Column.
        col: usize,
        /// The key.
        key: String,
        /// The closest known key.
        suggestion: Option<String>,
    },
    /// A value of the wrong TOML type.
    #[error("{}:{line}:{col}: `{key}` must be {expected}, not {found}", path.display())]
    Type {
        /// The file.
        path: PathBuf,
        /// Line.
        line: usize,
        /// Column.
        col: usize,
        /// The key.
        key: String,
        /// What it takes.
        expected: &'static str,
        /// What it got.
        found: &'static str,
    },
    /// A value the flag's parser refuses (wrong type, out of range).
    #[error("{origin}: `{key}` = `{value}`")]
    Value {
        /// Where it came from (`FILE:LINE:COL` or `env VAR`).
        origin: String,
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// What the flag's parser said.
        #[source]
        source: Rejected,
    },
}

/// How a flag takes values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A switch (`--processes`): a boolean.
    Switch,
    /// One value.
    One,
    /// Repeatable (`--input`): an array.
    Many,
}

/// One setting: a flag of a subcommand.
#[derive(Clone, Debug)]
pub struct Setting {
    /// `section.key`.
    pub key: String,
    /// `CLASP_...`.
    pub env: String,
    /// The clap id.
    pub id: String,
    /// The long flag.
    pub long: String,
    /// How it takes values.
    pub kind: Kind,
}

fn section_of(heading: &str) -> String {
    heading.to_lowercase().replace([' ', '-'], "_")
}

/// The settings of subcommand `sub` of `root` (built, so global flags are included).
pub fn settings(root: &Command, sub: &str) -> Vec<Setting> {
    let Some(cmd) = root.find_subcommand(sub) else { return Vec::new() };
    cmd.get_arguments()
        .filter_map(|a| {
            let heading = a.get_help_heading()?;
            let long = a.get_long()?;
            let section = section_of(heading);
            let name = long.strip_prefix(&format!("{section}-")).unwrap_or(long).replace('-', "_");
            let kind = match a.get_action() {
                ArgAction::SetTrue => Kind::Switch,
                ArgAction::Append => Kind::Many,
                _ => Kind::One,
            };
            Some(Setting {
                key: format!("{section}.{name}"),
                env: format!("CLASP_{}", long.to_uppercase().replace('-', "_")),
                id: a.get_id().to_string(),
                long: long.to_string(),
                kind,
            })
        })
        .collect()
}

/// Every key any configured subcommand takes.
pub fn known_keys(root: &Command) -> Vec<String> {
    let mut keys: Vec<String> =
        CONFIGURED.iter().flat_map(|s| settings(root, s)).map(|s| s.key).collect();
    keys.sort();
    keys.dedup();
    keys
}

/// The closest of `known` to `key`, if close enough to be a likely typo.
pub fn suggest(key: &str, known: &[String]) -> Option<String> {
    let (section, name) = key.split_once('.').unwrap_or(("", key));
    known
        .iter()
        .map(|k| {
            let (ks, kn) = k.split_once('.').unwrap_or(("", k));
            // A right name in the wrong section is as likely as a typo.
            let score = strsim::jaro_winkler(key, k).max(if kn == name {
                0.9 + 0.01 * strsim::jaro_winkler(section, ks)
            } else {
                0.0
            });
            (score, k)
        })
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k.clone())
}

/// The flags to add for one value of `s`, checked by its parser. `origin` names where the value
/// came from, for messages.
fn flags_for(
    root: &Command,
    sub: &str,
    s: &Setting,
    values: &[String],
    origin: &str,
) -> Result<Vec<OsString>, ConfigError> {
    let cmd = root.find_subcommand(sub).expect("a configured subcommand");
    let arg = cmd.get_arguments().find(|a| a.get_id() == s.id.as_str()).expect("its own flag");
    let mut out = Vec::new();
    for v in values {
        if s.kind == Kind::Switch {
            if v == "true" {
                out.push(format!("--{}", s.long).into());
            }
            continue;
        }
        // The flag's own parser, run on the value alone.
        let check = Command::new("clasp")
            .no_binary_name(true)
            .disable_help_flag(true)
            .arg(arg.clone().required(false).global(false));
        let flag = format!("--{}={v}", s.long);
        if let Err(e) = check.try_get_matches_from([flag.as_str()]) {
            return Err(ConfigError::Value {
                origin: origin.into(),
                key: s.key.clone(),
                value: v.clone(),
                source: Rejected::of(&e),
            });
        }
        out.push(flag.into());
    }
    Ok(out)
}

/// A switch's value from the environment.
fn env_switch(var: &str, v: &str) -> Result<String, ConfigError> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok("true".into()),
        "0" | "false" | "no" | "off" | "" => Ok("false".into()),
        _ => Err(ConfigError::Value {
            origin: format!("env {var}"),
            key: var.into(),
            value: v.into(),
            source: Rejected("expected true or false".into()),
        }),
    }
}

/// A file entry's values for `s`.
fn file_values(f: &ConfigFile, e: &Entry, s: &Setting) -> Result<Vec<String>, ConfigError> {
    let wrong = |expected: &'static str| ConfigError::Type {
        path: f.path.clone(),
        line: e.line,
        col: e.col,
        key: e.key.clone(),
        expected,
        found: file::type_name(&e.value),
    };
    match (&e.value, s.kind) {
        (FileValue::Bool(b), Kind::Switch) => Ok(vec![b.to_string()]),
        (_, Kind::Switch) => Err(wrong("a boolean")),
        (FileValue::List(v), Kind::Many) => Ok(v.clone()),
        (FileValue::Scalar(v), _) => Ok(vec![v.clone()]),
        (FileValue::List(_), Kind::One) => Err(wrong("a single value")),
        (FileValue::Bool(b), _) => Ok(vec![b.to_string()]),
    }
}

/// The command line with the file's and the environment's settings added, and each setting's
/// origin.
#[derive(Debug)]
pub struct Layered {
    /// Arguments to parse.
    pub argv: Vec<OsString>,
    /// Origin of every setting, by clap id.
    pub origins: Vec<(Setting, Origin)>,
}

/// Adds the file's and the environment's settings for subcommand `sub` to `argv`, whose first
/// parse is `matches` (the subcommand's matches). `env` looks variables up.
pub fn layer(
    root: &Command,
    sub: &str,
    argv: Vec<OsString>,
    matches: &ArgMatches,
    config: Option<&ConfigFile>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Layered, ConfigError> {
    if let Some(f) = config {
        let known = known_keys(root);
        if let Some(e) = f.entries.iter().find(|e| !known.contains(&e.key)) {
            return Err(ConfigError::UnknownKey {
                path: f.path.clone(),
                line: e.line,
                col: e.col,
                key: e.key.clone(),
                suggestion: suggest(&e.key, &known),
            });
        }
    }
    let mut added = Vec::new();
    let mut origins = Vec::new();
    for s in settings(root, sub) {
        if matches.value_source(&s.id) == Some(ValueSource::CommandLine) {
            origins.push((s, Origin::Flag));
            continue;
        }
        if let Some(v) = env(&s.env) {
            let values = match s.kind {
                Kind::Switch => vec![env_switch(&s.env, &v)?],
                _ => vec![v],
            };
            added.extend(flags_for(root, sub, &s, &values, &format!("env {}", s.env))?);
            origins.push((s.clone(), Origin::Env(s.env.clone())));
            continue;
        }
        let entry = config.and_then(|f| f.entries.iter().find(|e| e.key == s.key).map(|e| (f, e)));
        if let Some((f, e)) = entry {
            let values = file_values(f, e, &s)?;
            let at = format!("{}:{}:{}", f.path.display(), e.line, e.col);
            added.extend(flags_for(root, sub, &s, &values, &at)?);
            origins.push((s, Origin::File { path: f.path.clone(), line: e.line }));
            continue;
        }
        origins.push((s, Origin::Default));
    }
    let mut argv = argv;
    let at = argv.iter().position(|a| a == "--").unwrap_or(argv.len());
    argv.splice(at..at, added);
    Ok(Layered { argv, origins })
}

/// The config file named by `--config` in `argv` or by `CLASP_CONFIG`, read.
pub fn config_file(
    flag: Option<&PathBuf>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<ConfigFile>, ConfigError> {
    let path = flag.cloned().or_else(|| env("CLASP_CONFIG").map(PathBuf::from));
    path.map(|p| ConfigFile::read(&p)).transpose()
}

#[cfg(test)]
mod tests;
