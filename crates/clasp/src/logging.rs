//! Logging: text or JSON lines on stderr, colour only on a terminal.

use anyhow::{Context, Result};
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

/// `--log-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// The logging flags (every command).
#[derive(Debug, clap::Args)]
pub struct LogArgs {
    /// Log line format: text or json.
    #[arg(long, global = true, value_enum, default_value = "text", help_heading = "Log")]
    pub log_format: LogFormat,
    /// What to log: a level (error, warn, info, debug, trace) or per-module directives such
    /// as `clasp_runtime=info`; default `CLASP_LOG`, else warn.
    #[arg(long, global = true, value_parser = parse_filter, help_heading = "Log")]
    pub log_level: Option<String>,
}

fn parse_filter(s: &str) -> Result<String, String> {
    EnvFilter::try_new(s).map(|_| s.to_string()).map_err(|e| format!("not a log filter: {e}"))
}

impl LogArgs {
    /// Installs the subscriber.
    pub fn init(&self) -> Result<()> {
        let directives = match &self.log_level {
            Some(l) => l.clone(),
            None => std::env::var("CLASP_LOG").unwrap_or_else(|_| "warn".into()),
        };
        let filter = EnvFilter::try_new(&directives)
            .with_context(|| format!("log filter `{directives}` (CLASP_LOG or --log-level)"))?;
        let builder =
            tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
        match self.log_format {
            LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
            LogFormat::Json => builder.json().with_ansi(false).init(),
        }
        Ok(())
    }
}
