//! The capacity section: the ledger of slot-seconds by part, as a
//! table that text, markdown and HTML lay out alike, and in HTML a stacked
//! area of the parts per bucket. Each format calls it with one line.

use tpscope_analysis::RunReport;
use tpscope_analysis::compare::Comparison;
use tpscope_analysis::compare::ledger::LedgerChange;
use tpscope_analysis::ledger::{Capacity, Part};

use crate::fmt::{capitalised, md_table, text_table};
use crate::html::charts::{TIME_LABEL, figure};
use crate::html::page::{Cell, table};
use crate::html::svg::{Axis, Chart, Geometry, esc};

/// The section's heading.
pub const HEADING: &str = "capacity: where every slot-second went";

/// The table's heads.
pub const HEADS: [&str; 4] = ["part", "slot-seconds", "share", "what it is"];

/// What each part means, in a few words.
pub fn meaning(p: Part) -> &'static str {
    match p {
        Part::Connect => "admitted, connection not yet made",
        Part::FirstTokenWait => "sent, no token yet (server queue, prefill, network)",
        Part::Generating => "first to last token of an attempt that ended ok",
        Part::Post => "last token to release",
        Part::Failed => "inside attempts that did not end ok",
        Part::Backoff => "between a failed attempt and the next, slot held",
        Part::Handoff => "free while work waited, refilled within the hand-off threshold",
        Part::HeldBack => "free while work waited, longer: work held back",
        Part::NoDemand => "free with nothing waiting",
    }
}

/// One row per part: its slot-seconds and share, or why it is absent.
pub fn rows(c: &Capacity) -> Vec<Vec<String>> {
    c.parts
        .iter()
        .map(|p| {
            let (x, share) = match (p.slot_seconds, &p.missing) {
                (Some(x), _) => (
                    format!("{x:.3}"),
                    p.share
                        .map_or("—".into(), |s| format!("{:.1} %", s * 100.0)),
                ),
                (None, _) => ("—".into(), "—".into()),
            };
            let mut what = match &p.missing {
                Some(why) => format!("not known: {why}"),
                None => meaning(p.part).to_string(),
            };
            if let Some(inf) = &p.inferred {
                what.push_str(&format!(" (inferred: {})", inf.method));
            }
            vec![p.part.name().to_string(), x, share, what]
        })
        .collect()
}

/// The line under the table: the total, the threshold, and any spans above the cap.
pub fn total_line(c: &Capacity) -> String {
    let total = match c.slot_seconds {
        Some(s) => format!("slot-time {s:.3} slot-seconds (∫ cap dt over the window)"),
        None => "slot-time not known (the cap was unknown or unlimited)".to_string(),
    };
    let above = c
        .above_cap_slot_seconds
        .map(|a| {
            format!(
                "; {a:.3} slot-seconds were in flight above the cap (counted in the busy parts: \
                 the log may hold merged runs)"
            )
        })
        .unwrap_or_default();
    format!(
        "{total}; hand-off threshold {:.0} ms{above}",
        c.handoff_threshold.as_secs_f64() * 1e3
    )
}

/// The sentences under the table: each cause of lost capacity, then what a
/// work-conserving dispatch would have given.
pub fn findings(r: &RunReport) -> Vec<String> {
    let mut out: Vec<String> = r
        .capacity
        .iter()
        .flat_map(|c| c.causes.iter().map(|g| capitalised(&g.sentence)))
        .collect();
    if let Some(w) = &r.what_if {
        let wc = &w.work_conserving;
        let run_window = r.window.map(|w| w.duration.as_secs_f64());
        let mut s = format!(
            "What fixing it gains: dispatched work-conserving at the cap, the same requests \
             would have needed {:.3} s{}",
            wc.window_s,
            run_window.map_or(String::new(), |d| format!(" (the run took {d:.3} s)"))
        );
        if let Some(tps) = wc.system_tps {
            s.push_str(&format!(", system TPS {tps:.1} tok/s"));
            if let Some(g) = wc.gain {
                s.push_str(&format!(" ({g:.2}× the run's)"));
            }
        }
        if let Some(c) = wc.cost_per_million_output_tokens {
            s.push_str(&format!(", {c:.4} per million output tokens"));
        }
        s.push_str(&format!(". It assumes {}", w.assumptions));
        out.push(s);
    }
    out
}

/// The section as text; empty for a run without a ledger.
pub fn text(r: &RunReport) -> String {
    let Some(c) = &r.capacity else {
        return String::new();
    };
    let mut out = format!("\n  {HEADING}\n");
    // The figures right-aligned, then what each part is, left-aligned.
    let rows = rows(c);
    let figures: Vec<Vec<String>> = rows.iter().map(|r| r[..3].to_vec()).collect();
    let mut table = String::new();
    text_table(&mut table, &HEADS[..3], &figures);
    let width = table.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    let notes = std::iter::once(HEADS[3]).chain(rows.iter().map(|r| r[3].as_str()));
    for (line, note) in table.lines().zip(notes) {
        let pad = width - line.chars().count();
        out.push_str(&format!("{line}{}   {note}\n", " ".repeat(pad)));
    }
    out.push_str(&format!("  {}\n", total_line(c)));
    for f in findings(r) {
        out.push_str(&format!("  {f}.\n"));
    }
    out
}

