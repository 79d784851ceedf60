//! The chart of a multi-turn run's `sessions` section: TTFT p50 and p90 by turn
//! index (the prefix cache's benefit as a falling line).

use tpscope_analysis::sessions::SessionReport;

use super::charts::figure;
use super::svg::{Axis, Chart, Geometry};

/// TTFT p50 (solid, with points) and p90 (dashed) in ms by turn.
pub(crate) fn chart(id: &str, s: &SessionReport) -> String {
    let pts = |f: fn(&tpscope_analysis::sessions::TurnRow) -> Option<f64>| -> Vec<(f64, f64)> {
        s.by_turn
            .iter()
            .filter_map(|t| f(t).map(|v| (f64::from(t.turn), v * 1e3)))
            .collect()
    };
    let p50 = pts(|t| t.ttft_p50_s);
    let p90 = pts(|t| t.ttft_p90_s);
    let first = s.by_turn.first().map_or(1.0, |t| f64::from(t.turn));
    let last = s.by_turn.last().map_or(1.0, |t| f64::from(t.turn));
    let top = p50.iter().chain(&p90).map(|p| p.1).fold(0.0, f64::max);
    // A little room either side, so the first and last points are not on the frame.
    let x = Axis::linear("turn", first - 0.25, last.max(first + 1.0) + 0.25).integer();
    let y = Axis::linear("TTFT after admission (ms)", 0.0, top * 1.08 + 1e-3).nice();
    let mut ch = Chart::new(id, "TTFT by turn", Geometry::standard(220.0), &x, &y);
    let mut keys = Vec::new();
    if p50.is_empty() {
        ch.mark_empty("no turn has an ok span with a first token");
    } else {
        ch.line("tps", &p50, false);
        ch.points("tps", &p50, 3.0);
        keys.push(("line tps".to_string(), "TTFT p50".to_string()));
        if !p90.is_empty() {
            ch.line("tps dashed", &p90, false);
            keys.push(("line tps dashed".to_string(), "TTFT p90".to_string()));
        }
    }
    figure(ch.finish(), &keys)
}
