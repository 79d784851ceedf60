//! Hand-written SVG chart primitives: linear and logarithmic scales with readable
//! ticks, axes with labels and units, step and line series, shaded intervals,
//! points and horizontal bars. Colours come from CSS classes (see `page.rs`), so one
//! chart reads in light and dark schemes alike.

use std::fmt::Write as _;

/// Escapes text for HTML and SVG content and attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// A coordinate rounded to 0.1 px: enough for any screen, and keeps pages small.
fn c(v: f64) -> String {
    let r = (v * 10.0).round() / 10.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r:.1}")
    }
}

/// How a scale maps data to pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScaleKind {
    /// Proportional.
    Linear,
    /// Proportional in log10 (domain must be positive).
    Log,
}

/// A map from a data domain to a pixel range.
#[derive(Clone, Copy, Debug)]
pub struct Scale {
    kind: ScaleKind,
    d0: f64,
    d1: f64,
    r0: f64,
    r1: f64,
}

impl Scale {
    fn tf(&self, v: f64) -> f64 {
        match self.kind {
            ScaleKind::Linear => v,
            ScaleKind::Log => v.max(f64::MIN_POSITIVE).log10(),
        }
    }

    /// The pixel position of a data value (values outside the domain map outside
    /// the range; charts clip them).
    pub fn map(&self, v: f64) -> f64 {
        let (a, b) = (self.tf(self.d0), self.tf(self.d1));
        if b == a {
            return (self.r0 + self.r1) / 2.0;
        }
        self.r0 + (self.tf(v) - a) / (b - a) * (self.r1 - self.r0)
    }
}

/// The data range and presentation of one axis.
#[derive(Clone, Debug)]
pub struct Axis {
    /// Label with its unit, e.g. `time since run start (s)`.
    pub label: String,
    /// Smallest value shown.
    pub min: f64,
    /// Largest value shown.
    pub max: f64,
    /// Linear or logarithmic.
    pub kind: ScaleKind,
    /// Whether ticks are whole numbers only (counts).
    pub integer: bool,
    /// Whether the axis runs the other way (for y: the minimum at the top).
    pub reversed: bool,
}

impl Axis {
    /// A linear axis over `[min, max]`, widened when empty so it has some extent.
    pub fn linear(label: impl Into<String>, min: f64, max: f64) -> Axis {
        let (min, max) = widen(min, max);
        Axis {
            label: label.into(),
            min,
            max,
            kind: ScaleKind::Linear,
            integer: false,
            reversed: false,
        }
    }

    /// A log axis over `[min, max]` (both > 0), rounded out to whole decades.
    pub fn log(label: impl Into<String>, min: f64, max: f64) -> Axis {
        let lo = 10f64.powf(min.max(1e-12).log10().floor());
        let mut hi = 10f64.powf(max.max(lo).log10().ceil());
        if hi <= lo {
            hi = lo * 10.0;
        }
        Axis {
            label: label.into(),
            min: lo,
            max: hi,
            kind: ScaleKind::Log,
            integer: false,
            reversed: false,
        }
    }

    /// Ticks in whole numbers only.
    pub fn integer(mut self) -> Axis {
        self.integer = true;
        self
    }

    /// Runs the axis the other way (for y: the minimum at the top).
    pub fn reversed(mut self) -> Axis {
        self.reversed = true;
        self
    }

    /// Extends the maximum to the next tick, so lines do not touch the frame top.
    pub fn nice(mut self) -> Axis {
        if self.kind == ScaleKind::Linear {
            let step = nice_step((self.max - self.min) / 5.0, self.integer);
            self.max = (self.max / step).ceil() * step;
            self.min = (self.min / step).floor() * step;
        }
        self
    }

    fn ticks(&self) -> Vec<f64> {
        match self.kind {
            ScaleKind::Linear => {
                let step = nice_step((self.max - self.min) / 5.0, self.integer);
                let first = (self.min / step).ceil() as i64;
                let last = (self.max / step + 1e-9).floor() as i64;
                (first..=last).map(|i| i as f64 * step).collect()
            }
            ScaleKind::Log => {
                let (a, b) = (
                    self.min.log10().round() as i32,
                    self.max.log10().round() as i32,
                );
                let decades = b - a;
                let mut out = Vec::new();
                for e in a..=b {
                    let base = 10f64.powi(e);
                    out.push(base);
                    if decades <= 2 && e < b {
                        out.push(2.0 * base);
                        out.push(5.0 * base);
                    }
                }
                out
            }
        }
    }
}

