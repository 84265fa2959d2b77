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
//! params `size_min` 15, `slide_min` 5, `lateness_min` = `slide_min`) counts departures and
//! arrivals per cell in sliding event-time windows and emits `window_end,1|0,count` for each
//! non-zero count once the cell has seen an event `lateness_min` after the window's end;
//! `taxi.filter_popular` (param `min_count` 20) keeps counts at or above it; `taxi.to_area`
//! emits `lon,lat,window_end,departing|arriving,count` with the cell's centre.

use crate::date::{format_utc, parse_utc};
use crate::text::{Buf, Params, emit_or_reject, fields, parse_fixed, parse_u64, trim};
use clasp_core::rng::SplitMix64;
use clasp_core::{Batch, Context, Operator, Registry};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

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
        for r in input.iter() {
            match parse_ride(r.value) {
                Ok(ride) if (self.keep)(&ride) => ctx.emit(r.key, r.value),
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

/// `taxi.filter_fare`.
#[derive(Clone, Copy, Debug, Default)]
pub struct FilterFare;

impl Operator for FilterFare {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        for r in input.iter() {
            match parse_fare(r.value) {
                Ok(f) if f.total > 0 && f.tip >= 0 && f.tolls >= 0 => ctx.emit(r.key, r.value),
                Ok(_) => {}
                Err(reason) => ctx.reject(reason),
            }
        }
    }
}

/// `taxi.fare_fields`.
#[derive(Clone, Copy, Debug, Default)]
pub struct FareFields;

impl Operator for FareFields {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        let mut out = Buf::new();
        for r in input.iter() {
            let f = match parse_fare(r.value) {
                Ok(f) => f,
                Err(reason) => {
                    ctx.reject(reason);
                    continue;
                }
            };
            out.clear();
            out.put(f.payment).byte(b',').fixed(f.tip, 2).byte(b',').fixed(f.tolls, 2);
            out.byte(b',').fixed(f.total, 2);
            emit_or_reject(ctx, r.key, out.get());
        }
    }
}

/// One side of a ride–fare pair waiting for the other.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    /// The ride line, if it arrived.
    pub ride: Option<String>,
    /// The fare fields, if they arrived.
    pub fare: Option<String>,
}

/// `taxi.join_ride_fare`.
#[derive(Clone, Copy, Debug, Default)]
pub struct JoinRideFare;

impl Operator for JoinRideFare {
    type State = Pending;
    fn process(&self, input: &Batch, ctx: &mut Context<'_, Pending>) {
        let mut out = Buf::new();
        let is_ride = ctx.input_port() == 0;
        for r in input.iter() {
            let Ok(text) = std::str::from_utf8(r.value) else {
                ctx.reject("not UTF-8");
                continue;
            };
            let p = ctx.state(r);
            let (mine, other) =
                if is_ride { (&mut p.ride, &p.fare) } else { (&mut p.fare, &p.ride) };
            if mine.is_some() {
                ctx.reject(if is_ride { "duplicate ride" } else { "duplicate fare" });
                continue;
            }
            let Some(other) = other else {
                *mine = Some(text.to_owned());
                continue;
            };
            let (ride, fare) =
                if is_ride { (text, other.as_str()) } else { (other.as_str(), text) };
            out.clear();
            out.put(ride.as_bytes()).byte(b',').put(fare.as_bytes());
            ctx.remove_state(r);
            emit_or_reject(ctx, r.key, out.get());
        }
    }
}

/// `taxi.to_cell`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ToCell;

impl Operator for ToCell {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        let (mut key, mut value) = (Buf::new(), Buf::new());
        for r in input.iter() {
            let ride = match parse_ride(r.value) {
                Ok(ride) => ride,
                Err(reason) => {
                    ctx.reject(reason);
                    continue;
                }
            };
            let (lon, lat) = if ride.is_start {
                (ride.start_lon, ride.start_lat)
            } else {
                (ride.end_lon, ride.end_lat)
            };
            if !in_nyc(lon, lat) {
                ctx.reject("location outside NYC");
                continue;
            }
            key.clear();
            key.i64(cell(lon, lat));
            value.clear();
            value.i64(ride.event_time()).byte(b',').byte(if ride.is_start { b'1' } else { b'0' });
            ctx.emit(key.get().unwrap_or_default(), value.get().unwrap_or_default());
        }
    }
}

