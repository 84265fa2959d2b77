//! w3's popular places: grid cells, sliding event-time windows per cell, the popular ones as
//! areas.

use super::{COORD_DECIMALS, GRID_X, GRID_Y, cell, cell_center, in_nyc, parse_ride};
use crate::text::{Buf, fields, parse_u64};
use clasp_core::time::{Timer, TimerUse};
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
            let time = u64::try_from(ride.event_time()).ok();
            ctx.emit_with(time, key.get().unwrap_or_default(), value.get().unwrap_or_default());
        }
    }
}

/// Departures and arrivals of one cell per pane (a `slide`-long stretch of time).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CellPanes {
    /// `(pane, departures, arrivals)`, ascending by pane; pane `p` covers
    /// `[p·slide, (p+1)·slide)` seconds.
    pub panes: Vec<(i64, u64, u64)>,
    /// Windows up to the one whose last pane is this one have been emitted.
    pub emitted_through: Option<i64>,
}

/// `taxi.popular_window`: sliding event-time windows of `panes` panes. A window closes by an
/// event-time timer at its last second, once the watermark passes it (plus the operator's
/// `allowed_lateness`), whether or not the cell sees another ride; rides later than that are
/// counted as `late` by the runtime.
#[derive(Clone, Copy, Debug)]
pub struct PopularWindow {
    /// Pane length (the slide), s.
    pub(super) slide: i64,
    /// Panes per window.
    pub(super) panes: i64,
}

impl PopularWindow {
    /// The timer closing the window whose last pane is `q`: the window's last second.
    fn closing_time(&self, q: i64) -> Option<u64> {
        u64::try_from((q + 1).checked_mul(self.slide)? - 1).ok()
    }
}

impl Operator for PopularWindow {
    type State = CellPanes;
    fn timers(&self) -> TimerUse {
        TimerUse::EVENT
    }
    fn process(&self, input: &Batch, ctx: &mut Context<'_, CellPanes>) {
        for r in input.iter() {
            let Some([t, dir]) = fields::<2>(r.value, b',') else {
                ctx.reject("wrong field count");
                continue;
            };
            let (Some(t), Some(departure)) = (
                crate::text::parse_i64(t).filter(|t| *t >= 0),
                match dir {
                    b"1" => Some(true),
                    b"0" => Some(false),
                    _ => None,
                },
            ) else {
                ctx.reject("bad event");
                continue;
            };
            let pane = t.div_euclid(self.slide);
            let s = ctx.state(r);
            let new = match s.panes.binary_search_by_key(&pane, |p| p.0) {
                Ok(i) => {
                    bump(&mut s.panes[i], departure);
                    false
                }
                Err(i) => {
                    s.panes.insert(i, (pane, 0, 0));
                    bump(&mut s.panes[i], departure);
                    true
                }
            };
            // A new pane's windows each need their closing timer (setting one twice is a no-op).
            if new {
                for q in pane..pane + self.panes {
                    if let Some(at) = self.closing_time(q) {
                        ctx.set_event_timer(r, at);
                    }
                }
            }
        }
    }
    fn on_timer(&self, timer: Timer<'_>, ctx: &mut Context<'_, CellPanes>) {
        let r = timer.record();
        let Ok(end) = i64::try_from(timer.time + 1) else { return };
        let q = end / self.slide - 1;
        let Some(s) = ctx.existing_state(r) else { return };
        let (dep, arr) = s
            .panes
            .iter()
            .filter(|p| p.0 > q - self.panes && p.0 <= q)
            .fold((0, 0), |acc, p| (acc.0 + p.1, acc.1 + p.2));
        s.emitted_through = Some(q);
        // Later windows end after `q`, so they start at `q - panes + 2`.
        s.panes.retain(|p| p.0 >= q - self.panes + 2);
        let empty = s.panes.is_empty();
        let mut out = Buf::new();
        for (departing, n) in [(true, dep), (false, arr)] {
            if n > 0 {
                out.clear();
                out.i64(end).byte(b',').byte(if departing { b'1' } else { b'0' }).byte(b',');
                out.u64(n);
                ctx.emit_at(timer.time, r.key, out.get().unwrap_or_default());
            }
        }
        if empty {
            ctx.remove_state(r);
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
        for (r, time) in input.iter_timed() {
            match fields::<3>(r.value, b',').and_then(|f| parse_u64(f[2])) {
                Some(n) if n >= self.min => ctx.emit_with(time, r.key, r.value),
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
    use clasp_core::local::{LocalDriver, LocalOptions};
    use clasp_core::{OperatorId, SourceId};

    #[test]
    fn sliding_windows_close_by_the_watermark_once_and_survive_time_jumps() {
        let spec = r#"
[[source]]
name = "events"
key_field = 0
event_time = "t"
[[operator]]
name = "window"
function = "window"
stateful = true
key = "cell"
[[sink]]
name = "out"
[[stream]]
from = "events"
to = "window"
[[stream]]
from = "window"
to = "out"
"#;
        let p = clasp_core::spec::parse(spec, "t.toml").unwrap();
        let mut reg = clasp_core::Registry::new();
        reg.register_operator("window", PopularWindow { slide: 300, panes: 3 });
        reg.register_event_time("t", |l| parse_u64(l.split(|c| *c == b',').next()?));
        let opts = LocalOptions { batch_size: 1, key_groups: 2 };
        let mut d = LocalDriver::new(&p, &reg, opts).unwrap();
        for v in ["10,1", "20,0", "400,1", "1000000000,1", "5,1"] {
            d.push(SourceId(0), b"7", v.as_bytes());
        }
        d.flush();
        let got = |d: &LocalDriver| -> Vec<String> {
            let out = d.sink_records_named("out");
            out.iter().map(|r| String::from_utf8_lossy(r.value).into()).collect()
        };
        // Windows ending at 300, 600, 900 hold pane 0 (and pane 1 from 600 on); 1200 pane 1:
        // all closed by the watermark of the jump, which leaves "5" late.
        let closed = ["300,1,1", "300,0,1", "600,1,2", "600,0,1", "900,1,2", "900,0,1", "1200,1,1"];
        assert_eq!(got(&d), closed);
        assert_eq!(d.stats(OperatorId(0)).rejections.count(clasp_core::operator::LATE), 1);
        d.finish();
        let mut all: Vec<String> = closed.iter().map(|s| (*s).to_owned()).collect();
        all.extend(["1000000200,1,1", "1000000500,1,1", "1000000800,1,1"].map(String::from));
        assert_eq!(got(&d), all, "the jump's windows close at the end of the input");
        assert_eq!(d.store(OperatorId(0)).key_count(), 0, "no pane left open");
    }
}
