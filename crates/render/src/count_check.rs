//! The count check section (how far the run tokenizer's counts agree with the
//! server's `usage`, as [`tpscope_analysis::count_check`] computed them) as one
//! sentence that text, markdown and HTML lay out alike. Its warning, when there
//! is one, is among the run's warnings, so it is not repeated here.

use tpscope_analysis::RunReport;
use tpscope_analysis::count_check::CountCheck;

use crate::fmt::or_dash;

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

/// The check as a sentence of its own (capitalised, with a final stop).
pub fn paragraph(c: &CountCheck) -> String {
    format!("{}.", crate::fmt::capitalised(&sentence(c)))
}

/// The section as text; empty for a run without the check.
pub fn text(r: &RunReport) -> String {
    r.count_check.as_ref().map_or_else(String::new, |c| {
        format!("\n  {COUNT_CHECK_HEADING}: {}\n", sentence(c))
    })
}

/// The section as markdown; empty for a run without the check.
pub fn markdown(r: &RunReport) -> String {
    r.count_check.as_ref().map_or_else(String::new, |c| {
        format!("**Count check.** {}\n\n", paragraph(c))
    })
}
