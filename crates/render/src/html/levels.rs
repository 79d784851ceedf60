//! The HTML section of a load sweep: system TPS and TTFT (p50, p90) against the load
//! level with the knee marked, then the table (wrapping, scrolling inside its box)
//! and its notes. It leads a sweep's page: the curve is what its reader looks for.

use tpscope_analysis::knee::Knee;
use tpscope_analysis::levels::SweepTable;

use super::charts::figure;
use super::page::{Cell, table};
use super::svg::{Axis, Chart, Geometry, esc};

/// The level axis: logarithmic when the levels span a factor of ten or more (1, 8,
/// 32 would crowd the left of a linear one), linear otherwise.
fn level_axis(t: &SweepTable) -> Axis {
    let levels = t.rows.iter().map(|r| r.level).filter(|l| l.is_finite());
    let (lo, hi) = levels.fold((f64::INFINITY, 0.0f64), |(a, b), l| (a.min(l), b.max(l)));
    let label = t.parameter.clone();
    if lo > 0.0 && hi / lo >= 10.0 {
        // Whole decades, widened a little where a level sits on one, so its point
        // is not cut in half by the frame.
        let mut a = Axis::log(label, lo, hi);
        if lo <= a.min * 1.0001 {
            a.min /= 1.25;
        }
        if hi >= a.max / 1.0001 {
            a.max *= 1.25;
        }
        a
    } else {
        Axis::linear(label, 0.0, if hi > 0.0 { hi * 1.05 } else { 1.0 }).nice()
    }
}

/// The points of one column against the level, skipping levels without a value.
fn series(
    t: &SweepTable,
    f: impl Fn(&tpscope_analysis::levels::LevelRow) -> Option<f64>,
) -> Vec<(f64, f64)> {
    t.rows
        .iter()
        .filter_map(|r| f(r).filter(|v| v.is_finite()).map(|v| (r.level, v)))
        .collect()
}

/// Draws the knee, when there is one, as a marked line at its level; says so when
/// throughput was still rising at the top level.
fn mark_knee(ch: &mut Chart, t: &SweepTable) {
    match (&t.knee, t.knee_level) {
        (Knee::At(_), Some(l)) => ch.xrange("knee", l, l, &format!("knee: {} {l}", t.parameter), 0),
        (Knee::NotReached, _) => ch.note("knee not reached: sweep higher"),
        _ => {}
    }
}

/// System TPS against the level.
fn tps_chart(id: &str, t: &SweepTable) -> String {
    let pts = series(t, |r| r.system_tps);
    let top = pts.iter().map(|p| p.1).fold(0.0, f64::max);
    let y = Axis::linear("system TPS (output tokens/s)", 0.0, top.max(1.0) * 1.08).nice();
    let mut ch = Chart::new(
        id,
        &format!("System TPS against {}, knee marked", t.parameter),
        Geometry::half(280.0),
        &level_axis(t),
        &y,
    );
    mark_knee(&mut ch, t);
    let mut keys = Vec::new();
    if pts.is_empty() {
        ch.mark_empty("no level produced a throughput");
    } else {
        ch.line("tps", &pts, false);
        ch.points("tps", &pts, 3.5);
        keys.push(("line tps".to_string(), "system TPS".to_string()));
    }
    figure(ch.finish(), &keys)
}

/// TTFT after admission, p50 and p90, against the level; in ms below a second.
fn ttft_chart(id: &str, t: &SweepTable) -> String {
    let p50 = series(t, |r| r.ttft_p50_s);
    let p90 = series(t, |r| r.ttft_p90_s);
    let top = p50.iter().chain(&p90).map(|p| p.1).fold(0.0, f64::max);
    let (scale, unit) = if top < 1.0 {
        (1000.0, "ms")
    } else {
        (1.0, "s")
    };
    let scaled = |pts: &[(f64, f64)]| -> Vec<(f64, f64)> {
        pts.iter().map(|&(x, y)| (x, y * scale)).collect()
    };
    let y = Axis::linear(
        format!("TTFT after admission ({unit})"),
        0.0,
        (top * scale).max(1e-3) * 1.08,
    )
    .nice();
    let mut ch = Chart::new(
        id,
        &format!("TTFT p50 and p90 against {}, knee marked", t.parameter),
        Geometry::half(280.0),
        &level_axis(t),
        &y,
    );
    mark_knee(&mut ch, t);
    let mut keys = Vec::new();
    for (pts, class, name) in [
        (&p50, "ttft", "TTFT p50"),
        (&p90, "ttft dashed", "TTFT p90"),
    ] {
        if pts.is_empty() {
            continue;
        }
        let pts = scaled(pts);
        ch.line(class, &pts, false);
        ch.points("ttft", &pts, 3.0);
        keys.push((format!("line {class}"), name.to_string()));
    }
    if keys.is_empty() {
        ch.mark_empty("no level has a TTFT");
    }
    figure(ch.finish(), &keys)
}

/// The section of sweep `i`: heading, the two charts side by side, the table and the
/// sentences under it (the knee, the goals, the closed loop).
pub(super) fn section(i: usize, t: &SweepTable) -> String {
    let mut s = format!(
        "<section class=\"sweep\" id=\"sweep-{i}\">\n<h2>Sweep of {}: throughput vs latency</h2>\n",
        esc(&t.parameter)
    );
    s.push_str("<div class=\"grid2\">\n");
    s.push_str(&tps_chart(&format!("sweep{i}-tps"), t));
    s.push_str(&ttft_chart(&format!("sweep{i}-ttft"), t));
    s.push_str("</div>\n");
    let (heads, rows) = crate::levels::cells(t);
    let rows: Vec<Vec<Cell>> = rows
        .into_iter()
        .map(|r| {
            r.into_iter()
                .map(|c| Cell::Text(c.trim_end().to_string()))
                .collect()
        })
        .collect();
    s.push_str(&table(&heads, &rows));
    for l in crate::levels::lines(t) {
        s.push_str(&format!("<p class=\"note\">{}</p>\n", esc(&l)));
    }
    s.push_str("</section>\n");
    s
}
