//! Renderers of a comparison (`tpscope compare`): terminal text, JSON (schema
//! `tpscope.compare/1`) and markdown for a pull-request comment. The cell formatting
//! here is shared with the HTML page, so every format shows the same figures.

use std::fmt::Write as _;

use tpscope_analysis::compare::{
    ChangeKind, Comparison, Criterion, CriterionResult, HeadlineRow, Resample, Side, Verdict,
};
use tpscope_analysis::metrics::MetricUnit;

use crate::fmt::{or_dash, rate};

/// The exit status `tpscope compare` gives for an overall verdict: 0 pass, 1 fail,
/// 3 inconclusive.
pub fn exit_code(overall: Verdict) -> u8 {
    match overall {
        Verdict::Pass | Verdict::Skipped => 0,
        Verdict::Fail => 1,
        Verdict::Inconclusive => 3,
    }
}

/// A criterion's name as a reader says it.
pub fn criterion_label(c: Criterion) -> &'static str {
    c.demand()
}

/// A criterion's value (baseline or candidate) with its unit.
pub fn criterion_value(c: Criterion, v: Option<f64>) -> String {
    headline_value(c.def().unit, v)
}

/// A change (or an interval bound, or a threshold) in the criterion's terms:
/// relative changes in signed percent, fractions in signed percentage points,
/// retries per span as a signed number.
pub fn criterion_change(c: Criterion, kind: ChangeKind, v: f64) -> String {
    // −0.0 prints as +0.00, not −0.00.
    let v = if v == 0.0 { 0.0 } else { v };
    let s = match (kind, c.def().unit) {
        (ChangeKind::Relative, _) => format!("{:+.2} %", v * 100.0),
        (ChangeKind::Absolute, MetricUnit::Fraction) => format!("{:+.2} pp", v * 100.0),
        (ChangeKind::Absolute, _) => format!("{v:+.4}"),
    };
    s.replace('-', "−")
}

/// The interval as `[low, high]`, or a dash.
pub fn criterion_interval(r: &CriterionResult) -> String {
    or_dash(r.interval.map(|iv| {
        format!(
            "[{}, {}]",
            criterion_change(r.criterion, r.change_kind, iv.low),
            criterion_change(r.criterion, r.change_kind, iv.high)
        )
    }))
}

/// What the interval is held against, e.g. `> +0.00 %` or `≥ −1.00 pp`.
pub fn criterion_threshold(r: &CriterionResult) -> String {
    format!(
        "{} {}",
        r.criterion.def().direction.symbol(),
        criterion_change(r.criterion, r.change_kind, r.threshold)
    )
}

/// The cells of one criterion: name, baseline, candidate, change, interval,
/// threshold, verdict.
pub fn criterion_cells(r: &CriterionResult) -> Vec<String> {
    criterion_cells_with(r, r.verdict.to_string())
}

fn criterion_cells_with(r: &CriterionResult, verdict: String) -> Vec<String> {
    vec![
        criterion_label(r.criterion).to_string(),
        criterion_value(r.criterion, r.baseline),
        criterion_value(r.criterion, r.candidate),
        or_dash(
            r.change
                .map(|v| criterion_change(r.criterion, r.change_kind, v)),
        ),
        criterion_interval(r),
        criterion_threshold(r),
        verdict,
    ]
}

/// Column heads of [`criterion_cells`], with the interval's level.
pub fn criterion_heads(level: f64) -> Vec<String> {
    vec![
        "criterion".into(),
        "baseline".into(),
        "candidate".into(),
        "change".into(),
        format!("{}% CI", trim_num(level * 100.0)),
        "threshold".into(),
        "verdict".into(),
    ]
}

