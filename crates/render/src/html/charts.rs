//! The report's charts, drawn from [`Detail`] values: occupancy (in-flight, cap,
//! gap shading), queue depth, system TPS over time, the request waterfall, CDFs and
//! the length/rate scatter. One run, or a baseline and a candidate overlaid.

use std::time::Duration;

use tpscope_analysis::detail::{CdfMetric, Detail, OccupancyStep};
use tpscope_model::Status;

use super::svg::{Axis, Chart, Geometry, esc, legend};

/// One run on a chart: its data, its name in legends, and its colour class (`None`
/// for a single-run page, which colours by meaning instead).
pub struct Series<'a> {
    /// The chart data.
    pub detail: &'a Detail,
    /// Name in legends (`baseline`, `candidate`).
    pub label: &'a str,
    /// `base` or `cand`; `None` on a single-run page.
    pub class: Option<&'static str>,
}

impl Series<'_> {
    fn class_or(&self, single: &'static str) -> &'static str {
        self.class.unwrap_or(single)
    }

    fn name(&self, what: &str) -> String {
        if self.class.is_some() {
            format!("{what} ({})", self.label)
        } else {
            what.to_string()
        }
    }
}

fn secs(d: Duration) -> f64 {
    d.as_secs_f64()
}

pub(crate) const TIME_LABEL: &str = "time since run start (s)";

