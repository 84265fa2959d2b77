//! Page load (CLASP Fig. 1, app 4): mean page-load time per page category.
//!
//! Input: CSV lines `url,user,load_time` (load time in whole milliseconds).
//!
//! - `pl.parse` ("transition"): validates and trims the three fields; key = url.
//! - `pl.url_filter`: drops requests that are not page views — health probes (`/healthz`)
//!   and static assets (`/static/…`) — and anything that is not an http(s) url.
//! - `pl.join_category`: url → category from the site's table; key = category, value =
//!   load time. Urls missing from the table are rejected.
//! - `pl.filter_load` (param `max_load_ms`, default 90): drops loads slower than the limit
//!   (time-outs and outliers that would dominate a mean).
//! - `pl.mean_per_category` (stateful by category; param `reset_every`, default 1,000):
//!   sums load times per category; after every `reset_every` records emits
//!   `block,records,sum,mean` and starts the next block.
//! - `pl.format` ("sink"): `category,block,mean`.

use crate::text::{Buf, Params, emit_or_reject, fields, parse_u64, trim};
use clasp_core::rng::{SeededRng, independent_stream};
use clasp_core::{Batch, Context, Operator, Registry};
use rand::RngExt;
use rand_distr::Zipf;
use serde::{Deserialize, Serialize};

/// Scheme and host of every url of the site.
pub const SITE: &str = "http://www.example.com";

/// The 20 pages of the site with their category, most visited first.
pub const PAGES: [(&str, &str); 20] = [
    ("/news/world", "news"),
    ("/sports/football", "sports"),
    ("/shop/deals", "shopping"),
    ("/video/trending", "video"),
    ("/travel/flights", "travel"),
    ("/news/politics", "news"),
    ("/sports/tennis", "sports"),
    ("/shop/electronics", "shopping"),
    ("/video/music", "video"),
    ("/travel/hotels", "travel"),
    ("/news/tech", "news"),
    ("/sports/results", "sports"),
    ("/shop/books", "shopping"),
    ("/video/movies", "video"),
    ("/travel/cars", "travel"),
    ("/news/local", "news"),
    ("/sports/live", "sports"),
    ("/shop/cart", "shopping"),
    ("/video/live", "video"),
    ("/travel/deals", "travel"),
];

/// Requests that are not page views, which the url filter drops.
pub const NON_PAGES: [&str; 2] = ["/healthz", "/static/app.js"];

/// Decimals of the emitted means.
const MEAN_DECIMALS: u32 = 3;

/// The category of a full url, if it is one of the site's pages.
pub fn category(url: &[u8]) -> Option<&'static str> {
    let path = url.strip_prefix(SITE.as_bytes())?;
    PAGES.iter().find(|(p, _)| p.as_bytes() == path).map(|(_, c)| *c)
}

/// Whether the url filter keeps `url`.
pub fn is_page_view(url: &[u8]) -> bool {
    let Some(rest) = url.strip_prefix(b"http://").or_else(|| url.strip_prefix(b"https://")) else {
        return false;
    };
    let path = rest.iter().position(|c| *c == b'/').map_or(&rest[..0], |i| &rest[i..]);
    !(path == b"/healthz" || path.starts_with(b"/static/"))
}

/// `pl.parse`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Parse;

impl Operator for Parse {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        let mut out = Buf::new();
        for r in input.iter() {
            let Some([url, user, load]) = fields::<3>(r.value, b',') else {
                ctx.reject("wrong field count");
                continue;
            };
            let (url, user, load) = (trim(url), trim(user), trim(load));
            if url.is_empty() || user.is_empty() {
                ctx.reject("empty field");
                continue;
            }
            let Some(ms) = parse_u64(load) else {
                ctx.reject("non-numeric load_time");
                continue;
            };
            out.clear();
            out.put(url).byte(b',').put(user).byte(b',').u64(ms);
            emit_or_reject(ctx, url, out.get());
        }
    }
}

/// `pl.url_filter`.
#[derive(Clone, Copy, Debug, Default)]
pub struct UrlFilter;

impl Operator for UrlFilter {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        for r in input.iter() {
            if is_page_view(r.key) {
                ctx.emit(r.key, r.value);
            }
        }
    }
}

/// `pl.join_category`.
#[derive(Clone, Copy, Debug, Default)]
pub struct JoinCategory;

impl Operator for JoinCategory {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        for r in input.iter() {
            let Some([_, _, load]) = fields::<3>(r.value, b',') else {
                ctx.reject("wrong field count");
                continue;
            };
            match category(r.key) {
                Some(c) => ctx.emit(c.as_bytes(), load),
                None => ctx.reject("url not in catalog"),
            }
        }
    }
}

/// `pl.filter_load`.
#[derive(Clone, Copy, Debug)]
pub struct FilterLoad {
    max_ms: u64,
}

impl Operator for FilterLoad {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        for r in input.iter() {
            match parse_u64(r.value) {
                Some(ms) if ms <= self.max_ms => ctx.emit(r.key, r.value),
                Some(_) => {}
                None => ctx.reject("non-numeric load_time"),
            }
        }
    }
}

