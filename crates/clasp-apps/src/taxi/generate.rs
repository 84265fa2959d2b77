//! Seeded TaxiRide and TaxiFare streams.

use super::COORD_DECIMALS;
use crate::date::format_utc;
use crate::text::Buf;
use clasp_core::rng::{SeededRng, independent_stream};
use rand::RngExt;
use rand_distr::weighted::WeightedIndex;
use rand_distr::{Exp1, StandardNormal};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::LazyLock;

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

/// Passengers of a ride: 1 to 6 with these weights.
static PASSENGERS: LazyLock<WeightedIndex<u32>> =
    LazyLock::new(|| WeightedIndex::new([70, 15, 5, 4, 4, 2]).expect("positive weights"));

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
fn place(rng: &mut SeededRng) -> (i64, i64) {
    let x = rng.random::<f64>();
    if x < 0.6 {
        let (lon, lat) = HOTSPOTS[rng.random_range(0..HOTSPOTS.len() as u64) as usize];
        let jitter = |rng: &mut SeededRng| (rng.sample::<f64, _>(StandardNormal) * 600.0) as i64;
        (lon + jitter(rng), lat + jitter(rng))
    } else if x < 0.95 {
        (
            -74_020_000 + rng.random_range(0..90_000) as i64,
            40_700_000 + rng.random_range(0..120_000) as i64,
        )
    } else if x < 0.98 {
        (
            -74_400_000 + rng.random_range(0..200_000) as i64,
            40_900_000 + rng.random_range(0..200_000) as i64,
        )
    } else {
        (0, 0)
    }
}

/// The ride and fare of ride `id` for `seed`. Rides start one second apart.
pub fn ride(seed: u64, id: u64) -> RideRecord {
    let mut rng = independent_stream(seed ^ 0x5441_5849, id);
    let start = START_S + id as i64;
    let minutes = if rng.random_bool(0.03) {
        150.0 + 150.0 * rng.random::<f64>()
    } else {
        3.0 + rng.sample::<f64, _>(Exp1) * 12.0
    };
    let end = if rng.random_bool(0.01) { start } else { start + (minutes * 60.0) as i64 };
    let (a, b) = (place(&mut rng), place(&mut rng));
    let passengers = if rng.random_bool(0.02) { 0 } else { 1 + rng.sample(&*PASSENGERS) as u64 };
    let taxi = 2_013_000_000 + rng.random_range(0..15_000);
    let driver = taxi;
    let card = rng.random_bool(0.6);
    let fare = 250 + ((end - start) / 60) * 55 + rng.random_range(0..300) as i64;
    let tip = if card { fare * (15 + rng.random_range(0..11) as i64) / 100 } else { 0 };
    let tolls = if rng.random_bool(0.05) { 533 } else { 0 };
    let total = if rng.random_bool(0.08) { 0 } else { fare + tip + tolls };
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
    use crate::taxi::{parse_fare, parse_ride};

    #[test]
    fn times_are_written_as_the_training_data_writes_them() {
        assert_eq!(time_text(START_S + 86_399), "2013-01-02 11:59:59");
        assert_eq!(time_text(-5), "1970-01-01 00:00:00");
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
