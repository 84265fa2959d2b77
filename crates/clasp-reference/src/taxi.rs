//! The taxi workflows w1–w3: ride and fare lines split on commas, dates by counting days
//! (independently of the date library the operators use), sliding windows per grid cell from
//! the counts of all their events.

use crate::numbers::{fixed, show};
use crate::{Outcome, Params};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

/// A TaxiRide line, parsed independently of the operators.
#[derive(Clone, Debug)]
struct RideRow {
    id: String,
    start_event: bool,
    start: i64,
    end: i64,
    /// µ°: start lon, start lat, end lon, end lat.
    at: [i64; 4],
    passengers: u64,
}

/// Unix seconds of `YYYY-MM-DD HH:MM:SS`, by counting days.
pub(crate) fn unix_time(s: &str) -> Option<i64> {
    let (date, time) = s.trim().split_once(' ')?;
    let number = |x: &str| -> Option<i64> {
        x.bytes().all(|c| c.is_ascii_digit()).then(|| x.parse().ok()).flatten()
    };
    let d: Vec<i64> = date.split('-').map(number).collect::<Option<_>>()?;
    let t: Vec<i64> = time.split(':').map(number).collect::<Option<_>>()?;
    if d.len() != 3 || t.len() != 3 || date.len() != 10 || time.len() != 8 {
        return None;
    }
    let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let year_days = |y: i64| if leap(y) { 366 } else { 365 };
    let months = [31, if leap(d[0]) { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if !(1..=12).contains(&d[1]) || d[2] < 1 || d[2] > months[(d[1] - 1) as usize] {
        return None;
    }
    if t[0] > 23 || t[1] > 59 || t[2] > 59 {
        return None;
    }
    // Days since the epoch by counting: years, then months of the year.
    let mut days: i64 = if d[0] >= 1970 {
        (1970..d[0]).map(year_days).sum()
    } else {
        -(d[0]..1970).map(year_days).sum::<i64>()
    };
    days += months[..(d[1] - 1) as usize].iter().sum::<i64>() + d[2] - 1;
    Some(days * 86_400 + t[0] * 3600 + t[1] * 60 + t[2])
}

fn ride_row(l: &str) -> Option<RideRow> {
    let f: Vec<&str> = l.split(',').map(str::trim).collect();
    if f.len() != 11 || f[0].parse::<u64>().is_err() || f[0].starts_with('+') {
        return None;
    }
    let start_event = match f[1] {
        "START" => true,
        "END" => false,
        _ => return None,
    };
    let c = |s: &str| fixed(s, 6);
    Some(RideRow {
        id: f[0].to_owned(),
        start_event,
        start: unix_time(f[2])?,
        end: unix_time(f[3])?,
        at: [c(f[4])?, c(f[5])?, c(f[6])?, c(f[7])?],
        passengers: if f[8].starts_with('+') { return None } else { f[8].parse().ok()? },
    })
}

fn in_nyc(lon: i64, lat: i64) -> bool {
    (-74_050_000..=-73_700_000).contains(&lon) && (40_500_000..=41_000_000).contains(&lat)
}

pub(crate) fn w1(lines: &[String], p: &Params<'_>, o: &mut Outcome) {
    let max_s = p.get("filter_duration", "max_duration_min", 120.0) as i64 * 60;
    for l in lines {
        let Some(r) = ride_row(l) else { continue };
        let d = r.end - r.start;
        if !r.start_event && in_nyc(r.at[0], r.at[1]) && d > 0 && d <= max_s {
            o.sink("kafka", r.id.clone(), l.clone());
        }
    }
}

fn fare_fields(l: &str) -> Option<(String, String, i64, i64, i64)> {
    let f: Vec<&str> = l.split(',').map(str::trim).collect();
    if f.len() != 8
        || f[0].parse::<u64>().is_err()
        || f[0].starts_with('+')
        || unix_time(f[3]).is_none()
    {
        return None;
    }
    Some((f[0].to_owned(), f[4].to_owned(), fixed(f[5], 2)?, fixed(f[6], 2)?, fixed(f[7], 2)?))
}

pub(crate) fn w2(rides: &[String], fares: &[String], p: &Params<'_>, o: &mut Outcome) {
    let from = p.get("filter_night", "night_start_h", 20.0) as i64;
    let to = p.get("filter_night", "night_end_h", 6.0) as i64;
    let night = |t: i64| {
        let h = t.rem_euclid(86_400) / 3600;
        if from <= to { h >= from && h < to } else { h >= from || h < to }
    };
    let mut kept_rides: BTreeMap<String, String> = BTreeMap::new();
    for l in rides {
        let Some(r) = ride_row(l) else { continue };
        let zero = |i: usize| r.at[i] == 0 && r.at[i + 1] == 0;
        let wellformed = r.start_event && r.passengers > 0 && !zero(0) && !zero(2);
        if wellformed && in_nyc(r.at[0], r.at[1]) && in_nyc(r.at[2], r.at[3]) && night(r.start) {
            kept_rides.insert(r.id, l.clone());
        }
    }
    let mut kept_fares: BTreeMap<String, String> = BTreeMap::new();
    for l in fares {
        let Some((id, pay, tip, tolls, total)) = fare_fields(l) else { continue };
        if total > 0 && tip >= 0 && tolls >= 0 {
            let v = format!("{pay},{},{},{}", show(tip, 2), show(tolls, 2), show(total, 2));
            kept_fares.insert(id, v);
        }
    }
    let ids: BTreeSet<&String> = kept_rides.keys().chain(kept_fares.keys()).collect();
    for id in ids {
        match (kept_rides.get(id), kept_fares.get(id)) {
            (Some(r), Some(f)) => o.sink("kafka", id.clone(), format!("{r},{f}")),
            (r, f) => o.set_state("join", id, json!({"ride": r, "fare": f})),
        }
    }
}

/// Every sliding window of every cell, from the counts of all its events per pane: each
/// closes once the input ends, if not before, so all are emitted and no state is left.
pub(crate) fn w3(lines: &[String], p: &Params<'_>, o: &mut Outcome) {
    let slide = p.get("window", "slide_min", 5.0) as i64 * 60;
    let panes = p.get("window", "size_min", 15.0) as i64 * 60 / slide;
    let min = p.get("filter_popular", "min_count", 20.0) as u64;
    // (cell, pane) → (departures, arrivals).
    let mut counts: BTreeMap<(i64, i64), (u64, u64)> = BTreeMap::new();
    for l in lines {
        let Some(r) = ride_row(l) else { continue };
        if !(in_nyc(r.at[0], r.at[1]) && in_nyc(r.at[2], r.at[3])) {
            continue;
        }
        let (lon, lat, t) =
            if r.start_event { (r.at[0], r.at[1], r.start) } else { (r.at[2], r.at[3], r.end) };
        if t < 0 {
            continue;
        }
        let id = (lon + 74_050_000) / 1400 + (41_000_000 - lat) / 1250 * 250;
        let e = counts.entry((id, t / slide)).or_default();
        if r.start_event {
            e.0 += 1;
        } else {
            e.1 += 1;
        }
    }
    // A window is named by its last pane: every window holding a pane with events.
    let windows: BTreeSet<(i64, i64)> =
        counts.keys().flat_map(|&(id, p)| (p..p + panes).map(move |q| (id, q))).collect();
    for (id, q) in windows {
        let (dep, arr) = counts
            .range((id, q - panes + 1)..=(id, q))
            .fold((0, 0), |a, (_, n)| (a.0 + n.0, a.1 + n.1));
        let (lon_c, lat_c) =
            (-74_050_000 + (id % 250) * 1400 + 700, 41_000_000 - (id / 250) * 1250 - 625);
        for (n, dir) in [(dep, "departing"), (arr, "arriving")] {
            if n >= min && n > 0 {
                let v =
                    format!("{},{},{},{dir},{n}", show(lon_c, 6), show(lat_c, 6), (q + 1) * slide);
                o.sink("popular_areas", id.to_string(), v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_count_days_from_the_epoch() {
        assert_eq!(unix_time("1970-01-01 00:00:00"), Some(0));
        assert_eq!(unix_time("2013-01-01 12:00:00"), Some(1_357_041_600));
        assert_eq!(unix_time("2000-03-01 00:00:00"), Some(951_868_800));
        assert_eq!(unix_time("1969-12-31 23:59:59"), Some(-1));
        assert_eq!(unix_time("2013-13-01 00:00:00"), None);
        assert_eq!(unix_time("2013-02-29 00:00:00"), None);
        assert_eq!(unix_time("2012-02-29 00:00:60"), None);
        assert_eq!(unix_time("2013-+1-01 00:00:00"), None);
    }
}
