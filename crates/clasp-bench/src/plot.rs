//! PNG charts, drawn by `plotters` (its bitmap backend, text in the bundled DejaVu Sans
//! through `ab_glyph`) and encoded by `png`.
//!
//! Three kinds of chart: **line** charts (numeric x, one line with markers per series; a NaN
//! leaves a gap), **grouped bars** (one group per category, one bar per series) and
//! **scatter** charts (each series its own points, markers only). Every chart has a title,
//! axis titles (with units), tick labels, horizontal grid lines and a legend to the right of
//! the plot area; a line or scatter chart's y axis may be logarithmic (ticks at decades).
//!
//! ```
//! use clasp_bench::plot::{Chart, Series};
//! let chart = Chart::bars("Throughput on 10 workers", "application", "throughput (req/s)")
//!     .categories(&["wc", "sd"])
//!     .series(Series::new("clasp", vec![4200.0, 3900.0]))
//!     .series(Series::new("faasflow", vec![900.0, 2500.0]));
//! let png = chart.png().unwrap();
//! assert_eq!(&png[1..4], b"PNG");
//! ```

use crate::BenchError;
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;
use std::sync::OnceLock;

/// Series colours (Okabe–Ito, distinguishable with common colour-vision deficiencies).
pub const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(213, 94, 0),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(120, 120, 120),
    RGBColor(240, 228, 66),
];

const INK: RGBColor = RGBColor(30, 30, 30);
const GRID: RGBColor = RGBColor(225, 225, 225);

/// The font family every text is drawn in.
const FONT: &str = "sans-serif";
/// DejaVu Sans (licence: `fonts/LICENSE-DejaVu.txt`).
const FONT_BYTES: &[u8] = include_bytes!("../fonts/DejaVuSans.ttf");

const TITLE_PX: u32 = 22;
const LABEL_PX: u32 = 17;
const TICK_PX: u32 = 14;
/// A scatter marker's half width: a marker is all a scatter series draws.
const SCATTER_MARKER_PX: i32 = 7;
/// Room right of the plot for the legend: swatch, gap, then the longest name.
const LEGEND_SWATCH_PX: i32 = 28;

/// Registers the bundled font once; drawing text fails without it.
fn font() -> Result<(), BenchError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = REGISTERED.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, FONT_BYTES).is_ok()
    });
    if *ok { Ok(()) } else { Err(BenchError::Font) }
}

/// One series: a name for the legend and one value per x (or per category); NaN leaves a gap.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend name.
    pub name: String,
    /// Values.
    pub values: Vec<f64>,
    /// A scatter series' x position of each value (empty otherwise).
    pub xs: Vec<f64>,
}

impl Series {
    /// A series.
    pub fn new(name: &str, values: Vec<f64>) -> Self {
        Self { name: name.to_owned(), values, xs: Vec::new() }
    }

    /// A scatter series of `(x, y)` points.
    pub fn points(name: &str, points: &[(f64, f64)]) -> Self {
        let (xs, values) = points.iter().copied().unzip();
        Self { name: name.to_owned(), values, xs }
    }
}

/// What the x axis holds.
#[derive(Clone, Debug, PartialEq)]
pub enum XAxis {
    /// Numeric positions (line chart).
    Numbers(Vec<f64>),
    /// Named groups (grouped bars).
    Categories(Vec<String>),
    /// Each series' own positions (scatter).
    PerSeries,
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
    /// Whether the y axis is logarithmic (line and scatter charts; non-positive values are
    /// left out).
    pub log_y: bool,
    /// Image width (pixels).
    pub width: u32,
    /// Image height (pixels).
    pub height: u32,
}

/// A chart with numeric axes on a backend.
type Plot2d<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