/// The current block of one category.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Running {
    /// Records in the current block.
    pub count: u64,
    /// Their load times summed.
    pub sum: u64,
    /// Blocks completed (and emitted).
    pub blocks: u64,
}

/// `pl.mean_per_category`.
#[derive(Clone, Copy, Debug)]
pub struct MeanPerCategory {
    reset_every: u64,
}

impl Operator for MeanPerCategory {
    type State = Running;
    fn process(&self, input: &Batch, ctx: &mut Context<'_, Running>) {
        let mut out = Buf::new();
        for r in input.iter() {
            let Some(ms) = parse_u64(r.value) else {
                ctx.reject("non-numeric load_time");
                continue;
            };
            let s = ctx.state(r);
            s.count += 1;
            // Saturating: hostile load times must not overflow (real ones are far below).
            s.sum = s.sum.saturating_add(ms);
            if s.count < self.reset_every {
                continue;
            }
            s.blocks += 1;
            let scale = 10i64.pow(MEAN_DECIMALS);
            let mean = (i128::from(s.sum) * i128::from(scale) * 2 + i128::from(s.count))
                / (2 * i128::from(s.count));
            let mean = i64::try_from(mean).unwrap_or(i64::MAX);
            out.clear();
            out.u64(s.blocks).byte(b',').u64(s.count).byte(b',').u64(s.sum).byte(b',');
            out.fixed(mean, MEAN_DECIMALS);
            (s.count, s.sum) = (0, 0);
            ctx.emit(r.key, out.get().unwrap_or_default());
        }
    }
}

/// `pl.format`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Format;

impl Operator for Format {
    type State = ();
    fn process(&self, input: &Batch, ctx: &mut Context<'_, ()>) {
        let mut out = Buf::new();
        for r in input.iter() {
            let Some([block, _, _, mean]) = fields::<4>(r.value, b',') else {
                ctx.reject("wrong field count");
                continue;
            };
            out.clear();
            out.put(r.key).byte(b',').put(block).byte(b',').put(mean);
            emit_or_reject(ctx, r.key, out.get());
        }
    }
}

/// Registers the PL functions.
pub fn register(r: &mut Registry) {
    use clasp_core::operator::erase;
    r.register_operator("pl.parse", Parse);
    r.register_operator("pl.url_filter", UrlFilter);
    r.register_operator("pl.join_category", JoinCategory);
    r.register("pl.filter_load", |spec| {
        let p = Params::new(spec, &["max_load_ms"])?;
        Ok(erase(FilterLoad { max_ms: p.unsigned("max_load_ms", 90)? }))
    });
    r.register("pl.mean_per_category", |spec| {
        let p = Params::new(spec, &["reset_every"])?;
        Ok(erase(MeanPerCategory { reset_every: p.positive("reset_every", 1000)? }))
    });
    r.register_operator("pl.format", Format);
}

/// Generates page-load lines: 90 % page views of the 20 pages with Zipf weights (page `i`
/// of [`PAGES`] has weight `1/(i+1)`), 10 % probes and static assets, 1,000 users uniformly,
/// load times uniform in 1–100 ms.
#[derive(Debug)]
pub struct Generator {
    rng: SeededRng,
    pages: Zipf<f64>,
}

impl Generator {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        let pages = Zipf::new(PAGES.len() as f64, 1.0).expect("valid Zipf parameters");
        Self { rng: independent_stream(seed, 0x504c), pages }
    }

    /// Writes the next line into `out` (cleared first).
    pub fn next_line(&mut self, out: &mut Vec<u8>) {
        let path = if self.rng.random_bool(0.1) {
            NON_PAGES[self.rng.random_range(0..NON_PAGES.len() as u64) as usize]
        } else {
            // Zipf draws are 1..=n.
            PAGES[self.rng.sample(self.pages) as usize - 1].0
        };
        let user = 1 + self.rng.random_range(0..1000);
        let load = 1 + self.rng.random_range(0..100);
        out.clear();
        use std::io::Write;
        let _ = write!(out, "{SITE}{path},user{user:04},{load}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_filter_and_join() {
        assert!(is_page_view(b"http://www.example.com/news/world"));
        assert!(is_page_view(b"https://other.org/x"));
        assert!(!is_page_view(b"http://www.example.com/healthz"));
        assert!(!is_page_view(b"http://www.example.com/static/app.js"));
        assert!(!is_page_view(b"ftp://www.example.com/news/world"));
        assert_eq!(category(b"http://www.example.com/video/live"), Some("video"));
        assert_eq!(category(b"https://other.org/x"), None);
    }

    #[test]
    fn generator_skews_pages() {
        let mut g = Generator::new(9);
        let mut line = Vec::new();
        let (mut top, mut last, mut probes) = (0, 0, 0);
        for _ in 0..20_000 {
            g.next_line(&mut line);
            let url = line.split(|c| *c == b',').next().unwrap();
            match url {
                u if u.ends_with(b"/news/world") => top += 1,
                u if u.ends_with(b"/travel/deals") => last += 1,
                u if !is_page_view(u) => probes += 1,
                _ => {}
            }
        }
        assert!(top > 10 * last, "{top} vs {last}");
        assert!((1500..2500).contains(&probes), "{probes}");
    }
}
