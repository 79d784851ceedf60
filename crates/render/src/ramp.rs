//! The ramp section of a ramped run (how throughput followed the load, as
//! [`tpscope_analysis::ramp`] cut it into segments): one table and one sentence,
//! a [`Section`] that text, markdown and HTML lay out alike.

use tpscope_analysis::RunReport;
use tpscope_analysis::ramp::RampFollow;

use crate::fmt::or_dash;
use crate::section::{Block, Section};

/// The section's heading.
pub const RAMP_HEADING: &str = "ramp: how throughput followed the load";

/// The table's heads, the load named by what the ramp raised.
pub fn heads(f: &RampFollow) -> [&'static str; 3] {
    let load = match f.applies_to.as_str() {
        "rate" => "queued (req/s)",
        _ => "cap (mean)",
    };
    ["segment (s)", load, "system TPS (tok/s)"]
}

/// One row per segment, the knee's marked.
pub fn rows(f: &RampFollow) -> Vec<Vec<String>> {
    let knee = match f.knee {
        tpscope_analysis::knee::Knee::At(i) => Some(i),
        _ => None,
    };
    f.points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            vec![
                format!("{:.2}–{:.2}", p.from_s, p.to_s),
                or_dash(p.load.map(|l| format!("{l:.1}"))),
                format!(
                    "{}{}",
                    or_dash(p.system_tps.map(|t| format!("{t:.0}"))),
                    if knee == Some(i) { "  ← knee" } else { "" }
                ),
            ]
        })
        .collect()
}

/// The section; `None` for a run without a ramp.
pub fn section(r: &RunReport) -> Option<Section<'_>> {
    let f = r.ramp.as_ref()?;
    Some(
        Section::new("ramp", RAMP_HEADING)
            .table(&heads(f), rows(f))
            .with(Block::Sentence(f.sentence())),
    )
}