fn widen(min: f64, max: f64) -> (f64, f64) {
    let (min, max) = if min.is_finite() && max.is_finite() {
        (min, max)
    } else {
        (0.0, 1.0)
    };
    if max > min {
        (min, max)
    } else if max == 0.0 {
        (0.0, 1.0)
    } else {
        let pad = max.abs() * 0.1;
        (min - pad, max + pad)
    }
}

/// A step of 1, 2 or 5 × 10^k near `raw` (at least 1 for integer axes).
fn nice_step(raw: f64, integer: bool) -> f64 {
    if raw.is_nan() || raw <= 0.0 || raw.is_infinite() {
        return 1.0;
    }
    let mag = 10f64.powf(raw.log10().floor());
    let f = raw / mag;
    let step = if f < 1.5 {
        1.0
    } else if f < 3.5 {
        2.0
    } else if f < 7.5 {
        5.0
    } else {
        10.0
    } * mag;
    if integer { step.max(1.0).round() } else { step }
}

/// A tick label: as few digits as tell the ticks apart, thousands as `k`, millions as `M`.
pub fn tick_label(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        return format!("{}M", trim(v / 1e6, 2));
    }
    if a >= 1e4 {
        return format!("{}k", trim(v / 1e3, 1));
    }
    if a == 0.0 {
        return "0".into();
    }
    if a >= 1.0 {
        return trim(v, 2);
    }
    let digits = (-a.log10()).ceil() as usize + 1;
    trim(v, digits.min(9))
}

