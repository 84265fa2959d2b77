//! w2's fares and the ride–fare join.

use super::parse_fare;
use crate::text::{Buf, emit_or_reject};
use clasp_core::{Batch, Context, Operator};
use serde::{Deserialize, Serialize};

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
