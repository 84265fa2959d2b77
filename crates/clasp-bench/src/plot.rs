//! PNG charts without a plotting stack: a small rasterizer (rectangles, lines, markers, text
//! from a built-in 5×7 bitmap font) and a PNG writer (chunks and CRC here, zlib from
//! `miniz_oxide`).
//!
//! Two kinds of chart: **line** charts (numeric x, one line with markers per series) and
//! **grouped bars** (one group per category, one bar per series). Every chart has a title,
//! axis titles (with units), tick labels at round values, horizontal grid lines and a legend
//! to the right of the plot area.
//!
//! ```
//! use clasp_bench::plot::{Chart, Series};
//! let chart = Chart::bars("Throughput on 10 workers", "application", "throughput (req/s)")
//!     .categories(&["wc", "sd"])
//!     .series(Series::new("clasp", vec![4200.0, 3900.0]))
//!     .series(Series::new("faasflow", vec![900.0, 2500.0]));
//! let png = chart.png();
//! assert_eq!(&png[1..4], b"PNG");
//! ```

mod font;

use crate::BenchError;
use std::path::Path;

/// An RGB colour.
pub type Rgb = [u8; 3];

const WHITE: Rgb = [255, 255, 255];
const INK: Rgb = [30, 30, 30];
const GRID: Rgb = [225, 225, 225];
const AXIS: Rgb = [90, 90, 90];

/// Series colours (Okabe–Ito, distinguishable with common colour-vision deficiencies).
pub const PALETTE: [Rgb; 8] = [
    [0, 114, 178],
    [230, 159, 0],
    [0, 158, 115],
    [213, 94, 0],
    [204, 121, 167],
    [86, 180, 233],
    [120, 120, 120],
    [240, 228, 66],
];

/// Scale of every text: font pixels are drawn as `TEXT`×`TEXT` squares.
const TEXT: usize = 2;

/// An image being drawn.
#[derive(Clone, Debug, PartialEq)]
pub struct Canvas {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// Row-major RGB pixels.
    pub pixels: Vec<u8>,
    /// Every text drawn: where, and at which scale.
    pub labels: Vec<Label>,
}

/// A text drawn on a canvas.
#[derive(Clone, Debug, PartialEq)]
pub struct Label {
    /// The text.
    pub text: String,
    /// Left edge (pixels).
    pub x: usize,
    /// Top edge (pixels).
    pub y: usize,
    /// Pixels per font pixel.
    pub scale: usize,
    /// Drawn bottom-to-top (a y-axis title).
    pub vertical: bool,
    /// Its colour.
    pub color: Rgb,
}

impl Canvas {
    /// A white canvas.
    pub fn new(width: usize, height: usize) -> Self {
        Self { width, height, pixels: WHITE.repeat(width * height), labels: Vec::new() }
    }

    /// The colour at (`x`, `y`).
    pub fn get(&self, x: usize, y: usize) -> Rgb {
        let i = 3 * (y * self.width + x);
        [self.pixels[i], self.pixels[i + 1], self.pixels[i + 2]]
    }

    /// Sets one pixel (ignored outside the canvas).
    pub fn set(&mut self, x: i64, y: i64, c: Rgb) {
        if x < 0 || y < 0 || x as usize >= self.width || y as usize >= self.height {
            return;
        }
        let i = 3 * (y as usize * self.width + x as usize);
        self.pixels[i..i + 3].copy_from_slice(&c);
    }

    /// Fills the rectangle with corners (`x0`, `y0`) and (`x1`, `y1`), both included.
    pub fn rect(&mut self, x0: i64, y0: i64, x1: i64, y1: i64, c: Rgb) {
        for y in y0.min(y1)..=y0.max(y1) {
            for x in x0.min(x1)..=x0.max(x1) {
                self.set(x, y, c);
            }
        }
    }

    /// A line `width` pixels thick (Bresenham with a square brush).
    pub fn line(&mut self, (x0, y0): (i64, i64), (x1, y1): (i64, i64), width: i64, c: Rgb) {
        let (dx, dy) = ((x1 - x0).abs(), -(y1 - y0).abs());
        let (sx, sy) = (if x0 < x1 { 1 } else { -1 }, if y0 < y1 { 1 } else { -1 });
        let (mut x, mut y, mut err) = (x0, y0, dx + dy);
        let (lo, hi) = (-(width - 1) / 2, width / 2);
        loop {
            self.rect(x + lo, y + lo, x + hi, y + hi, c);
            if x == x1 && y == y1 {
                break;
            }
            let e2 = 2 * err;
            if e2 >= dy {
                err += dy;
                x += sx;
            }
            if e2 <= dx {
                err += dx;
                y += sy;
            }
        }
    }