/// Departures and arrivals of one cell per pane (a `slide`-long stretch of time).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellPanes {
    /// `(pane, departures, arrivals)`, ascending by pane; pane `p` covers
    /// `[p·slide, (p+1)·slide)` seconds.
    pub panes: Vec<(i64, u64, u64)>,
    /// The latest event time seen (s).
    pub watermark: i64,
    /// Windows up to the one whose last pane is this one have been emitted.
    pub emitted_through: Option<i64>,
    /// Events that arrived after every window containing them was emitted.
    pub late: u64,
}

/// `taxi.popular_window`.
#[derive(Clone, Copy, Debug)]
pub struct PopularWindow {
    /// Pane length (the slide), s.
    slide: i64,
    /// Panes per window.
    panes: i64,
    /// Lateness, s.
    lateness: i64,
}

impl PopularWindow {
    /// The last pane whose window has closed at `watermark`.
    fn closed_through(&self, watermark: i64) -> i64 {
        (watermark - self.lateness).div_euclid(self.slide) - 1
    }

    /// Emits every window closed at the current watermark, then drops panes no open window
    /// needs. Only windows containing a pane with events are visited, so a jump in event time
    /// costs nothing.
    fn close(&self, s: &mut CellPanes, mut emit: impl FnMut(i64, bool, u64)) {
        let through = self.closed_through(s.watermark);
        if s.emitted_through.is_some_and(|e| through <= e) {
            return;
        }
        let after = s.emitted_through.unwrap_or(i64::MIN);
        let mut last = after;
        for i in 0..s.panes.len() {
            for d in 0..self.panes {
                let q = s.panes[i].0 + d;
                if q <= last || q > through {
                    continue;
                }
                last = q;
                let (dep, arr) = s
                    .panes
                    .iter()
                    .filter(|p| p.0 > q - self.panes && p.0 <= q)
                    .fold((0, 0), |acc, p| (acc.0 + p.1, acc.1 + p.2));
                let end = (q + 1) * self.slide;
                if dep > 0 {
                    emit(end, true, dep);
                }
                if arr > 0 {
                    emit(end, false, arr);
                }
            }
        }
        s.emitted_through = Some(through);
        // Open windows end after `through`, so they start at `through - panes + 2`.
        let keep_from = through - self.panes + 2;
        s.panes.retain(|p| p.0 >= keep_from);
    }
}

impl Operator for PopularWindow {
    type State = CellPanes;
    fn process(&self, input: &Batch, ctx: &mut Context<'_, CellPanes>) {
        let mut out = Buf::new();
        let mut closed: Vec<(i64, bool, u64)> = Vec::new();
        for r in input.iter() {
            let Some([t, dir]) = fields::<2>(r.value, b',') else {
                ctx.reject("wrong field count");
                continue;
            };
            let (Some(t), Some(departure)) = (
                crate::text::parse_i64(t),
                match dir {
                    b"1" => Some(true),
                    b"0" => Some(false),
                    _ => None,
                },
            ) else {
                ctx.reject("bad event");
                continue;
            };
            let s = ctx.state(r);
            let pane = t.div_euclid(self.slide);
            if s.emitted_through.is_some_and(|e| pane <= e) {
                s.late += 1;
                continue;
            }
            match s.panes.binary_search_by_key(&pane, |p| p.0) {
                Ok(i) => bump(&mut s.panes[i], departure),
                Err(i) => {
                    s.panes.insert(i, (pane, 0, 0));
                    bump(&mut s.panes[i], departure);
                }
            }
            s.watermark = s.watermark.max(t);
            closed.clear();
            self.close(s, |end, dep, n| closed.push((end, dep, n)));
            for &(end, dep, n) in &closed {
                out.clear();
                out.i64(end).byte(b',').byte(if dep { b'1' } else { b'0' }).byte(b',').u64(n);
                ctx.emit(r.key, out.get().unwrap_or_default());
            }
        }
    }
}

fn bump(p: &mut (i64, u64, u64), departure: bool) {
    if departure {
        p.1 += 1;
    } else {
        p.2 += 1;
    }
}

/// `taxi.filter_popular`.
#[derive(Clone, Copy, Debug)]
pub struct FilterPopular {
    min: u64,
}

