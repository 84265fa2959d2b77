//! The effective settings as TOML, each with its origin.

use super::file::ConfigFile;
use super::{ConfigError, Origin, layer};
use clap::Command;
use std::ffi::OsString;

/// A value as TOML: numbers and booleans bare, everything else quoted.
fn toml_value(raw: &str) -> String {
    let bare = raw.parse::<f64>().is_ok_and(f64::is_finite) || raw == "true" || raw == "false";
    if bare { raw.to_string() } else { toml::Value::String(raw.to_string()).to_string() }
}

/// The effective settings of `sub` given `args`, the file and the environment, grouped by
/// section, as `key = value  # origin` lines (unset settings commented out).
pub fn effective(
    root: &Command,
    sub: &str,
    args: &[OsString],
    file: Option<&ConfigFile>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, PrintError> {
    let mut argv: Vec<OsString> = vec!["clasp".into(), sub.into()];
    argv.extend(args.iter().cloned());
    let first = root.clone().try_get_matches_from(&argv)?;
    let sub_matches = first.subcommand_matches(sub).expect("the subcommand was given");
    let layered = layer(root, sub, argv, sub_matches, file, env)?;
    let last = root.clone().try_get_matches_from(&layered.argv)?;
    let m = last.subcommand_matches(sub).expect("the subcommand was given");
    let mut out = format!("# effective settings of `clasp {sub}`\n");
    let mut sections: Vec<&str> = Vec::new();
    for (s, _) in &layered.origins {
        let sec = s.key.split_once('.').expect("section.key").0;
        if !sections.contains(&sec) {
            sections.push(sec);
        }
    }
    let in_order = sections.iter().flat_map(|sec| {
        layered.origins.iter().filter(move |(s, _)| s.key.starts_with(&format!("{sec}.")))
    });
    let mut section = "";
    for (s, origin) in in_order {
        let (sec, key) = s.key.split_once('.').expect("section.key");
        if sec != section {
            out += &format!("\n[{sec}]\n");
            section = sec;
        }
        let values: Vec<String> = m
            .get_raw(&s.id)
            .map(|v| v.map(|x| x.to_string_lossy().into_owned()).collect())
            .unwrap_or_default();
        let line = match (values.as_slice(), s.kind) {
            ([], _) => format!("# {key} = (unset)"),
            (v, super::Kind::Many) => {
                let items: Vec<String> = v.iter().map(|x| toml_value(x)).collect();
                format!("{key} = [{}]", items.join(", "))
            }
            ([v], _) => format!("{key} = {}", toml_value(v)),
            (v, _) => format!("{key} = {}", toml_value(v.last().expect("a value"))),
        };
        let origin = match origin {
            Origin::Default if values.is_empty() => String::new(),
            o => o.to_string(),
        };
        out += &if origin.is_empty() { line + "\n" } else { format!("{line:<48} # {origin}\n") };
    }
    Ok(out)
}

/// Why the settings could not be printed.
#[derive(Debug, thiserror::Error)]
pub enum PrintError {
    /// The arguments do not parse.
    #[error("the arguments of the command")]
    Args(#[from] clap::Error),
    /// The file or the environment holds a bad setting.
    #[error(transparent)]
    Config(#[from] ConfigError),
}
