//! The rows every human-readable renderer shows, in one order, so that text and
//! markdown never disagree about what a report contains.

use std::time::Duration;

use tpscope_analysis::metrics::{Section, SummaryRef};
use tpscope_analysis::report::Counts;
use tpscope_analysis::stats::{Summary, TokensPerSecond};
use tpscope_analysis::{CauseCounts, METRICS, RunReport};

use crate::fmt::*;

/// A distribution row: label, unit, cells.
pub struct DistRow {
    /// Metric name as in docs/design.md.
    pub name: &'static str,
    /// Unit of the cells.
    pub unit: &'static str,
    /// Count, mean, min, percentiles, max.
    pub cells: Vec<String>,
}

fn dur_row(name: &'static str, s: &Summary<Duration>) -> DistRow {
    let (unit, scale) = duration_unit(s);
    DistRow {
        name,
        unit,
        cells: summary_cells(s, scale, if unit == "s" { 3 } else { 1 }),
    }
}

fn rate_row(name: &'static str, s: &Summary<TokensPerSecond>) -> DistRow {
    DistRow {
        name,
        unit: "tok/s",
        cells: summary_cells(s, 1.0, 1),
    }
}

/// What the run measured, as the header names it: the URL, the built-in
/// simulator, or neither recorded (an import or a library recording without one).
pub fn target_name(r: &RunReport) -> &str {
    match (&r.target.url, r.simulated) {
        (Some(url), _) => url,
        (None, true) => "built-in simulator",
        (None, false) => "not recorded",
    }
}

/// How a closed loop's queue-inclusive rows are named: its queue is the client's
/// own backlog (every request was ready at the start), not a user's wait.
fn backlog_name(name: &'static str) -> &'static str {
    match name {
        "t_queue" => "t_queue = client backlog",
        "ttft_user" => "ttft_user = backlog + TTFT",
        other => other,
    }
}

/// In a closed loop, what its queue-inclusive figures are (`None` otherwise).
pub fn closed_loop_note(r: &RunReport) -> Option<&'static str> {
    r.closed_loop.then_some(
        "closed loop: every request was ready at the start, so t_queue and ttft_user are the \
         client's own backlog, not the server's latency; TTFT after admission is t_first_token.",
    )
}

/// The distribution rows of a run: the derived metrics, then the conventional forms,
/// each in the order of [`METRICS`] with the distributions that are not per span
/// (output length, inter-token latency) last. In a closed loop, TTFT after
/// admission leads and the queue-inclusive rows are named as the backlog.
pub fn distribution_rows(r: &RunReport) -> (Vec<DistRow>, Vec<DistRow>) {
    let section = |sec: Section| -> Vec<DistRow> {
        METRICS
            .iter()
            .filter(|m| m.section == sec)
            .map(|m| match (m.summary)(&r.distributions, &r.conventional) {
                SummaryRef::Seconds(s) => dur_row(m.name, s),
                SummaryRef::TokensPerSecond(s) => rate_row(m.name, s),
            })
            .collect()
    };
    let mut main = section(Section::Distributions);
    if r.closed_loop {
        for d in &mut main {
            d.name = backlog_name(d.name);
        }
        if let Some(i) = main.iter().position(|d| d.name == "t_first_token") {
            let tft = main.remove(i);
            main.insert(0, tft);
        }
    }
    main.push(DistRow {
        name: "output_length",
        unit: "tokens",
        cells: summary_cells(&r.output_length, 1.0, 0),
    });
    let mut conv = section(Section::Conventional);
    conv.push(dur_row(
        "inter_token_latency",
        &r.conventional.inter_token_latency,
    ));
    (main, conv)
}

/// What the inferred gap rests on, by the pipeline's shape.
fn inferred_explanation(shape: tpscope_analysis::infer::Shape) -> &'static str {
    use tpscope_analysis::infer::Shape;
    match shape {
        Shape::Waves => "inferred: bursts after releases (waves) held slots back",
        Shape::WorkConserving => "inferred: requests follow releases one by one",
        Shape::Open => "inferred: requests do not follow releases",
        Shape::OneBurst => "inferred: every request sent at once",
    }
}

/// The line under the headline figures that says how the inferred gap was
/// made and how to make it exact (`None` without one).
pub fn inferred_line(r: &RunReport) -> Option<String> {
    let g = r.gap_fraction_inferred.as_ref()?;
    let source = match g.width_source {
        tpscope_analysis::infer::WidthSource::Stated => "stated",
        tpscope_analysis::infer::WidthSource::MaxInFlight => "the most in flight",
    };
    Some(format!(
        "the pipeline's queue was not stated: gap inferred from its shape (width {} — {source}; \
         {} of {} bursts right after releases); {}",
        g.width, g.prompted, g.bursts, g.recipe
    ))
}