    /// Draws `text` with its top-left corner at (`x`, `y`); vertical text runs bottom to top
    /// from (`x`, `y`) as its bottom-left corner.
    pub fn text(&mut self, text: &str, x: usize, y: usize, vertical: bool, c: Rgb) {
        for (i, ch) in text.chars().enumerate() {
            for col in 0..font::WIDTH {
                for row in 0..font::HEIGHT {
                    if !font::pixel(ch, col, row) {
                        continue;
                    }
                    let along = (i * font::ADVANCE + col) * TEXT;
                    let (px, py) = if vertical {
                        (x + row * TEXT, y.saturating_sub(along + TEXT))
                    } else {
                        (x + along, y + row * TEXT)
                    };
                    self.rect(
                        px as i64,
                        py as i64,
                        (px + TEXT - 1) as i64,
                        (py + TEXT - 1) as i64,
                        c,
                    );
                }
            }
        }
        let label = Label { text: text.to_owned(), x, y, scale: TEXT, vertical, color: c };
        self.labels.push(label);
    }

    /// Encodes the canvas as an 8-bit RGB PNG (one IDAT chunk, zlib by `miniz_oxide`).
    pub fn png(&self) -> Vec<u8> {
        let mut raw = Vec::with_capacity((3 * self.width + 1) * self.height);
        for row in self.pixels.chunks(3 * self.width.max(1)) {
            raw.push(0); // filter: none
            raw.extend_from_slice(row);
        }
        let mut header = Vec::with_capacity(13);
        header.extend_from_slice(&(self.width as u32).to_be_bytes());
        header.extend_from_slice(&(self.height as u32).to_be_bytes());
        header.extend_from_slice(&[8, 2, 0, 0, 0]); // 8 bits, RGB, deflate, no filter, no interlace
        let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
        chunk(&mut out, b"IHDR", &header);
        chunk(&mut out, b"IDAT", &miniz_oxide::deflate::compress_to_vec_zlib(&raw, 6));
        chunk(&mut out, b"IEND", &[]);
        out
    }
}

/// Appends one PNG chunk: length, type, data, CRC-32 of type and data.
fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320), as PNG chunks carry.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0xEDB8_8320 } else { crc >> 1 };
        }
    }
    !crc
}

/// Width in pixels of `text` at the chart's text scale.
fn text_px(text: &str) -> usize {
    font::text_width(text) * TEXT
}

/// Height in pixels of a line of text.
const LINE_PX: usize = font::HEIGHT * TEXT;

/// One series: a name for the legend and one value per x (or per category); NaN leaves a gap.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend name.
    pub name: String,
    /// Values.
    pub values: Vec<f64>,
}

impl Series {
    /// A series.
    pub fn new(name: &str, values: Vec<f64>) -> Self {
        Self { name: name.to_owned(), values }
    }
}

/// What the x axis holds.
#[derive(Clone, Debug, PartialEq)]
pub enum XAxis {
    /// Numeric positions (line chart).
    Numbers(Vec<f64>),
    /// Named groups (grouped bars).
    Categories(Vec<String>),
}

/// A chart.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// File stem (`<name>.png`).
    pub name: String,
    /// Title above the plot.
    pub title: String,
    /// X-axis title, with units.
    pub x_label: String,
    /// Y-axis title, with units.
    pub y_label: String,
    /// The x axis.
    pub x: XAxis,
    /// The series.
    pub series: Vec<Series>,
    /// Image width (pixels).
    pub width: usize,
    /// Image height (pixels).
    pub height: usize,
}

impl Chart {
    fn new(title: &str, x_label: &str, y_label: &str, x: XAxis) -> Self {
        Self {
            name: slug(title),
            title: title.to_owned(),
            x_label: x_label.to_owned(),
            y_label: y_label.to_owned(),
            x,
            series: Vec::new(),
            width: 1000,
            height: 560,
        }
    }

    /// A line chart (set the x positions with [`Chart::xs`]).
    pub fn line(title: &str, x_label: &str, y_label: &str) -> Self {
        Self::new(title, x_label, y_label, XAxis::Numbers(Vec::new()))
    }

    /// A grouped-bar chart (set the groups with [`Chart::categories`]).
    pub fn bars(title: &str, x_label: &str, y_label: &str) -> Self {
        Self::new(title, x_label, y_label, XAxis::Categories(Vec::new()))
    }

    /// The file stem.
    pub fn named(mut self, name: &str) -> Self {
        self.name = name.to_owned();
        self
    }