fn trim_num(v: f64) -> String {
    let s = format!("{v:.1}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A headline metric's value with its unit.
pub fn headline_value(unit: MetricUnit, v: Option<f64>) -> String {
    or_dash(v.map(|v| match unit {
        MetricUnit::TokensPerSecond => format!("{} tok/s", rate(v)),
        MetricUnit::Seconds if v < 10.0 => format!("{:.1} ms", v * 1000.0),
        MetricUnit::Seconds => format!("{v:.3} s"),
        MetricUnit::Fraction => format!("{:.2} %", v * 100.0),
        MetricUnit::PerSpan => format!("{v:.4} /span"),
        MetricUnit::Money => format!("{v:.4}"),
        MetricUnit::RequestsPerSecond => format!("{v:.3} req/s"),
    }))
}

/// A headline row's cells: metric, baseline, candidate, change (in percentage
/// points for fractions, relative for everything else).
pub fn headline_cells(r: &HeadlineRow) -> Vec<String> {
    let signed = |v: f64, scale: f64, unit: &str| {
        let v = if v == 0.0 { 0.0 } else { v };
        format!("{:+.2} {unit}", v * scale).replace('-', "−")
    };
    let change = match r.unit {
        MetricUnit::Fraction => r.change.map(|v| signed(v, 100.0, "pp")),
        _ => r.relative_change.map(|v| signed(v, 100.0, "%")),
    };
    vec![
        r.metric.clone(),
        headline_value(r.unit, r.baseline),
        headline_value(r.unit, r.candidate),
        or_dash(change),
    ]
}

/// One line about a side: source, run id, model, token source, window, spans.
pub fn side_line(s: &Side) -> String {
    format!(
        "{} · run {} · model {} · tokens from {} · window {} · {} spans",
        s.source,
        s.run_id,
        s.model.as_deref().unwrap_or("?"),
        if s.token_sources.is_empty() {
            "?".to_string()
        } else {
            s.token_sources.join(", ")
        },
        or_dash(s.window.map(|w| format!("{:.3} s", w.as_secs_f64()))),
        s.spans
    )
}

/// How the intervals were made, in one line.
pub fn method_line(c: &Comparison) -> String {
    let b = &c.bootstrap;
    let blocks = |s: &Side| {
        format!(
            "{} buckets of {} in blocks of {}",
            s.buckets,
            or_dash(s.bucket.map(|d| format!("{:.3} s", d.as_secs_f64()))),
            s.block_len
        )
    };
    // The criteria judged over time buckets, as a phrase ("system TPS and gap fraction").
    let names: Vec<String> = c
        .criteria
        .iter()
        .filter(|r| r.criterion.def().resample == Resample::Blocks)
        .map(|r| match r.criterion.metric() {
            "system_tps" => "system TPS".to_string(),
            m => m.replace('_', " "),
        })
        .collect();
    let by_blocks = match names.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => "no criterion".to_string(),
    };
    format!(
        "{}% intervals from {} bootstrap resamples (seed {}); {by_blocks} by block bootstrap over time buckets (baseline {}, candidate {}); rates over spans",
        trim_num(b.level * 100.0),
        b.resamples,
        b.seed,
        blocks(&c.baseline),
        blocks(&c.candidate)
    )
}

/// A verdict word, wrapped in its ANSI colour when `color` is on: pass green, fail
/// red, inconclusive yellow; skipped stays plain. Off, it is the bare word.
fn paint(v: Verdict, word: &str, color: bool) -> String {
    let code = match v {
        Verdict::Pass => "32",
        Verdict::Fail => "31",
        Verdict::Inconclusive => "33",
        Verdict::Skipped => return word.to_string(),
    };
    if color {
        format!("\x1b[{code}m{word}\x1b[0m")
    } else {
        word.to_string()
    }
}

/// The comparison as terminal text. With `color` the verdict words (overall and per
/// criterion) carry ANSI colours and nothing else changes; without, there are no
/// escape codes at all. The caller decides (a terminal, `NO_COLOR`), so this stays pure.
pub fn text(c: &Comparison, color: bool) -> Vec<u8> {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "tpscope compare: {} (exit {})",
        paint(c.overall, &c.overall.as_str().to_uppercase(), color),
        exit_code(c.overall)
    );
    let _ = writeln!(o, "  baseline   {}", side_line(&c.baseline));
    let _ = writeln!(o, "  candidate  {}", side_line(&c.candidate));
    o.push('\n');
    let rows: Vec<Vec<String>> = c
        .criteria
        .iter()
        .map(|r| criterion_cells_with(r, paint(r.verdict, r.verdict.as_str(), color)))
        .collect();
    crate::fmt::text_table(&mut o, &criterion_heads(c.bootstrap.level), &rows);
    o.push('\n');
    for r in &c.criteria {
        let _ = writeln!(
            o,
            "  {}: {} — {}",
            criterion_label(r.criterion),
            paint(r.verdict, r.verdict.as_str(), color),
            r.reason
        );
    }
    o.push('\n');
    let heads: Vec<String> = ["metric", "baseline", "candidate", "change"]
        .map(String::from)
        .to_vec();
    let rows: Vec<Vec<String>> = c.headline.iter().map(headline_cells).collect();
    crate::fmt::text_table(&mut o, &heads, &rows);
    o.push('\n');
    if let Some(s) = crate::ledger::compare_section(c) {
        o.push_str(s.text().trim_start_matches('\n'));
        o.push('\n');
    }
    let _ = writeln!(o, "  {}", method_line(c));
    if !c.warnings.is_empty() {
        o.push('\n');
        o.push_str("warnings:\n");
        for w in &c.warnings {
            let _ = writeln!(o, "  - {w}");
        }
    }
    o.into_bytes()
}