impl Chart {
    fn new(title: &str, x_label: &str, y_label: &str, x: XAxis) -> Self {
        Self {
            name: slug(title),
            title: title.to_owned(),
            x_label: x_label.to_owned(),
            y_label: y_label.to_owned(),
            x,
            series: Vec::new(),
            log_y: false,
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

    /// A scatter chart (add series with [`Series::points`]).
    pub fn scatter(title: &str, x_label: &str, y_label: &str) -> Self {
        Self::new(title, x_label, y_label, XAxis::PerSeries)
    }

    /// A logarithmic y axis.
    pub fn log_y(mut self) -> Self {
        self.log_y = true;
        self
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

    /// The chart as row-major RGB pixels, `width` × `height`.
    pub fn rgb(&self) -> Result<Vec<u8>, BenchError> {
        font()?;
        let mut pixels = vec![255u8; 3 * self.width as usize * self.height as usize];
        {
            let root = BitMapBackend::with_buffer(&mut pixels, (self.width, self.height))
                .into_drawing_area();
            self.draw(&root).map_err(|e| self.error(e))?;
            root.present().map_err(|e| self.error(e))?;
        }
        Ok(pixels)
    }

    /// A drawing error as this chart's.
    fn error<E>(&self, e: DrawingAreaErrorKind<E>) -> BenchError
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        BenchError::Plot { chart: self.name.clone(), source: Box::new(e) }
    }

    /// The chart as PNG bytes.
    pub fn png(&self) -> Result<Vec<u8>, BenchError> {
        let pixels = self.rgb()?;
        let mut out = Vec::new();
        let mut encoder = png::Encoder::new(&mut out, self.width, self.height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let encoded = encoder.write_header().and_then(|mut w| w.write_image_data(&pixels));
        encoded.map_err(|e| BenchError::Plot { chart: self.name.clone(), source: Box::new(e) })?;
        Ok(out)
    }

    /// Writes `<dir>/<name>.png`; returns the path.
    pub fn write(&self, dir: &Path) -> Result<String, BenchError> {
        let path = dir.join(format!("{}.png", self.name));
        std::fs::write(&path, self.png()?)
            .map_err(|source| BenchError::Io { path: path.display().to_string(), source })?;
        Ok(path.display().to_string())
    }

    /// Pixels right of the plot area the legend takes.
    fn legend_width(&self) -> u32 {
        let longest = self.series.iter().map(|s| s.name.chars().count()).max().unwrap_or(0);
        // DejaVu Sans averages about 0.55 em per character.
        (longest as f64 * f64::from(LABEL_PX) * 0.55) as u32 + LEGEND_SWATCH_PX as u32 + 40
    }

    /// Where value `v` is drawn on the y axis: itself, or its decade on a logarithmic axis;
    /// `None` for a value that cannot be drawn.
    fn y_of(&self, v: f64) -> Option<f64> {
        if self.log_y {
            (v > 0.0 && v.is_finite()).then(|| v.log10())
        } else {
            v.is_finite().then_some(v)
        }
    }

    /// The range to cover on the y axis: 0 and every value with a little room above, or on a
    /// logarithmic axis the whole decades around the values.
    fn y_range(&self) -> (f64, f64) {
        let values = self.series.iter().flat_map(|s| s.values.iter().copied());
        let drawn = values.filter_map(|v| self.y_of(v));
        if self.log_y {
            let (lo, hi) = drawn.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
            if lo > hi {
                return (0.0, 1.0);
            }
            return (lo.floor(), hi.ceil().max(lo.floor() + 1.0));
        }
        let (lo, hi) = drawn.fold((0.0f64, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
        if hi - lo < 1e-12 { (lo, lo + 1.0) } else { (lo, hi + 0.05 * (hi - lo)) }
    }

    /// The x range of a scatter chart: every point, with a little room on both sides.
    fn x_range_of_points(&self) -> (f64, f64) {
        let xs = self.series.iter().flat_map(|s| s.xs.iter().copied()).filter(|x| x.is_finite());
        let (lo, hi) = xs.fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(x), hi.max(x)));
        if lo > hi {
            return (0.0, 1.0);
        }
        let pad = ((hi - lo) * 0.08).max(0.1);
        (lo - pad, hi + pad)
    }

    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        root.fill(&WHITE)?;
        let (plot, legend) = root.split_horizontally(self.width - self.legend_width());
        let (y0, y1) = self.y_range();
        let mut builder = ChartBuilder::on(&plot);
        builder
            .caption(&self.title, (FONT, TITLE_PX).into_font().color(&INK))
            .margin(12)
            .x_label_area_size(if matches!(self.x, XAxis::Categories(_)) { 56 } else { 48 })
            .y_label_area_size(72);
        match &self.x {
            XAxis::Numbers(xs) => {
                let finite = xs.iter().copied().filter(|x| x.is_finite());
                let (lo, hi) = finite.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
                let (lo, hi) = if lo > hi {
                    (0.0, 1.0)
                } else if lo == hi {
                    (lo - 1.0, hi + 1.0)
                } else {
                    (lo, hi)
                };
                let mut chart = builder.build_cartesian_2d(lo..hi, y0..y1)?;
                self.mesh(&mut chart, xs.len().clamp(2, 12))?;
                self.draw_lines(&mut chart, xs)?;
            }
            XAxis::PerSeries => {
                let (lo, hi) = self.x_range_of_points();
                let mut chart = builder.build_cartesian_2d(lo..hi, y0..y1)?;
                self.mesh(&mut chart, 10)?;
                for (i, s) in self.series.iter().enumerate() {
                    let at = s.xs.iter().zip(&s.values).filter_map(|(&x, &y)| {
                        x.is_finite().then_some(())?;
                        Some((x, self.y_of(y)?))
                    });
                    draw_markers(&mut chart, i, SCATTER_MARKER_PX, at)?;
                }
            }
            XAxis::Categories(names) => {
                let n = names.len().max(1) as f64;
                let mut chart = builder.build_cartesian_2d(0.0..n, y0..y1)?;
                self.mesh(&mut chart, 0)?;
                self.draw_bars(&mut chart, names)?;
                let style =
                    (FONT, TICK_PX).into_font().color(&INK).pos(Pos::new(HPos::Center, VPos::Top));
                for (i, name) in names.iter().enumerate() {
                    let (x, y) = chart.backend_coord(&(i as f64 + 0.5, y0));
                    plot.draw(&Text::new(name.clone(), (x, y + 8), style.clone()))?;
                }
            }
        }
        self.draw_legend(&legend)
    }

    /// Axes, grid lines, tick labels and axis titles (`x_ticks` 0: no x tick labels).
    fn mesh<DB: DrawingBackend>(
        &self,
        chart: &mut Plot2d<'_, DB>,
        x_ticks: usize,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let log_y = self.log_y;
        let y_fmt = |v: &f64| tick_label(if log_y { 10f64.powf(*v) } else { *v });
        let x_fmt = |v: &f64| tick_label(*v);
        // On a logarithmic axis a label per decade: the range is whole decades.
        let (y0, y1) = self.y_range();
        let y_labels = if log_y { (y1 - y0).round() as usize + 1 } else { 7 };
        let mut mesh = chart.configure_mesh();
        mesh.disable_x_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID)
            .y_labels(y_labels)
            .y_label_formatter(&y_fmt)
            .x_label_formatter(&x_fmt)
            .x_desc(&self.x_label)
            .y_desc(&self.y_label)
            .axis_desc_style((FONT, LABEL_PX).into_font().color(&INK))
            .label_style((FONT, TICK_PX).into_font().color(&INK));
        if x_ticks == 0 {
            mesh.x_labels(0);
        } else {
            mesh.x_labels(x_ticks);
        }
        mesh.draw()
    }

    fn draw_lines<DB: DrawingBackend>(
        &self,
        chart: &mut Plot2d<'_, DB>,
        xs: &[f64],
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        for (i, s) in self.series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let points: Vec<Option<(f64, f64)>> = xs
                .iter()
                .zip(&s.values)
                .map(|(&x, &y)| Some((x, self.y_of(y)?)).filter(|_| x.is_finite()))
                .collect();
            // A NaN breaks the line: each run of finite points is one line.
            for run in points.split(Option::is_none) {
                let run: Vec<(f64, f64)> = run.iter().flatten().copied().collect();
                chart.draw_series(LineSeries::new(run, color.stroke_width(3)))?;
            }
            draw_markers(chart, i, 4, points.iter().flatten().copied())?;
        }
        Ok(())
    }