    /// The x positions of a line chart.
    pub fn xs(mut self, xs: &[f64]) -> Self {
        self.x = XAxis::Numbers(xs.to_vec());
        self
    }

    /// The groups of a bar chart.
    pub fn categories<S: AsRef<str>>(mut self, names: &[S]) -> Self {
        self.x = XAxis::Categories(names.iter().map(|s| s.as_ref().to_owned()).collect());
        self
    }

    /// Adds a series.
    pub fn series(mut self, s: Series) -> Self {
        self.series.push(s);
        self
    }

    /// The chart drawn on a canvas.
    pub fn render(&self) -> Canvas {
        let mut c = Canvas::new(self.width, self.height);
        let frame = self.frame();
        let (lo, hi) = self.y_range();
        let ticks = nice_ticks(lo, hi, 6);
        let (y0, y1) = (ticks[0], *ticks.last().unwrap_or(&1.0));
        let map_y = |v: f64| frame.bottom as f64 - (v - y0) / (y1 - y0) * frame.plot_height();
        let title_x = (self.width.saturating_sub(text_px(&self.title))) / 2;
        c.text(&self.title, title_x, 12, false, INK);
        for &t in &ticks {
            let y = map_y(t).round() as i64;
            c.line((frame.left as i64, y), (frame.right as i64, y), 1, GRID);
            let label = tick_label(t);
            let lx = frame.left.saturating_sub(10 + text_px(&label));
            c.text(&label, lx, (y as usize).saturating_sub(LINE_PX / 2), false, INK);
        }
        match &self.x {
            XAxis::Numbers(xs) => self.draw_lines(&mut c, &frame, xs, &map_y),
            XAxis::Categories(names) => self.draw_bars(&mut c, &frame, names, &map_y),
        }
        let (l, r, t, b) =
            (frame.left as i64, frame.right as i64, frame.top as i64, frame.bottom as i64);
        c.line((l, t), (l, b), 2, AXIS);
        c.line((l, b), (r, b), 2, AXIS);
        let xl = frame.left + (frame.right - frame.left).saturating_sub(text_px(&self.x_label)) / 2;
        c.text(&self.x_label, xl, self.height - LINE_PX - 12, false, INK);
        let yl = frame.top + (frame.bottom - frame.top + text_px(&self.y_label)) / 2;
        c.text(&self.y_label, 14, yl.min(self.height - 1), true, INK);
        self.draw_legend(&mut c, &frame);
        c
    }

    /// The chart as PNG bytes.
    pub fn png(&self) -> Vec<u8> {
        self.render().png()
    }

    /// Writes `<dir>/<name>.png`; returns the path.
    pub fn write(&self, dir: &Path) -> Result<String, BenchError> {
        let path = dir.join(format!("{}.png", self.name));
        std::fs::write(&path, self.png())
            .map_err(|source| BenchError::Io { path: path.display().to_string(), source })?;
        Ok(path.display().to_string())
    }

    /// Where the plot area is: room for the title, tick labels, axis titles and legend.
    fn frame(&self) -> Frame {
        let legend = self.series.iter().map(|s| text_px(&s.name)).max().unwrap_or(0) + 50;
        Frame {
            left: 14 + LINE_PX + 16 + text_px("-00.0k") + 12,
            right: self.width.saturating_sub(legend + 20).max(200),
            top: 12 + LINE_PX + 24,
            bottom: self.height.saturating_sub(2 * LINE_PX + 40),
        }
    }

