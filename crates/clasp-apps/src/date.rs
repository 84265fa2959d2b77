//! UTC date-times as the taxi data and the Intel-lab trace write them, `YYYY-MM-DD HH:MM:SS`,
//! to and from Unix seconds. The calendar (days per month, leap years, the epoch) is jiff's.

use crate::text::{fields, parse_u64, trim};
use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::Offset;

/// Seconds since the Unix epoch of `YYYY-MM-DD HH:MM:SS` (UTC, surrounding whitespace
/// allowed); `None` for any other shape or a date or time that does not exist.
pub fn parse_utc(b: &[u8]) -> Option<i64> {
    let [date, time] = fields::<2>(trim(b), b' ')?;
    let [y, mo, d] = fields::<3>(date, b'-')?;
    let [h, mi, s] = fields::<3>(time, b':')?;
    if [y.len(), mo.len(), d.len(), h.len(), mi.len(), s.len()] != [4, 2, 2, 2, 2, 2] {
        return None;
    }
    let two = |f: &[u8]| parse_u64(f).and_then(|v| i8::try_from(v).ok());
    let year = parse_u64(y).and_then(|v| i16::try_from(v).ok())?;
    let dt = DateTime::new(year, two(mo)?, two(d)?, two(h)?, two(mi)?, two(s)?, 0).ok()?;
    Offset::UTC.to_timestamp(dt).ok().map(Timestamp::as_second)
}

/// `YYYY-MM-DD HH:MM:SS` of a Unix time (UTC), clamped to the years jiff represents
/// (-9999 to 9999).
pub fn format_utc(unix: i64) -> String {
    let unix = unix.clamp(Timestamp::MIN.as_second(), Timestamp::MAX.as_second());
    let ts = Timestamp::from_second(unix).unwrap_or(Timestamp::UNIX_EPOCH);
    Offset::UTC.to_datetime(ts).strftime("%Y-%m-%d %H:%M:%S").to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Days since the epoch by counting years and months, the definition the library must meet.
    fn counted(y: i64, m: i64, d: i64, secs: i64) -> i64 {
        let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
        let mut days: i64 = (1970..y).map(|y| if leap(y) { 366 } else { 365 }).sum();
        let months = [31, if leap(y) { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
        days += months[..(m - 1) as usize].iter().sum::<i64>() + d - 1;
        days * 86_400 + secs
    }

    #[test]
    fn parses_and_formats_as_the_calendar_counts() {
        for (text, (y, m, d, secs)) in [
            ("1970-01-01 00:00:00", (1970, 1, 1, 0)),
            ("2000-02-29 23:59:59", (2000, 2, 29, 86_399)),
            ("2004-03-01 00:00:31", (2004, 3, 1, 31)),
            ("2013-01-01 12:00:00", (2013, 1, 1, 43_200)),
            ("2024-12-31 01:02:03", (2024, 12, 31, 3723)),
        ] {
            let unix = counted(y, m, d, secs);
            assert_eq!(parse_utc(text.as_bytes()), Some(unix), "{text}");
            assert_eq!(format_utc(unix), text);
        }
        assert_eq!(parse_utc(b" 2013-01-01 12:00:00\n"), Some(1_357_041_600));
    }

    #[test]
    fn rejects_other_shapes_and_dates_that_do_not_exist() {
        for bad in [
            "2013-13-01 00:00:00",
            "2013-02-29 00:00:00",
            "2013-04-31 00:00:00",
            "2013-01-01 24:00:00",
            "2013-01-01 00:60:00",
            "2013-01-01T00:00:00",
            "2013-1-01 00:00:00",
            "2013-01-01 00:00",
            "2013-01-01  00:00:00",
            "+013-01-01 00:00:00",
            "",
        ] {
            assert_eq!(parse_utc(bad.as_bytes()), None, "{bad}");
        }
    }
}
