//! The Planner paper's taxi workflows (Fig. 4–6) over the Flink training exercises' NYC taxi
//! data.
//!
//! Input, as in the training's CSV files (times `YYYY-MM-DD HH:MM:SS`, UTC):
//! - TaxiRide: `rideId,START|END,startTime,endTime,startLon,startLat,endLon,endLat,
//!   passengerCnt,taxiId,driverId` (a START event's endTime is `1970-01-01 00:00:00`);
//! - TaxiFare: `rideId,taxiId,driverId,startTime,paymentType,tip,tolls,totalFare`.
//!
//! Both sources key their records by ride id ([`key`]). Coordinates are fixed-point
//! micro-degrees and amounts cents, so area tests and grid cells are exact.
//!
//! w1 (Fig. 4): `taxi.filter_start_nyc` keeps END events of rides that started in NYC (a
//! START event is a ride still under way: no statistics yet); `taxi.filter_duration` (param
//! `max_duration_min`, default 120, the training's "long ride" limit) keeps rides that took
//! more than 0 and at most that many minutes.
//!
//! w2 (Fig. 5): `taxi.filter_wellformed` keeps START events with non-zero coordinates and at
//! least one passenger; `taxi.filter_nyc` keeps rides starting and ending in NYC;
//! `taxi.filter_night` (params `night_start_h` 20, `night_end_h` 6) keeps rides starting at
//! night; `taxi.filter_fare` keeps fares with a positive total and non-negative tip and tolls;
//! `taxi.fare_fields` projects `paymentType,tip,tolls,totalFare`; `taxi.join_ride_fare`
//! (stateful by ride id; port 0 rides, port 1 fares) emits `<ride line>,<fare fields>` when
//! both sides of a ride are in, and forgets the ride.
//!
//! w3 (Fig. 6, the training's "popular places"): `taxi.filter_nyc`; `taxi.to_cell` maps a
//! START event to the grid cell where the taxi departed and an END event to where it arrived
//! (key = cell, value = `time,1|0`, 1 = departure); `taxi.popular_window` (stateful by cell;
//! params `size_min` 15, `slide_min` 5) counts departures and arrivals per cell in sliding
//! event-time windows and emits `window_end,1|0,count` for each non-zero count once the
//! watermark passes the window's end (plus the operator's `allowed_lateness`), by an
//! event-time timer; `taxi.filter_popular` (param `min_count` 20) keeps counts at or above it;
//! `taxi.to_area` emits `lon,lat,window_end,departing|arriving,count` with the cell's centre.
//! An event's time is its own (`taxi.time`: start for START, end for END), so the windows are
//! the same whatever the arrival order within the source's `out_of_orderness` and the worker
//! count; events later than that are counted as `late`.

mod generate;
mod join;
mod window;

pub use generate::{
    FareGenerator, RideGenerator, RideRecord, START_S, ride, write_fare, write_ride,
};
pub use join::{FareFields, FilterFare, JoinRideFare, Pending};
pub use window::{CellPanes, FilterPopular, PopularWindow, ToArea, ToCell};

use crate::date::parse_utc;
use crate::text::{Params, fields, parse_fixed, parse_u64, trim};
use clasp_core::{Batch, Context, Operator, Registry};

/// Decimals of coordinates (micro-degrees).
pub const COORD_DECIMALS: u32 = 6;
/// The training's NYC bounding box, micro-degrees.
pub const LON_WEST: i64 = -74_050_000;
/// East edge.
pub const LON_EAST: i64 = -73_700_000;
/// South edge.
pub const LAT_SOUTH: i64 = 40_500_000;
/// North edge.
pub const LAT_NORTH: i64 = 41_000_000;
/// Grid cell width (0.0014°) and height (0.00125°), micro-degrees, as the training's GeoUtils.
pub const CELL_LON: i64 = 1_400;
/// Grid cell height.
pub const CELL_LAT: i64 = 1_250;
/// Cells per grid row.
pub const GRID_X: i64 = 250;
/// Grid rows.
pub const GRID_Y: i64 = 400;

