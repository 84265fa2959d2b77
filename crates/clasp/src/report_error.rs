//! An error and its causes as one line for the terminal.
//!
//! Library errors name their cause in their own message (so a log line with `{e}` is whole)
//! and also keep it as their `#[source]` (so callers can inspect it); anyhow's `{:#}` prints
//! both and a cause would appear twice. This prints each cause once.

/// `e`, then each cause its message does not already contain, joined by ": ".
pub fn chain(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::chain;
    use anyhow::Context;

    /// Names its cause in its message and keeps it as its source, as clasp's errors do.
    #[derive(Debug, thiserror::Error)]
    #[error("cannot read certificate {path}: {source}")]
    struct Certificate {
        path: String,
        #[source]
        source: std::io::Error,
    }

    /// Keeps its cause as its source without naming it.
    #[derive(Debug, thiserror::Error)]
    #[error("the TLS configuration is unusable")]
    struct Unusable(#[source] Certificate);

    fn not_found() -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::NotFound, "no such file")
    }

    #[test]
    fn a_cause_the_message_already_names_is_printed_once() {
        let e = Err::<(), _>(Certificate { path: "/c.pem".into(), source: not_found() })
            .context("--tls-cert")
            .unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            "--tls-cert: cannot read certificate /c.pem: no such file: no such file"
        );
        assert_eq!(chain(&e), "--tls-cert: cannot read certificate /c.pem: no such file");
    }

    #[test]
    fn a_cause_the_message_does_not_name_is_kept() {
        let inner = Certificate { path: "/c.pem".into(), source: not_found() };
        let e = anyhow::Error::new(Unusable(inner)).context("starting the worker");
        assert_eq!(
            chain(&e),
            "starting the worker: the TLS configuration is unusable: cannot read certificate /c.pem: no such file"
        );
    }
}
