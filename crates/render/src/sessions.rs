//! The `sessions` section of a multi-turn run (TTFT by turn index with its ratio
//! to turn 1, per-session totals, as [`tpscope_analysis::sessions`] computed
//! them) as a [`Section`] the text, markdown and HTML renderers lay out alike
//! (the page adds a chart of TTFT by turn).

use tpscope_analysis::RunReport;
use tpscope_analysis::sessions::{SessionReport, SessionTotals};

use crate::fmt::or_dash;
use crate::section::{Block, Chart, Section};

/// The section's heading.
pub const SESSIONS_HEADING: &str = "multi-turn sessions";

/// What the section shows, after its heading.
pub const SESSIONS_GLOSS: &str =
    "TTFT by turn (prefix caching shows as later turns starting sooner)";

/// Heads of the by-turn table.
pub const TURN_HEADS: [&str; 7] = [
    "turn",
    "spans",
    "ok",
    "ttft p50 (ms)",
    "ttft p90 (ms)",
    "p50 vs turn 1",
    "prompt tokens (mean)",
];

/// The by-turn table's rows (TTFT after admission, in ms).
pub fn turn_rows(r: &SessionReport) -> Vec<Vec<String>> {
    let ms = |v: Option<f64>| or_dash(v.map(|s| format!("{:.1}", s * 1e3)));
    r.by_turn
        .iter()
        .map(|t| {
            vec![
                t.turn.to_string(),
                t.spans.to_string(),
                t.ok.to_string(),
                ms(t.ttft_p50_s),
                ms(t.ttft_p90_s),
                or_dash(t.ttft_p50_ratio_to_turn_1.map(|x| format!("{x:.2}×"))),
                or_dash(t.input_tokens_mean.map(|m| format!("{m:.0}"))),
            ]
        })
        .collect()
}

/// The totals as one sentence.
pub fn totals_line(t: &SessionTotals) -> String {
    let s = |v: Option<f64>| or_dash(v.map(|s| format!("{s:.2}")));
    format!(
        "sessions: {} ({} with every turn ok), {:.1} turns each on average (at most {}), \
         {:.0} output and {} prompt tokens each on average; session length p50 {} s, p90 {} s, longest {} s",
        t.sessions,
        t.complete,
        t.turns_mean,
        t.turns_max,
        t.output_tokens_mean,
        or_dash(t.input_tokens_mean.map(|m| format!("{m:.0}"))),
        s(t.duration_p50_s),
        s(t.duration_p90_s),
        s(t.duration_max_s),
    )
}

/// The section (a heading, the by-turn table, the totals line, the chart);
/// `None` for a run without sessions.
pub fn section(r: &RunReport) -> Option<Section<'_>> {
    let s = r.sessions.as_ref()?;
    Some(
        Section::new("sessions", SESSIONS_HEADING)
            .gloss(SESSIONS_GLOSS)
            .table(&TURN_HEADS, turn_rows(s))
            .with(Block::Sentence(totals_line(&s.totals)))
            .with(Block::Chart(Chart::TtftByTurn(s))),
    )
}