    fn draw_bars<DB: DrawingBackend>(
        &self,
        chart: &mut Plot2d<'_, DB>,
        names: &[String],
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let n = self.series.len().max(1) as f64;
        let width = 0.8 / n;
        for (i, s) in self.series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let bars = (0..names.len()).filter_map(|g| {
                let v = *s.values.get(g).filter(|v| v.is_finite())?;
                let x0 = g as f64 + 0.1 + i as f64 * width;
                Some(Rectangle::new([(x0, 0.0), (x0 + width * 0.92, v)], color.filled()))
            });
            chart.draw_series(bars)?;
        }
        Ok(())
    }

    fn draw_legend<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
    ) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let style =
            (FONT, LABEL_PX).into_font().color(&INK).pos(Pos::new(HPos::Left, VPos::Center));
        for (i, s) in self.series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let y = 60 + i as i32 * (LABEL_PX as i32 + 12);
            match self.x {
                XAxis::Numbers(_) => {
                    area.draw(&PathElement::new(
                        vec![(4, y), (4 + LEGEND_SWATCH_PX, y)],
                        color.stroke_width(3),
                    ))?;
                }
                XAxis::PerSeries => {
                    let (x, size) = (4 + LEGEND_SWATCH_PX / 2, SCATTER_MARKER_PX);
                    match i % 3 {
                        0 => area.draw(&Rectangle::new(
                            [(x - size, y - size), (x + size, y + size)],
                            color.filled(),
                        ))?,
                        1 => area.draw(&Circle::new((x, y), size + 1, color.filled()))?,
                        _ => area.draw(&TriangleMarker::new((x, y), size + 2, color.filled()))?,
                    }
                }
                XAxis::Categories(_) => {
                    area.draw(&Rectangle::new(
                        [(4, y - 7), (4 + LEGEND_SWATCH_PX, y + 7)],
                        color.filled(),
                    ))?;
                }
            }
            area.draw(&Text::new(s.name.clone(), (LEGEND_SWATCH_PX + 12, y), style.clone()))?;
        }
        Ok(())
    }
}