impl Operator for FilterPopular {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        for r in input.iter() {
            match fields::<3>(r.value, b',').and_then(|f| parse_u64(f[2])) {
                Some(n) if n >= self.min => ctx.emit(r.key, r.value),
                Some(_) => {}
                None => ctx.reject("bad window count"),
            }
        }
    }
}

/// `taxi.to_area`.
#[derive(Clone, Copy, Debug, Default)]
pub struct ToArea;

impl Operator for ToArea {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        let mut out = Buf::new();
        for r in input.iter() {
            let cell = crate::text::parse_i64(r.key).filter(|c| (0..GRID_X * GRID_Y).contains(c));
            let (Some(c), Some([end, dir, n])) = (cell, fields::<3>(r.value, b',')) else {
                ctx.reject("bad window record");
                continue;
            };
            let (lon, lat) = cell_center(c);
            out.clear();
            out.fixed(lon, COORD_DECIMALS).byte(b',').fixed(lat, COORD_DECIMALS).byte(b',');
            out.put(end).byte(b',').put(if dir == b"1" { b"departing" } else { b"arriving" });
            out.byte(b',').put(n);
            ctx.emit(r.key, out.get().unwrap_or_default());
        }
    }
}

/// Registers the taxi functions.
pub fn register(r: &mut Registry) {
    use clasp_core::operator::erase;
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
        let p = Params::new(spec, &["size_min", "slide_min", "lateness_min"])?;
        let size = p.positive("size_min", 15)? as i64;
        let slide = p.positive("slide_min", 5)? as i64;
        if size % slide != 0 {
            return Err(format!("`size_min` ({size}) must be a multiple of `slide_min` ({slide})"));
        }
        let lateness = p.unsigned("lateness_min", slide as u64)? as i64;
        Ok(erase(PopularWindow { slide: slide * 60, panes: size / slide, lateness: lateness * 60 }))
    });
    r.register("taxi.filter_popular", |spec| {
        let p = Params::new(spec, &["min_count"])?;
        Ok(erase(FilterPopular { min: p.positive("min_count", 20)? }))
    });
    r.register_operator("taxi.to_area", ToArea);
}

/// First ride start of generated data: 2013-01-01 12:00:00 UTC.
pub const START_S: i64 = 1_357_041_600;

/// Busy places rides start and end at (µ°): stations, airports, squares.
const HOTSPOTS: [(i64, i64); 8] = [
    (-73_993_500, 40_750_500), // Penn Station
    (-73_977_200, 40_752_700), // Grand Central
    (-73_985_100, 40_758_000), // Times Square
    (-73_778_900, 40_641_300), // JFK
    (-73_874_000, 40_776_900), // LaGuardia
    (-74_009_000, 40_706_000), // Wall Street
    (-73_990_700, 40_735_900), // Union Square
    (-73_965_400, 40_782_900), // Central Park
];

/// The ride and fare of one ride id, fully determined by `(seed, ride id)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RideRecord {
    /// Ride id (from 1).
    pub id: u64,
    /// Start time, Unix s.
    pub start: i64,
    /// End time (equal to start for the 1 % of broken records).
    pub end: i64,
    /// Start and end, µ°.
    pub coords: [i64; 4],
    /// Passengers (0 in 2 % of records).
    pub passengers: u64,
    /// Taxi id.
    pub taxi: u64,
    /// Driver id.
    pub driver: u64,
    /// `CSH` or `CRD`.
    pub payment: &'static str,
    /// Cents.
    pub tip: i64,
    /// Cents.
    pub tolls: i64,
    /// Cents (0 in 8 % of fares: voided).
    pub total: i64,
}

/// A pick-up or drop-off point: 60 % near a hotspot, 35 % anywhere in central NYC, 3 %
/// outside NYC, 2 % the (0, 0) of a broken GPS.
fn place(rng: &mut SplitMix64) -> (i64, i64) {
    let x = rng.next_f64();
    if x < 0.6 {
        let (lon, lat) = HOTSPOTS[rng.below(HOTSPOTS.len() as u64) as usize];
        let jitter = |rng: &mut SplitMix64| (crate::sd::gaussian(rng) * 600.0) as i64;
        (lon + jitter(rng), lat + jitter(rng))
    } else if x < 0.95 {
        (-74_020_000 + rng.below(90_000) as i64, 40_700_000 + rng.below(120_000) as i64)
    } else if x < 0.98 {
        (-74_400_000 + rng.below(200_000) as i64, 40_900_000 + rng.below(200_000) as i64)
    } else {
        (0, 0)
    }
}

