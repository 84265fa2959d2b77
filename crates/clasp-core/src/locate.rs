//! Where in a TOML file a problem is, and did-you-mean suggestions: shared by every file
//! format clasp reads (pipeline specs, device files).

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;

/// A file format's catalogue of problems, as a [`FileError`] reports them.
pub trait FileProblem: fmt::Display + fmt::Debug {
    /// The file could not be read.
    fn io(message: String) -> Self;
    /// Not valid TOML, a value of the wrong type (`unknown: false`), or a field the format
    /// does not have (`unknown: true`).
    fn syntax(message: String, unknown: bool) -> Self;
    /// What to do about it.
    fn help(&self) -> String;
}

/// A problem in a TOML file, located by line, column and field path, with a help line.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{file}:{line}:{column}: in `{field}`: {problem}\n  help: {help}")]
pub struct FileError<P: FileProblem> {
    /// The file.
    pub file: String,
    /// 1-based line (0 when the file could not be read).
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// The field concerned, as a path (`operator[2].kind`, `device[0].link_cost`).
    pub field: String,
    /// What is wrong.
    pub problem: P,
    /// What to do.
    pub help: String,
}

impl<P: FileProblem> FileError<P> {
    /// `problem` at the start of `span` in `text`.
    pub fn at(
        text: &str,
        file: &str,
        span: Range<usize>,
        field: impl Into<String>,
        problem: P,
    ) -> Self {
        let (line, column) = line_col(text, span.start);
        Self { file: file.into(), line, column, field: field.into(), help: problem.help(), problem }
    }

    /// What the TOML parser rejected.
    pub fn syntax(text: &str, file: &str, e: &toml::de::Error) -> Self {
        let message = e.message().trim().to_string();
        let span = e.span().unwrap_or(0..0);
        let field = field_path_at(text, span.start);
        let unknown = message.starts_with("unknown field");
        Self::at(text, file, span, field, P::syntax(message, unknown))
    }
}

/// Largest file of a format read (bytes): a spec of 20,000 operators is about 1.5 MB.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// The text of `path`, refused beyond [`MAX_FILE_BYTES`] (`/dev/zero` is not read forever).
fn read_bounded(path: &std::path::Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut text = String::new();
    std::fs::File::open(path)?.take(MAX_FILE_BYTES + 1).read_to_string(&mut text)?;
    if text.len() as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("the file is larger than {} MiB", MAX_FILE_BYTES >> 20),
        ));
    }
    Ok(text)
}

/// Reads the file at `path` (at most [`MAX_FILE_BYTES`]) and hands its text and name to
/// `parse`.
pub fn read_then<T, P: FileProblem>(
    path: &std::path::Path,
    parse: impl FnOnce(&str, &str) -> Result<T, FileError<P>>,
) -> Result<T, FileError<P>> {
    let file = path.display().to_string();
    match read_bounded(path) {
        Ok(text) => parse(&text, &file),
        Err(e) => {
            let problem = P::io(e.to_string());
            Err(FileError {
                file,
                line: 0,
                column: 0,
                field: "<file>".into(),
                help: problem.help(),
                problem,
            })
        }
    }
}

/// Line starts of a text, so that the line of any offset is found in logarithmic time
/// (validating a file names the line of each of its items: linear in the file's size).
#[derive(Clone, Debug)]
pub struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    /// The index of `text`.
    pub fn new(text: &str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.bytes().enumerate().filter(|&(_, b)| b == b'\n').map(|(i, _)| i + 1))
            .collect();
        Self { starts }
    }

    /// 1-based line of byte `offset` (as [`line_col`] gives it).
    pub fn line(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset)
    }
}

/// 1-based line and column of byte `offset`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text.as_bytes()[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let column = offset - before.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1) + 1;
    (line, column)
}

/// Best-effort field path for a syntax error: the enclosing table header and the key on the line.
pub fn field_path_at(text: &str, offset: usize) -> String {
    let offset = floor_char_boundary(text, offset.min(text.len()));
    let line_start = text[..offset].rfind('\n').map_or(0, |p| p + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |p| offset + p);
    let mut table = String::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for line in text[..line_end].lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("[[").and_then(|r| r.split("]]").next()) {
            let name = name.trim().to_string();
            let i = index.entry(name.clone()).and_modify(|i| *i += 1).or_insert(0);
            table = format!("{name}[{i}]");
        } else if let Some(name) = t.strip_prefix('[').and_then(|r| r.split(']').next()) {
            table = name.trim().to_string();
        }
    }
    let key = text[line_start..line_end]
        .split('=')
        .next()
        .map(str::trim)
        .filter(|k| !k.is_empty() && !k.starts_with('[') && !k.starts_with('#'))
        .unwrap_or("");
    match (table.is_empty(), key.is_empty()) {
        (true, true) => "<document>".into(),
        (true, false) => key.into(),
        (false, true) => table,
        (false, false) => format!("{table}.{key}"),
    }
}

pub fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The known name closest to `name` by edit distance, if it is close enough to be a typo.
pub fn closest<'a>(name: &str, known: impl Iterator<Item = &'a String>) -> Option<String> {
    known
        .map(|k| (strsim::levenshtein(name, k), k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 3))
        .min()
        .map(|(_, k)| k.clone())
}

#[cfg(test)]
mod line_index_tests {
    use super::*;

    #[test]
    fn the_index_gives_the_lines_line_col_gives() {
        let text = "a\nbc\n\nd\n";
        let index = LineIndex::new(text);
        for offset in 0..=text.len() + 2 {
            assert_eq!(index.line(offset), line_col(text, offset).0, "offset {offset}");
        }
    }

    #[test]
    fn an_endless_file_is_refused_after_the_limit() {
        let err = read_bounded(std::path::Path::new("/dev/zero")).unwrap_err();
        assert!(err.to_string().contains("larger than 16 MiB"), "{err}");
    }
}