/// The section as markdown; empty for a run without a ledger.
pub fn markdown(r: &RunReport) -> String {
    let Some(c) = &r.capacity else {
        return String::new();
    };
    let mut out = format!("**{}**\n\n", capitalised(HEADING));
    md_table(&mut out, &HEADS, &rows(c));
    out.push_str(&format!("\n{}.\n\n", capitalised(&total_line(c))));
    for f in findings(r) {
        out.push_str(&format!("- {f}.\n"));
    }
    out.push('\n');
    out
}

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
pub fn html_chart(prefix: &str, r: &RunReport) -> String {
    match &r.capacity {
        Some(c) => stacked(&format!("{prefix}-capacity"), r, c),
        None => String::new(),
    }
}

/// The section as HTML: the table; empty without a ledger.
pub fn html(r: &RunReport) -> String {
    let Some(c) = &r.capacity else {
        return String::new();
    };
    let heads: Vec<String> = HEADS.iter().map(|h| h.to_string()).collect();
    let rows: Vec<Vec<Cell>> = rows(c)
        .into_iter()
        .map(|row| {
            let mut cells: Vec<Cell> = row.into_iter().map(Cell::Text).collect();
            if let Some(Cell::Text(w)) = cells.pop() {
                cells.push(Cell::Why(w));
            }
            cells
        })
        .collect();
    let mut s = format!("<h2>{}</h2>\n", esc(&capitalised(HEADING)));
    s.push_str(&table(&heads, &rows));
    s.push_str(&format!(
        "<p class=\"note\">{}.</p>\n",
        esc(&capitalised(&total_line(c)))
    ));
    let found = findings(r);
    if !found.is_empty() {
        s.push_str("<ul>\n");
        for f in found {
            s.push_str(&format!("<li>{}.</li>\n", esc(&f)));
        }
        s.push_str("</ul>\n");
    }
    s
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

/// The heads of the two ledgers side by side.
pub const COMPARE_HEADS: [&str; 4] = ["part", "baseline", "candidate", "change"];

fn share_cell(secs: Option<f64>, share: Option<f64>) -> String {
    match (secs, share) {
        (Some(x), Some(s)) => format!("{x:.3} s·slot ({:.1} %)", s * 100.0),
        (Some(x), None) => format!("{x:.3} s·slot"),
        _ => "—".into(),
    }
}

/// One row per part: both runs' slot-seconds and shares, and the change in points.
pub fn compare_rows(l: &LedgerChange) -> Vec<Vec<String>> {
    l.parts
        .iter()
        .map(|p| {
            vec![
                p.part.to_string(),
                share_cell(p.baseline_slot_seconds, p.baseline_share),
                share_cell(p.candidate_slot_seconds, p.candidate_share),
                p.share_change
                    .map_or("—".into(), |c| format!("{:+.1} pts", c * 100.0)),
            ]
        })
        .collect()
}

/// Where the slot-seconds moved, as text; empty unless both runs have a ledger.
pub fn compare_text(c: &Comparison) -> String {
    let Some(l) = &c.capacity else {
        return String::new();
    };
    let mut out = String::from("  capacity: where the slot-seconds moved\n");
    text_table(&mut out, &COMPARE_HEADS, &compare_rows(l));
    out.push_str(&format!("  {}.\n\n", capitalised(&l.verdict)));
    out
}

/// Where the slot-seconds moved, as markdown; empty unless both runs have a ledger.
pub fn compare_markdown(c: &Comparison) -> String {
    let Some(l) = &c.capacity else {
        return String::new();
    };
    let mut out = String::from("\n**Capacity: where the slot-seconds moved**\n\n");
    md_table(&mut out, &COMPARE_HEADS, &compare_rows(l));
    out.push_str(&format!("\n{}.\n", capitalised(&l.verdict)));
    out
}

/// Where the slot-seconds moved, as HTML; empty unless both runs have a ledger.
pub fn compare_html(c: &Comparison) -> String {
    let Some(l) = &c.capacity else {
        return String::new();
    };
    let heads: Vec<String> = COMPARE_HEADS.iter().map(|h| h.to_string()).collect();
    let rows: Vec<Vec<Cell>> = compare_rows(l)
        .into_iter()
        .map(|r| r.into_iter().map(Cell::Text).collect())
        .collect();
    format!(
        "<h2>Capacity: where the slot-seconds moved</h2>\n{}<p>{}.</p>\n",
        table(&heads, &rows),
        esc(&capitalised(&l.verdict))
    )
}