/// Headline figures as (label, value, explanation).
pub fn headline_rows(r: &RunReport) -> Vec<(&'static str, String, &'static str)> {
    let f = |v: Option<f64>, g: fn(f64) -> String| or_dash(v.map(g));
    let mut rows = vec![
        (
            "system_tps",
            or_dash(r.system_tps.map(|t| format!("{} tok/s", rate(t.0)))),
            "output tokens of ok spans / window",
        ),
        (
            "request_throughput",
            f(r.request_throughput, |v| format!("{v:.2} req/s")),
            "ok spans / window",
        ),
        (
            "total_token_throughput",
            or_dash(
                r.total_token_throughput
                    .map(|t| format!("{} tok/s", rate(t.0))),
            ),
            "input + output tokens of ok spans / window",
        ),
        ("success_rate", f(r.success_rate, pct), "ok / (ok + error)"),
        (
            "retry_rate",
            f(r.retry_rate, |v| format!("{v:.4} per span")),
            "retries / spans",
        ),
        (
            "gap_fraction",
            f(r.gap_fraction, pct),
            "queue > 0 and in-flight < cap, exact",
        ),
        (
            "gap_fraction_sampled",
            f(r.gap_fraction_sampled, pct),
            "the same from samples",
        ),
    ];
    if let Some(g) = &r.gap_fraction_inferred {
        rows.push((
            "gap_fraction_inferred",
            f(g.fraction, pct),
            inferred_explanation(g.method),
        ));
    }
    rows.extend([
        (
            "gap_time",
            or_dash(r.idle.gap_time.map(secs)),
            "time work waited beside a free slot",
        ),
        (
            "backlog_time",
            or_dash(r.idle.backlog_time.map(secs)),
            "time work waited at all",
        ),
        (
            "gap_fraction_of_backlog",
            f(r.gap_fraction_of_backlog, pct),
            "gap time / backlog time",
        ),
        ("utilization", f(r.utilization, pct), "∫ in-flight / ∫ cap"),
        (
            "mean_in_flight",
            f(r.mean_in_flight, |v| format!("{v:.2}")),
            "time-weighted",
        ),
        (
            "mean_queue_depth",
            f(r.mean_queue_depth, |v| format!("{v:.2}")),
            "time-weighted",
        ),
    ]);
    if let Some(g) = &r.goodput {
        rows.push((
            "goodput",
            f(g.requests_per_second, |v| format!("{v:.3} req/s")),
            "ok spans meeting every goal / window",
        ));
        rows.push((
            "goodput_tps",
            or_dash(
                g.output_tokens_per_second
                    .map(|t| format!("{} tok/s", rate(t.0))),
            ),
            "their output tokens / window",
        ));
        rows.push((
            "goodput_share",
            f(g.share, pct),
            "of ok + error spans, meeting every goal",
        ));
        rows.push((
            "goodput_goals",
            g.goals_text.clone(),
            "TTFT from admission; e2e from admission to release",
        ));
    }
    if let Some(c) = &r.cost {
        if c.price_per_hour.is_some() {
            rows.push((
                "cost_per_million_output_tokens",
                f(c.per_million_output_tokens, money),
                "price per hour / (system TPS × 3600) × 10⁶",
            ));
            rows.push((
                "cost_per_completion",
                f(c.per_completion, money),
                "price per hour / ok completions per hour",
            ));
        }
        if c.token_cost_total.is_some() {
            rows.push((
                "token_cost_total",
                f(c.token_cost_total, money),
                "ok spans' tokens at the per-token prices",
            ));
            rows.push((
                "token_cost_per_completion",
                f(c.token_cost_per_completion, money),
                "token cost / ok spans",
            ));
        }
    }
    rows
}

/// "cause n, cause n" of counts by cause, or "none".
pub fn by_cause(m: &CauseCounts) -> String {
    if m.is_empty() {
        return "none".to_string();
    }
    m.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// "cause ×n: message" lines, the most frequent failure messages of each cause
/// (and how many said something else); empty when nothing failed.
pub fn failure_message_lines(r: &RunReport) -> Vec<String> {
    let mut out = Vec::new();
    for c in &r.error_messages {
        for m in &c.messages {
            out.push(format!("{} ×{}: {}", c.cause, m.count, m.message));
        }
        if c.other > 0 {
            out.push(format!("{} ×{}: (other messages)", c.cause, c.other));
        }
    }
    out
}

/// ` (N of them backlog left at the end, never sent)` after the cancelled count,
/// or nothing.
pub fn backlog_left(c: &Counts) -> String {
    match c.backlog_left {
        0 => String::new(),
        n => format!(" ({n} of them backlog left at the end, never sent)"),
    }
}

/// The one-line description of a run's window.
pub fn window_line(r: &RunReport) -> String {
    match &r.window {
        Some(w) => format!(
            "{:?} window {:.3}–{:.3} s after the run's start ({:.3} s)",
            w.kind,
            w.from.as_secs_f64(),
            w.to.as_secs_f64(),
            w.duration.as_secs_f64()
        )
        .to_lowercase(),
        None => "no window (the run has no spans)".to_string(),
    }
}

/// "metric: n reason, …" lines for metrics some ok spans lacked.
pub fn missing_lines(r: &RunReport) -> Vec<String> {
    r.missing
        .iter()
        .map(|(metric, reasons)| {
            let why: Vec<String> = reasons.iter().map(|(k, v)| format!("{v} {k}")).collect();
            format!("{metric}: {}", why.join(", "))
        })
        .collect()
}

/// The length-bucket label, e.g. `17–64` or `4097+`.
pub fn length_label(min: u64, max: Option<u64>) -> String {
    match max {
        Some(m) => format!("{min}–{m}"),
        None => format!("{min}+"),
    }
}

/// A money figure: four decimals, or three significant digits below 0.01 (a
/// completion's cost printed as `0.0000`).
fn money(v: f64) -> String {
    if v != 0.0 && v.abs() < 0.01 {
        let digits = (2 - v.abs().log10().floor() as i32).clamp(0, 12) as usize;
        format!("{v:.digits$}")
    } else {
        format!("{v:.4}")
    }
}

#[cfg(test)]
mod money_tests {
    #[test]
    fn cost_per_completion_printed_as_zero() {
        assert_eq!(super::money(0.0000312), "0.0000312");
        assert_eq!(super::money(0.00451), "0.00451");
        assert_eq!(super::money(1.5), "1.5000");
        assert_eq!(super::money(0.0), "0.0000");
    }
}
