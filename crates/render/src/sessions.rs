//! The text sections computed from whole span records: the multi-turn section
//! (TTFT by turn index, per-session totals, as [`tpscope_analysis::sessions`]
//! computed them) and the count check ([`tpscope_analysis::count_check`]).

use tpscope_analysis::count_check::CountCheck;
use tpscope_analysis::sessions::SessionReport;

use crate::fmt::{or_dash, text_table};

/// The section as text (a heading, the by-turn table, the totals line).
pub fn text(r: &SessionReport) -> String {
    let mut out = String::from(
        "\n  multi-turn sessions: TTFT by turn (prefix caching shows as later turns starting sooner)\n",
    );
    let ms = |v: Option<f64>| or_dash(v.map(|s| format!("{:.1}", s * 1e3)));
    let rows: Vec<Vec<String>> = r
        .by_turn
        .iter()
        .map(|t| {
            vec![
                t.turn.to_string(),
                t.spans.to_string(),
                t.ok.to_string(),
                ms(t.ttft_p50_s),
                ms(t.ttft_p90_s),
                or_dash(t.input_tokens_mean.map(|m| format!("{m:.0}"))),
            ]
        })
        .collect();
    text_table(
        &mut out,
        &[
            "turn",
            "spans",
            "ok",
            "ttft p50 (ms)",
            "ttft p90 (ms)",
            "prompt tokens (mean)",
        ],
        &rows,
    );
    let t = &r.totals;
    let s = |v: Option<f64>| or_dash(v.map(|s| format!("{s:.2}")));
    out.push_str(&format!(
        "  sessions: {} ({} with every turn ok), {:.1} turns and {:.0} output tokens each on average; session length p50 {} s, p90 {} s\n",
        t.sessions,
        t.complete,
        t.turns_mean,
        t.output_tokens_mean,
        s(t.duration_p50_s),
        s(t.duration_p90_s),
    ));
    out
}

/// The count check as text: one line, and the warning when there is one.
pub fn count_check_text(c: &CountCheck) -> String {
    let mut out = format!(
        "\n  count check: on {} spans, the tokenizer counted {} output tokens where usage said {} ({}; {} spans differ)\n",
        c.spans,
        c.tokenizer_tokens,
        c.usage_tokens,
        or_dash(c.difference.map(|d| format!("{:+.2} %", d * 100.0))),
        c.spans_differing,
    );
    if let Some(w) = &c.warning {
        out.push_str(&format!("  warning: {w}\n"));
    }
    out
}
