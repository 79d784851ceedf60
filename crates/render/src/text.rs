//! The terminal summary of a report.

use std::fmt::Write;

use tpscope_analysis::{Report, RunReport};
use tpscope_model::TargetApi;

use crate::fmt::{SUMMARY_HEADS, summary_cells, text_table as table};
use crate::rows::*;
use crate::section::run_sections;

/// Renders the report as a terminal summary (plain text, no colour codes).
pub fn render(report: &Report) -> Vec<u8> {
    let mut o = String::new();
    for (i, r) in report.runs.iter().enumerate() {
        if i > 0 {
            o.push('\n');
        }
        head(&mut o, r);
        o.push('\n');
        let heads = headline_rows(r);
        let w = heads.iter().map(|h| h.0.len()).max().unwrap_or(0);
        let vw = heads.iter().map(|h| h.1.chars().count()).max().unwrap_or(0);
        for (label, value, why) in heads {
            let _ = writeln!(o, "  {label:<w$}  {value:>vw$}   {why}", vw = vw);
        }
        if let Some(line) = inferred_line(r) {
            let _ = writeln!(o, "  {line}");
        }
        o.push('\n');
        let (main, conv) = distribution_rows(r);
        let rows = |rs: &[DistRow]| -> Vec<Vec<String>> {
            rs.iter()
                .map(|d| {
                    let mut v = vec![format!("{} ({})", d.name, d.unit)];
                    v.extend(d.cells.iter().cloned());
                    v
                })
                .collect()
        };
        let mut heads = vec!["ok spans"];
        heads.extend(SUMMARY_HEADS);
        table(&mut o, &heads, &rows(&main));
        let _ = writeln!(o, "\n  conventional forms (as other tools print them):");
        let mut heads = vec!["ok spans"];
        heads.extend(SUMMARY_HEADS);
        table(&mut o, &heads, &rows(&conv));
        let _ = writeln!(o, "\n  stream_tps (tok/s) by output length:");
        let len_rows: Vec<Vec<String>> = r
            .stream_tps_by_output_length
            .iter()
            .map(|b| {
                let mut v = vec![format!(
                    "{} tokens",
                    length_label(b.min_tokens, b.max_tokens)
                )];
                v.extend(summary_cells(&b.stream_tps, 1.0, 1));
                v
            })
            .collect();
        let mut heads = vec!["output length"];
        heads.extend(SUMMARY_HEADS);
        table(&mut o, &heads, &len_rows);
        if let Some(note) = closed_loop_note(r) {
            let _ = writeln!(o, "\n  {note}");
        }
        let missing = missing_lines(r);
        if !missing.is_empty() {
            let _ = writeln!(o, "\n  ok spans lacking a metric:");
            for m in missing {
                let _ = writeln!(o, "    {m}");
            }
        }
        for s in run_sections(r) {
            o.push_str(&s.text());
        }
        for w in &r.warnings {
            let _ = writeln!(o, "\n  warning: {w}");
        }
    }
    if !report.sweeps.is_empty() {
        o.push('\n');
        o.push_str(&crate::levels::text(&report.sweeps));
    }
    if !report.skipped.is_empty() {
        let total: u64 = report.skipped.values().sum();
        let _ = writeln!(o, "\nskipped {total} invalid records:");
        for (k, v) in &report.skipped {
            let _ = writeln!(o, "  {v} {k}");
        }
    }
    for w in &report.warnings {
        let _ = writeln!(o, "\nwarning: {w}");
    }
    o.into_bytes()
}

/// A run's first lines: its id, target, labels, window, span counts and
/// failures, retries and tokens.
fn head(o: &mut String, r: &RunReport) {
    let _ = writeln!(
        o,
        "run {}{}",
        r.run_id,
        r.tool
            .as_ref()
            .map(|t| format!(" ({t})"))
            .unwrap_or_default()
    );
    let t = &r.target;
    let _ = writeln!(
        o,
        "  target {} · model {} · api {} · cap {} · tokens from {}",
        target_name(r),
        t.model.as_deref().unwrap_or("?"),
        t.api.as_ref().map_or("?", TargetApi::as_str),
        r.cap.map_or("none".to_string(), |c| c.to_string()),
        if r.token_sources.is_empty() {
            "?".to_string()
        } else {
            r.token_sources
                .iter()
                .map(|s| format!("{} ({})", s.source, s.spans))
                .collect::<Vec<_>>()
                .join(", ")
        }
    );
    if !r.labels.is_empty() {
        let labels: Vec<String> = r.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let _ = writeln!(o, "  labels {}", labels.join(" "));
    }
    if let Some(c) = &r.command {
        let _ = writeln!(o, "  command {c}");
    }
    let _ = writeln!(
        o,
        "  {}{}",
        window_line(r),
        if r.complete {
            ""
        } else {
            " · INCOMPLETE (no end record)"
        }
    );
    let c = &r.counts;
    let _ = writeln!(
        o,
        "  spans {}: ok {}, error {}, cancelled {}{} · failures by cause: {}",
        c.spans,
        c.status.ok,
        c.status.error,
        c.status.cancelled,
        backlog_left(c),
        by_cause(&c.errors_by_cause)
    );
    for line in failure_message_lines(r) {
        let _ = writeln!(o, "    {line}");
    }
    let _ = writeln!(
        o,
        "  retries {} ({}) · wasted tokens {} · output tokens {} · input tokens {}",
        c.retries,
        by_cause(&c.retries_by_cause),
        c.wasted_tokens,
        c.output_tokens,
        c.input_tokens
    );
}
