//! The count check section (how far the run tokenizer's counts agree with the
//! server's `usage`, as [`tpscope_analysis::count_check`] computed them) as one
//! sentence, a [`Section`] that text, markdown and HTML lay out alike. Its warning, when there
//! is one, is among the run's warnings, so it is not repeated here.

use tpscope_analysis::RunReport;
use tpscope_analysis::count_check::CountCheck;

use crate::fmt::or_dash;
use crate::section::{Block, Section};

/// The section's heading.
pub const COUNT_CHECK_HEADING: &str = "count check";

/// The check as one sentence (lower case, no final stop).
pub fn sentence(c: &CountCheck) -> String {
    let (span, differ) = match c.spans_differing {
        1 => ("span", "differs"),
        _ => ("spans", "differ"),
    };
    format!(
        "on {} span{}, the tokenizer counted {} output tokens where usage said {} ({}; {} {span} {differ})",
        c.spans,
        if c.spans == 1 { "" } else { "s" },
        c.tokenizer_tokens,
        c.usage_tokens,
        or_dash(c.difference.map(|d| format!("{:+.2} %", d * 100.0))),
        c.spans_differing,
    )
}

/// The section; `None` for a run without the check.
pub fn section(r: &RunReport) -> Option<Section<'_>> {
    let c = r.count_check.as_ref()?;
    Some(Section::new("count_check", COUNT_CHECK_HEADING).with(Block::Sentence(sentence(c))))
}