/// The ride and fare of ride `id` for `seed`. Rides start one second apart.
pub fn ride(seed: u64, id: u64) -> RideRecord {
    let mut rng = SplitMix64::derive(seed ^ 0x5441_5849, id);
    let start = START_S + id as i64;
    let minutes =
        if rng.chance(0.03) { 150.0 + 150.0 * rng.next_f64() } else { 3.0 + rng.exponential(12.0) };
    let end = if rng.chance(0.01) { start } else { start + (minutes * 60.0) as i64 };
    let (a, b) = (place(&mut rng), place(&mut rng));
    let passengers = if rng.chance(0.02) {
        0
    } else {
        1 + rng.weighted(&[70.0, 15.0, 5.0, 4.0, 4.0, 2.0]) as u64
    };
    let taxi = 2_013_000_000 + rng.below(15_000);
    let driver = taxi;
    let card = rng.chance(0.6);
    let fare = 250 + ((end - start) / 60) * 55 + rng.below(300) as i64;
    let tip = if card { fare * (15 + rng.below(11) as i64) / 100 } else { 0 };
    let tolls = if rng.chance(0.05) { 533 } else { 0 };
    let total = if rng.chance(0.08) { 0 } else { fare + tip + tolls };
    RideRecord {
        id,
        start,
        end,
        coords: [a.0, a.1, b.0, b.1],
        passengers,
        taxi,
        driver,
        payment: if card { "CRD" } else { "CSH" },
        tip,
        tolls,
        total,
    }
}

fn time_text(unix: i64) -> String {
    format_utc(unix.max(0))
}

fn coord(out: &mut Vec<u8>, v: i64) {
    let mut b = Buf::new();
    b.fixed(v, COORD_DECIMALS);
    out.extend_from_slice(b.get().unwrap_or_default());
}

/// Writes the TaxiRide line of one event.
pub fn write_ride(r: &RideRecord, is_start: bool, out: &mut Vec<u8>) {
    use std::io::Write;
    out.clear();
    let end = if is_start { time_text(0) } else { time_text(r.end) };
    let _ = write!(
        out,
        "{},{},{},{end},",
        r.id,
        if is_start { "START" } else { "END" },
        time_text(r.start)
    );
    for c in &r.coords {
        coord(out, *c);
        out.push(b',');
    }
    let _ = write!(out, "{},{},{}", r.passengers, r.taxi, r.driver);
}

/// Writes the TaxiFare line of a ride.
pub fn write_fare(r: &RideRecord, out: &mut Vec<u8>) {
    use std::io::Write;
    out.clear();
    let cents = |v: i64| format!("{}.{:02}", v / 100, v % 100);
    let _ = write!(
        out,
        "{},{},{},{},{},{},{},{}",
        r.id,
        r.taxi,
        r.driver,
        time_text(r.start),
        r.payment,
        cents(r.tip),
        cents(r.tolls),
        cents(r.total)
    );
}

/// Generates the TaxiRide stream: START and END events of rides 1, 2, … in event-time order
/// (an END before a START of the same second).
#[derive(Debug)]
pub struct RideGenerator {
    seed: u64,
    next_id: u64,
    ends: BinaryHeap<Reverse<(i64, u64)>>,
    pending_start: Option<RideRecord>,
}

impl RideGenerator {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Self { seed, next_id: 1, ends: BinaryHeap::new(), pending_start: None }
    }

    /// Writes the next event into `out`; returns the ride id and whether it is a START.
    pub fn next_event(&mut self, out: &mut Vec<u8>) -> (u64, bool) {
        let next = self.pending_start.take().unwrap_or_else(|| ride(self.seed, self.next_id));
        match self.ends.peek() {
            Some(Reverse((end, id))) if *end <= next.start => {
                let id = *id;
                self.ends.pop();
                self.pending_start = Some(next);
                write_ride(&ride(self.seed, id), false, out);
                (id, false)
            }
            _ => {
                self.next_id += 1;
                self.ends.push(Reverse((next.end, next.id)));
                write_ride(&next, true, out);
                (next.id, true)
            }
        }
    }

    /// Writes the next event into `out`.
    pub fn next_line(&mut self, out: &mut Vec<u8>) {
        self.next_event(out);
    }
}