/// One TaxiRide event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ride {
    /// Ride id.
    pub ride_id: u64,
    /// START (true) or END event.
    pub is_start: bool,
    /// Start time, Unix seconds.
    pub start: i64,
    /// End time (0 in START events).
    pub end: i64,
    /// Start longitude, µ°.
    pub start_lon: i64,
    /// Start latitude, µ°.
    pub start_lat: i64,
    /// End longitude, µ°.
    pub end_lon: i64,
    /// End latitude, µ°.
    pub end_lat: i64,
    /// Passengers.
    pub passengers: u64,
}

impl Ride {
    /// The event's own time: start for START, end for END.
    pub fn event_time(&self) -> i64 {
        if self.is_start { self.start } else { self.end }
    }
}

/// Parses a TaxiRide line.
pub fn parse_ride(line: &[u8]) -> Result<Ride, &'static str> {
    let f = fields::<11>(line, b',').ok_or("wrong field count")?;
    let coord = |b: &[u8]| parse_fixed(trim(b), COORD_DECIMALS).ok_or("non-numeric coordinate");
    Ok(Ride {
        ride_id: parse_u64(trim(f[0])).ok_or("non-numeric rideId")?,
        is_start: match trim(f[1]) {
            b"START" => true,
            b"END" => false,
            _ => return Err("event type is not START or END"),
        },
        start: parse_utc(f[2]).ok_or("bad time")?,
        end: parse_utc(f[3]).ok_or("bad time")?,
        start_lon: coord(f[4])?,
        start_lat: coord(f[5])?,
        end_lon: coord(f[6])?,
        end_lat: coord(f[7])?,
        passengers: parse_u64(trim(f[8])).ok_or("non-numeric passengerCnt")?,
    })
}

/// A TaxiRide line's event time: its own time (start for START, end for END), Unix s; `None`
/// for a line that does not parse or a time before 1970.
pub fn ride_time(line: &[u8]) -> Option<u64> {
    parse_ride(line).ok().and_then(|r| u64::try_from(r.event_time()).ok())
}

/// Whether a point is inside the NYC box (edges included).
pub fn in_nyc(lon: i64, lat: i64) -> bool {
    (LON_WEST..=LON_EAST).contains(&lon) && (LAT_SOUTH..=LAT_NORTH).contains(&lat)
}

/// The grid cell of a point in NYC.
pub fn cell(lon: i64, lat: i64) -> i64 {
    let x = (lon - LON_WEST) / CELL_LON;
    let y = (LAT_NORTH - lat) / CELL_LAT;
    x + y * GRID_X
}

/// The centre of a grid cell, µ°.
pub fn cell_center(cell: i64) -> (i64, i64) {
    let (x, y) = (cell % GRID_X, cell / GRID_X);
    (LON_WEST + x * CELL_LON + CELL_LON / 2, LAT_NORTH - y * CELL_LAT - CELL_LAT / 2)
}

/// A filter over parsed rides; rejects lines that do not parse.
#[derive(Clone, Copy, Debug)]
pub struct RideFilter<F> {
    keep: F,
}

impl<F: Fn(&Ride) -> bool + Copy + Send + Sync + 'static> Operator for RideFilter<F> {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        for (r, time) in input.iter_timed() {
            match parse_ride(r.value) {
                Ok(ride) if (self.keep)(&ride) => ctx.emit_with(time, r.key, r.value),
                Ok(_) => {}
                Err(reason) => ctx.reject(reason),
            }
        }
    }
}

/// Whether a ride starts at night, `from_h` to `to_h` (wrapping past midnight).
pub fn at_night(start: i64, from_h: i64, to_h: i64) -> bool {
    let h = start.rem_euclid(86_400) / 3600;
    if from_h <= to_h { (from_h..to_h).contains(&h) } else { h >= from_h || h < to_h }
}

/// The fields of a TaxiFare line, amounts in cents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fare<'a> {
    /// `CSH`, `CRD`, …
    pub payment: &'a [u8],
    /// Tip.
    pub tip: i64,
    /// Tolls.
    pub tolls: i64,
    /// Total fare.
    pub total: i64,
}

