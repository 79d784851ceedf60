//! The capacity ledger's chart: the parts stacked per bucket, drawn in a run's
//! timeline under the in-flight chart.

use tpscope_analysis::RunReport;
use tpscope_analysis::ledger::{Capacity, Part};

use super::charts::{TIME_LABEL, figure};
use super::svg::{Axis, Chart, Geometry};

/// The CSS class of a part's band in the stacked chart.
fn class(p: Part) -> &'static str {
    match p {
        Part::Connect => "lg-connect",
        Part::FirstTokenWait => "lg-wait",
        Part::Generating => "lg-gen",
        Part::Post => "lg-post",
        Part::Failed => "lg-failed",
        Part::Backoff => "lg-backoff",
        Part::Handoff => "lg-handoff",
        Part::HeldBack => "lg-held",
        Part::NoDemand => "lg-idle",
    }
}

/// The parts stacked per bucket (mean slots in each part), drawn under the
/// in-flight chart; empty without a ledger or a time series.
pub(crate) fn chart(prefix: &str, r: &RunReport) -> String {
    match &r.capacity {
        Some(c) => stacked(&format!("{prefix}-capacity"), r, c),
        None => String::new(),
    }
}

/// Mean slots per part in each bucket, stacked from the busy parts up.
fn stacked(id: &str, r: &RunReport, c: &Capacity) -> String {
    let (Some(rows), Some(ts), Some(w)) = (&c.buckets, &r.time_series, &r.window) else {
        return String::new();
    };
    let from = w.from.as_secs_f64();
    let xs: Vec<f64> = ts
        .buckets
        .iter()
        .map(|b| from + b.start.as_secs_f64())
        .collect();
    let lens: Vec<f64> = ts
        .buckets
        .iter()
        .map(|b| b.duration.as_secs_f64())
        .collect();
    let end = ts
        .buckets
        .last()
        .map_or(from, |b| from + (b.start + b.duration).as_secs_f64());
    let shown: Vec<Part> = Part::ALL
        .into_iter()
        .filter(|&p| c.seconds(p).is_some_and(|x| x > 0.0))
        .collect();
    let mut lower = vec![0.0; rows.len()];
    let mut bands = Vec::new();
    for &p in &shown {
        let upper: Vec<f64> = rows
            .iter()
            .zip(&lens)
            .zip(&lower)
            .map(|((row, &len), lo)| {
                lo + if len > 0.0 {
                    row[p as usize] / len
                } else {
                    0.0
                }
            })
            .collect();
        bands.push((p, lower.clone(), upper.clone()));
        lower = upper;
    }
    let top = lower.iter().cloned().fold(0.0, f64::max);
    let x = Axis::linear(TIME_LABEL, 0.0, end.max(1e-9));
    let y = Axis::linear("slots (mean per bucket)", 0.0, top * 1.08 + 0.5)
        .integer()
        .nice();
    let mut ch = Chart::new(
        id,
        "Slots by what they were doing, per bucket (stacked)",
        Geometry::standard(260.0),
        &x,
        &y,
    );
    let mut xs_end = xs.clone();
    xs_end.push(end);
    for (p, lo, hi) in &bands {
        let mut lo = lo.clone();
        let mut hi = hi.clone();
        lo.push(*lo.last().unwrap_or(&0.0));
        hi.push(*hi.last().unwrap_or(&0.0));
        ch.step_band(&format!("lg {}", class(*p)), &xs_end, &lo, &hi);
    }
    if bands.is_empty() {
        ch.mark_empty("no slot-time in this window");
    }
    let keys: Vec<(String, String)> = shown
        .iter()
        .map(|&p| (format!("lg {}", class(p)), p.name().to_string()))
        .collect();
    figure(ch.finish(), &keys)
}
