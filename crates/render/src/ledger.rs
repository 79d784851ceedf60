//! The capacity section: the ledger of slot-seconds by part, its total, the
//! gap's causes and the what-if, as a [`Section`] that text, markdown and HTML
//! lay out alike; and the two ledgers of a comparison side by side.

use tpscope_analysis::RunReport;
use tpscope_analysis::compare::Comparison;
use tpscope_analysis::compare::ledger::LedgerChange;
use tpscope_analysis::ledger::{Capacity, Part};

use crate::fmt::capitalised;
use crate::section::{Block, Section};

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

/// The section: the ledger's table, its total, then the findings; `None` for
/// a run without a ledger. A page draws the parts over time in its timeline
/// ([`crate::html`]).
pub fn section(r: &RunReport) -> Option<Section<'_>> {
    let c = r.capacity.as_ref()?;
    let mut s = Section::new("capacity", HEADING)
        .prose_table(&HEADS, rows(c), 1, 0)
        .with(Block::Note(total_line(c)));
    let found = findings(r);
    if !found.is_empty() {
        s = s.with(Block::Findings(found));
    }
    Some(s)
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

/// Where the slot-seconds moved: the two ledgers side by side and the verdict;
/// `None` unless both runs have a ledger.
pub fn compare_section(c: &Comparison) -> Option<Section<'_>> {
    let l = c.capacity.as_ref()?;
    Some(
        Section::new("capacity", "capacity: where the slot-seconds moved")
            .table(&COMPARE_HEADS, compare_rows(l))
            // The verdict is read as a sentence of its own, capital and all.
            .with(Block::Sentence(capitalised(&l.verdict))),
    )
}