/// Series `i`'s markers at `at`, `size` pixels from their centre to a side: squares, circles
/// and triangles in turn, so that series differ without colour.
fn draw_markers<DB: DrawingBackend>(
    chart: &mut Plot2d<'_, DB>,
    i: usize,
    size: i32,
    at: impl Iterator<Item = (f64, f64)>,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let color = PALETTE[i % PALETTE.len()];
    let square = [(-size, -size), (size, size)];
    match i % 3 {
        0 => chart.draw_series(
            at.map(|p| EmptyElement::at(p) + Rectangle::new(square, color.filled())),
        )?,
        1 => chart.draw_series(at.map(|p| Circle::new(p, size + 1, color.filled())))?,
        _ => chart.draw_series(at.map(|p| TriangleMarker::new(p, size + 2, color.filled())))?,
    };
    Ok(())
}

/// A short tick label: `0.25`, `40`, `1500`, `2k`, `20k`, `1.2M`.
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

    /// Decodes a PNG with the `png` crate: width, height, RGB pixels.
    fn decode(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().expect("a PNG header");
        let mut buf = vec![0; reader.output_buffer_size().expect("a size")];
        let info = reader.next_frame(&mut buf).expect("one frame");
        assert_eq!((info.color_type, info.bit_depth), (png::ColorType::Rgb, png::BitDepth::Eight));
        buf.truncate(info.buffer_size());
        (info.width, info.height, buf)
    }

    /// Pixels in rows `rows` and columns `cols` that are not white.
    fn inked(
        c: &Chart,
        rgb: &[u8],
        rows: std::ops::Range<u32>,
        cols: std::ops::Range<u32>,
    ) -> usize {
        let w = c.width as usize;
        rows.flat_map(|y| cols.clone().map(move |x| (x as usize, y as usize)))
            .filter(|&(x, y)| rgb[3 * (y * w + x)..3 * (y * w + x) + 3] != [255, 255, 255])
            .count()
    }

    /// Whether colour `c` appears in columns `cols`.
    fn has_colour(chart: &Chart, rgb: &[u8], cols: std::ops::Range<u32>, c: RGBColor) -> bool {
        let w = chart.width as usize;
        (0..chart.height as usize).any(|y| {
            cols.clone().any(|x| {
                let i = 3 * (y * w + x as usize);
                rgb[i..i + 3] == [c.0, c.1, c.2]
            })
        })
    }

    fn check(chart: &Chart) {
        let png = chart.png().unwrap();
        let (w, h, rgb) = decode(&png);
        assert_eq!((w, h), (chart.width, chart.height));
        assert_eq!(rgb, chart.rgb().unwrap(), "the PNG holds exactly the drawn pixels");
        let all = inked(chart, &rgb, 0..h, 0..w);
        assert!(all > (w * h / 100) as usize, "only {all} non-white pixels");
        // The title is text in the top band; without it the band is empty.
        let untitled = Chart { title: String::new(), ..chart.clone() };
        let band = 0..30;
        assert!(inked(chart, &rgb, band.clone(), 0..w) > 100, "the title is drawn");
        assert_eq!(inked(&untitled, &untitled.rgb().unwrap(), band, 0..w), 0, "nothing else is");
        // Each series' colour is in the legend, right of the plot.
        let legend = w - chart.legend_width()..w;
        for (i, colour) in PALETTE.iter().take(chart.series.len()).enumerate() {
            assert!(has_colour(chart, &rgb, legend.clone(), *colour), "legend swatch {i}");
        }
        // The axis titles are text: without them fewer pixels are inked.
        let bare = Chart { x_label: String::new(), y_label: String::new(), ..chart.clone() };
        assert!(inked(&bare, &bare.rgb().unwrap(), 0..h, 0..w) < all, "axis titles are drawn");
    }

    #[test]
    fn a_bar_chart_decodes_with_its_bars_legend_and_titles() {
        let chart = Chart::bars("Max throughput", "application", "throughput (req/s)")
            .categories(&["wc", "sd", "aa"])
            .series(Series::new("clasp", vec![4200.0, 3900.0, 5100.0]))
            .series(Series::new("faasflow", vec![900.0, f64::NAN, 4000.0]));
        check(&chart);
        let rgb = chart.rgb().unwrap();
        let plot = 0..chart.width - chart.legend_width();
        assert!(has_colour(&chart, &rgb, plot.clone(), PALETTE[0]), "the first series' bars");
        assert!(has_colour(&chart, &rgb, plot, PALETTE[1]), "the second series' bars");
    }

    #[test]
    fn a_line_chart_decodes_with_its_lines_and_legend() {
        let chart = Chart::line("Workers by rate", "input rate (% of max)", "workers")
            .xs(&[10.0, 20.0, 30.0, 40.0])
            .series(Series::new("OOWC", vec![1.0, 2.0, 3.0, 4.0]))
            .series(Series::new("clasp", vec![1.0, 2.0, f64::NAN, 5.0]));
        check(&chart);
    }

    #[test]
    fn a_scatter_chart_draws_each_series_points_on_a_log_axis() {
        let chart = Chart::scatter("p95 against workers", "mean workers", "p95 latency (ms)")
            .log_y()
            .series(Series::points("clasp", &[(2.2, 2.5)]))
            .series(Series::points("b", &[(1.7, 88.0), (1.9, 0.0)]))
            .series(Series::points("c", &[(3.0, 6_000.0)]));
        check(&chart);
        // Whole decades around 2.5 ms and 6 s; the 0 ms point cannot be drawn and is left out.
        assert_eq!(chart.y_range(), (0.0, 4.0));
        let rgb = chart.rgb().unwrap();
        let plot = 0..chart.width - chart.legend_width();
        for (i, colour) in PALETTE.iter().take(3).enumerate() {
            assert!(has_colour(&chart, &rgb, plot.clone(), *colour), "series {i}'s marker");
        }
        // Higher values are drawn higher: b's 88 ms above clasp's 2.5 ms.
        let top_row = |colour: RGBColor| {
            let w = chart.width as usize;
            (0..chart.height as usize).find(|&y| {
                plot.clone()
                    .any(|x| rgb[3 * (y * w + x as usize)..][..3] == [colour.0, colour.1, colour.2])
            })
        };
        assert!(top_row(PALETTE[1]) < top_row(PALETTE[0]));
    }

    #[test]
    fn a_chart_without_values_still_draws() {
        let chart = Chart::bars("Nothing yet", "app", "req/s").series(Series::new("a", vec![]));
        assert_eq!(decode(&chart.png().unwrap()).0, chart.width);
    }

    #[test]
    fn labels_are_short_and_slugs_are_file_names() {
        assert_eq!(
            [0.25, 40.0, 1500.0, 2000.0, 20_000.0, 1.2e6].map(tick_label),
            ["0.25", "40", "1500", "2k", "20k", "1.2M"]
        );
        assert_eq!(slug("p95 latency (ms), 10 workers"), "p95-latency-ms-10-workers");
    }
}
