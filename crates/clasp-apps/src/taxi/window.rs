//! w3's popular places: grid cells, sliding event-time windows per cell, the popular ones as
//! areas.

use super::{COORD_DECIMALS, GRID_X, GRID_Y, cell, cell_center, in_nyc, parse_ride};
use crate::text::{Buf, fields, parse_u64};
use clasp_core::{Batch, Context, Operator};
use serde::{Deserialize, Serialize};

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
    pub(super) slide: i64,
    /// Panes per window.
    pub(super) panes: i64,
    /// Lateness, s.
    pub(super) lateness: i64,
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
    pub(super) min: u64,
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
