//! Durations on the command line: seconds as a plain number (`30`, `2.5`), or a number with a
//! unit as humantime reads it (`500ms`, `30s`, `2m`, `1h 30m`).

use std::time::Duration;

/// Why a command-line duration was refused.
#[derive(Debug, thiserror::Error)]
pub enum DurationError {
    /// Neither a number of seconds nor a duration with units.
    #[error(
        "`{text}` is not a duration; give seconds (30, 2.5) or a number with a unit (500ms, 30s, 2m, 1h)"
    )]
    Syntax {
        /// The text given.
        text: String,
        /// What humantime found wrong with it.
        #[source]
        source: humantime::DurationError,
    },
    /// Zero, negative or not finite.
    #[error("`{text}` must be a positive duration")]
    NotPositive {
        /// The text given.
        text: String,
    },
    /// Longer than any setting needs (and than a deadline computed from it could hold).
    #[error("`{text}` is longer than the longest allowed, 30 days")]
    TooLong {
        /// The text given.
        text: String,
    },
}

/// A duration that may be zero (`0`, `0s`: the setting is off).
pub fn parse_or_zero(text: &str) -> Result<Duration, DurationError> {
    let zero = text.trim().trim_end_matches(|c: char| c.is_ascii_alphabetic()).trim();
    if zero.parse::<f64>() == Ok(0.0) {
        return Ok(Duration::ZERO);
    }
    parse(text)
}

/// A positive duration.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let s = text.trim();
    let d = match s.parse::<f64>() {
        Ok(secs) if secs.is_finite() && secs > 0.0 => Some(
            Duration::try_from_secs_f64(secs)
                .map_err(|_| DurationError::TooLong { text: text.to_owned() })?,
        ),
        Ok(_) => None,
        Err(_) => Some(
            humantime::parse_duration(s)
                .map_err(|source| DurationError::Syntax { text: text.to_owned(), source })?,
        ),
    };
    let d = d
        .filter(|d| !d.is_zero())
        .ok_or_else(|| DurationError::NotPositive { text: text.to_owned() })?;
    if d > super::bounds::MAX_DURATION {
        return Err(DurationError::TooLong { text: text.to_owned() });
    }
    Ok(d)
}

/// A positive duration in seconds.
pub fn seconds(text: &str) -> Result<f64, DurationError> {
    parse(text).map(|d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn numbers_are_seconds_and_units_are_read() {
        for (text, ms) in [
            ("30", 30_000),
            ("2.5", 2_500),
            ("500ms", 500),
            ("30s", 30_000),
            ("2m", 120_000),
            ("2min", 120_000),
            ("1h 30m", 5_400_000),
            (" 45s ", 45_000),
        ] {
            assert_eq!(parse(text).unwrap(), Duration::from_millis(ms), "{text}");
        }
        assert_eq!(seconds("1m").unwrap(), 60.0);
    }

    #[test]
    fn refusals_say_why_and_keep_the_cause() {
        for text in ["0", "-3", "0s", "inf", "NaN"] {
            let e = parse(text).unwrap_err();
            assert!(matches!(e, DurationError::NotPositive { .. }), "{text}: {e:?}");
        }
        for text in ["1e300", "31days", "2592001"] {
            let e = parse(text).unwrap_err();
            assert!(matches!(e, DurationError::TooLong { .. }), "{text}: {e:?}");
        }
        assert_eq!(parse("2592000").unwrap(), super::super::bounds::MAX_DURATION);
        for text in ["soon", "5 parsecs", "", "1.5.2s"] {
            let e = parse(text).unwrap_err();
            assert!(matches!(e, DurationError::Syntax { .. }), "{text}: {e:?}");
            assert!(e.to_string().contains("not a duration") && e.source().is_some(), "{e}");
        }
    }
}