/// Generates the TaxiFare stream matching the first `ride_events` events of
/// [`RideGenerator`] for the same seed: the fare of every ride started among them, in
/// ride-id order.
#[derive(Debug)]
pub struct FareGenerator {
    seed: u64,
    next_id: u64,
    last_id: u64,
}

impl FareGenerator {
    /// Fares for the rides started within the first `ride_events` ride events.
    pub fn new(seed: u64, ride_events: u64) -> Self {
        let mut rides = RideGenerator::new(seed);
        let mut buf = Vec::new();
        let mut last_id = 0;
        for _ in 0..ride_events {
            let (id, start) = rides.next_event(&mut buf);
            if start {
                last_id = id;
            }
        }
        Self { seed, next_id: 1, last_id }
    }

    /// How many fares there are.
    pub fn len(&self) -> u64 {
        self.last_id
    }

    /// Whether there is no fare.
    pub fn is_empty(&self) -> bool {
        self.last_id == 0
    }

    /// Writes the next fare into `out`; `false` when all were written.
    pub fn next_line(&mut self, out: &mut Vec<u8>) -> bool {
        if self.next_id > self.last_id {
            return false;
        }
        write_fare(&ride(self.seed, self.next_id), out);
        self.next_id += 1;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip() {
        assert_eq!(parse_utc(b"2013-01-01 12:00:00"), Some(START_S));
        assert_eq!(time_text(START_S + 86_399), "2013-01-02 11:59:59");
        assert_eq!(time_text(-5), "1970-01-01 00:00:00");
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

    #[test]
    fn sliding_windows_emit_once_and_survive_time_jumps() {
        use clasp_core::operator::{CollectingEmitter, Rejections};
        let op = PopularWindow { slide: 300, panes: 3, lateness: 300 };
        let store = clasp_core::state::KeyedStore::new(2);
        let b: Batch = ["10,1", "20,0", "400,1", "1000000000,1", "5,1"]
            .iter()
            .map(|v| (&b"7"[..], v.as_bytes()))
            .collect();
        let mut out = CollectingEmitter::default();
        let mut rej = Rejections::default();
        op.process(&b, &mut Context::new(&store, &mut out, 0, &mut rej));
        let got: Vec<String> =
            out.records.iter().map(|r| String::from_utf8(r.2.clone()).unwrap()).collect();
        // Windows ending at 300, 600, 900 hold pane 0 (and pane 1 from 600 on); 1200 pane 1.
        assert_eq!(
            got,
            ["300,1,1", "300,0,1", "600,1,2", "600,0,1", "900,1,2", "900,0,1", "1200,1,1"]
        );
        let mut dump = Vec::new();
        clasp_core::state::StateStore::dump_json(&store, "w", &mut dump).unwrap();
        let dump = String::from_utf8(dump).unwrap();
        assert!(
            dump.contains(r#""panes":[[3333333,1,0]]"#) && dump.contains(r#""late":1"#),
            "{dump}"
        );
    }

    #[test]
    fn generated_rides_parse_in_time_order_and_fares_match() {
        let mut g = RideGenerator::new(5);
        let mut line = Vec::new();
        let mut last = 0;
        let mut starts = 0;
        for _ in 0..2000 {
            g.next_line(&mut line);
            let r = parse_ride(&line)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&line)));
            assert!(r.event_time() >= last, "{}", String::from_utf8_lossy(&line));
            last = r.event_time();
            starts += usize::from(r.is_start);
            let source = &crate::pipeline("taxi-w2").unwrap().sources[0];
            assert_eq!(source.key_of(&line), r.ride_id.to_string().as_bytes());
        }
        let mut fares = FareGenerator::new(5, 2000);
        assert_eq!(fares.len(), starts as u64);
        let mut n = 0;
        while fares.next_line(&mut line) {
            parse_fare(&line).unwrap();
            n += 1;
        }
        assert_eq!(n, starts);
        assert_eq!(ride(5, 17), ride(5, 17));
    }
}
