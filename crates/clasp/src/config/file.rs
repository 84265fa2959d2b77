//! Reading `clasp.toml`: every `section.key = value` with the line and column it is on (from
//! the `toml` crate's spans), values as the strings a flag would take.

use super::ConfigError;
use std::path::{Path, PathBuf};
use toml::de::{DeTable, DeValue};

/// A value as written in the file.
#[derive(Clone, Debug, PartialEq)]
pub enum FileValue {
    /// A string, number or date, as the text a flag takes.
    Scalar(String),
    /// `true` or `false`.
    Bool(bool),
    /// An array of scalars.
    List(Vec<String>),
}

/// One `section.key = value` of the file.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// `section.key`.
    pub key: String,
    /// The value.
    pub value: FileValue,
    /// Where the key is: line and column, from 1.
    pub line: usize,
    /// Column.
    pub col: usize,
}

/// A config file's entries.
#[derive(Clone, Debug, PartialEq)]
pub struct ConfigFile {
    /// Where it was read from.
    pub path: PathBuf,
    /// Its settings, in file order.
    pub entries: Vec<Entry>,
}

/// Line and column (from 1) of byte `offset` in `text`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(before.len(), |nl| before.len() - nl - 1) + 1;
    (line, col)
}

fn scalar(v: &DeValue<'_>) -> Option<String> {
    match v {
        DeValue::String(s) => Some(s.to_string()),
        DeValue::Integer(i) => {
            let digits = i.as_str().replace('_', "");
            let (sign, digits) = match digits.strip_prefix('-') {
                Some(d) => ("-", d.to_string()),
                None => ("", digits.trim_start_matches('+').to_string()),
            };
            let body = match i.radix() {
                10 => digits,
                _ => {
                    digits.trim_start_matches(['0']).trim_start_matches(['x', 'o', 'b']).to_string()
                }
            };
            match u64::from_str_radix(&body, i.radix()) {
                Ok(n) => Some(format!("{sign}{n}")),
                Err(_) => Some(format!("{sign}{body}")),
            }
        }
        DeValue::Float(f) => Some(f.as_str().replace('_', "")),
        DeValue::Datetime(d) => Some(d.to_string()),
        DeValue::Boolean(b) => Some(b.to_string()),
        DeValue::Array(_) | DeValue::Table(_) => None,
    }
}

/// What a TOML value is, for messages.
pub fn type_name(v: &FileValue) -> &'static str {
    match v {
        FileValue::Scalar(_) => "a string or number",
        FileValue::Bool(_) => "a boolean",
        FileValue::List(_) => "an array",
    }
}

impl ConfigFile {
    /// Reads and parses `path`.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.to_path_buf(), source })?;
        Self::parse(path, &text)
    }

    /// Parses `text`, read from `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ConfigError> {
        let at = |offset: usize| {
            let (line, col) = line_col(text, offset);
            (path.to_path_buf(), line, col)
        };
        let table = DeTable::parse(text).map_err(|e| {
            let (path, line, col) = at(e.span().map_or(0, |s| s.start));
            ConfigError::Syntax { path, line, col, message: e.message().trim().to_string() }
        })?;
        let mut entries = Vec::new();
        for (section, value) in table.get_ref() {
            let DeValue::Table(keys) = value.get_ref() else {
                let (path, line, col) = at(section.span().start);
                return Err(ConfigError::NotInSection {
                    path,
                    line,
                    col,
                    key: section.get_ref().to_string(),
                });
            };
            for (key, value) in keys {
                let name = format!("{}.{}", section.get_ref(), key.get_ref());
                let (path, line, col) = at(key.span().start);
                let value = match value.get_ref() {
                    DeValue::Boolean(b) => FileValue::Bool(*b),
                    DeValue::Array(items) => {
                        let mut list = Vec::new();
                        for item in items.iter() {
                            list.push(scalar(item.get_ref()).ok_or_else(|| ConfigError::Type {
                                path: path.clone(),
                                line,
                                col,
                                key: name.clone(),
                                expected: "an array of strings or numbers",
                                found: "an array holding arrays or tables",
                            })?);
                        }
                        FileValue::List(list)
                    }
                    DeValue::Table(_) => {
                        return Err(ConfigError::Type {
                            path,
                            line,
                            col,
                            key: name,
                            expected: "a value",
                            found: "a table (sections hold keys, not further tables)",
                        });
                    }
                    other => FileValue::Scalar(scalar(other).expect("a scalar")),
                };
                entries.push(Entry { key: name, value, line, col });
            }
        }
        entries.sort_by_key(|e| (e.line, e.col));
        Ok(Self { path: path.to_path_buf(), entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_carry_their_line_and_plain_values() {
        let text = "[cluster]\nworkers = 3\nslots = 1_000\n\n[input]\ninput = [\"gen:10\", \"x=file:a\"]\nrate = 2.5e3\nquiet = true\n";
        let f = ConfigFile::parse(Path::new("c.toml"), text).unwrap();
        let got: Vec<(&str, &FileValue, usize, usize)> =
            f.entries.iter().map(|e| (e.key.as_str(), &e.value, e.line, e.col)).collect();
        assert_eq!(
            got,
            vec![
                ("cluster.workers", &FileValue::Scalar("3".into()), 2, 1),
                ("cluster.slots", &FileValue::Scalar("1000".into()), 3, 1),
                ("input.input", &FileValue::List(vec!["gen:10".into(), "x=file:a".into()]), 6, 1),
                ("input.rate", &FileValue::Scalar("2.5e3".into()), 7, 1),
                ("input.quiet", &FileValue::Bool(true), 8, 1),
            ]
        );
    }

    #[test]
    fn line_and_column_count_from_one() {
        assert_eq!(line_col("ab\ncd", 0), (1, 1));
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
    }
}
