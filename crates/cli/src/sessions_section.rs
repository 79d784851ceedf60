//! The multi-turn section of `tpscope report`'s text: whole span records read
//! again (the analysis's fast facts do not carry sessions), only when a log has
//! spans with a `turn`.

use std::path::PathBuf;

use tpscope_log::{ReadOptions, RecordReader};
use tpscope_model::Record;

/// The section's text, or `None` when no span carries a turn (or the input was
/// standard input, which cannot be read twice).
pub fn text(files: &[PathBuf], read: ReadOptions) -> anyhow::Result<Option<String>> {
    if files.iter().any(|f| f.as_os_str() == "-") {
        return Ok(None);
    }
    let mut spans = Vec::new();
    for rec in RecordReader::open(files, read) {
        if let Record::Span(s) = rec?.record
            && s.turn.is_some()
        {
            spans.push(s);
        }
    }
    Ok(tpscope_analysis::sessions::session_report(&spans)
        .map(|r| tpscope_render::sessions::text(&r)))
}