/// The end of the time axis: the latest instant any run shows.
pub(super) fn time_extent(runs: &[Series<'_>]) -> f64 {
    runs.iter()
        .map(|s| {
            let d = s.detail;
            let w = d.window.map_or(0.0, |w| secs(w.to));
            secs(d.occupancy.end).max(w)
        })
        .fold(0.0, f64::max)
}

/// A step series ending at `end`: each point holds until the next.
pub(super) fn steps_with_end(pts: Vec<(f64, f64)>, end: f64) -> Vec<(f64, f64)> {
    let mut pts = pts;
    if let Some(&(_, y)) = pts.last() {
        pts.push((end, y));
    }
    pts
}

/// Splits a series with holes (`None`) into runs of defined values.
fn defined_runs(pts: impl Iterator<Item = (f64, Option<f64>)>, end: f64) -> Vec<Vec<(f64, f64)>> {
    let mut out: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut cur: Vec<(f64, f64)> = Vec::new();
    for (x, y) in pts {
        match y {
            Some(y) => cur.push((x, y)),
            None => {
                if let Some(&(_, last_y)) = cur.last() {
                    cur.push((x, last_y));
                    out.push(std::mem::take(&mut cur));
                }
            }
        }
    }
    if !cur.is_empty() {
        out.push(steps_with_end(cur, end));
    }
    out
}

fn gap_bands(ch: &mut Chart, s: &Series<'_>) {
    let d = s.detail;
    if d.gaps.is_empty() {
        return;
    }
    let cls = match s.class {
        Some(c) => format!("gap {c}"),
        None => "gap".to_string(),
    };
    if !d.gaps_binned {
        let bands: Vec<(f64, f64)> = d.gaps.iter().map(|g| (secs(g.from), secs(g.to))).collect();
        ch.vbands(
            &cls,
            &bands,
            &s.name("gap: work waited while a slot was free"),
        );
        return;
    }
    // Binned: shade each bin by its gap fraction, in four levels.
    for level in 1..=4u8 {
        let lo = f64::from(level - 1) / 4.0;
        let hi = f64::from(level) / 4.0;
        let bands: Vec<(f64, f64)> = d
            .gaps
            .iter()
            .filter(|g| g.share > lo && g.share <= hi)
            .map(|g| (secs(g.from), secs(g.to)))
            .collect();
        if !bands.is_empty() {
            ch.vbands(
                &format!("{cls} lvl{level}"),
                &bands,
                &s.name(&format!(
                    "gap: {:.0}–{:.0}% of the bin",
                    lo * 100.0,
                    hi * 100.0
                )),
            );
        }
    }
}

pub(super) fn step_values(
    steps: &[OccupancyStep],
    f: impl Fn(&OccupancyStep) -> u32,
) -> Vec<(f64, f64)> {
    steps
        .iter()
        .map(|s| (secs(s.at), f64::from(f(s))))
        .collect()
}

/// In-flight and the cap over time, with gap time shaded.
pub fn occupancy(id: &str, runs: &[Series<'_>]) -> String {
    let end = time_extent(runs);
    let top = runs
        .iter()
        .flat_map(|s| s.detail.occupancy.steps.iter())
        .map(|st| st.in_flight_max.max(st.cap.unwrap_or(0)))
        .max()
        .unwrap_or(0);
    let x = Axis::linear(TIME_LABEL, 0.0, end);
    let y = Axis::linear("requests in flight", 0.0, f64::from(top) * 1.08 + 0.5)
        .integer()
        .nice();
    let mut ch = Chart::new(
        id,
        "In-flight requests and the cap over time, gap time shaded",
        Geometry::standard(300.0),
        &x,
        &y,
    );
    let mut keys: Vec<(String, String)> = Vec::new();
    for s in runs {
        gap_bands(&mut ch, s);
    }
    for (i, s) in runs.iter().enumerate() {
        let d = s.detail;
        if !d.window_is_full
            && let Some(w) = d.window
        {
            ch.xrange(
                "window",
                secs(w.from),
                secs(w.to),
                &s.name("analysed window"),
                i,
            );
        }
    }
    let mut any = false;
    for s in runs {
        let occ = &s.detail.occupancy;
        if occ.steps.is_empty() {
            continue;
        }
        any = true;
        let e = secs(occ.end);
        let cls = s.class_or("inflight");
        if occ.bin.is_some() {
            let xs: Vec<f64> = occ.steps.iter().map(|st| secs(st.at)).collect();
            let lo: Vec<f64> = occ
                .steps
                .iter()
                .map(|st| f64::from(st.in_flight_min))
                .collect();
            let hi: Vec<f64> = occ
                .steps
                .iter()
                .map(|st| f64::from(st.in_flight_max))
                .collect();
            ch.step_band(cls, &xs, &lo, &hi);
        }
        ch.line(
            cls,
            &steps_with_end(step_values(&occ.steps, |st| st.in_flight_max), e),
            true,
        );
        let cap_cls = match s.class {
            Some(c) => format!("{c} dashed"),
            None => "cap".to_string(),
        };
        for run in defined_runs(
            occ.steps
                .iter()
                .map(|st| (secs(st.at), st.cap.map(f64::from))),
            e,
        ) {
            ch.line(&cap_cls, &run, true);
        }
        let binned = occ
            .bin
            .map(|b| format!(" (max per {:.3} s bin; band: min–max)", b.as_secs_f64()))
            .unwrap_or_default();
        keys.push((format!("line {cls}"), s.name(&format!("in flight{binned}"))));
        let has_cap = occ.steps.iter().any(|st| st.cap.is_some());
        keys.push((
            format!("line {cap_cls}"),
            s.name(if has_cap { "cap" } else { "no cap known" }),
        ));
        if !s.detail.gaps.is_empty() {
            keys.push((
                s.class
                    .map_or("gapkey".to_string(), |c| format!("{c} gapswatch")),
                s.name("gap time (queue > 0 and in flight < cap)"),
            ));
        }
    }
    if !any {
        ch.mark_empty("no requests in this run");
    }
    figure(ch.finish(), &keys)
}

/// Queue depth over time, with gap time shaded.
pub fn queue(id: &str, runs: &[Series<'_>]) -> String {
    let end = time_extent(runs);
    let top = runs
        .iter()
        .flat_map(|s| s.detail.occupancy.steps.iter())
        .map(|st| st.queue_max)
        .max()
        .unwrap_or(0);
    let x = Axis::linear(TIME_LABEL, 0.0, end);
    let y = Axis::linear("requests waiting", 0.0, f64::from(top) * 1.08 + 0.5)
        .integer()
        .nice();
    let mut ch = Chart::new(
        id,
        "Queue depth over time, gap time shaded",
        Geometry::standard(220.0),
        &x,
        &y,
    );
    let mut keys = Vec::new();
    for s in runs {
        gap_bands(&mut ch, s);
    }
    let mut any = false;
    for s in runs {
        let occ = &s.detail.occupancy;
        if occ.steps.is_empty() {
            continue;
        }
        any = true;
        let cls = s.class_or("queue");
        if occ.bin.is_some() {
            let xs: Vec<f64> = occ.steps.iter().map(|st| secs(st.at)).collect();
            let lo: Vec<f64> = occ.steps.iter().map(|st| f64::from(st.queue_min)).collect();
            let hi: Vec<f64> = occ.steps.iter().map(|st| f64::from(st.queue_max)).collect();
            ch.step_band(cls, &xs, &lo, &hi);
        }
        ch.line(
            cls,
            &steps_with_end(step_values(&occ.steps, |st| st.queue_max), secs(occ.end)),
            true,
        );
        keys.push((format!("line {cls}"), s.name("queue depth")));
    }
    if !any {
        ch.mark_empty("no requests in this run");
    }
    figure(ch.finish(), &keys)
}

/// System TPS per time bucket, with the steady-state window marked.
pub fn tps(id: &str, runs: &[Series<'_>]) -> String {
    let end = time_extent(runs);
    let top = runs
        .iter()
        .flat_map(|s| s.detail.tps.iter())
        .filter_map(|p| p.system_tps.map(|t| t.0))
        .fold(0.0, f64::max);
    let x = Axis::linear(TIME_LABEL, 0.0, end);
    let y = Axis::linear("system TPS (output tokens/s)", 0.0, top * 1.08).nice();
    let mut ch = Chart::new(
        id,
        "System TPS over time, steady-state window marked",
        Geometry::standard(260.0),
        &x,
        &y,
    );
    let mut keys = Vec::new();
    for (i, s) in runs.iter().enumerate() {
        if let Some(w) = s.detail.steady {
            ch.xrange(
                "steady",
                secs(w.from),
                secs(w.to),
                &s.name("steady state"),
                i,
            );
        }
    }
    let mut any = false;
    for s in runs {
        let pts = &s.detail.tps;
        if pts.is_empty() {
            continue;
        }
        any = true;
        let last_end = pts.last().map_or(0.0, |p| secs(p.start + p.duration));
        let cls = s.class_or("tps");
        for run in defined_runs(
            pts.iter()
                .map(|p| (secs(p.start), p.system_tps.map(|t| t.0))),
            last_end,
        ) {
            ch.line(cls, &run, true);
        }
        let bucket = pts.first().map_or(0.0, |p| secs(p.duration));
        keys.push((
            format!("line {cls}"),
            s.name(&format!("system TPS per {} bucket", short_secs(bucket))),
        ));
        if s.detail.steady.is_some() {
            keys.push((
                "steadykey".to_string(),
                s.name("steady state (in flight reached the cap → backlog last emptied)"),
            ));
        }
    }
    if !any {
        ch.mark_empty("no time series (the run has no output in its window)");
    }
    figure(ch.finish(), &keys)
}

pub fn short_secs(v: f64) -> String {
    if v >= 1.0 {
        format!("{} s", super::svg::tick_label(v))
    } else {
        format!("{} ms", super::svg::tick_label(v * 1000.0))
    }
}

/// The request waterfall: one row per request, its phases as coloured bars.
pub fn waterfall(id: &str, s: &Series<'_>) -> String {
    let wf = &s.detail.waterfall;
    let n = wf.rows.len();
    let t0 = wf
        .rows
        .iter()
        .map(|r| secs(r.queued))
        .fold(f64::INFINITY, f64::min);
    let t1 = wf.rows.iter().map(|r| secs(r.released)).fold(0.0, f64::max);
    let x = Axis::linear(TIME_LABEL, if t0.is_finite() { t0 } else { 0.0 }, t1);
    let y = Axis::linear(
        "requests in queue order (first at top)",
        0.0,
        n.max(1) as f64,
    )
    .integer()
    .reversed();
    let height = (n as f64 * 3.0).clamp(220.0, 720.0);
    let title = format!(
        "Request waterfall{}",
        if s.class.is_some() {
            format!(" ({})", s.label)
        } else {
            String::new()
        }
    );
    let mut ch = Chart::new(id, &title, Geometry::standard(height), &x, &y);
    if n == 0 {
        ch.mark_empty("no requests in the window");
        return figure(ch.finish(), &[]);
    }
    let (mut q, mut w, mut st, mut p, mut fail) = (vec![], vec![], vec![], vec![], vec![]);
    // Failed attempts and back-off: from admission to the last attempt's start.
    let mut retry = vec![];
    let fail_w = (t1 - t0).max(1e-9) * 0.004;
    for (i, r) in wf.rows.iter().enumerate() {
        let row = i as f64 + 0.5;
        let (qa, rel) = (secs(r.queued), secs(r.released));
        match r.admitted.map(secs) {
            None => q.push((row, qa, rel)),
            Some(mut a) => {
                q.push((row, qa, a));
                if let Some(la) = r.last_attempt.map(secs).filter(|&la| la > a) {
                    retry.push((row, a, la));
                    a = la;
                }
                match (r.first_token.map(secs), r.last_token.map(secs)) {
                    (Some(f), Some(l)) => {
                        w.push((row, a, f));
                        st.push((row, f, l));
                        p.push((row, l, rel));
                    }
                    _ => w.push((row, a, rel)),
                }
            }
        }
        if r.status != Status::Ok {
            fail.push((row, rel - fail_w, rel + fail_w));
        }
    }
    let h = 0.8;
    ch.hbars("ph-queue", &q, h);
    ch.hbars("ph-wait", &w, h);
    if !retry.is_empty() {
        ch.hbars("ph-retry", &retry, h);
    }
    ch.hbars("ph-stream", &st, h);
    ch.hbars("ph-post", &p, h);
    if !fail.is_empty() {
        ch.hbars("ph-fail", &fail, h);
    }
    let mut keys = vec![
        (
            "ph-queue".to_string(),
            "queue (queued → admitted)".to_string(),
        ),
        (
            "ph-wait".to_string(),
            "first-token wait (admitted → first token)".to_string(),
        ),
        (
            "ph-stream".to_string(),
            "stream (first → last token)".to_string(),
        ),
        (
            "ph-post".to_string(),
            "post (last token → released)".to_string(),
        ),
    ];
    if !retry.is_empty() {
        keys.push((
            "ph-retry".to_string(),
            "failed attempts and back-off (admitted → last attempt)".to_string(),
        ));
    }
    if !fail.is_empty() {
        keys.push((
            "ph-fail".to_string(),
            "failed or cancelled (mark at release)".to_string(),
        ));
    }
    let mut out = figure(ch.finish(), &keys);
    if wf.sampled() {
        out.push_str(&format!(
            "<p class=\"note\">A sample: the {} requests queued in the middle of the window (numbers {}–{} of its {} in queue order), so that each bar is wide enough to read. The timeline above covers every request.</p>\n",
            n,
            wf.first + 1,
            wf.first + n,
            wf.total
        ));
    } else {
        out.push_str(&format!(
            "<p class=\"note\">All {n} requests of the window.</p>\n"
        ));
    }
    out
}

/// The CDF of one or two metrics (the second dashed) for each run. Durations
/// that span more than two decades get a log axis, so a short first-token wait
/// and a long queue wait both show.
pub fn cdf(id: &str, title: &str, runs: &[Series<'_>], metrics: &[CdfMetric]) -> String {
    let all: Vec<(&Series<'_>, CdfMetric)> = runs
        .iter()
        .flat_map(|s| metrics.iter().map(move |m| (s, *m)))
        .collect();
    let is_dur = metrics.first().is_some_and(|m| m.is_duration());
    let values = || {
        all.iter()
            .filter_map(|(s, m)| s.detail.cdf(*m))
            .flat_map(|c| c.points.iter().map(|p| p.0))
    };
    let max = values().fold(0.0, f64::max);
    let min_pos = values().filter(|v| *v > 0.0).fold(f64::INFINITY, f64::min);
    let log = is_dur && min_pos.is_finite() && max / min_pos >= 100.0;
    let (scale, unit) = if is_dur && !log && max < 1.0 {
        (1000.0, "ms")
    } else if is_dur {
        (1.0, "s")
    } else {
        (1.0, "tokens/s")
    };
    let names: Vec<&str> = metrics.iter().map(|m| m.name()).collect();
    let label = format!(
        "{} ({unit}{})",
        names.join(" / "),
        if log { ", log scale" } else { "" }
    );
    let x = if log {
        Axis::log(label, min_pos, max)
    } else {
        Axis::linear(label, 0.0, max * scale * 1.02).nice()
    };
    let y = Axis::linear("fraction of requests", 0.0, 1.0);
    let mut ch = Chart::new(id, title, Geometry::half(280.0), &x, &y);
    let mut keys = Vec::new();
    let mut any = false;
    for (s, m) in &all {
        let Some(c) = s.detail.cdf(*m) else { continue };
        let second = metrics.len() > 1 && *m != metrics[0];
        let base = s.class_or(if is_dur { "inflight" } else { "tps" });
        let cls = if second {
            format!("{base} dashed")
        } else {
            base.to_string()
        };
        if !c.points.is_empty() {
            any = true;
            // On a log axis, zeros (no wait at all) sit at the axis' left end.
            let pts: Vec<(f64, f64)> = c
                .points
                .iter()
                .map(|(v, q)| (if log { v.max(x.min) } else { v * scale }, *q))
                .collect();
            ch.line(&cls, &pts, false);
        }
        keys.push((
            format!("line {cls}"),
            s.name(&format!("{}, n = {}", m.name(), c.count)),
        ));
    }
    if !any {
        ch.mark_empty("no request has this metric");
    }
    figure(ch.finish(), &keys)
}

/// Stream TPS against output length, one point per request.
pub fn scatter(id: &str, runs: &[Series<'_>]) -> String {
    let xmax = runs
        .iter()
        .flat_map(|s| s.detail.scatter.points.iter())
        .map(|p| p.0 as f64)
        .fold(0.0, f64::max);
    let ymax = runs
        .iter()
        .flat_map(|s| s.detail.scatter.points.iter())
        .map(|p| p.1.0)
        .fold(0.0, f64::max);
    let x = Axis::linear("output length (tokens)", 0.0, xmax * 1.02).nice();
    let y = Axis::linear("stream TPS (tokens/s)", 0.0, ymax * 1.05).nice();
    let mut ch = Chart::new(
        id,
        "Stream TPS against output length",
        Geometry::standard(300.0),
        &x,
        &y,
    );
    let mut keys = Vec::new();
    let mut notes = Vec::new();
    let mut any = false;
    for s in runs {
        let sc = &s.detail.scatter;
        let pts: Vec<(f64, f64)> = sc.points.iter().map(|(n, r)| (*n as f64, r.0)).collect();
        if !pts.is_empty() {
            any = true;
            ch.points(s.class_or("tps"), &pts, 2.2);
        }
        keys.push((
            s.class_or("tps").to_string(),
            s.name(&format!("one point per ok request, n = {}", sc.total)),
        ));
        if sc.points.len() < sc.total {
            notes.push(format!(
                "{}: a sample of {} of {} requests, evenly spaced.",
                esc(s.label),
                sc.points.len(),
                sc.total
            ));
        }
    }
    if !any {
        ch.mark_empty("no ok request with a stream TPS");
    }
    let mut out = figure(ch.finish(), &keys);
    for n in notes {
        out.push_str(&format!("<p class=\"note\">{n}</p>\n"));
    }
    out
}

pub(crate) fn figure(svg: String, keys: &[(String, String)]) -> String {
    let items: Vec<(&str, &str)> = keys.iter().map(|(c, l)| (c.as_str(), l.as_str())).collect();
    format!(
        "<div class=\"figure\">{svg}{}</div>\n",
        if items.is_empty() {
            String::new()
        } else {
            legend(&items)
        }
    )
}