    /// The value range to cover: always 0, and every finite value.
    fn y_range(&self) -> (f64, f64) {
        let values = self.series.iter().flat_map(|s| s.values.iter().copied());
        let (lo, hi) = values
            .filter(|v| v.is_finite())
            .fold((0.0f64, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        if hi - lo < 1e-12 { (lo, lo + 1.0) } else { (lo, hi) }
    }

    fn draw_lines(&self, c: &mut Canvas, f: &Frame, xs: &[f64], map_y: &dyn Fn(f64) -> f64) {
        let finite = xs.iter().copied().filter(|x| x.is_finite());
        let (lo, hi) = finite.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
        let (lo, hi) = if lo > hi { (0.0, 1.0) } else { (lo, hi) };
        let ticks = nice_ticks(lo, hi, 8);
        let (x0, x1) = (ticks[0], *ticks.last().unwrap_or(&1.0));
        let width = (f.right - f.left) as f64;
        let map_x = |v: f64| f.left as f64 + (v - x0) / (x1 - x0) * width;
        for &t in &ticks {
            let x = map_x(t).round() as i64;
            c.line((x, f.bottom as i64), (x, f.bottom as i64 + 6), 2, AXIS);
            let label = tick_label(t);
            let lx = (x as usize).saturating_sub(text_px(&label) / 2);
            c.text(&label, lx, f.bottom + 12, false, INK);
        }
        for (i, s) in self.series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let points: Vec<Option<(i64, i64)>> = xs
                .iter()
                .zip(&s.values)
                .map(|(&x, &y)| {
                    (x.is_finite() && y.is_finite())
                        .then(|| (map_x(x).round() as i64, map_y(y).round() as i64))
                })
                .collect();
            for w in points.windows(2) {
                if let [Some(a), Some(b)] = w {
                    c.line(*a, *b, 3, color);
                }
            }
            for &(x, y) in points.iter().flatten() {
                marker(c, x, y, i, color);
            }
        }
    }

    fn draw_bars(&self, c: &mut Canvas, f: &Frame, names: &[String], map_y: &dyn Fn(f64) -> f64) {
        let groups = names.len().max(1);
        let group_w = (f.right - f.left) as f64 / groups as f64;
        let n = self.series.len().max(1);
        let bar_w = (group_w * 0.8 / n as f64).max(1.0);
        let base = map_y(0.0).round() as i64;
        for (g, name) in names.iter().enumerate() {
            let start = f.left as f64 + g as f64 * group_w + group_w * 0.1;
            for (i, s) in self.series.iter().enumerate() {
                let Some(&v) = s.values.get(g).filter(|v| v.is_finite()) else { continue };
                let x0 = (start + i as f64 * bar_w).round() as i64;
                let x1 = (start + (i + 1) as f64 * bar_w).round() as i64 - 2;
                c.rect(x0, map_y(v).round() as i64, x1.max(x0), base, PALETTE[i % PALETTE.len()]);
            }
            let centre = f.left as f64 + (g as f64 + 0.5) * group_w;
            let lx = (centre as usize).saturating_sub(text_px(name) / 2);
            c.text(name, lx, f.bottom + 12, false, INK);
        }
    }

    fn draw_legend(&self, c: &mut Canvas, f: &Frame) {
        let x = f.right + 20;
        for (i, s) in self.series.iter().enumerate() {
            let y = f.top + i * (LINE_PX + 12);
            let color = PALETTE[i % PALETTE.len()];
            let mid = (y + LINE_PX / 2) as i64;
            match self.x {
                XAxis::Numbers(_) => {
                    c.line((x as i64, mid), (x as i64 + 28, mid), 3, color);
                    marker(c, x as i64 + 14, mid, i, color);
                }
                XAxis::Categories(_) => {
                    c.rect(x as i64 + 4, y as i64, x as i64 + 24, y as i64 + LINE_PX as i64, color)
                }
            }
            c.text(&s.name, x + 36, y, false, INK);
        }
    }
}

/// The plot area's edges (pixels).
#[derive(Clone, Copy, Debug)]
struct Frame {
    left: usize,
    right: usize,
    top: usize,
    bottom: usize,
}

impl Frame {
    fn plot_height(&self) -> f64 {
        (self.bottom - self.top) as f64
    }
}

/// A marker of series `i`: squares, diamonds and crosses in turn.
fn marker(c: &mut Canvas, x: i64, y: i64, i: usize, color: Rgb) {
    match i % 3 {
        0 => c.rect(x - 4, y - 4, x + 4, y + 4, color),
        1 => {
            for d in 0..=5 {
                c.rect(x - (5 - d), y - d, x + (5 - d), y + d, color);
            }
        }
        _ => {
            c.line((x - 5, y - 5), (x + 5, y + 5), 3, color);
            c.line((x - 5, y + 5), (x + 5, y - 5), 3, color);
        }
    }
}

/// About `target` round tick values (steps of 1, 2 or 5 × 10^k) covering `[lo, hi]`.
pub fn nice_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    let span = (hi - lo).max(1e-12);
    let raw = span / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(mag);
    // Rounded to the step's decimals, so that 3 × 0.1 is 0.3.
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    let round = |t: f64| format!("{t:.decimals$}").parse::<f64>().unwrap_or(t) + 0.0;
    let first = (lo / step).floor();
    let mut ticks = Vec::new();
    for k in 0..100 {
        let t = (first + f64::from(k)) * step;
        ticks.push(round(t));
        if t >= hi - step * 1e-9 && k >= 1 {
            break;
        }
    }
    ticks
}

/// A short tick label: `0.25`, `40`, `1.5k`, `20k`, `1.2M`.
pub fn tick_label(v: f64) -> String {
    let a = v.abs();
    let (x, suffix) = if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 || (a >= 1e3 && (v / 1e3).fract().abs() < 1e-9) {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}{suffix}")
}