fn trim(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// Chart geometry: the SVG viewBox size and the plot area's margins.
#[derive(Clone, Copy, Debug)]
pub struct Geometry {
    /// viewBox width.
    pub width: f64,
    /// viewBox height.
    pub height: f64,
    /// Space left of the plot (y tick labels and axis label).
    pub left: f64,
    /// Space right of the plot.
    pub right: f64,
    /// Space above the plot.
    pub top: f64,
    /// Space below the plot (x tick labels and axis label).
    pub bottom: f64,
}

impl Geometry {
    /// The usual chart: 960 × `height`.
    pub fn standard(height: f64) -> Geometry {
        Geometry {
            width: 960.0,
            height,
            left: 72.0,
            right: 20.0,
            top: 14.0,
            bottom: 50.0,
        }
    }

    /// A narrower chart for two-up grids.
    pub fn half(height: f64) -> Geometry {
        Geometry {
            width: 470.0,
            ..Geometry::standard(height)
        }
    }
}

/// One SVG chart being drawn: frame, axes and grid first, then layers clipped to the
/// plot area.
pub struct Chart {
    id: String,
    geo: Geometry,
    x: Scale,
    y: Scale,
    head: String,
    body: String,
    empty: bool,
}

impl Chart {
    /// Starts a chart with id `id` (unique on the page), described by `title` for
    /// screen readers, on axes `x` and `y`.
    pub fn new(id: &str, title: &str, geo: Geometry, x: &Axis, y: &Axis) -> Chart {
        let (px0, px1) = (geo.left, geo.width - geo.right);
        let (py0, py1) = (geo.height - geo.bottom, geo.top);
        let ends = |a: &Axis, r0: f64, r1: f64| if a.reversed { (r1, r0) } else { (r0, r1) };
        let (xr0, xr1) = ends(x, px0, px1);
        let (yr0, yr1) = ends(y, py0, py1);
        let xs = Scale {
            kind: x.kind,
            d0: x.min,
            d1: x.max,
            r0: xr0,
            r1: xr1,
        };
        let ys = Scale {
            kind: y.kind,
            d0: y.min,
            d1: y.max,
            r0: yr0,
            r1: yr1,
        };
        let mut head = String::new();
        let _ = write!(
            head,
            r#"<svg class="chart" id="{id}" viewBox="0 0 {w} {h}" role="img" aria-labelledby="{id}-t" preserveAspectRatio="xMidYMid meet"><title id="{id}-t">{title}</title><defs><clipPath id="{id}-clip"><rect x="{x}" y="{y}" width="{cw}" height="{ch}"/></clipPath></defs>"#,
            id = esc(id),
            w = c(geo.width),
            h = c(geo.height),
            title = esc(title),
            x = c(px0),
            y = c(py1),
            cw = c(px1 - px0),
            ch = c(py0 - py1),
        );
        // Grid and ticks.
        head.push_str(r#"<g class="grid">"#);
        for t in x.ticks() {
            let px = xs.map(t);
            let _ = write!(
                head,
                r#"<line x1="{0}" y1="{1}" x2="{0}" y2="{2}"/>"#,
                c(px),
                c(py1),
                c(py0)
            );
        }
        for t in y.ticks() {
            let py = ys.map(t);
            let _ = write!(
                head,
                r#"<line x1="{1}" y1="{0}" x2="{2}" y2="{0}"/>"#,
                c(py),
                c(px0),
                c(px1)
            );
        }
        head.push_str("</g>");
        head.push_str(r#"<g class="axis">"#);
        let _ = write!(
            head,
            r#"<rect class="frame" x="{}" y="{}" width="{}" height="{}"/>"#,
            c(px0),
            c(py1),
            c(px1 - px0),
            c(py0 - py1)
        );
        for t in x.ticks() {
            let _ = write!(
                head,
                r#"<text class="tick" x="{}" y="{}" text-anchor="middle">{}</text>"#,
                c(xs.map(t)),
                c(py0 + 16.0),
                esc(&tick_label(t))
            );
        }
        for t in y.ticks() {
            let _ = write!(
                head,
                r#"<text class="tick" x="{}" y="{}" text-anchor="end">{}</text>"#,
                c(px0 - 6.0),
                c(ys.map(t) + 4.0),
                esc(&tick_label(t))
            );
        }
        let _ = write!(
            head,
            r#"<text class="label" x="{}" y="{}" text-anchor="middle">{}</text>"#,
            c((px0 + px1) / 2.0),
            c(geo.height - 10.0),
            esc(&x.label)
        );
        let _ = write!(
            head,
            r#"<text class="label" transform="translate({} {}) rotate(-90)" text-anchor="middle">{}</text>"#,
            c(16.0),
            c((py0 + py1) / 2.0),
            esc(&y.label)
        );
        head.push_str("</g>");
        Chart {
            id: id.to_string(),
            geo,
            x: xs,
            y: ys,
            head,
            body: String::new(),
            empty: false,
        }
    }

    /// The x pixel of a data value.
    pub fn px(&self, v: f64) -> f64 {
        self.x.map(v)
    }

    /// The y pixel of a data value.
    pub fn py(&self, v: f64) -> f64 {
        self.y.map(v)
    }

    /// Shades vertical bands over `[x0, x1]` intervals across the plot's height,
    /// each with a hover text.
    pub fn vbands(&mut self, class: &str, bands: &[(f64, f64)], hover: &str) {
        let (top, bottom) = (self.geo.top, self.geo.height - self.geo.bottom);
        let _ = write!(
            self.body,
            r#"<g class="{}"><title>{}</title><path d=""#,
            esc(class),
            esc(hover)
        );
        for (a, b) in bands {
            let (xa, xb) = (self.px(*a), self.px(*b));
            // At least 0.5 px wide, so a short gap still shows.
            let w = (xb - xa).max(0.5);
            let _ = write!(
                self.body,
                "M{} {}h{}V{}h-{}Z",
                c(xa),
                c(top),
                c(w),
                c(bottom),
                c(w)
            );
        }
        self.body.push_str(r#""/></g>"#);
    }

    /// A marked x range with a caption at its top (e.g. the steady-state window);
    /// `row` moves the caption down by rows, so two ranges' captions do not collide.
    pub fn xrange(&mut self, class: &str, x0: f64, x1: f64, caption: &str, row: usize) {
        let (top, bottom) = (self.geo.top, self.geo.height - self.geo.bottom);
        let (xa, xb) = (self.px(x0), self.px(x1));
        let _ = write!(
            self.body,
            r#"<g class="{cl}"><title>{cap}</title><rect x="{x}" y="{y}" width="{w}" height="{h}"/><line x1="{x}" y1="{y}" x2="{x}" y2="{b}"/><line x1="{xb}" y1="{y}" x2="{xb}" y2="{b}"/><text x="{tx}" y="{ty}" text-anchor="middle">{cap}</text></g>"#,
            cl = esc(class),
            cap = esc(caption),
            x = c(xa),
            xb = c(xb),
            y = c(top),
            b = c(bottom),
            w = c((xb - xa).max(0.5)),
            h = c(bottom - top),
            tx = c((xa + xb) / 2.0),
            ty = c(top + 13.0 + 15.0 * row as f64),
        );
    }

    fn path_d(&self, pts: &[(f64, f64)], step: bool) -> String {
        let mut d = String::with_capacity(pts.len() * 14);
        let mut prev_y = None;
        for (i, (x, y)) in pts.iter().enumerate() {
            let (px, py) = (self.px(*x), self.py(*y));
            if i == 0 {
                let _ = write!(d, "M{} {}", c(px), c(py));
            } else if step {
                // Hold the previous value until this x, then jump.
                let _ = write!(d, "H{}", c(px));
                if prev_y != Some(py) {
                    let _ = write!(d, "V{}", c(py));
                }
            } else {
                let _ = write!(d, "L{} {}", c(px), c(py));
            }
            prev_y = Some(py);
        }
        d
    }

    /// A line through points (x ascending); `step` holds each value until the next x.
    pub fn line(&mut self, class: &str, pts: &[(f64, f64)], step: bool) {
        if pts.is_empty() {
            return;
        }
        let d = self.path_d(pts, step);
        let _ = write!(
            self.body,
            r#"<path class="line {}" clip-path="url(#{}-clip)" d="{}"/>"#,
            esc(class),
            esc(&self.id),
            d
        );
    }

    /// A filled band between `lower` and `upper` step series sharing x values.
    pub fn step_band(&mut self, class: &str, xs: &[f64], lower: &[f64], upper: &[f64]) {
        let n = xs.len().min(lower.len()).min(upper.len());
        if n == 0 {
            return;
        }
        let up: Vec<(f64, f64)> = (0..n).map(|i| (xs[i], upper[i])).collect();
        let mut d = self.path_d(&up, true);
        // Back along the lower edge, holding each value until the next x.
        for i in (0..n).rev() {
            let next_x = if i + 1 < n { xs[i + 1] } else { xs[i] };
            let _ = write!(
                d,
                "L{} {}H{}",
                c(self.px(next_x)),
                c(self.py(lower[i])),
                c(self.px(xs[i]))
            );
        }
        d.push('Z');
        let _ = write!(
            self.body,
            r#"<path class="band {}" clip-path="url(#{}-clip)" d="{}"/>"#,
            esc(class),
            esc(&self.id),
            d
        );
    }

    /// Points (scatter) of radius `radius` px.
    pub fn points(&mut self, class: &str, pts: &[(f64, f64)], radius: f64) {
        let _ = write!(
            self.body,
            r#"<g class="pts {}" clip-path="url(#{}-clip)">"#,
            esc(class),
            esc(&self.id)
        );
        for (x, y) in pts {
            let _ = write!(
                self.body,
                r#"<circle cx="{}" cy="{}" r="{}"/>"#,
                c(self.px(*x)),
                c(self.py(*y)),
                c(radius)
            );
        }
        self.body.push_str("</g>");
    }

    /// Horizontal bars `[x0, x1]` on row `row` (data y = row, bar height in data
    /// units `h`), grouped by class; zero-length bars get a hairline width.
    pub fn hbars(&mut self, class: &str, bars: &[(f64, f64, f64)], h: f64) {
        let _ = write!(
            self.body,
            r#"<path class="bar {}" clip-path="url(#{}-clip)" d=""#,
            esc(class),
            esc(&self.id)
        );
        let ph = (self.py(0.0) - self.py(h)).abs();
        for (row, x0, x1) in bars {
            let (xa, xb) = (self.px(*x0), self.px(*x1));
            let w = (xb - xa).max(0.3);
            let y = self.py(*row) - ph / 2.0;
            let _ = write!(
                self.body,
                "M{} {}h{}v{}h-{}Z",
                c(xa),
                c(y),
                c(w),
                c(ph),
                c(w)
            );
        }
        self.body.push_str(r#""/>"#);
    }

    /// A text note inside the plot's top-left corner.
    pub fn note(&mut self, text: &str) {
        let _ = write!(
            self.body,
            r#"<text class="note" x="{}" y="{}">{}</text>"#,
            c(self.geo.left + 8.0),
            c(self.geo.top + 16.0),
            esc(text)
        );
    }

    /// Marks the chart as having no data to draw (a note says why), so automated
    /// checks do not expect marks in it.
    pub fn mark_empty(&mut self, why: &str) {
        self.empty = true;
        self.note(why);
    }

    /// Closes the chart and returns its SVG.
    pub fn finish(self) -> String {
        let mut s = if self.empty {
            self.head.replacen(
                "<svg class=\"chart\"",
                "<svg class=\"chart\" data-empty=\"1\"",
                1,
            )
        } else {
            self.head
        };
        s.push_str(&self.body);
        s.push_str("</svg>");
        s
    }
}

/// A legend under a chart: swatches with the chart's classes and their meaning. A
/// class starting with `line ` gets a line swatch (dashed when the class says so),
/// any other a filled box.
pub fn legend(items: &[(&str, &str)]) -> String {
    let mut s = String::from(r#"<ul class="legend">"#);
    for (class, label) in items {
        let swatch = if class.starts_with("line ") {
            format!(r#"<path class="{}" d="M1 5H21"/>"#, esc(class))
        } else {
            format!(
                r#"<rect class="{}" x="3" width="16" height="10"/>"#,
                esc(class)
            )
        };
        let _ = write!(
            s,
            r#"<li><svg class="swatch" viewBox="0 0 22 10" width="22" height="10" aria-hidden="true">{swatch}</svg>{}</li>"#,
            esc(label)
        );
    }
    s.push_str("</ul>");
    s
}

#[cfg(test)]
mod tests;
