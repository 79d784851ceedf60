//! Pure renderers: each takes a finished report (or comparison) and returns bytes —
//! terminal text, markdown, JSON, CSV and a self-contained HTML page. They format;
//! they never compute a metric.

pub mod compare;
pub mod csv_out;
pub mod fmt;
pub mod html;
pub mod markdown;
pub mod rows;
pub mod text;

use tpscope_analysis::Report;

/// The report as pretty JSON (schema `tpscope.report/1`), ending with a newline.
pub fn json(report: &Report) -> Vec<u8> {
    let mut v = serde_json::to_vec_pretty(report).unwrap_or_default();
    v.push(b'\n');
    v
}