/// Parses a TaxiFare line.
pub fn parse_fare(line: &[u8]) -> Result<Fare<'_>, &'static str> {
    let f = fields::<8>(line, b',').ok_or("wrong field count")?;
    parse_u64(trim(f[0])).ok_or("non-numeric rideId")?;
    parse_utc(f[3]).ok_or("bad time")?;
    let cents = |b: &[u8]| parse_fixed(trim(b), 2).ok_or("non-numeric amount");
    Ok(Fare { payment: trim(f[4]), tip: cents(f[5])?, tolls: cents(f[6])?, total: cents(f[7])? })
}

/// Registers the taxi functions.
pub fn register(r: &mut Registry) {
    use clasp_core::operator::erase;
    r.register_event_time("taxi.time", ride_time);
    r.register_operator(
        "taxi.filter_start_nyc",
        RideFilter { keep: |r: &Ride| !r.is_start && in_nyc(r.start_lon, r.start_lat) },
    );
    r.register("taxi.filter_duration", |spec| {
        let p = Params::new(spec, &["max_duration_min"])?;
        let max = p.positive("max_duration_min", 120)? as i64 * 60;
        Ok(erase(RideFilter {
            keep: move |r: &Ride| !r.is_start && r.end > r.start && r.end - r.start <= max,
        }))
    });
    r.register_operator(
        "taxi.filter_wellformed",
        RideFilter {
            keep: |r: &Ride| {
                let zero = |lon, lat| lon == 0 && lat == 0;
                r.is_start
                    && r.passengers > 0
                    && !zero(r.start_lon, r.start_lat)
                    && !zero(r.end_lon, r.end_lat)
            },
        },
    );
    r.register_operator(
        "taxi.filter_nyc",
        RideFilter {
            keep: |r: &Ride| in_nyc(r.start_lon, r.start_lat) && in_nyc(r.end_lon, r.end_lat),
        },
    );
    r.register("taxi.filter_night", |spec| {
        let p = Params::new(spec, &["night_start_h", "night_end_h"])?;
        let from = p.unsigned("night_start_h", 20)? as i64;
        let to = p.unsigned("night_end_h", 6)? as i64;
        if from > 23 || to > 24 {
            return Err("night hours must be within 0..24".into());
        }
        Ok(erase(RideFilter { keep: move |r: &Ride| at_night(r.start, from, to) }))
    });
    r.register_operator("taxi.filter_fare", FilterFare);
    r.register_operator("taxi.fare_fields", FareFields);
    r.register_operator("taxi.join_ride_fare", JoinRideFare);
    r.register_operator("taxi.to_cell", ToCell);
    r.register("taxi.popular_window", |spec| {
        let p = Params::new(spec, &["size_min", "slide_min"])?;
        let size = p.positive("size_min", 15)? as i64;
        let slide = p.positive("slide_min", 5)? as i64;
        if size % slide != 0 {
            return Err(format!("`size_min` ({size}) must be a multiple of `slide_min` ({slide})"));
        }
        Ok(erase(PopularWindow { slide: slide * 60, panes: size / slide }))
    });
    r.register("taxi.filter_popular", |spec| {
        let p = Params::new(spec, &["min_count"])?;
        Ok(erase(FilterPopular { min: p.positive("min_count", 20)? }))
    });
    r.register_operator("taxi.to_area", ToArea);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip() {
        assert_eq!(parse_utc(b"2013-01-01 12:00:00"), Some(START_S));
        assert!(at_night(START_S + 9 * 3600, 20, 6)); // 21:00
        assert!(!at_night(START_S, 20, 6)); // 12:00
        assert!(at_night(START_S + 17 * 3600, 20, 6)); // 05:00
    }

    #[test]
    fn grid_cells_follow_the_training_geo_utils() {
        assert_eq!(cell(LON_WEST, LAT_NORTH), 0);
        assert_eq!(cell(LON_WEST + CELL_LON, LAT_NORTH), 1);
        assert_eq!(cell(LON_WEST, LAT_NORTH - CELL_LAT), GRID_X);
        let c = cell(-73_985_100, 40_758_000);
        let (lon, lat) = cell_center(c);
        assert!(
            (lon - -73_985_100).abs() <= CELL_LON / 2 && (lat - 40_758_000).abs() <= CELL_LAT / 2
        );
    }
}
