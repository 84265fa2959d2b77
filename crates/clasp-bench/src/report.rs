//! What an experiment produces: named tables (written as CSV and as a markdown table) and
//! notes, gathered into one markdown report per experiment; with its charts, an [`Output`].

use crate::BenchError;
use crate::plot::Chart;
use std::fmt::Write as _;
use std::path::Path;

/// A table of results.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// File stem and title.
    pub name: String,
    /// Column headers (with units).
    pub columns: Vec<String>,
    /// Rows of formatted cells.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table.
    pub fn new(name: &str, columns: &[&str]) -> Self {
        Self {
            name: name.into(),
            columns: columns.iter().map(|c| (*c).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (one cell per column; missing cells are left empty, extra ones dropped).
    pub fn row(&mut self, mut cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.columns.len());
        cells.resize(self.columns.len(), String::new());
        self.rows.push(cells);
    }

    /// Writes the table as CSV (the `csv` crate quotes what needs quoting).
    pub fn write_csv<W: std::io::Write>(&self, out: W) -> Result<(), csv::Error> {
        let mut w =
            csv::WriterBuilder::new().terminator(csv::Terminator::Any(b'\n')).from_writer(out);
        w.write_record(&self.columns)?;
        for r in &self.rows {
            w.write_record(r)?;
        }
        w.flush()?;
        Ok(())
    }

    /// The table as CSV text.
    pub fn csv(&self) -> String {
        let mut bytes = Vec::new();
        // Writing into memory fails only for a row whose length differs from the header's,
        // which `row` rules out.
        if self.write_csv(&mut bytes).is_err() {
            bytes.clear();
        }
        String::from_utf8(bytes).unwrap_or_default()
    }

    /// The table in markdown.
    pub fn markdown(&self) -> String {
        let mut out = format!(
            "| {} |\n|{}|\n",
            self.columns.join(" | "),
            vec!["---"; self.columns.len()].join("|")
        );
        for r in &self.rows {
            let _ = writeln!(out, "| {} |", r.join(" | "));
        }
        out
    }
}

/// An experiment's results.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Experiment name.
    pub title: String,
    /// How it was run (engine, scale, emulation), printed first.
    pub setup: Vec<String>,
    /// Result tables.
    pub tables: Vec<Table>,
    /// Observations and comparisons with the paper.
    pub notes: Vec<String>,
}

impl Report {
    /// The whole report as markdown.
    pub fn markdown(&self) -> String {
        let mut out = format!("# {}\n\n", self.title);
        for s in &self.setup {
            let _ = writeln!(out, "- {s}");
        }
        for t in &self.tables {
            let _ = write!(out, "\n## {}\n\n{}", t.name, t.markdown());
        }
        if !self.notes.is_empty() {
            out.push('\n');
            for n in &self.notes {
                let _ = writeln!(out, "{n}\n");
            }
        }
        out
    }

    /// Writes `<table>.csv` per table and `<stem>.md` into `dir`.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<Vec<String>, BenchError> {
        let io = |path: &Path| {
            let path = path.display().to_string();
            move |source| BenchError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let mut written = Vec::new();
        for t in &self.tables {
            let p = dir.join(format!("{}.csv", t.name));
            let file = std::fs::File::create(&p).map_err(io(&p))?;
            t.write_csv(std::io::BufWriter::new(file))
                .map_err(|source| BenchError::Csv { path: p.display().to_string(), source })?;
            written.push(p.display().to_string());
        }
        let p = dir.join(format!("{stem}.md"));
        std::fs::write(&p, self.markdown()).map_err(io(&p))?;
        written.push(p.display().to_string());
        Ok(written)
    }
}

/// A report and its charts: everything one experiment writes.
#[derive(Clone, Debug, Default)]
pub struct Output {
    /// Tables and notes.
    pub report: Report,
    /// Charts, written as `<name>.png` beside the tables.
    pub charts: Vec<Chart>,
}

impl From<Report> for Output {
    fn from(report: Report) -> Self {
        Self { report, charts: Vec::new() }
    }
}

impl Output {
    /// The report as markdown, each chart linked at the end.
    pub fn markdown(&self) -> String {
        let mut out = self.report.markdown();
        if !self.charts.is_empty() {
            out.push_str("\n## Charts\n\n");
            for c in &self.charts {
                let _ = writeln!(out, "![{}]({}.png)\n", c.title, c.name);
            }
        }
        out
    }

    /// Writes `<table>.csv` per table, `<chart>.png` per chart and `<stem>.md` into `dir`;
    /// returns the paths written.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<Vec<String>, BenchError> {
        let mut written = self.report.write(dir, stem)?;
        for c in &self.charts {
            written.push(c.write(dir)?);
        }
        let p = dir.join(format!("{stem}.md"));
        std::fs::write(&p, self.markdown())
            .map_err(|source| BenchError::Io { path: p.display().to_string(), source })?;
        Ok(written)
    }
}

/// A number with `decimals` decimals (`-` for NaN).
pub fn num(x: f64, decimals: usize) -> String {
    if x.is_finite() { format!("{x:.decimals$}") } else { "-".to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_what_needs_it_and_reads_back_cell_for_cell() {
        let mut t = Table::new("t", &["app", "value (\"x\")"]);
        t.row(vec!["a,b".into(), "1".into()]);
        t.row(vec!["line\nbreak".into(), "-".into()]);
        assert_eq!(
            t.markdown(),
            "| app | value (\"x\") |\n|---|---|\n| a,b | 1 |\n| line\nbreak | - |\n"
        );
        let text = t.csv();
        assert!(text.starts_with("app,\"value (\"\"x\"\")\"\n\"a,b\",1\n"), "{text}");
        let mut r = csv::Reader::from_reader(text.as_bytes());
        let header: Vec<String> = r.headers().unwrap().iter().map(str::to_owned).collect();
        assert_eq!(header, t.columns);
        let rows: Vec<Vec<String>> =
            r.records().map(|x| x.unwrap().iter().map(str::to_owned).collect()).collect();
        assert_eq!(rows, t.rows);
    }

    #[test]
    fn an_output_writes_tables_charts_and_markdown() {
        let mut t = Table::new("rows", &["app", "throughput (req/s)"]);
        t.row(vec!["wc".into(), num(1234.567, 1)]);
        t.row(vec!["sd".into(), num(f64::NAN, 1)]);
        let report = Report {
            title: "demo".into(),
            setup: vec!["engine sim".into()],
            tables: vec![t],
            notes: vec!["a note".into()],
        };
        let chart = Chart::bars("Demo chart", "app", "req/s")
            .categories(&["wc"])
            .series(crate::plot::Series::new("clasp", vec![1.0]));
        let out = Output { report, charts: vec![chart] };
        let dir = std::env::temp_dir().join(format!("clasp-bench-output-{}", std::process::id()));
        let written = out.write(&dir, "demo").unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| Path::new(p).file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["rows.csv", "demo.md", "demo-chart.png"]);
        let csv = std::fs::read_to_string(dir.join("rows.csv")).unwrap();
        assert_eq!(csv, "app,throughput (req/s)\nwc,1234.6\nsd,-\n");
        let md = std::fs::read_to_string(dir.join("demo.md")).unwrap();
        assert!(md.starts_with("# demo\n\n- engine sim\n\n## rows\n"), "{md}");
        assert!(md.contains("| wc | 1234.6 |") && md.contains("a note"), "{md}");
        assert!(md.ends_with("![Demo chart](demo-chart.png)\n\n"), "{md}");
        assert_eq!(&std::fs::read(dir.join("demo-chart.png")).unwrap()[..4], b"\x89PNG");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
