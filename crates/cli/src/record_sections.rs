//! The report's text section that needs whole span records (the analysis's fast
//! facts do not carry the tokenizer's own counts): the tokenizer-versus-usage
//! count check. The logs are read again, only for text output from files.

use std::path::PathBuf;

use tpscope_analysis::count_check::count_check;
use tpscope_log::{ReadOptions, RecordReader};
use tpscope_model::Record;

/// The section's text (empty when there is nothing to show, or when the input was
/// standard input, which cannot be read twice).
pub fn text(files: &[PathBuf], read: ReadOptions) -> anyhow::Result<String> {
    if files.iter().any(|f| f.as_os_str() == "-") {
        return Ok(String::new());
    }
    let mut spans = Vec::new();
    let mut tokenizer = None;
    for rec in RecordReader::open(files, read) {
        match rec?.record {
            Record::Span(s) if s.tokenizer_output_tokens.is_some() => spans.push(s),
            Record::Run(r) => tokenizer = tokenizer.or(r.tokenizer),
            _ => {}
        }
    }
    let mut out = String::new();
    if let Some(c) = count_check(&spans, tokenizer.as_deref()) {
        out.push_str(&tpscope_render::sessions::count_check_text(&c));
    }
    Ok(out)
}