/// The comparison as pretty JSON (schema `tpscope.compare/1`), ending with a newline.
pub fn json(c: &Comparison) -> Result<Vec<u8>, crate::RenderError> {
    crate::pretty_json(c)
}

fn verdict_badge(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "✅ pass",
        Verdict::Fail => "❌ fail",
        Verdict::Inconclusive => "❔ inconclusive",
        Verdict::Skipped => "⏭️ skipped",
    }
}

/// Escapes text for a markdown table cell.
fn md(s: &str) -> String {
    crate::fmt::md_escape(s)
}

/// The comparison as markdown for a pull-request comment: the verdict up front, the
/// criteria table, and the details folded.
pub fn markdown(c: &Comparison) -> Vec<u8> {
    let mut o = String::new();
    let _ = writeln!(o, "### tpscope compare: {}\n", verdict_badge(c.overall));
    let _ = writeln!(o, "- **baseline:** {}", md(&side_line(&c.baseline)));
    let _ = writeln!(o, "- **candidate:** {}\n", md(&side_line(&c.candidate)));
    let rows: Vec<Vec<String>> = c
        .criteria
        .iter()
        .map(|r| {
            let mut cells = criterion_cells(r);
            if let Some(last) = cells.last_mut() {
                *last = verdict_badge(r.verdict).to_string();
            }
            cells
        })
        .collect();
    crate::fmt::md_table(&mut o, &criterion_heads(c.bootstrap.level), &rows);
    o.push('\n');
    for r in &c.criteria {
        let _ = writeln!(
            o,
            "- *{}*: {}",
            md(criterion_label(r.criterion)),
            md(&r.reason)
        );
    }
    if !c.warnings.is_empty() {
        o.push('\n');
        for w in &c.warnings {
            let _ = writeln!(o, "> ⚠️ {}", md(w));
        }
    }
    if let Some(s) = crate::ledger::compare_section(c) {
        o.push('\n');
        o.push_str(&s.markdown());
    }
    o.push_str("\n<details><summary>Headline metrics</summary>\n\n");
    let heads: Vec<String> = ["metric", "baseline", "candidate", "change"]
        .map(String::from)
        .to_vec();
    let rows: Vec<Vec<String>> = c.headline.iter().map(headline_cells).collect();
    crate::fmt::md_table(&mut o, &heads, &rows);
    let _ = writeln!(o, "\n{}\n\n</details>", md(&method_line(c)));
    o.into_bytes()
}