/// A file-name stem from a title: lower case, runs of other characters as `-`.
pub fn slug(title: &str) -> String {
    let mut out = String::new();
    for ch in title.chars() {
        if ch.is_ascii_alphanumeric() {
            out.push(ch.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(bytes: &[u8]) -> (usize, usize, Vec<u8>) {
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().expect("a PNG header");
        let mut buf = vec![0; reader.output_buffer_size().expect("a size")];
        let info = reader.next_frame(&mut buf).expect("one frame");
        assert_eq!((info.color_type, info.bit_depth), (png::ColorType::Rgb, png::BitDepth::Eight));
        buf.truncate(info.buffer_size());
        (info.width as usize, info.height as usize, buf)
    }

    /// Every set font pixel of `label` has the label's colour in the decoded image.
    fn drawn(label: &Label, width: usize, rgb: &[u8]) -> bool {
        let at = |x: usize, y: usize| &rgb[3 * (y * width + x)..3 * (y * width + x) + 3];
        label.text.chars().enumerate().all(|(i, ch)| {
            (0..font::WIDTH).all(|col| {
                (0..font::HEIGHT).all(|row| {
                    let along = (i * font::ADVANCE + col) * label.scale;
                    let (x, y) = if label.vertical {
                        (label.x + row * label.scale, label.y - along - label.scale)
                    } else {
                        (label.x + along, label.y + row * label.scale)
                    };
                    !font::pixel(ch, col, row) || at(x, y) == label.color
                })
            })
        })
    }

    fn check(chart: &Chart) {
        let canvas = chart.render();
        let (w, h, rgb) = decode(&chart.png());
        assert_eq!((w, h), (chart.width, chart.height));
        assert_eq!(rgb, canvas.pixels, "the PNG holds exactly the drawn pixels");
        let inked = rgb.chunks(3).filter(|p| p != &WHITE).count();
        assert!(inked > w * h / 50, "only {inked} non-white pixels");
        for s in &chart.series {
            let label = canvas.labels.iter().find(|l| l.text == s.name).expect("a legend entry");
            assert!(label.x > chart.frame().right, "the legend is right of the plot");
            assert!(drawn(label, w, &rgb), "legend text `{}` is in the image", s.name);
        }
        for text in [&chart.title, &chart.x_label, &chart.y_label] {
            let label = canvas.labels.iter().find(|l| &l.text == text).unwrap();
            assert!(drawn(label, w, &rgb), "`{text}` is in the image");
        }
    }

    #[test]
    fn a_bar_chart_decodes_with_its_legend_and_axis_titles() {
        let chart = Chart::bars("Max throughput", "application", "throughput (req/s)")
            .categories(&["wc", "sd", "aa"])
            .series(Series::new("clasp", vec![4200.0, 3900.0, 5100.0]))
            .series(Series::new("faasflow", vec![900.0, f64::NAN, 4000.0]));
        check(&chart);
        // The tallest bar reaches near the top of the plot in the first series' colour.
        let canvas = chart.render();
        let f = chart.frame();
        let column: Vec<Rgb> = (f.top..f.bottom).map(|y| canvas.get(f.right - 60, y)).collect();
        assert!(column.contains(&PALETTE[0]) || column.contains(&PALETTE[1]));
    }

    #[test]
    fn a_line_chart_decodes_with_its_legend() {
        let chart = Chart::line("Workers by rate", "input rate (% of max)", "workers")
            .xs(&[10.0, 20.0, 30.0, 40.0])
            .series(Series::new("OOWC", vec![1.0, 2.0, 3.0, 4.0]))
            .series(Series::new("clasp", vec![1.0, 2.0, f64::NAN, 5.0]));
        check(&chart);
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(nice_ticks(0.0, 10.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let t = nice_ticks(0.0, 4321.0, 6);
        assert_eq!(t[1] - t[0], 1000.0);
        assert!(*t.last().unwrap() >= 4321.0);
        assert_eq!(nice_ticks(0.0, 0.37, 4), vec![0.0, 0.1, 0.2, 0.3, 0.4]);
        assert_eq!(
            [0.25, 40.0, 1500.0, 2000.0, 20_000.0, 1.2e6].map(tick_label),
            ["0.25", "40", "1500", "2k", "20k", "1.2M"]
        );
        assert_eq!(slug("p95 latency (ms), 10 workers"), "p95-latency-ms-10-workers");
        assert_eq!(crc32(b"IEND"), 0xAE42_6082);
    }
}
