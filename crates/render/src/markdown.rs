//! The report as markdown (for pull requests, wikis and notebooks).

use std::fmt::Write;

use tpscope_analysis::Report;

use crate::fmt::{SUMMARY_HEADS, md_table, summary_cells};
use crate::rows::*;
use crate::section::run_sections;

/// Renders the report as markdown.
pub fn render(report: &Report) -> Vec<u8> {
    let mut o = String::new();
    for r in &report.runs {
        let _ = writeln!(o, "## Run `{}`\n", r.run_id);
        let t = &r.target;
        let _ = writeln!(
            o,
            "Target {} · model `{}` · cap {} · {}{}\n",
            target_name(r),
            t.model.as_deref().unwrap_or("?"),
            r.cap.map_or("none".to_string(), |c| c.to_string()),
            window_line(r),
            if r.complete {
                ""
            } else {
                " · **incomplete** (no end record)"
            }
        );
        let c = &r.counts;
        let _ = writeln!(
            o,
            "Spans {} (ok {}, error {}, cancelled {}{}); failures: {}; retries {} ({}); wasted tokens {}.\n",
            c.spans,
            c.status.ok,
            c.status.error,
            c.status.cancelled,
            backlog_left(c),
            by_cause(&c.errors_by_cause),
            c.retries,
            by_cause(&c.retries_by_cause),
            c.wasted_tokens
        );
        let messages = failure_message_lines(r);
        if !messages.is_empty() {
            let _ = writeln!(o, "Most frequent failure messages:\n");
            for line in messages {
                // Messages are the server's text: kept out of markdown's syntax.
                let _ = writeln!(o, "- `{}`", line.replace('`', "'"));
            }
            o.push('\n');
        }
        let rows: Vec<Vec<String>> = headline_rows(r)
            .into_iter()
            .map(|(k, v, why)| vec![format!("`{k}`"), v, why.to_string()])
            .collect();
        md_table(&mut o, &["metric", "value", "meaning"], &rows);
        o.push('\n');
        let (main, conv) = distribution_rows(r);
        let rows = |rs: &[DistRow]| -> Vec<Vec<String>> {
            rs.iter()
                .map(|d| {
                    let mut v = vec![format!("`{}` ({})", d.name, d.unit)];
                    v.extend(d.cells.iter().cloned());
                    v
                })
                .collect()
        };
        let mut heads = vec!["ok spans"];
        heads.extend(SUMMARY_HEADS);
        md_table(&mut o, &heads, &rows(&main));
        let _ = writeln!(o, "\nConventional forms, as other tools print them:\n");
        md_table(&mut o, &heads, &rows(&conv));
        let _ = writeln!(o, "\nStream TPS (tok/s) by output length:\n");
        let len_rows: Vec<Vec<String>> = r
            .stream_tps_by_output_length
            .iter()
            .map(|b| {
                let mut v = vec![length_label(b.min_tokens, b.max_tokens)];
                v.extend(summary_cells(&b.stream_tps, 1.0, 1));
                v
            })
            .collect();
        let mut heads = vec!["output tokens"];
        heads.extend(SUMMARY_HEADS);
        md_table(&mut o, &heads, &len_rows);
        if let Some(note) = closed_loop_note(r) {
            let _ = writeln!(o, "\n{note}");
        }
        let missing = missing_lines(r);
        if !missing.is_empty() {
            let _ = writeln!(o, "\nOk spans lacking a metric: {}.", missing.join("; "));
        }
        o.push('\n');
        for s in run_sections(r) {
            o.push_str(&s.markdown());
        }
        for w in &r.warnings {
            let _ = writeln!(o, "\n> **Warning:** {w}");
        }
        o.push('\n');
    }
    o.push_str(&crate::levels::markdown(&report.sweeps));
    if !report.skipped.is_empty() {
        let list: Vec<String> = report
            .skipped
            .iter()
            .map(|(k, v)| format!("{v} {k}"))
            .collect();
        let _ = writeln!(o, "Skipped invalid records: {}.\n", list.join(", "));
    }
    for w in &report.warnings {
        let _ = writeln!(o, "> **Warning:** {w}\n");
    }
    o.into_bytes()
}
